"""delta-rs' options for object storage, derived from Spark's S3A settings
(cdc.targets.delta.object_store): one set of settings serves both writers."""

from __future__ import annotations

import pytest

from cdc.targets.delta import object_store


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(object_store, "_settings", {})


def test_s3a_settings_become_delta_rs_options():
    object_store.configure(
        {
            "spark.hadoop.fs.s3a.endpoint": "127.0.0.1:9000",
            "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
            "spark.hadoop.fs.s3a.access.key": "k",
            "spark.hadoop.fs.s3a.secret.key": "s",
            "spark.hadoop.fs.s3a.endpoint.region": "eu-west-1",
            "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.driver.memory": "2g",  # not S3A's: ignored
        }
    )
    assert object_store.storage_options("s3a://bucket/t") == {
        "AWS_ACCESS_KEY_ID": "k",
        "AWS_SECRET_ACCESS_KEY": "s",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
        "AWS_ALLOW_HTTP": "true",
        "AWS_REGION": "eu-west-1",
        "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false",
    }


def test_an_endpoint_without_a_scheme_is_https_unless_ssl_is_off():
    object_store.configure({"fs.s3a.endpoint": "s3.example.internal"})
    assert object_store.storage_options("s3://b/t") == {
        "AWS_ENDPOINT_URL": "https://s3.example.internal"
    }


def test_local_paths_and_unconfigured_stores_get_no_options():
    assert object_store.storage_options("s3a://bucket/t") is None  # the SDK's own chain
    object_store.configure({"spark.hadoop.fs.s3a.access.key": "k"})
    assert object_store.storage_options("/data/t") is None
    assert object_store.storage_options("file:///data/t") is None
    assert object_store.storage_options("abfss://c@a.dfs.core.windows.net/t") is None
