"""What a threshold can mean, checked in one place: compare's policy and the audit's thresholds.

A cosine lies in [-1, 1], a fraction in [0, 1], a growth factor is at least 1; every other
tolerance (a rel-RMS, a margin, a number of sigmas) is a non-negative number. NaN, infinities,
numbers too large for a float and booleans are refused, as one line naming the key.
"""

from __future__ import annotations

import math
from typing import Any

from alignprobe.errors import BadInput

Range = tuple[float, float, str]  # (lowest, highest, what it must be, for the message)
COSINE: Range = (-1.0, 1.0, "a cosine between -1 and 1")
FRACTION: Range = (0.0, 1.0, "a fraction between 0 and 1")
FACTOR: Range = (1.0, math.inf, "a factor of at least 1")
COSINE_DIFFERENCE: Range = (0.0, 2.0, "between 0 and 2 (a difference of cosines)")
NON_NEGATIVE: Range = (0.0, math.inf, "at least 0")


def checked_number(value: Any, key: str, allowed: Range, where: str) -> float:
    """``value`` as a finite float within ``allowed``, else one BadInput line: ``{where}: {key} ...``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadInput(f"{where}: {key} must be a number, got {value!r}")
    try:
        number = float(value)
    except OverflowError:
        raise BadInput(f"{where}: {key} is too large for a number") from None
    low, high, meaning = allowed
    if not (math.isfinite(number) and low <= number <= high):
        raise BadInput(f"{where}: {key} = {number!r} is out of range; it must be {meaning} and finite")
    return number
