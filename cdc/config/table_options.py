"""A ``[[tables]]`` entry's apply options (cdc.targets.options), checked with messages naming
the key: which keys a mode takes, their types, and the combinations that cannot hold.

::

    [[tables]]
    source = "public.customers"
    mode = "mirror"                       # or "history", "scd2"
    exclude_columns = ["notes", "tmp_*"]  # kept out of the target (column globs)
    mask = { email = "sha256", phone = "null" }   # salted with $CDC_MASK_SALT
    change_data_feed = true               # Delta's change data feed on the target
    type_changes = "rewrite"              # or "widen" (Delta's typeWidening feature)
    cluster_by = ["country"]              # liquid clustering (or partition_by = [...])
    properties = { "delta.logRetentionDuration" = "interval 60 days" }
    deletes = "soft"                      # mirror: keep deleted rows, __deleted = true
    track_history_columns = ["status"]    # scd2: a change to others updates in place
    track_history_except_columns = ["seen_at"]  # scd2: ... or every column but these
    tombstones = true                     # scd2: a delete keeps a version marking it
"""

from __future__ import annotations

from typing import Any

from cdc.errors import ConfigError
from cdc.targets.options import DELETES, MASKS, TYPE_CHANGES, TableOptions

__all__ = ["OPTION_KEYS", "table_options"]

# the keys every mode takes, and those of one mode
COMMON = {
    "exclude_columns",
    "mask",
    "change_data_feed",
    "type_changes",
    "cluster_by",
    "partition_by",
    "properties",
}
BY_MODE = {
    "mirror": {"deletes"},
    "history": set(),
    "scd2": {"track_history_columns", "track_history_except_columns", "tombstones"},
}
OPTION_KEYS = COMMON.union(*BY_MODE.values())


def table_options(entry: dict[str, Any], where: str, mode: str) -> TableOptions:
    """The entry's options for its mode; an option of another mode is refused by name."""
    for key in sorted(OPTION_KEYS & set(entry)):
        if key not in COMMON and key not in BY_MODE.get(mode, set()):
            takes = [m for m, keys in BY_MODE.items() if key in keys]
            raise ConfigError(
                f"{where}.{key} applies to mode = {' or '.join(repr(m) for m in takes)},"
                f" not {mode!r}: remove it or change the mode"
            )
    options = TableOptions(
        exclude_columns=_names(entry, where, "exclude_columns"),
        mask=_mask(entry, where),
        change_data_feed=_flag(entry, where, "change_data_feed"),
        type_changes=_choice(entry, where, "type_changes", TYPE_CHANGES, None),
        cluster_by=_names(entry, where, "cluster_by"),
        partition_by=_names(entry, where, "partition_by"),
        properties=_properties(entry, where),
        deletes=_choice(entry, where, "deletes", DELETES, "hard") or "hard",
        track_history_columns=(
            _names(entry, where, "track_history_columns")
            if "track_history_columns" in entry
            else None
        ),
        track_history_except_columns=_names(entry, where, "track_history_except_columns"),
        tombstones=_flag(entry, where, "tombstones"),
    )
    if options.cluster_by and options.partition_by:
        raise ConfigError(
            f"{where} has both cluster_by and partition_by: Delta clusters a table or"
            " partitions it, not both; keep one"
        )
    if options.type_changes == "rewrite" and options.change_data_feed:
        raise ConfigError(
            f'{where} has type_changes = "rewrite" and change_data_feed = true: a rewrite'
            " replaces every file, so the change feed would show every row deleted and"
            ' inserted again; use type_changes = "widen" (or leave it out: a table with the'
            " change feed is widened)"
        )
    if options.track_history_columns is not None and options.track_history_except_columns:
        raise ConfigError(
            f"{where} has both track_history_columns and track_history_except_columns:"
            " name the tracked columns, or the untracked ones, not both"
        )
    masked = {glob for glob, _ in options.mask}
    both = sorted(masked & set(options.exclude_columns))
    if both:
        raise ConfigError(
            f"{where}: {', '.join(both)} both excluded and masked: an excluded column is not"
            " in the target at all; keep one"
        )
    return options


def _names(entry: dict[str, Any], where: str, key: str) -> tuple[str, ...]:
    value = entry.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ConfigError(f"{where}.{key} must be a list of column names, not {value!r}")
    names = tuple(v.strip() for v in value)
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigError(f"{where}.{key} names {', '.join(repeated)} more than once")
    return names


def _flag(entry: dict[str, Any], where: str, key: str) -> bool:
    value = entry.get(key, False)
    if not isinstance(value, bool):
        raise ConfigError(f"{where}.{key} must be true or false, not {value!r}")
    return value


def _choice(
    entry: dict[str, Any], where: str, key: str, choices: tuple[str, ...], fallback: str | None
) -> str | None:
    if key not in entry:
        return fallback
    value = entry[key]
    if value not in choices:
        raise ConfigError(f"{where}.{key} must be {' or '.join(map(repr, choices))}, not {value!r}")
    return str(value)


def _mask(entry: dict[str, Any], where: str) -> tuple[tuple[str, str], ...]:
    value = entry.get("mask", {})
    if not isinstance(value, dict):
        raise ConfigError(
            f'{where}.mask must be a table of column = method (such as {{ email = "sha256" }}),'
            f" not {value!r}"
        )
    out = []
    for column, method in value.items():
        if not column.strip():
            raise ConfigError(f"{where}.mask names an empty column")
        if method not in MASKS:
            raise ConfigError(
                f"{where}.mask.{column} must be {' or '.join(map(repr, MASKS))}, not {method!r}"
            )
        out.append((column.strip(), method))
    return tuple(out)


def _properties(entry: dict[str, Any], where: str) -> tuple[tuple[str, str], ...]:
    value = entry.get("properties", {})
    if not isinstance(value, dict):
        raise ConfigError(f"{where}.properties must be a table of name = value, not {value!r}")
    out = []
    for name, text in value.items():
        if isinstance(text, bool):
            text = "true" if text else "false"
        elif isinstance(text, int | float):
            text = str(text)
        if not isinstance(text, str):
            raise ConfigError(f"{where}.properties.{name} must be text, a number or a boolean")
        if name.startswith("cdc."):
            raise ConfigError(
                f"{where}.properties.{name}: the cdc.* properties are the pipeline's own"
            )
        if name.lower() == "delta.enablechangedatafeed":
            raise ConfigError(
                f"{where}.properties.{name}: write change_data_feed = true (or leave it out)"
                " instead: the option is the one place the drain reads it from"
            )
        out.append((name, text))
    return tuple(out)
