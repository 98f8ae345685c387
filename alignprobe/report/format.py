"""Numbers and text as every report page writes them (HTML, Markdown, the accept section)."""

from __future__ import annotations

import html
import math
from typing import Any


def format_number(value: Any, digits: int) -> str:
    if isinstance(value, str):  # "inf" / "nan" as JSON stores them
        return value
    if value is None:
        return "-"
    value = float(value)
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e5):
        return f"{value:.{max(1, digits - 1)}e}"
    return f"{value:.{digits}g}" if abs(value) >= 1 else f"{value:.{digits}f}".rstrip("0").rstrip(".") or "0"


def escape(value: Any) -> str:
    return html.escape(str(value), quote=True)
