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

from alignprobe.compare.explain.base import ExplainRows, rel_rms, scored
from alignprobe.compare.result import ExplanationFit

EARLY = (1, 16)  # positions of the baseline, after the attention-sink token 0


class Drift:
    name = "drift"
    complexity = 8

    def fit(self, rows: ExplainRows, j: int) -> ExplanationFit | None:
        key = rows.expected[j]
        if key is None or key not in rows.train:
            return None
        a, b = rows.train[key], rows.serve[:, j]
        params = {"hf_index": key[0], **signature(rows, j)}
        named = ", ".join(params["signature"]) or "no signature"
        return scored(self.name, self.complexity, rows, a, b, params,
                      f"serve = train {rows.label(key)} with numeric drift ({named})", tolerance=rows.drift_tolerance,
                      measured=rows.as_is(key, j))  # identity's prediction: its scores


def signature(rows: ExplainRows, j: int) -> dict:
    """Where the error of slice j sits: by position, by depth across the stream, and the dtypes."""
    key = rows.expected[j]
    a, b = rows.train[key], rows.serve[:, j]
    out: dict = {"signature": []}
    early = (rows.position >= EARLY[0]) & (rows.position < EARLY[1])
    late = rows.position >= np.quantile(rows.position, 0.75) if len(rows.position) else early
    late &= rows.position >= EARLY[1]
    if early.sum() >= 8 and late.sum() >= 8:
        early_rms, late_rms = rel_rms(a[early], b[early]), rel_rms(a[late], b[late])
        growth = late_rms / early_rms if early_rms > 0 else float("inf")
        out.update(early_rel_rms=early_rms, late_rel_rms=late_rms, position_growth=min(growth, 1e9))
        if growth > rows.position_growth and late_rms > rows.tolerance / 2:
            out["signature"].append("position-dependent")
    depth = rows.__dict__.get("_depth")  # the same for every slice of the stream: measured once
    if depth is None:
        depth = sorted((e[0], rel_rms(rows.train[e], rows.serve[:, o])) for o, e in enumerate(rows.expected)
                       if e is not None and e in rows.train and e[0] > 0)
        rows.__dict__["_depth"] = depth
    if len(depth) >= 2:
        out["by_depth"] = [{"hf_index": i, "rel_rms": r} for i, r in depth]
        errors = [r for _, r in depth]
        if all(x <= y * 1.05 for x, y in zip(errors, errors[1:])) and errors[-1] > 1.3 * errors[0]:
            out["signature"].append("grows with depth")
    t, s = str(rows.train_provenance.get("dtype") or ""), str(rows.serve_provenance.get("dtype") or "")
    quant = str(rows.serve_provenance.get("quantization") or "")
    if quant:
        out["quantization"] = quant
        out["signature"].append(f"{quant} weights")
    if t and s and t != s:
        out["dtypes"] = {"train": t, "serve": s}
        out["signature"].append(f"{s} vs {t}")
    return out
