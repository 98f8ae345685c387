"""importers/speculators.py: speculators / vLLM hs_<idx>.safetensors folders (with and without the last
layer, bf16, FP8 with its scales, the default ids), imported and checked against an HF capture."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from alignprobe.dump import open_dump
from alignprobe.errors import BadInput
from alignprobe.importers import import_source

from importer_folders import (N, VLLM_IDS, assert_streams_match, verdict,
                              write_speculators, write_speculators_fp8)


# -- speculators and vLLM files -----------------------------------------------------------------


def test_speculators_import_splits_aux_and_prenorm_final(speculators_dir, hf_dump, tmp_path):
    result = import_source(speculators_dir, tmp_path / "sp.h5", layer_ids=VLLM_IDS, progress=False)
    assert result.plan.num_layers == N  # the last id is N in speculators' layout
    with open_dump(result.path) as d:
        assert d.streams["aux"].hf_indices == (2, 4, 5) and d.streams["final"].final_norm == "pre"
    assert_streams_match(result.path, hf_dump, [("aux", "eagle3_aux", slice(None)), ("final", "final_prenorm", slice(None))])
    # The aux states agree, and speculators' pre-norm final is paired with the HF extractor's pre-norm
    # final (capture hf holds both): a correct dataset passes (issue 11)
    outcome, findings = verdict(hf_dump, result.path)
    assert outcome == "PASS" and [f for f in findings if not f.startswith(("mapping_ambiguous", "same_dump"))] == []


def test_speculators_without_the_last_layer_compares_clean(model, token_lists, hf_dump, tmp_path):
    root = write_speculators(tmp_path / "aux_only", model, token_lists, layer_ids=VLLM_IDS[:3])  # --no-include-last-layer
    result = import_source(root, tmp_path / "a.h5", layer_ids=VLLM_IDS[:3], num_layers=N, progress=False)
    assert list(result.plan.streams) == ["aux"]
    assert verdict(hf_dump, result.path) == ("PASS", [])





def test_speculators_three_ids_get_n_appended(speculators_dir, tmp_path):
    result = import_source(speculators_dir, tmp_path / "sp3.h5", layer_ids=VLLM_IDS[:3], num_layers=N, progress=False)
    assert result.plan.layer_ids == tuple(VLLM_IDS) and any("appended N" in n for n in result.plan.notes)





def test_bf16_files_stay_bf16(model, token_lists, tmp_path):
    root = tmp_path / "bf"
    write_speculators(root, model.to(torch.bfloat16), token_lists[:2])
    model.to(torch.float32)
    with open_dump(import_source(root, tmp_path / "bf.h5", layer_ids=VLLM_IDS, progress=False).path) as d:
        assert {c.dtype for c in d.streams.values()} == {"bfloat16"}




# -- speculators FP8 files and the default ids (issue 11, imports found wrong on real files) -------


@pytest.mark.parametrize("scale_shape", [(1, 1), (1,)])  # [S, 1, 1] today, [S, 1] in an older connector
def test_speculators_fp8_states_are_dequantized_with_their_scale(model, token_lists, hf_dump, tmp_path, scale_shape):
    root = write_speculators_fp8(tmp_path / "fp8", model, token_lists, scale_shape=scale_shape)
    result = import_source(root, tmp_path / "fp8.h5", layer_ids=VLLM_IDS, progress=False)
    assert any("float8_e4m3fn" in n and "dequantized" in n for n in result.plan.notes)
    with open_dump(result.path) as d:
        assert d.provenance.capture["states_storage"] == "float8_e4m3fn"
    # e4m3 keeps 3 mantissa bits: each value within 2^-4 of itself relative, far from a 1/scale error
    with open_dump(result.path) as a, open_dump(hf_dump) as b:
        for sid in b.sample_ids:
            mine, theirs = a.states(sid, "aux"), b.states(sid, "eagle3_aux")
            rel = np.linalg.norm(mine - theirs) / np.linalg.norm(theirs)
            assert rel < 0.05, (sid, rel)


def test_fp8_states_without_their_scale_are_bad_input(tmp_path):
    root = tmp_path / "noscale"
    root.mkdir()
    save_file({"hidden_states": torch.zeros(4, 3, 8).to(torch.float8_e4m3fn), "token_ids": torch.arange(4)},
              str(root / "hs_0.safetensors"))
    with pytest.raises(BadInput, match="no hidden_states_scales"):
        import_source(root, tmp_path / "o.h5", layer_ids=[2, 4, 5], num_layers=8, progress=False)


def test_speculators_three_slices_need_no_ids(model, token_lists, tmp_path):
    root = write_speculators(tmp_path / "aux3", model, token_lists, layer_ids=VLLM_IDS[:3])
    result = import_source(root, tmp_path / "a3.h5", num_layers=N, progress=False)
    assert result.plan.layer_ids == tuple(VLLM_IDS[:3]) and list(result.plan.streams) == ["aux"]
    with open_dump(result.path) as d:
        assert d.streams["aux"].hf_indices == (2, 4, 5)


def test_default_ids_that_do_not_fit_do_not_claim_the_user_gave_them(tmp_path):
    root = tmp_path / "two"
    root.mkdir()
    save_file({"hidden_states": torch.zeros(4, 2, 8), "token_ids": torch.arange(4)}, str(root / "hs_0.safetensors"))
    with pytest.raises(BadInput) as info:
        import_source(root, tmp_path / "o.h5", num_layers=8, progress=False)
    assert "4 layer ids were given" not in str(info.value) and "no layer ids were given" in str(info.value)
