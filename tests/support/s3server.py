"""An S3 API server for the tests: moto's S3 in server mode, with conditional writes made
atomic. Run as ``python -m tests.support.s3server`` (tests/support/objectstore.py starts it);
it prints ``port <n>`` once it listens on 127.0.0.1.

moto checks ``If-None-Match`` / ``If-Match`` and then stores the object as two steps, and its
server answers requests on threads: two writers racing for one commit file of a Delta log
could both be told they won (seen with bodies of a few MB, where moto spools the body to a
file between the two steps). Real S3 decides atomically, and the tests of racing writers rely
on that, so every conditional PUT or POST here runs under one lock. Other requests run
concurrently, as moto runs them.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

CONDITIONS = ("HTTP_IF_NONE_MATCH", "HTTP_IF_MATCH")


def serialising_conditional_writes(app: Callable[..., Iterable[bytes]]) -> Callable[..., Any]:
    """The WSGI app with conditional writes taken one at a time (see the module docstring)."""
    lock = threading.Lock()

    def wrapped(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        conditional = environ["REQUEST_METHOD"] in ("PUT", "POST") and any(
            environ.get(name) for name in CONDITIONS
        )
        if not conditional:
            return app(environ, start_response)
        with lock:
            return list(app(environ, start_response))  # the whole answer, inside the lock

    return wrapped


def main() -> None:
    from moto.moto_server.threaded_moto_server import MotoRequestHandler
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    app = serialising_conditional_writes(DomainDispatcherApplication(create_backend_app))
    server = make_server("127.0.0.1", port, app, threaded=True, request_handler=MotoRequestHandler)
    print(f"port {server.server_port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
