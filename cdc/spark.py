"""The one Spark session factory: Delta's extension and catalog, jars from the local folder.

With the folder that ``cdc jars`` fills (cdc.jars), the session starts offline with exactly
those jars; without it, ``configure_spark_with_delta_pip`` lets Spark resolve Delta and the
JDBC driver from Maven at start. Under ``spark-submit`` the submitter's settings (master,
``--packages``, ``--conf``) come first and the factory only adds what is missing; the jars
are the submitter's alone (``cdc submit`` passes them).

A pipeline's session (``pipeline_session``) takes the pipeline file's ``[spark]`` settings
over the local defaults (LOCAL_CONF), its ``${NAME}`` references read from the environment
(``resolve_settings``), and a command's ``--conf NAME=VALUE`` over those; under
``spark-submit`` a setting the submitter gave wins over them. The master is the setting
``spark.master`` (``master`` in ``[spark]``), local[2] by default.

``spark.sql.warehouse.dir`` is never left to Spark's default (a
``spark-warehouse`` folder in the working directory): unless a setting names it, it is
``_spark_warehouse`` under the pipeline's target.path when a target is a catalog name (its
files live there), else a temporary folder removed at exit. Under ``spark-submit`` it is left
to the submitter (and its metastore).

Right after the session starts, before any work, ``check_classes`` makes sure Delta's classes
and the JDBC driver are on the classpath: a ``--jars`` naming a folder (spark-submit wants a
list of files) fails there, in one line saying what to pass, not at the first batch.
"""

from __future__ import annotations

import argparse
import atexit
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from cdc import jars
from cdc.config import ENV_REFERENCE
from cdc.errors import ConfigError
from cdc.targets import catalog
from cdc.targets.delta import object_store

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from cdc.config import Pipeline

JAVA_VERSIONS = (17, 21)
MASTER = "spark.master"
JARS = "spark.jars"  # spark-submit's --jars: files, comma-separated
PACKAGES = "spark.jars.packages"  # spark-submit's --packages: Maven coordinates
LOCAL_MASTER = "local[2]"  # the master when neither the file nor --conf names one
LOG_CONF = Path(__file__).with_name("log4j2.properties")  # Spark's log settings (cdc.logs)
WAREHOUSE = "spark.sql.warehouse.dir"
# Delta's log store for s3a:// tables: cdc.jars builds one whose commits are conditional PUTs,
# so that two writers (two drains, Spark and delta-rs) never both take a version
S3A_LOG_STORE = "spark.delta.logStore.s3a.impl"
PIPELINE_WAREHOUSE = "_spark_warehouse"  # below target.path, for catalog-named targets

DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    # timestamps as Parquet INT64 microseconds, not INT96 (Spark's default), which other
    # readers (delta-rs, DuckDB) misread outside 1677-2262; dates and timestamps written in
    # the proleptic Gregorian calendar as they are (PostgreSQL's calendar), never rebased
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.parquet.datetimeRebaseModeInWrite": "CORRECTED",
}

LOCAL_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.ui.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.memory": "2g",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.ui.showConsoleProgress": "false",
    # Delta reads its log with this many tasks (50 by default): too many for a small machine
    "spark.databricks.delta.snapshotPartitions": "2",
    # VACUUM lists a table's folders with this many tasks (10,000 by default): 40 s for a
    # table of five files on local[2], 4.5 s with 4
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "4",
}

# the classes a pipeline's session needs, checked as it starts: Delta (its extension and
# catalog, DELTA_CONF) and PostgreSQL's JDBC driver (snapshots and large batches)
NEEDED_CLASSES = (
    "io.delta.sql.DeltaSparkSessionExtension",
    "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "org.postgresql.Driver",
)


def log_java_option() -> str:
    """The JVM option that points log4j at the package's log settings."""
    return f"-Dlog4j.configurationFile=file:{LOG_CONF}"


