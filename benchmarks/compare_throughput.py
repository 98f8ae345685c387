"""``alignprobe compare`` throughput and peak memory against raw chunked h5py reads of the same data.

For each size (GB per dump; a pair reads twice that) it writes a train/serve dump pair (bf16,
streams ``final`` 7168 wide and ``eagle3_aux`` 21504 wide) and measures, each in a fresh process,
with the files evicted from the page cache before each run (``--cache warm`` to read from memory):

  raw      h5py read_direct of every stream compare reads, chunk-aligned 8 MB blocks, no conversion
  library  ``alignprobe.compare.compare(train, serve)`` (numpy, a block's slice pairs in parallel threads)
  lib_seq  the same with read-ahead off (READ_AHEAD_BLOCKS = 0): reading and measuring in turn
  lib_1t   the same with one metrics thread (numpy_kernels.MAX_THREADS = 1)
  cuda     ``compare(train, serve, device="cuda")``: where the choice runs it (kernels/choice.py: the
           CPU on 16 cores or more; the device column says which ran)
  cuda_gpu the same with the GPU forced (the choice's threshold out of reach): bits uploaded and
           measured on the GPU
  lib_noexp  the library with no rows explained (explaining.RUNS = 0): what the explanations cost
  lib_8mb  the library with 8 MB pass blocks whatever the threads: what the larger blocks cost
  lib_fused / lib_numpy  the compiled kernels / numpy's at any size (kernels/choice.py picks by the
           pass's size); lib_fused_t8 the compiled ones on 8 threads, lib_fused_b32 / _b16 in 32 / 16 MB
           blocks (64 MB on their 16 threads); lib_swi sys.setswitchinterval(0.0005)
  cli      ``alignprobe compare --train-dump ... --serve-dump ... --json ...``

(``--variants`` picks which; raw always runs)

and prints throughput (stored bytes of both dumps / seconds), the ratio to raw, and peak RSS.
``--trees NAME=PATH,...`` runs each library variant once more per tree (another checkout, e.g. a
``git worktree`` of the commit before a change), on the same files in the same repeat, so a
before/after pair is measured on one machine in one run. With ``--repeats`` above 1 the median
seconds are printed beside the best (the ratio is of the best, as before).

``--profile`` shows where compare's time goes instead (the pass, its waits for the reading thread,
that thread's time inside reads, the mapping search beside it).

``--mapping`` measures the mapping search instead: a train dump holding all N+1 = 62 HF indices
(``layers``) plus the drafter streams against a serve drafter_input of k = 3 slices, searched on
a growing number of sampled rows, with the error of each sample against the search on all rows;
then ``compare`` with ``--max-tokens`` / ``--sample`` against the full compare (time, metric error,
and the standard error the sampled run reports); ``--sampling`` runs only that last part.

    python benchmarks/compare_throughput.py --sizes 1,2,4,8
    python benchmarks/compare_throughput.py --mapping --mapping-gb 2
    python benchmarks/compare_throughput.py --sampling --sampling-gb 0.5
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks._dumps import tokens_for, write_pair  # noqa: E402
from benchmarks._measure import evict_from_page_cache, run_child, warm_page_cache  # noqa: E402

RAW_CHILD = """
import json, sys, time
import h5py, numpy as np
from benchmarks._measure import peak_rss_mb
block_bytes = 8 << 20
nbytes = 0
t0 = time.perf_counter()
for path in sys.argv[1:]:
    with h5py.File(path, "r") as f:
        for ds in f["streams"].values():
            rows, width = ds.shape
            chunk_rows = ds.chunks[0]
            step = max(chunk_rows, block_bytes // (ds.dtype.itemsize * width) // chunk_rows * chunk_rows)
            buf = np.empty((step, width), ds.dtype)
            for s in range(0, rows, step):
                e = min(rows, s + step)
                ds.read_direct(buf, np.s_[s:e], np.s_[0:e - s])
                nbytes += (e - s) * width * ds.dtype.itemsize
print(json.dumps({"seconds": time.perf_counter() - t0, "bytes": nbytes, "peak_mb": peak_rss_mb()}))
"""

LIBRARY_CHILD = """
import json, sys, time
import alignprobe.compare
from benchmarks._measure import peak_rss_mb
kwargs = json.loads(sys.argv[3])
if len(sys.argv) > 4:  # module settings to change first: {"module:NAME": value}
    import importlib
    for key, value in json.loads(sys.argv[4]).items():
        module, name = key.split(":")
        if module == "sys":  # an interpreter setting, e.g. {"sys:setswitchinterval": 0.0005}
            getattr(sys, name)(value)
        else:
            setattr(importlib.import_module(module), name, value)
t0 = time.perf_counter()
result = alignprobe.compare.compare(sys.argv[1], sys.argv[2], **kwargs)
seconds = time.perf_counter() - t0
import os
tree = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(alignprobe.compare.__file__))))
slices = {f"{s.serve_stream}/{m.label}": {"cosine_mean": m.cosine_mean, "rel_rms": m.rel_rms, "tokens": m.tokens,
          "cosine_mean_se": m.cosine_mean_se, "rel_rms_se": m.rel_rms_se} for s in result.streams for m in s.slices}
