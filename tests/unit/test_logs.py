"""cdc.logs: one line format, the levels of -q / default / -v / -vv for the project, the
libraries and Spark, and the log4j file that starts Spark in the same format and levels."""

from __future__ import annotations

import io
import logging
import re
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from cdc import cli, logs

LOG4J = Path(logs.__file__).with_name("log4j2.properties")


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    """Logging set up to write into a string; the root logger as it was afterwards."""
    root = logging.getLogger()
    saved = root.level, list(root.handlers), logging.getLogger("cdc").level
    out = io.StringIO()
    yield out
    for handler in list(root.handlers):
        if handler not in saved[1]:
            root.removeHandler(handler)
    root.setLevel(saved[0])
    logging.getLogger("cdc").setLevel(saved[2])
    logs.setup(logs.DEFAULT, io.StringIO())  # the module's verbosity back to the default
    for handler in list(root.handlers):
        if getattr(handler, "_cdc", False):
            root.removeHandler(handler)


def emit(out: io.StringIO, verbosity: int) -> list[str]:
    logs.setup(verbosity, out)
    for name in ("cdc.drain", "py4j.clientserver"):
        logger = logging.getLogger(name)
        logger.debug("%s debug", name)
        logger.info("%s info", name)
        logger.warning("%s warning", name)
    return out.getvalue().splitlines()


def messages(lines: list[str]) -> list[str]:
    return [line.split(": ", 1)[1] for line in lines]


def test_one_format(stream: io.StringIO) -> None:
    """Every line: UTC time, Python's level name, logger, message (LINE_PATTERN)."""
    lines = emit(stream, logs.DEFAULT)
    assert lines
    for line in lines:
        assert re.match(logs.LINE_PATTERN, line), line
    assert lines[0].endswith(" INFO cdc.drain: cdc.drain info")


def test_default_levels(stream: io.StringIO) -> None:
    """By default: the project's info lines, the libraries' warnings."""
    assert messages(emit(stream, logs.DEFAULT)) == [
        "cdc.drain info",
        "cdc.drain warning",
        "py4j.clientserver warning",
    ]


def test_quiet_levels(stream: io.StringIO) -> None:
    """-q: warnings and errors only."""
    assert messages(emit(stream, logs.QUIET)) == ["cdc.drain warning", "py4j.clientserver warning"]


def test_verbose_levels(stream: io.StringIO) -> None:
    """-v: the project's debug lines, the libraries' info lines."""
    assert messages(emit(stream, logs.VERBOSE)) == [
        "cdc.drain debug",
        "cdc.drain info",
        "cdc.drain warning",
        "py4j.clientserver info",
        "py4j.clientserver warning",
    ]


def test_setup_twice_one_handler(stream: io.StringIO) -> None:
    """Set up again (a second command in one process), each line is written once."""
    logs.setup(logs.DEFAULT, stream)
    assert len(emit(stream, logs.DEFAULT)) == 3


@pytest.mark.parametrize(
    ("argv", "verbosity"),
    [((), logs.DEFAULT), (("-q",), logs.QUIET), (("-v",), logs.VERBOSE), (("-vv",), logs.DEBUG)],
)
def test_options(argv: tuple[str, ...], verbosity: int) -> None:
    """-q, -v and -vv reach the verbosity; -vvv is -vv."""
    args = cli.build_parser().parse_args([*argv, "jars"])
    assert logs.verbosity_of(args.verbose, args.quiet) == verbosity
    assert logs.verbosity_of(3, False) == logs.DEBUG


def test_quiet_and_verbose_exclude_each_other() -> None:
    """-q with -v is a usage error (exit 2)."""
    with pytest.raises(SystemExit) as exit_info:
        cli.build_parser().parse_args(["-q", "-v", "jars"])
    assert exit_info.value.code == 2