def resolve_settings(
    settings: Iterable[tuple[str, str]], environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """[spark] settings with each ``${NAME}`` replaced by the environment variable NAME; a
    ConfigError names the setting and the variable when it is not set (never the value)."""
    env = os.environ if environ is None else environ
    resolved: dict[str, str] = {}
    for name, text in settings:
        unset = [v for v in ENV_REFERENCE.findall(text) if v not in env]
        if unset:
            raise ConfigError(
                f'[spark] "{name}" refers to ${{{unset[0]}}}, which is not set in the environment:'
                f" export {unset[0]} before running (or write the value in the file)"
            )
        resolved[name] = ENV_REFERENCE.sub(lambda m: env[m[1]], text)
    return resolved


def split_list(text: str | None) -> list[str]:
    """The items of a comma-separated setting (spark.jars, spark.jars.packages)."""
    return [item.strip() for item in (text or "").split(",") if item.strip()]


def has_references(text: str) -> bool:
    """Whether a [spark] value reads the environment (``${NAME}``)."""
    return ENV_REFERENCE.search(text) is not None


def conf_pair(text: str) -> tuple[str, str]:
    """A ``--conf NAME=VALUE`` argument (argparse type): the name a Spark setting."""
    name, equals, value = text.partition("=")
    name = name.strip()
    if not equals or not name.startswith("spark.") or not value.strip():
        raise argparse.ArgumentTypeError(
            f"--conf takes NAME=VALUE with a Spark setting's full name (spark.driver.memory=4g),"
            f" not {name or text!r}"
        )
    return name, value.strip()


def add_conf_argument(parser: argparse.ArgumentParser) -> None:
    """The --conf option of every Spark command: a Spark setting over the pipeline file's."""
    parser.add_argument(
        "--conf",
        type=conf_pair,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a Spark setting over the [spark] section's (spark.executor.memory=4g); repeat",
    )


def java_major() -> int:
    """The major version of the java that Spark will start; ConfigError saying what to install
    when there is none."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.path.exists(java):
        raise ConfigError(
            "no Java found: Spark needs Java 17 or 21"
            " (Debian: apt-get install openjdk-17-jre-headless, or set JAVA_HOME)"
        )
    out = subprocess.run([java, "-version"], capture_output=True, text=True, check=False).stderr
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not match:
        raise ConfigError(f"could not tell the version of {java}: {out.strip()[:200]}")
    major = int(match[1]) if match[1] != "1" else int(match[2] or 0)
    if major not in JAVA_VERSIONS:
        raise ConfigError(
            f"{java} is Java {major}; Spark 4 needs Java 17 or 21: install openjdk-17-jre-headless"
            " and point JAVA_HOME at it"
        )
    return major


def pipeline_session(
    pipeline: Pipeline, app_name: str, overrides: Sequence[tuple[str, str]] = ()
) -> SparkSession:
    """The session of a command that runs a pipeline: its ``[spark]`` settings (``${NAME}``
    read from the environment), the command's ``--conf`` over them, and its warehouse (see the
    module docstring)."""
    settings = {**resolve_settings(pipeline.spark), **dict(overrides)}
    spark = session(app_name, settings, warehouse=pipeline_warehouse(pipeline))
    catalog.register(spark, pipeline)  # catalog targets under their names (cdc.targets.catalog)
    return spark


def pipeline_warehouse(pipeline: Pipeline) -> str | None:
    """Where catalog-named targets keep their files: ``_spark_warehouse`` under target.path;
    None when every target is a path (the warehouse then holds nothing)."""
    if not catalog.names(pipeline):
        return None
    return pipeline.location(PIPELINE_WAREHOUSE)


def session_settings(
    conf: Mapping[str, str] | None, submitted: Iterable[str] | None
) -> dict[str, str]:
    """Delta's settings (DELTA_CONF) with conf over them; under spark-submit (submitted: the
    keys the submitter gave) only those the submitter left out, Delta's extension and
    catalog included: a submitter's own catalog (Unity, Glue, Hive) is kept."""
    settings = {**DELTA_CONF, **(conf or {})}
    return settings if submitted is None else submitted_settings(settings, submitted)


def submitted_settings(settings: Mapping[str, str], submitted: Iterable[str]) -> dict[str, str]:
    """The settings the submitter did not give (spark-submit's ``--conf`` and its kind win)."""
    given = set(submitted)
    return {k: v for k, v in settings.items() if k not in given}


