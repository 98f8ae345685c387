"""Peak memory and throughput of iterating a ~1 GB dump, against raw chunked h5py reads of it.

Writes a bfloat16 dump (streams of width 7168 and 21504) with DumpWriter, then, each in a fresh
process, reads every stream start to end:

  raw_h5py     h5py ``read_direct`` into one reused buffer, chunk-aligned blocks of the same size
               that iter_blocks uses, stored uint16 bits, no conversion -- the baseline
  iter_blocks  ``Dump.iter_blocks(stream)`` for every stream: float32 blocks, as the comparer reads

Both run with the file evicted from the page cache (cold: the disk) and then cached (warm: memory
bandwidth). Throughput counts stored bytes; peak RSS is the child's ru_maxrss, shown with its RSS
after imports (torch alone is ~230 MB of it) so the reader's own share is visible.

    python benchmarks/read_memory.py                  # ~1 GB in /tmp, removed afterwards
    python benchmarks/read_memory.py --gb 2 --keep --dir /tmp/bench
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks._dumps import write_synthetic_dump  # noqa: E402
from benchmarks._measure import evict_from_page_cache, run_child, warm_page_cache  # noqa: E402

RAW_CHILD = """
import json, sys, time
import h5py, numpy as np
from benchmarks._measure import current_rss_mb, peak_rss_mb
path, block_bytes = sys.argv[1], int(sys.argv[2])
base = current_rss_mb()
nbytes = 0
t0 = time.perf_counter()
with h5py.File(path, "r") as f:
    for ds in f["streams"].values():
        rows, width = ds.shape
        chunk_rows = ds.chunks[0]
        # iter_blocks' token count (float32 bytes) rounded down to whole chunks
        step = max(chunk_rows, block_bytes // (4 * width) // chunk_rows * chunk_rows)
        buf = np.empty((step, width), ds.dtype)
        for s in range(0, rows, step):
            e = min(rows, s + step)
            ds.read_direct(buf, np.s_[s:e], np.s_[0:e - s])
            nbytes += (e - s) * width * ds.dtype.itemsize
seconds = time.perf_counter() - t0
print(json.dumps({"seconds": seconds, "bytes": nbytes, "base_mb": base, "peak_mb": peak_rss_mb()}))
"""

ITER_CHILD = """
import json, sys, time
from alignprobe.dump import open_dump
from alignprobe.dump.encoding import STORAGE_DTYPE
from benchmarks._measure import current_rss_mb, peak_rss_mb
import numpy as np
path = sys.argv[1]
base = current_rss_mb()
nbytes = 0
t0 = time.perf_counter()
with open_dump(path) as d:
    for name, claim in d.streams.items():
        itemsize = np.dtype(STORAGE_DTYPE[claim.dtype]).itemsize
        for block in d.iter_blocks(name):
            nbytes += block.states.shape[0] * block.states.shape[1] * itemsize
seconds = time.perf_counter() - t0
print(json.dumps({"seconds": seconds, "bytes": nbytes, "base_mb": base, "peak_mb": peak_rss_mb()}))
"""


def measure(path: str, cache: str, repeats: int) -> dict:
    """Best of ``repeats`` runs of each reader, interleaved (the machine is shared: take the least disturbed)."""
    from alignprobe.dump.reader import DEFAULT_BLOCK_BYTES

    runs: dict[str, list[dict]] = {"raw_h5py": [], "iter_blocks": []}
    for _ in range(repeats):
        for name, code, args in (("raw_h5py", RAW_CHILD, (path, str(DEFAULT_BLOCK_BYTES))), ("iter_blocks", ITER_CHILD, (path,))):
            if cache == "cold":
                evict_from_page_cache(path)
            else:
                warm_page_cache(path)
            runs[name].append(run_child(code, *args))
    return {name: {**min(r, key=lambda x: x["seconds"]), "peak_mb": max(x["peak_mb"] for x in r)} for name, r in runs.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gb", type=float, default=1.0)
    p.add_argument("--dir", default=None, help="where the dump goes (default: a temporary folder in /tmp)")
    p.add_argument("--keep", action="store_true", help="keep the dump (and reuse it when it exists)")
    p.add_argument("--repeats", type=int, default=3, help="runs of each reader; the fastest is shown")
    args = p.parse_args()

    folder = args.dir or tempfile.mkdtemp(prefix="alignprobe-bench-")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"read-{args.gb:g}gb.h5")
    try:
        if not (args.keep and os.path.exists(path)):
            facts = write_synthetic_dump(path, args.gb)
            print(f"wrote {facts['file_gb']:.2f} GB: {facts['samples']} samples, {facts['tokens']} tokens, "
                  f"streams {facts['widths']} (bf16) in {facts['write_s']:.1f} s "
                  f"({facts['file_gb'] / facts['write_s']:.2f} GB/s through DumpWriter)")
        print(f"\n{'cache':5s} {'reader':12s} {'GB/s':>6s} {'vs raw':>7s} {'peak RSS':>9s} {'after import':>13s} {'reader own':>11s}")
        for cache in ("cold", "warm"):
            m = measure(path, cache, args.repeats)
            raw = m["raw_h5py"]["bytes"] / m["raw_h5py"]["seconds"]
            for name, r in m.items():
                gbps = r["bytes"] / r["seconds"]
                print(f"{cache:5s} {name:12s} {gbps / 1e9:6.2f} {gbps / raw:6.2f}x {r['peak_mb']:7.0f}MB "
                      f"{r['base_mb']:11.0f}MB {r['peak_mb'] - r['base_mb']:9.0f}MB")
    finally:
        if not args.keep:
            if os.path.exists(path):
                os.remove(path)
            if not args.dir:
                os.rmdir(folder)


if __name__ == "__main__":
    main()
