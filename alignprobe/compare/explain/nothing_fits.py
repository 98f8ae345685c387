"""Nothing fits: the serve slice is no transform of any train state this family knows (another model
or revision, an embedding scale on a path we do not model, a broken capture). Always applies, last:
the selector fills in the best fits that were tried (and their best held-out fit as this one's),
so the report shows how far each one was."""

from __future__ import annotations

import math

from alignprobe.compare.explain.base import ExplainRows
from alignprobe.compare.result import ExplanationFit


class NothingFits:
    name = "nothing_fits"
    complexity = 99

    def fit(self, rows: ExplainRows, j: int) -> ExplanationFit | None:
        return ExplanationFit(
            name=self.name, complexity=self.complexity, fits=True, held_out_rel_rms=math.nan,
            held_out_cosine=math.nan, fit_rel_rms=math.nan, held_out_rows=int(rows.held_out.sum()),
            params={}, summary="no explanation fits within the tolerance: the states differ from every train state",
        )
