"""The JVM side's jars: Delta Lake and the PostgreSQL JDBC driver, fetched through Maven.

``cdc jars`` (run by the project's setup) resolves ``io.delta:delta-spark_<spark>_2.13`` with
its runtime dependencies and ``org.postgresql:postgresql`` from Maven Central into one folder.
The Spark session factory (cdc.spark) puts that folder's jars on the classpath, so that a
session starts offline and always with the same jars. Spark's own jars come with pyspark.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from importlib import metadata
from pathlib import Path

from cdc.errors import ConfigError

SCALA_VERSION = "2.13"
JDBC_ARTIFACT = ("org.postgresql", "postgresql", "42.7.14")

POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>cdc-delta.local</groupId>
  <artifactId>cdc-delta-jars</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
{dependencies}
  </dependencies>
</project>
"""


def delta_artifact() -> tuple[str, str, str]:
    """Delta's Maven coordinates for the installed pyspark and delta-spark versions."""
    import pyspark

    spark_minor = ".".join(pyspark.__version__.split(".")[:2])
    return (
        "io.delta",
        f"delta-spark_{spark_minor}_{SCALA_VERSION}",
        metadata.version("delta-spark"),
    )


def artifacts() -> list[tuple[str, str, str]]:
    return [delta_artifact(), JDBC_ARTIFACT]


def coordinates() -> str:
    """The jars as spark-submit's ``--packages`` takes them (Maven coordinates, commas)."""
    return ",".join(f"{g}:{a}:{v}" for g, a, v in artifacts())


def default_dir() -> Path:
    """Where the jars go: $CDC_JARS_DIR, else ~/.cache/cdc-delta/jars/<delta version>."""
    explicit = os.environ.get("CDC_JARS_DIR")
    if explicit:
        return Path(explicit)
    return Path.home() / ".cache" / "cdc-delta" / "jars" / delta_artifact()[2]


def present(folder: Path | None = None) -> list[Path] | None:
    """The folder's jars when it holds Delta and the JDBC driver; None otherwise."""
    folder = folder or default_dir()
    if not folder.is_dir():
        return None
    jars = sorted(folder.glob("*.jar"))
    names = {j.name for j in jars}
    if all(f"{artifact}-{version}.jar" in names for _, artifact, version in artifacts()):
        return jars
    return None


def fetch(folder: Path | None = None) -> list[Path]:
    """Resolves the jars with Maven into the folder (idempotent); returns them."""
    folder = folder or default_dir()
    if (jars := present(folder)) is not None:
        return jars
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ConfigError(
            "Maven (mvn) is not installed: install it (Debian: apt-get install maven) "
            "or put the Delta and PostgreSQL JDBC jars in " + str(folder)
        )
    deps = "\n".join(
        f"    <dependency><groupId>{g}</groupId><artifactId>{a}</artifactId>"
        f"<version>{v}</version></dependency>"
        for g, a, v in artifacts()
    )
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        Path(work, "pom.xml").write_text(POM.format(dependencies=deps))
        result = subprocess.run(
            [
                mvn, "-B", "-q", "dependency:copy-dependencies",
                "-DincludeScope=runtime",
                # Scala's library comes with pyspark, at the version Spark was built with
                "-DexcludeGroupIds=org.scala-lang",
                f"-DoutputDirectory={folder}",
            ],
            cwd=work, capture_output=True, text=True, check=False,
        )  # fmt: skip
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-5:])
        raise ConfigError(f"Maven could not fetch the jars into {folder}:\n{tail}")
    _drop_jars_spark_has(folder)
    jars = present(folder)
    if jars is None:
        raise ConfigError(f"Maven ran but {folder} lacks the Delta or JDBC jar")
    return jars


_VERSIONED = re.compile(r"^(?P<artifact>.+?)-(?P<version>\d[^-]*(?:-[^-]+)*)\.jar$")


def _artifact(jar_name: str) -> str:
    match = _VERSIONED.match(jar_name)
    return match["artifact"] if match else jar_name


def _drop_jars_spark_has(folder: Path) -> None:
    """Removes jars whose artifact pyspark ships already (Hadoop, Jackson, Parquet, logging):
    two versions of one library on the classpath is a classic source of odd failures."""
    import pyspark

    spark_jars = Path(pyspark.__file__).parent / "jars"
    provided = {_artifact(j.name) for j in spark_jars.glob("*.jar")}
    for jar in folder.glob("*.jar"):
        if _artifact(jar.name) in provided:
            jar.unlink()
