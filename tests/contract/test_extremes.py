"""States near float32's limit (3e38) and far beyond any model's (1e30): compare gives a verdict,
never an internal error, a traceback or a numpy RuntimeWarning.

Float32 squares overflow past 1.8e19 and sums of squares long before 3e38; the metrics redo such
rows in float64 (compare/kernels/numpy_kernels.py) and the explanations fit rows brought into range
by one power of two (compare/explain/base.py ExplainRows.value_scale). Both are checked here: whole
comparisons through the CLI and the library, and each explanation on scaled synthetic rows, where a
power of two must leave the winner and its scores as they were.
"""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest

import alignprobe
from alignprobe.compare.explain import explain_slice
from alignprobe.compare.explain.base import ExplainRows
from bad_input_helpers import invoke
from compare_helpers import aux_claim, make_samples, write_serve, write_train

MAGNITUDES = {"1e30": 1e30, "3e38": 3e38}


def _to_magnitude(samples, largest: float):
    """The samples scaled so that their largest value is ``largest`` (the same factor for every row)."""
    peak = max(max(np.abs(hf).max(), np.abs(pre).max()) for _, hf, pre in samples.values())
    factor = largest / float(peak)
    return {sid: (ids, (hf * factor).astype(np.float32), (pre * factor).astype(np.float32))
            for sid, (ids, hf, pre) in samples.items()}


def _huge_rows(x, sid):
    """Every fifth row of the serve states pushed to 1e30 (the rest as trained)."""
    x = x.copy()
    x[::5] *= np.float32(1e30) / np.abs(x[::5]).max()
    return x


def _noisy(x, sid):
    g = np.random.default_rng(len(sid))  # halved first: the noise must not itself overflow near 3e38
    return (np.float32(0.5) * x + np.float32(0.05) * np.abs(x).max() * g.standard_normal(x.shape)).astype(np.float32)


# (serve transform, the exit codes it may honestly give)
SERVES = {
    "same": (None, {0}),
    "negated": (lambda x, sid: -x, {1}),
    "rows_shifted": (lambda x, sid: np.roll(x, 1, axis=0), {1}),
    "channels_reversed": (lambda x, sid: x[:, ::-1].copy(), {1}),
    "noisy": (_noisy, {1}),
}


@pytest.fixture(scope="module")
def extreme_dumps(tmp_path_factory):
    folder = tmp_path_factory.mktemp("extremes")
    ordinary = make_samples(num=4, length=24)
    out = {"ordinary_train": write_train(folder / "ordinary_train.h5", ordinary),
           "negated_ordinary": write_serve(folder / "negated_ordinary.h5", ordinary, transform=SERVES["negated"][0]),
           "huge_rows_serve": write_serve(folder / "huge_rows_serve.h5", ordinary, transform=_huge_rows)}
    for name, largest in MAGNITUDES.items():
        samples = _to_magnitude(ordinary, largest)
        out[f"train_{name}"] = write_train(folder / f"train_{name}.h5", samples)
        for serve, (transform, _) in SERVES.items():
            out[f"{serve}_{name}"] = write_serve(folder / f"{serve}_{name}.h5", samples, transform=transform)
        out[f"deeper_taps_{name}"] = write_serve(folder / f"deeper_taps_{name}.h5", samples, taps=(3, 4, 5),
                                                 claim=aux_claim((2, 3, 4)))
    return out


def _assert_verdict(result, codes):
    where = f"exit {result.exit_code}, stderr {result.stderr!r}, stdout {result.stdout[-400:]!r}"
    assert result.exit_code in codes, where
    assert "Traceback" not in result.stderr + result.stdout and "internal error" not in result.stderr, where
    assert "Warning" not in result.stderr, where  # the CLI prints numpy's warnings as "alignprobe: warning: ..."
    assert result.stdout.startswith("alignprobe compare: "), where


@pytest.mark.parametrize("magnitude", MAGNITUDES)
@pytest.mark.parametrize("serve", SERVES)
def test_extreme_states_give_a_verdict(extreme_dumps, magnitude, serve):
    result = invoke(["compare", "--train-dump", extreme_dumps[f"train_{magnitude}"],
                     "--serve-dump", extreme_dumps[f"{serve}_{magnitude}"]])
    _assert_verdict(result, SERVES[serve][1])


@pytest.mark.parametrize("magnitude", MAGNITUDES)
def test_mapping_search_finds_taps_of_extreme_states(extreme_dumps, magnitude):
    # float32 squares of such rows overflowed and the search dropped every row: all read as HF[0]
    result = invoke(["compare", "--train-dump", extreme_dumps[f"train_{magnitude}"],
                     "--serve-dump", extreme_dumps[f"deeper_taps_{magnitude}"]])
    _assert_verdict(result, {1})
    assert "HF[3] where HF[2] expected, HF[4] where HF[3] expected, HF[5] where HF[4] expected" in result.stdout


