"""The capture format registry (cdc.formats): names, flags and the Arrow classifier, with no
Spark and no server."""

from __future__ import annotations

import argparse
import pathlib
import re
import subprocess
import sys

import pyarrow as pa
import pytest

from cdc import cli, formats
from cdc.errors import ConfigError
from cdc.formats import json, sql, urlenc
from cdc.formats.spec import FirstLetter, Format, OneOf, UrlEncoded
from cdc.pg import capture, sqlfiles
from tests.support.ev_types import EV_TYPES


def test_importing_the_formats_needs_no_pyspark_nor_pyarrow():
    """cdc.formats, its format modules, names and flags load without pyspark or pyarrow."""
    code = (
        "import sys, cdc.formats as f; from cdc.formats import json, urlenc, sql;"
        "assert f.NAMES and all(isinstance(x.full_row, bool) for x in f.FORMATS);"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'pyarrow')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_formats_never_import_spark():
    """The layers' contract: no module of cdc.formats names pyspark; their Spark rendering
    is cdc.engines.spark.formats."""
    folder = pathlib.Path(formats.__file__).parent
    assert [p.name for p in sorted(folder.glob("*.py")) if "pyspark" in p.read_text()] == []


def test_the_registry_holds_each_format_module_in_order():
    """json, urlenc, sql, each once, each module's FORMAT named after it."""
    assert formats.NAMES == ("json", "urlenc", "sql")
    assert formats.FORMATS == (json.FORMAT, urlenc.FORMAT, sql.FORMAT)
    assert [formats.by_name(n).name for n in formats.NAMES] == list(formats.NAMES)
    with pytest.raises(KeyError, match="one of json, urlenc, sql"):
        formats.by_name("avro")


def test_capability_flags():
    """json and urlenc carry the whole row; sql's UPDATE only the changed columns; json alone
    writes its TRUNCATE in its own shape; only sql decodes in Python."""
    assert {f.name: f.full_row for f in formats.FORMATS} == {
        "json": True,
        "urlenc": True,
        "sql": False,
    }
    assert {f.name: f.truncate_type for f in formats.FORMATS} == {
        "json": None,
        "urlenc": "R",
        "sql": "R",
    }
    assert formats.TRUNCATE_TYPES == ("R",)
    assert [f.name for f in formats.FORMATS if f.python_map is not None] == ["sql"]
    assert {f.name: f.pgq_trigger for f in formats.FORMATS} == {
        "json": "pgq.jsontriga",
        "urlenc": "pgq.logutriga",
        "sql": "pgq.sqltriga",
    }


def test_a_format_has_exactly_one_decoder():
    """A Format with both a JVM and a Python decoder, or neither, is refused."""
    with pytest.raises(ValueError, match="exactly one of jvm_map and python_map"):
        Format("x", "pgq.x", OneOf(("I",)), True, FirstLetter())
    with pytest.raises(ValueError, match="exactly one of jvm_map and python_map"):
        Format("x", "pgq.x", OneOf(("I",)), True, FirstLetter(), None, UrlEncoded(), sql.python_map)


@pytest.mark.parametrize(("ev_type", "expected"), EV_TYPES)
def test_arrow_classifier(ev_type, expected):
    """Each ev_type shape is classified as its format; R and unknown types as none."""
    assert formats.formats_of(pa.array([ev_type], pa.string())) == expected


def test_arrow_classifier_over_a_batch_and_nulls():
    """A batch gives the union of its formats; NULL ev_types and empty batches give none."""
    types = pa.chunked_array([["I:id", None, "R"], ["U", '{"op":"UPDATE"}']])
    assert formats.formats_of(types) == {"json", "urlenc", "sql"}
    assert formats.formats_of(pa.array([None, "R"], pa.string())) == set()
    assert formats.formats_of(pa.array([], pa.string())) == set()


def test_attach_takes_exactly_the_registered_formats():
    """`cdc attach --format` and CaptureOptions accept the registry's names and nothing else."""
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    attach = sub.choices["attach"]
    choices = next(a.choices for a in attach._actions if a.dest == "format")
    assert tuple(choices) == formats.NAMES
    for name in formats.NAMES:
        assert capture.CaptureOptions("q", format=name).format == name
    with pytest.raises(ConfigError, match="format must be json, urlenc or sql"):
        capture.CaptureOptions("q", format="avro")


def test_the_sql_side_captures_exactly_the_registered_formats():
    """cdc._cap_formats() (the triggers' side) lists the registry's formats, in its order."""
    dispatch = sqlfiles.read("capture/functions/cdc.capture_formats.sql")
    names = re.search(r"select array\[(.*)\];", dispatch).group(1)
    assert tuple(re.findall(r"'(\w+)'", names)) == formats.NAMES
