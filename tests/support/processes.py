"""What the tests' servers started as processes share (tests/support/objectstore.py,
metastore.py, standalone.py): a free port to give one, and stopping one."""

from __future__ import annotations

import socket
import subprocess


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now (a server started next may take it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(proc: subprocess.Popen, seconds: float = 60) -> None:
    """SIGTERM, then SIGKILL if the process has not ended within seconds."""
    proc.terminate()
    try:
        proc.wait(seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
