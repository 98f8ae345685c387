"""The diagnosis on a third held-out set (tests/cases/holdout3_cases.py): chunked prefill, prefix caching,
tokens on one side only, the aux concat permuted or widened, the final norm on every aux slice, bf16
bits read as fp16, FP8 without a scale, a tensor-parallel gather out of rank order; on models, depths,
widths and seeds no other test uses. Each case is named by its cause, or said to be unexplained, never
by a confident wrong one."""

import pytest

from alignprobe.findings import render

from diagnosis_helpers import STATE_CAUSES, above_info, winners
from holdout3_cases import holdout3_result

pytestmark = pytest.mark.slow
ARCHS = ("llama", "deepseek_v3")


@pytest.mark.parametrize("arch", ARCHS)
def test_clean_pair_and_the_capture_that_marks_its_short_rows(arch):
    r = holdout3_result(arch, "clean_batch1")
    assert r.verdict == "PASS" and above_info(r) == [], r.codes()
    # chunked prefill kept the last chunk only, placed at its positions and marked: short_rows, nothing else
    r = holdout3_result(arch, "chunk_last_marked")
    assert above_info(r) == ["short_rows"] and set(winners(r)) == {"identity"}, (r.codes(), winners(r))


@pytest.mark.parametrize("arch", ARCHS)
def test_prefix_cache_rows_never_computed(arch):
    # zeros where the cached prefix's rows should be: degenerate rows, never a transform fitted onto them
    r = holdout3_result(arch, "prefix_zeros")
    assert above_info(r) == ["degenerate"] and set(winners(r)) == {"identity"}, (r.codes(), winners(r))
    # ... or the previous request's rows left in the buffer: rows of another sample
    r = holdout3_result(arch, "prefix_stale")
    assert above_info(r) == ["foreign_rows"] and set(winners(r)) == {"displaced_rows"}, (r.codes(), winners(r))


@pytest.mark.parametrize("arch", ARCHS)
def test_chunks_stitched_out_of_order(arch):
    # rows of the same sample at other positions, found block by block (the blocks straddle runs of 8)
    r = holdout3_result(arch, "chunks_reversed")
    assert above_info(r) == ["row_shift"] and set(winners(r)) == {"displaced_rows"}, (r.codes(), winners(r))
    assert {e.winner.params["pattern"] for e in r.explanations} == {"within the sample"}
    assert "chunked prefill" in r.finding("row_shift").fix


@pytest.mark.parametrize("arch", ARCHS)
def test_last_chunk_paired_with_the_first_tokens(arch):
    # the rows are the sample's last ones, past the common token part: read for it (explain/end_aligned.py)
    r = holdout3_result(arch, "chunk_last_at_start")
    assert above_info(r) == ["row_shift"] and set(winners(r)) == {"end_aligned_rows"}, (r.codes(), winners(r))
    assert "chunked prefill" in r.finding("row_shift").fix


@pytest.mark.parametrize("arch", ARCHS)
def test_tokens_on_one_side_are_named_at_the_token_level(arch):
    r = holdout3_result(arch, "no_bos", "bos_train")
    assert "token_shift" in r.codes() and not STATE_CAUSES & set(r.codes()), (r.codes(), winners(r))
    for f in r.findings:  # the states of other contexts: the drift / unexplained findings point at the tokens
        if f.code in ("numeric_drift", "unexplained"):
            assert f.has_note("token_shift_first") and "token_shift" in render.title(f), render.title(f)
            assert render.fix(f).startswith("Send the same token ids"), render.fix(f)
    r = holdout3_result(arch, "no_template", "template_train")
    assert {"token_mismatch", "no_aligned_tokens"} <= set(r.codes()) and not STATE_CAUSES & set(r.codes()), r.codes()


@pytest.mark.parametrize("arch", ARCHS)
def test_the_aux_concat_permuted_widened_or_normed(arch):
    r = holdout3_result(arch, "aux_permuted")
    assert above_info(r) == ["wrong_taps"] and winners(r) == ["index_offset"] * 3, (r.codes(), winners(r))
    assert r.finding("wrong_taps").evidence["deltas"] not in ([1, 1, 1], [-1, -1, -1])
    f = holdout3_result(arch, "final_as_fourth_slice").finding("width_mismatch")
    assert f is not None and f.severity == "error"
    r = holdout3_result(arch, "final_norm_on_aux")
    assert above_info(r) == ["channel_scale"] and winners(r) == ["channel_scale"] * 3, (r.codes(), winners(r))
    assert {e.winner.params["form"] for e in r.explanations} == {"rmsnorm"}


@pytest.mark.parametrize("arch", ARCHS)
def test_numbers_misread_or_saturated(arch):
    # a 16-bit dtype's bits read as the other: named with the reading (the dtype difference at info)
    for case, reading in (("bf16_bits_as_fp16", "bfloat16 read as float16"), ("fp16_bits_as_bf16", "float16 read as bfloat16")):
        r = holdout3_result(arch, case)
        assert above_info(r) == ["dtype_misread"] and winners(r) == ["reinterpreted"] * 3, (case, r.codes(), winners(r))
        assert {e.winner.params["reading"] for e in r.explanations} == {reading}
    assert holdout3_result(arch, "bf16_bits_as_fp16").finding("dtype_mismatch").severity == "info"
    # FP8 without a scale, in range: rounding only, drift or nothing
    r = holdout3_result(arch, "fp8_no_scale")
    assert set(above_info(r)) <= {"numeric_drift"} and set(winners(r)) <= {"identity", "drift"}, r.codes()
    # ... out of range: the values clipped at the limit, named with it
    r = holdout3_result(arch, "fp8_saturated")
    assert above_info(r) == ["saturated"], (r.codes(), winners(r))
    deep = r.explanations[-1]
    assert deep.winner.name == "saturated" and deep.winner.params["values_at_limit"] > 0


@pytest.mark.parametrize("arch", ARCHS)
def test_tensor_parallel_gather_out_of_rank_order(arch):
    r = holdout3_result(arch, "tp_gather_order")
    assert above_info(r) == ["channels_permuted"] and winners(r) == ["channel_permutation"] * 3, (r.codes(), winners(r))
    assert {tuple(e.winner.params["order"]) for e in r.explanations} == {(1, 0, 3, 2)}
    assert "tensor-parallel" in r.finding("channels_permuted").fix
