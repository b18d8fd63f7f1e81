"""Target references, commit identities and the mode registry, without Spark."""

from __future__ import annotations

import subprocess
import sys

from cdc.config import Source
from cdc.targets import registry
from cdc.targets.table import Commit, TableRef, app_id, legacy_app_id

SOURCE = Source(dsn="postgresql://x/y", queue="orders", consumer="delta")


def test_a_target_name_is_a_path_below_the_base_a_catalog_name_keeps_its_name():
    """db.table is a catalog name at a folder under the base's _spark_warehouse; anything
    else, a folder under the base path."""
    assert TableRef.of("/data/delta", "orders") == TableRef("/data/delta/orders")
    assert TableRef.of("/data/delta", "lake.orders") == TableRef(
        "/data/delta/_spark_warehouse/lake.db/orders", "lake.orders"
    )
    assert TableRef.of("/data/delta", "sub/v1.2") == TableRef("/data/delta/sub/v1.2")
    assert TableRef.of("/data/delta", "lake.orders").is_path
    assert not TableRef("lake.orders").is_path


def test_sql_names_escape_backticks():
    """A path is named delta.`path`, a catalog name part by part, backticks doubled."""
    assert TableRef("/d/a`b").sql_name == "delta.`/d/a``b`"
    assert TableRef("lake.o`rders").sql_name == "`lake`.`o``rders`"


def test_the_commit_identity_names_queue_incarnation_consumer_and_target():
    """appId is queue@incarnation/consumer/target, queue/consumer/target without one."""
    assert app_id(SOURCE, 1234, "o") == "orders@1234/delta/o"
    assert app_id(SOURCE, None, "o") == legacy_app_id(SOURCE, "o") == "orders/delta/o"
    assert Commit.of(SOURCE, 7, "o", 42) == Commit("orders@7/delta/o", 42, tick=True)


def test_modes_and_what_they_hold():
    """mirror and scd2 hold rows (snapshots load them, verify compares them), history holds
    events."""
    assert registry.MODES == ("mirror", "history", "scd2")
    assert registry.holds_rows("mirror") and not registry.holds_rows("history")
    assert registry.holds_rows("scd2")


def test_config_and_registry_import_without_pyspark():
    """The configuration checks mode names with no Spark installed."""
    code = "import sys, cdc.config, cdc.targets.registry; assert 'pyspark' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
