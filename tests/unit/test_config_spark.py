"""The pipeline file's optional [spark] section, and where the session's warehouse goes: parsed
and checked without Spark (the session itself: tests/spark/test_session.py)."""

from __future__ import annotations

import copy
import re
import tomllib
from pathlib import Path

import pytest

from cdc import config
from cdc import spark as spark_module
from cdc.errors import ConfigError

GOOD = {
    "source": {"dsn": "postgresql://x/y", "queue": "q", "consumer": "c"},
    "target": {"path": "/data/delta"},
    "tables": [{"source": "public.orders", "target": "orders"}],
}
EXAMPLE = Path(__file__).resolve().parents[2] / "conf" / "pipeline.toml"


def with_spark(text: str) -> config.Pipeline:
    data = copy.deepcopy(GOOD)
    data.update(tomllib.loads(text))
    return config.parse(data)


def test_no_spark_section_means_no_settings() -> None:
    """A file without [spark] gives the session no settings of its own."""
    assert config.parse(GOOD).spark == ()


def test_spark_settings_become_text_in_file_order() -> None:
    """Strings, numbers and booleans become Spark's text values, in the file's order."""
    pipe = with_spark(
        '[spark]\n"spark.driver.memory" = "4g"\n"spark.sql.shuffle.partitions" = 8\n'
        '"spark.sql.adaptive.enabled" = false\n"spark.memory.fraction" = 0.5\n'
    )
    assert pipe.spark == (
        ("spark.driver.memory", "4g"),
        ("spark.sql.shuffle.partitions", "8"),
        ("spark.sql.adaptive.enabled", "false"),
        ("spark.memory.fraction", "0.5"),
    )


def test_unquoted_dotted_names_are_the_same_settings() -> None:
    """spark.driver.memory written unquoted (a nested TOML table) is the same setting."""
    assert with_spark('[spark]\nspark.driver.memory = "4g"\n').spark == (
        ("spark.driver.memory", "4g"),
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('spark = "4g"', "[spark] is missing or not a table"),
        ('[spark]\n"driver.memory" = "4g"', "[spark] 'driver.memory' is not a Spark setting"),
        ('[spark]\nmemory = "4g"', "[spark] 'memory' is not a Spark setting"),
        ('[spark]\n"spark.jars" = ["a.jar"]', '[spark] "spark.jars" must be a string, a number'),
        ('[spark]\n"spark.driver.memory" = " "', '[spark] "spark.driver.memory" must not be empty'),
        ('[spark]\n"spark.x" = 1979-05-27', '[spark] "spark.x" must be a string, a number'),
    ],
)
def test_bad_spark_settings_name_the_key(text: str, message: str) -> None:
    """A [spark] mistake is a ConfigError naming the setting."""
    with pytest.raises(ConfigError) as caught:
        with_spark(text)
    assert str(caught.value).startswith(message), caught.value


def test_the_commented_example_in_conf_parses() -> None:
    """conf/pipeline.toml's commented [spark] example, uncommented, is a valid section."""
    text = EXAMPLE.read_text()
    block = re.search(r"^# \[spark\]\n((?:# .*\n?)+)", text, re.M)
    assert block, "conf/pipeline.toml has no commented [spark] example"
    example = "[spark]\n" + "".join(line[2:] + "\n" for line in block.group(1).splitlines())
    assert dict(with_spark(example).spark) == {
        "spark.master": "local[4]",
        "spark.driver.memory": "4g",
        "spark.sql.shuffle.partitions": "8",
        "spark.hadoop.fs.s3a.access.key": "${AWS_ACCESS_KEY_ID}",
        "spark.hadoop.fs.s3a.secret.key": "${AWS_SECRET_ACCESS_KEY}",
    }


def test_submitted_settings_win_over_the_file() -> None:
    """Under spark-submit, the file's settings fill in only what the submitter left out."""
    file = {"spark.driver.memory": "4g", "spark.sql.shuffle.partitions": "8"}
    kept = spark_module.submitted_settings(file, ["spark.driver.memory", "spark.master"])
    assert kept == {"spark.sql.shuffle.partitions": "8"}


def test_the_submitters_catalog_and_extensions_win_over_deltas() -> None:
    """Under spark-submit, Delta's extension and catalog are set only when the submitter
    set none (its own catalog stays); outside it, they are always set."""
    catalog = "spark.sql.catalog.spark_catalog"
    given = spark_module.session_settings({"spark.driver.memory": "4g"}, [catalog])
    assert catalog not in given
    assert given["spark.sql.extensions"] == spark_module.DELTA_CONF["spark.sql.extensions"]
    assert given["spark.driver.memory"] == "4g"
    local = spark_module.session_settings(None, None)
    assert local[catalog] == spark_module.DELTA_CONF[catalog]
    # a cluster with a Hive metastore and its own catalog: the file's metastore is not set
    hive = ["spark.sql.catalogImplementation", "spark.hadoop.hive.metastore.uris"]
    submitter = [*hive, catalog, "spark.sql.extensions"]
    file = dict(zip(hive, ["hive", "thrift://127.0.0.1:9083"], strict=True))
    given = spark_module.session_settings(file, submitter)
    assert set(given).isdisjoint(submitter)
    assert given["spark.sql.parquet.outputTimestampType"] == "TIMESTAMP_MICROS"


def test_path_targets_need_no_warehouse() -> None:
    """Every target a path: no warehouse under target.path (the session takes a temporary one)."""
    assert spark_module.pipeline_warehouse(config.parse(GOOD)) is None


@pytest.mark.parametrize("where", ["table", "quarantine"])
def test_catalog_targets_keep_their_files_under_the_target_path(where: str) -> None:
    """A catalog-named target (or quarantine) puts the warehouse under target.path."""
    data = copy.deepcopy(GOOD)
    if where == "table":
        data["tables"][0]["target"] = "lake.orders"
    else:
        data["target"]["quarantine"] = "lake.bad"
    assert spark_module.pipeline_warehouse(config.parse(data)) == "/data/delta/_spark_warehouse"