print(json.dumps({"seconds": seconds, "peak_mb": peak_rss_mb(), "verdict": result.verdict, "slices": slices, "tree": tree,
                  "device": result.options.get("device"),
                  "samples": result.tokens.compared_samples,
                  "multiplier": result.options.get("interval_multiplier")}))
"""

PROFILE_CHILD = """
import importlib, json, sys, threading, time
from alignprobe.dump.reader import Dump
C = importlib.import_module("alignprobe.compare.compare")
S = importlib.import_module("alignprobe.compare.streaming")
F = importlib.import_module("alignprobe.compare.feeding")
busy = {"read-ahead": 0.0, "mapping": 0.0, "main": 0.0}
marks = {}
read_raw = Dump.read_raw
def timed_read_raw(self, *args, **kwargs):
    t0 = time.perf_counter()
    try:
        return read_raw(self, *args, **kwargs)
    finally:
        name = threading.current_thread().name
        key = "read-ahead" if "read-ahead" in name else "mapping" if "mapping" in name else "main"
        busy[key] += time.perf_counter() - t0
Dump.read_raw = timed_read_raw
def wrapped(name, fn):
    def call(*args, **kwargs):
        marks[name + "_start"] = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            marks[name + "_end"] = time.perf_counter()
    return call
S.measure = wrapped("pass", S.measure)
feeding = [0.0]
feed = S.feed
def timed_feed(*args):
    t0 = time.perf_counter()
    out = feed(*args)
    feeding[0] += time.perf_counter() - t0
    return out
S.feed = timed_feed
F.read_into = wrapped("own_search", F.read_into)
waits = [0.0]
read_ahead = S.read_ahead
def timed_read_ahead(loads, depth):
    it = read_ahead(loads, depth)
    while True:
        t0 = time.perf_counter()
        try:
            item = next(it)
        except StopIteration:
            return
        waits[0] += time.perf_counter() - t0
        yield item
S.read_ahead = timed_read_ahead
t0 = time.perf_counter()
C.compare(sys.argv[1], sys.argv[2], tokenizer=None)
total = time.perf_counter() - t0
print(json.dumps({
    "seconds": total,
    "before_pass": marks["pass_start"] - t0,
    "pass": marks["pass_end"] - marks["pass_start"],
    "pass_waiting_for_reads": waits[0],
    "reading_thread_reading": busy["read-ahead"],
    "mapping_fed": feeding[0],
    "mapping_own": marks.get("own_search_end", 0.0) - marks.get("own_search_start", 0.0),
    "mapping_reading": busy["mapping"] + busy["main"],
    "after_pass": t0 + total - marks["pass_end"],
}))
"""

CLI_CHILD = """
import json, resource, subprocess, sys, time
t0 = time.perf_counter()
done = subprocess.run(["alignprobe", "compare", "--train-dump", sys.argv[1], "--serve-dump", sys.argv[2],
                       "--json", sys.argv[3]], capture_output=True, text=True)
seconds = time.perf_counter() - t0
if done.returncode not in (0, 1):
    raise SystemExit(done.stderr)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(json.dumps({"seconds": seconds, "peak_mb": peak, "exit": done.returncode}))
