"""One run of `alignprobe demo` per test session, shared by the tests that read its output.

The demo builds a model and five dumps (about a minute), so it runs once, in a subprocess exactly
as a user runs it, and every test that needs real reports or real results reads this run.
"""

from __future__ import annotations

import atexit
import dataclasses
import functools
import shutil
import subprocess
import sys
import tempfile
import time


@dataclasses.dataclass
class DemoRun:
    out_dir: str
    returncode: int
    stdout: str
    stderr: str
    wall_s: float


@functools.lru_cache(maxsize=1)
def demo_run() -> DemoRun:
    root = tempfile.mkdtemp(prefix="alignprobe-demo-test-")
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    out_dir = f"{root}/demo"
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "alignprobe.cli.main", "demo", "--out", out_dir],
        capture_output=True, text=True, timeout=600,
    )
    return DemoRun(out_dir, done.returncode, done.stdout, done.stderr, time.perf_counter() - started)
