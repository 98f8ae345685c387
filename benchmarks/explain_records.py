"""Whether two trees explain the test suites' cases alike: every SliceExplanation the explanation and
holdout suites make, recorded in each tree and compared (a change to the fits' arithmetic must name
the same winner, runner-up and fits everywhere; this says how far their figures moved).

As a pytest plugin it appends one JSON line per explained slice (winner, runner-up, every fit tried:
its figures as repr(), params, summary) to $EXPLAIN_RECORDS; run it once in each tree (PYTHONPATH
puts the tree's alignprobe first), then ``diff``:

    cd TREE && EXPLAIN_RECORDS=/tmp/a.jsonl PYTHONPATH=TREE:/path/to/benchmarks python -m pytest \\
        -p explain_records -m "slow or not slow" tests/test_explain*.py tests/test_diagnosis_holdout*.py
    python benchmarks/explain_records.py /tmp/a.jsonl /tmp/b.jsonl

The diff compares names, fits, params and texts exactly (a summary's figures aside) and each figure
as a float: how many changed, the largest relative change per field.
"""

from __future__ import annotations

import collections
import json
import math
import os
import re
import sys


def _clean(v):
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):  # numpy scalars
        return _clean(v.item())
    return v


def _fit(f):
    return None if f is None else {"name": f.name, "fits": f.fits, "held": repr(f.held_out_rel_rms),
                                   "cos": repr(f.held_out_cosine), "fit": repr(f.fit_rel_rms), "rows": f.held_out_rows,
                                   "params": _clean(f.params), "summary": f.summary}


if "EXPLAIN_RECORDS" in os.environ:  # loaded by pytest as a plugin
    import pytest

    import alignprobe.compare.explain as explain

    _node = {"id": None}
    _explain_slice = explain.explain_slice

    def _recorded(rows, j, stream, *args, **kwargs):
        e = _explain_slice(rows, j, stream, *args, **kwargs)
        with open(os.environ["EXPLAIN_RECORDS"], "a") as fh:
            fh.write(json.dumps({"node": _node["id"], "stream": stream, "slice": j, "winner": _fit(e.winner),
                                 "runner_up": _fit(e.runner_up), "tried": [_fit(f) for f in e.tried]}) + "\n")
        return e

    explain.explain_slice = _recorded  # explain_stream looks it up here

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(item):
        _node["id"] = item.nodeid
        yield


NUMBER = re.compile(r"[-+]?\d[\d.e+-]*")


def diff(first: str, second: str) -> None:
    def load(path):
        out = collections.defaultdict(list)
        for line in open(path):
            r = json.loads(line)
            out[r["node"]].append(r)
        return out

    a, b = load(first), load(second)
    differ: list = []
    worst: dict[str, tuple] = {}
    counts = {"floats": 0, "changed": 0}

    def walk(x, y, path):
        if isinstance(x, dict) and isinstance(y, dict):
            if x.keys() != y.keys():
                differ.append((path, "keys", sorted(set(x) ^ set(y))))
                return
            for k in x:
                walk(x[k], y[k], f"{path}.{k}")
        elif isinstance(x, list) and isinstance(y, list):
            if len(x) != len(y):
                differ.append((path, "length", len(x), len(y)))
                return
            for i, (u, v) in enumerate(zip(x, y)):
                walk(u, v, f"{path}[{i}]")
        elif isinstance(x, str) and isinstance(y, str):
            try:
                u, v = float(x), float(y)
            except ValueError:
                if x != y and NUMBER.sub("#", x) != NUMBER.sub("#", y):
                    differ.append((path, x, y))
                return
            counts["floats"] += 1
            if math.isfinite(u) and math.isfinite(v):
                if u != v:
                    counts["changed"] += 1
                    field = re.sub(r"\[\d+\]", "", path.rsplit(".", 1)[-1])
                    change = abs(u - v) / max(abs(u), 1e-300)
                    if change > worst.get(field, (0.0,))[0]:
                        worst[field] = (change, u, v, path)
            elif repr(u) != repr(v):
                differ.append((path, x, y))
        elif x != y:
            differ.append((path, x, y))

    nodes = sorted(set(a) | set(b), key=str)
    for node in nodes:
        if len(a.get(node, [])) != len(b.get(node, [])):
            differ.append((node, "slices", len(a.get(node, [])), len(b.get(node, []))))
            continue
        for i, (x, y) in enumerate(zip(a[node], b[node])):
            walk(x, y, f"{node}#{i}")
    print(f"{len(nodes)} tests, {sum(map(len, a.values()))} vs {sum(map(len, b.values()))} slices explained; "
          f"{counts['floats']} figures, {counts['changed']} changed")
    print(f"differences other than figures: {len(differ)}")
    for d in differ[:40]:
        print("  ", d)
    print("largest relative change of a figure, by field:")
    for field, (change, u, v, _path) in sorted(worst.items(), key=lambda kv: -kv[1][0]):
        print(f"  {field:28s} {change:.1e}  ({u!r} -> {v!r})")


if __name__ == "__main__":
    diff(sys.argv[1], sys.argv[2])
