"""The drain's memory as the kernel counts it: the peak resident set (``VmHWM``) of this
Python process and of the Spark driver's JVM beside it, for the drain's summary and the
benchmarks. None where the system has no ``/proc`` or the JVM runs elsewhere."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["jvm_pid", "peak_rss", "summary"]


def peak_rss(pid: int | str = "self") -> int | None:
    """The process's peak resident memory in bytes, or None when it cannot be read."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return None


def jvm_pid(spark: Any) -> int | None:
    """The pid of the driver's JVM on this machine: the one pyspark started, or, under
    spark-submit, the parent process when it is a JVM."""
    gateway = getattr(spark.sparkContext, "_gateway", None)
    proc = getattr(gateway, "proc", None)
    if proc is not None:
        return proc.pid
    parent = os.getppid()
    try:
        command = Path(f"/proc/{parent}/cmdline").read_bytes().split(b"\0")[0]
    except OSError:
        return None
    return parent if command.endswith(b"java") else None


def summary(spark: Any) -> str:
    """``peak memory: python 412 MB, jvm 1830 MB`` (a part that cannot be read says so)."""
    python = peak_rss()
    jvm_process = jvm_pid(spark)
    jvm = peak_rss(jvm_process) if jvm_process is not None else None

    def mb(value: int | None) -> str:
        return "unknown" if value is None else f"{value / 1e6:.0f} MB"

    return f"peak memory: python {mb(python)}, jvm {mb(jvm)}"
