"""The tests' object store: an S3 API on 127.0.0.1 (tests/support/s3server.py, moto), started
once per run like the PostgreSQL servers, with fixed credentials so that no client looks for
others (the AWS SDKs' chains would ask the instance metadata address).

Spark reaches it through s3a:// (``spark_settings``: the settings a user puts in the pipeline
file's [spark] section for S3), delta-rs through the same endpoint (cdc derives its options
from those settings: cdc.targets.delta.object_store). Each test takes a bucket of its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.processes import stop

ROOT = Path(__file__).resolve().parents[2]
ACCESS_KEY, SECRET_KEY, REGION = "cdc-test", "cdc-test-secret", "us-east-1"
STARTUP_SECONDS = 60


@dataclass(frozen=True)
class ObjectStore:
    """A running S3 API (see the module docstring)."""

    endpoint: str  # http://127.0.0.1:<port>

    def spark_settings(self) -> dict[str, str]:
        """Spark's S3A settings for this store (what a user writes in [spark])."""
        prefix = "spark.hadoop.fs.s3a."
        return {
            prefix + "endpoint": self.endpoint,
            prefix + "endpoint.region": REGION,
            prefix + "path.style.access": "true",
            prefix + "connection.ssl.enabled": "false",
            prefix + "access.key": ACCESS_KEY,
            prefix + "secret.key": SECRET_KEY,
            prefix + "aws.credentials.provider": (
                "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
            ),
        }

    def bucket(self) -> str:
        """A new empty bucket; its s3a:// URL."""
        import boto3

        name = f"cdc-{uuid.uuid4().hex[:12]}"
        client = boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
        )
        client.create_bucket(Bucket=name)
        return f"s3a://{name}"


@contextmanager
def object_store() -> Iterator[ObjectStore]:
    """Starts the S3 API server on a free port; stops it on exit."""
    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.support.s3server", "0"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()  # "port <n>" once it listens
        if not line.startswith("port "):
            raise RuntimeError(f"the S3 API server did not start (exit {server.poll()})")
        yield ObjectStore(f"http://127.0.0.1:{int(line.split()[1])}")
    finally:
        stop(server, 10)
