"""cdc status' line for a table with column mapping: the readers that read it right, those
that read NULL and those that refuse it, and, when none of its names needs mapping (a target
of an earlier version), the way to turn it off; none for a table without mapping. A table with
Delta's typeWidening feature has its own line."""

from __future__ import annotations

from cdc.ops import status
from cdc.targets import readers

VERDICTS = {
    "Spark": readers.SAFE,
    "delta-rs QueryBuilder": readers.SAFE,
    "delta-rs to_pyarrow_table": readers.WRONG,
    "polars read_delta": readers.REFUSES,
}


def _table(target: str, mapped: bool, unneeded: bool = False) -> status.TableState:
    return status.TableState(
        "public." + target, target, "mirror", "/d/" + target, exists=True,
        column_mapping=mapped, mapping_unneeded=unneeded,
        readers=VERDICTS if mapped else dict.fromkeys(VERDICTS, readers.SAFE),
    )  # fmt: skip


def test_a_mapped_table_has_a_line_naming_its_readers() -> None:
    """One line per mapped table; the hint to turn mapping off only where no name needs it."""
    found = status.Status(
        status.QueueState("q", 1, 0.5, None, False, False),
        status.ConsumerState("delta", registered=False),
        tables=[_table("plain", False), _table("spaced", True), _table("old", True, True)],
    )
    lines = [x for x in status.render(found).splitlines() if x.startswith("COLUMN MAPPING")]
    assert lines[0] == (
        "COLUMN MAPPING spaced: read it with Spark, delta-rs QueryBuilder; NULL in place of"
        " its mapped columns' values with delta-rs to_pyarrow_table; refused by polars"
        " read_delta"
    )
    assert lines[1].startswith("COLUMN MAPPING old: read it with Spark")
    assert "delta.columnMapping.mode to 'none'" in lines[1]
    assert len(lines) == 2


def test_a_widened_table_has_a_line_naming_its_readers() -> None:
    """A table with Delta's typeWidening feature: one line saying so, its safe readers, the
    refusing ones, and that Spark writes it; none for the others."""
    refusing = dict.fromkeys(VERDICTS, readers.REFUSES) | {"Spark": readers.SAFE}
    widened = _table("wide", False)
    widened.type_widening, widened.readers = True, refusing
    found = status.Status(
        status.QueueState("q", 1, 0.5, None, False, False),
        status.ConsumerState("delta", registered=False),
        tables=[_table("plain", False), widened],
    )
    lines = [x for x in status.render(found).splitlines() if x.startswith("TYPE WIDENING")]
    assert lines == [
        "TYPE WIDENING wide: a column was widened with Delta's typeWidening feature"
        ' (type_changes = "widen", or the default for a table past its size): read it with'
        " Spark; refused by delta-rs QueryBuilder, delta-rs to_pyarrow_table, polars"
        " read_delta; Spark writes it (docs/drain.md, Type changes)"
    ]
