"""What ``cdc install`` prints: its result once on stdout, its log lines once each and all in
the one log format (cdc.logs), nothing with -q but warnings."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter

from cdc import logs


def cdc(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cdc.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_install_says_each_thing_once_in_one_format(empty_dsn: str) -> None:
    """A first install and an upgrade over it: the result line once on stdout, no stderr line
    twice, every stderr line in the log format, and no line of the server's "already
    exists, skipping" notices by default."""
    for _ in range(2):
        proc = cdc("install", "--dsn", empty_dsn)
        assert proc.returncode == 0, proc.stderr
        out = proc.stdout.splitlines()
        assert len(out) == 1 and re.fullmatch(r"cdc \S+ installed", out[0]), proc.stdout
        err = proc.stderr.splitlines()
        for line in err:
            assert re.match(logs.LINE_PATTERN, line), line
        assert not [m for m, n in Counter(line.split(" ", 3)[3] for line in err).items() if n > 1]
        assert out[0] not in proc.stderr
        assert "skipping" not in proc.stderr


def test_quiet_install_prints_only_the_result(empty_dsn: str) -> None:
    """-q: the result on stdout, no info lines on stderr."""
    proc = cdc("-q", "install", "--dsn", empty_dsn)
    assert proc.returncode == 0, proc.stderr
    assert " INFO " not in proc.stderr
    assert proc.stdout.startswith("cdc ")
