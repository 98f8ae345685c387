"""Numeric drift: the right HF index with no transform, off by more than the noise the policy
allows but less than drift alone produces (``rows.drift_tolerance``), with its signature:

- position: the error grows along the sequence (a RoPE base or scaling that differs, a KV cache in
  lower precision), late positions over positions 1-15 past the policy's position_growth;
- depth: the error grows with the HF index across the stream's slices (weight quantization: INT8 /
  INT4 / FP8 accumulate layer by layer);
- dtype: the two sides ran in different dtypes (fp16 vs bf16 vs fp32 rounding).
"""

from __future__ import annotations

import numpy as np

from alignprobe.compare.explain.base import ExplainRows, FromExpected, Key, RowFit, scored
from alignprobe.compare.result import ExplanationFit

EARLY = (1, 16)  # positions of the baseline, after the attention-sink token 0

# Discrete flips (isolated tokens): a MoE router picks its top-k experts by comparing scores, so a
# change of dtype or kernel that moves two close scores past each other sends that one token to
# another expert set, and its state jumps while its neighbours' do not. Measured on a wide DeepseekV3
# (H = 1024, 8 experts, 2 a token; each of 12 prompts alone, 720 tokens): 1.5-2.9% of tokens routed
# differently between float16 and bfloat16 (0.4-3.2% for any pair of float32 / bfloat16 / float16),
# those tokens off by rel-RMS 0.40-0.59 at HF[2..4], every other token within 0.009-0.013; the slice's
# rel-RMS over all tokens 0.05-0.10, past the drift tolerances on a pair that is clean.
# A token is an outlier past drift_fail_rel_rms (the policy's limit for a whole slice, here per row);
# the rest (the bulk) carry the rounding. Outliers are shaped as flips when they are:
FLIP_MAX_FRACTION = 0.10  # a few tokens: 3x the most measured (3.2%); more is no longer a few flips
FLIP_MAX_CLUSTERED = 0.5  # scattered: at most half of them next to another outlier of their sample.
# Independent flips at rate p have an outlier neighbour with probability ~2p (0.2 at the 10% cap);
# rows out of place come in runs (another request's rows, padding tails, a shifted buffer) and have
# one nearly always, so this tells flips from rows out of place for any p up to the cap.
# Not piled up where a capture goes wrong: a router flips tokens wherever they fall, while a capture
# that mishandles a row does it at the same place in every sample (its first row, its last). Planted
# on the tiny DeepseekV3: every sample's last row perturbed at rel-RMS 0.3 came out as "flips" (PASS)
# before this (tests/compare/explain/test_flips.py); routing flips measured above put at most 2 outliers at
# one position of 12 prompts. (On a model capture hf knows is dense no outlier is a flip at all:
# diagnoses/numeric.py discrete_flips.)
FLIP_MAX_PILED = 0.5  # at most half of the outliers at one position, or at their samples' first/last rows


class Drift(FromExpected):
    name = "drift"
    complexity = 8
    judged = True
    predicts_as_identity = True

    def fit_pair(self, rows: ExplainRows, j: int, key: Key, a: np.ndarray, b: np.ndarray) -> ExplanationFit | None:
        params = {"hf_index": key[0], **signature(rows, j)}
        named = ", ".join(params["signature"]) or "no signature"
        return scored(self, rows, a, b, params,
                      f"serve = train {rows.label(key)} with numeric drift ({named})", tolerance=rows.drift_tolerance,
                      measured=rows.as_is(key, j))  # identity's prediction: its scores


EXPLANATION = Drift()


