"""What limits ``compare`` on a many-core host: the comparison with parts of it switched off, warm.

Each row is ``compare`` of a foreign folder (train side, read in place) against a dump of the same
states, or of two dumps, in a fresh process, with every file in the page cache (warm: the reads are
memory copies, so what is left is the comparer's own work) or evicted (cold). A row's variants, all
monkeypatched in that child only (no library code changes): ``bb=N`` block bytes N MB (default 8),
``noexplain`` the explanations' rows neither taken nor fitted, ``nomap`` no mapping search,
``torch1`` ``torch.set_num_threads(1)``, ``nowarm`` the folder's warming thread off. Each row prints
the whole compare's seconds and its parts: the folder's open (the token-id pass) and the streaming
pass itself (``streaming.measure``, timed around the call), torch's import (in the seconds of a
folder's row, as the raw read of a folder pays it too), the process's CPU seconds
(user, system) and page faults (minor) over the compare.

    python benchmarks/compare_limits.py --folder F --dump D --copy C --tree /path/to/installed/alignprobe
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _measure import evict_from_page_cache, run_child, warm_page_cache  # noqa: E402
from audit_throughput import RAW_DUMPS as RAW  # noqa: E402  (the raw read of the folder and the dumps)

CHILD = """
import json, resource, sys, time
folder_side, serve, variants = sys.argv[1], sys.argv[2], set(sys.argv[3].split(',')) - {''}
foreign = folder_side.endswith("specforge")
t_torch = 0.0
if foreign:  # the folder is read through torch: its import counts, as it does in the raw read's time
    t = time.perf_counter(); import torch; t_torch = time.perf_counter() - t
import alignprobe.compare.streaming as streaming
import alignprobe.compare.feeding as feeding
import alignprobe.compare.explaining as explaining
import alignprobe.importers.folder_source as folder_source
from alignprobe.compare import compare
parts = {"open_s": 0.0, "pass_s": 0.0}
def timed(key, fn):
    def wrapper(*a, **k):
        t = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            parts[key] += time.perf_counter() - t
    return wrapper
streaming.measure = timed("pass_s", streaming.measure)
folder_source.FolderSource.__init__ = timed("open_s", folder_source.FolderSource.__init__)
block = None
for v in variants:
    if v.startswith("bb="):
        block = int(v[3:]) << 20
if "noexplain" in variants:
    explaining.ExplainSamples.take = lambda self, *a: None
    explaining.ExplainSamples.explain = lambda self, policy: {}
if "nomap" in variants:
    feeding.mapping_sums = lambda *a, **k: []
if "torch1" in variants:
    torch.set_num_threads(1)
if "nowarm" in variants:
    folder_source.FolderSource._warm = lambda self, k: None
options = {"train_import": {"layer_ids": [1, 3, 4], "num_layers": 8}} if foreign else {}
r0 = resource.getrusage(resource.RUSAGE_SELF)
t = time.perf_counter()
result = compare(folder_side, serve, block_bytes=block, **options)
s = time.perf_counter() - t + t_torch
r1 = resource.getrusage(resource.RUSAGE_SELF)
with open('/proc/self/status') as fh:
    rss = next(int(l.split()[1]) / 1024 for l in fh if l.startswith('VmHWM:'))
print(json.dumps({"s": s, **parts, "torch_import_s": t_torch, "user_s": r1.ru_utime - r0.ru_utime,
                  "sys_s": r1.ru_stime - r0.ru_stime, "minflt": r1.ru_minflt - r0.ru_minflt,
                  "rss_mb": rss, "verdict": result.verdict}))
"""



def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--folder", required=True)
    parser.add_argument("--dump", required=True, help="the folder imported")
    parser.add_argument("--copy", required=True, help="a copy of --dump (the serve side of 2 dumps)")
    parser.add_argument("--tree", action="append", required=True, help="name=path of an installed alignprobe")
    parser.add_argument("--rows", default="", help="name:side:cache:variants;... (side foreign|dumps)")
    args = parser.parse_args()
    folder_files = sorted(os.path.join(d, f) for d, _, fs in os.walk(args.folder) for f in fs if f.startswith("data_"))
    trees = dict(t.split("=", 1) for t in args.tree)
    sides = {"foreign": ((args.folder, args.dump), folder_files + [args.dump]),
             "dumps": ((args.dump, args.copy), [args.dump, args.copy])}
    last = list(trees.values())[-1]
    out = []

    def prepare(files, cache):
        for p in files:
            (evict_from_page_cache if cache == "cold" else warm_page_cache)(p)

    base = {}
    for side, raw_args in (("foreign", (args.folder, args.dump)), ("dumps", ("-", args.dump, args.copy))):
        for cache in ("cold", "warm"):
            prepare(sides[side][1], cache)
            r = run_child(RAW, *raw_args, tree=last)
            base[side, cache] = r["s"]
            print(f"  raw {side:7} {cache:4} {r['s']:6.2f} s", flush=True)
            out.append({"row": f"raw {side}", "cache": cache, **r})
    for spec in filter(None, args.rows.split(";")):
        tree, side, cache, variants = spec.split(":")
        prepare(sides[side][1], cache)
        r = run_child(CHILD, *sides[side][0], variants, tree=trees[tree])
        ratio = base[side, cache] / r["s"]
        print(f"  {tree:6} {side:7} {cache:4} {variants or '-':22} {r['s']:6.2f} s {ratio:5.2f}x of raw  "
              + json.dumps({k: (round(v, 2) if isinstance(v, float) else v) for k, v in r.items() if k != "s"}),
              flush=True)
        out.append({"row": spec, "of_raw": ratio, **r})
    print(json.dumps(out))


if __name__ == "__main__":
    main()
