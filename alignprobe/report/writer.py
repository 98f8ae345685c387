"""``write_report(result, out_dir)``: report.html, summary.md and result.json in one folder."""

from __future__ import annotations

import dataclasses
import json
import os
from typing import TYPE_CHECKING

from alignprobe.compare.result import CompareResult
from alignprobe.dump import Dump
from alignprobe.errors import AlignprobeError, BadInput
from alignprobe.findings.exit_status import ExitStatus, with_status
from alignprobe.safe_paths import output_folder, write_text_atomic
from alignprobe.report.markdown import render_markdown
from alignprobe.report.token_cosines import dumps_available

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# The plots (figures, html) import matplotlib (0.5 s on a 2-core box, and its memory) where a report is
# rendered, not here: `alignprobe compare --json` names these files and writes result.json through
# this module, and draws nothing.

HTML_NAME = "report.html"
MARKDOWN_NAME = "summary.md"
JSON_NAME = "result.json"


@dataclasses.dataclass
class ReportFiles:
    html: str
    markdown: str
    json: str
    notes: list[str] = dataclasses.field(default_factory=list)  # plots left out, and why


def report_figures(
    result: CompareResult, train: Dump | None = None, serve: Dump | None = None
) -> tuple[list[tuple[str, Figure]], list[str]]:
    """Every plot the result supports, ``(caption, figure)``, and a note for each one left out."""
    from alignprobe.report import figures

    out: list[tuple[str, Figure]] = []
    notes: list[str] = []
    for search in result.mappings:
        name = search.serve_stream
        if figures.widths_differ(result, search):
            out.append((
                f"{name}: the serve vector's slices as measured, against the training layout. A serve slice "
                "labelled with a different HF index than training used there is fed to the drafter in its place.",
                figures.slice_composition(result, name),
            ))
        out.append((
            f"{name}: mean cosine of every train HF index (rows) against every serve slice (columns). The solid "
            "red box is the best match; the dashed box is what training used there (or, when the widths differ, "
            "what the serve dump claims). A red box one row off its dashed box is a layer offset.",
            figures.similarity(result, name),
        ))
    for pair in result.streams:
        if not pair.slices:
            continue
        name = pair.serve_stream
        out.append((
            f"{name}: per-token cosine percentiles, relative RMS error and norm ratio for each HF index. "
            "Error that grows with depth is accumulated numeric drift; a norm ratio away from 1 is a scale error.",
            figures.layer_metrics(result, name),
        ))
        if any(s.positions for s in pair.slices):
            out.append((
                f"{name}: relative RMS error by token position (buckets 0, 1, 2-3, 4-7, ...). A flat line is "
                "per-token error (weights, dtype); a rise along the sequence is error that accumulates through "
                "attention (KV-cache precision, positions).",
                figures.position_drift(result, name),
            ))
    drafter = next((p for p in result.streams if p.role == figures.DRAFTER_INPUT and p.slices), None)
    if drafter is not None:
        exact = (train is not None and serve is not None) or dumps_available(result)
        if exact or all(s.cosine_cdf for s in drafter.slices):
            source = "" if exact else (
                " Drawn from the distribution the result keeps (the dumps are not at the paths it names): "
                "its shape, not every token."
            )
            try:
                out.append((
                    f"{drafter.serve_stream}: distribution of the per-token cosine for each HF index "
                    f"(log count). A tail to the left is the tokens the drafter sees worst.{source}",
                    figures.token_cosine_histogram(result, drafter.serve_stream, train, serve),
                ))
            except AlignprobeError as exc:
                notes.append(f"per-token cosine histogram left out: {exc}")
        else:
            notes.append("per-token cosine histogram left out: the dumps are not at the paths the result names")
    return out, notes


def write_report(
    result: CompareResult,
    out_dir: str | os.PathLike,
    *,
    train: Dump | None = None,
    serve: Dump | None = None,
    write_json: bool = True,
    exit: "ExitStatus | None" = None,
) -> ReportFiles:
    """Render the result into ``out_dir`` (created if needed); each file is replaced whole or not at all."""
    out_dir = os.fspath(out_dir)
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise BadInput(f"{out_dir}: exists and is not a folder; give --report/--out a folder for the report")
    from alignprobe.report.html import render_html

    output_folder(out_dir, "the report folder")
    figs, notes = report_figures(result, train, serve)
    files = ReportFiles(
        html=os.path.join(out_dir, HTML_NAME),
        markdown=os.path.join(out_dir, MARKDOWN_NAME),
        json=os.path.join(out_dir, JSON_NAME),
        notes=notes,
    )
    # The JSON stays the comparison's own record; what the report left out is said on the page.
    shown = dataclasses.replace(result, notes=[*result.notes, *notes]) if notes else result
    write_text_atomic(files.html, render_html(shown, figs), "report")
    write_text_atomic(files.markdown, render_markdown(result, HTML_NAME), "report")
    if write_json:
        # beside the result, the exit code and its reason when the caller decided them (compare, gate)
        write_text_atomic(files.json, result_json(result, exit), "report")
    return files


def result_json(result: CompareResult, status: ExitStatus | None = None) -> str:
    """result.json's text: the result, with its exit code and reason where the caller decided them."""
    record = result.to_dict()
    return json.dumps(with_status(record, status) if status is not None else record, indent=2, allow_nan=False)

