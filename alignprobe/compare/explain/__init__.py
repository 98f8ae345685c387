"""Explain each serve slice as the simplest transform of a train state that fits held-out rows.

Every explanation is one module behind the :class:`~alignprobe.compare.explain.base.Explanation`
Protocol that names its own finding (code, fix) and says how it is tried; a new failure class is a new
file and one name in MODULES. For each serve slice every explanation is fitted on the fit rows and
scored on the held-out rows (the continuous transforms only where identity does not fit: they cannot
be chosen where it does); the winner is the simplest
(lowest complexity) whose held-out rel-RMS is within the tolerance, unless a more complex one that
fits leaves clearly less (see :func:`choose`); the runner-up is the next one that fits, else the
closest of the rest.
"""

from __future__ import annotations

import importlib
import math

from alignprobe.compare.explain.base import ExplainRows, Explanation
from alignprobe.compare.result import ExplanationFit, SliceExplanation

# The explanations, one module each (compare/explain/<module>.py, holding EXPLANATION), in the order
# they are tried within one complexity. A new failure class is a new module and one name here.
MODULES = ("identity", "duplicate_tap", "index_offset", "row_shift", "end_aligned", "reinterpreted", "foreign_rows",
           "displaced_rows", "residual_split", "scalar_scale", "channel_permutation", "saturated", "channel_scale",
           "rotation", "drift", "nothing_fits")


def _loaded(module: str) -> Explanation:
    return importlib.import_module(f"{__name__}.{module}").EXPLANATION


EXPLANATIONS: tuple[Explanation, ...] = tuple(_loaded(m) for m in MODULES)
BY_NAME = {e.name: e for e in EXPLANATIONS}


def explanation(name: str) -> Explanation:
    """The explanation of this name (ExplanationFit.name)."""
    return BY_NAME[name]


# A more complex fit replaces a simpler one that also fits when its held-out rel-RMS is at most this
# fraction of the simpler one's: it leaves at most a quarter of the residual energy, so what the
# simpler one left was mostly a systematic difference the other explains, not noise both share. On
# a trained model neighbouring layers can differ by less than the drift tolerance (a tiny Llama
# measured HF[6] vs HF[5] at rel-RMS 0.049, under drift_fail 0.07), so "identity fits" alone would
# hide an exact one-layer offset (rel-RMS 0.0003).
CLEARLY_BETTER = 0.5


def choose(tried: list[ExplanationFit], tolerance: float) -> ExplanationFit:
    """The winner among ``tried`` (in complexity order): the simplest that fits, replaced by a more
    complex one (or one as complex, later in the order) that fits and leaves clearly less
    (CLEARLY_BETTER): two explanations of one complexity are told apart by their fits, never by their
    order in EXPLANATIONS (a layer's output without the residual, fitted exactly by residual_split,
    was named foreign_rows, listed first, at 0.046). A continuous transform is a cause
    only if it moves the states by more than the noise the policy allows: its improvement over the
    identity (a lower bound of how far the transform moves the train rows, by the triangle
    inequality) must exceed ``tolerance``; a smaller one is numeric drift the transform soaked up
    (a RoPE base that differs was fitted as RMSNorm weights within 2% of 1)."""
    identity = next((f for f in tried if f.name == "identity"), None)
    for f in tried:
        if f.fits and explanation(f.name).transform and identity is not None and math.isfinite(identity.held_out_rel_rms):
            if identity.held_out_rel_rms - f.held_out_rel_rms <= tolerance:
                f.fits = False
                f.params["within_noise"] = (f"moves the states by less than the noise allowed: identity leaves "
                                            f"{identity.held_out_rel_rms:.3g}, this {f.held_out_rel_rms:.3g}")
    fitting = [f for f in tried if f.fits]
    winner = fitting[0]  # nothing_fits always fits
    for f in fitting[1:]:
        if explanation(f.name).predicts_as_identity or explanation(f.name).from_serve or f.complexity < winner.complexity:
            continue
        if math.isfinite(winner.held_out_rel_rms) and f.held_out_rel_rms <= CLEARLY_BETTER * winner.held_out_rel_rms:
            f.params["replaces"] = {"name": winner.name, "held_out_rel_rms": winner.held_out_rel_rms}
            winner = f
    # A train slice the serve side's layer stack shows to be another layer than it claims (a dataset read
    # with the wrong ids) is not the expected slice identity names, whatever its states: identity fits it
    # exactly, as the serve slice is the same layer, and only this exact match can say the claim is wrong
    # (a Model-Optimizer set read one id off against capture hf came out claim_mismatch on the serve side).
    refuted = next((f for f in fitting if f.params.get("train_claim_refuted")), None)
    if refuted is not None and winner.name == "identity":
        refuted.params["replaces"] = {"name": winner.name, "held_out_rel_rms": winner.held_out_rel_rms}
        winner = refuted
    # A slice measured as another layer that another serve slice holds to the last bit is that slice's
    # tensor written twice: the repeated id is the cause, the layer it shows only its symptom. Where
    # neighbouring layers agree within the tolerance (a trained 8-layer Llama, HF[4] vs HF[5] at 0.066)
    # identity fits the copy, index_offset replaces it, and the repeat was named wrong_taps.
    repeat = next((f for f in fitting if explanation(f.name).from_serve), None)
    if repeat is not None and winner.name == "index_offset":
        repeat.params["replaces"] = {"name": winner.name, "held_out_rel_rms": winner.held_out_rel_rms}
        winner = repeat
    return winner