def _temporary_warehouse() -> str:
    folder = tempfile.mkdtemp(prefix="cdc-spark-warehouse-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def _submitted_keys() -> set[str]:
    """The settings spark-submit gave the driver (its JVM is up before this process)."""
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()
    return {key for key, _ in SparkConf().getAll()}


def session(
    app_name: str = "cdc", conf: dict[str, str] | None = None, *, warehouse: str | None = None
) -> SparkSession:
    """The active session, or a new one with Delta configured; conf over the local defaults
    (under spark-submit: only where the submitter gave none). The warehouse folder, unless conf
    names one: warehouse, else a temporary folder (not under spark-submit)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    java_major()
    builder = SparkSession.builder.appName(app_name)
    submitted = "SPARK_SUBMIT_OPTS" in os.environ or os.environ.get("SPARK_ENV_LOADED")
    settings = session_settings(conf, _submitted_keys() if submitted else None)
    if not submitted:
        if WAREHOUSE not in settings:
            settings[WAREHOUSE] = warehouse or _temporary_warehouse()
        builder = builder.master(settings.pop(MASTER, LOCAL_MASTER))
        # Python workers run this interpreter, which has the package and its dependencies
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = builder.config("spark.driver.extraJavaOptions", log_java_option())
        settings = {**LOCAL_CONF, "spark.pyspark.python": os.environ["PYSPARK_PYTHON"], **settings}
    for key, value in settings.items():
        builder = builder.config(key, value)
    # under spark-submit the classpath is the submitter's (jars set now would reach the
    # executors, not the driver's JVM, already up): check_classes says what to pass
    local_jars = None if submitted else jars.present()
    if local_jars is not None:  # with the settings' own jars, if any
        listed = [*map(str, local_jars), *split_list(settings.get(JARS))]
        builder = builder.config(JARS, ",".join(listed))
        if S3A_LOG_STORE not in settings:  # commits to s3a:// as conditional PUTs (cdc.jars)
            builder = builder.config(S3A_LOG_STORE, jars.LOG_STORE_CLASS)
    elif not submitted:
        from delta import configure_spark_with_delta_pip

        group, artifact, version = jars.JDBC_ARTIFACT
        builder = configure_spark_with_delta_pip(
            builder,
            extra_packages=[f"{group}:{artifact}:{version}", *split_list(settings.get(PACKAGES))],
        )
    from cdc import logs  # one log format; Spark's levels by -v / -q (cdc.logs)

    with logs.jvm_stderr():
        spark = builder.getOrCreate()
    logs.quiet_spark(spark)
    # delta-rs reaches object storage with the session's S3A settings (the submitter's too)
    object_store.configure(dict(spark.sparkContext.getConf().getAll()))
    check_classes(spark)
    return spark


def is_local(spark: SparkSession) -> bool:
    """Whether the session runs on a local master (``local[*]``), where the driver is the
    whole machine: work done on the driver (in Arrow, with delta-rs) runs on the same cores
    Spark's executors would, without their jobs' cost. On a cluster the executors read and
    write in parallel."""
    return spark.sparkContext.master.startswith("local")


def missing_classes(spark: SparkSession, names: Iterable[str]) -> list[str]:
    """The classes of names that the driver's JVM cannot load."""
    from py4j.protocol import Py4JJavaError

    jvm = spark.sparkContext._jvm
    assert jvm is not None
    loader = jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader()
    missing = []
    for name in names:
        try:
            jvm.java.lang.Class.forName(name, False, loader)
        except Py4JJavaError:
            missing.append(name)
    return missing


def check_classes(spark: SparkSession, names: Iterable[str] = NEEDED_CLASSES) -> None:
    """ConfigError saying what to give spark-submit when a needed class is not on the
    classpath (a session without Delta fails its first Delta statement, mid-batch)."""
    missing = missing_classes(spark, names)
    if missing:
        raise ConfigError(f"{', '.join(missing)} not on Spark's classpath: {jars_hint()}")


def jars_hint() -> str:
    """What to give spark-submit for the jars (one line)."""
    folder = jars.default_dir()
    return (
        f"give spark-submit --packages {jars.coordinates()}, or the files of `cdc jars`"
        f' as a comma-separated list: --jars "$(ls {folder}/*.jar | paste -sd,)"'
        " (--jars takes files, not a folder); `cdc submit` builds the whole command"
    )