"""


def _prepare(paths: list[str], cache: str) -> None:
    for p in paths:
        (evict_from_page_cache if cache == "cold" else warm_page_cache)(p)


VARIANTS = {  # name: (compare() keyword arguments, module settings)
    "library": ({}, {}),
    "lib_seq": ({}, {"alignprobe.compare.streaming:READ_AHEAD_BLOCKS": 0}),
    "lib_1t": ({}, {"alignprobe.compare.kernels.numpy_kernels:MAX_THREADS": 1}),
    "cuda": ({"device": "cuda"}, {}),
    "cuda_gpu": ({"device": "cuda"}, {"alignprobe.compare.kernels.choice:CPU_KEEPS_UP_CORES": 1 << 30}),
    # where compare's cost over a tree without explanations goes: the same compare with no rows
    # explained (no sample runs chosen: nothing read beside the pass, nothing fitted), and with the
    # pass's blocks at 8 MB whatever the threads (block_bytes_for grows them to 32 MB on 8 threads)
    "lib_noexp": ({}, {"alignprobe.compare.explaining:RUNS": 0}),
    "lib_8mb": ({"block_bytes": 8 << 20}, {}),
    # the CPU kernels' tuning: metrics threads past 8
    "lib_t12": ({}, {"alignprobe.compare.kernels.numpy_kernels:MAX_THREADS": 12}),
    "lib_t16": ({}, {"alignprobe.compare.kernels.numpy_kernels:MAX_THREADS": 16}),
    "lib_16mb": ({"block_bytes": 16 << 20}, {}),
    # issue 24's pass: a pair's rows not split over idle threads; the direct reads in one thread;
    # multi-chunk streams read by h5py
    "lib_nosplit": ({}, {"alignprobe.compare.kernels.numpy_kernels:MIN_TASK_ROWS": 1 << 30}),
    "lib_1read": ({}, {"alignprobe.dump.direct_read:READ_THREADS": 1}),
    "lib_h5wide": ({}, {"alignprobe.dump.direct_read:MIN_SEGMENT_BYTES": 1 << 40}),
    # the blocks the pass holds (its peak memory): one block read ahead, one block waiting to be fed
    "lib_ra1": ({}, {"alignprobe.compare.streaming:READ_AHEAD_BLOCKS": 1}),
    "lib_feed1": ({}, {"alignprobe.compare.streaming:MAX_FEEDING": 1}),
    # issue 24's GIL: the compiled GIL-free kernels (kernels/fused_kernels.py) at any size, on 8 threads
    # instead of 16; numpy's kernels at any size; the compiled ones in 32 / 16 MB blocks; the interpreter
    # handing the GIL on after 0.5 ms, not 5
    "lib_fused": ({}, {"alignprobe.compare.kernels.choice:FUSED_MIN_VALUES": 0}),
    "lib_fused_t8": ({}, {"alignprobe.compare.kernels.choice:FUSED_MIN_VALUES": 0,
                          "alignprobe.compare.kernels.fused_kernels:MAX_THREADS": 8}),
    "lib_numpy": ({}, {"alignprobe.compare.kernels.choice:FUSED_MIN_VALUES": 1 << 62}),
    # the compiled kernels' blocks (64 MB on 16 threads): what the block costs in memory and speed
    "lib_fused_b32": ({"block_bytes": 32 << 20}, {"alignprobe.compare.kernels.choice:FUSED_MIN_VALUES": 0}),
    "lib_fused_b16": ({"block_bytes": 16 << 20}, {"alignprobe.compare.kernels.choice:FUSED_MIN_VALUES": 0}),
    "lib_swi": ({}, {"sys:setswitchinterval": 0.0005}),
}


def throughput(sizes: list[float], folder: str, caches: list[str], repeats: int, variants: list[str],
               trees: dict[str, str] | None = None) -> None:
    """``trees``: name -> checkout: each library variant runs once per tree (named variant@tree).
    ``caches``: cold and / or warm, each measured on the same pair (written once per size)."""
    width = max([8] + [len(f"{v}@{t}") for v in variants for t in (trees or {})])
    print(f"{'GB/dump':>7s} {'cache':5s} {'reader':{width}s} {'seconds':>8s} {'GB/s':>6s} {'vs raw':>7s} {'peak RSS':>9s}"
          + (f" {'median s':>8s}" if repeats > 1 else "") + "  device")
    runners = [(name, None) for name in variants] if not trees else [
        (f"{name}@{tree}", path) for tree, path in trees.items() for name in variants]
    for gb in sizes:
        train, serve = os.path.join(folder, f"train-{gb:g}.h5"), os.path.join(folder, f"serve-{gb:g}.h5")
        facts = write_pair(train, serve, tokens_for(gb))
        for cache in caches:
            _measure_pair(gb, train, serve, cache, repeats, runners, folder, width)
        print(f"        ({facts['tokens']} tokens, {facts['samples']} samples a dump, pair written in {facts['seconds']:.0f} s)")
        for p in (train, serve):
            os.remove(p)


def _measure_pair(gb, train, serve, cache, repeats, runners, folder, width) -> None:
    total_bytes = None
    runs: dict[str, list[dict]] = {"raw": []} | {label: [] for label, _ in runners}
    for _ in range(repeats):
        _prepare([train, serve], cache)
        raw = run_child(RAW_CHILD, train, serve)
        total_bytes = raw["bytes"]
        runs["raw"].append(raw)
        for label, tree in runners:
            name = label.split("@")[0]
            repo = {"tree": os.path.abspath(tree)} if tree else {}
            _prepare([train, serve], cache)
            if name == "cli":
                runs[label].append(run_child(CLI_CHILD, train, serve, os.path.join(folder, "result.json"), **repo))
            else:
                kwargs, settings = VARIANTS[name]
                r = run_child(LIBRARY_CHILD, train, serve, json.dumps(kwargs), json.dumps(settings), **repo)
                if tree and os.path.realpath(r["tree"]) != os.path.realpath(tree):
                    raise SystemExit(f"--trees {label}: alignprobe was imported from {r['tree']}, not {tree}")
                runs[label].append(r)
    best = {name: min(r, key=lambda x: x["seconds"]) for name, r in runs.items()}
    raw_rate = total_bytes / best["raw"]["seconds"]
    for name, r in best.items():
        rate = total_bytes / r["seconds"]
        peak = max(x["peak_mb"] for x in runs[name])
        median = statistics.median(x["seconds"] for x in runs[name])
        print(f"{gb:7g} {cache:5s} {name:{width}s} {r['seconds']:8.2f} {rate / 1e9:6.2f} {rate / raw_rate:6.2f}x "
              f"{peak:7.0f}MB" + (f" {median:8.2f}" if repeats > 1 else "") + f"  {r.get('device', '')}", flush=True)
    _same_results({name: r for name, r in best.items() if "verdict" in r})


def _same_results(results: dict[str, dict]) -> None:
    """Whether every compare run gave the first one's verdict and slice figures (largest relative difference)."""
    if len(results) < 2:
        return
    (first, ref), *others = results.items()
    for name, r in others:
        worst = max((abs(m[k] - ref["slices"][s][k]) / max(abs(ref["slices"][s][k]), 1e-300)
                     for s, m in r["slices"].items() for k in ("cosine_mean", "rel_rms")), default=0.0)
        same = r["verdict"] == ref["verdict"] and r["slices"].keys() == ref["slices"].keys()
        print(f"        {name} against {first}: verdict {'same' if same else 'DIFFERENT'} ({r['verdict']}), "
              f"slices' cosine_mean / rel_rms within {worst:.1e} (relative)")


