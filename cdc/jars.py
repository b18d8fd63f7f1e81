"""The JVM side's jars: Delta Lake, the PostgreSQL JDBC driver and S3A, fetched through Maven.

``cdc jars`` (run by the project's setup) resolves ``io.delta:delta-spark_<spark>_2.13`` with
its runtime dependencies, ``org.postgresql:postgresql``, and ``org.apache.hadoop:hadoop-aws``
of the Hadoop pyspark ships (for ``s3a://`` targets) into one folder. hadoop-aws declares the
AWS SDK as one 686 MB bundle, which Spark would copy into every session's work folder: the
bundle is left out for the SDK modules S3A uses (``AWS_SDK_MODULES``, 13 MB), of the version
the bundle has (``AWS_SDK_FOR_HADOOP``).

It also builds the project's Delta log store for S3 (cdc/jvm/S3ConditionalLogStore.java:
commits as conditional PUTs, so that two writers of one table never both take a version)
with the JDK's javac, into the same folder.

The Spark session factory (cdc.spark) puts that folder's jars on the classpath, so that a
session starts offline and always with the same jars. Spark's own jars come with pyspark.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import zipfile
from importlib import metadata
from pathlib import Path

from cdc.errors import ConfigError

SCALA_VERSION = "2.13"
JDBC_ARTIFACT = ("org.postgresql", "postgresql", "42.7.14")
# the AWS SDK version of hadoop-aws' bundle, per Hadoop version (its pom); CDC_AWS_SDK_VERSION
# gives it for another Hadoop
AWS_SDK_FOR_HADOOP = {"3.5.0": "2.35.4"}
AWS_SDK_MODULES = ("s3", "s3-transfer-manager", "sts", "apache-client")
LOG_STORE_SOURCE = Path(__file__).parent / "jvm" / "S3ConditionalLogStore.java"
LOG_STORE_CLASS = "cdc.storage.S3ConditionalLogStore"

POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>cdc-delta.local</groupId>
  <artifactId>cdc-delta-jars</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
{management}
  <dependencies>
{dependencies}
  </dependencies>
</project>
"""
S3A_MANAGEMENT = """  <dependencyManagement><dependencies>
    <dependency><groupId>software.amazon.awssdk</groupId><artifactId>bom</artifactId>
      <version>{sdk}</version><type>pom</type><scope>import</scope></dependency>
  </dependencies></dependencyManagement>"""
S3A_DEPENDENCY = """    <dependency>
      <groupId>org.apache.hadoop</groupId><artifactId>hadoop-aws</artifactId>
      <version>{hadoop}</version>
      <exclusions><exclusion><groupId>software.amazon.awssdk</groupId>
        <artifactId>bundle</artifactId></exclusion></exclusions></dependency>"""


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


def _spark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def hadoop_version() -> str:
    """The Hadoop version of the client jars pyspark ships."""
    found = sorted(_spark_jars().glob("hadoop-client-api-*.jar"))
    if not found:
        raise ConfigError(f"pyspark ships no hadoop-client-api jar in {_spark_jars()}")
    return found[-1].name[len("hadoop-client-api-") : -len(".jar")]


def aws_sdk_version(hadoop: str) -> str:
    """The AWS SDK version hadoop-aws of that Hadoop version is built with."""
    explicit = os.environ.get("CDC_AWS_SDK_VERSION")
    if explicit:
        return explicit
    if hadoop not in AWS_SDK_FOR_HADOOP:
        raise ConfigError(
            f"the AWS SDK version of hadoop-aws {hadoop} is not known here: set"
            " CDC_AWS_SDK_VERSION to the software.amazon.awssdk:bundle version its pom names"
        )
    return AWS_SDK_FOR_HADOOP[hadoop]


def log_store_jar(folder: Path) -> Path:
    """The log store's jar in the folder, named after its source's digest (a changed source
    is built again)."""
    digest = hashlib.sha256(LOG_STORE_SOURCE.read_bytes()).hexdigest()[:12]
    return folder / f"cdc-s3-logstore-{digest}.jar"


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
    wanted = [f"{artifact}-{version}.jar" for _, artifact, version in artifacts()]
    wanted += [f"hadoop-aws-{hadoop_version()}.jar", log_store_jar(folder).name]
    if all(name in names for name in wanted):
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
    folder.mkdir(parents=True, exist_ok=True)
    # Delta's set first, as it resolves on its own; then S3A's, of which only the artifacts
    # Delta's set lacks are kept (a library both use stays at Delta's version)
    _copy_dependencies(mvn, _pom(artifacts()), folder)
    with tempfile.TemporaryDirectory() as s3a:
        hadoop = hadoop_version()
        _copy_dependencies(mvn, _pom([], hadoop, aws_sdk_version(hadoop)), Path(s3a))
        held = {_artifact(j.name) for j in folder.glob("*.jar")}
        for jar in Path(s3a).glob("*.jar"):
            if _artifact(jar.name) not in held:
                shutil.move(jar, folder / jar.name)
    _drop_jars_spark_has(folder)
    build_log_store(folder)
    jars = present(folder)
    if jars is None:
        raise ConfigError(f"Maven ran but {folder} lacks the Delta, JDBC or hadoop-aws jar")
    return jars


