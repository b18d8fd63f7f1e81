"""Change data capture from PostgreSQL into Delta Lake, with PgQ's queue model in pure SQL."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("cdc-delta")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.1.0"
