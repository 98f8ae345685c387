"""The explanations' fits alone (issue 11): what they cost beside compare's streaming pass.

Writes one synthetic bf16 dump pair (benchmarks/_dumps.write_pair, ``--gb`` per dump), then in a
fresh child process per tree and round: builds compare's ExplainSamples for the pair as compare()
does, reads its rows (timed apart: "read"), and times ``ExplainSamples.explain`` with every row
already in memory ("fits"). Trees (``--trees name=PATH,...``: checkouts or ``pip --target`` dirs)
run interleaved, round after round, so a busy machine's load falls on all of them alike; each
prints its median. The child also prints every slice's winner, runner-up and their held-out
rel-RMS, and the script says whether the trees agree on them; and the seconds spent in each
explanation's ``fit`` (the rest of ``explain``: selecting the winner, the rows' finiteness check).

``--profile``: one cProfile run of the fits in this tree instead, its top functions by own time.

    python benchmarks/explain_fits.py --gb 1 --rounds 5 --trees main=/tmp/fitcost-main,branch=.
    python benchmarks/explain_fits.py --gb 1 --profile
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks._dumps import tokens_for, write_pair  # noqa: E402
from benchmarks._measure import run_child  # noqa: E402

CHILD = r"""
import cProfile, io, json, pstats, sys, time
from alignprobe.compare.explaining import ExplainSamples
from alignprobe.compare.pairing import pair_samples
from alignprobe.compare.plan import pass_streams, plan_streams, train_geometry
from alignprobe.compare.policy import Policy
from alignprobe.dump import open_dump

import numpy as np
train, serve, profile = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
import collections
import alignprobe.compare.explain as explain
split = collections.defaultdict(float)  # seconds in each explanation's fit()
for e in explain.EXPLANATIONS:
    def timed(self, rows, j, _fit=type(e).fit):
        t = time.perf_counter()
        try:
            return _fit(self, rows, j)
        finally:
            split[self.name] += time.perf_counter() - t
    type(e).fit = timed
# numpy 2.4 sets np.unique and np.quantile up on their first call (~20 ms each, once a process);
# compare pays that before its fits too (pairing, sampling), so it is not the fits' cost
np.unique(np.arange(3)), np.quantile(np.arange(3.0), 0.5)
policy = Policy()
with open_dump(train) as tr, open_dump(serve) as sv:
    _, num_layers = train_geometry(tr)
    _, segments = pair_samples(tr, sv)
    plans = plan_streams(tr, sv, train_geometry(tr)[0], [])
    samples = ExplainSamples(tr, sv, plans, segments, num_layers, pass_streams(plans))
    t0 = time.perf_counter()
    samples._read(samples.own_serve, samples.own_keys)
    read = time.perf_counter() - t0
    samples.own_serve, samples.own_keys = [], []  # read above: explain() fits only
    profiler = cProfile.Profile() if profile else None
    t0 = time.perf_counter()
    if profiler:
        profiler.enable()
    explained = samples.explain(policy)
    if profiler:
        profiler.disable()
    fits = time.perf_counter() - t0
table = ""
if profiler:
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(25)
    table = out.getvalue()
results = {f"{s}[{e.serve_slice}]": {"winner": e.winner.name, "runner_up": e.runner_up.name if e.runner_up else None,
                                      "tried": [[f.name, f.fits, f.held_out_rel_rms, f.held_out_cosine, f.fit_rel_rms]
                                                for f in e.tried]}
           for s, es in explained.items() for e in es}
print(json.dumps({"read": read, "fits": fits, "rows": int(samples.starts[-1]), "results": results, "profile": table,
                  "split": split}))
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gb", type=float, default=1.0, help="GB per dump (default 1)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--trees", default="this=.", help="name=PATH,... (default: this checkout)")
    p.add_argument("--profile", action="store_true")
    p.add_argument("--dir", default=None, help="where the pair is written (default: a temporary folder in /tmp)")
    p.add_argument("--pair", default=None, help="TRAIN,SERVE: an existing pair (written by _dumps.write_pair) instead")
    args = p.parse_args()
    trees = [item.split("=", 1) for item in args.trees.split(",")]
    with tempfile.TemporaryDirectory(dir=args.dir) as folder:
        if args.pair:
            train, serve = args.pair.split(",")
            print(f"pair: {train}, {serve}; load average {os.getloadavg()[0]:.1f}", flush=True)
        else:
            train, serve = os.path.join(folder, "train.h5"), os.path.join(folder, "serve.h5")
            facts = write_pair(train, serve, tokens_for(args.gb))
            print(f"pair: {facts['tokens']} tokens, {facts['samples']} samples, {facts['train_gb']:.2f} GB a dump; "
                  f"load average {os.getloadavg()[0]:.1f}", flush=True)
        if args.profile:
            out = run_child(CHILD, train, serve, "1", tree=trees[0][1])
            print(f"read {out['read']:.2f} s, fits {out['fits']:.2f} s (profiled), {out['rows']} rows")
            print(out["profile"])
            return
        times: dict[str, list[float]] = {name: [] for name, _ in trees}
        splits: dict[str, list[dict]] = {name: [] for name, _ in trees}
        results: dict[str, dict] = {}
        for r in range(args.rounds):
            for name, path in trees:
                out = run_child(CHILD, train, serve, "0", tree=path)
                times[name].append(out["fits"])
                splits[name].append(out["split"])
                results.setdefault(name, out["results"])
                print(f"round {r + 1} {name:>10s}: fits {out['fits']:.3f} s (read {out['read']:.2f} s, {out['rows']} rows)"
                      f"  load {os.getloadavg()[0]:.1f}", flush=True)
        for name, _ in trees:
            print(f"{name:>10s}: fits median {statistics.median(times[name]):.3f} s, "
                  f"min {min(times[name]):.3f} s over {args.rounds}")
            each = {e: statistics.median(r.get(e, 0.0) for r in splits[name]) for e in splits[name][0]}
            print(" " * 12 + "medians in fit(): " + ", ".join(f"{e} {v:.3f}" for e, v in
                                                             sorted(each.items(), key=lambda kv: -kv[1]) if v >= 0.0005))
        first = trees[0][0]
        for name, _ in trees[1:]:
            same, worst = _agree(results[first], results[name])
            print(f"{name} vs {first}: every slice's winner, runner-up and tried explanations (and which fit) "
                  f"{'the same' if same else 'DIFFER'}; their rel-RMS and cosines within {worst:.1e} (relative)")
        for k, v in sorted(results[first].items()):
            held = {f[0]: f[2] for f in v["tried"]}
            print(f"  {k}: winner {v['winner']} {held.get(v['winner'], float('nan')):.4g}, "
                  f"runner-up {v['runner_up']} {held.get(v['runner_up'], float('nan')):.4g}")


def _agree(a: dict, b: dict) -> tuple[bool, float]:
    """(the same names, fits and winners; the largest relative difference of their figures)."""
    same, worst = a.keys() == b.keys(), 0.0
    for k in a.keys() & b.keys():
        x, y = a[k], b[k]
        same &= x["winner"] == y["winner"] and x["runner_up"] == y["runner_up"]
        same &= [f[:2] for f in x["tried"]] == [f[:2] for f in y["tried"]]
        for f, g in zip(x["tried"], y["tried"]):
            for u, v in zip(f[2:], g[2:]):
                if math.isfinite(u) and math.isfinite(v):
                    worst = max(worst, abs(u - v) / max(abs(u), 1e-30))
                else:
                    same &= repr(u) == repr(v)
    return same, worst

if __name__ == "__main__":
    main()
