"""Pattern entries of the pipeline file (rules): their parsing and messages, glob semantics,
and their resolution against a list of catalog tables (cdc.pipeline.tables.resolve)."""

from __future__ import annotations

import re
import tomllib
from dataclasses import astuple
from pathlib import Path
from typing import Any

import pytest

from cdc import config
from cdc.errors import ConfigError
from cdc.names import TablePattern, TableRule
from cdc.pipeline.tables import resolve


def pipeline(*tables: dict[str, Any], quarantine: str | None = None) -> config.Pipeline:
    target: dict[str, Any] = {"path": "/tmp/t"}
    if quarantine:
        target["quarantine"] = quarantine
    return config.parse(
        {
            "source": {"dsn": "host=x", "queue": "q", "consumer": "c"},
            "target": target,
            "tables": list(tables),
        }
    )


# --- parsing ---------------------------------------------------------------------------------


def test_rule_parsed_with_defaults() -> None:
    """A source with a wildcard is a rule: target "{table}", mode mirror, no exclude."""
    pipe = pipeline({"source": "public.*"})
    assert pipe.tables == ()
    assert pipe.rules == (TableRule("public", "*", (), "{table}", "mirror", "tables[1]"),)


def test_rule_with_every_key() -> None:
    """exclude, target template and mode are kept; explicit entries stay in tables."""
    pipe = pipeline(
        {"source": "public.orders", "target": "o"},
        {
            "source": '"My.Schema".t_?',
            "exclude": ['"My.Schema".t_x', "*.t_9"],
            "target": "{schema}_{table}",
            "mode": "history",
        },
    )
    assert [t.source for t in pipe.tables] == ["public.orders"]
    (rule,) = pipe.rules
    assert (rule.schema_glob, rule.table_glob) == ("My.Schema", "t_?")
    assert rule.exclude == (TablePattern("My.Schema", "t_x"), TablePattern("*", "t_9"))
    assert (rule.target, rule.mode, rule.where) == ("{schema}_{table}", "history", "tables[2]")


def test_exclude_of_a_table_pattern_alone_covers_every_schema() -> None:
    """An exclude entry of one part is a table glob for every schema (as in the SQL rules)."""
    (rule,) = pipeline({"source": "*.*", "exclude": ["tmp_*", '"a.b"']}).rules
    assert rule.exclude == (TablePattern("*", "tmp_*"), TablePattern("*", "a.b"))
    assert not rule.matches("sales", "tmp_1") and not rule.matches("x", "a.b")
    assert rule.matches("sales", "orders")


def test_explicit_entries_unchanged() -> None:
    """An entry without a wildcard is the TableMap it always was."""
    (table,) = pipeline({"source": "public.Orders", "mode": "history"}).tables
    assert (table.source, table.target, table.mode, table.rule) == (
        "public.Orders",
        "Orders",
        "history",
        "",
    )


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            {"source": "public.*", "target": "{name}"},
            r"tables\[1\]\.target .*unknown placeholder \{name\}",
        ),
        (
            {"source": "public.*", "target": "{}_x"},
            r"tables\[1\]\.target .*unknown placeholder \{\}",
        ),
        ({"source": "public.*", "target": "{table!r}"}, r"unknown placeholder \{table!r\}"),
        ({"source": "public.*", "target": "{table:>9}"}, r"unknown placeholder \{table:>9\}"),
        ({"source": "public.*", "target": "{table.upper}"}, r"unknown placeholder"),
        (
            {"source": "public.*", "target": "{schema}"},
            r"tables\[1\]\.target .*must hold \{table\}",
        ),
        ({"source": "public.*", "target": "{table"}, r"tables\[1\]\.target .*is not a template"),
        (
            {"source": "public.*", "target": "/abs/{table}"},
            r"tables\[1\]\.target .*outside target\.path",
        ),
        (
            {"source": "public.*", "target": "../{table}"},
            r"tables\[1\]\.target .*outside target\.path",
        ),
        ({"source": "public.*", "target": ""}, r"tables\[1\]\.target must be a non-empty string"),
        ({"source": "public.*", "exclude": "public.x"}, r"tables\[1\]\.exclude must be a list"),
        (
            {"source": "public.*", "exclude": ["a.b.c"]},
            r"tables\[1\]\.exclude\[1\] must be a schema\.table",
        ),
        ({"source": "public.*", "exclude": ["a.b", 3]}, r"tables\[1\]\.exclude\[2\] must be"),
        ({"source": "public.*", "mode": "scd3"}, r"tables\[1\]\.mode must be"),
        ({"source": "public.*", "filter": "x"}, r"tables\[1\] has unknown keys: filter"),
        ({"source": "*"}, r"tables\[1\]\.source must be schema\.table"),
        ({"source": "a.b.*"}, r"tables\[1\]\.source must be schema\.table"),
        (
            {"source": "public.orders", "exclude": ["public.x"]},
            r"tables\[1\]\.exclude belongs to a pattern source",
        ),
    ],
)
def test_bad_rules(entry: dict[str, Any], message: str) -> None:
    """A bad rule is refused with a message naming the key."""
    with pytest.raises(ConfigError, match=message):
        pipeline(entry)


