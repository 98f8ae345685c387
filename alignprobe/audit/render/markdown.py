"""summary.md: the verdict, every finding, the slice table; short enough for a CI comment."""

from __future__ import annotations

from alignprobe.audit.result import AuditResult
from alignprobe.findings import render
from alignprobe.findings.render import VERDICT_ICONS, markdown_cell


def render_markdown(result: AuditResult) -> str:
    lines = [f"## alignprobe audit: {VERDICT_ICONS[result.verdict]} {result.verdict}", "",
             f"{result.samples} samples, {result.tokens} tokens, {result.bytes / 1e9:.2f} GB in "
             f"{', '.join(markdown_cell(f'{s.path} ({s.format}, {s.files} files)') for s in result.sources)}; "
             f"{result.elapsed_s:.1f} s", ""]
    if result.findings:
        lines += ["| severity | code | finding |", "|---|---|---|"]
        lines += [f"| {f.severity} | `{f.code}` | {markdown_cell(render.title(f))} |" for f in result.findings]
        lines.append("")
        lines += [f"- **{f.code}**: {markdown_cell(render.fix(f))}" for f in result.findings if render.fix(f)]
        lines.append("")
    lines += ["| slice | rows | NaN | Inf | zero | constant | median norm |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {s.key} | {s.rows} | {s.nan_rows} | {s.inf_rows} | {s.zero_rows} | {s.constant_rows} | "
              f"{s.norm_median:.4g} |" for s in result.slices]
    if result.samples_flagged:
        lines += ["", f"Samples named ({len(result.samples_flagged)}, up to 20 a finding):", ""]
        lines += [f"- `{s.sample}`: {', '.join(s.codes)}" for s in result.samples_flagged[:50]]
    lines += [f"- note: {markdown_cell(n)}" for n in result.notes]
    return "\n".join(lines) + "\n"


def format_summary(result: AuditResult) -> str:
    """The terminal summary: verdict and one line a finding."""
    lines = [f"audit {result.verdict}: {result.samples} samples, {result.tokens} tokens, "
             f"{result.bytes / 1e9:.2f} GB in {result.elapsed_s:.1f} s"]
    lines += [f"  {f.severity:5} {f.code:22} {render.title(f)}" for f in result.findings]
    lines += [f"  note: {n}" for n in result.notes]
    return "\n".join(lines)
