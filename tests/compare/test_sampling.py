"""--sample / --max-tokens: where the kept rows come from, and the sampling error they imply.

The expected standard errors are computed here from the arrays written into the dumps (float64
numpy, per-sample means), not from the comparer's accumulators.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from alignprobe.compare import compare
from alignprobe.compare.metrics import SliceAccumulator
from alignprobe.report import write_report
from alignprobe.compare.pairing import pair_samples
from alignprobe.compare.result import CompareResult
from alignprobe.compare.summary import format_summary
from alignprobe.dump import open_dump
from compare_helpers import AUX, H, make_samples, write_serve, write_train

LENGTHS = [20, 35, 50, 28, 44, 61, 23, 39, 57, 31, 47, 26]


@pytest.fixture(scope="module")
def data():
    """Samples of varied length whose serve noise level differs from sample to sample (0.2x-1.8x)."""
    samples = make_samples(num=len(LENGTHS), lengths=LENGTHS, seed=3)
    g = np.random.default_rng(11)
    served = {}
    for i, (sid, (_ids, hf, _pre)) in enumerate(samples.items()):
        x = hf[:, list(AUX)].reshape(len(hf), -1)
        amplitude = 0.2 + 1.6 * ((i * 7) % len(LENGTHS)) / (len(LENGTHS) - 1)
        served[sid] = (x + 0.03 * amplitude * g.standard_normal(x.shape)).astype(np.float32)
    return samples, served


@pytest.fixture(scope="module")
def dumps(data, tmp_path_factory):
    samples, served = data
    folder = tmp_path_factory.mktemp("sampling")
    train = write_train(folder / "train.h5", samples)
    serve = write_serve(folder / "serve.h5", samples, transform=lambda x, sid: served[sid])
    return train, serve


def _per_sample_sums(data, sids, rows=None):
    """{slice: (tokens, sum cos, sum ||a||^2, sum ||a-b||^2) per sample}, float64, from the written arrays."""
    samples, served = data
    out = {}
    for j in range(len(AUX)):
        sums = []
        for sid in sids:
            a = samples[sid][1][:, AUX[j]].astype(np.float64)
            b = served[sid][:, j * H : (j + 1) * H].astype(np.float64)
            if rows is not None:
                a, b = a[: rows[sid]], b[: rows[sid]]
            cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
            sums.append((len(a), cos.sum(), (a * a).sum(), ((a - b) ** 2).sum()))
        out[j] = np.array(sums)
    return out


def _expected_se(sums: np.ndarray, population: int) -> tuple[float, float]:
    """Ratio-estimator standard errors written with per-sample means and weights (Cochran 6.9)."""
    tokens, cos, aa, dd = sums.T
    n = len(tokens)
    fpc = 1 - n / population
    mean_cos = cos / tokens
    overall_cos = cos.sum() / tokens.sum()
    w = tokens / tokens.mean()
    cos_se = math.sqrt(fpc * np.sum(w**2 * (mean_cos - overall_cos) ** 2) / (n * (n - 1)))
    q = dd / aa
    overall_q = dd.sum() / aa.sum()
    w = aa / aa.mean()
    q_se = math.sqrt(fpc * np.sum(w**2 * (q - overall_q) ** 2) / (n * (n - 1)))
    return cos_se, q_se / (2 * math.sqrt(overall_q))


def test_sample_standard_errors_match_an_independent_computation(data, dumps):
    r = compare(*dumps, sample=5, tokenizer=None)
    sids = list(data[0])
    chosen = [sids[i] for i in np.unique(np.linspace(0, len(sids) - 1, 5).round().astype(int))]
    expected = _per_sample_sums(data, chosen)
    (stream,) = r.streams
    assert [m.label for m in stream.slices] == [f"HF[{i}]" for i in AUX] and stream.mapping_ok
    for j, m in enumerate(stream.slices):
        sums = expected[j]
        assert m.tokens == sums[:, 0].sum()
        assert m.cosine_mean == pytest.approx(sums[:, 1].sum() / sums[:, 0].sum(), abs=1e-6)
        cos_se, rms_se = _expected_se(sums, len(sids))
        assert cos_se > 0 and rms_se > 0
        assert m.cosine_mean_se == pytest.approx(cos_se, rel=1e-4)
        assert m.rel_rms_se == pytest.approx(rms_se, rel=1e-4)
    assert r.options["sampling"].startswith(f"5 of {len(sids)} samples, {sum(len(data[1][s]) for s in chosen)} of ")


def test_max_tokens_spreads_over_samples_and_its_error_covers_the_cut_sample(data, dumps):
    sids = list(data[0])
    total = sum(LENGTHS)
    budget = total // 4
    with open_dump(dumps[0]) as t, open_dump(dumps[1]) as s:
        check, segments = pair_samples(t, s, max_tokens=budget)
        _, everything = pair_samples(t, s, max_tokens=total)
        assert everything == pair_samples(t, s)[1]  # a budget that covers all rows changes nothing
    assert sum(seg.length for seg in segments) == budget == check.aligned_tokens
    assert check.alignable_tokens == total and check.alignable_samples == len(sids) > check.compared_samples
    kept = [sids.index(seg.sample_id) for seg in segments]
    assert kept == sorted(kept)  # train order kept
    # spread: a quarter of the rows, yet samples from each third of the dump (a prefix would stop in the first)
    assert {i * 3 // len(sids) for i in kept} == {0, 1, 2}
    cut = [seg for seg in segments if seg.length < LENGTHS[sids.index(seg.sample_id)]]
    assert len(cut) <= 1 and all(seg.position == 0 for seg in segments)
    r = compare(*dumps, max_tokens=budget, tokenizer=None)
    rows = {seg.sample_id: seg.length for seg in segments}
    expected = _per_sample_sums(data, list(rows), rows)
    for j, m in enumerate(r.streams[0].slices):
        cos_se, rms_se = _expected_se(expected[j], len(sids))
        assert m.tokens == budget
        assert m.cosine_mean_se == pytest.approx(cos_se, rel=1e-4)
        assert m.rel_rms_se == pytest.approx(rms_se, rel=1e-4)


def test_the_correction_takes_the_error_to_zero_when_every_sample_is_compared(dumps):
    total = sum(LENGTHS)
    r = compare(*dumps, max_tokens=total - 1, tokenizer=None)  # every sample, one row short
    assert r.tokens.compared_samples == len(LENGTHS) and "sampling" in r.options
    assert all(m.cosine_mean_se == 0 and m.rel_rms_se == 0 for m in r.streams[0].slices)
    g = np.random.default_rng(0)
    acc = SliceAccumulator(max_position=8, num_samples=4)
    a = g.standard_normal((32, H)).astype(np.float32)
    b = (a + g.uniform(0.01, 0.3, (32, 1)) * g.standard_normal((32, H))).astype(np.float32)
    acc.update(a, b, np.tile(np.arange(8), 4), np.repeat(np.arange(4), 8))
    assert acc.standard_errors(population=4) == {"cosine_mean_se": 0.0, "rel_rms_se": 0.0}
    far, half = acc.standard_errors(population=10**12), acc.standard_errors(population=8)
    assert far["rel_rms_se"] > 0 and half["rel_rms_se"] == pytest.approx(far["rel_rms_se"] * math.sqrt(0.5), rel=1e-6)


def test_an_unsampled_run_carries_no_error_and_shows_none(dumps):
    for kwargs in ({}, {"sample": len(LENGTHS)}, {"max_tokens": sum(LENGTHS)}):
        r = compare(*dumps, tokenizer=None, **kwargs)
        assert "sampling" not in r.options and not any(n.startswith("sampling") for n in r.notes)
        assert all(m.cosine_mean_se is None and m.rel_rms_se is None for m in r.streams[0].slices)
        assert "±" not in format_summary(r)


def test_the_summary_and_report_show_the_error_and_note_a_threshold_the_sample_cannot_tell(dumps, tmp_path):
    r = compare(*dumps, sample=4, tokenizer=None)
    text = format_summary(r)
    assert "sampled: 4 of 12 samples" in text and "the sample cannot tell" not in text
    worst = max(r.streams[0].slices, key=lambda m: m.rel_rms)
    t3 = 3.182446305284263  # Student's t 97.5% quantile, 3 degrees of freedom (4 samples)
    assert r.options["interval_multiplier"] == pytest.approx(t3)
    assert f"{worst.cosine_mean:.6f} ±{t3 * worst.cosine_mean_se:.1e}" in text
    assert f"{worst.rel_rms:.3g} ±{t3 * worst.rel_rms_se:.1e}" in text
    html = open(write_report(r, tmp_path / "report").html).read()
    assert f"± {t3 * worst.rel_rms_se:.1e}" in html and f"± {t3 * worst.cosine_mean_se:.1e}" in html
    # a warn threshold one standard error above the measured value: too close to call
    policy = {"drift_warn_rel_rms": worst.rel_rms + worst.rel_rms_se, "drift_fail_rel_rms": 10.0}
    near = compare(*dumps, policy, sample=4, tokenizer=None)
    notes = [n for n in near.notes if n.startswith("sampling: ")]
    threshold = policy["drift_warn_rel_rms"]
    undecided = [m.label for m in r.streams[0].slices if abs(m.rel_rms - threshold) <= t3 * m.rel_rms_se]
    assert worst.label in undecided and len(notes) == len(undecided)
    assert all(f" {label} " in n and "drift_warn_rel_rms" in n for label, n in zip(undecided, notes))
    assert "the sample cannot tell: compare more samples" in format_summary(near)


def test_result_json_round_trip_keeps_the_errors_and_old_results_load(dumps):
    r = compare(*dumps, sample=4, tokenizer=None)
    back = CompareResult.from_json(r.to_json())
    assert [(m.cosine_mean_se, m.rel_rms_se) for m in back.streams[0].slices] == [
        (m.cosine_mean_se, m.rel_rms_se) for m in r.streams[0].slices
    ]
    assert back.options["sampling"] == r.options["sampling"]
    one = CompareResult.from_json(compare(*dumps, max_tokens=10, tokenizer=None).to_json())
    assert all(math.isnan(m.cosine_mean_se) and math.isnan(m.rel_rms_se) for m in one.streams[0].slices)
    assert any("1 sample compared: its error cannot be estimated" in n for n in one.notes)
    assert " ±?" in format_summary(one)
    old = compare(*dumps, tokenizer=None).to_dict()
    for stream in old["streams"]:
        for m in stream["slices"]:
            del m["cosine_mean_se"], m["rel_rms_se"]
    del old["tokens"]["alignable_samples"], old["tokens"]["alignable_tokens"]
    loaded = CompareResult.from_dict(old)
    assert all(m.cosine_mean_se is None and m.rel_rms_se is None for m in loaded.streams[0].slices)
    assert loaded.tokens.alignable_samples == 0 and loaded.verdict == r.verdict
