"""A Markdown summary short enough for a CI comment: verdict, findings with fixes, the worst layers."""

from __future__ import annotations

import math

from alignprobe.compare.result import CompareResult, StreamComparison
from alignprobe.findings import render
from alignprobe.findings.render import VERDICT_ICONS, markdown_cell
from alignprobe.findings.evidence_text import evidence_value
from alignprobe.report.format import format_number

MAX_FINDINGS = 8  # a CI comment is read on one screen; the HTML report has the rest
MAX_EVIDENCE = 4
LEADING_EVIDENCE = ("shift", "expected", "measured", "margins", "worst", "serve_width", "expected_width", "rows", "fraction")
# A bot that posts this as a pull-request comment finds its earlier comment by this line and edits it.
MARKER = "<!-- alignprobe-summary -->"


def render_markdown(result: CompareResult, report_name: str = "report.html") -> str:
    t = result.tokens
    lines = [
        MARKER,
        f"### {VERDICT_ICONS.get(result.verdict, '')} alignprobe: **{result.verdict}**",
        "",
        f"train `{result.train_path}` vs serve `{result.serve_path}`: {t.compared_samples or t.paired} samples, "
        f"{t.aligned_tokens} tokens compared (N={result.num_layers}, H={result.hidden_size}).",
        "",
    ]
    shown = result.findings[:MAX_FINDINGS]
    if shown:
        lines += ["| severity | code | finding |", "|---|---|---|"]
        lines += [f"| {f.severity} | `{f.code}` | {markdown_cell(render.title(f))} |" for f in shown]
        if len(result.findings) > len(shown):
            lines.append(f"| | | and {len(result.findings) - len(shown)} more in {report_name} |")
        lines.append("")
        for f in shown:
            if f.severity == "info":
                continue
            evidence = ", ".join(f"{k}={evidence_value(v)}" for k, v in _short_evidence(f.evidence))
            fix = render.fix(f)
            lines.append(f"- **`{f.code}`**" + (f" ({markdown_cell(evidence)})" if evidence else "") + (f": {fix}" if fix else ""))
        lines.append("")
    else:
        lines += ["No findings: every check passed.", ""]
    worst = [line for line in map(_worst_slice_line, result.streams) if line]
    if worst:
        lines += [*worst, ""]
    if result.notes:
        lines += ["Notes (what was assumed or not checked):", *[f"- {markdown_cell(n)}" for n in result.notes], ""]
    lines.append(f"Full report with plots: [{report_name}]({report_name}).")
    return "\n".join(lines).rstrip() + "\n"


def _worst_slice_line(pair: StreamComparison) -> str:
    """Lowest cosine p1, highest rel-RMS and the norm-ratio range over a stream's HF indices."""
    usable = [s for s in pair.slices if all(isinstance(v, float) and math.isfinite(v) for v in (s.cosine_p1, s.rel_rms, s.norm_ratio))]
    if not usable:
        return ""
    low_cos = min(usable, key=lambda s: s.cosine_p1)
    high_rms = max(usable, key=lambda s: s.rel_rms)
    ratios = [s.norm_ratio for s in usable]
    return (f"- `{pair.serve_stream}` ({len(pair.slices)} HF indices): lowest cosine p1 {format_number(low_cos.cosine_p1, 5)} "
            f"at {low_cos.label}; highest rel-RMS {format_number(high_rms.rel_rms, 3)} at {high_rms.label}; "
            f"norm ratio {format_number(min(ratios), 4)} to {format_number(max(ratios), 4)}")


def _short_evidence(evidence: dict) -> list[tuple[str, object]]:
    """The first few evidence entries that fit on a line: numbers, words, short lists of them."""
    out = []
    # The keys that say what happened come first; how it was measured (sampling, token counts) last.
    ordered = sorted(evidence.items(), key=lambda kv: kv[0] not in LEADING_EVIDENCE)
    for key, value in ordered:
        flat = not isinstance(value, (dict, list, tuple)) or all(not isinstance(v, (dict, list, tuple)) for v in value)
        if flat and len(evidence_value(value)) <= 60:
            out.append((key, value))
        if len(out) == MAX_EVIDENCE:
            break
    return out


