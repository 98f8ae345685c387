"""importers/specforge.py: SpecForge folders (offline and online layouts, padded batches, .ckpt.gz) and
EAGLE ge_data, imported and checked against an HF capture of the same prompts."""

from __future__ import annotations

import json

import numpy as np

from alignprobe.dump import open_dump
from alignprobe.importers import detect_format, import_source
from alignprobe.probes.hf import capture_hf
from alignprobe.probes.prompts import prompts_from_token_lists

from importer_folders import (N, SPECFORGE_IDS, assert_streams_match, tree_digest, verdict,
                              write_ge_data, write_specforge)




def test_specforge_import_matches_hf_and_compares_clean(specforge_dir, hf_dump, tmp_path):
    before = tree_digest(specforge_dir)
    result = import_source(specforge_dir, tmp_path / "sf.h5", layer_ids=SPECFORGE_IDS, num_layers=N, progress=False)
    assert tree_digest(specforge_dir) == before  # the user's files are never changed
    assert result.samples == 9 and result.padded_samples > 0
    with open_dump(result.path) as d:
        aux, final = d.streams["aux"], d.streams["final"]
        assert aux.hf_indices == (2, 4, 5) and aux.role == "drafter_input" and aux.final_norm == "post"
        assert final.hf_indices == (N,) and final.role == "final" and final.final_norm == "post"
        assert d.provenance.engine == "specforge" and d.provenance.capture["layer_ids"] == SPECFORGE_IDS
    # HF[2, 4, 5] are the HF capture's eagle3_aux; padding was dropped, so every id pairs by tokens
    assert_streams_match(result.path, hf_dump, [("aux", "eagle3_aux", slice(None)), ("final", "final", slice(None))])
    assert verdict(hf_dump, result.path) == ("PASS", [])


def test_specforge_online_layout_names_the_aux_concat_hidden_state(model, token_lists, hf_dump, tmp_path):
    root = write_specforge(tmp_path / "online", model, token_lists, online=True, gz_every=0)
    result = import_source(root, tmp_path / "on.h5", layer_ids=SPECFORGE_IDS, num_layers=N, progress=False)
    assert_streams_match(result.path, hf_dump, [("aux", "eagle3_aux", slice(None)), ("final", "final", slice(None))])


def test_specforge_default_ids_reveal_n_and_drafter_config_gives_ids(specforge_dir, hf_dump, tmp_path):
    config = tmp_path / "drafter.json"
    config.write_text(json.dumps({"eagle_config": {"eagle_aux_hidden_state_layer_ids": SPECFORGE_IDS}, "num_hidden_layers": 1}))
    result = import_source(specforge_dir, tmp_path / "c.h5", config=config, progress=False)
    assert result.plan.num_layers == N and any("SpecForge's default" in n for n in result.plan.notes)
    assert result.plan.hf_indices == (2, 4, 5)


def test_specforge_ids_off_by_one_fail_the_comparison(model, token_lists, hf_dump, tmp_path):
    # the run captured ids [2, 4, 5] as SpecForge reads them (HF[3, 5, 6]) but training expects HF[2, 4, 5]
    root = write_specforge(tmp_path / "shifted", model, token_lists, layer_ids=[2, 4, 5], gz_every=0)
    result = import_source(root, tmp_path / "s.h5", layer_ids=[2, 4, 5], num_layers=N, progress=False)
    assert result.plan.hf_indices == (3, 5, 6)
    with open_dump(result.path) as d, open_dump(hf_dump) as h:
        sid = h.sample_ids[0]
        np.testing.assert_allclose(d.states(sid, "aux")[:, :64], h.states(sid, "layers")[:, 3 * 64 : 4 * 64], atol=1e-5)
    assert verdict(hf_dump, result.path)[0] != "PASS"


def test_ids_from_names_samples_after_the_reference_and_keeps_a_real_final_zero(model, token_lists, specforge_dir,
                                                                              tmp_path):
    named = capture_hf(model, prompts_from_token_lists(token_lists, [f"q{i}" for i in range(9)]), tmp_path / "n.h5",
                       layers="eagle3", progress=False)
    result = import_source(specforge_dir, tmp_path / "i.h5", layer_ids=SPECFORGE_IDS, num_layers=N, ids_from=named,
                           progress=False)
    assert result.matched_ids == 9
    with open_dump(result.path) as d:
        assert sorted(d.sample_ids) == sorted(f"q{i}" for i in range(9))
        assert d.token_ids("q3").tolist() == token_lists[3]  # its last token, 0, is real and was kept
    assert verdict(named, result.path)[0] == "PASS"




def test_ge_data_import_is_the_post_norm_final(model, token_lists, hf_dump, tmp_path):
    root = write_ge_data(tmp_path / "ge", model, token_lists)
    assert detect_format(root) == "eagle"
    result = import_source(root, tmp_path / "ge.h5", num_layers=N, progress=False)
    with open_dump(result.path) as d:
        assert list(d.streams) == ["final"] and d.streams["final"].final_norm == "post"
    assert_streams_match(result.path, hf_dump, [("final", "final", slice(None))])