def explain_slice(rows: ExplainRows, j: int, stream: str, explanations=EXPLANATIONS) -> SliceExplanation:
    tried: list[ExplanationFit] = []
    for e in sorted(explanations, key=lambda e: e.complexity):
        if any(e.name in explanation(f.name).narrower_than and f.fits for f in tried):
            # a narrower explanation fits (displaced_rows' per-run sources can express one shift, row_shift, or
            # one source a sample, foreign_rows): its fewer parameters name the pattern (a pairwise swap, the
            # previous request) that the wider one would blur into "from other samples"
            continue
        if not e.tried_where_identity_fits and any(f.name == "identity" and f.fits for f in tried):
            # Where identity fits, no continuous transform can win (choose() keeps one only if it improves
            # on identity by more than the tolerance, more than identity leaves) nor be the runner-up
            # (drift, which predicts what identity does, fits then too): fitting them only cost time,
            # about 40% of the explanations' on every clean comparison (benchmarks/README.md).
            continue
        f = e.fit(rows, j)
        if f is not None:
            tried.append(f)
    winner = choose(tried, rows.tolerance)
    fitting = [winner] + [f for f in tried if f.fits and f is not winner]
    rest = [f for f in tried if f is not winner and f.name != "nothing_fits"]
    runner_up = next((f for f in fitting[1:] if f.name != "nothing_fits"), None)
    if runner_up is None and rest:
        runner_up = min(rest, key=lambda f: f.held_out_rel_rms if math.isfinite(f.held_out_rel_rms) else math.inf)
    if winner.name == "nothing_fits":
        measured = [f for f in rest if math.isfinite(f.held_out_rel_rms)]
        # how close the closest came (inf when nothing could be scored: NaN never compares equal)
        best = min(measured, key=lambda f: f.held_out_rel_rms) if measured else None
        winner.held_out_rel_rms = best.held_out_rel_rms if best else math.inf
        winner.held_out_cosine = best.held_out_cosine if best else -math.inf
        winner.fit_rel_rms = best.fit_rel_rms if best else math.inf
        winner.params["closest"] = [
            {"name": f.name, "held_out_rel_rms": f.held_out_rel_rms, "summary": f.summary}
            for f in sorted(rest, key=lambda f: f.held_out_rel_rms if math.isfinite(f.held_out_rel_rms) else math.inf)[:3]
        ]
    expected = rows.expected[j]
    return SliceExplanation(
        serve_stream=stream,
        serve_slice=j,
        label=rows.label(expected) if expected else f"slice {j}",
        winner=winner,
        runner_up=runner_up,
        tried=[f for f in tried if f.name != "nothing_fits" or f is winner],  # the fallback is no fit
        rows=len(rows.sample),
    )


def explain_stream(rows: ExplainRows, stream: str) -> list[SliceExplanation]:
    return [explain_slice(rows, j, stream) for j in range(rows.serve.shape[1])]
