"""Audit throughput against a raw read of the same files, measured in the same run.

Writes a SpecForge folder (bf16 ``data_*.ckpt``, a share of them ``.ckpt.gz``) of about ``--gb``
GB, then, each in a fresh process with the files evicted from the page cache first (cold):
- ``raw``: ``torch.load`` of every file in one process (the baseline), and ``raw_threads``: the same
  with 16 threads (what the disk gives when many readers ask);
- ``audit``: ``alignprobe.audit`` in one process;
- ``raw N readers``: N processes at once, each ``torch.load``-ing a contiguous 1/N (by bytes) of the
  files, first start to last finish (``--raw-threads``: the same on N threads of one process);
- ``dask N``: the audit on a LocalCluster of N single-threaded workers (cluster start not timed;
  each worker's peak RSS is its own VmHWM), "of raw" against one raw reader and "of raw N" against
  the N raw readers just before it (the goal: 0.9x of those);
- ``import``: ``alignprobe import`` of the folder, and ``compare_foreign``: ``compare`` with the
  folder as the train side against the imported dump, next to ``compare_dumps`` of two dumps.
  Their "of raw" is against the raw ``torch.load`` of the folder (the headline); each also has the
  baseline of what it reads (and writes) in its own column, ``of own``:
  - ``raw read+write``: ``torch.load`` of every file and a ``pwrite`` of its tensors' bytes into one
    file, one after the other in one thread, fsync at the end (an import's work done naively);
  - ``raw folder+dump``: ``torch.load`` of the folder, then an h5py read of every dataset of the
    dump (what ``compare foreign`` reads); ``raw 2 dumps``: the h5py read of both dumps.
- ``--trees before=/path/a,after=/path/b``: the audit, import and compare rows for each alignprobe tree
  (a folder holding the ``alignprobe`` package), on the same files in the same run.

    python benchmarks/audit_throughput.py --gb 1 --hidden 1024 --workers 1,2
    python benchmarks/audit_throughput.py --gb 6 --hidden 7168 --workers 1,2,4,8,16 --dir /local/disk
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _measure import evict_from_page_cache, run_child  # noqa: E402

LAYER_IDS = "1,3,4"  # SpecForge's default for N=8: the states are random, only their size matters
NUM_LAYERS = 8


def write_specforge(root: str, gb: float, hidden: int, tokens: int, gz_every: int) -> list[str]:
    import torch

    g = torch.Generator().manual_seed(0)
    pool = torch.randn(tokens + 4096, 4 * hidden, generator=g).to(torch.bfloat16)
    per_file = tokens * 4 * hidden * 2
    count = max(2, int(gb * 1e9 / per_file))
    paths = []
    folder = os.path.join(root, "rows_0-2000")
    os.makedirs(folder, exist_ok=True)
    for idx in range(count):
        start = (idx * 997) % 4096
        rows = pool[start : start + tokens]
        record = {"input_ids": torch.randint(1, 30000, (tokens,), generator=g),
                  "loss_mask": torch.ones(tokens, dtype=torch.long),
                  "aux_hidden_state": rows[:, : 3 * hidden].unsqueeze(0).clone(),
                  "hidden_state": rows[:, 3 * hidden :].unsqueeze(0).clone()}
        if gz_every and idx % gz_every == 0:
            path = os.path.join(folder, f"data_{idx}.ckpt.gz")
            with gzip.open(path, "wb", compresslevel=1) as fh:
                torch.save(record, fh)
        else:
            path = os.path.join(folder, f"data_{idx}.ckpt")
            torch.save(record, path)
        paths.append(path)
    return paths


def evict(paths):
    for p in paths:
        evict_from_page_cache(p)


PEAK = """
def peak():
    with open('/proc/self/status') as fh:
        for line in fh:
            if line.startswith('VmHWM:'):
                return int(line.split()[1]) / 1024
"""

RAW = PEAK + """
import json, sys, time, glob, os
from concurrent.futures import ThreadPoolExecutor
from alignprobe.importers.files import load_torch_dict
files = sorted(glob.glob(os.path.join(sys.argv[1], '*', 'data_*')))
threads = int(sys.argv[2])
def one(p):
    d = load_torch_dict(p, mmap=False)  # read every byte: a mapped load reads nothing until touched
    return sum(t.numel() * t.element_size() for t in d.values())
