"""Row norms far outside the dataset's own distribution, per slice (per HF index where the files say).

Each slice's log2 row norms go into a fixed-bin histogram (1/32 octave; degenerate rows left out, they have their own check: integer counts, so partials
merge exactly), from which the median and the MAD come; the samples with the largest and smallest
norms are kept as examples. Position 0 has its own distribution: the first token's state is often
many times larger than the rest in real models (the attention-sink token), and would otherwise be an
"outlier" in every sample. Outliers that recur (one token or one position, the same state in many
samples: the model's own massive activations, recurring.py) are told apart from the rest: they are
``recurring_norm_outlier`` (info), the rest ``norm_outlier`` (a data fault, warn).
"""

from __future__ import annotations

import math

import numpy as np

from alignprobe.audit.checks import recurring
from alignprobe.audit.checks.base import MAX_EXAMPLES, Scanned, slices_subject
from alignprobe.audit.policy import AuditPolicy
from alignprobe.findings import Finding, make

BINS_PER_OCTAVE = 32
FIRST = " (position 0)"


class NormOutliers:
    name = "norm_outliers"

    def empty(self) -> dict:
        return {"hist": {}, "high": {}, "low": {}, "recur": {}}

    def scan(self, partial: dict, scanned: Scanned) -> None:
        sample = scanned.sample
        first_position = sample.returned[0] if sample.returned is not None else 0
        for stream, facts in scanned.facts.items():
            real = scanned.real_rows(stream)
            ok = facts.finite[:real] & ~facts.zero[:real] & ~facts.constant[:real] & np.isfinite(facts.norm2[:real])
            with np.errstate(divide="ignore", invalid="ignore"):
                log2 = 0.5 * np.log2(facts.norm2[:real].astype(np.float64))
            for j, key in enumerate(scanned.slice_keys(stream)):
                rows_ok = np.flatnonzero(ok[:, j])
                body = log2[rows_ok[rows_ok > 0], j]
                own_median = float(np.median(body)) if len(body) else None
                for part, rows in ((key + FIRST, rows_ok[rows_ok == 0]), (key, rows_ok[rows_ok > 0])):
                    if not len(rows):
                        continue
                    values = log2[rows, j]
                    row_bins = np.floor(values * BINS_PER_OCTAVE).astype(np.int64)
                    bins, counts = np.unique(row_bins, return_counts=True)
                    hist = partial["hist"].setdefault(part, {})
                    for b, c in zip(bins.tolist(), counts.tolist()):
                        hist[str(b)] = hist.get(str(b), 0) + c
                    positions = rows + first_position
                    tokens = sample.token_ids[positions]
                    for side, pick, reverse in (("high", values.argmax(), True), ("low", values.argmin(), False)):
                        _keep(partial[side], part, [float(values[pick]), sample.name, int(tokens[pick]), int(positions[pick])],
                              reverse)
                    if own_median is not None:
                        high = values >= own_median + recurring.HIGH_OCTAVES
                        if high.any():
                            recurring.tally(partial["recur"].setdefault(part, recurring.empty()), sample.name, row_bins[high],
                                            tokens[high], None if part.endswith(FIRST) else positions[high])

    def merge(self, into: dict, other: dict) -> None:
        for key, hist in other["hist"].items():
            mine = into["hist"].setdefault(key, {})
            for b, c in hist.items():
                mine[b] = mine.get(b, 0) + c
        for side, reverse in (("high", True), ("low", False)):
            for key, items in other[side].items():
                for item in items:
                    _keep(into[side], key, item, reverse)
        for key, table in other["recur"].items():
            recurring.merge(into["recur"].setdefault(key, recurring.empty()), table)

    def findings(self, merged: dict, policy: AuditPolicy) -> list[Finding]:
        slices, examples, model_slices = {}, [], {}
        for key in sorted(merged["hist"]):
            hist = merged["hist"][key]
            median, sigma, total = robust_spread(hist)
            limit = max(policy.norm_outlier_sigmas * sigma, math.log2(policy.norm_outlier_min_factor))

            def outlying(b: int, median: float = median, limit: float = limit) -> bool:  # this slice's spread
                return abs((b + 0.5) / BINS_PER_OCTAVE - median) > limit

            outliers = sum(c for b, c in hist.items() if outlying(int(b)))
            if not outliers:
                continue
            groups, covered = recurring.recurring(merged["recur"].get(key, recurring.empty()), outlying,
                                                  policy.norm_outlier_recurring_samples, BINS_PER_OCTAVE)
            own = sum(min(c, covered.get(int(b), 0)) for b, c in hist.items() if outlying(int(b)))
            spread = {"rows": total, "median_norm": 2 ** median, "robust_sigma_log2": sigma, "limit_factor": 2 ** limit}
            bands = {(kind, g[kind]): g["bins"] for kind in recurring.KINDS for g in groups[kind]}
            if own:
                for group in (g for kind in recurring.KINDS for g in groups[kind]):
                    low, high = group.pop("bins")
                    group["times_median"] = [2 ** ((b + 0.5) / BINS_PER_OCTAVE - median) for b in (low, high)]
                model_slices[key] = {**spread, "recurring_rows": own, "tokens": groups["token"],
                                     "positions": groups["position"]}
            if outliers == own:
                continue
            slices[key] = {**spread, "outlier_rows": outliers - own, "recurring_rows": own}
            for side in ("high", "low"):
                for value, sample, token, position in merged[side].get(key, []):
                    row_bin = math.floor(value * BINS_PER_OCTAVE)
                    recurs = any(low <= row_bin <= high for low, high in
                                 (bands.get(("token", token), (1, 0)), bands.get(("position", position), (1, 0))))
                    if abs(value - median) > limit and not recurs and len(examples) < MAX_EXAMPLES:
                        examples.append({"sample": sample, "slice": key, "norm": 2 ** value,
                                         "times_median": 2 ** (value - median), "token": token, "position": position})
        out = []
        if slices:
            rows = sum(s["outlier_rows"] for s in slices.values())
            out.append(make(
                "norm_outlier",
                f"{rows} row(s) with norms beyond the dataset's own spread in {len(slices)} slice(s)",
                {"slices": slices, "examples": examples, "bins_per_octave": BINS_PER_OCTAVE},
                "look at the named samples: a sample scaled on the way (another dtype, a missing norm), a "
                "different model or revision, or one bad batch; drop or re-extract them", policy=policy,
                subject=slices_subject(slices),
            ))
        if model_slices:
            rows = sum(s["recurring_rows"] for s in model_slices.values())
            tokens = sorted({g["token"] for s in model_slices.values() for g in s["tokens"]})
            positions = sorted({g["position"] for s in model_slices.values() for g in s["positions"]})
            named = " and ".join(part for part in (f"token(s) {tokens[:8]}" if tokens else "",
                                                   f"position(s) {positions[:8]}" if positions else "") if part)
            out.append(make(
                "recurring_norm_outlier",
                f"{rows} row(s) beyond the dataset's spread in {len(model_slices)} slice(s) are the model's own: "
                f"{named} carry the same large state in many samples (a massive activation, not a data fault)",
                {"slices": model_slices, "bins_per_octave": BINS_PER_OCTAVE},
                "nothing to fix in the data: the drafter is served these states too", policy=policy,
                subject=slices_subject(model_slices),
            ))
        return out


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