def _pom(
    dependencies: list[tuple[str, str, str]], hadoop: str | None = None, sdk: str | None = None
) -> str:
    """A throwaway pom of the dependencies; with hadoop, hadoop-aws of that version with the
    AWS SDK's modules of version sdk instead of its bundle."""
    lines = [
        f"    <dependency><groupId>{g}</groupId><artifactId>{a}</artifactId>"
        f"<version>{v}</version></dependency>"
        for g, a, v in dependencies
    ]
    management = ""
    if hadoop is not None:
        management = S3A_MANAGEMENT.format(sdk=sdk)
        lines.append(S3A_DEPENDENCY.format(hadoop=hadoop))
        lines += [
            f"    <dependency><groupId>software.amazon.awssdk</groupId>"
            f"<artifactId>{m}</artifactId></dependency>"
            for m in AWS_SDK_MODULES
        ]
    return POM.format(management=management, dependencies="\n".join(lines))


def _copy_dependencies(mvn: str, pom: str, into: Path) -> None:
    """Maven's copy of the pom's runtime dependencies into the folder."""
    with tempfile.TemporaryDirectory() as work:
        Path(work, "pom.xml").write_text(pom)
        result = subprocess.run(
            [
                mvn, "-B", "-q", "dependency:copy-dependencies",
                "-DincludeScope=runtime",
                # Scala's library comes with pyspark, at the version Spark was built with
                "-DexcludeGroupIds=org.scala-lang",
                f"-DoutputDirectory={into}",
            ],
            cwd=work, capture_output=True, text=True, check=False,
        )  # fmt: skip
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-5:])
        raise ConfigError(f"Maven could not fetch the jars into {into}:\n{tail}")


def build_log_store(folder: Path) -> Path:
    """Compiles the S3 log store against the folder's delta-storage jar and pyspark's Hadoop
    client, into its jar in the folder; returns the jar."""
    target = log_store_jar(folder)
    if target.exists():
        return target
    javac = shutil.which("javac")
    if javac is None:
        raise ConfigError(
            "javac is not installed: the Delta log store for s3a:// targets is built with a"
            " JDK (Debian: apt-get install openjdk-17-jdk-headless), then run cdc jars again"
        )
    storage = sorted(folder.glob("delta-storage-*.jar"))
    hadoop = sorted(_spark_jars().glob("hadoop-client-api-*.jar"))
    if not storage or not hadoop:
        raise ConfigError(f"no delta-storage jar in {folder} to build the S3 log store against")
    with tempfile.TemporaryDirectory() as work:
        classpath = os.pathsep.join(str(j) for j in (storage[-1], hadoop[-1]))
        result = subprocess.run(
            [javac, "--release", "17", "-nowarn", "-cp", classpath, "-d", work,
             str(LOG_STORE_SOURCE)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if result.returncode != 0:
            raise ConfigError(f"javac could not build the S3 log store:\n{result.stderr[-2000:]}")
        partial = target.with_suffix(".partial")
        with zipfile.ZipFile(partial, "w") as jar:
            jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n\n")
            for compiled in sorted(Path(work).rglob("*.class")):
                jar.write(compiled, compiled.relative_to(work).as_posix())
        partial.replace(target)  # a killed build leaves no half jar under the name
    return target


_VERSIONED = re.compile(r"^(?P<artifact>.+?)-(?P<version>\d[^-]*(?:-[^-]+)*)\.jar$")


def _artifact(jar_name: str) -> str:
    match = _VERSIONED.match(jar_name)
    return match["artifact"] if match else jar_name


def _drop_jars_spark_has(folder: Path) -> None:
    """Removes jars whose artifact pyspark ships already (Hadoop, Jackson, Parquet, logging):
    two versions of one library on the classpath is a classic source of odd failures."""
    provided = {_artifact(j.name) for j in _spark_jars().glob("*.jar")}
    for jar in folder.glob("*.jar"):
        if _artifact(jar.name) in provided:
            jar.unlink()
