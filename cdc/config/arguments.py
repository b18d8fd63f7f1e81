"""The command-line options that name a pipeline file or a database, shared by every command
and job, so that each is spelled and documented once."""

from __future__ import annotations

import argparse
import os

from cdc.config.model import DSN_ENV


def add_config_argument(parser: argparse.ArgumentParser) -> None:
    """The --config option of every command and job that runs a pipeline."""
    parser.add_argument("--config", required=True, help="pipeline configuration (TOML)")


def add_dsn_argument(parser: argparse.ArgumentParser, *, several: bool = False) -> None:
    """The --dsn option of every command that works on a database without a pipeline file:
    one database (default: $CDC_DSN), or with several, one per --dsn (cdc ticker)."""
    if several:
        parser.add_argument(
            "--dsn", action="append", help="a database to serve; repeat for several"
        )
    else:
        parser.add_argument("--dsn", help=f"database connection string (default: ${DSN_ENV})")


def dsns_of(given: str | list[str] | None) -> list[str]:
    """The databases of a --dsn option: as given, else the one of $CDC_DSN, else none."""
    if given:
        return [given] if isinstance(given, str) else list(given)
    env = os.environ.get(DSN_ENV)
    return [env] if env else []
