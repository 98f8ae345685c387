"""explain/drift.py: the right index, no transform, off by more than the noise tolerance but less than
drift alone gives; where the error is flat along the sequence, no position signature."""

from explain_rows import explained


def test_noise_past_the_tolerance_is_drift_not_a_transform():
    e = explained(lambda t, s, p, end: t[(2, "post")].copy(), noise=0.12)
    assert e.winner.name == "drift" and e.winner.params["hf_index"] == 2
    assert 0.07 < e.winner.held_out_rel_rms < 0.2 and e.winner.params["signature"] == []


def test_within_the_tolerance_it_is_identity():
    e = explained(lambda t, s, p, end: t[(2, "post")].copy(), noise=0.02)
    assert e.winner.name == "identity"
