"""Row-level security from the command line, as the role `cdc grant --as drain` sets up: a
table whose policies apply to that role is refused by `cdc snapshot` (exit 1, the reason and
the fix, its snapshot failed in `cdc status`), never copied in part, while the other table of
the pipeline is copied; `cdc verify` reports it not verified instead of comparing a filtered
copy."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from cdc import cli
from cdc import spark as spark_module
from cdc.cli import exitcodes
from cdc.pg import capture
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Queue
from tests.support.roles import LoginRoles

pytestmark = pytest.mark.spark

TABLES = """
create table app.open (id int primary key, v text);
insert into app.open select g, 'v' || g from generate_series(1, 30) g;
create table app.guarded (id int primary key, v text);
insert into app.guarded select g, 'v' || g from generate_series(1, 20) g;
alter table app.guarded enable row level security;
alter table app.guarded force row level security;
create policy a_quarter on app.guarded using (id % 4 = 0);
"""


def test_snapshot_and_verify_refuse_a_table_under_row_level_security(
    dsn: str,
    conn: psycopg.Connection,
    login_roles: LoginRoles,
    spark,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """cdc snapshot app.guarded app.open exits 1 naming app.guarded's row-level security and
    BYPASSRLS, copies none of its 20 rows (never the 5 its policy shows) and all 30 of
    app.open; status shows app.guarded's snapshot failed; verify reports it not verified
    (exit 1) and app.open ok."""
    monkeypatch.setattr(spark_module, "pipeline_session", lambda *a, **k: spark)
    owner = login_roles.connect(None)
    drain = login_roles.connect(None).info.user
    conn.execute(
        sql.SQL("create schema app authorization {}").format(sql.Identifier(owner.info.user))
    )
    owner.execute(TABLES)
    Queue(conn, "q").create()
    for table in ("app.open", "app.guarded"):
        capture.attach(conn, table, CaptureOptions(queue="q"))
    owner.execute("insert into app.guarded values (100, 'after')")  # an event: its target
    assert cli.main(["grant", drain, "--as", "drain", "--queue", "q", "--dsn", dsn]) == 0
    config = tmp_path / "pipeline.toml"
    config.write_text(
        f"[source]\ndsn = {make_conninfo(dsn, user=drain)!r}\n"
        'queue = "q"\nconsumer = "delta"\n'
        f"[target]\npath = {str(tmp_path / 'delta')!r}\n"
        '[[tables]]\nsource = "app.open"\ntarget = "open"\n'
        '[[tables]]\nsource = "app.guarded"\ntarget = "guarded"\n'
    )
    capsys.readouterr()

    argv = ["snapshot", "app.guarded", "app.open", "--config", str(config), "--no-progress"]
    assert cli.main(argv) == exitcodes.COULD_NOT_RUN
    out, err = capsys.readouterr()
    assert '"app"."guarded" has row-level security' in err and "a_quarter" in err
    assert f'alter role "{drain}" bypassrls' in err
    assert "app.open: 30 rows" in out and "guarded" not in out

    assert cli.main(["status", "--config", str(config), "--json"]) == exitcodes.UNHEALTHY
    tables = {t["target"]: t for t in json.loads(capsys.readouterr().out)["tables"]}
    assert tables["guarded"]["snapshot"] == "failed"
    assert "row-level security" in tables["guarded"]["snapshot_reason"]
    assert tables["open"]["snapshot"] != "failed"

    assert cli.main(["verify", "--config", str(config), "--json"]) == exitcodes.COULD_NOT_RUN
    verdicts = {v["target"]: v for v in json.loads(capsys.readouterr().out)}
    assert verdicts["open"]["state"] == "ok" and verdicts["open"]["source_rows"] == 30
    assert verdicts["guarded"]["state"] == "failed" and not verdicts["guarded"]["ok"]
    assert "row-level security" in verdicts["guarded"]["error"]
