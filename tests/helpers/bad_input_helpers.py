"""The promise every bad input must keep, checked the same way by every tests/test_bad_input_*.py.

``assert_refused`` runs the CLI in-process (click's CliRunner: hundreds of cases stay fast) and
checks: the documented exit code, exactly one line on stderr that starts "alignprobe: ", no
traceback, no "internal error", and every input file (each file under an input folder too) byte
for byte as before. ``LoopbackServer`` is a fake engine server on 127.0.0.1 whose every answer a
test writes by hand.
"""

from __future__ import annotations

import hashlib
import http.server
import os
import stat
import threading

from click.testing import CliRunner
from hypothesis import HealthCheck, settings

from alignprobe.cli.main import cli

# Seeded and derandomized: the same cases on every run and every machine, no example database.
# 40 cases a test keeps the whole set near a minute in the default run (over 600 cases in all).
FUZZ = settings(derandomize=True, database=None, deadline=None, print_blob=False, max_examples=40,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                       HealthCheck.data_too_large])


def fingerprints(paths) -> dict[str, str]:
    """sha256 of every regular file among ``paths`` and under the folders among them."""
    out = {}
    for path in paths:
        path = os.fspath(path)
        if os.path.isdir(path) and not os.path.islink(path):
            for root, _, files in os.walk(path):
                for name in files:
                    out.update(fingerprints([os.path.join(root, name)]))
        elif os.path.lexists(path):
            try:
                mode = os.stat(path).st_mode
            except OSError:
                continue
            if stat.S_ISREG(mode):
                with open(path, "rb") as fh:
                    out[path] = hashlib.sha256(fh.read()).hexdigest()
    return out


def invoke(args):
    return CliRunner().invoke(cli, [os.fspath(a) for a in args])


def assert_one_line(result, code=2, match=None):
    err = result.stderr
    lines = err.strip().splitlines()
    where = f"exit {result.exit_code}, stderr {err!r}, stdout {result.stdout[-300:]!r}, exception {result.exception!r}"
    assert result.exit_code == code, where
    assert len(lines) == 1 and lines[0].startswith("alignprobe: "), where
    assert "Traceback" not in err + result.stdout and "internal error" not in err, where
    if match is not None:
        assert match in lines[0], where
    return lines[0]


def assert_refused(args, inputs=(), code=2, match=None) -> str:
    """Run ``alignprobe ARGS`` in-process; assert the promise; return the one line."""
    before = fingerprints(inputs)
    result = invoke(args)
    line = assert_one_line(result, code, match)
    assert fingerprints(inputs) == before, f"an input changed: {line}"
    return line


class LoopbackServer:
    """A loopback HTTP server whose every answer comes from ``behaviour(handler)``."""

    def __init__(self, behaviour):
        outer = self
        self.requests = 0

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                outer.requests += 1
                behaviour(self)

            do_POST = do_GET

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
