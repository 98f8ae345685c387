"""``nonfinite``: NaN / Inf rows on either side, told where: the samples, positions and slices the
streaming pass found (compare/nonfinite_where.py), and which of those samples the capture marked as
returned so (the engine computed them, not the capture)."""

from __future__ import annotations

from typing import Any

from alignprobe.compare.policy import Policy
from alignprobe.compare.result import StreamComparison
from alignprobe.dump import Dump
from alignprobe.findings import Finding, Subject, make
from alignprobe.findings.severity import Severity

NAMED = 3  # samples named in the title


def nonfinite_findings(comparison: StreamComparison, policy: Policy, cap: Severity | None, where: dict,
                       serve: Dump | None) -> list[Finding]:
    """``where``: NonfiniteWhere.evidence of this stream (empty where the pass located none)."""
    bad: list[dict[str, Any]] = [
        {"label": m.label, "train_nan_rows": m.train_health.nan_rows, "train_inf_rows": m.train_health.inf_rows,
         "serve_nan_rows": m.serve_health.nan_rows, "serve_inf_rows": m.serve_health.inf_rows,
         "rows": m.serve_health.rows}
        for m in comparison.slices
        if m.train_health.nonfinite_rows or m.serve_health.nonfinite_rows
    ]
    if not bad:
        return []
    sides = [s for s in ("train", "serve") if any(b[f"{s}_nan_rows"] + b[f"{s}_inf_rows"] for b in bad)]
    worst = max(bad, key=lambda b: b["serve_nan_rows"] + b["serve_inf_rows"] + b["train_nan_rows"] + b["train_inf_rows"])
    title = (f"NaN/Inf rows on the {' and '.join(sides)} side: {worst['label']} has "
             f"{worst['serve_nan_rows'] + worst['serve_inf_rows']} serve and "
             f"{worst['train_nan_rows'] + worst['train_inf_rows']} train rows not finite (left out of the numbers)")
    evidence: dict = {"slices": bad}
    fix = ("Non-finite hidden states: fp16 overflow (serve or capture in bf16 instead), an uninitialised "
           "buffer returned for some tokens (padding, a cache hit), or a broken kernel. Look at the rows "
           "listed with alignprobe inspect.")
    if where:
        evidence.update(where)
        marked = _marked_at_capture(where, serve)
        if marked:  # the engine itself returned these values (the capture kept them as returned)
            evidence["marked_at_capture"] = marked
            fix += (" The capture marked these samples as the engine returned them: the serving engine "
                    "computed these values, not the capture.")
        named = ", ".join(f"{s['sample_id']} ({s['rows']} row{'s' if s['rows'] != 1 else ''} at {s['positions']})"
                          for s in where["samples"][:NAMED])
        more = where["nonfinite_samples_total"] - min(NAMED, len(where["samples"]))
        title += f"; in {where['nonfinite_samples_total']} sample(s): {named}" + (f", +{more} more" if more > 0 else "")
    return [make("nonfinite", title, evidence, fix, policy=policy, subject=Subject(comparison.serve_stream), cap=cap)]


def _marked_at_capture(where: dict, serve: Dump | None) -> list[str]:
    marks = getattr(serve, "marks", None)
    if serve is None or marks is None:
        return []
    listed = {s["sample_id"] for s in where["samples"]}
    return [serve.sample_ids[int(i)] for i in marks.marked_indices()
            if marks.nonfinite[int(i)] > 0 and serve.sample_ids[int(i)] in listed]
