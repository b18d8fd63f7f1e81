"""The poms `cdc jars` resolves (cdc.jars): Delta's set alone, and S3A's with the AWS SDK's
modules in place of its bundle."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from cdc import jars
from cdc.errors import ConfigError

NS = {"m": "http://maven.apache.org/POM/4.0.0"}


def _dependencies(pom: str) -> list[tuple[str, str]]:
    root = ET.fromstring(pom)
    found = root.findall("m:dependencies/m:dependency", NS)
    return [
        (d.findtext("m:groupId", namespaces=NS), d.findtext("m:artifactId", namespaces=NS))
        for d in found
    ]


def test_deltas_pom_names_only_its_artifacts():
    pom = jars._pom([("io.delta", "delta-spark_4.2_2.13", "4.4.0")])
    assert _dependencies(pom) == [("io.delta", "delta-spark_4.2_2.13")]
    assert "dependencyManagement" not in pom


def test_s3as_pom_leaves_the_sdk_bundle_out_for_its_modules():
    pom = jars._pom([], "3.5.0", "2.35.4")
    deps = _dependencies(pom)
    assert deps[0] == ("org.apache.hadoop", "hadoop-aws")
    assert deps[1:] == [("software.amazon.awssdk", m) for m in jars.AWS_SDK_MODULES]
    root = ET.fromstring(pom)
    excluded = root.find("m:dependencies/m:dependency/m:exclusions/m:exclusion", NS)
    assert excluded.findtext("m:artifactId", namespaces=NS) == "bundle"
    bom = root.find("m:dependencyManagement/m:dependencies/m:dependency", NS)
    assert (
        bom.findtext("m:artifactId", namespaces=NS),
        bom.findtext("m:version", namespaces=NS),
    ) == (
        "bom",
        "2.35.4",
    )


def test_an_unknown_hadoop_needs_its_sdk_version_named(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("CDC_AWS_SDK_VERSION", raising=False)
    with pytest.raises(ConfigError, match="CDC_AWS_SDK_VERSION"):
        jars.aws_sdk_version("9.9.9")
    monkeypatch.setenv("CDC_AWS_SDK_VERSION", "2.40.0")
    assert jars.aws_sdk_version("9.9.9") == "2.40.0"