t = time.perf_counter()
if threads == 1:
    n = sum(one(p) for p in files)
else:
    with ThreadPoolExecutor(threads) as pool:
        n = sum(pool.map(one, files))
print(json.dumps({"s": time.perf_counter() - t, "bytes": n, "rss_mb": peak()}))
"""

# N readers at once, each ``torch.load``-ing (as raw does) a contiguous share of the files, about 1/N of
# the bytes: the baseline of an audit on N workers. Processes, as Dask's workers are (argv[3] "threads":
# the same shares on threads of one process, to see whether torch.load holds the GIL). Forked before
# torch is imported (each imports it itself), each starts at a barrier; the wall time is from the first
# start to the last finish.
RAW_N = PEAK + """
import json, sys, time, glob, os
import multiprocessing as mp
def shares(files, n):
    sizes = [os.path.getsize(p) for p in files]
    total, out, acc = sum(sizes), [[] for _ in range(n)], 0
    for p, size in zip(files, sizes):
        out[min(n - 1, int(acc * n / max(total, 1)))].append(p)
        acc += size
    return out
def reader(files, barrier, done):
    from alignprobe.importers.files import load_torch_dict
    barrier.wait()
    t = time.monotonic()
    n = sum(t.numel() * t.element_size() for p in files for t in load_torch_dict(p, mmap=False).values())
    done.put((t, time.monotonic(), n, peak()))
if __name__ == "__main__":
    files = sorted(glob.glob(os.path.join(sys.argv[1], '*', 'data_*')))
    n = int(sys.argv[2])
    if sys.argv[3:] == ["threads"]:
        import queue, threading
        barrier, done = threading.Barrier(n), queue.Queue()
        workers = [threading.Thread(target=reader, args=(share, barrier, done)) for share in shares(files, n)]
    else:
        ctx = mp.get_context("fork")  # "-c" code: spawn could not find reader() in __main__
        barrier, done = ctx.Barrier(n), ctx.Queue()
        workers = [ctx.Process(target=reader, args=(share, barrier, done)) for share in shares(files, n)]
    for w in workers:
        w.start()
    got = [done.get() for _ in workers]
    for w in workers:
        w.join()
    print(json.dumps({"s": max(g[1] for g in got) - min(g[0] for g in got), "bytes": sum(g[2] for g in got),
                      "rss_mb": max(g[3] for g in got)}))
"""

AUDIT = PEAK + """
import json, sys, time
import alignprobe
import alignprobe.audit.run  # noqa: F401  torch and the audit's modules imported before the clock, as raw's loader is
t = time.perf_counter()
r = alignprobe.audit(sys.argv[1], **({"torch_threads": int(sys.argv[2])} if len(sys.argv) > 2 else {}))
print(json.dumps({"s": time.perf_counter() - t, "rss_mb": peak(), "verdict": r.verdict, "samples": r.samples}))
"""

DASK = PEAK + """
import json, sys, time
import alignprobe
# The client's imports before the clock too: ``alignprobe.audit`` is imported on first use, and this row
# timed the client's import of torch (2-4 s) until issue 24 (the one-process row never did)
import alignprobe.audit.run  # noqa: F401
from distributed import Client, LocalCluster
n = int(sys.argv[2])
with LocalCluster(n_workers=n, threads_per_worker=1, dashboard_address=None, memory_limit="4GiB") as cluster, Client(cluster) as client:
    client.run(lambda: __import__("alignprobe.audit.scan"))  # imports (torch: seconds) are not the audit's
    t = time.perf_counter()
    r = alignprobe.audit(sys.argv[1], scheduler=cluster.scheduler_address)
    s = time.perf_counter() - t
    rss = list(client.run(peak).values())
