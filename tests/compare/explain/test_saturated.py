"""explain/saturated.py: the expected slice clipped at +-c (a narrow format without a scale that fits),
named with the limit."""

import numpy as np
import pytest

from explain_rows import explained, code_of


def test_a_clipped_slice_is_named_with_its_limit():
    e = explained(lambda t, s, p, end: np.clip(t[(2, "post")], -4.0, 4.0))
    assert e.winner.name == "saturated" and code_of(e.winner.name) == "saturated"
    assert e.winner.params["limit"] == pytest.approx(4.0, rel=0.01) and e.winner.params["values_at_limit"] > 1