def profile(sizes: list[float], folder: str, cache: str) -> None:
    """Where compare's time goes: the streaming pass, how long it waited for the reading thread, how
    long that thread spent inside reads, and the mapping search: fed from the pass's blocks (time
    in the pass's thread), or reading its own rows beside it (seconds, one run each)."""
    print(f"{'GB/dump':>7s} {'raw s':>6s} {'compare s':>9s} {'before':>7s} {'pass':>6s} {'waiting':>8s} "
          f"{'reading':>8s} {'map fed':>8s} {'map own':>8s} {'map reads':>9s} {'after':>6s}")
    for gb in sizes:
        train, serve = os.path.join(folder, f"train-{gb:g}.h5"), os.path.join(folder, f"serve-{gb:g}.h5")
        write_pair(train, serve, tokens_for(gb))
        _prepare([train, serve], cache)
        raw = run_child(RAW_CHILD, train, serve)
        _prepare([train, serve], cache)
        p = run_child(PROFILE_CHILD, train, serve)
        print(f"{gb:7g} {raw['seconds']:6.2f} {p['seconds']:9.2f} {p['before_pass']:7.2f} {p['pass']:6.2f} "
              f"{p['pass_waiting_for_reads']:8.2f} {p['reading_thread_reading']:8.2f} {p['mapping_fed']:8.2f} "
              f"{p['mapping_own']:8.2f} {p['mapping_reading']:9.2f} {p['after_pass']:6.2f}", flush=True)
        for path in (train, serve):
            os.remove(path)