def test_spark_levels() -> None:
    """Spark's root at ERROR by default and with -q, WARN with -v, INFO with -vv; the loggers
    that repeat a failure in Java traces off below -v; Delta's filter message off below -vv."""
    default, quiet = logs.spark_levels(logs.DEFAULT), logs.spark_levels(logs.QUIET)
    verbose, debug = logs.spark_levels(logs.VERBOSE), logs.spark_levels(logs.DEBUG)
    assert (default[""], quiet[""], verbose[""], debug[""]) == ("ERROR", "ERROR", "WARN", "INFO")
    executor = "org.apache.spark.executor.Executor"
    assert (default[executor], verbose[executor], debug[executor]) == ("OFF", "WARN", "INFO")
    dv = "org.apache.spark.sql.delta.DeltaParquetFileFormat"
    assert (default[dv], verbose[dv], debug[dv]) == ("OFF", "OFF", "INFO")
    rdd = "org.apache.spark.rdd.RDD"
    assert (default[rdd], verbose[rdd], debug[rdd]) == ("ERROR", "ERROR", "INFO")


def _properties() -> dict[str, str]:
    pairs = {}
    for line in LOG4J.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            key, value = line.split("=", 1)
            pairs[key.strip()] = value.strip()
    return pairs


def test_log4j_file_starts_spark_at_the_default_levels() -> None:
    """The log4j file (read while the JVM starts) has the default levels of spark_levels for
    the root and every logger set apart."""
    props = _properties()
    in_file = {"": props["rootLogger.level"].upper()}
    for key, name in props.items():
        if key.startswith("logger.") and key.endswith(".name"):
            in_file[name] = props[key.removesuffix(".name") + ".level"].upper()
    assert in_file == logs.spark_levels(logs.DEFAULT)


def test_log4j_file_is_made_from_the_module() -> None:
    """cdc/log4j2.properties is what log4j_properties() makes of SPARK_APART, to the letter."""
    assert LOG4J.read_text() == logs.log4j_properties(), (
        "cdc/log4j2.properties is out of date: .venv/bin/python -m cdc.logs > cdc/log4j2.properties"
    )


def test_log4j_pattern_is_the_python_format() -> None:
    """A line of the log4j pattern matches LINE_PATTERN: time, level (WARN as WARNING),
    logger, message."""
    pattern = _properties()["appender.stderr.layout.pattern"]
    assert pattern.startswith("%d{yyyy-MM-dd HH:mm:ss}{UTC} %level{WARN=WARNING")
    assert pattern.endswith(" %c: %m%n%ex")
    example = "2026-11-25 16:40:01 WARNING org.apache.spark.sql.delta.DeltaLog: text"
    assert re.match(logs.LINE_PATTERN, example)


def test_jvm_stderr_drops_the_startup_noise(tmp_path: Path) -> None:
    """A child process started inside jvm_stderr writes through the filter: the JVM's early
    noise is dropped, every other line comes through."""
    script = (
        "import subprocess, sys\n"
        "from cdc import logs\n"
        "with logs.jvm_stderr():\n"
        "    subprocess.run(['sh', '-c', 'echo \"WARNING: Using incubator modules:"
        " jdk.incubator.vector\" >&2; echo kept >&2; echo out'], check=True)\n"
        "logs.COPIERS[-1].join(timeout=60)\n"
        "print('after', file=sys.stderr)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "out\n"
    assert "incubator" not in proc.stderr
    assert proc.stderr.splitlines() == ["kept", "after"]


def test_python_warnings_are_one_log_line(stream: io.StringIO) -> None:
    """A Python warning becomes one WARNING line of logger py.warnings, in the format."""
    with warnings.catch_warnings():
        logging.captureWarnings(False)  # as in a fresh process (pytest wraps showwarning)
        logs.setup(logs.DEFAULT, stream)
        warnings.simplefilter("always")
        warnings.warn("two\nlines", RuntimeWarning, stacklevel=1)
        logging.captureWarnings(False)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1, lines
    assert re.match(logs.LINE_PATTERN, lines[0]), lines[0]
    assert " WARNING py.warnings: RuntimeWarning: two lines (" in lines[0]
