"""Ties between the sample's own rows and another sample's go to its own: a dataset holding the same
prompt twice, and a capture that kept only each prompt's last rows (so a shorter sample reaches none of
a longer one's rows), are identity, never foreign_rows."""

import numpy as np

from alignprobe.compare.explain import explain_slice
from alignprobe.compare.explain.base import ExplainRows

H = 16


def explain(train, serve, sample, position, noise=0.0, seed=0):
    rng = np.random.default_rng(seed)
    serve = serve + noise * np.linalg.norm(serve, axis=1, keepdims=True) / np.sqrt(H) * rng.standard_normal(serve.shape)
    rows = ExplainRows(serve=serve[:, None, :].astype(np.float32), train=train, sample=sample, position=position,
                       sample_ids=[f"s{i}" for i in range(int(sample.max()) + 1)],
                       fit=((position // 8) + sample) % 2 == 0, expected=[(2, "post")], claimed=[2], num_layers=4,
                       tolerance=0.07, drift_tolerance=0.2, position_growth=3.0, train_provenance={},
                       serve_provenance={})
    return explain_slice(rows, 0, "x")


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
        e = explain(train, train[(2, "post")].copy(), sample, position, noise)
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
        e = explain(train, train[(2, "post")].copy(), sample, position, noise)
        assert e.winner.name == "identity", (noise, e.winner.name, e.winner.params)
        assert not [f.params for f in e.tried if f.name == "foreign_rows"]  # no sample "moved" at all


def test_one_cause_found_two_ways_on_one_stream_is_one_finding():
    from alignprobe.compare.diagnoses.explained import explanation_findings
    from alignprobe.compare.explain.displaced_rows import DISPLACED_FIX
    from alignprobe.findings import render
    from alignprobe.compare.policy import Policy
    from alignprobe.compare.result import ExplanationFit, SliceExplanation

    def fit(name, params):
        return ExplanationFit(name, 4, True, 0.01, 0.99, 0.01, 100, params, f"{name} fits")

    explained = [SliceExplanation("hidden_states", 0, "HF[2]", fit("displaced_rows", {"code": "foreign_rows"})),
                 SliceExplanation("hidden_states", 1, "HF[4]", fit("foreign_rows", {})),
                 SliceExplanation("hidden_states", 2, "HF[5]", fit("foreign_rows", {}))]
    found = explanation_findings("hidden_states", "drafter_input", explained, [2, 4, 5], 8, Policy(), {}, {}, True)
    assert [f.code for f in found] == ["foreign_rows"]
    assert [e["serve_slice"] for e in found[0].evidence["explained"]] == [0, 1, 2]
    assert render.fix(found[0]).endswith(DISPLACED_FIX)


def test_a_slice_written_twice_is_a_repeated_id_even_where_neighbouring_layers_agree():
    # train HF[1..3] where HF[3] is within the tolerance of HF[2] (a trained model's deep layers); the
    # serve side wrote HF[2] twice: slice 1 is identity, slice 2 the repeat (not an offset to HF[2])
    rng = np.random.default_rng(3)
    length, samples = 40, 5
    sample = np.repeat(np.arange(samples), length)
    position = np.tile(np.arange(length), samples)
    h1 = rng.standard_normal((len(sample), H)).astype(np.float32)
    h2 = rng.standard_normal((len(sample), H)).astype(np.float32)
    h3 = (h2 + 0.04 * rng.standard_normal(h2.shape)).astype(np.float32)  # rel-RMS 0.04 from HF[2]
    train = {(1, "post"): h1, (2, "post"): h2, (3, "post"): h3}
    serve = np.stack([h1, h2, h2], axis=1)
    rows = ExplainRows(serve=serve, train=train, sample=sample, position=position,
                       sample_ids=[f"s{i}" for i in range(samples)], fit=((position // 8) + sample) % 2 == 0,
                       expected=[(1, "post"), (2, "post"), (3, "post")], claimed=[1, 2, 3], num_layers=4,
                       tolerance=0.07, drift_tolerance=0.2, position_growth=3.0, train_provenance={},
                       serve_provenance={})
    assert [explain_slice(rows, j, "x").winner.name for j in range(3)] == ["identity", "identity", "duplicate_tap"]
    # ... and where training holds one layer twice too (EAGLE-3's ids for 6 layers: HF[2, 3, 3]), a copy is no fault
    rows.expected, rows.claimed = [(1, "post"), (2, "post"), (2, "post")], [1, 2, 2]
    assert [explain_slice(rows, j, "x").winner.name for j in range(3)] == ["identity"] * 3
