"""Mapping search and layout / numeric diagnoses on synthetic dumps with known answers."""

import numpy as np
import pytest
import torch

from alignprobe.compare import compare
from alignprobe.compare.mapping import sample_rows, train_candidates
from alignprobe.compare.pairing import Segment
from alignprobe.dump import StreamClaim, open_dump
from alignprobe.findings import render
from compare_helpers import AUX, H, N, aux_claim, make_samples, write_dump, write_serve, write_train


@pytest.fixture(scope="module")
def samples():
    return make_samples(num=6, length=40)


@pytest.fixture(scope="module")
def train(tmp_path_factory, samples):
    return write_train(tmp_path_factory.mktemp("map") / "train.h5", samples)


def _torch_cos_mean(a, b):
    return torch.nn.functional.cosine_similarity(torch.from_numpy(a).double(), torch.from_numpy(b).double(), dim=1).mean().item()


def test_similarity_matrix_equals_torch_cosine_on_every_pair(tmp_path, samples, train):
    serve = write_serve(tmp_path / "s.h5", samples, taps=(3, 4, 5))
    r = compare(train, serve)
    ms = r.mappings[0]
    assert ms.tokens_sampled == 6 * 40  # fewer rows than mapping_tokens: all of them
    hf = np.concatenate([v[1] for v in samples.values()])
    pre = np.concatenate([v[2] for v in samples.values()])
    for j, tap in enumerate((3, 4, 5)):
        for c, cand in enumerate(ms.candidates):
            ref = pre if cand.final_norm == "pre" else hf[:, cand.hf_index]
            assert ms.cosine[j][c] == pytest.approx(_torch_cos_mean(hf[:, tap], ref), abs=1e-5)
            norm_ratio = np.linalg.norm(hf[:, tap]) / np.linalg.norm(ref)
            assert ms.norm_ratio[j][c] == pytest.approx(norm_ratio, rel=1e-4)
    assert ms.measured == ["HF[3]", "HF[4]", "HF[5]"]
    assert r.finding("layer_offset").evidence["shift"] == 1


def test_candidates_are_distinct_hf_indices_with_pre_and_post_final(train):
    with open_dump(train) as d:
        labels = [c.label for c in train_candidates(d)]
    assert labels == [f"HF[{i}]" for i in range(N)] + [f"HF[{N}] pre-norm", f"HF[{N}]"]


def test_sample_rows_takes_windows_inside_segments():
    segments = [Segment("a", 0, 100, 50, 0), Segment("b", 50, 150, 30, 0), Segment("c", 80, 300, 500, 0)]
    rows = sample_rows(segments, tokens=64, windows=8)
    assert rows.rows <= 64 and len(rows.train_ranges) == 8
    for (t0, t1), (s0, s1) in zip(rows.train_ranges, rows.serve_ranges):
        seg = next(s for s in segments if s.train_row <= t0 < s.train_row + s.length)
        assert t1 <= seg.train_row + seg.length and s0 - seg.serve_row == t0 - seg.train_row and s1 - s0 == t1 - t0


def test_pre_and_post_norm_told_apart_by_magnitude_when_direction_ties(tmp_path):
    ones = make_samples(num=4, length=32, seed=3, norm_weight=np.ones(H))  # post = pre / rms: same direction
    train = write_train(tmp_path / "t.h5", ones)
    streams = {"final": StreamClaim((N,), H, N, "float32", "post", "final")}
    serve = write_dump(tmp_path / "s.h5", ones, streams, lambda hf, pre, sid: {"final": pre})
    r = compare(train, serve)
    match = r.mappings[0].matches[0]
    assert match.tie_broken_by_norm and match.best_label == f"HF[{N}] pre-norm"
    assert r.finding("final_norm_mismatch").severity == "error" and r.finding("mapping_ambiguous") is None


def test_reordered_taps_are_wrong_taps_in_another_order(tmp_path, samples, train):
    r = compare(train, write_serve(tmp_path / "s.h5", samples, taps=(4, 2, 3), claim=aux_claim(AUX)))
    f = r.finding("wrong_taps")
    assert f.evidence["permuted"] is True and "order" in f.fix


