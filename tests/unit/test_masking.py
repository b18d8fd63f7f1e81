"""The rules of exclude_columns and mask (cdc.targets.masking) and their Arrow rendering
(cdc.engines.arrow.masking), without a server or Spark."""

from __future__ import annotations

import datetime as dt
import hashlib
import json

import pyarrow as pa
import pytest

from cdc.engines.arrow import masking as arrow_masking
from cdc.errors import ConfigError
from cdc.pg.pgtypes import Column
from cdc.rows import value
from cdc.targets import masking
from cdc.targets.options import TableOptions

SALT = "pepper é"
COLUMNS = [
    Column("id", "integer", "int", True),
    Column("email", "text", "string", False),
    Column("phone", "character varying", "string", False),
    Column("born", "date", "date", False),
    Column("notes", "text", "string", False),
    Column("tmp_a", "jsonb", "string", False),
    Column("amount", "numeric", "decimal(12,2)", False),
]


def hexdigest(text: str) -> str:
    """The mask's hash, computed here from its definition."""
    return hashlib.sha256(SALT.encode() + text.encode()).hexdigest()


@pytest.fixture(autouse=True)
def salt(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(masking.SALT_ENV, SALT)


def resolve(listed: bool = True, columns: list[Column] = COLUMNS, **options) -> masking.Masking:
    return masking.resolve(TableOptions(**options), columns, "public.people", listed=listed)


def test_the_target_lacks_excluded_columns_and_holds_a_hashed_one_as_a_string() -> None:
    """exclude_columns leaves columns out; sha256 makes a string column; null keeps the type."""
    m = resolve(
        exclude_columns=("notes", "tmp_*"),
        mask=(("email", "sha256"), ("born", "sha256"), ("amount", "null")),
    )
    assert [(c.name, c.spark_type) for c in m.columns] == [
        ("id", "int"),
        ("email", "string"),
        ("phone", "string"),
        ("born", "string"),
        ("amount", "decimal(12,2)"),
    ]
    assert [(k.name, k.method, k.source_type) for k in m.masked] == [
        ("email", "sha256", "string"),
        ("born", "sha256", "date"),
        ("amount", "null", "decimal(12,2)"),
    ]
    # decoded in the source's types, then masked; the target's columns give themselves
    assert [c.spark_type for c in m.decoded(m.columns)] == ["int", "string", "string", "date",
                                                            "decimal(12,2)"]  # fmt: skip
    assert m.target(m.columns) == list(m.columns)
    assert m.target(COLUMNS) == list(m.columns)
    assert sorted(m.at(m.columns)) == [1, 3, 4]
    assert m.excludes("tmp_dropped_since") and not m.excludes("Notes")


def test_no_options_change_nothing_and_need_no_salt(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(masking.SALT_ENV)
    m = resolve()
    assert not m.active and list(m.columns) == COLUMNS and m.salt is None
    assert resolve(mask=(("email", "null"),)).salt is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"exclude_columns": ("id",)}, r"exclude_columns leaves out id, a key column"),
        ({"exclude_columns": ("i?",)}, r"leaves out id, a key column"),
        ({"mask": (("id", "null"),)}, r'mask gives key column id "null".*mask it with "sha256"'),
        ({"mask": (("tmp_a", "sha256"),)}, r'tmp_a "sha256", but it is jsonb.*"null", or exclude'),
        ({"mask": (("amount", "sha256"),)}, r"amount \"sha256\", but it is numeric"),
        (
            {"exclude_columns": ("e*",), "mask": (("email", "sha256"),)},
            r"email is both excluded \('e\*'\) and masked",
        ),
        (
            {"mask": (("e*", "sha256"), ("*mail", "null"))},
            r"email is masked both with sha256 and null",
        ),
        ({"mask": (("emial", "sha256"),)}, r"mask\.emial names column 'emial', which it does not"),
        ({"exclude_columns": ("note",)}, r"exclude_columns names column 'note'"),
    ],
)
def test_refusals_name_the_column_and_the_fix(options: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        resolve(**options)
    assert str(err.value).startswith("table public.people: ")


def test_a_pattern_rules_glob_may_name_no_column() -> None:
    """A rule's entry applies to every table it matches: a column some lack is no typo."""
    m = resolve(listed=False, exclude_columns=("note",), mask=(("ssn", "sha256"),))
    assert list(m.columns) == COLUMNS and m.masked == ()


def test_a_key_hashed_is_allowed_and_stays_a_key() -> None:
    m = resolve(mask=(("id", "sha256"),))
    assert m.columns[0] == Column("id", "integer", "string", True)
    assert m.hash("42", m.masked[0]) == hexdigest("42")


def test_the_hash_is_the_salted_sha256_of_the_text() -> None:
    m = resolve(mask=(("email", "sha256"), ("phone", "null")))
    email, phone = m.masked
    assert m.hash("a@b.c", email) == hexdigest("a@b.c")
    assert m.value("a@b.c", email) == hexdigest("a@b.c")
    assert m.value(None, email) is None and m.value("+1 555", phone) is None
    # a char(n) is hashed without its trailing blanks (PostgreSQL's cast to text drops them)
    padded = masking.Masked("c", masking.SHA256, "character", "string")
    assert m.hash("ab   ", padded) == m.hash("ab", padded) == hexdigest("ab")
    assert m.hash(" ab", padded) == hexdigest(" ab")


def test_the_salt_is_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    m = resolve(mask=(("email", "sha256"),))
    assert m.salt == SALT.encode()
    assert SALT not in repr(m) and SALT not in m.record()
    record = json.loads(m.record())
    assert record == {"exclude": [], "mask": [["email", "sha256"]], "salt": record["salt"]}
    monkeypatch.setenv(masking.SALT_ENV, "another")
    assert resolve(mask=(("email", "sha256"),)).record() != m.record()


def test_the_record_ignores_the_files_order() -> None:
    one = resolve(exclude_columns=("notes", "tmp_*"), mask=(("email", "sha256"), ("born", "null")))
    two = resolve(exclude_columns=("tmp_*", "notes"), mask=(("born", "null"), ("email", "sha256")))
    assert one.record() == two.record()


def test_a_missing_salt_is_refused_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(masking.SALT_ENV)
    with pytest.raises(ConfigError, match=r"public\.people has a sha256 mask.*CDC_MASK_SALT"):
        resolve(mask=(("email", "sha256"),))
    entries = [("public.a", TableOptions()), ("public.b", TableOptions(mask=(("x", "sha256"),)))]
    with pytest.raises(ConfigError, match=r"^public\.b has a sha256 mask, and \$CDC_MASK_SALT"):
        masking.require_salt(entries)
    masking.require_salt(entries[:1])  # no sha256 mask: no salt needed
    monkeypatch.setenv(masking.SALT_ENV, "")
    with pytest.raises(ConfigError, match="is not set"):
        masking.require_salt(entries)


def test_date_text_is_postgresqls_for_every_year() -> None:
    """Years 1-9999 as Python's ISO text; before 1 with BC, past 9999 in more digits (the
    values PostgreSQL gave: date '0044-03-15 BC' and '10000-01-01' - date '1970-01-01')."""
    epoch = dt.date(1970, 1, 1)
    for day in [*range(-719162, -718000), *range(-1000, 1000), *range(2932000, 2932897)]:
        assert masking.date_text(day) == (epoch + dt.timedelta(days=day)).isoformat()
    assert masking.date_text(-735160) == "0044-03-15 BC"
    assert masking.date_text(2932897) == "10000-01-01"
    assert masking.date_text(-719163) == "0001-12-31 BC"  # the day before 0001-01-01


def test_arrow_masks_rows_from_the_values_text() -> None:
    m = resolve(
        mask=(("id", "sha256"), ("email", "sha256"), ("born", "sha256"), ("amount", "null"))
    )
    cols = list(m.columns)
    rows = pa.table(
        {
            value(0): pa.array([7, -2, None], pa.int32()),
            value(1): pa.array(["a@b.c", "", None]),
            "other": pa.array([1, 2, 3]),
            value(3): pa.array([dt.date(2024, 2, 29), dt.date(1, 1, 1), None], pa.date32()),
            value(6): pa.array([1, 2, 3], pa.decimal128(12, 2)),
        }
    )
    out = arrow_masking.decoded(rows, m, cols)
    assert out.column_names == rows.column_names
    assert out.column(value(0)).to_pylist() == [hexdigest("7"), hexdigest("-2"), None]
    assert out.column(value(1)).to_pylist() == [hexdigest("a@b.c"), hexdigest(""), None]
    assert out.column(value(3)).to_pylist() == [
        hexdigest("2024-02-29"), hexdigest("0001-01-01"), None,
    ]  # fmt: skip
    assert out.column(value(6)).type == pa.decimal128(12, 2)
    assert out.column(value(6)).null_count == 3
    assert out.column("other") == rows.column("other")


def test_arrow_renders_any_year_as_postgresql() -> None:
    """Arrow's cast writes years 1-9999 as PostgreSQL does; the others take date_text."""
    born = resolve(mask=(("born", "sha256"),)).masked[0]
    inside = pa.array([dt.date(1, 1, 1), None, dt.date(9999, 12, 31)], pa.date32())
    assert arrow_masking.texts(inside, born) == ["0001-01-01", None, "9999-12-31"]
    outside = pa.array([-735160, None, 2932897, 0], pa.int32()).cast(pa.date32())
    assert arrow_masking.texts(outside, born) == [
        "0044-03-15 BC", None, "10000-01-01", "1970-01-01",
    ]  # fmt: skip


def test_arrow_gives_a_chunk_the_targets_columns() -> None:
    m = resolve(exclude_columns=("notes", "tmp_*"), mask=(("email", "sha256"), ("phone", "null")))
    rows = pa.table(
        {
            "id": pa.array([1], pa.int32()),
            "email": ["x@y"],
            "phone": ["555"],
            "born": pa.array([None], pa.date32()),
            "notes": ["secret"],
            "tmp_a": ["{}"],
            "amount": pa.array([None], pa.decimal128(12, 2)),
        }
    )
    out = arrow_masking.named(rows, m)
    assert out.column_names == ["id", "email", "phone", "born", "amount"]
    assert out.to_pylist() == [
        {"id": 1, "email": hexdigest("x@y"), "phone": None, "born": None, "amount": None}
    ]
