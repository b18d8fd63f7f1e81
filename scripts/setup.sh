#!/usr/bin/env bash
# Prepares this checkout on a fresh machine: a virtual environment in .venv with the package
# and its development tools, at the exact versions of constraints.txt; Java 17 (a JDK) and Maven when missing; the Delta, S3A and PostgreSQL JDBC
# jars through Maven (`cdc jars`, into ~/.cache/cdc-delta/jars); and Debian's PostgreSQL 15
# (a second major version for the tests, and the server PgQ's packages build against) when
# apt-get is available.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
# the exact versions the tests run with (constraints.txt), within pyproject.toml's ranges
.venv/bin/python -m pip install --quiet -c constraints.txt -e '.[dev]'

PG15=/usr/lib/postgresql/15/bin
if [ ! -x "$PG15/pg_ctl" ] || ! ls /usr/share/postgresql/15/extension/pgq.control >/dev/null 2>&1; then
    if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
        echo "installing Debian's PostgreSQL 15 and PgQ 3.5 ..."
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-15 postgresql-15-pgq3 >/dev/null
    else
        echo "note: $PG15 not found and apt-get unavailable (or not root): tests run on the embedded server only" >&2
    fi
fi

APT_NEEDED=()
# a JDK: cdc jars builds the Delta log store for s3a:// targets with javac
command -v javac >/dev/null || APT_NEEDED+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null || APT_NEEDED+=(maven)
if [ ${#APT_NEEDED[@]} -gt 0 ]; then
    if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
        echo "installing ${APT_NEEDED[*]} ..."
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${APT_NEEDED[@]}" >/dev/null
    else
        echo "error: install ${APT_NEEDED[*]} (Java 17 and Maven), then run this again" >&2
        exit 1
    fi
fi
.venv/bin/cdc jars
