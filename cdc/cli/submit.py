"""``cdc submit JOB``: runs a job (jobs/, cdc.jobs) with spark-submit, the command built from the
pipeline file, so that a cluster run gets what a local ``cdc drain`` gets.

::

    cdc submit [--print] JOB [JOB ARGUMENTS, with --config FILE] [-- SPARK-SUBMIT ARGUMENTS]
    cdc submit drain --config pipeline.toml --until-caught-up -- --master yarn --num-executors 4

The command (``command``, pure): spark-submit (``$SPARK_HOME/bin``, else the one on PATH, else
pyspark's own), then
- ``--master`` from ``[spark] master`` (or ``spark.master``), unless the arguments give one;
- the jars: the files ``cdc jars`` fetched (``--jars a.jar,b.jar``: spark-submit takes files,
  not a folder), else ``--packages`` with their Maven coordinates; jars and packages that
  ``[spark]`` or the arguments name join those lists (given twice, spark-submit would keep
  one of them);
- ``--conf`` for Delta's extension and catalog, each ``[spark]`` setting without a ``${NAME}``
  reference, the job's own ``--conf`` settings, the driver's Python (this interpreter; the
  executors' too on a local master) and the package's log4j settings
  (``spark.driver.extraJavaOptions=-Dlog4j.configurationFile=...``); a setting the
  spark-submit arguments give is left to them;
- the arguments after ``--``, verbatim;
- the job's script (``cdc.jobs.script``: the checkout's ``jobs/``, or the installed package's
  copy) and its arguments (the file made absolute).

A ``[spark]`` value holding ``${NAME}`` never goes on a command line (``ps`` shows those to
every user): the job's session reads it from the driver's environment as it starts
(cdc.spark.resolve_settings). Before running, the file is checked, the source database
connected to, its ``${NAME}`` variables looked up and the role's privileges checked
(cdc.pg.privileges), so that each of those mistakes fails in one line before any JVM starts;
``--print`` only prints the command (it needs the file, not the database).
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import shutil
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from cdc import config, jars, jobs
from cdc import spark as spark_module
from cdc.cli import exitcodes
from cdc.cli.common import check_source
from cdc.config import Pipeline
from cdc.errors import ConfigError
from cdc.pg import privileges

log = logging.getLogger(__name__)

# spark-submit's options that stand for a Spark setting (SparkSubmitArguments)
OPTION_SETTINGS = {
    "--master": "spark.master",
    "--deploy-mode": "spark.submit.deployMode",
    "--name": "spark.app.name",
    "--jars": "spark.jars",
    "--packages": "spark.jars.packages",
    "--repositories": "spark.jars.repositories",
    "--py-files": "spark.submit.pyFiles",
    "--driver-memory": "spark.driver.memory",
    "--driver-cores": "spark.driver.cores",
    "--driver-java-options": "spark.driver.extraJavaOptions",
    "--driver-class-path": "spark.driver.extraClassPath",
    "--executor-memory": "spark.executor.memory",
    "--executor-cores": "spark.executor.cores",
    "--num-executors": "spark.executor.instances",
    "--total-executor-cores": "spark.cores.max",
    "--queue": "spark.yarn.queue",
}
DRIVER_PYTHON = "spark.pyspark.driver.python"
EXECUTOR_PYTHON = "spark.pyspark.python"
JAVA_OPTIONS = "spark.driver.extraJavaOptions"


def _options(spark_args: Sequence[str]) -> list[tuple[int, int, str, str]]:
    """spark-submit's options in its arguments: (index, tokens, option, value), with
    ``--opt value`` and ``--opt=value`` alike."""
    found = []
    args = list(spark_args)
    i = 0
    while i < len(args):
        option, equals, inline = args[i].partition("=")
        if option in ("--conf", "-c") or option in OPTION_SETTINGS:
            if equals:
                found.append((i, 1, option, inline))
            else:
                found.append((i, 2, option, args[i + 1] if i + 1 < len(args) else ""))
                i += 1
        i += 1
    return found


def given_settings(spark_args: Sequence[str]) -> dict[str, str]:
    """The Spark settings that spark-submit arguments give (``--conf K=V``, ``--master``, ...),
    by name."""
    given: dict[str, str] = {}
    for _, _, option, value in _options(spark_args):
        if option in ("--conf", "-c"):
            name, _, text = value.partition("=")
            given[name.strip()] = text
        else:
            given[OPTION_SETTINGS[option]] = value
    return given


def without_lists(spark_args: Sequence[str]) -> tuple[list[str], dict[str, list[str]]]:
    """The arguments without their jars and packages (``--jars``, ``--packages``, ``--conf
    spark.jars[.packages]=``), and those, to be merged with Delta's: given twice, spark-submit
    would keep one list only."""
    lists: dict[str, list[str]] = {spark_module.JARS: [], spark_module.PACKAGES: []}
    drop: set[int] = set()
    for i, tokens, option, value in _options(spark_args):
        name = OPTION_SETTINGS.get(option) or value.partition("=")[0].strip()
        if name in lists:
            text = value if option in OPTION_SETTINGS else value.partition("=")[2]
            lists[name] += spark_module.split_list(text)
            drop.update(range(i, i + tokens))
    return [a for i, a in enumerate(spark_args) if i not in drop], lists


def command(
    job: str,
    job_args: Sequence[str],
    pipeline: Pipeline,
    *,
    conf: Iterable[tuple[str, str]] = (),
    spark_args: Sequence[str] = (),
    spark_submit: str = "spark-submit",
    jar_files: Sequence[Path] | None = None,
    python: str = sys.executable,
) -> list[str]:
    """The spark-submit command of a job (see the module docstring). jar_files: the jars to
    pass with --jars; None: --packages."""
    spark_args, given_lists = without_lists(spark_args)
    given = given_settings(spark_args)
    settings = {
        **spark_module.DELTA_CONF,
        **{k: v for k, v in pipeline.spark if not spark_module.has_references(v)},
        **dict(conf),
    }
    argv = [spark_submit]
    own_master = settings.pop(spark_module.MASTER, None)
    master = given.get(spark_module.MASTER, own_master)
    if own_master and spark_module.MASTER not in given:
        argv += ["--master", own_master]
    listed = {
        "--jars": [
            *map(str, jar_files or ()),
            *spark_module.split_list(settings.pop(spark_module.JARS, None)),
            *given_lists[spark_module.JARS],
        ],
        "--packages": [
            *([] if jar_files else [jars.coordinates()]),
            *spark_module.split_list(settings.pop(spark_module.PACKAGES, None)),
            *given_lists[spark_module.PACKAGES],
        ],
    }
    for option, items in listed.items():
        if items:
            argv += [option, ",".join(items)]
    settings.setdefault(DRIVER_PYTHON, python)
    if (master or "local").startswith("local"):  # spark-submit's default master is local[*]
        settings.setdefault(EXECUTOR_PYTHON, python)
    if JAVA_OPTIONS not in given:
        own = settings.get(JAVA_OPTIONS, "")
        settings[JAVA_OPTIONS] = f"{own} {spark_module.log_java_option()}".strip()
    for key, value in settings.items():
        if key not in given:
            argv += ["--conf", f"{key}={value}"]
    return [*argv, *spark_args, str(jobs.script(job)), *job_args]


def split_arguments(args: Sequence[str]) -> tuple[list[str], list[str], bool]:
    """The job's arguments, spark-submit's (after ``--``) and whether --print was among the
    job's (``cdc submit drain --print --config F`` reads as well as ``cdc submit --print``)."""
    args = list(args)
    cut = args.index("--") if "--" in args else len(args)
    job_args, spark_args = args[:cut], args[cut + 1 :]
    printing = "--print" in job_args
    return [a for a in job_args if a != "--print"], spark_args, printing


