"""A value of a finding's evidence as a person reads it, the one way every page writes it (the terminal
summary, the HTML report, the CI summary): numbers at 4 significant digits, lists and records as
compact JSON of such numbers, never cut (result.json keeps the full precision)."""

from __future__ import annotations

import json
import math
from typing import Any

DIGITS = 4  # enough to tell two fits apart; the 16 digits of a float are noise to a reader


def evidence_value(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, float):
        return f"{value:.{DIGITS}g}" if math.isfinite(value) else str(value)
    if isinstance(value, (int, str)):
        return str(value)
    return json.dumps(_rounded(value), separators=(", ", ": "))


def _rounded(value: Any) -> Any:
    if isinstance(value, float) and math.isfinite(value):
        return float(f"{value:.{DIGITS}g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    return value
