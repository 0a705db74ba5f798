"""moto's S3 server with S3's atomic conditional writes: `python bench/moto_s3.py HOST PORT`.

S3 applies a PutObject with If-Match / If-None-Match atomically; moto checks the condition, then writes, on a
thread per request, so two concurrent swaps of one pointer could both win. Writes are serialised here (reads
stay concurrent), which is the guarantee the snapshot pointer's compare-and-swap relies on.
"""
import os
import signal
import sys
import threading

from moto.server import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import run_simple

WRITES = ("PUT", "POST", "DELETE")


class SerialisedWrites:
    def __init__(self, app):
        self.app, self.lock = app, threading.Lock()

    def __call__(self, environ, start_response):
        if environ["REQUEST_METHOD"] not in WRITES:
            return self.app(environ, start_response)
        with self.lock:
            return list(self.app(environ, start_response))


if __name__ == "__main__":
    host, port = sys.argv[1], int(sys.argv[2])
    os.environ.setdefault("MOTO_PORT", str(port))
    for sig in (signal.SIGTERM, signal.SIGINT):  # a test worker may start it with these ignored (inherited)
        signal.signal(sig, lambda *_: sys.exit(0))
    run_simple(host, port, SerialisedWrites(DomainDispatcherApplication(create_backend_app)), threaded=True,
               request_handler=MotoRequestHandler)
