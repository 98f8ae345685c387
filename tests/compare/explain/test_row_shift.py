"""explain/row_shift.py: each serve row is the train row a few positions on, in the same sample."""

import numpy as np

from explain_rows import H, LENGTH, SAMPLES, explained


def test_rows_shifted_within_each_sample_are_named_with_the_shift():
    def shifted(t, s, p, end):
        a = t[(2, "post")].reshape(SAMPLES, LENGTH, H)
        return np.roll(a, -2, axis=1).reshape(-1, H)

    e = explained(shifted)
    assert e.winner.name == "row_shift" and e.winner.params["shift"] == 2
