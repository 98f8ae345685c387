"""The ``nonfinite`` finding told where: the samples, positions and slices the streaming pass found
(compare/nonfinite_where.py), and which of those samples the capture marked as returned so."""

from __future__ import annotations

from alignprobe.compare.result import Finding
from alignprobe.dump import Dump

NAMED = 3  # samples named in the title


def located(f: Finding, where: dict, serve: Dump) -> None:
    """Add ``where`` (NonfiniteWhere.evidence of the finding's stream) to ``f``: evidence and title."""
    if not where:
        return
    f.evidence.update(where)
    marks = getattr(serve, "marks", None)
    if marks is not None:
        listed = {s["sample_id"] for s in where["samples"]}
        marked = [serve.sample_ids[int(i)] for i in marks.marked_indices()
                  if marks.nonfinite[int(i)] > 0 and serve.sample_ids[int(i)] in listed]
        if marked:  # the engine itself returned these values (the capture kept them as returned)
            f.evidence["marked_at_capture"] = marked
            f.fix += (" The capture marked these samples as the engine returned them: the serving engine "
                      "computed these values, not the capture.")
    named = ", ".join(f"{s['sample_id']} ({s['rows']} row{'s' if s['rows'] != 1 else ''} at {s['positions']})"
                      for s in where["samples"][:NAMED])
    more = where["nonfinite_samples_total"] - min(NAMED, len(where["samples"]))
    f.title += f"; in {where['nonfinite_samples_total']} sample(s): {named}" + (f", +{more} more" if more > 0 else "")
