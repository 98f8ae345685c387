"""A finding's evidence as small tables of labelled numbers, each compared value beside its tolerance.

Evidence is a JSON-able dict (diagnoses build it): scalars become labelled rows; a list of records
(``by_depth``, ``slices``) a table with one column per field; a nested dict a two-column table, and a
dict inside a cell (an explanation's fitted ``params``) labelled rows of its own. Numbers read as
findings/evidence_text.py writes them everywhere (4 significant digits, never cut). A
column the policy has a level for (rel-RMS, cosine p1, norm ratio, margin) says the level in its
heading, and a value past it is shaded, so "how far over" is read beside the value.
"""

from __future__ import annotations

import html
import math
from typing import Any, Mapping

from alignprobe.findings.evidence_text import evidence_value
from alignprobe.findings.jsonable import jsonable

# field -> (heading, policy keys (warn, fail) or one key, which side is bad)
LEVELS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "rel_rms": ("rel-RMS", ("drift_warn_rel_rms", "drift_fail_rel_rms"), "above"),
    "cosine_p1": ("cosine p1", ("drift_warn_cosine_p1", "drift_fail_cosine_p1"), "below"),
    "norm_ratio": ("norm ratio", ("scale_tolerance",), "band"),
    "margin": ("margin", ("mapping_min_margin",), "below"),
    "min_margin": ("smallest margin", ("mapping_min_margin",), "below"),
    "score": ("cosine", ("mapping_min_cosine",), "below"),
    "growth": ("growth", ("position_growth",), "above"),
}
LABELS = {
    "cosine_mean": "cosine mean", "cosine_p50": "cosine p50", "sqnr_db": "SQNR dB", "serve_slice": "serve slice",
    "runner_up": "runner-up", "rel_rms_if_rescaled_approx": "rel-RMS if rescaled", "early_rel_rms": "rel-RMS early",
    "late_rel_rms": "rel-RMS late", "late_positions": "late positions", "tokens_sampled": "tokens sampled",
    "serve_width": "serve width", "expected_width": "expected width", "train_width": "train width",
}
HOW_MEASURED = ("tokens_sampled", "sampling", "tokens", "hidden_size")
MAX_ROWS = 24  # a table longer than a screen is cut (the JSON holds every row)


def evidence_html(evidence: Mapping[str, Any], policy: Mapping[str, Any] | None = None) -> str:
    policy = policy or {}
    evidence = jsonable(evidence)  # numpy scalars and arrays as the numbers and lists the formatter reads
    scalars, tables = [], []
    shown: set[str] = set()
    # what was found first; how it was measured (token counts, the sampling) last
    ordered = sorted(evidence.items(), key=lambda kv: kv[0] in HOW_MEASURED)
    for key, value in ordered:
        if key in ("tolerance", "growth_tolerance"):
            continue  # shown in the headings of the values they apply to
        if isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            tables.append(f'<p class="ap-ev-name">{_label(key)}</p>' + records_table(value, policy))
        elif isinstance(value, Mapping) and value:
            tables.append(f'<p class="ap-ev-name">{_label(key)}</p>' + records_table([value], policy))
        else:
            cell = _cell(key, value, policy, beside=True)
            if isinstance(value, str) and cell in shown:
                continue  # the same sentence under a second key (a record's conventions and convention)
            shown.add(cell)
            scalars.append(f'<tr><th class="l">{_label(key)}</th><td class="l">{cell}</td></tr>')
    parts = []
    if scalars:
        parts.append(f'<table class="ap ap-evidence">{"".join(scalars)}</table>')
    parts += tables
    return '<div class="ap-ev">' + "".join(parts) + "</div>"


def records_table(records: list[Mapping[str, Any]], policy: Mapping[str, Any]) -> str:
    columns = list(dict.fromkeys(k for r in records for k in r))
    head = "".join(f'<th{" class=l" if i == 0 else ""}>{_heading(c, policy)}</th>' for i, c in enumerate(columns))
    rows = []
    for record in records[:MAX_ROWS]:
        cells = []
        for c in columns:
            value = record.get(c, "")
            bad = past_warning(c, value, policy)
            cells.append(f'<td{" class=ap-past" if bad else ""}>{_cell(c, value, policy)}</td>')
        rows.append(f"<tr>{''.join(cells)}</tr>")
    more = f'<p class="ap-muted">and {len(records) - MAX_ROWS} more rows (result.json has them)</p>' if len(records) > MAX_ROWS else ""
    return f'<table class="ap ap-evidence-table"><tr>{head}</tr>{"".join(rows)}</table>{more}'


def tolerance_text(field: str, policy: Mapping[str, Any]) -> str:
    """``warn > 0.055, fail > 0.07`` for a field the policy judges; "" otherwise."""
    if field not in LEVELS:
        return ""
    _, keys, side = LEVELS[field]
    values = [policy.get(k) for k in keys]
    if any(not isinstance(v, (int, float)) for v in values):
        return ""
    if side == "band":
        t = values[0]
        return f"ok {1 / (1 + t):.3g} to {1 + t:.3g}"
    sign = "&gt;" if side == "above" else "&lt;"
    names = ("warn", "fail") if len(values) == 2 else ("fail" if field in ("score",) else "flag",)
    return ", ".join(f"{name} {sign} {_number(v)}" for name, v in zip(names, values))


def _heading(field: str, policy) -> str:
    text = _label(field)
    levels = tolerance_text(field, policy)
    return f'{text}<br><span class="ap-tol">{levels}</span>' if levels else text


def past_warning(field: str, value: Any, policy) -> bool:
    """Whether ``value`` of ``field`` (a LEVELS field) is past the policy's first (warn) level."""
    if field not in LEVELS or not isinstance(value, (int, float)) or not math.isfinite(value):
        return False
    _, keys, side = LEVELS[field]
    first = policy.get(keys[0])
    if not isinstance(first, (int, float)):
        return False
    if side == "band":
        return value <= 0 or abs(math.log(value)) > math.log1p(first)
    return value > first if side == "above" else value < first


def _cell(field: str, value: Any, policy, beside: bool = False) -> str:
    """A value for people; ``beside``: a scalar row, where the tolerance follows the value."""
    if isinstance(value, float):
        levels = tolerance_text(field, policy) if beside else ""
        return f'{_number(value)} <span class="ap-tol">({levels})</span>' if levels else _number(value)
    if isinstance(value, Mapping) and value:
        rows = "".join(f'<tr><th class="l">{_label(k)}</th><td class="l">{_cell(k, v, policy)}</td></tr>'
                       for k, v in value.items())
        return f'<table class="ap-nested">{rows}</table>'
    return html.escape(evidence_value(value))


def _label(key: str) -> str:
    if key in LABELS:
        return html.escape(LABELS[key])
    if key in LEVELS:
        return html.escape(LEVELS[key][0])
    words = key.replace("rel_rms", "rel-RMS").replace("runner_up", "runner-up").replace("sqnr_db", "SQNR dB")
    return html.escape(words.replace("_", " "))


def _number(value: float) -> str:
    return html.escape(evidence_value(value))