@pytest.mark.parametrize("train, serve", [("ordinary_train", "same_3e38"), ("ordinary_train", "huge_rows_serve"),
                                          ("train_3e38", "huge_rows_serve")])
def test_ordinary_against_extreme_states_fail(extreme_dumps, train, serve):
    result = invoke(["compare", "--train-dump", extreme_dumps[train], "--serve-dump", extreme_dumps[serve]])
    _assert_verdict(result, {1})


def test_library_explains_extreme_states_as_ordinary_ones(extreme_dumps):
    """The same comparison at 3e38 and at the states' own magnitude: no warning, the same causes."""
    ordinary = alignprobe.compare(extreme_dumps["ordinary_train"], extreme_dumps["negated_ordinary"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        extreme = alignprobe.compare(extreme_dumps["train_3e38"], extreme_dumps["negated_3e38"])
    assert not extreme and extreme.verdict == ordinary.verdict
    assert len(extreme.explanations) == len(ordinary.explanations) == 3
    for e, o in zip(extreme.explanations, ordinary.explanations):
        assert (e.label, e.winner.name) == (o.label, o.winner.name)
        assert e.winner.held_out_rel_rms == pytest.approx(o.winner.held_out_rel_rms, abs=1e-6)
        assert e.winner.name in ("scalar_scale", "channel_scale", "rotation"), e.winner


def test_console_script_with_warnings_as_errors(extreme_dumps):
    done = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-m", "alignprobe.cli.main", "compare",
                           "--train-dump", extreme_dumps["train_3e38"], "--serve-dump", extreme_dumps["rows_shifted_3e38"]],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr
    assert "Warning" not in done.stderr and "Traceback" not in done.stderr, done.stderr


# --- each explanation on synthetic rows: a power of two changes nothing -------------------------

H, SAMPLES, LENGTH = 16, 6, 48


def _rows(serve_of, factor=1.0, seed=0):
    rng = np.random.default_rng(seed)
    train = {(k, "post"): rng.standard_normal((SAMPLES * LENGTH, H)).astype(np.float32) * (1 + k) for k in (1, 2, 3)}
    sample = np.repeat(np.arange(SAMPLES), LENGTH)
    position = np.tile(np.arange(LENGTH), SAMPLES)
    serve = serve_of(train, sample, position)
    serve = serve + 1e-3 * np.linalg.norm(serve, axis=1, keepdims=True) / np.sqrt(H) * rng.standard_normal(serve.shape)
    return ExplainRows(serve=(serve[:, None, :] * factor).astype(np.float32),
                       train={k: (v * factor).astype(np.float32) for k, v in train.items()}, sample=sample,
                       position=position, sample_ids=[f"s{i}" for i in range(SAMPLES)],
                       fit=((position // 8) + sample) % 2 == 0, expected=[(2, "post")], claimed=[2], num_layers=4,
                       tolerance=0.07, drift_tolerance=0.2, position_growth=3.0, train_provenance={}, serve_provenance={})


_ROTATION = np.linalg.qr(np.random.default_rng(5).standard_normal((H, H)))[0].astype(np.float32)
PLANTED = {
    "identity": lambda t, s, p: t[(2, "post")].copy(),
    "scalar_scale": lambda t, s, p: -3.0 * t[(2, "post")],
    "index_offset": lambda t, s, p: t[(3, "post")].copy(),
    "rotation": lambda t, s, p: t[(2, "post")] @ _ROTATION,
    "channel_scale": lambda t, s, p: t[(2, "post")] * np.linspace(0.5, 2.0, H, dtype=np.float32),
    "row_shift": lambda t, s, p: np.roll(t[(2, "post")], 1, axis=0),
    "saturated": lambda t, s, p: np.clip(t[(2, "post")], -2.0, 2.0),
    "nothing": lambda t, s, p: np.random.default_rng(9).standard_normal(t[(2, "post")].shape).astype(np.float32),
}


@pytest.mark.parametrize("factor", [2.0**100, 2.0**120], ids=["2^100", "2^120"])
@pytest.mark.parametrize("planted", PLANTED)
def test_a_power_of_two_changes_no_explanation(planted, factor):
    ordinary = explain_slice(_rows(PLANTED[planted]), 0, "x")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        extreme = explain_slice(_rows(PLANTED[planted], factor), 0, "x")
    assert extreme.winner.name == ordinary.winner.name
    assert [f.name for f in extreme.tried] == [f.name for f in ordinary.tried]
    for f, g in zip(extreme.tried, ordinary.tried):
        if f.name not in ("reinterpreted", "nothing_fits"):  # reads the stored bits: scaled values are other bits (nothing_fits: the closest fit's scores)
            assert f.held_out_rel_rms == pytest.approx(g.held_out_rel_rms, rel=1e-4, nan_ok=True), f.name
    if planted == "saturated":
        assert extreme.winner.params["limit"] == pytest.approx(ordinary.winner.params["limit"] * factor, rel=1e-6)
