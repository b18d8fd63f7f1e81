"""Shared fixtures: one PostgreSQL server per run (see tests/support/servers.py), a template
database with cdc installed built once, and a fresh clone of it for each test; the PgQ
cluster (tests/support/pgq.py); one Spark session. The S3 API (tests/support/objectstore.py,
which the Spark session reaches too) and the Hive metastore server (tests/support/metastore.py)
start when first needed and stop at the end of the run.

Folders by kind, checked at collection: every test under tests/spark and tests/e2e carries
the ``spark`` marker (the second pass of scripts/test.sh leaves them out), and a test under
tests/unit that asks for a server or Spark fixture stops the run before anything starts.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from cdc.pg import install
from tests.support import metastore as hive_metastore
from tests.support import objectstore, pgq, servers
from tests.support.databases import TEMPLATE, create_database, drop_database
from tests.support.roles import LoginRoles

TESTS = Path(__file__).parent
SPARK_FOLDERS = ("spark", "e2e")
UNIT_FOLDER = "unit"
# fixtures that start a server or a JVM: none of them in tests/unit
SERVER_FIXTURES = frozenset({"admin_dsn", "pgq_admin_dsn", "spark", "object_store", "metastore"})


def _folder(item: pytest.Item) -> str | None:
    """The kind folder (unit, spark, pg, e2e) a test sits in, None outside tests/."""
    try:
        return item.path.relative_to(TESTS).parts[0]
    except (ValueError, IndexError):
        return None


def _direct_parameters(item: pytest.Item) -> set[str]:
    """Argument names a parametrize mark gives values directly (not through a fixture)."""
    names: set[str] = set()
    for mark in item.iter_markers("parametrize"):
        argnames = mark.args[0] if mark.args else mark.kwargs.get("argnames", ())
        if isinstance(argnames, str):
            argnames = [n.strip() for n in argnames.split(",")]
        indirect = mark.kwargs.get("indirect", False)
        names.update(n for n in argnames if not (indirect is True or (indirect and n in indirect)))
    return names


@pytest.hookimpl(tryfirst=True)  # before -m selects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks the Spark folders' tests ``spark``; refuses unit tests that need a server."""
    wrong = []
    for item in items:
        folder = _folder(item)
        if folder in SPARK_FOLDERS:
            item.add_marker(pytest.mark.spark)
        elif folder == UNIT_FOLDER:
            needs = SERVER_FIXTURES.intersection(getattr(item, "fixturenames", ()))
            needs -= _direct_parameters(item)
            if needs:
                wrong.append(f"{item.nodeid} ({', '.join(sorted(needs))})")
    if wrong:
        raise pytest.UsageError(
            "tests/unit runs without PostgreSQL and Spark; move these tests to tests/pg,"
            " tests/spark or tests/e2e: " + "; ".join(wrong)
        )


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


@pytest.fixture
def login_roles(admin_dsn: str, dsn: str) -> Iterator[LoginRoles]:
    """Login roles made on the test's database (tests.support.roles), dropped afterwards."""
    made = LoginRoles(admin_dsn, dsn)
    yield made
    made.cleanup()


@pytest.fixture(scope="session")
def pgq_admin_dsn() -> Iterator[str]:
    """Superuser DSN of a throwaway PostgreSQL 15 cluster that has PgQ's extension."""
    with pgq.pgq_cluster() as dsn:
        yield dsn


@pytest.fixture(scope="session")
def object_store() -> Iterator[objectstore.ObjectStore]:
    """An S3 API on this machine for the run (tests/support/objectstore.py)."""
    with objectstore.object_store() as store:
        yield store


@pytest.fixture(scope="session")
def metastore(tmp_path_factory: pytest.TempPathFactory) -> Iterator[hive_metastore.Metastore]:
    """A Hive metastore server on this machine for the run (tests/support/metastore.py)."""
    with hive_metastore.metastore(tmp_path_factory.mktemp("metastore")) as server:
        yield server


@pytest.fixture(scope="session")
def spark(
    tmp_path_factory: pytest.TempPathFactory, object_store: objectstore.ObjectStore
) -> Iterator[object]:
    """One local Spark session with Delta for the whole run (starting one takes seconds),
    which reaches the object store through s3a:// too."""
    from cdc import spark as spark_module

    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    # 50 MB values pass through this one session, beside every other test's tables
    settings = {"spark.sql.warehouse.dir": str(warehouse), "spark.driver.memory": "6g"}
    settings |= object_store.spark_settings()
    session = spark_module.session("cdc-tests", settings)
    yield session
    session.stop()
