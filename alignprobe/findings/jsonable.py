"""The one JSON encoding of numbers every result file uses.

JSON has no NaN or infinity: a non-finite float is written as the string ``"nan"``, ``"inf"`` or
``"-inf"`` (``null`` means "not measured", never a number), so a reader tells the two apart and the
file stays strict JSON (``allow_nan=False``).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

FLOAT_WORDS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def jsonable(value: Any) -> Any:
    """``value`` (dataclasses, mappings, sequences, numpy scalars) as plain JSON data."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, bool) or value is None or isinstance(value, (str, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else ("nan" if math.isnan(value) else ("inf" if value > 0 else "-inf"))
    if hasattr(value, "items"):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if hasattr(value, "item"):  # a numpy scalar
        return jsonable(value.item())
    if hasattr(value, "tolist"):  # a numpy array
        return jsonable(value.tolist())
    return str(value)


def number(value: Any) -> Any:
    """A number as :func:`jsonable` wrote it, back to a float (the words back to NaN / infinities)."""
    return FLOAT_WORDS.get(value, value) if isinstance(value, str) else value
