"""findings/jsonable.py: one JSON encoding of non-finite numbers."""

import math

from alignprobe.findings.jsonable import jsonable, number


def test_one_encoding_of_non_finite_numbers():
    assert jsonable({"a": math.nan, "b": [math.inf, -math.inf, 1.5], "c": None}) == {
        "a": "nan", "b": ["inf", "-inf", 1.5], "c": None}
    assert math.isinf(number("-inf")) and number(2.0) == 2.0