def job_arguments(job_args: Sequence[str], config_path: str) -> list[str]:
    """The job's arguments as the job gets them: the --config file absolute (the job may run
    elsewhere than here), the --conf settings left out (they go to spark-submit)."""
    absolute = str(Path(config_path).resolve())
    out: list[str] = []
    args = iter(job_args)
    for arg in args:
        if arg == "--conf":
            next(args, None)
        elif arg == "--config":
            next(args, None)
            out += ["--config", absolute]
        elif arg.startswith("--config="):
            out.append(f"--config={absolute}")
        elif not arg.startswith("--conf="):
            out.append(arg)
    return out


def spark_submit() -> str:
    """The spark-submit to run: $SPARK_HOME's, else the one on PATH, else pyspark's own."""
    home = os.environ.get("SPARK_HOME")
    if home:
        found = Path(home) / "bin" / "spark-submit"
        if not os.access(found, os.X_OK):
            raise ConfigError(
                f"$SPARK_HOME is {home}, which has no bin/spark-submit: fix or unset it"
            )
        return str(found)
    on_path = shutil.which("spark-submit")
    if on_path:
        return on_path
    import pyspark

    bundled = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    if not os.access(bundled, os.X_OK):
        raise ConfigError("no spark-submit: put it on PATH or set SPARK_HOME")
    return str(bundled)


def cmd_submit(args: argparse.Namespace) -> int:
    from cdc.cli.parser import build_parser

    job_args, spark_args, printing = split_arguments(args.args)
    printing = printing or args.print
    # the job's arguments, checked as the job will check them (a mistake: usage, exit 2)
    parsed = build_parser().parse_args([args.job, *job_args])
    pipeline = config.load(parsed.config)
    if not printing:  # what the job would find wrong first, found before any JVM starts
        check_source(pipeline, parsed.config)
        spark_module.resolve_settings(pipeline.spark)  # the driver's environment is this one
        if args.job in privileges.COMMANDS:
            from cdc.pipeline.tables import resolved

            privileges.check_pipeline(resolved(pipeline), args.job)
    loudness = ["-q"] if getattr(args, "quiet", False) else ["-v"] * int(args.verbose or 0)
    argv = command(
        args.job,
        [*job_arguments(job_args, parsed.config), *loudness],
        pipeline,
        conf=parsed.conf,
        spark_args=spark_args,
        spark_submit=spark_submit(),
        jar_files=jars.present(),
    )
    if printing:
        print(shlex.join(argv))
        return exitcodes.OK
    log.info("running the %s job with %s", args.job, argv[0])
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(argv[0], argv)  # spark-submit in this process: signals reach it, its code is ours
    return exitcodes.COULD_NOT_RUN  # not reached
