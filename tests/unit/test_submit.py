"""``cdc submit``'s command line (cdc.cli.submit), the [spark] section's master and ``${NAME}``
references, --conf, and the one-line refusals before any JVM: all without Spark or a server."""

from __future__ import annotations

import copy
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from cdc import config, jars, jobs, shipped
from cdc import spark as spark_module
from cdc.cli import exitcodes
from cdc.cli import submit as submit_module
from cdc.errors import ConfigError

GOOD = {
    "source": {"dsn": "postgresql://x/y", "queue": "q", "consumer": "c"},
    "target": {"path": "/data/delta"},
    "tables": [{"source": "public.orders", "target": "orders"}],
}
PY = "/opt/cdc/bin/python"


def pipeline(**spark: object) -> config.Pipeline:
    data = copy.deepcopy(GOOD)
    if spark:
        data["spark"] = spark
    return config.parse(data)


def confs(argv: list[str]) -> dict[str, str]:
    """The --conf settings of a command line, by name."""
    pairs = [argv[i + 1] for i, a in enumerate(argv) if a == "--conf"]
    return dict(p.split("=", 1) for p in pairs)


def option(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def test_command_of_a_plain_pipeline() -> None:
    """Delta's settings, the jars as files, the driver's Python and the log settings, then the
    job's script from the package with its arguments, in that order."""
    jar_files = [Path("/j/delta-spark_4.2_2.13-4.4.0.jar"), Path("/j/postgresql-42.7.14.jar")]
    argv = submit_module.command(
        "drain", ["--config", "/etc/p.toml", "--once"], pipeline(),
        spark_submit="/s/bin/spark-submit", jar_files=jar_files, python=PY,
    )  # fmt: skip
    assert argv[0] == "/s/bin/spark-submit"
    assert option(argv, "--jars") == ",".join(str(j) for j in jar_files)
    assert "--packages" not in argv and "--master" not in argv
    settings = confs(argv)
    for key, value in spark_module.DELTA_CONF.items():
        assert settings[key] == value
    assert settings["spark.pyspark.driver.python"] == PY
    assert settings["spark.pyspark.python"] == PY  # spark-submit's default master is local
    assert settings["spark.driver.extraJavaOptions"] == (
        f"-Dlog4j.configurationFile=file:{spark_module.LOG_CONF}"
    )
    assert argv[-4:] == [str(jobs.script("drain")), "--config", "/etc/p.toml", "--once"]


def test_without_local_jars_the_command_names_the_packages() -> None:
    """No jars fetched: Spark resolves them from Maven (--packages with their coordinates)."""
    argv = submit_module.command("maintain", [], pipeline(), jar_files=None, python=PY)
    assert option(argv, "--packages") == jars.coordinates()
    assert "io.delta:delta-spark_" in jars.coordinates()
    assert "org.postgresql:postgresql:" in jars.coordinates()


def test_spark_section_and_conf_reach_the_command_but_never_references() -> None:
    """[spark] master becomes --master (a cluster master: the executors' Python is left to the
    cluster), its settings --conf, --conf over them; a ${NAME} value stays off the line."""
    pipe = pipeline(
        master="yarn",
        **{
            "spark.driver.memory": "4g",
            "spark.executor.memory": "2g",
            "spark.hadoop.fs.s3a.secret.key": "${AWS_SECRET_ACCESS_KEY}",
            "spark.driver.extraJavaOptions": "-Dx=1",
        },
    )
    argv = submit_module.command(
        "drain", [], pipe, conf=[("spark.executor.memory", "8g")], jar_files=None, python=PY
    )
    assert option(argv, "--master") == "yarn"
    settings = confs(argv)
    assert settings["spark.driver.memory"] == "4g"
    assert settings["spark.executor.memory"] == "8g"
    assert "spark.master" not in settings and "spark.pyspark.python" not in settings
    assert not any("s3a" in a or "AWS_SECRET" in a for a in argv), argv
    assert settings["spark.driver.extraJavaOptions"] == (
        f"-Dx=1 -Dlog4j.configurationFile=file:{spark_module.LOG_CONF}"
    )


def test_spark_submit_arguments_win_and_come_before_the_script() -> None:
    """What the spark-submit arguments give (--master, --jars, --conf K=V, --driver-memory) is
    not given a second time; the arguments go verbatim before the job's script."""
    pipe = pipeline(master="local[4]", **{"spark.driver.memory": "4g"})
    extra = ["--master", "spark://h:7077", "--conf", "spark.ui.enabled=true",
             "--driver-memory", "1g", "--driver-java-options", "-Dy=2"]  # fmt: skip
    argv = submit_module.command(
        "snapshot", ["public.t", "--config", "/p.toml"], pipe,
        conf=[("spark.ui.enabled", "false")], spark_args=extra, jar_files=None, python=PY,
    )  # fmt: skip
    script = argv.index(str(jobs.script("snapshot")))
    assert argv[script - len(extra) : script] == extra
    ours = argv[:script - len(extra)]  # fmt: skip
    assert "--master" not in ours
    assert set(confs(ours)).isdisjoint(
        {"spark.ui.enabled", "spark.driver.memory", "spark.driver.extraJavaOptions"}
    )
    assert "spark.pyspark.python" not in confs(ours)  # the given master is a cluster's


@pytest.mark.parametrize(
    ("args", "given"),
    [
        (["--conf", "spark.a=1", "-c", "spark.b=2", "--conf=spark.c=3"],
         {"spark.a", "spark.b", "spark.c"}),
        (["--master=yarn", "--executor-memory", "2g"], {"spark.master", "spark.executor.memory"}),
        (["--packages", "g:a:1", "--verbose"], {"spark.jars.packages"}),
    ],
)  # fmt: skip
def test_given_settings(args: list[str], given: set[str]) -> None:
    """The settings a spark-submit argument list gives, in each of its spellings."""
    assert set(submit_module.given_settings(args)) == given


def test_jars_and_packages_join_delta_s() -> None:
    """Jars and packages named by [spark], --conf or spark-submit's arguments join Delta's
    lists (spark-submit keeps one --jars and one --packages), once each."""
    pipe = pipeline(**{"spark.jars.packages": "org.apache.hadoop:hadoop-aws:3.4.1"})
    extra = ["--packages", "g:a:1", "--jars=/x.jar", "--conf", "spark.jars=/y.jar,/z.jar",
             "--num-executors", "2"]  # fmt: skip
    argv = submit_module.command(
        "drain", [], pipe, spark_args=extra, jar_files=[Path("/j/d.jar")], python=PY
    )
    assert argv.count("--jars") == 1 and argv.count("--packages") == 1
    assert option(argv, "--jars") == "/j/d.jar,/x.jar,/y.jar,/z.jar"
    assert option(argv, "--packages") == "org.apache.hadoop:hadoop-aws:3.4.1,g:a:1"
    assert "spark.jars" not in confs(argv) and "spark.jars.packages" not in confs(argv)
    assert argv[argv.index("--num-executors") + 1] == "2"
    without = submit_module.command("drain", [], pipe, jar_files=None, python=PY)
    assert option(without, "--packages") == (
        f"{jars.coordinates()},org.apache.hadoop:hadoop-aws:3.4.1"
    )


def test_job_arguments_absolute_config_and_no_conf(tmp_path: Path, monkeypatch) -> None:
    """The job gets its file as an absolute path (it may run elsewhere) and no --conf (those
    went to spark-submit); the rest as given."""
    monkeypatch.chdir(tmp_path)
    args = ["--config", "p.toml", "--conf", "spark.x=1", "--once", "--conf=spark.y=2"]
    assert submit_module.job_arguments(args, "p.toml") == [
        "--config", str(tmp_path / "p.toml"), "--once",
    ]  # fmt: skip
    assert submit_module.job_arguments(["--config=p.toml"], "p.toml") == [
        f"--config={tmp_path / 'p.toml'}"
    ]


def test_split_arguments() -> None:
    """Before -- the job's (with --print plucked out), after it spark-submit's."""
    assert submit_module.split_arguments(["--config", "f", "--print", "--", "--master", "x"]) == (
        ["--config", "f"], ["--master", "x"], True,
    )  # fmt: skip
    assert submit_module.split_arguments(["--config", "f"]) == (["--config", "f"], [], False)


def test_every_job_is_a_script_in_the_package() -> None:
    """Each job's script sits in the shipped jobs/ folder (the checkout's, or the installed
    package's) and runs the cdc command of its name."""
    for job in jobs.JOBS:
        script = jobs.script(job)
        assert script.parent == shipped.folder("jobs")
        assert f'run("{job}", sys.argv[1:])' in script.read_text()
    with pytest.raises(ConfigError, match="no job 'verify': the jobs are drain, snapshot"):
        jobs.script("verify")


def test_references_resolve_from_the_environment() -> None:
    """${NAME} is replaced by the variable; text around it and other $ signs stay."""
    settings = [("spark.a", "${A}"), ("spark.b", "x-${A}-${B_2}$"), ("spark.c", "$A {A}")]
    env = {"A": "secret", "B_2": "two"}
    assert spark_module.resolve_settings(settings, env) == {
        "spark.a": "secret",
        "spark.b": "x-secret-two$",
        "spark.c": "$A {A}",
    }


def test_an_unset_reference_names_the_setting_and_variable_not_a_value() -> None:
    """An unset variable: one line naming the setting and the variable."""
    with pytest.raises(ConfigError) as caught:
        spark_module.resolve_settings([("spark.k", "${SET}/${UNSET_ONE}")], {"SET": "hush"})
    message = str(caught.value)
    assert message.startswith('[spark] "spark.k" refers to ${UNSET_ONE}, which is not set')
    assert "hush" not in message and "\n" not in message


@pytest.mark.parametrize("value", ["${1A}", "${A", "a${}b", "${A-B}"])
def test_a_malformed_reference_is_refused_without_showing_the_value(value: str) -> None:
    """A ${ that is no reference is a ConfigError naming the setting, not showing the value."""
    with pytest.raises(ConfigError) as caught:
        pipeline(**{"spark.k": value})
    assert str(caught.value).startswith('[spark] "spark.k" holds a ${ that is not a reference')
    assert value not in str(caught.value)


def test_master_in_the_spark_section_is_spark_master() -> None:
    """``master`` is the setting spark.master (what --master sets)."""
    assert pipeline(master="local[3]").spark == (("spark.master", "local[3]"),)


@pytest.mark.parametrize("text", ["spark.x", "x=1", "=1", "spark.x= "])
def test_conf_pair_refuses_what_is_no_setting(text: str) -> None:
    """--conf takes NAME=VALUE with a spark.* name, else a usage error naming the rule."""
    with pytest.raises(Exception, match="--conf takes NAME=VALUE"):
        spark_module.conf_pair(text)


def test_conf_pair() -> None:
    assert spark_module.conf_pair("spark.executor.memory=4g") == ("spark.executor.memory", "4g")
    assert spark_module.conf_pair("spark.a=b=c") == ("spark.a", "b=c")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends: refused


def _config(tmp_path: Path, dsn: str) -> Path:
    path = tmp_path / "p.toml"
    path.write_text(
        f"[source]\ndsn = '{dsn}'\nqueue = 'q'\nconsumer = 'c'\n[target]\npath = '{tmp_path}'\n"
        "[[tables]]\nsource = 'public.t'\n[spark]\n"
        "'spark.hadoop.fs.s3a.secret.key' = '${CDC_TEST_NOT_SET_SECRET}'\n"
    )
    return path


def _run(argv: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``cdc ARGV`` in a new process whose JAVA_HOME has no java: a command that went as far
    as starting a JVM would fail with "no Java found" instead of its own message."""
    environ = {**os.environ, "JAVA_HOME": str(cwd / "no-java"), **env}
    return subprocess.run(
        [sys.executable, "-m", "cdc.cli", *argv],
        capture_output=True, text=True, check=False, cwd=cwd, env=environ,
    )  # fmt: skip


@pytest.mark.parametrize("command", ["drain", "snapshot", "verify", "maintain", "sql", "submit"])
def test_an_unreachable_source_fails_in_one_line_before_spark(command: str, tmp_path: Path) -> None:
    """A refused connection stops every Spark command (and cdc submit) before a JVM starts:
    exit 1 and one line naming the file, never the DSN's password."""
    dsn = f"postgresql://u:pw-not-shown@127.0.0.1:{_closed_port()}/db"
    path = _config(tmp_path, dsn)
    argv = {
        "sql": ["sql", "select 1", "--engine", "spark"],  # datafusion needs no source
        "snapshot": ["snapshot", "public.t"],
        "submit": ["submit", "drain"],
    }.get(command, [command])
    done = _run([*argv, "--config", str(path)], tmp_path)
    assert done.returncode == exitcodes.COULD_NOT_RUN
    assert done.stderr.startswith(
        f"cdc: error: cannot connect to the source database (source.dsn of {path}"
    ), done.stderr
    assert "Connection refused" in done.stderr and "pw-not-shown" not in done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr


def test_print_shows_the_command_without_a_database(tmp_path: Path) -> None:
    """``cdc submit --print`` needs the file, not the database: it prints one shell line whose
    script is the installed job and whose secrets are left to the driver's environment."""
    path = _config(tmp_path, f"postgresql://u@127.0.0.1:{_closed_port()}/db")
    done = subprocess.run(
        [sys.executable, "-m", "cdc.cli", "submit", "drain", "--print", "--config", str(path),
         "--follow", "--", "--master", "local[1]"],
        capture_output=True, text=True, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == exitcodes.OK, done.stderr
    [line] = done.stdout.splitlines()
    assert f"--master 'local[1]' {jobs.script('drain')} --config {path} --follow" in line
    assert "CDC_TEST_NOT_SET_SECRET" not in line and "s3a" not in line


def test_a_bad_job_argument_is_a_usage_error(tmp_path: Path) -> None:
    """The job's arguments are checked as the job checks them, before anything runs."""
    path = _config(tmp_path, "postgresql://u@127.0.0.1:1/db")
    done = subprocess.run(
        [sys.executable, "-m", "cdc.cli", "submit", "drain", "--config", str(path), "--sometimes"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == exitcodes.USAGE
    assert "unrecognized arguments: --sometimes" in done.stderr


@pytest.mark.parametrize("flag", ["-v", "-q"])
def test_a_job_takes_cdc_s_loudness_among_its_arguments(flag: str, tmp_path: Path) -> None:
    """-v / -q after the job's name (as cdc submit passes them) reach cdc, not the command's
    parser: the run gets as far as the missing file, not a usage error."""
    missing = tmp_path / "missing.toml"
    assert jobs.run("drain", ["--config", str(missing), flag]) == exitcodes.COULD_NOT_RUN
