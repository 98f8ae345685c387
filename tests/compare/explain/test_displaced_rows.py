"""explain/displaced_rows.py: runs of serve rows that are train rows of other positions of the same
sample (chunks stitched in another order), named as a row_shift with each run's offset."""

import numpy as np

from explain_rows import H, LENGTH, SAMPLES, explained


def test_the_halves_of_each_sample_stitched_the_other_way_round_are_displaced_runs():
    def halves(t, s, p, end):
        a = t[(2, "post")].reshape(SAMPLES, LENGTH, H)
        return np.concatenate([a[:, LENGTH // 2:], a[:, :LENGTH // 2]], axis=1).reshape(-1, H)

    e = explained(halves)
    assert e.winner.name == "displaced_rows" and e.winner.held_out_rel_rms < 0.01
    assert e.winner.params["pattern"] == "within the sample" and e.winner.params["code"] == "row_shift"
    assert all(abs(offsets[0]) == LENGTH // 2 for offsets in e.winner.params["offsets"].values())
