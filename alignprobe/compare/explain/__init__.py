"""Explain each serve slice as the simplest transform of a train state that fits held-out rows.

Every explanation is one module behind the :class:`~alignprobe.compare.explain.base.Explanation`
Protocol; a new failure class is a new file and one line in EXPLANATIONS. For each serve slice every
explanation is fitted on the fit rows and scored on the held-out rows; the winner is the simplest
(lowest complexity) whose held-out rel-RMS is within the tolerance; the runner-up is the next one
that fits, else the closest of the rest.
"""

from __future__ import annotations

import math

from alignprobe.compare.explain.base import ExplainRows, Explanation
from alignprobe.compare.explain.channel_scale import ChannelScale
from alignprobe.compare.explain.drift import Drift
from alignprobe.compare.explain.duplicate_tap import DuplicateTap
from alignprobe.compare.explain.foreign_rows import ForeignRows
from alignprobe.compare.explain.identity import Identity
from alignprobe.compare.explain.index_offset import IndexOffset
from alignprobe.compare.explain.nothing_fits import NothingFits
from alignprobe.compare.explain.residual_split import ResidualSplit
from alignprobe.compare.explain.rotation import Rotation
from alignprobe.compare.explain.row_shift import RowShift
from alignprobe.compare.explain.scalar_scale import ScalarScale
from alignprobe.compare.result import ExplanationFit, SliceExplanation

EXPLANATIONS: tuple[Explanation, ...] = (
    Identity(),
    DuplicateTap(),
    IndexOffset(),
    RowShift(),
    ForeignRows(),
    ResidualSplit(),
    ScalarScale(),
    ChannelScale(),
    Rotation(),
    Drift(),
    NothingFits(),
)


def explain_slice(rows: ExplainRows, j: int, stream: str, explanations=EXPLANATIONS) -> SliceExplanation:
    tried = [f for f in (e.fit(rows, j) for e in sorted(explanations, key=lambda e: e.complexity)) if f is not None]
    fitting = [f for f in tried if f.fits]
    winner = fitting[0]  # nothing_fits always fits
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
