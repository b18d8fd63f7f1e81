"""The one Spark session factory: Delta's extension and catalog, jars from the local folder.

With the folder that ``cdc jars`` fills (cdc.jars), the session starts offline with exactly
those jars; without it, ``configure_spark_with_delta_pip`` lets Spark resolve Delta and the
JDBC driver from Maven at start. Under ``spark-submit`` the submitter's settings (master,
``--packages``) come first and the factory only adds what is missing.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from cdc import jars
from cdc.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

JAVA_VERSIONS = (17, 21)

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


def session(app_name: str = "cdc", conf: dict[str, str] | None = None) -> SparkSession:
    """The active session, or a new one with Delta configured."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    java_major()
    builder = SparkSession.builder.appName(app_name)
    submitted = "SPARK_SUBMIT_OPTS" in os.environ or os.environ.get("SPARK_ENV_LOADED")
    settings = {**DELTA_CONF, **(conf or {})}
    if not submitted:
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
