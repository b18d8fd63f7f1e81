"""cdc.pg.copyreader's pieces: COPY rows gathered into pieces and parsed by Arrow, with no
server (the rows are what PostgreSQL sends: one CSV row per message)."""

from __future__ import annotations

import pyarrow as pa

from cdc.pg import copyreader

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


def _csv(value: str | None) -> str:
    if value is None:
        return ""
    return '"' + value.replace('"', '""') + '"'


def _parse_all(values: list[str | None], block: int) -> list[tuple[int, str | None]]:
    rows = [memoryview(f"{i},{_csv(v)}\n".encode()) for i, v in enumerate(values)]
    pieces = list(copyreader._pieces(rows, block))
    assert b"".join(p for p, _ in pieces) == b"".join(bytes(r) for r in rows)
    tables = [copyreader._parse(p, largest, SCHEMA) for p, largest in pieces]
    return [(r["id"], r["v"]) for t in tables for r in t.to_pylist()]


def test_pieces_end_at_rows_and_keep_every_value() -> None:
    values = [None, "", 'a,"b"', "x\ny", "line\r\nbreak", "ü€𝄞"] * 50
    assert _parse_all(values, block=64) == list(enumerate(values))


def test_a_row_larger_than_arrows_block_is_parsed_whole() -> None:
    huge = ('",\n' * 1_200_000) + "end"  # 3.6 MB, past Arrow's 1 MB parse block
    values = ["before", huge, "after", None]
    got = _parse_all(values, block=1024)
    assert got == list(enumerate(values))


def test_pieces_are_about_the_block() -> None:
    rows = [memoryview(f"{i},v\n".encode()) for i in range(10_000)]
    pieces = list(copyreader._pieces(rows, 1000))
    assert len(pieces) > 50
    assert all(len(p) < 1000 + 20 for p, _ in pieces)
    assert max(largest for _, largest in pieces) == max(len(r) for r in rows)
