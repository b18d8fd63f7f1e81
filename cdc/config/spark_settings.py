"""The ``[spark]`` section: Spark settings by their full names, as (name, text) pairs, with
``${NAME}`` references to the environment left for cdc.spark to resolve when the session
starts (so that no message or log shows a secret)."""

from __future__ import annotations

import re
from typing import Any

from cdc.errors import ConfigError

# ${NAME} in a [spark] value: the environment variable NAME, read when the session starts
ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def spark_settings(section: dict[str, Any], prefix: str = "") -> tuple[tuple[str, str], ...]:
    """The [spark] settings as (name, text) pairs. A name written unquoted with dots (TOML makes
    it a nested table) is joined back: ``spark.driver.memory = "4g"`` is the same setting as
    ``"spark.driver.memory" = "4g"``."""
    pairs: list[tuple[str, str]] = []
    for key, value in section.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            pairs.extend(spark_settings(value, f"{name}."))
            continue
        if name == "master":  # spark-submit's --master: the setting spark.master
            name = "spark.master"
        if not name.startswith("spark."):
            raise ConfigError(
                f"[spark] {name!r} is not a Spark setting: their names start with spark."
                ' (quote the whole name: "spark.driver.memory" = "4g")'
            )
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, int | float | str):
            text = str(value).strip()
        else:
            raise ConfigError(
                f'[spark] "{name}" must be a string, a number or a boolean, not {value!r}'
            )
        if not text:
            raise ConfigError(f'[spark] "{name}" must not be empty')
        if "${" in ENV_REFERENCE.sub("", text):  # the message never shows a value: a secret
            raise ConfigError(
                f'[spark] "{name}" holds a ${{ that is not a reference to an environment'
                " variable: write ${NAME}, NAME of letters, digits and _"
            )
        pairs.append((name, text))
    return tuple(pairs)
