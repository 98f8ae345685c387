"""compare/diagnoses/tokens.py: the samples and token ids of the two sides: samples on one side only, no
rows that line up, ids that differ from some position on, ids shifted by k, extra trailing tokens."""

import numpy as np

from alignprobe.compare import compare
from compare_helpers import make_samples, write_serve, write_train


def pair(tmp_path, ids_fn=None, skip=(), states=None):
    """A train dump of 4 samples and a serve dump of the same ones, or of ``states`` (the same ids)."""
    samples = make_samples(num=4, length=30)
    train = write_train(tmp_path / "t.h5", samples)
    return train, write_serve(tmp_path / "s.h5", states or samples, ids_fn=ids_fn, skip=skip)


def test_samples_on_one_side_only_are_counted_and_named(tmp_path):
    samples = make_samples(num=4, length=30)
    f = compare(*pair(tmp_path, skip=(list(samples)[1],))).finding("sample_mismatch")
    assert f.evidence["train_only"] == 1 and f.evidence["serve_only"] == 0 and f.evidence["paired"] == 3


def test_no_rows_that_line_up_is_an_error(tmp_path):
    other = make_samples(num=4, length=30, seed=5)  # the same ids, other tokens
    r = compare(*pair(tmp_path, states=other))
    assert r.finding("no_aligned_tokens").severity == "error" and r.verdict == "FAIL"


def test_ids_that_differ_from_a_position_on_are_shown_where(tmp_path):
    def diverge(ids, sid):
        out = np.array(ids).copy()
        out[12:] = (out[12:] + 1) % 1000
        return out

    f = compare(*pair(tmp_path, ids_fn=diverge)).finding("token_mismatch")
    assert f.severity == "warn" and f.evidence["samples"] == 4
    assert {e["first_divergence"] for e in f.evidence["examples"]} == {12}


def test_ids_that_agree_after_a_shift_are_named_with_the_shift(tmp_path):
    dropped_first_two = {k: (ids[2:], hf[2:], pre[2:]) for k, (ids, hf, pre) in make_samples(num=4, length=30).items()}
    f = compare(*pair(tmp_path, states=dropped_first_two)).finding("token_shift")
    assert f.severity == "warn" and f.evidence["shifts"] == {"2": 4}


def test_extra_trailing_tokens_on_one_side_are_said_at_info(tmp_path):
    longer = {k: (np.concatenate([ids, [7, 8, 9]]), np.concatenate([hf, hf[-3:]]), np.concatenate([pre, pre[-3:]]))
              for k, (ids, hf, pre) in make_samples(num=4, length=30).items()}
    f = compare(*pair(tmp_path, states=longer)).finding("token_padding")
    assert f.severity == "info" and f.evidence["sides"] == {"serve": 4}
