"""Shared helpers of the benchmarks: page-cache control, peak memory, and child-process measurement.

Every figure a benchmark prints is measured in a fresh child process (``python -m`` of a small
function here), so one measurement's memory never shows in another's peak RSS.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def peak_rss_mb() -> float:
    """Peak resident set size of this process image so far (VmHWM).

    Not ``ru_maxrss``: Linux carries that across fork+exec, so a child started by a process that
    once held 2 GB reports 2 GB however little it uses itself.
    """
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def current_rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def evict_from_page_cache(path: str) -> None:
    """Drop the file's clean pages from the OS page cache (no root needed), so the next read hits the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def warm_page_cache(path: str) -> None:
    with open(path, "rb") as fh:
        while fh.read(64 << 20):
            pass


def run_child(code: str, *args: str, tree: str | None = None) -> dict:
    """Run ``code`` (a Python snippet that prints one JSON line last) in a fresh interpreter, importing
    alignprobe from ``tree`` (default: this repository), e.g. an older commit measured in the same run."""
    tree = os.path.abspath(tree) if tree else REPO
    # PYTHONSAFEPATH: ``python -c`` would put the working directory first on sys.path, so a checkout
    # as the working directory (this one) would be imported instead of ``tree`` (Python 3.11+)
    env = dict(os.environ, PYTHONSAFEPATH="1", PYTHONPATH=os.pathsep.join(dict.fromkeys([tree, REPO]))
               + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"child failed ({out.returncode}):\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])