def signature(rows: ExplainRows, j: int) -> dict:
    """Where the error of slice j sits: by position, by depth across the stream, and the dtypes."""
    key = rows.expected[j]
    assert key is not None  # drift is fitted to a slice with an expected layer
    as_is = rows.as_is_rows(key, j)  # every score below is of this prediction, on some of its rows
    out: dict = {"signature": []}
    early = (rows.position >= EARLY[0]) & (rows.position < EARLY[1])
    late = rows.position >= np.quantile(rows.position, 0.75) if len(rows.position) else early
    late &= rows.position >= EARLY[1]
    if early.sum() >= 8 and late.sum() >= 8:
        early_rms, late_rms = as_is.rel_rms(early), as_is.rel_rms(late)
        growth = late_rms / early_rms if early_rms > 0 else float("inf")
        out.update(early_rel_rms=early_rms, late_rel_rms=late_rms, position_growth=min(growth, 1e9))
        if growth > rows.position_growth and late_rms > rows.tolerance / 2:
            out["signature"].append("position-dependent")
    depth = rows.__dict__.get("_depth")  # the same for every slice of the stream: measured once
    if depth is None:
        depth = sorted((e[0], rows.as_is_rows(e, o).rel_rms()) for o, e in enumerate(rows.expected)
                       if e is not None and e in rows.train and e[0] > 0)
        rows.__dict__["_depth"] = depth
    if len(depth) >= 2:
        out["by_depth"] = [{"hf_index": i, "rel_rms": r} for i, r in depth]
        errors = [r for _, r in depth]
        if all(x <= y * 1.05 for x, y in zip(errors, errors[1:])) and errors[-1] > 1.3 * errors[0]:
            out["signature"].append("grows with depth")
    flips = isolated_outliers(rows, as_is)
    if flips is not None:
        out["outlier_tokens"] = flips
        if flips["flips"]:
            out["signature"].append("isolated tokens (discrete flips, e.g. MoE routing)")
    t, s = str(rows.train_provenance.get("dtype") or ""), str(rows.serve_provenance.get("dtype") or "")
    quant = str(rows.serve_provenance.get("quantization") or "")
    if quant:
        out["quantization"] = quant
        out["signature"].append(f"{quant} weights")
    if t and s and t != s:
        out["dtypes"] = {"train": t, "serve": s}
        out["signature"].append(f"{s} vs {t}")
    return out


def isolated_outliers(rows: ExplainRows, as_is: RowFit) -> dict | None:
    """The rows off by more than the tolerance (drift_fail_rel_rms) each, the rel-RMS of the rest (the
    bulk, over all rows and over the late positions), and whether the outliers are shaped as discrete
    flips (few and scattered); None when no row can be measured. ``as_is``: the train slice taken
    unchanged as the serve slice, per row."""
    den = np.sqrt(as_is.predicted)  # each train row's norm
    ok = den > 0
    if not ok.any():
        return None
    error = np.full(len(den), np.inf)
    error[ok] = np.sqrt(as_is.error[ok]) / den[ok]
    error[~np.isfinite(error)] = np.inf  # NaN / Inf or all-zero rows: outliers, and never a flip
    outlier = error > rows.tolerance
    bulk = ~outlier
    bulk_rms = as_is.rel_rms(bulk) if bulk.any() else float("inf")
    neighbour = rows.rows_at(rows.sample, rows.position - 1), rows.rows_at(rows.sample, rows.position + 1)
    clustered = np.zeros(len(den), dtype=bool)
    for n in neighbour:
        clustered |= (n >= 0) & outlier[np.maximum(n, 0)]
    fraction = float(outlier.mean())
    clustered_fraction = float(clustered[outlier].mean()) if outlier.any() else 0.0
    late = rows.position >= max(EARLY[1], np.quantile(rows.position, 0.75))
    bulk_late = bulk & late
    bulk_late_rms = as_is.rel_rms(bulk_late) if bulk_late.sum() >= 8 else bulk_rms
    samples = int(len(np.unique(rows.sample[outlier])))
    # the structure only: whether the bulk is within the warn tolerance is the diagnosis's to judge
    # (diagnoses/numeric.py discrete_flips)
    piled = _piled_fraction(rows, outlier)
    flips = bool(outlier.any() and np.isfinite(error).all() and fraction <= FLIP_MAX_FRACTION
                 and clustered_fraction <= FLIP_MAX_CLUSTERED and piled <= FLIP_MAX_PILED)
    return {"rows": int(outlier.sum()), "of_rows": int(len(den)), "fraction": fraction, "samples": samples,
            "clustered_fraction": clustered_fraction, "outlier_rel_rms": _finite(as_is.rel_rms(outlier) if outlier.any() else 0.0),
            "bulk_rel_rms": _finite(bulk_rms), "bulk_late_rel_rms": _finite(bulk_late_rms), "row_threshold": rows.tolerance,
            "piled_fraction": piled, "flips": flips}


def _piled_fraction(rows: ExplainRows, outlier: np.ndarray) -> float:
    """The largest share of the outliers at one position, or at the first or the last row read of their
    samples (0 with fewer than 2 outliers)."""
    n = int(outlier.sum())
    if n < 2:
        return 0.0
    position, sample = rows.position[outlier], rows.sample[outlier]
    _, counts = np.unique(position, return_counts=True)
    last = {int(s): int(rows.position[rows.sample == s].max()) for s in np.unique(sample)}
    at_end = np.array([p == last[int(s)] for p, s in zip(position, sample)])
    at_start = position == 0
    return float(max(counts.max(), at_end.sum(), at_start.sum())) / n


def _finite(x: float) -> float | None:
    """None where nothing could be measured (no rows, all-zero rows): params are JSON, read back exactly."""
    return float(x) if np.isfinite(x) else None
