"""The pure parts of cdc.targets.schema_changes: how a widened column is followed (rewrite
or widen) and why, the target's record of column numbers, and the file's refusal of a
rewrite on a table with the change data feed."""

from __future__ import annotations

import pytest

from cdc.config.table_options import table_options
from cdc.errors import ConfigError
from cdc.targets import schema_changes
from cdc.targets.masking import Masking
from cdc.targets.options import TableOptions
from cdc.targets.schema_changes import REWRITE, REWRITE_MAX_BYTES, WIDEN, Recorded


@pytest.mark.parametrize(
    ("options", "props", "size", "how", "why"),
    [
        (TableOptions(), {}, REWRITE_MAX_BYTES, REWRITE, "at most 1.00 GiB"),
        (TableOptions(), {}, REWRITE_MAX_BYTES + 1, WIDEN, 'type_changes = "rewrite" rewrites'),
        (TableOptions(type_changes="rewrite"), {}, None, REWRITE, 'type_changes = "rewrite"'),
        (TableOptions(type_changes="widen"), {}, None, WIDEN, 'type_changes = "widen"'),
        (
            TableOptions(type_changes="rewrite"),
            {"delta.feature.typeWidening": "supported"},
            None,
            WIDEN,
            "typeWidening feature already",
        ),
        (TableOptions(change_data_feed=True), {}, 10, WIDEN, "change data feed"),
        (TableOptions(), {"delta.enableChangeDataFeed": "true"}, 10, WIDEN, "change data feed"),
    ],
)
def test_how_a_widened_column_is_followed(options, props, size, how, why):
    """The option decides, but a table with typeWidening or the change feed is widened;
    unset: rewrite up to REWRITE_MAX_BYTES, widen beyond, saying why."""
    found, reason = schema_changes.type_change_mode(options, props, size)
    assert found == how
    assert why in reason


def test_the_record_of_column_numbers_reads_back():
    """cdc.columns holds the oid, the numbers and the renames; a target without it has none."""
    recorded = Recorded(16385, {"id": 1, "b": 2}, {"a": "b"})
    assert Recorded.of({schema_changes.COLUMNS: recorded.text()}) == recorded
    assert Recorded.of({}) is None


def test_rewrite_with_a_change_feed_is_refused_by_the_file():
    """type_changes = "rewrite" and change_data_feed = true: refused, saying why and what to
    write instead."""
    entry = {"type_changes": "rewrite", "change_data_feed": True}
    with pytest.raises(ConfigError, match='use type_changes = "widen"'):
        table_options(entry, "tables[0]", "mirror")
    assert table_options({**entry, "type_changes": "widen"}, "t", "mirror").type_changes == "widen"


def test_a_rename_must_keep_the_columns_masking():
    """A column renamed to a name the entry's mask or exclude_columns treats otherwise would
    mix hashed and clear values in one Delta column: told apart by name."""
    masks = Masking("public.t", exclude=("tmp_*",), mask=(("email", "sha256"),))
    treatment = schema_changes._treatment
    assert treatment(masks, "email") == "sha256"
    assert treatment(masks, "mail") == "kept"
    assert treatment(masks, "tmp_x") == "excluded"
    assert treatment(None, "email") == "kept"
