"""Table ``s`` and the writers that keep changing it, shared by the snapshot and verify tests.

``DDL`` makes the table, ``ROW`` is the select list of row ``g`` (``insert into s select
{ROW} from generate_series(1, n) g``); ``Writers`` changes rows with keys in 1..``ROWS`` and
inserts new keys above ``ROWS * 10``, so its keys never collide with the initial rows'.
"""

from __future__ import annotations

import random
import threading
import time

import psycopg

__all__ = ["DDL", "ROW", "ROWS", "Writers"]

DDL = (
    "create table s (id bigint primary key, t text, n numeric(10,2), ts timestamptz,"
    " ia int[], b bytea, f float8)"
)
ROW = (
    "g, 'row ' || g || case when g % 7 = 0 then E'\\nline' else '' end, g * 1.5,"
    " timestamptz '2024-03-01 12:00+05:45' + g * interval '1 min', array[g, null, -g],"
    " case when g % 3 = 0 then null else decode(md5(g::text), 'hex') end, g / 3.0"
)
ROWS = 20_000


class Writers:
    """Random inserts, updates (some columns, key changes) and deletes in small transactions,
    in a thread, until stopped."""

    def __init__(self, dsn: str, seed: int) -> None:
        self.dsn, self.rng = dsn, random.Random(seed)
        self.stop = threading.Event()
        self.done = 0
        self.thread = threading.Thread(target=self._run)

    def __enter__(self) -> Writers:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    def _run(self) -> None:
        next_id = ROWS * 10
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            while not self.stop.is_set():
                with conn.transaction():
                    for _ in range(self.rng.randint(1, 20)):
                        k = self.rng.randint(1, ROWS)
                        op = self.rng.random()
                        if op < 0.3:
                            next_id += 1
                            conn.execute(f"insert into s select {ROW} from (select {next_id} g) x")
                        elif op < 0.7:
                            conn.execute("update s set t = t || '+', n = n + 1 where id = %s", (k,))
                        elif op < 0.75:
                            next_id += 1
                            conn.execute("update s set id = %s where id = %s", (next_id, k))
                        else:
                            conn.execute("delete from s where id = %s", (k,))
                self.done += 1
                time.sleep(0.005)
