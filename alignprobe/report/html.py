"""One self-contained HTML page per comparison: the verdict, the findings with their fixes, the plots.

Everything the page needs is inside it (CSS inline, plots as base64 PNG): it opens from a CI
artifact or an e-mail attachment without a network. The fragments (verdict banner, findings, layer
table) are also what a notebook shows for a result (``CompareResult._repr_html_``).
"""

from __future__ import annotations

import base64
import io
import json
import math
from typing import Any, Iterable

from matplotlib.figure import Figure

from alignprobe.compare.result import CompareResult, MappingSearch, StreamComparison
from alignprobe.compare.sampling import Z95
from alignprobe.compare.summary import half_width_multiplier
from alignprobe.findings import Finding
from alignprobe.report.accept_html import accept_section
from alignprobe.report.evidence import past_warning
from alignprobe.report.finding_html import findings_html
from alignprobe.report.format import escape, format_number

_BAD_ROW = ' class="ap-bad"'
_LEFT = ' class="l"'

PAGE_STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; max-width: 1180px;
       padding: 0 24px 48px; color: #1d1d1f; }
"""

# The components, also used inside a notebook cell (where the page's body rule must not apply).
STYLE = """
.ap-verdict { margin: 16px 0; padding: 14px 20px; border-radius: 8px; color: white; }
.ap-verdict h1 { margin: 0; font-size: 28px; letter-spacing: 0.04em; }
.ap-verdict p { margin: 4px 0 0; }
.ap-todo { margin: -8px 0 16px; padding: 10px 20px; border: 1px solid #d0d7de; border-radius: 0 0 8px 8px; }
.ap-todo li { margin: 4px 0; }
.ap-verdict code { background: rgba(255, 255, 255, 0.18); color: white; }
.ap-PASS { background: #1e7d32; } .ap-WARN { background: #b26a00; } .ap-FAIL { background: #b3261e; }
.ap-finding { border-left: 5px solid #999; background: #f7f7f8; margin: 10px 0; padding: 8px 14px; border-radius: 4px; }
.ap-finding h3 { margin: 0 0 4px; font-size: 15px; }
.ap-error { border-color: #b3261e; } .ap-warn { border-color: #b26a00; } .ap-info { border-color: #5f6b7a; }
.ap-sev { text-transform: uppercase; font-size: 11px; font-weight: 700; padding: 1px 6px; border-radius: 3px;
          color: white; margin-right: 6px; vertical-align: middle; }
.ap-sev-error { background: #b3261e; } .ap-sev-warn { background: #b26a00; } .ap-sev-info { background: #5f6b7a; }
.ap-fix { margin: 6px 0 2px; } .ap-fix b { color: #1e5aa8; }
table.ap { border-collapse: collapse; margin: 6px 0 12px; font-size: 13px; }
table.ap th, table.ap td { border: 1px solid #d0d0d5; padding: 3px 8px; text-align: right; }
table.ap th { background: #eef0f3; } table.ap td.l, table.ap th.l { text-align: left; }
table.ap tr.ap-bad td { background: #fde8e6; }
table.ap-evidence td, table.ap-evidence-table td { vertical-align: top; font-variant-numeric: tabular-nums; font-size: 12px; }
table.ap-evidence th { text-align: left; font-weight: 600; }
table.ap-evidence-table th { font-size: 12px; vertical-align: bottom; }
table.ap td.ap-past { background: #fde8e6; font-weight: 600; }
/* a record inside a cell (an explanation's fitted params): labelled rows without the outer grid */
table.ap table.ap-nested { border-collapse: collapse; }
table.ap table.ap-nested th, table.ap table.ap-nested td { border: none; background: none; padding: 0 8px 0 0; text-align: left; }
table.ap table.ap-nested th { font-weight: 600; color: #444; }
.ap-tol { color: #666; font-weight: normal; font-size: 11px; }
.ap-ev-name { margin: 6px 0 0; font-size: 12px; font-weight: 600; color: #444; }
figure { margin: 18px 0; } figure img { width: 100%; height: auto; border: 1px solid #e0e0e4; }
figcaption { color: #555; font-size: 13px; }
details { margin: 6px 0; } summary { cursor: pointer; font-weight: 600; }
code { background: #eef0f3; padding: 0 3px; border-radius: 3px; }
.ap-muted { color: #666; }
"""


def render_html(result: CompareResult, figures: Iterable[tuple[str, Figure]] = ()) -> str:
    """The whole page; ``figures`` are ``(caption, figure)`` pairs, embedded in order."""
    body = [
        verdict_banner(result),
        fixes_html(result),
        "<h2>Findings</h2>",
        findings_html(result.findings, policy=result.policy),
        "<h2>Tokens</h2>",
        tokens_html(result),
    ]
    for search in result.mappings:
        body += [f"<h2>Mapping of <code>{escape(search.serve_stream)}</code></h2>", mapping_table(search)]
    if getattr(result, "explanations", None):
        body += ["<h2>Explanations</h2>", explanations_table(result)]
    for pair in result.streams:
        body += [f"<h2>Per HF index: {_pair_title(pair)}</h2>", layer_table(pair, result.policy, half_width_multiplier(result))]
    if result.accept:
        body.append(accept_section(result.accept))
    figures = list(figures)
    if figures:
        body.append("<h2>Plots</h2>")
        body += [figure_html(caption, fig) for caption, fig in figures]
    body += ["<h2>Provenance and settings</h2>", provenance_html(result)]
    title = f"alignprobe {result.verdict}: train {result.train_path or '-'} vs serve {result.serve_path or '-'}"
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{escape(title)}</title>"
        f"<style>{PAGE_STYLE}{STYLE}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )


# -- fragments (shared with the notebook view) -----------------------------------------------------

def verdict_banner(result: CompareResult) -> str:
    counts = _severity_counts(result.findings)
    summary = ", ".join(_count(counts[sev], word) for sev, word in _SEVERITY_WORDS.items() if counts.get(sev))
    t = result.tokens
    scope = f"{t.compared_samples or t.paired} samples, {t.aligned_tokens} tokens compared"
    return (
        f'<div class="ap-verdict ap-{escape(result.verdict)}" data-verdict="{escape(result.verdict)}">'
        f"<h1>{escape(result.verdict)}</h1>"
        f"<p>{escape(summary or 'no findings')} &middot; {escape(scope)} &middot; N={result.num_layers} layers, H={result.hidden_size}</p>"
        f"<p>train <code>{escape(result.train_path)}</code> vs serve <code>{escape(result.serve_path)}</code></p></div>"
    )


def layer_table(pair: StreamComparison, policy: dict[str, Any] | None = None, multiplier: float = Z95) -> str:
    """One row per compared HF index; rows past the policy's drift warning (cosine p1 or rel-RMS) are shaded.
    A sampled run's cosine mean and rel-RMS carry their 95% interval (``multiplier`` standard errors)."""
    if not pair.slices:
        return '<p class="ap-muted">No per-layer numbers: the serve slices are not the train slices they should be (see the mapping above).</p>'
    policy = policy or {}
    head = ("HF index", "train", "serve", "tokens", "cos mean", "cos p1", "cos p5", "cos min", "rel-RMS", "SQNR dB",
            "norm ratio", "max |diff|", "bad rows")
    rows = []
    for s in pair.slices:
        bad_rows = sum(h.nonfinite_rows + h.degenerate_rows for h in (s.train_health, s.serve_health))
        flagged = past_warning("cosine_p1", s.cosine_p1, policy) or past_warning("rel_rms", s.rel_rms, policy)
        cells = [
            f'<td class="l">{escape(s.label)}</td>',
            f'<td class="l">{escape(s.train_stream)}[{s.train_slice}]</td>',
            f'<td class="l">{escape(s.serve_stream)}[{s.serve_slice}]</td>',
            f"<td>{s.tokens}</td>",
            f"<td>{format_number(s.cosine_mean, 5)}{_interval(s.cosine_mean_se, multiplier)}</td>",
            *(f"<td>{format_number(v, 5)}</td>" for v in (s.cosine_p1, s.cosine_p5, s.cosine_min)),
            f"<td>{format_number(s.rel_rms, 3)}{_interval(s.rel_rms_se, multiplier)}</td>",
            f"<td>{format_number(s.sqnr_db, 3)}</td>",
            f"<td>{format_number(s.norm_ratio, 4)}</td>",
            f"<td>{format_number(s.max_abs_diff, 3)}</td>",
            f"<td>{bad_rows}</td>",
        ]
        rows.append(f"<tr{_BAD_ROW if flagged else ''}>{''.join(cells)}</tr>")
    header = "".join(f"<th{_LEFT if i < 3 else ''}>{h}</th>" for i, h in enumerate(head))
    return f'<table class="ap"><tr>{header}</tr>{"".join(rows)}</table>'


def _interval(se: float | None, multiplier: float) -> str:
    """`` ± 1.2e-04`` after a sampled metric (``± ?`` where fewer than 2 samples give no estimate)."""
    if se is None:
        return ""
    if not (_finite(se) and _finite(multiplier)):
        return ' <span class="ap-muted">± ?</span>'
    return f' <span class="ap-muted">± {multiplier * se:.1e}</span>'


def mapping_table(search: MappingSearch) -> str:
    """Per serve slice: what it claims, what training used there, what it measures as, and how clearly."""
    same_width = len(search.expected) == len(search.matches)
    expected = search.expected if same_width else [""] * len(search.matches)
    rows = []
    for m, claimed, want in zip(search.matches, search.claimed or search.serve_labels, expected):
        wrong = bool(want) and m.best_label != want
        runner = f"{escape(m.runner_up_label)} ({format_number(m.runner_up_score, 4)})" if m.runner_up >= 0 else "-"
        rows.append(
            f'<tr{_BAD_ROW if wrong else ""}><td>{m.serve_slice}</td><td class="l">{escape(claimed)}</td>'
            f'<td class="l">{escape(want or "-")}</td><td class="l"><b>{escape(m.best_label)}</b></td><td>{format_number(m.score, 4)}</td>'
            f'<td class="l">{runner}</td><td>{format_number(m.margin, 4)}</td></tr>'
        )
    header = ('<tr><th>slice</th><th class="l">claimed</th><th class="l">training used</th><th class="l">measured</th>'
              '<th>cosine</th><th class="l">runner-up</th><th>margin</th></tr>')
    note = f'<p class="ap-muted">Measured on {search.tokens_sampled} tokens ({escape(search.sampling)}).'
    if search.expected and not same_width:
        note += f" Training used {len(search.expected)} slices here: {escape(', '.join(search.expected))}."
    note += "</p>"
    return f'<table class="ap">{header}{"".join(rows)}</table>{note}'


def fixes_html(result: CompareResult) -> str:
    """What to do, right under the verdict: each error's and warning's fix with what and where it is
    about, so the first screen answers what is wrong, which layers and what to change ('' on none)."""
    from alignprobe.findings import render

    items = []
    for f in result.findings:
        fix = render.fix(f)
        if f.severity in ("error", "warn") and fix:
            where = render.where(f).strip()
            items.append(f"<li><b>{escape(f.code)}</b>{' ' + escape(where) if where else ''}: {escape(fix)}</li>")
    if not items:
        return ""
    return f'<div class="ap-todo" data-section="fixes"><b>What to do</b><ul>{"".join(items)}</ul></div>'


def explanations_table(result: CompareResult) -> str:
    """Per explained serve slice: the simplest explanation that fits and the runner-up, each with its
    held-out fit (rel-RMS on rows the parameters were not fitted on) and what it found."""
    rows = []
    for e in result.explanations:
        w, r = e.winner, e.runner_up
        off = w.name not in ("identity", "drift")
        runner = f"{escape(r.name)} ({format_number(r.held_out_rel_rms, 3)})" if r else "-"
        rows.append(
            f'<tr{_BAD_ROW if off else ""}><td class="l"><code>{escape(e.serve_stream)}</code>[{e.serve_slice}]</td>'
            f'<td class="l">{escape(e.label)}</td><td class="l"><b>{escape(w.name)}</b></td>'
            f'<td>{format_number(w.held_out_rel_rms, 3)}</td><td class="l">{escape(w.summary)}</td>'
            f'<td class="l">{runner}</td></tr>'
        )
    header = ('<tr><th class="l">serve slice</th><th class="l">training used</th><th class="l">explanation</th>'
              '<th>held-out rel-RMS</th><th class="l">what it found</th><th class="l">runner-up (held-out)</th></tr>')
    rows_used = result.explanations[0].rows
    note = (f'<p class="ap-muted">Fitted on some of {rows_used} sampled rows and scored on the others; the simplest '
            "explanation within the policy's noise wins (docs/findings.md, Explanations).</p>")
    return f'<table class="ap">{header}{"".join(rows)}</table>{note}'


def tokens_html(result: CompareResult) -> str:
    t = result.tokens
    lines = [f"{t.paired} samples paired by {'token sequence' if t.paired_by == 'tokens' else 'id'}, {t.identical} with identical token ids; {t.aligned_tokens} token rows compared."]
    if t.train_only or t.serve_only:
        lines.append(
            f"Unpaired: {t.train_only} only in train ({escape(', '.join(t.train_only_examples[:5]))}), "
            f"{t.serve_only} only in serve ({escape(', '.join(t.serve_only_examples[:5]))})."
        )
    text = "".join(f"<p>{line}</p>" for line in lines)
    if not t.issues:
        return text
    rows = "".join(
        f'<tr><td class="l">{escape(i.sample_id)}</td><td class="l">{escape(i.kind)}</td><td>{i.train_len}</td><td>{i.serve_len}</td>'
        f"<td>{i.aligned_length}</td><td>{i.shift}</td><td>{i.first_divergence}</td></tr>"
        for i in t.issues[:20]
    )
    # Only the first issues are kept in the result; issue_counts counts all of them.
    total = sum(t.issue_counts.values()) or len(t.issues)
    more = f'<p class="ap-muted">and {total - 20} more</p>' if total > 20 else ""
    return (text + '<table class="ap"><tr><th class="l">sample</th><th class="l">issue</th><th>train len</th><th>serve len</th>'
            f"<th>aligned</th><th>shift</th><th>first divergence</th></tr>{rows}</table>{more}")


def provenance_html(result: CompareResult) -> str:
    """Where each dump came from and the settings used, folded away (no script needed to unfold)."""

    def block(title: str, value: dict[str, Any]) -> str:
        rows = "".join(
            f'<tr><td class="l">{escape(k)}</td><td class="l">{escape(json.dumps(v, sort_keys=True, default=str))}</td></tr>'
            for k, v in value.items()
        )
        return f'<details><summary>{escape(title)}</summary><table class="ap ap-evidence">{rows}</table></details>'

    notes = "".join(f"<li>{escape(n)}</li>" for n in result.notes)
    return "".join([
        block("train dump", {"path": result.train_path, **result.train_provenance}),
        block("serve dump", {"path": result.serve_path, **result.serve_provenance}),
        block("policy (tolerances that made the verdict)", result.policy),
        block("options", {**result.options, "elapsed_s": round(result.elapsed_s, 2)}),
        f"<h3>Notes</h3><ul>{notes}</ul>" if notes else "",
    ])


def figure_html(caption: str, fig: Figure, dpi: int = 100) -> str:
    """The figure as an embedded PNG; the tolerance lines it draws (plots.py records them) go into
    ``data-tolerances`` as JSON, so a reader's tool or a browser test can check them without the pixels."""
    tolerances = getattr(fig, "tolerances", [])
    data = f' data-tolerances="{escape(json.dumps(tolerances))}"' if tolerances else ""
    return (f'<figure><img alt="{escape(caption)}"{data} src="data:image/png;base64,{figure_png_base64(fig, dpi)}">'
            f"<figcaption>{escape(caption)}</figcaption></figure>")


def figure_png_base64(fig: Figure, dpi: int = 100) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


# -- formatting ------------------------------------------------------------------------------------

def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


_SEVERITY_WORDS = {"error": "error", "warn": "warning", "info": "note"}


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _severity_counts(findings: list[Finding]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for f in findings:
        counts[f.severity] = counts.get(f.severity, 0) + 1
    return counts


def _pair_title(pair: StreamComparison) -> str:
    if pair.serve_stream == pair.train_stream:
        return f"<code>{escape(pair.serve_stream)}</code>"
    return f"serve <code>{escape(pair.serve_stream)}</code> vs train <code>{escape(pair.train_stream)}</code>"
