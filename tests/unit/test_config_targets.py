"""Targets compared as they resolve (cdc.targets.table.TargetClaims): two explicit entries whose
targets are different strings but one table are refused when the configuration is read."""

from __future__ import annotations

from typing import Any

import pytest

from cdc import config
from cdc.errors import ConfigError
from cdc.targets.table import Place, TargetClaims


def pipeline(*targets: str, quarantine: str | None = None, **spark: str) -> config.Pipeline:
    """A pipeline of explicit entries public.t1, public.t2, ... into these targets."""
    data: dict[str, Any] = {
        "source": {"dsn": "host=x", "queue": "q", "consumer": "c"},
        "target": {"path": "/data/delta", **({"quarantine": quarantine} if quarantine else {})},
        "tables": [{"source": f"public.t{n}", "target": t} for n, t in enumerate(targets, 1)],
    }
    if spark:
        data["spark"] = {name.replace("_", "."): value for name, value in spark.items()}
    return config.parse(data)


@pytest.mark.parametrize(
    ("first", "second", "how"),
    [
        ("default.orders", "default.Orders", "one catalog table, spark_catalog.default.orders"),
        ("Lake.Orders", "lake.orders", "one catalog table, spark_catalog.lake.orders"),
        ("default.orders", "spark_catalog.default.orders", "one catalog table"),
        ("SPARK_CATALOG.default.orders", "default.orders", "one catalog table"),
        ("default.orders", "_spark_warehouse/orders", "one folder below target.path"),
        ("lake.orders", "_spark_warehouse/lake.db/orders/", "one folder below target.path"),
        ("a//b/", "a/b", "one folder below target.path, a/b"),
        ("./b", "b", "one folder below target.path, b"),
        ("a/./b", "a/b", "one folder below target.path"),
        ("a", "a/b", "nested"),
        ("a/b/c", "a", "nested"),
        ("default.lake", "lake.db.t", "nested"),
        ("x/", "./x/orders", "nested"),
    ],
)
def test_two_targets_of_one_table_are_refused(first: str, second: str, how: str) -> None:
    """Catalog names as Spark resolves them (case ignored, the default catalog), paths by the
    folders they map to (one inside another's included): a ConfigError naming both sources."""
    with pytest.raises(ConfigError) as err:
        pipeline(first, second)
    text = str(err.value)
    assert text.startswith("tables[2]: ") and "public.t1" in text and "public.t2" in text
    assert how in text and repr(first) in text and repr(second) in text


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("orders", "Orders"),  # paths keep their case, as file systems and object stores do
        ("a", "ab"),
        ("a/b", "a_b"),
        ("default.orders", "default.orders_history"),
        ("default.orders", "lake.default.orders"),  # another catalog, another folder
        ("default.orders", "orders"),
    ],
)
def test_different_tables_are_kept(first: str, second: str) -> None:
    """Targets of different tables stay apart, whatever their names share."""
    claims = TargetClaims()
    assert claims.claim(first, "public.t1") is None and claims.claim(second, "public.t2") is None
    assert [t.target for t in pipeline(first, second).tables] == [first, second]


def test_the_default_catalog_of_the_spark_settings() -> None:
    """With spark.sql.defaultCatalog = lake, db.table is lake.db.table (and no longer
    spark_catalog's)."""
    with pytest.raises(ConfigError, match=r"one catalog table, lake\.default\.orders"):
        pipeline("default.orders", "lake.default.orders", spark_sql_defaultCatalog="lake")
    kept = pipeline(
        "default.orders", "spark_catalog.default.orders", spark_sql_defaultCatalog="lake"
    )
    assert len(kept.tables) == 2


@pytest.mark.parametrize(
    ("quarantine", "target", "holds"),
    [
        ("ops.q", "OPS.Q", "target.quarantine"),
        ("ops.q", "Ops.Q_Failing", "the failing marks of the tables"),
        ("_quarantine", "./_quarantine_snapshots/", "the progress of the snapshots"),
        ("bad/q", "bad", "target.quarantine"),
    ],
)
def test_a_target_meeting_the_quarantines_tables_is_refused(
    quarantine: str, target: str, holds: str
) -> None:
    """The quarantine's, the failing marks' and the snapshot progress' tables are compared as
    they resolve too."""
    with pytest.raises(
        ConfigError, match=f"public.t1 would be replicated into .*which holds {holds}"
    ):
        pipeline(target, quarantine=quarantine)


def test_places() -> None:
    """A target's place: its folder's parts; a catalog name's table completed and in lower
    case."""
    assert Place.of("a//b/") == Place(("a", "b"))
    assert Place.of("Lake.Orders") == Place(
        ("_spark_warehouse", "lake.db", "orders"), ("spark_catalog", "lake", "orders")
    )
    assert Place.of("c.d.T", "x") == Place(("_spark_warehouse", "c", "d.db", "t"), ("c", "d", "t"))