def mapping_cost(gigabytes: float, folder: str, cache: str, devices: list[str]) -> None:
    import time

    import numpy as np

    from alignprobe.compare.kernels import kernels_for
    from alignprobe.compare.mapping import MappingRequest, sample_rows, search_mappings, train_candidates
    from alignprobe.compare.pairing import pair_samples
    from alignprobe.dump import open_dump

    train, serve = os.path.join(folder, "train-all.h5"), os.path.join(folder, "serve-drafter.h5")
    facts = write_pair(train, serve, tokens_for(gigabytes, "all"), train_streams="all")
    print(f"train dump {facts['train_gb']:.2f} GB (layers: 62 x 7168, + final, eagle3_aux), "
          f"serve {facts['serve_gb']:.2f} GB, {facts['tokens']} tokens")
    with open_dump(train) as tr, open_dump(serve) as sv:
        _, segments = pair_samples(tr, sv)
        candidates = train_candidates(tr)
        sizes = [n for n in (256, 512, 1024, 2048, 4096) if n < facts["tokens"]] + [facts["tokens"]]
        reference = None
        for device in devices:
            kernels = kernels_for(device)
            results = {}
            print(f"\nmapping search of eagle3_aux (k=3) against {len(candidates)} train slices, {cache} cache, "
                  f"device {kernels.name}")
            print(f"{'rows':>8s} {'seconds':>8s} {'max |cos - cos_all|':>20s} {'same match':>10s}")
            for rows in reversed(sizes):  # all rows first: the reference
                _prepare([train, serve], cache)
                sampled = sample_rows(segments, rows)
                t0 = time.perf_counter()
                (ms,) = search_mappings(tr, sv, [MappingRequest("eagle3_aux", [], "drafter_input")], 7168, candidates,
                                        sampled, tie_cosine=1e-4, kernels=kernels)
                results[rows] = (time.perf_counter() - t0, np.array(ms.cosine), [m.best_label for m in ms.matches],
                                 sampled.rows)
            kernels.close()
            reference = reference or results[facts["tokens"]]  # the first device's search on all rows
            for rows in sizes:
                seconds, cos, labels, used = results[rows]
                print(f"{used:8d} {seconds:8.2f} {np.abs(cos - reference[1]).max():20.2e} "
                      f"{str(labels == reference[2]):>10s}  {labels}")

    os.remove(train)
    os.remove(serve)
    sampling_error(gigabytes / 4, folder, cache)


