"""explain/scalar_scale.py: the expected slice times one factor (scale_mismatch), named with the factor."""

import pytest

from explain_rows import explained


def test_a_scaled_slice_is_named_with_its_factor():
    e = explained(lambda t, s, p, end: 3.0 * t[(2, "post")])
    assert e.winner.name == "scalar_scale" and e.winner.params["factor"] == pytest.approx(3.0, rel=1e-2)