def test_explicit_checks_kept() -> None:
    """Explicit entries keep their checks: a duplicate target, a path outside, the quarantine."""
    with pytest.raises(ConfigError, match=r"target 't' is the target of both a\.x and a\.y"):
        pipeline({"source": "a.x", "target": "t"}, {"source": "a.y", "target": "t"})
    with pytest.raises(ConfigError, match=r"tables\[1\]\.target must be a path below"):
        pipeline({"source": "a.x", "target": "../t"})
    with pytest.raises(
        ConfigError, match=r"a\.x would be replicated into '_quarantine', which holds"
    ):
        pipeline({"source": "a.x", "target": "_quarantine"})


def test_only_rules_is_a_configuration() -> None:
    """[[tables]] may hold only rules; an empty one is still refused."""
    assert len(pipeline({"source": "*.*"}).rules) == 1
    with pytest.raises(ConfigError, match=r"\[\[tables\]\] is missing"):
        pipeline()


def test_the_example_file_parses() -> None:
    """conf/pipeline.toml (with its commented rule uncommented) is a valid configuration."""
    text = (Path(__file__).parents[2] / "conf" / "pipeline.toml").read_text()
    lines = text.splitlines()
    start = lines.index("# [[tables]]")
    block = []
    for line in lines[start:]:
        if not line.startswith("# "):
            break
        block.append(line[2:])
    data = tomllib.loads(text + "\n" + "\n".join(block) + "\n")
    pipe = config.parse(data)
    assert pipe.rules and pipe.rules[0].exclude


# --- glob semantics --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "schema", "table", "hit"),
    [
        ("public.*", "public", "orders", True),
        ("public.*", "public", "", True),  # * matches none (a catalog name is never empty)
        ("public.*", "Public", "orders", False),  # case-sensitive: no folding
        ("Public.*", "Public", "orders", True),
        ("public.order?", "public", "orders", True),
        ("public.order?", "public", "order", False),  # ? is exactly one character
        ("public.order?", "public", "orderss", False),
        ("public.a_b", "public", "axb", False),  # _ is literal (unlike LIKE)
        ("public.a%", "public", "abc", False),  # % is literal (unlike LIKE)
        ("public.a%", "public", "a%", True),
        ("public.a[bc]", "public", "ab", False),  # [ ] are literal (unlike fnmatch)
        ("public.a[bc]", "public", "a[bc]", True),
        ("public.a+", "public", "aa", False),  # regex characters are literal
        ('public."a.*"', "public", "a.b", True),  # quoted: the dot is the name's
        ('public."a.*"', "public", "ab", False),  # ... and literal
        ('"my schema".*', "my schema", "t", True),
        ('"sch*".t', "schema", "t", True),  # a quoted part still holds wildcards
        ("*.*", "x", "line\nbreak", True),  # any character, newlines too
        ("s.*_log", "s", "app_log", True),
        ("s.*_log", "s", "app_log2", False),  # the whole name must match
        ("s.*_log", "s", "x.app_log", True),
    ],
)
def test_glob_semantics(pattern: str, schema: str, table: str, hit: bool) -> None:
    """* any run, ? one character, everything else literal, case-sensitive, whole names."""
    assert TablePattern.parse(pattern).matches(schema, table) is hit


@pytest.mark.parametrize(
    ("text", "is_rule"),
    [("public.orders", False), ("public.*", True), ("*.orders", True), ('"a?".b', True)],
)
def test_what_is_a_rule(text: str, is_rule: bool) -> None:
    """A source is a rule when either part holds * or ?, quoted or not."""
    assert TablePattern.parse(text).is_pattern is is_rule
    pipe = pipeline({"source": text})
    assert (len(pipe.rules), len(pipe.tables)) == ((1, 0) if is_rule else (0, 1))


# --- resolution ------------------------------------------------------------------------------

CATALOG = [
    ("public", "orders"),
    ("public", "customers"),
    ("public", "audit_log"),
    ("public", "audit_x"),
    ("sales", "orders"),
    ("sales", "tmp_1"),
]


