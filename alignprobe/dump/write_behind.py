"""Start writing a file's dirty pages to disk now, without waiting for them (Linux ``sync_file_range``).

A writer that fsyncs only at the end (an import, which is redone rather than resumed) leaves every
byte in the page cache until then, and the final fsync waits for all of it: the disk writes nothing
while the input is read, then everything at once. ``SYNC_FILE_RANGE_WRITE`` queues the write-out of
a range as soon as it is written, so the disk writes while the next input file is read, and the
final fsync waits only for the last ranges. Elsewhere (no such call) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys

SYNC_FILE_RANGE_WRITE = 2


@functools.lru_cache(maxsize=1)
def _libc_call():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        call = libc.sync_file_range
    except (OSError, AttributeError):
        return None
    call.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    call.restype = ctypes.c_int
    return call


def start_write_out(fd: int, offset: int, length: int) -> None:
    """Queue ``length`` bytes of ``fd`` from ``offset`` for writing to disk; returns without waiting.
    Best effort: a file system that refuses it is written back at the final fsync as before."""
    call = _libc_call()
    if call is not None and length > 0:
        call(fd, offset, length, SYNC_FILE_RANGE_WRITE)