def test_width_not_a_multiple_of_h(tmp_path, samples, train):
    claim = StreamClaim((2,), H + 3, N, "float32")
    serve = write_dump(tmp_path / "s.h5", samples, {"hidden_states": claim},
                       lambda hf, pre, sid: {"hidden_states": np.zeros((len(hf), H + 3), np.float32) + 1})
    f = compare(train, serve).finding("width_mismatch")
    assert f.evidence["remainder"] == 3 and f.severity == "error"


def test_eagle12_drafter_served_the_aux_concat(tmp_path, samples):
    streams = {"final": StreamClaim((N,), H, N, "float32", "post", "final")}
    train = write_dump(tmp_path / "t.h5", samples, streams, lambda hf, pre, sid: {"final": hf[:, N]})
    f = compare(train, write_serve(tmp_path / "s.h5", samples)).finding("width_mismatch")
    assert "EAGLE-1/2" in f.fix and f.evidence["expected_width"] == H


def test_claim_mismatch_is_info_when_the_states_are_right(tmp_path, samples, train):
    r = compare(train, write_serve(tmp_path / "s.h5", samples, claim=aux_claim((3, 4, 5))))
    assert r.verdict == "PASS" and r.finding("claim_mismatch").severity == "info"


def test_degenerate_rows_warn_then_fail(tmp_path, samples, train):
    def zero_rows(count):
        def transform(x, sid):
            if sid == "s00":
                x[:count] = 0
            return x

        return transform

    r = compare(train, write_serve(tmp_path / "a.h5", samples, transform=zero_rows(2)), {"degenerate_fail_fraction": 0.05})
    f = r.finding("degenerate")
    assert f.severity == "warn" and f.evidence["slices"][0]["serve_zero_rows"] == 2
    r = compare(train, write_serve(tmp_path / "b.h5", samples, transform=zero_rows(30)), {"degenerate_fail_fraction": 0.05})
    assert r.finding("degenerate").severity == "error"


def test_drift_that_grows_with_position(tmp_path, samples, train):
    g = np.random.default_rng(5)

    def growing(x, sid):
        scale = 0.002 * (1 + np.arange(len(x)))[:, None] ** 1.5
        return x + scale * np.abs(x).mean() * g.standard_normal(x.shape).astype(np.float32)

    r = compare(train, write_serve(tmp_path / "s.h5", samples, transform=growing))
    f = r.finding("position_drift")
    assert f is not None and f.evidence["slices"][0]["growth"] > 3
    by_pos = f.evidence["slices"][0]["by_position"]
    assert by_pos[-1]["rel_rms"] > by_pos[1]["rel_rms"]


def test_uniform_small_noise_passes_and_large_noise_fails(tmp_path, samples, train):
    g = np.random.default_rng(6)

    def noise(level):
        return lambda x, sid: x + level * np.abs(x).mean() * g.standard_normal(x.shape).astype(np.float32)

    assert compare(train, write_serve(tmp_path / "a.h5", samples, transform=noise(1e-4))).verdict == "PASS"
    r = compare(train, write_serve(tmp_path / "b.h5", samples, transform=noise(0.5)))
    assert r.finding("numeric_drift").severity == "error" and r.finding("position_drift") is None


def test_layers_streams_are_paired_per_index_and_capped_at_warn(tmp_path, samples, train):
    claim = StreamClaim(range(1, N), H, N, "float32", "post", "layers")
    serve = write_dump(tmp_path / "s.h5", samples, {"layers": claim},
                       lambda hf, pre, sid: {"layers": hf[:, 2 : N + 1].reshape(len(hf), -1)})
    r = compare(train, serve)
    f = r.finding("layer_offset")
    assert f.evidence["shift"] == 1 and f.severity == "warn" and r.verdict == "WARN"


def test_a_partial_train_dump_says_the_mapping_is_not_definite(tmp_path, samples):
    streams = {"aux": StreamClaim(AUX, H, N, "float32"), "final": StreamClaim((N,), H, N, "float32", "post", "final")}
    train = write_dump(tmp_path / "t.h5", samples, streams,
                       lambda hf, pre, sid: {"aux": hf[:, list(AUX)].reshape(len(hf), -1), "final": hf[:, N]})
    r = compare(train, write_serve(tmp_path / "s.h5", samples, taps=(3, 4, 5)))
    f = next(f for f in r.findings if f.severity == "error")
    assert f.code in ("layer_offset", "wrong_taps") and "holds only HF[2, 3, 4, 6]" in render.fix(f)
    assert f.has_note("train_holds_only") and f.notes[-1].params["held"] == [2, 3, 4, 6]