print(json.dumps({"s": s, "worker_rss_mb": max(rss), "client_rss_mb": peak(), "samples": r.samples}))
"""

# Every tensor of a loaded file written at ``offset`` as its raw bytes (the raw read+write rows).
WRITE_VALUES = """
def write_values(fd, loaded, offset):
    import torch
    for v in loaded.values():
        data = memoryview(v.contiguous().view(-1).view(torch.uint8).numpy())
        while len(data):
            n = os.pwrite(fd, data, offset)
            offset, data = offset + n, data[n:]
    return offset
"""

RAW_RW = PEAK + WRITE_VALUES + """
import json, sys, time, glob, os
import numpy as np
from alignprobe.importers.files import load_torch_dict
files = sorted(glob.glob(os.path.join(sys.argv[1], '*', 'data_*')))
t = time.perf_counter()
fd = os.open(sys.argv[2], os.O_RDWR | os.O_CREAT | os.O_TRUNC)
offset = 0
for p in files:
    offset = write_values(fd, load_torch_dict(p, mmap=False), offset)
os.fsync(fd)
os.close(fd)
s = time.perf_counter() - t
os.unlink(sys.argv[2])
print(json.dumps({"s": s, "bytes": offset, "rss_mb": peak()}))
"""

RAW_WRITE = PEAK + """
import json, sys, os, time
n, out = int(sys.argv[1]), sys.argv[2]
block = memoryview(os.urandom(1 << 20) * 64)  # 64 MB of incompressible bytes, written over and over
t = time.perf_counter()
fd = os.open(out, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
offset = 0
while offset < n:
    offset += os.pwrite(fd, block[: min(len(block), n - offset)], offset)
os.fsync(fd)
os.close(fd)
s = time.perf_counter() - t
os.unlink(out)
print(json.dumps({"s": s, "bytes": offset, "rss_mb": peak()}))
"""

# The read and the write of raw read+write overlapped: a thread reads (torch.load, as raw) up to 256 MB
# ahead while the main thread writes what it read; fsync at the end. What an import can hope for.
RAW_RW_OVERLAP = PEAK + WRITE_VALUES + """
import json, sys, time, glob, os, queue, threading
from alignprobe.importers.files import load_torch_dict
files = sorted(glob.glob(os.path.join(sys.argv[1], '*', 'data_*')))
ready = queue.Queue(maxsize=max(1, (256 << 20) // max(1, os.path.getsize(files[0]))))
def reader():
    for p in files:
        ready.put(load_torch_dict(p, mmap=False))
    ready.put(None)
t = time.perf_counter()
threading.Thread(target=reader, daemon=True).start()
fd = os.open(sys.argv[2], os.O_RDWR | os.O_CREAT | os.O_TRUNC)
offset = 0
while (d := ready.get()) is not None:
    offset = write_values(fd, d, offset)
os.fsync(fd)
os.close(fd)
s = time.perf_counter() - t
os.unlink(sys.argv[2])
print(json.dumps({"s": s, "bytes": offset, "rss_mb": peak()}))
"""

RAW_DUMPS = PEAK + """
import json, sys, time, glob, os
import h5py
t = time.perf_counter()
n = 0
if sys.argv[1] != "-":
    from alignprobe.importers.files import load_torch_dict
    for p in sorted(glob.glob(os.path.join(sys.argv[1], '*', 'data_*'))):
        n += sum(v.numel() * v.element_size() for v in load_torch_dict(p, mmap=False).values())
for path in sys.argv[2:]:
    with h5py.File(path, 'r') as f:
        names = ['tokens'] + ['streams/' + k for k in f['streams']]
        for name in names:
            ds = f[name]
            step = max(1, (64 << 20) // max(1, ds[0:1].nbytes))
            for a in range(0, ds.shape[0], step):
                n += ds[a:a + step].nbytes
print(json.dumps({"s": time.perf_counter() - t, "bytes": n, "rss_mb": peak()}))
"""

IMPORT = PEAK + """
import json, sys, time
from alignprobe.importers import import_source
if sys.argv[3:] == ["no-write-behind"]:  # the pages left dirty until the final fsync, as before write_behind.py
    import alignprobe.dump.planned_writer as planned_writer
    planned_writer.start_write_out = lambda *args: None
t = time.perf_counter()
import_source(sys.argv[1], sys.argv[2], layer_ids=[1, 3, 4], num_layers=8, overwrite=True, progress=False)
print(json.dumps({"s": time.perf_counter() - t, "rss_mb": peak()}))
"""

COMPARE = PEAK + """
import json, sys, time
from alignprobe.compare import compare
t = time.perf_counter()
options = {"train_import": {"layer_ids": [1, 3, 4], "num_layers": 8}} if sys.argv[3] == "foreign" else {}
compare(sys.argv[1], sys.argv[2], **options)
print(json.dumps({"s": time.perf_counter() - t, "rss_mb": peak()}))
"""


def scaling_table(rows: list[dict], counts: list[int], labels: list[str]) -> str:
    """Each N's best (fastest) raw-N readers and Dask-N audit of every tree over the rounds, the audit's
    time as a ratio of the raw readers' (the goal: 0.9x or more)."""
    def best(name):
        times = [r["s"] for r in rows if r["name"] == name or r["name"].startswith(name + " #")]
        return min(times) if times else None

    head = "  N   raw N s" + "".join(f"  {(label or 'audit') + ' s':>12} {'of raw N':>8}" for label in labels)
    lines = ["best of the rounds, cold:", head]
    for n in counts:
        raw_n = best(f"raw {n} readers")
        line = f"  {n:<3} {raw_n:7.2f}"
        for label in labels:
            s = best(f"{label + ': ' if label else ''}audit dask {n}")
            line += f"  {s:12.2f} {raw_n / s:7.2f}x" if s else f"  {'-':>12} {'-':>8}"
        lines.append(line)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gb", type=float, default=1.0)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--tokens", type=int, default=2048, help="tokens a file (sample)")
    parser.add_argument("--gz-every", type=int, default=0, help="every k-th file .ckpt.gz (0: none)")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--raw-threads", action="store_true",
                        help="also the raw N readers as threads of one process (does torch.load hold the GIL?)")
    parser.add_argument("--rounds", type=int, default=1, help="the raw-N and dask-N rows this many times, interleaved")
    parser.add_argument("--skip", default="", help="comma-separated: audit,audit1 (the one-process rows),import,compare,raw16,write_floor")
    parser.add_argument("--trees", default="", help="name=path,...: alignprobe trees whose audit/import/compare to measure")
    parser.add_argument("--dir", default=None)
    parser.add_argument("--folder", default=None,
                        help="an existing folder this script wrote (kept): two trees measured on the same files")
    parser.add_argument("--torch-threads", type=int, default=4,
                        help="also measure a one-process audit whose reductions use this many torch threads (1: not)")
    parser.add_argument("--write-only", action="store_true", help="write the folder under --dir, print it, keep it")
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="audit-bench-", dir=args.dir)
    skip = set(filter(None, args.skip.split(",")))
    keep = args.folder is not None or args.write_only
    try:
        t = time.perf_counter()
        if args.folder:
            folder = args.folder
            paths = sorted(os.path.join(d, f) for d, _, fs in os.walk(folder) for f in fs if f.startswith("data_"))
        else:
            folder = os.path.join(root, "specforge")
            paths = write_specforge(folder, args.gb, args.hidden, args.tokens, args.gz_every)
        size = sum(os.path.getsize(p) for p in paths)
        print(f"{'read' if args.folder else 'wrote'} {len(paths)} files, {size / 1e9:.2f} GB on disk, H={args.hidden}, "
              f"in {time.perf_counter() - t:.1f} s: {folder}", flush=True)
        if args.write_only:
            return
        rows = []

        trees = [tuple(t.split("=", 1)) for t in args.trees.split(",") if t] or [("", None)]

        def measure(name, code, *argv, base=None, own=None, tree=None, own_name="own"):
            evict(paths)
            # the baselines import alignprobe's file loader from the last tree (an installed one: the
            # source tree's probes/ installs as alignprobe.probes, so it does not import from the source)
            out = run_child(code, *argv, tree=tree or trees[-1][1])
            gbps = size / out["s"] / 1e9
            ratio = f"{base / out['s']:.2f}x" if base else "1.00x"
            mine = f"  {own / out['s']:.2f}x of {own_name}" if own else ""
            extra = {k: v for k, v in out.items() if k not in ("s",)}
            print(f"  {name:26} {out['s']:7.2f} s  {gbps:5.2f} GB/s  {ratio:>6} of raw{mine}  {json.dumps(extra)}",
                  flush=True)
            rows.append({"name": name, **out, "gb_per_s": gbps, **({"of_own": own / out["s"]} if own else {})})
            return out["s"]

        raw = measure("raw torch.load", RAW, folder, "1")
        if "raw16" not in skip:
            measure("raw 16 threads", RAW, folder, "16", base=raw)
        if "audit" not in skip:
            for label, tree in trees if "audit1" not in skip else []:
                prefix = f"{label}: " if label else ""
                measure(f"{prefix}audit (1 process)", AUDIT, folder, base=raw, tree=tree)
                if args.torch_threads > 1:
                    measure(f"{prefix}audit 1 proc {args.torch_threads} thr", AUDIT, folder, str(args.torch_threads),
                            base=raw, tree=tree)
            # N outside the trees, rounds outside N: each tree's N workers measured next to the N raw readers
            # they are held to, and every row again a round later (a noisy disk: the best of the rounds)
            counts = [int(w) for w in args.workers.split(",") if w]
            for turn in range(args.rounds):
                mark = f" #{turn + 1}" if args.rounds > 1 else ""
                for n in counts:
                    raw_n = measure(f"raw {n} readers{mark}", RAW_N, folder, str(n), base=raw)
                    if args.raw_threads:
                        measure(f"raw {n} reader threads{mark}", RAW_N, folder, str(n), "threads", base=raw,
                                own=raw_n, own_name=f"raw {n}")
                    for label, tree in trees:
                        prefix = f"{label}: " if label else ""
                        measure(f"{prefix}audit dask {n}{mark}", DASK, folder, str(n), base=raw, own=raw_n,
                                tree=tree, own_name=f"raw {n}")
                if counts:  # after every round: a run cut short keeps the table of the rounds it finished
                    print(scaling_table(rows, counts, [label for label, _ in trees]), flush=True)
        if "import" not in skip:
            raw_rw = measure("raw read+write", RAW_RW, folder, os.path.join(root, "raw_rw.bin"), base=raw)
            if "write_floor" not in skip:
                measure("raw write", RAW_WRITE, str(size), os.path.join(root, "raw_w.bin"), base=raw)
                measure("raw read || write", RAW_RW_OVERLAP, folder, os.path.join(root, "raw_rw.bin"), base=raw,
                        own=raw_rw)
                measure(f"{trees[-1][0] + ': ' if trees[-1][0] else ''}import no w-behind", IMPORT, folder,
                        os.path.join(root, "imported_nwb.h5"), "no-write-behind", base=raw, own=raw_rw, tree=trees[-1][1])
                os.unlink(os.path.join(root, "imported_nwb.h5"))
            own_both = own_dumps = None
            for label, tree in trees:
                prefix = f"{label}: " if label else ""
                dump = os.path.join(root, f"imported{label}.h5")
                measure(f"{prefix}import", IMPORT, folder, dump, base=raw, own=raw_rw, tree=tree)
                if "compare" in skip:
                    continue
                paths.append(dump)
                if own_both is None:
                    own_both = measure("raw folder+dump", RAW_DUMPS, folder, dump, base=raw)
                measure(f"{prefix}compare foreign", COMPARE, folder, dump, "foreign", base=raw, own=own_both, tree=tree)
                copy = os.path.join(root, f"copy{label}.h5")
                shutil.copy(dump, copy)
                paths.append(copy)
                if own_dumps is None:
                    own_dumps = measure("raw 2 dumps", RAW_DUMPS, "-", dump, copy, base=raw)
                measure(f"{prefix}compare 2 dumps", COMPARE, dump, copy, "dumps", base=raw, own=own_dumps, tree=tree)
                for done in (copy, dump):  # one tree's dumps at a time on the disk
                    paths.remove(done)
                    os.unlink(done)
        print(json.dumps({"gb_on_disk": size, "files": len(paths), "hidden": args.hidden, "rows": rows}))
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
