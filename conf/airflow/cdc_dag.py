"""Airflow DAG: drain the queue into Delta every 5 minutes, verify hourly, maintain nightly.

Needs apache-airflow-providers-apache-spark and a Spark connection ``spark_default`` (its
master: local[*], spark://host:7077 or yarn). The Delta and JDBC packages are fetched by
Spark from Maven (``packages``); the ``cdc`` package must be installed in the Python that
Spark's driver and executors use.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow import DAG
from airflow.operators.bash import BashOperator
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

CONFIG = "/etc/cdc/pipeline.toml"
JOBS = "/opt/cdc/jobs"
SPARK = {
    "conn_id": "spark_default",
    "packages": "io.delta:delta-spark_4.2_2.13:4.4.0,org.postgresql:postgresql:42.7.14",
    "conf": {
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    },
}
# every DAG here: no backfill, one run at a time (for the drain, the drain lock would make a
# second one wait anyway), two retries a minute apart
SCHEDULING = {
    "start_date": datetime(2026, 1, 1),
    "catchup": False,
    "max_active_runs": 1,
    "default_args": {"retries": 2, "retry_delay": timedelta(minutes=1)},
}

with DAG("cdc_drain", schedule="*/5 * * * *", **SCHEDULING) as drain_dag:
    SparkSubmitOperator(
        task_id="drain",
        application=f"{JOBS}/drain.py",
        application_args=["--config", CONFIG, "--until-caught-up"],
        **SPARK,
    )

with DAG("cdc_verify", schedule="@hourly", **SCHEDULING) as verify_dag:
    # exit code 1 when a table differs: the task fails and alerts
    BashOperator(task_id="verify", bash_command=f"cdc verify --config {CONFIG}")

with DAG("cdc_maintain", schedule="15 3 * * *", **SCHEDULING) as maintain_dag:
    SparkSubmitOperator(
        task_id="maintain",
        application=f"{JOBS}/maintain.py",
        application_args=["--config", CONFIG],
        **SPARK,
    )
