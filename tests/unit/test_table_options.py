"""A [[tables]] entry's apply options (cdc.config.table_options): parsed into TableOptions,
given by a rule to every table it produces, and refused with a message naming the key."""

from __future__ import annotations

from typing import Any

import pytest

from cdc import config
from cdc.errors import ConfigError
from cdc.pipeline.tables import resolve
from cdc.targets.options import TableOptions


def pipeline(*tables: dict[str, Any]) -> config.Pipeline:
    return config.parse(
        {
            "source": {"dsn": "host=x", "queue": "q", "consumer": "c"},
            "target": {"path": "/tmp/t"},
            "tables": list(tables),
        }
    )


def test_defaults_change_nothing() -> None:
    (table,) = pipeline({"source": "public.a"}).tables
    assert table.options == TableOptions()
    assert not table.options.soft_deletes
    assert table.kind.options == TableOptions()


def test_every_option_parsed() -> None:
    (table,) = pipeline(
        {
            "source": "public.a",
            "deletes": "soft",
            "exclude_columns": ["notes", "tmp_*"],
            "mask": {"email": "sha256", "phone": "null"},
            "change_data_feed": True,
            "type_changes": "widen",
            "cluster_by": ["country"],
            "properties": {
                "delta.appendOnly": False,
                "delta.logRetentionDuration": "interval 9 days",
            },
        }
    ).tables
    options = table.options
    assert options.soft_deletes
    assert options.exclude_columns == ("notes", "tmp_*")
    assert options.mask == (("email", "sha256"), ("phone", "null"))
    assert options.change_data_feed and options.type_changes == "widen"
    assert options.cluster_by == ("country",) and options.partition_by == ()
    assert options.properties == (
        ("delta.appendOnly", "false"),
        ("delta.logRetentionDuration", "interval 9 days"),
    )
    assert table.kind.options is options


def test_a_rule_gives_its_options_to_the_tables_it_produces() -> None:
    pipe = pipeline({"source": "public.*", "mask": {"*email*": "sha256"}, "deletes": "soft"})
    resolved = resolve(pipe, [("public", "users"), ("public", "orders")]).pipeline
    assert {t.name: t.options.mask for t in resolved.tables} == {
        "users": (("*email*", "sha256"),),
        "orders": (("*email*", "sha256"),),
    }
    assert all(t.options.soft_deletes for t in resolved.tables)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            {"mode": "history", "deletes": "soft"},
            r"tables\[1\]\.deletes applies to mode = 'mirror'",
        ),
        ({"deletes": "maybe"}, r"deletes must be 'hard' or 'soft', not 'maybe'"),
        ({"mask": {"email": "md5"}}, r"mask\.email must be 'sha256' or 'null'"),
        ({"mask": ["email"]}, r"mask must be a table of column = method"),
        ({"exclude_columns": "notes"}, r"exclude_columns must be a list of column names"),
        ({"exclude_columns": ["a", "a"]}, r"names a more than once"),
        ({"cluster_by": ["a"], "partition_by": ["b"]}, r"both cluster_by and partition_by"),
        ({"change_data_feed": "yes"}, r"change_data_feed must be true or false"),
        ({"type_changes": "cast"}, r"type_changes must be 'rewrite' or 'widen'"),
        ({"properties": {"cdc.commit": "x"}}, r"the cdc\.\* properties are the pipeline's own"),
        (
            {"properties": {"delta.enableChangeDataFeed": "true"}},
            r"properties\.delta\.enableChangeDataFeed: write change_data_feed = true",
        ),
        ({"exclude_columns": ["email"], "mask": {"email": "null"}}, r"both excluded and masked"),
        ({"tombstones": True}, r"tombstones applies to mode = 'scd2', not 'mirror'"),
        ({"colour": "red"}, r"unknown keys: colour"),
    ],
)
def test_bad_options_are_refused_by_name(entry: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        pipeline({"source": "public.a", **entry})
