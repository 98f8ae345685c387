"""explain/foreign_rows.py: every serve sample holds another sample's rows, named with each source. Ties
between the sample's own rows and another sample's go to its own: a dataset holding the same prompt
twice, and a capture that kept only each prompt's last rows (so a shorter sample reaches none of a
longer one's rows), are identity, never foreign_rows."""

import numpy as np

from explain_rows import H, LENGTH, SAMPLES, explain_rows, explained


def test_each_sample_given_the_previous_requests_rows_is_named_with_its_source():
    e = explained(lambda t, s, p, end: np.roll(t[(2, "post")].reshape(SAMPLES, LENGTH, H), 1, axis=0).reshape(-1, H))
    assert e.winner.name == "foreign_rows" and e.winner.params["pattern"] == "other samples"
    assert e.winner.params["sources"] == {f"s{i}": f"s{(i - 1) % SAMPLES}" for i in range(SAMPLES)}


def test_the_same_prompt_twice_is_its_own_sample():
    rng = np.random.default_rng(1)
    length, samples = 40, 5
    base = {k: rng.standard_normal((samples, length, H)).astype(np.float32) * (1 + k) for k in (1, 2, 3)}
    for k in base:
        base[k][3] = base[k][1]  # prompts 1 and 3 are the same prompt: the same rows, bit for bit
    train = {(k, "post"): v.reshape(-1, H) for k, v in base.items()}
    sample = np.repeat(np.arange(samples), length)
    position = np.tile(np.arange(length), samples)
    for noise in (0.0, 1e-3):
        e = explain_rows(train, train[(2, "post")].copy(), sample, position, noise)
        assert e.winner.name == "identity", (noise, e.winner.name, e.winner.params)
        assert not [f.params for f in e.tried if f.name == "foreign_rows"]  # no sample "moved" at all


def test_last_rows_only_the_shorter_samples_reach_none_of_them():
    rng = np.random.default_rng(2)
    lengths = [40, 56, 72, 88, 104]  # each sample keeps its last 8..24 rows, past the shorter ones' ends
    keep_from = [32, 48, 64, 80, 96]
    sample = np.concatenate([np.full(n - k, i) for i, (n, k) in enumerate(zip(lengths, keep_from))])
    position = np.concatenate([np.arange(k, n) for n, k in zip(lengths, keep_from)])
    train = {(k, "post"): rng.standard_normal((len(sample), H)).astype(np.float32) * (1 + k) for k in (1, 2, 3)}
    for noise in (0.0, 1e-3):
        e = explain_rows(train, train[(2, "post")].copy(), sample, position, noise)
        assert e.winner.name == "identity", (noise, e.winner.name, e.winner.params)
        assert not [f.params for f in e.tried if f.name == "foreign_rows"]  # no sample "moved" at all
