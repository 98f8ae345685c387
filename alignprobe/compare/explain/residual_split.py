"""Residual split: the serve slice is a layer's hidden output without the residual added, the
difference of neighbouring HF states (HF[i] - HF[i-1]), where the engine keeps the residual apart
(fused add-norm) and captured ``hidden_states`` instead of ``hidden_states + residual``."""

from __future__ import annotations

from alignprobe.compare.explain.base import ExplainRows, Explanation, rel_rms, scored
from alignprobe.compare.result import ExplanationFit


class ResidualSplit(Explanation):
    name = "residual_split"
    complexity = 4
    code = "residual_split"
    fix = ("The engine captured the layer's hidden output without the residual added (fused add-norm keeps "
           'them apart): capture hidden_states + residual.')

    def fit(self, rows: ExplainRows, j: int) -> ExplanationFit | None:
        key = rows.expected[j]
        if key is None:
            return None
        b = rows.serve[:, j]
        post = {k[0]: v for k, v in rows.train.items() if k[1] == "post" or k[0] < rows.num_layers}
        options = [i for i in (key[0], key[0] + 1) if i in post and i - 1 in post]
        if not options:
            return None
        split = {i: post[i] - post[i - 1] for i in options}
        fit_squares = rows.serve_squares(j)[rows.fit]
        best = min(options, key=lambda i: rel_rms(split[i][rows.fit], b[rows.fit], fit_squares))
        return scored(self, rows, split[best], b, {"hf_index": best, "minus_hf_index": best - 1},
                      f"serve = HF[{best}] - HF[{best - 1}]: layer {best - 1}'s output without the residual")


EXPLANATION = ResidualSplit()
