"""A Markdown summary short enough for a CI comment: verdict, findings with fixes, the worst layers."""

from __future__ import annotations

from alignprobe.compare.result import CompareResult, StreamComparison
from alignprobe.report.html import format_number, format_value

MAX_FINDINGS = 8  # a CI comment is read on one screen; the HTML report has the rest
MAX_EVIDENCE = 4
ICONS = {"PASS": "✅", "WARN": "⚠️", "FAIL": "❌"}


def render_markdown(result: CompareResult, report_name: str = "report.html") -> str:
    t = result.tokens
    lines = [
        f"### {ICONS.get(result.verdict, '')} alignprobe: **{result.verdict}**",
        "",
        f"train `{result.train_path}` vs serve `{result.serve_path}`: {t.compared_samples or t.paired} samples, "
        f"{t.aligned_tokens} tokens compared (N={result.num_layers}, H={result.hidden_size}).",
        "",
    ]
    shown = result.findings[:MAX_FINDINGS]
    if shown:
        lines += ["| severity | code | finding |", "|---|---|---|"]
        lines += [f"| {f.severity} | `{f.code}` | {_cell(f.title)} |" for f in shown]
        if len(result.findings) > len(shown):
            lines.append(f"| | | and {len(result.findings) - len(shown)} more in {report_name} |")
        lines.append("")
        for f in shown:
            if f.severity == "info":
                continue
            evidence = ", ".join(f"{k}={format_value(v)}" for k, v in list(f.evidence.items())[:MAX_EVIDENCE])
            lines.append(f"- **`{f.code}`**" + (f" ({_cell(evidence)})" if evidence else "") + (f": {f.fix}" if f.fix else ""))
        lines.append("")
    else:
        lines += ["No findings: every check passed.", ""]
    worst = [line for line in map(_worst_slice_line, result.streams) if line]
    if worst:
        lines += [*worst, ""]
    lines.append(f"Full report with plots: `{report_name}`.")
    return "\n".join(lines).rstrip() + "\n"


def _worst_slice_line(pair: StreamComparison) -> str:
    if not pair.slices:
        return ""
    finite = [s for s in pair.slices if isinstance(s.cosine_p1, float) and s.cosine_p1 == s.cosine_p1]
    if not finite:
        return ""
    worst = min(finite, key=lambda s: s.cosine_p1)
    return (f"- `{pair.serve_stream}` ({len(pair.slices)} HF indices): worst {worst.label}, cosine p1 "
            f"{format_number(worst.cosine_p1, 5)}, rel-RMS {format_number(worst.rel_rms, 3)}, norm ratio {format_number(worst.norm_ratio, 4)}")


def _cell(text: str) -> str:
    # GitHub renders HTML inside a comment: a title quoting a tag must not become one.
    return str(text).replace("|", "\\|").replace("\n", " ").replace("<", "&lt;").replace(">", "&gt;")
