"""Targets in object storage, as delta-rs reaches them: its storage options for a table's
URL, derived from the Spark settings that reach the same store through S3A (the pipeline
file's [spark] section, a command's --conf, spark-submit's), so that one set of settings
serves both writers.

The Spark session factory (cdc.spark) hands its settings here as it makes the session
(``configure``); a process that reads targets without a JVM (``cdc status``) hands the
pipeline file's. Without any, delta-rs finds the store as the AWS SDKs do (``AWS_*``
variables, a profile, an instance's role).

S3A's settings (``spark.hadoop.fs.s3a.*`` or ``fs.s3a.*``) map to delta-rs' S3 options:
endpoint (with ``http://`` when ``connection.ssl.enabled`` is false and the endpoint names
no scheme), region (``endpoint.region``, else ``region``), access and secret key, session
token, and path-style access. Per-bucket S3A settings (``fs.s3a.bucket.<name>.*``) are not
mapped: give delta-rs' variables for those.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

__all__ = [
    "OBJECT_STORE_SCHEMES",
    "configure",
    "delta_rs_table",
    "is_object_store",
    "storage_options",
]

OBJECT_STORE_SCHEMES = ("s3a", "s3", "s3n")

_S3A_TO_DELTA_RS = {
    "access.key": "AWS_ACCESS_KEY_ID",
    "secret.key": "AWS_SECRET_ACCESS_KEY",
    "session.token": "AWS_SESSION_TOKEN",
}

_settings: dict[str, str] = {}
_lock = threading.Lock()


def configure(settings: Mapping[str, str]) -> None:
    """Takes the S3A settings among Spark settings (the others are ignored), for every
    table this process opens with delta-rs from now on."""
    found = {key: v for k, v in settings.items() if (key := _s3a_key(k)) is not None}
    with _lock:
        _settings.update(found)


def _s3a_key(name: str) -> str | None:
    for prefix in ("spark.hadoop.fs.s3a.", "fs.s3a."):
        if name.startswith(prefix):
            return name[len(prefix) :]
    return None


def is_object_store(location: str) -> bool:
    """Whether a table's location is an object store URL delta-rs is configured for here."""
    scheme, found, _ = location.partition("://")
    return bool(found) and scheme.lower() in OBJECT_STORE_SCHEMES


def storage_options(location: str) -> dict[str, str] | None:
    """delta-rs' storage options for a table at location (None: a local path, or nothing
    configured)."""
    if not is_object_store(location):
        return None
    with _lock:
        s3a = dict(_settings)
    if not s3a:
        return None
    options = {name: s3a[key] for key, name in _S3A_TO_DELTA_RS.items() if key in s3a}
    endpoint = s3a.get("endpoint")
    if endpoint:
        if "://" not in endpoint:
            secure = s3a.get("connection.ssl.enabled", "true").lower() != "false"
            endpoint = ("https://" if secure else "http://") + endpoint
        options["AWS_ENDPOINT_URL"] = endpoint
        if endpoint.startswith("http://"):
            options["AWS_ALLOW_HTTP"] = "true"
    region = s3a.get("endpoint.region") or s3a.get("region")
    if region:
        options["AWS_REGION"] = region
    if s3a.get("path.style.access", "").lower() == "true":
        options["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "false"
    return options


def delta_rs_table(location: str, version: int | None = None) -> Any | None:
    """delta-rs' table at a path, local or in an object store (read with
    ``storage_options``), at version or its latest; None when no Delta table is there."""
    from deltalake import DeltaTable

    options = storage_options(location)
    if not DeltaTable.is_deltatable(location, storage_options=options):
        return None
    return DeltaTable(location, version=version, storage_options=options)
