"""Refuse a planned dump that cannot fit before a byte of it is written.

When HDF5 runs out of room mid-write (a full disk, a quota, ``ulimit -f``) it fails in its own ways:
a RuntimeError while closing, and at some sizes a segmentation fault inside the library as its
objects are freed (measured: `import` under ``ulimit -f 2`` died with SIGSEGV). A dump whose size is
known up front (the planned writer preallocates every dataset) is checked here instead, so the user
gets one line with the sizes.
"""

from __future__ import annotations

import os
import resource

from alignprobe.errors import BadInput

# HDF5's own structures beside the datasets (superblock, object headers, the ids, attributes).
METADATA_SLACK = 1 << 20


def dump_bytes(streams, num_tokens: int) -> int:
    """The bytes of a dump's data: int64 token ids and every stream's rows in their stored dtype."""
    import numpy as np

    from alignprobe.dump.encoding import STORAGE_DTYPE

    row = 8 + sum(c.width * np.dtype(STORAGE_DTYPE[c.dtype]).itemsize for c in streams.values())
    return int(num_tokens) * row


def check_room(folder: str, needed: int, what: str) -> None:
    """One BadInput line when ``needed`` bytes cannot be written under ``folder``: less free space on its
    file system, or a per-file size limit (``ulimit -f``) below it."""
    needed += METADATA_SLACK
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    if soft != resource.RLIM_INFINITY and needed > soft:
        raise BadInput(f"{what} needs about {_size(needed)} but this process may write files of at most "
                       f"{_size(soft)} (ulimit -f): raise the limit, or write fewer samples")
    try:
        fs = os.statvfs(folder)
    except OSError:
        return  # the write itself will say what is wrong with the folder
    free = fs.f_bavail * fs.f_frsize
    if needed > free:
        raise BadInput(f"{what} needs about {_size(needed)} but {folder} has {_size(free)} free: free space "
                       "or write it elsewhere")


def _size(n: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"
