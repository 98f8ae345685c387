"""explain/end_aligned.py: serve rows that are the train sample's last ones, given its first tokens' ids
(a chunked prefill's last chunk), named with each sample's offset; tried only where the train samples
run past the serve ones."""

import numpy as np

from explain_rows import H, LENGTH, SAMPLES, explained


def end_rows(rng, sample):  # the train sample's later rows: states of their own
    return rng.standard_normal((len(sample), H)) * 3


def test_serve_rows_that_are_the_sample_end_are_named_with_each_offset():
    e = explained(lambda t, s, p, end: end[(2, "post")].copy(), end_of=end_rows)
    assert e.winner.name == "end_aligned_rows" and e.winner.params["offsets"]["s1"] == 48
    # ... and where the serve rows are neither the end rows nor in place, nothing fits
    e = explained(lambda t, s, p, end: np.random.default_rng(7).standard_normal((SAMPLES * LENGTH, H)), end_of=end_rows)
    assert e.winner.name == "nothing_fits"
    # in place (the train side merely longer): identity, the end rows never tried
    e = explained(lambda t, s, p, end: t[(2, "post")].copy(), end_of=end_rows)
    assert e.winner.name == "identity" and "end_aligned_rows" not in [f.name for f in e.tried]
