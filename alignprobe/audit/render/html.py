"""report.html: one self-contained page (no scripts, no external files)."""

from __future__ import annotations

import html
import json

from alignprobe.audit.result import AuditResult
from alignprobe.findings import render
from alignprobe.findings.jsonable import jsonable

COLOURS = {"info": "#2563eb", "warn": "#b45309", "error": "#b91c1c", "PASS": "#15803d", "WARN": "#b45309", "FAIL": "#b91c1c"}


def render_html(result: AuditResult) -> str:
    e = html.escape
    rows = "".join(
        f"<tr><td style='color:{COLOURS[f.severity]}'>{e(f.severity)}</td><td><code>{e(f.code)}</code></td>"
        f"<td>{e(render.title(f))}<br><small>{e(render.fix(f))}</small><details><summary>evidence</summary>"
        f"<pre>{e(json.dumps(jsonable(f.evidence), indent=1)[:20000])}</pre></details></td></tr>"
        for f in result.findings)
    slices = "".join(
        f"<tr><td>{e(s.key)}</td><td>{s.rows}</td><td>{s.nan_rows}</td><td>{s.inf_rows}</td><td>{s.zero_rows}</td>"
        f"<td>{s.constant_rows}</td><td>{s.norm_median:.4g}</td></tr>" for s in result.slices)
    flagged = "".join(f"<li><code>{e(s.sample)}</code>: {e(', '.join(s.codes))}</li>" for s in result.samples_flagged)
    sources = "".join(f"<li>{e(s.path)} ({e(s.format)}, {s.files} files, {s.units} units)</li>" for s in result.sources)
    notes = "".join(f"<li>{e(n)}</li>" for n in result.notes)
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>alignprobe audit: {result.verdict}</title>
<style>body{{font-family:system-ui,sans-serif;margin:2em;max-width:1100px}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ddd;padding:4px 8px;vertical-align:top;text-align:left}}pre{{max-height:20em;overflow:auto}}</style>
</head><body><h1>alignprobe audit: <span style="color:{COLOURS[result.verdict]}">{result.verdict}</span></h1>
<p>{result.samples} samples, {result.tokens} tokens, {result.bytes / 1e9:.2f} GB read in {result.elapsed_s:.1f} s
({result.workers or 'no'} Dask workers{f', {result.resumed_units} units resumed' if result.resumed_units else ''}).</p>
<ul>{sources}</ul><h2>Findings</h2><table><tr><th>severity</th><th>code</th><th>finding and fix</th></tr>{rows or '<tr><td colspan=3>none</td></tr>'}</table>
<h2>Slices</h2><table><tr><th>slice</th><th>rows</th><th>NaN</th><th>Inf</th><th>zero</th><th>constant</th><th>median norm</th></tr>{slices}</table>
<h2>Samples named</h2><ul>{flagged or '<li>none</li>'}</ul>{f'<h2>Notes</h2><ul>{notes}</ul>' if notes else ''}
</body></html>
"""
