"""explain/nothing_fits.py: rows no explanation carries to its held-out rows are unexplained, with the
closest tries."""

import numpy as np

from explain_rows import explained, code_of


def test_unrelated_rows_are_unexplained_with_the_closest_tries():
    e = explained(lambda t, s, p, end: np.random.default_rng(9).standard_normal((len(s), t[(2, "post")].shape[1])))
    assert e.winner.name == "nothing_fits" and code_of(e.winner.name) == "unexplained"
    assert e.runner_up is not None and not e.runner_up.fits
