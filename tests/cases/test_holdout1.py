"""The diagnosis on cases built apart from the explanation tests (tests/cases/holdout_cases.py): other
models, seeds and depths, trained until deep neighbouring layers differ by less than the drift
tolerance. Each case must be named by its cause, and never by a confident wrong one."""

import pytest

from diagnosis_helpers import above_info, winners
from holdout_cases import SHAPES, holdout_paths, holdout_result

pytestmark = pytest.mark.slow
ARCHS = tuple(SHAPES)
WRONG_LAYOUT = {"layer_offset", "wrong_taps"}


@pytest.mark.parametrize("arch", ARCHS)
def test_clean_pairs_pass(arch):
    r = holdout_result(arch, "clean")
    assert r.verdict == "PASS" and above_info(r) == [], r.codes()
    r = holdout_result(arch, "clean", "train32")
    assert r.verdict == "PASS" and above_info(r) == [] and r.finding("dtype_mismatch").severity == "info"
    r = holdout_result(arch, "vllm_correct")
    assert r.verdict == "PASS" and above_info(r) == [], r.codes()


@pytest.mark.parametrize("arch", ARCHS)
def test_offsets_are_offsets_even_where_neighbouring_layers_are_within_tolerance(arch):
    n, _ = SHAPES[arch]
    for name, shift, engine in (("sglang_plus1", 1, "SGLang"), ("vllm_minus1", -1, "vLLM"), ("plus1_int4", 1, "SGLang")):
        r = holdout_result(arch, name)
        assert above_info(r)[:1] == ["layer_offset"], (name, r.codes())
        f = r.finding("layer_offset")
        assert f.evidence["shift"] == shift, name
        assert winners(r) == ["index_offset"] * 3, (name, winners(r))
        assert engine in f.fix, (name, f.fix)
    assert "SGLang" not in holdout_result(arch, "vllm_minus1").finding("layer_offset").fix


@pytest.mark.parametrize("arch", ARCHS)
def test_eagle_instead_of_eagle3(arch):
    f = holdout_result(arch, "final_only").finding("width_mismatch")
    assert f is not None and f.severity == "error" and "EAGLE3" in f.fix


@pytest.mark.parametrize("arch", ARCHS)
def test_rows_out_of_place(arch):
    r = holdout_result(arch, "row_shift")
    assert above_info(r) == ["row_shift"] and {e.winner.params["shift"] for e in r.explanations} == {1}
    for name, pattern in (("previous_request", "the previous request"), ("pair_swap", "swapped pairwise")):
        r = holdout_result(arch, name)
        assert above_info(r) == ["foreign_rows"], (name, r.codes())
        assert {e.winner.params["pattern"] for e in r.explanations} == {pattern}, name
    r = holdout_result(arch, "padding_rows")
    assert above_info(r) == ["foreign_rows"] and all(e.winner.params["padding_rows"] > 0 for e in r.explanations)


@pytest.mark.parametrize("arch", ARCHS)
def test_another_model_is_unexplained_never_a_tap(arch):
    for name in ("embed_scaled", "other_model"):
        r = holdout_result(arch, name)
        assert "unexplained" in above_info(r) and not WRONG_LAYOUT & set(above_info(r)), (name, r.codes())


@pytest.mark.parametrize("arch", ARCHS)
def test_a_rope_base_change_is_drift_or_nothing_never_a_transform_or_a_tap(arch):
    r = holdout_result(arch, "rope_base")
    assert set(above_info(r)) <= {"numeric_drift", "position_drift"}, r.codes()
    assert set(winners(r)) <= {"identity", "drift"}, winners(r)


@pytest.mark.parametrize("arch", ARCHS)
def test_transforms_and_split_taps(arch):
    expect = {"rotation": (["rotation"] * 3, "rotated"), "rotation_last": (["identity", "identity", "rotation"], "rotated"),
              "channel_scale": (["channel_scale"] * 3, "channel_scale"),
              "scalar_sqrt_h": (["scalar_scale"] * 3, "scale_mismatch"),
              "residual_split": (["identity", "residual_split", "identity"], "residual_split")}
    for name, (won, code) in expect.items():
        r = holdout_result(arch, name)
        assert winners(r) == won and above_info(r) == [code], (name, winners(r), r.codes())
    r = holdout_result(arch, "duplicate_tap")
    assert winners(r)[2] == "duplicate_tap" and above_info(r) == ["duplicate_tap"], (winners(r), r.codes())


@pytest.mark.parametrize("arch", ARCHS)
def test_input_sanity(arch):
    r = holdout_result(arch, "nan_rows")
    assert "nonfinite" in above_info(r) and not WRONG_LAYOUT & set(above_info(r))
    assert "dumps_swapped" in above_info(holdout_result(arch, "clean", swapped=True))
    p = holdout_paths(arch)
    from alignprobe.compare import compare

    assert "same_dump" in above_info(compare(p["train"], p["train"]))
