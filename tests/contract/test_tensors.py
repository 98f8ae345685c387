"""SpecForge .ckpt files whose tensors are of the wrong kind: sparse states, a loss_mask of another
length than input_ids, states of no rows (each was an internal error in audit or import), and, fuzzed,
any entry replaced by a tensor of another dtype, rank or length. Import, audit and compare all give
one line (audit may also name the file unreadable and go on), never an internal error."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings, strategies as st

from bad_input_helpers import FUZZ, assert_one_line, fingerprints, invoke

S, H = 6, 16
KEYS = ("input_ids", "loss_mask", "aux_hidden_state", "hidden_state")


def good_record(seed=0):
    g = torch.Generator().manual_seed(seed)
    return {"input_ids": torch.randint(1, 100, (S,), generator=g), "loss_mask": torch.ones(S, dtype=torch.long),
            "aux_hidden_state": torch.randn(1, S, 3 * H, generator=g), "hidden_state": torch.randn(1, S, H, generator=g)}


def folder_with(tmp_path, first):
    folder = tmp_path / "sf"
    folder.mkdir()
    torch.save(first, folder / "data_0.ckpt")
    torch.save(good_record(1), folder / "data_1.ckpt")
    return folder


def check_every_command(folder, tmp_path):
    """Import, audit, compare: a documented exit and one line; the audit may read past a bad file."""
    before = fingerprints([folder])
    serve = tmp_path / "serve.h5"
    runs = {"import": ["import", folder, "--layer-ids", "1,4,5", "--num-layers", "8", "--out", tmp_path / "o.h5", "--quiet"],
            "audit": ["audit", folder, "--no-progress"]}
    lines = {}
    for name, args in runs.items():
        result = invoke(args)
        if name == "audit" and result.exit_code in (0, 1):
            assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr
            continue
        if name == "import" and result.exit_code == 0:  # a tensor of another kind that still converts
            if not serve.exists():
                (tmp_path / "o.h5").rename(serve)
            continue
        lines[name] = assert_one_line(result, 2)
    if serve.exists():
        result = invoke(["compare", "--train-dump", folder, "--train-layer-ids", "1,4,5", "--num-layers", "8",
                         "--serve-dump", serve])
        if result.exit_code not in (0, 1):
            lines["compare"] = assert_one_line(result, 2)
    assert fingerprints([folder]) == before
    return lines


@pytest.mark.parametrize("fault, said", [
    ("sparse", "sparse_coo tensor"),
    ("short mask", "loss_mask holds 4 tokens but input_ids holds 6"),
    ("no rows", "0 tokens"),
])
def test_tensors_that_were_internal_errors(tmp_path, fault, said):
    record = good_record()
    if fault == "sparse":
        record["aux_hidden_state"] = record["aux_hidden_state"].to_sparse()
    elif fault == "short mask":
        record["loss_mask"] = torch.ones(S - 2, dtype=torch.long)
    else:
        record["aux_hidden_state"] = torch.zeros(1, 0, 3 * H)
    folder = folder_with(tmp_path, record)
    lines = check_every_command(folder, tmp_path)
    assert said in lines["import"], lines
    import alignprobe

    audited = alignprobe.audit(str(folder))  # the bad file is named, the good one still read
    assert "unreadable_file" in audited.codes() and audited.samples == 1


DTYPES = [torch.int8, torch.int32, torch.int64, torch.bool, torch.float16, torch.float64, torch.bfloat16,
          torch.complex64, torch.uint8]


@st.composite
def wrong_tensor(draw):
    key = draw(st.sampled_from(KEYS))
    shape = draw(st.sampled_from([(S,), (1, S), (S, 3 * H), (1, S, 3 * H), (1, S, H), (2, S, H), (1, S - 1, 3 * H),
                                  (1, S + 2, H), (S - 1,), (S + 3,), (1, 1, S, H), (0,), (1, S, 0), ()]))
    dtype = draw(st.sampled_from(DTYPES))
    return key, shape, dtype


@FUZZ
@given(change=wrong_tensor())
def test_any_entry_of_another_dtype_rank_or_length_is_one_line(tmp_path_factory, change):
    key, shape, dtype = change
    record = good_record()
    record[key] = (torch.rand(shape) * 4).to(dtype) if not dtype.is_complex else torch.zeros(shape, dtype=dtype)
    tmp_path = tmp_path_factory.mktemp("t")
    check_every_command(folder_with(tmp_path, record), tmp_path)


@pytest.mark.slow  # the longer fuzz: two entries changed at once (~0.2 s a case)
@settings(FUZZ, max_examples=150)
@given(first=wrong_tensor(), second=wrong_tensor(), drop=st.sampled_from((None,) + KEYS))
def test_two_wrong_entries_and_a_missing_one(tmp_path_factory, first, second, drop):
    record = good_record()
    for key, shape, dtype in (first, second):
        record[key] = (torch.rand(shape) * 4).to(dtype) if not dtype.is_complex else torch.zeros(shape, dtype=dtype)
    record.pop(drop, None)
    tmp_path = tmp_path_factory.mktemp("t2")
    check_every_command(folder_with(tmp_path, record), tmp_path)


@FUZZ
@given(dtype=st.sampled_from(DTYPES + [torch.float8_e4m3fn, torch.float8_e5m2, torch.float32]), which=st.integers(0, 2))
def test_vllm_connector_files_of_any_dtype(tmp_path_factory, dtype, which):
    """capture vllm --from-dir: states of a dtype the connector never writes (int, bool, float64, FP8
    without the import's dequantization) reached the dump writer as an internal error."""
    from safetensors.torch import save_file

    folder = tmp_path_factory.mktemp("v")
    for i in range(3):
        states = torch.randn(S, 4, H)
        if i == which:
            states = (states * 4).to(dtype) if not dtype.is_complex else torch.zeros(S, 4, H, dtype=dtype)
        save_file({"hidden_states": states, "token_ids": torch.arange(1, S + 1) + i}, str(folder / f"req-{i}.safetensors"))
    out = tmp_path_factory.mktemp("o") / "serve.h5"
    args = ["capture", "vllm", "--from-dir", folder, "--layer-ids", "2,4,5,8", "--num-layers", "8", "--out", out, "--quiet"]
    before = fingerprints([folder])
    result = invoke(args)
    if dtype == torch.float32:
        assert result.exit_code == 0, result.stderr
    else:  # another float dtype than the other files: refused as a folder of mixed runs
        assert "hidden_states is" in assert_one_line(result, 2)
    assert fingerprints([folder]) == before
