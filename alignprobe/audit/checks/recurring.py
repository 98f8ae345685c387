"""A model's own outliers: rows of one token (or one position) far above their sample's norm, alike in many samples.

Trained models give a few tokens a state several times the others' norm (massive activations: a
delimiter, a prefix token), the same in every sample that holds it in the same context. Those rows lie
beyond the dataset's spread, yet they are what the model computes, not a data fault. So the scan
tallies every row at least ``HIGH_OCTAVES`` above its own sample's median norm in that slice, by token
id and by position (not at position 0: it has its own distribution, where every position is 0): in
how many samples, and in which histogram bins. A sample scaled as a whole is never tallied (its own
median moved with it), nor is any group once ``MAX_GROUPS`` are held, so their rows stay a data fault.

At the end a group recurs when at least ``norm_outlier_recurring_samples`` of its rows beyond the
outlier limit lie within ``SAME_OCTAVES`` of each other: the same state again and again, where a
fault would scatter. Its rows outside that band (the same token in a scaled sample) stay a fault.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

HIGH_OCTAVES = 1.0  # 2x the sample's own median: below the default outlier limit (4x the dataset's)
SAME_OCTAVES = 0.5  # the spread of one recurring state across samples (context moves it a little)
MAX_GROUPS = 256  # tokens (and positions) held a slice, first seen first: the partial stays bounded
NAMED = 3  # samples named a recurring group
KINDS = ("token", "position")


def empty() -> dict:
    return {kind: {} for kind in KINDS}


def tally(table: dict, sample: str, bins: np.ndarray, tokens: np.ndarray, positions: np.ndarray | None) -> None:
    """One sample's high rows (histogram bins, token ids, positions; ``None``: do not group by position)."""
    for kind, keys in (("token", tokens), ("position", positions)):
        if keys is None:
            continue
        seen = set()
        for key, b in zip(keys.tolist(), bins.tolist()):
            group = _group(table[kind], str(key))
            if group is None:
                continue
            if key not in seen:
                seen.add(key)
                group["samples"] += 1
                if len(group["named"]) < NAMED:
                    group["named"].append(sample)
            group["bins"][str(b)] = group["bins"].get(str(b), 0) + 1


def merge(into: dict, other: dict) -> None:
    for kind in KINDS:
        for key, theirs in other[kind].items():
            group = _group(into[kind], key)
            if group is None:
                continue
            group["samples"] += theirs["samples"]
            group["named"].extend(theirs["named"][: NAMED - len(group["named"])])
            for b, c in theirs["bins"].items():
                group["bins"][b] = group["bins"].get(b, 0) + c


def recurring(table: dict, outlying: Callable[[int], bool], min_samples: int,
              bins_per_octave: int) -> tuple[dict[str, list[dict]], dict[int, int]]:
    """The groups that are a model's own outliers (by kind), and the outlier rows per bin they account for
    (the larger of what the tokens and the positions cover: a row can be in both)."""
    found: dict[str, list[dict]] = {kind: [] for kind in KINDS}
    covered: dict[int, int] = {}
    for kind in KINDS:
        mine: dict[int, int] = {}
        for key, group in table[kind].items():
            out = {int(b): c for b, c in group["bins"].items() if outlying(int(b))}
            same = _densest(out, int(SAME_OCTAVES * bins_per_octave))
            rows = sum(same.values())
            if group["samples"] < min_samples or rows < min_samples:
                continue
            found[kind].append({kind: int(key), "samples": group["samples"], "outlier_rows": rows,
                                "bins": [min(same), max(same)], "first_samples": list(group["named"])})
            for b, c in same.items():
                mine[b] = mine.get(b, 0) + c
        for b, c in mine.items():
            covered[b] = max(covered.get(b, 0), c)
    return found, covered


def _densest(counts: dict[int, int], width: int) -> dict[int, int]:
    """The bins within ``width`` of each other that hold the most rows: the one state that recurs (rows of
    the same token far from it, such as that token in a scaled sample, stay outside)."""
    best: dict[int, int] = {}
    for low in sorted(counts):
        window = {b: c for b, c in counts.items() if low <= b <= low + width}
        if sum(window.values()) > sum(best.values()):
            best = window
    return best


def _group(groups: dict, key: str) -> dict | None:
    group = groups.get(key)
    if group is None and len(groups) < MAX_GROUPS:
        group = groups[key] = {"samples": 0, "named": [], "bins": {}}
    return group