def sampling_error(gigabytes: float, folder: str, cache: str) -> None:
    """``compare`` with ``--max-tokens`` / ``--sample`` against the full compare: time, the error of each
    sampled metric, and the 95% interval the sampled run reports for it (``interval_multiplier`` standard
    errors: Student's t over the compared samples)."""
    import json

    print("\ncompare with token sampling (train: drafter streams only), against the full compare")
    train, serve = os.path.join(folder, "train-drafter.h5"), os.path.join(folder, "serve-drafter.h5")
    small = write_pair(train, serve, tokens_for(gigabytes), train_streams="drafter")
    print(f"({small['train_gb']:.2f} GB a dump, {small['tokens']} tokens, {small['samples']} samples; the noise "
          "level differs from sample to sample, so a sample's metrics differ from the whole's)")
    print("per option, over the 4 compared slices: the largest error against the full compare, the largest")
    print("95% half-width reported, and how many slices' full value lies within measured ± that half-width")
    full = None
    print(f"{'option':18s} {'seconds':>8s} {'tokens':>7s} {'samples':>7s} {'max |d cos_mean|':>17s} "
          f"{'95% ±':>9s} {'in':>4s} {'max rel d rel_rms':>18s} {'95% ±/rms':>12s} {'in':>4s}")
    t, n = small["tokens"], small["samples"]
    options = [("full", {})] + [(f"--max-tokens {t // d}", {"max_tokens": t // d}) for d in (2, 8, 32)] + [
        (f"--sample {max(1, n // d)}", {"sample": max(1, n // d)}) for d in (2, 4)]
    for label, kwargs in options:
        _prepare([train, serve], cache)
        r = run_child(LIBRARY_CHILD, train, serve, json.dumps(kwargs))
        if full is None:
            full = r
        ref = full["slices"]
        d_cos = max(abs(m["cosine_mean"] - ref[k]["cosine_mean"]) for k, m in r["slices"].items())
        d_rms = max(abs(m["rel_rms"] / ref[k]["rel_rms"] - 1) for k, m in r["slices"].items())
        tokens = min(m["tokens"] for m in r["slices"].values())
        se_cos = se_rms = "-"
        in_cos = in_rms = "-"
        if all(m["cosine_mean_se"] is not None for m in r["slices"].values()):
            z = r["multiplier"]
            se_cos = f"{max(z * float(m['cosine_mean_se']) for m in r['slices'].values()):9.2e}"
            se_rms = f"{max(z * float(m['rel_rms_se']) / m['rel_rms'] for m in r['slices'].values()):12.2%}"
            in_cos = sum(abs(m["cosine_mean"] - ref[k]["cosine_mean"]) <= z * float(m["cosine_mean_se"])
                         for k, m in r["slices"].items())
            in_rms = sum(abs(m["rel_rms"] - ref[k]["rel_rms"]) <= z * float(m["rel_rms_se"])
                         for k, m in r["slices"].items())
        print(f"{label:18s} {r['seconds']:8.2f} {tokens:7d} {r['samples']:7d} {d_cos:17.2e} {se_cos:>9s} "
              f"{in_cos!s:>4s} {d_rms:18.3%} {se_rms:>12s} {in_rms!s:>4s}")
    for p in (train, serve):
        os.remove(p)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1,2", help="GB per dump, comma separated")
    p.add_argument("--dir", default=None)
    p.add_argument("--cache", default="cold", help="cold, warm or cold,warm (each on the same pair)")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--variants", default="library,lib_seq,lib_1t,cli",
                   help=f"comma separated, of {', '.join([*VARIANTS, 'cli'])} (raw always runs)")
    p.add_argument("--trees", default="",
                   help="NAME=PATH,...: run each library variant in each of these checkouts (before/after in one run)")
    p.add_argument("--profile", action="store_true",
                   help="where compare's time goes at each --sizes: pass, waiting for reads, reading, mapping")
    p.add_argument("--mapping", action="store_true", help="measure the mapping search and token sampling instead")
    p.add_argument("--devices", default="cpu", help="--mapping: devices to search on, e.g. cpu,cuda")
    p.add_argument("--mapping-gb", type=float, default=2.0, help="size of the all-layers train dump")
    p.add_argument("--sampling", action="store_true",
                   help="measure only --max-tokens / --sample against the full compare, with the reported error")
    p.add_argument("--sampling-gb", type=float, default=0.5, help="size of each dump of the --sampling pair")
    args = p.parse_args()
    folder = os.path.abspath(args.dir or tempfile.mkdtemp(prefix="alignprobe-bench-"))
    os.makedirs(folder, exist_ok=True)
    try:
        if args.profile:
            profile([float(x) for x in args.sizes.split(",")], folder, args.cache)
        elif args.sampling:
            sampling_error(args.sampling_gb, folder, args.cache)
        elif args.mapping:
            mapping_cost(args.mapping_gb, folder, args.cache, args.devices.split(","))
        else:
            trees = dict(t.split("=", 1) for t in args.trees.split(",")) if args.trees else None
            throughput([float(s) for s in args.sizes.split(",")], folder, args.cache.split(","), args.repeats, args.variants.split(","),
                       trees)
    finally:
        if not args.dir:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
