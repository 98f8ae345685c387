"""A per-channel scale: a norm weight applied on one side only (pre- vs post-norm final state,
``norm_before_fc``-style flags), fitted from a few dozen rows whatever H is (MIN_FIT_ROWS). Two
forms are fitted on the fit rows and the better one kept:

- ``weight``: serve = w * train, channel by channel;
- ``rmsnorm``: serve / rms(serve) = w * train / rms(train): RMSNorm's per-token scale and its weight
  (the serve row's own norm restores the magnitude, so this one is scored on direction and shape);
- ``layernorm``: the same after each train row's mean is taken out (LayerNorm's centring, no bias
  fitted): a LayerNorm-style norm on one side, which the rmsnorm form misses by the rows' mean (it
  left 0.08-0.12 held-out rel-RMS on a trained Qwen3 and DeepseekV3, tests/cases/holdout4_cases.py
  "layernorm_centred", above the 0.07 the policy allows).
"""

from __future__ import annotations

import numpy as np

from alignprobe.compare.explain.base import ExplainRows, FromExpected, Key, Named, Naming, rel_rms, scored
from alignprobe.compare.result import ExplanationFit
from alignprobe.findings.severity import Severity


def _unit_rms(x: np.ndarray) -> np.ndarray:
    rms = np.sqrt(np.mean(x * x, axis=1, keepdims=True))
    return x / np.where(rms > 0, rms, 1.0)


def _weights(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    den = np.sum(a * a, axis=0)
    return np.sum(a * b, axis=0) / np.where(den > 0, den, 1.0)


def _restored(a: np.ndarray, b: np.ndarray, fit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """unit-RMS ``a`` times a weight fitted on the fit rows, each row scaled to its serve row's norm."""
    unit_a = _unit_rms(a)
    w = _weights(unit_a[fit], _unit_rms(b)[fit])
    direction = w * unit_a
    length = np.linalg.norm(direction, axis=1, keepdims=True)
    # a zero direction (a zero train row) predicts zero: the serve norm over a floor overflowed past 3e8
    scale = np.linalg.norm(b, axis=1, keepdims=True) / np.where(length > 0, length, np.inf)
    return direction * scale, w


# Each of the H weights is a one-parameter least-squares fit to the n fit values of its own channel, so
# the number of fit rows it needs does not grow with H (a wide model is fitted from as few rows as a
# narrow one): on held-out rows the fitted weight adds about eps / sqrt(n) to drift of rel-RMS eps,
# a held-out rel-RMS of eps * sqrt(1 + 1/n), 3% more at n = 16, so an overfit cannot bring a slice the
# weight does not explain within the tolerance.
MIN_FIT_ROWS = 16


# the final state, scaled by the final norm's weights: the other side of the final norm
FINAL_NORM_FIX = ("The final state is on the other side of the final norm: vLLM and speculators store it before "
                  "the norm (id N is pre-norm), SGLang and transformers after it; pair like with like (capture "
                  "training with final_prenorm) or apply the norm.")


class ChannelScale(FromExpected):
    name = "channel_scale"
    complexity = 6
    code = "channel_scale"
    transform = True
    tried_where_identity_fits = False
    fix = ('A norm weight applied on one side only (pre- vs post-norm state, a norm_before_fc-style flag): '
           'capture both sides at the same point of the norm.')

    def names(self, group: list, naming: Naming) -> Named:
        if all(e.winner.params.get("hf_index") == naming.num_layers for e in group):
            # an EAGLE-3 drafter reads the aux concat, never this state
            severity: Severity | None = "info" if naming.drafter_reads_aux and naming.role == "final" else None
            return Named("final_norm_mismatch", FINAL_NORM_FIX, severity=severity)
        return Named(self.code, self.fix)

    def fit_pair(self, rows: ExplainRows, j: int, key: Key, a: np.ndarray, b: np.ndarray) -> ExplanationFit | None:
        if rows.fit.sum() < MIN_FIT_ROWS:
            return None  # too few rows to fit a weight per channel
        fit = rows.fit
        weight = _weights(a[fit], b[fit])
        plain = weight * a
        forms = {"weight": (plain, weight), "rmsnorm": _restored(a, b, fit),
                 "layernorm": _restored(a - a.mean(axis=1, keepdims=True), b, fit)}
        form = min(forms, key=lambda f: rel_rms(forms[f][0][fit], b[fit]))
        predicted, w = forms[form]
        params = {"form": form, "hf_index": key[0], "weight_mean": float(w.mean()), "weight_std": float(w.std()),
                  "weight_min": float(w.min()), "weight_max": float(w.max()), "channels": int(w.size)}
        what = {"weight": "serve = w * train", "rmsnorm": "serve = RMSNorm(train) with weight w (or its inverse)",
                "layernorm": "serve = LayerNorm(train) with weight w (mean-centred, per-token scale)"}[form]
        return scored(self, rows, predicted, b, params,
                      f"{what}, {rows.label(key)}, w in [{w.min():.3g}, {w.max():.3g}] (mean {w.mean():.3g})")


EXPLANATION = ChannelScale()
