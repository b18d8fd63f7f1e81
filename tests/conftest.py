"""Shared fixtures: one PostgreSQL server per run (see tests/support/servers.py), a template
database with cdc installed built once, and a fresh clone of it for each test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest

from cdc.pg import install
from tests.support import servers
from tests.support.databases import TEMPLATE, create_database, drop_database


@pytest.fixture(scope="session")
def admin_dsn() -> str:
    """Superuser DSN on database postgres; the run stops early if the server is down."""
    try:
        dsn = servers.start()
        with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
            conn.execute("select 1")
    except Exception as exc:  # any failure here makes every database test meaningless
        pytest.exit(f"no PostgreSQL server for the tests: {exc}", returncode=3)
    return dsn


@pytest.fixture(scope="session")
def server_version(admin_dsn: str) -> int:
    with psycopg.connect(admin_dsn) as conn:
        return conn.info.server_version


@pytest.fixture(scope="session")
def template_dsn(admin_dsn: str) -> Iterator[str]:
    """A database with cdc installed, cloned by every test that needs one."""
    dsn = create_database(admin_dsn, TEMPLATE)
    install.install(dsn)
    yield dsn
    drop_database(admin_dsn, TEMPLATE)


@pytest.fixture
def empty_dsn(admin_dsn: str) -> Iterator[str]:
    """A fresh database without cdc."""
    name = f"cdc_test_{uuid.uuid4().hex[:12]}"
    yield create_database(admin_dsn, name)
    drop_database(admin_dsn, name)


@pytest.fixture
def dsn(admin_dsn: str, template_dsn: str) -> Iterator[str]:
    """A fresh database with cdc installed (a clone of the template)."""
    name = f"cdc_test_{uuid.uuid4().hex[:12]}"
    yield create_database(admin_dsn, name, template=TEMPLATE)
    drop_database(admin_dsn, name)


@pytest.fixture
def conn(dsn: str) -> Iterator[psycopg.Connection]:
    """An autocommit connection to a fresh database with cdc installed."""
    with psycopg.connect(dsn, autocommit=True) as c:
        yield c


@pytest.fixture
def connect(dsn: str) -> Iterator:
    """Opens more connections to the same database (closed at the end)."""
    opened: list[psycopg.Connection] = []

    def _connect(autocommit: bool = True, **kwargs: object) -> psycopg.Connection:
        c = psycopg.connect(dsn, autocommit=autocommit, **kwargs)
        opened.append(c)
        return c

    yield _connect
    for c in opened:
        c.close()


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """One local Spark session with Delta for the whole run (starting one takes seconds)."""
    from cdc import spark as spark_module

    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    # 50 MB values pass through this one session, beside every other test's tables
    settings = {"spark.sql.warehouse.dir": str(warehouse), "spark.driver.memory": "6g"}
    session = spark_module.session("cdc-tests", settings)
    yield session
    session.stop()