def test_wide_serve_streams_sample_fewer_rows_and_say_so(tmp_path, samples, train, monkeypatch):
    import sys

    entry = sys.modules["alignprobe.compare.feeding"]  # where the mapping searches are planned

    claim = StreamClaim(range(N + 1), H, N, "float32", "post", "layers")
    serve = write_dump(tmp_path / "s.h5", samples, {"layers": claim}, lambda hf, pre, sid: {"layers": hf.reshape(len(hf), -1)})
    monkeypatch.setattr(entry, "MAPPING_BYTES", 4 * H * (N + 1) * 100)
    monkeypatch.setattr(entry, "MIN_MAPPING_ROWS", 50)
    r = compare(train, serve)
    ms = r.mappings[0]
    assert ms.tokens_sampled <= 100 < 6 * 40 and "windows" in ms.sampling
    assert ms.measured == [f"HF[{i}]" for i in range(N + 1)] and r.verdict == "PASS"


def test_the_pass_feeds_the_search_the_same_rows_it_would_read(tmp_path, monkeypatch):
    """Train and serve both hold final + eagle3_aux: the pass reads every stream the search needs,
    so the search takes its rows from the pass's blocks, and finds what its own reads would find.
    Where the train side has streams the pass does not read (a layers stack), the search reads."""
    import importlib

    from alignprobe.compare.kernels import kernels_for
    from alignprobe.compare.mapping import MappingRequest, search_mappings
    from alignprobe.compare.pairing import pair_samples
    from compare_helpers import train_states, train_streams

    samples = make_samples(num=7, lengths=[90, 31, 250, 64, 129, 7, 300])
    kept = ("eagle3_aux", "final")
    train = write_dump(tmp_path / "t.h5", samples, {n: c for n, c in train_streams().items() if n in kept},
                       lambda hf, pre, sid: {k: v for k, v in train_states(hf, pre).items() if k in kept})
    serve = write_dump(tmp_path / "s.h5", samples, {n: c for n, c in train_streams().items() if n in kept},
                       lambda hf, pre, sid: {"eagle3_aux": hf[:, list(AUX)].reshape(len(hf), -1) * 1.01, "final": hf[:, N]})
    entry = importlib.import_module("alignprobe.compare.feeding")
    own_reads = []
    real_read_into = entry.read_into
    monkeypatch.setattr(entry, "read_into", lambda *a: (own_reads.append(a), real_read_into(*a)))
    # small blocks and few mapping rows: windows straddle blocks and samples
    r = compare(train, serve, tokenizer=None, block_bytes=1 << 12, mapping_tokens=200)
    assert own_reads == []  # no search read rows of its own
    with open_dump(train) as tr, open_dump(serve) as sv:
        _, segments = pair_samples(tr, sv)
        sampled = sample_rows(segments, 200)
        want = search_mappings(tr, sv, [MappingRequest("eagle3_aux", [], "drafter_input"),
                                        MappingRequest("final", [], "final")], H, train_candidates(tr), sampled,
                               tie_cosine=1e-4, kernels=kernels_for("cpu"))
    for got, w in zip(sorted(r.mappings, key=lambda m: m.serve_stream), sorted(want, key=lambda m: m.serve_stream)):
        assert got.tokens_sampled == w.tokens_sampled == sampled.rows
        # the same rows, summed in other groups (float32 products): equal to float32 rounding
        np.testing.assert_allclose(got.cosine, w.cosine, atol=1e-6)
        np.testing.assert_allclose(got.norm_ratio, w.norm_ratio, rtol=1e-6)
    aux = next(m for m in r.mappings if m.serve_stream == "eagle3_aux")
    assert [m.best_label for m in aux.matches] == [f"HF[{i}]" for i in AUX]

    compare(write_train(tmp_path / "all.h5", samples), serve, tokenizer=None)  # a layers stack: read beside
    assert len(own_reads) == 1