def test_explicit_entry_overrides_the_rule() -> None:
    """A table listed explicitly keeps its own target and mode; the rule adds the others."""
    pipe = pipeline(
        {"source": "public.orders", "target": "the_orders", "mode": "history"},
        {"source": "public.*"},
    )
    res = resolve(pipe, CATALOG)
    got = [(t.source, t.target, t.mode, t.rule) for t in res.pipeline.tables]
    assert got == [
        ("public.orders", "the_orders", "history", ""),
        ("public.audit_log", "audit_log", "mirror", "tables[2]"),
        ("public.audit_x", "audit_x", "mirror", "tables[2]"),
        ("public.customers", "customers", "mirror", "tables[2]"),
    ]
    assert res.warnings == []
    assert [t.source for t in res.matched] == [
        "public.audit_log",
        "public.audit_x",
        "public.customers",
    ]


def test_exclude_and_template() -> None:
    """Excluded tables are left out; the template names the targets."""
    pipe = pipeline(
        {"source": "*.*", "exclude": ["public.audit_*", "*.tmp_?"], "target": "{schema}_{table}"}
    )
    res = resolve(pipe, CATALOG)
    assert [(t.source, t.target) for t in res.pipeline.tables] == [
        ("public.customers", "public_customers"),
        ("public.orders", "public_orders"),
        ("sales.orders", "sales_orders"),
    ]


def test_catalog_template_per_schema() -> None:
    """A template may name a catalog database per schema (db.table)."""
    pipe = pipeline({"source": "sales.*", "target": "lake_{schema}.{table}"})
    res = resolve(pipe, CATALOG)
    assert [t.target for t in res.pipeline.tables] == ["lake_sales.orders", "lake_sales.tmp_1"]
    assert pipe.table("lake_sales.orders").name == "lake_sales.orders"


def test_duplicate_target_names_both_sources() -> None:
    """Two tables rendered to one target: the one created later is refused, with a reason
    naming both and the fix; the other is replicated."""
    pipe = pipeline({"source": "*.orders"})
    res = resolve(pipe, CATALOG)
    assert [(t.source, t.target) for t in res.pipeline.tables] == [("public.orders", "orders")]
    ((source, target, rule, text),) = [astuple(r) for r in res.pipeline.refused]
    assert (source, target, rule) == ("sales.orders", "orders", "tables[1]")
    assert "'orders'" in text and "public.orders" in text and "sales.orders" in text
    assert "tables[1] (*.orders)" in text and "{schema}_{table}" in text


def test_rule_target_meets_explicit_target() -> None:
    """A table whose rendered target is an explicit entry's is refused, naming both."""
    pipe = pipeline({"source": "public.orders", "target": "customers"}, {"source": "public.*"})
    res = resolve(pipe, CATALOG)
    assert "public.customers" not in {t.source for t in res.pipeline.tables}
    (refused,) = res.pipeline.refused
    assert refused.source == "public.customers"
    assert re.search(r"public\.orders \(listed explicitly\).*public\.customers", refused.reason)


@pytest.mark.parametrize("created", [["orders", "Orders"], ["Orders", "orders"]])
def test_targets_that_resolve_to_one_catalog_table(created: list[str]) -> None:
    """public.orders and public."Orders" under default.{table}: one catalog table (Spark
    ignores case), kept by the table created first; the other is refused, naming both."""
    pipe = pipeline({"source": "public.*", "target": "default.{table}"})
    res = resolve(pipe, [("public", name) for name in created])
    assert [t.source for t in res.pipeline.tables] == [f"public.{created[0]}"]
    (refused,) = res.pipeline.refused
    assert (refused.source, refused.target) == (f"public.{created[1]}", f"default.{created[1]}")
    assert "public.orders " in refused.reason and "public.Orders " in refused.reason
    assert "one catalog table, spark_catalog.default.orders" in refused.reason
    with pytest.raises(ConfigError, match=r"public\.\w+ is refused by the configuration: the"):
        res.pipeline.mirrors([refused.source])  # cdc snapshot / verify / resync say why


