"""The per-table locks a snapshot's chunk and a drain's batch take (cdc.pg.source.table_locks):
a chunk of one table never holds back a batch of another, and a batch that changes the
chunk's table waits for the chunk's end."""

from __future__ import annotations

import threading

import psycopg

from cdc import config
from cdc.pg import source as source_module


def _source(dsn: str, consumer: str = "c") -> config.Source:
    return config.Source(dsn=dsn, queue="q", consumer=consumer)


def _try_in_thread(
    dsn: str, src: config.Source, tables: list[str]
) -> tuple[threading.Thread, threading.Event]:
    taken = threading.Event()

    def run() -> None:
        with (
            psycopg.connect(dsn, autocommit=True) as other,
            source_module.table_locks(other, src, tables, "test"),
        ):
            taken.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, taken


def test_a_chunk_holds_back_only_batches_of_its_own_table(dsn: str) -> None:
    src = _source(dsn)
    with psycopg.connect(dsn, autocommit=True) as chunk:
        with source_module.table_locks(chunk, src, ["public.big"], "snapshot"):
            other, other_taken = _try_in_thread(dsn, src, ["public.busy", "public.tiny"])
            assert other_taken.wait(10), "a batch of other tables waited for the chunk"
            other.join(10)
            same, same_taken = _try_in_thread(dsn, src, ["public.big", "public.busy"])
            assert not same_taken.wait(1.0), "a batch of the chunk's table did not wait"
        # the chunk's lock released: the waiting batch goes on
        assert same_taken.wait(10)
        same.join(10)
        # and the chunk's connection holds nothing any more, its lock_timeout reset
        held = chunk.execute(
            "select count(*) from pg_locks where locktype = 'advisory' and pid = pg_backend_pid()"
        ).fetchone()[0]
        assert held == 0
        assert chunk.execute("show lock_timeout").fetchone()[0] == "0"


def test_locks_of_another_consumer_are_apart(dsn: str) -> None:
    with (
        psycopg.connect(dsn, autocommit=True) as chunk,
        source_module.table_locks(chunk, _source(dsn, "c1"), ["public.big"], "snapshot"),
    ):
        thread, taken = _try_in_thread(dsn, _source(dsn, "c2"), ["public.big"])
        assert taken.wait(10)
        thread.join(10)
