"""The report's accept-length section: the drafter's predicted AL per draft position, train beside serve.

It reads the plain dict ``CompareResult.accept`` (AcceptResult.to_dict()), so a result.json rendered
elsewhere shows it without the drafter or the dumps.
"""

from __future__ import annotations

from typing import Any

from alignprobe.accept.result import AcceptResult
from alignprobe.report.finding_html import findings_html
from alignprobe.report.format import escape


def accept_section(accept: dict[str, Any]) -> str:
    result = AcceptResult.from_dict(accept)
    k = result.num_draft_tokens
    head = "".join(f"<th>draft {j + 1}</th>" for j in range(k))
    rows = []
    for name, side in (("train", result.train), ("serve", result.serve)):
        if side is None:
            rows.append(f"<tr><td>{name}</td><td colspan=\"{k + 3}\" class=\"ap-muted\">not predicted</td></tr>")
            continue
        cells = "".join(f"<td>{_num(p)}</td>" for p in side.per_position)
        cond = ", ".join(_num(p) for p in side.conditional)
        rows.append(f"<tr><td>{name}</td><td><b>{_num(side.accept_length, 2)}</b></td>{cells}<td>{cond}</td>"
                    f"<td>{side.drafts}</td><td><code>{escape(side.stream)}</code> HF{escape(side.hf_indices)}: {escape(side.fed)}</td></tr>")
    if result.train is not None and result.serve is not None:
        loss = "".join(f"<td>{_num(a - b)}</td>" for a, b in zip(result.train.per_position, result.serve.per_position))
        rows.append(f"<tr><td>cost</td><td><b>{_num(result.cost, 2)}</b></td>{loss}<td colspan=\"3\"></td></tr>")
    table = (f"<table><tr><th>side</th><th>accept length</th>{head}<th>conditional per step</th><th>drafts</th>"
             f"<th>fed</th></tr>{''.join(rows)}</table>")
    parts = [f"<h2>Predicted accept length ({escape(result.layout)} drafter, {k} drafts)</h2>",
             f"<p>{escape(result.sentence())}</p>", table,
             "<p class=\"ap-muted\">draft j: share of the engine's drafts whose tokens 1..j are all accepted (vLLM's "
             "accepted_per_pos[j] / drafts); accept length = 1 + their sum. docs/accept.md says how it is predicted.</p>"]
    if result.findings:
        parts += ["<h3>Drafter checks</h3>", findings_html(result.findings)]
    return "\n".join(parts)


def _num(value, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"