def test_a_table_created_later_never_takes_a_kept_target() -> None:
    """Resolved again, the tables of the last resolution keep their targets, even over an
    older table that now meets one (renamed into the rule); a folder inside another's too."""
    pipe = pipeline({"source": "public.*", "target": "default.{table}"})
    first = resolve(pipe, [("public", "orders"), ("public", "items")]).pipeline
    # public.old was created first, and renamed to "Orders" since
    again = resolve(pipe, [("public", "Orders"), ("public", "orders")], kept=first.tables)
    assert [t.source for t in again.pipeline.tables] == ["public.orders"]
    assert [r.source for r in again.pipeline.refused] == ["public.Orders"]
    nested = pipeline({"source": "public.*", "target": "{table}/v1"})
    first = resolve(nested, [("public", "a")]).pipeline
    again = resolve(nested, [("public", "a"), ("public", "a/v1")], kept=first.tables)
    assert [t.target for t in again.pipeline.tables] == ["a/v1"]
    assert "nested" in again.pipeline.refused[0].reason


def test_two_rules_one_table_two_targets() -> None:
    """Two rules may feed one table into two targets (a mirror and a history)."""
    pipe = pipeline(
        {"source": "sales.orders*"},
        {"source": "sales.ord*", "target": "{table}_history", "mode": "history"},
    )
    res = resolve(pipe, CATALOG)
    assert [(t.target, t.mode) for t in res.pipeline.tables] == [
        ("orders", "mirror"),
        ("orders_history", "history"),
    ]


def test_reserved_targets() -> None:
    """A table rendered onto the quarantine or the failing marks is refused."""
    pipe = pipeline({"source": "public.*"}, quarantine="audit_log")
    (refused,) = resolve(pipe, CATALOG).pipeline.refused
    assert re.search(r"public\.audit_log .*holds target\.quarantine", refused.reason)
    pipe = pipeline({"source": "public.*", "target": "lake.{table}"}, quarantine="Lake.Audit")
    res = resolve(pipe, [("public", "audit_failing"), ("public", "x")])
    assert [t.source for t in res.pipeline.tables] == ["public.x"]
    (refused,) = res.pipeline.refused
    assert refused.source == "public.audit_failing"
    assert "holds the failing marks" in refused.reason


def test_rule_matching_nothing_warns() -> None:
    """A rule that matches no table is a warning naming it, not an error."""
    pipe = pipeline(
        {"source": "public.orders"},
        {"source": "nosuch.*"},
        {"source": "sales.tmp_*", "exclude": ["sales.tmp_1"]},
    )
    res = resolve(pipe, CATALOG)
    assert [t.source for t in res.pipeline.tables] == ["public.orders"]
    assert res.warnings == [
        "rule tables[2] (nosuch.*) matches no table",
        "rule tables[3] (sales.tmp_*) matches no table (after its exclude patterns)",
    ]


def reasons(pipe: config.Pipeline, catalog: list[tuple[str, str]]) -> list[str]:
    """The reasons of the tables the resolution refused."""
    return [r.reason for r in resolve(pipe, catalog).pipeline.refused]


def test_rendered_name_must_stay_below_the_path() -> None:
    """A table whose name would make its target leave target.path (or change kind) is refused."""
    pipe = pipeline({"source": "public.*"})
    (text,) = reasons(pipe, [("public", ".."), ("public", "ok")])
    assert re.match(r"table public\.\.\. matched by rule tables\[1\]", text)
    assert "would be a catalog name" in reasons(pipe, [("public", "a.b")])[0]
    catalog = pipeline({"source": "public.*", "target": "lake.{table}"})
    assert "would be a path" in reasons(catalog, [("public", "a/b")])[0]


def test_same_event_name_from_a_rule_is_refused() -> None:
    """Two tables the events would name alike ("a.b".c, a."b.c") cannot both come from rules."""
    pipe = pipeline({"source": "*.*", "target": "{schema}/{table}"})
    with pytest.raises(ConfigError, match=r"both reach the drain as 'a\.b\.c'"):
        resolve(pipe, [("a.b", "c"), ("a", "b.c")])


def test_resolving_again_keeps_explicit_entries() -> None:
    """A resolved pipeline resolved against another catalog drops tables that left it."""
    pipe = pipeline({"source": "public.orders", "target": "o"}, {"source": "sales.*"})
    first = resolve(pipe, CATALOG).pipeline
    again = resolve(first, [("public", "orders"), ("sales", "new")]).pipeline
    assert [(t.source, t.target) for t in again.tables] == [
        ("public.orders", "o"),
        ("sales.new", "new"),
    ]
    assert again.mirrors(["sales.new"])[0].target == "new"


def test_mirrors_names_the_patterns() -> None:
    """A table named on the command line that no entry holds: the message lists the patterns."""
    pipe = pipeline({"source": "sales.*"})
    with pytest.raises(ConfigError, match=r"listed: none; pattern sales\.\*"):
        pipe.mirrors(["sales.orders"])
