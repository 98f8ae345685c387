"""Row norms far outside the dataset's own distribution, per slice (per HF index where the files say).

Each slice's log2 row norms go into a fixed-bin histogram (1/32 octave; degenerate rows left out, they have their own check: integer counts, so partials
merge exactly), from which the median and the MAD come; the samples with the largest and smallest
norms are kept as examples. Position 0 has its own distribution: the first token's state is often
many times larger than the rest in real models (the attention-sink token), and would otherwise be an
"outlier" in every sample.
"""

from __future__ import annotations

import math

import numpy as np

from alignprobe.audit.checks.base import MAX_EXAMPLES, Scanned, slices_subject
from alignprobe.audit.policy import AuditPolicy
from alignprobe.findings import Finding, make

BINS_PER_OCTAVE = 32
FIRST = " (position 0)"


class NormOutliers:
    name = "norm_outliers"

    def empty(self) -> dict:
        return {"hist": {}, "high": {}, "low": {}}

    def scan(self, partial: dict, scanned: Scanned) -> None:
        for stream, facts in scanned.facts.items():
            real = scanned.real_rows(stream)
            ok = facts.finite[:real] & ~facts.zero[:real] & ~facts.constant[:real] & np.isfinite(facts.norm2[:real])
            with np.errstate(divide="ignore", invalid="ignore"):
                log2 = 0.5 * np.log2(facts.norm2[:real].astype(np.float64))
            for j, key in enumerate(scanned.slice_keys(stream)):
                for part, rows in ((key + FIRST, slice(0, 1)), (key, slice(1, None))):
                    values = log2[rows, j][ok[rows, j]]
                    if not len(values):
                        continue
                    bins, counts = np.unique(np.floor(values * BINS_PER_OCTAVE).astype(np.int64), return_counts=True)
                    hist = partial["hist"].setdefault(part, {})
                    for b, c in zip(bins.tolist(), counts.tolist()):
                        hist[str(b)] = hist.get(str(b), 0) + c
                    _keep(partial["high"], part, [float(values.max()), scanned.sample.name], reverse=True)
                    _keep(partial["low"], part, [float(values.min()), scanned.sample.name], reverse=False)

    def merge(self, into: dict, other: dict) -> None:
        for key, hist in other["hist"].items():
            mine = into["hist"].setdefault(key, {})
            for b, c in hist.items():
                mine[b] = mine.get(b, 0) + c
        for side, reverse in (("high", True), ("low", False)):
            for key, items in other[side].items():
                for item in items:
                    _keep(into[side], key, item, reverse)

    def findings(self, merged: dict, policy: AuditPolicy) -> list[Finding]:
        slices, examples = {}, []
        for key in sorted(merged["hist"]):
            median, sigma, total = robust_spread(merged["hist"][key])
            limit = max(policy.norm_outlier_sigmas * sigma, math.log2(policy.norm_outlier_min_factor))
            outliers = sum(c for b, c in merged["hist"][key].items()
                           if abs((int(b) + 0.5) / BINS_PER_OCTAVE - median) > limit)
            if not outliers:
                continue
            slices[key] = {"rows": total, "outlier_rows": outliers, "median_norm": 2 ** median,
                           "robust_sigma_log2": sigma, "limit_factor": 2 ** limit}
            for side in ("high", "low"):
                for value, sample in merged[side].get(key, []):
                    if abs(value - median) > limit and len(examples) < MAX_EXAMPLES:
                        examples.append({"sample": sample, "slice": key, "norm": 2 ** value,
                                         "times_median": 2 ** (value - median)})
        if not slices:
            return []
        rows = sum(s["outlier_rows"] for s in slices.values())
        return [make(
            "norm_outlier",
            f"{rows} row(s) with norms beyond the dataset's own spread in {len(slices)} slice(s)",
            {"slices": slices, "examples": examples, "bins_per_octave": BINS_PER_OCTAVE},
            "look at the named samples: a sample scaled on the way (another dtype, a missing norm), a "
            "different model or revision, or one bad batch; drop or re-extract them", policy=policy,
            subject=slices_subject(slices),
        )]


def robust_spread(hist: dict) -> tuple[float, float, int]:
    """Median and 1.4826 * MAD of a log2 histogram (bin centres; at least one bin wide), and its total."""
    bins = np.array(sorted(int(b) for b in hist), dtype=np.int64)
    counts = np.array([hist[str(b)] for b in bins], dtype=np.int64)
    centres = (bins + 0.5) / BINS_PER_OCTAVE
    median = _weighted_median(centres, counts)
    mad = _weighted_median(np.abs(centres - median), counts)
    return float(median), max(1.4826 * float(mad), 1.0 / BINS_PER_OCTAVE), int(counts.sum())


def _weighted_median(values: np.ndarray, counts: np.ndarray) -> float:
    order = np.argsort(values, kind="stable")
    cumulative = np.cumsum(counts[order])
    return float(values[order][np.searchsorted(cumulative, (cumulative[-1] + 1) // 2)])


def _keep(table: dict, key: str, item: list, reverse: bool) -> None:
    """The MAX_EXAMPLES most extreme [value, sample] of a key; ties broken by name, so the merge is exact."""
    items = table.setdefault(key, [])
    items.append(item)
    items.sort(key=lambda x: (-x[0] if reverse else x[0], x[1]))
    del items[MAX_EXAMPLES:]
