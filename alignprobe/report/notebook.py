"""How a CompareResult shows itself in Jupyter: verdict, findings with fixes, a compact layer table.

Plots are methods of the result (``result.plot_similarity()`` ...) that return matplotlib figures;
this view stays text so a notebook with many results stays light.
"""

from __future__ import annotations

from alignprobe.compare.result import CompareResult, StreamComparison
from alignprobe.report.finding_html import findings_html
from alignprobe.report.format import escape, format_number
from alignprobe.report.html import STYLE, mapping_table, verdict_banner

PLOT_METHODS = "plot_similarity(), plot_layers(), plot_positions(), plot_slices(), plot_token_cosines()"


def repr_html(result: CompareResult) -> str:
    parts = [f"<div class=\"alignprobe-result\"><style>{STYLE}</style>", verdict_banner(result),
             findings_html(result.findings)]
    for search in result.mappings:
        parts += [f"<p><b>Mapping of <code>{escape(search.serve_stream)}</code></b></p>", mapping_table(search)]
    parts += [compact_layer_table(pair) for pair in result.streams if pair.slices]
    parts.append(f'<p class="ap-muted">Plots: {PLOT_METHODS}; full report: alignprobe.report.write_report(result, dir).</p></div>')
    return "\n".join(parts)


def compact_layer_table(pair: StreamComparison) -> str:
    """Label, tokens, cosine mean/p1, rel-RMS and norm ratio of each compared HF index."""
    rows = "".join(
        f'<tr><td class="l">{escape(s.label)}</td><td>{s.tokens}</td><td>{format_number(s.cosine_mean, 5)}</td>'
        f"<td>{format_number(s.cosine_p1, 5)}</td><td>{format_number(s.rel_rms, 3)}</td><td>{format_number(s.norm_ratio, 4)}</td></tr>"
        for s in pair.slices
    )
    return (f"<p><b><code>{escape(pair.serve_stream)}</code> vs <code>{escape(pair.train_stream)}</code></b></p>"
            '<table class="ap"><tr><th class="l">HF index</th><th>tokens</th><th>cos mean</th><th>cos p1</th>'
            f"<th>rel-RMS</th><th>norm ratio</th></tr>{rows}</table>")

