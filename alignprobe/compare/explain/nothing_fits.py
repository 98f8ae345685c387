"""Nothing fits: the serve slice is no transform of any train state this family knows (another model
or revision, an embedding scale on a path we do not model, a broken capture). Always applies, last:
the selector fills in the best fits that were tried (and their best held-out fit as this one's),
so the report shows how far each one was."""

from __future__ import annotations

import math

from alignprobe.compare.explain.base import ExplainRows, Explanation
from alignprobe.compare.result import ExplanationFit


class NothingFits(Explanation):
    name = "nothing_fits"
    complexity = 99
    code = "unexplained"
    defers_to_mapping = True
    predicts_as_identity = True
    fix = ('The states are no transform of any train state we know: another model or revision, a broken '
           'capture, or a train dump that lacks the layer (capture it with every layer to widen the search). '
           'Check that both sides run the same checkpoint.')

    def fit(self, rows: ExplainRows, j: int) -> ExplanationFit | None:
        return ExplanationFit(
            name=self.name, complexity=self.complexity, fits=True, held_out_rel_rms=math.nan,
            held_out_cosine=math.nan, fit_rel_rms=math.nan, held_out_rows=int(rows.held_out.sum()),
            params={}, summary="no explanation fits within the tolerance: the states differ from every train state",
        )


EXPLANATION = NothingFits()
