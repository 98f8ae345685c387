"""explain/identity.py: the serve slice is the expected train slice, within the noise."""

from explain_rows import explained


def test_identity_within_noise_and_its_runner_up():
    e = explained(lambda t, s, p, end: t[(2, "post")].copy())
    assert e.winner.name == "identity" and e.winner.held_out_rel_rms < 0.01 and e.runner_up is not None
