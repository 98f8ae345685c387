"""Where ``compare``'s threads spend the pass, by sampling: every few ms each thread's innermost
alignprobe line (sys._current_frames) is counted, so a many-core machine shows which thread, and which
line in it, holds the pass back (cProfile sees the main thread only). Each thread's CPU seconds
(/proc/self/task/<tid>/stat) are printed beside its wall share.

    python benchmarks/compare_threads.py --gb 2 --cache warm
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks._dumps import tokens_for, write_pair  # noqa: E402
from benchmarks._measure import evict_from_page_cache, run_child, warm_page_cache  # noqa: E402

CHILD = """
import collections, json, os, sys, threading, time
import alignprobe.compare
interval = float(sys.argv[3])
counts = collections.Counter()
per_thread = collections.Counter()
names = {}
stop = threading.Event()
def where(frame):
    inner = None
    while frame is not None:
        code = frame.f_code
        if "alignprobe" in code.co_filename and inner is None:
            inner = f"{code.co_filename.split('alignprobe/')[-1]}:{frame.f_lineno} {code.co_name}"
        frame = frame.f_back
    return inner or "(outside alignprobe)"
def sample():
    me = threading.get_ident()
    while not stop.wait(interval):
        live = {t.ident: t for t in threading.enumerate()}
        for ident, frame in sys._current_frames().items():
            if ident == me or ident not in live:
                continue
            name = live[ident].name.rstrip("0123456789_").rstrip("-_") or "main"
            names[live[ident].native_id] = name
            counts[(name, where(frame))] += 1
            per_thread[name] += 1
cpu = collections.Counter()
def thread_cpu():
    tick = os.sysconf("SC_CLK_TCK")
    for tid in os.listdir("/proc/self/task"):
        try:
            fields = open(f"/proc/self/task/{tid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        name = names.get(int(tid))
        if name:  # the last reading of each live thread: its CPU seconds so far
            cpu[(name, tid)] = (int(fields[11]) + int(fields[12])) / tick
sampler = threading.Thread(target=sample, name="sampler", daemon=True)
sampler.start()
t0 = time.perf_counter()
res0 = os.times()
poller_stop = threading.Event()
def poll_cpu():
    while not poller_stop.wait(0.05):
        thread_cpu()
poller = threading.Thread(target=poll_cpu, name="sampler-cpu", daemon=True)
poller.start()
result = alignprobe.compare.compare(sys.argv[1], sys.argv[2], tokenizer=None, device=sys.argv[4])
seconds = time.perf_counter() - t0
res1 = os.times()
stop.set(); poller_stop.set(); sampler.join(); poller.join()
by_name = collections.Counter()
for (name, _), value in cpu.items():
    by_name[name] += value
print(json.dumps({"seconds": seconds, "user": res1.user - res0.user, "sys": res1.system - res0.system,
                  "verdict": result.verdict, "samples": per_thread, "cpu": by_name,
                  "lines": [[n, w, c] for (n, w), c in counts.most_common(60)]}))
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gb", type=float, default=1.0, help="GB per dump")
    p.add_argument("--cache", choices=["cold", "warm"], default="warm")
    p.add_argument("--interval", type=float, default=0.002, help="seconds between samples")
    p.add_argument("--top", type=int, default=40)
    p.add_argument("--device", default="cpu")
    p.add_argument("--dir", default=None)
    args = p.parse_args()
    folder = os.path.abspath(args.dir or tempfile.mkdtemp(prefix="alignprobe-threads-"))
    os.makedirs(folder, exist_ok=True)
    train, serve = os.path.join(folder, "train.h5"), os.path.join(folder, "serve.h5")
    try:
        write_pair(train, serve, tokens_for(args.gb))
        for path in (train, serve):
            (evict_from_page_cache if args.cache == "cold" else warm_page_cache)(path)
        r = run_child(CHILD, train, serve, str(args.interval), args.device)
        print(f"compare {args.gb:g} GB a dump, {args.cache}, device {args.device}: {r['seconds']:.2f} s wall, {r['user']:.2f} s user, "
              f"{r['sys']:.2f} s sys, {r['verdict']}")
        total = max(r["samples"].values())
        print(f"{'thread':28s} {'samples':>8s} {'CPU s':>7s}")
        for name, n in sorted(r["samples"].items(), key=lambda kv: -kv[1]):
            print(f"{name:28s} {n:8d} {r['cpu'].get(name, 0.0):7.2f}")
        print(f"\n{'thread':28s} {'share':>6s}  line (innermost alignprobe frame)")
        for name, line, n in r["lines"][: args.top]:
            print(f"{name:28s} {n / total:6.1%}  {line}")
    finally:
        if args.dir:
            for path in (train, serve):
                if os.path.exists(path):
                    os.remove(path)
        else:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
