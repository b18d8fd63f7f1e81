"""The one Spark session factory: Delta's extension and catalog, jars from the local folder.

With the folder that ``cdc jars`` fills (cdc.jars), the session starts offline with exactly
those jars; without it, ``configure_spark_with_delta_pip`` lets Spark resolve Delta and the
JDBC driver from Maven at start. Under ``spark-submit`` the submitter's settings (master,
``--packages``, ``--conf``) come first and the factory only adds what is missing.

A pipeline's session (``pipeline_session``) takes the pipeline file's ``[spark]`` settings
over the local defaults (LOCAL_CONF); under ``spark-submit`` a setting the submitter gave wins
over the file's. ``spark.sql.warehouse.dir`` is never left to Spark's default (a
``spark-warehouse`` folder in the working directory): unless a setting names it, it is
``_spark_warehouse`` under the pipeline's target.path when a target is a catalog name (its
files live there), else a temporary folder removed at exit. Under ``spark-submit`` it is left
to the submitter (and its metastore).
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from cdc import jars
from cdc.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from cdc.config import Pipeline

JAVA_VERSIONS = (17, 21)
WAREHOUSE = "spark.sql.warehouse.dir"
PIPELINE_WAREHOUSE = "_spark_warehouse"  # below target.path, for catalog-named targets

DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    # new tables get deletion vectors: a MERGE that deletes or updates a few rows marks
    # them instead of rewriting whole files
    "spark.databricks.delta.properties.defaults.enableDeletionVectors": "true",
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
}


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


def pipeline_session(pipeline: Pipeline, app_name: str) -> SparkSession:
    """The session of a command that runs a pipeline: its ``[spark]`` settings, and its
    warehouse (see the module docstring)."""
    return session(app_name, dict(pipeline.spark), warehouse=pipeline_warehouse(pipeline))


def pipeline_warehouse(pipeline: Pipeline) -> str | None:
    """Where catalog-named targets keep their files: ``_spark_warehouse`` under target.path;
    None when every target is a path (the warehouse then holds nothing)."""
    names = [t.target for t in pipeline.tables] + [pipeline.quarantine, pipeline.failing_table]
    if all(pipeline.table(n).is_path for n in names):
        return None
    return pipeline.location(PIPELINE_WAREHOUSE)


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
    if submitted and conf:
        conf = submitted_settings(conf, _submitted_keys())
    settings = {**DELTA_CONF, **(conf or {})}
    if not submitted:
        if WAREHOUSE not in settings:
            settings[WAREHOUSE] = warehouse or _temporary_warehouse()
        builder = builder.master(os.environ.get("CDC_SPARK_MASTER", "local[2]"))
        # Python workers run this interpreter, which has the package and its dependencies
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        log_conf = Path(__file__).with_name("log4j2.properties")
        builder = builder.config(
            "spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log_conf}"
        )
        settings = {**LOCAL_CONF, "spark.pyspark.python": os.environ["PYSPARK_PYTHON"], **settings}
    for key, value in settings.items():
        builder = builder.config(key, value)
    local_jars = jars.present()
    if local_jars is not None:
        builder = builder.config("spark.jars", ",".join(str(j) for j in local_jars))
    elif not submitted:
        from delta import configure_spark_with_delta_pip

        group, artifact, version = jars.JDBC_ARTIFACT
        builder = configure_spark_with_delta_pip(
            builder, extra_packages=[f"{group}:{artifact}:{version}"]
        )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark
