"""Airflow DAG: drain the queue into Delta every 5 minutes, verify hourly, maintain nightly.

Each task runs ``cdc`` from the virtual environment the wheel is installed in (docs/operations.md,
"Running on a cluster"): ``cdc submit`` builds the spark-submit command (the master and Spark
settings from the pipeline file's [spark] section, Delta's jars, quiet logs), so nothing here
repeats them. The worker needs Java 17 and network access to the master and to PostgreSQL.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow import DAG
from airflow.operators.bash import BashOperator

CDC = "/opt/cdc/venv/bin/cdc"
CONFIG = "/etc/cdc/pipeline.toml"
# every DAG here: no backfill, one run at a time (for the drain, the drain lock would make a
# second one wait anyway), two retries a minute apart
SCHEDULING = {
    "start_date": datetime(2026, 1, 1),
    "catchup": False,
    "max_active_runs": 1,
    "default_args": {"retries": 2, "retry_delay": timedelta(minutes=1)},
}

with DAG("cdc_drain", schedule="*/5 * * * *", **SCHEDULING) as drain_dag:
    BashOperator(
        task_id="drain",
        bash_command=f"{CDC} submit drain --config {CONFIG} --until-caught-up",
    )

with DAG("cdc_verify", schedule="@hourly", **SCHEDULING) as verify_dag:
    # a non-zero exit (4: a table differs) fails the task, which alerts
    BashOperator(task_id="verify", bash_command=f"{CDC} verify --config {CONFIG}")

with DAG("cdc_maintain", schedule="15 3 * * *", **SCHEDULING) as maintain_dag:
    BashOperator(task_id="maintain", bash_command=f"{CDC} submit maintain --config {CONFIG}")
