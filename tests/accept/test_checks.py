"""Every drafter-config check: a planted problem raises its finding; a sound drafter raises none."""

import json
import os
import pathlib
import re

import pytest
import torch

import alignprobe
from alignprobe.accept import load_drafter
from alignprobe.accept.checks import check_drafter
from alignprobe.dump import StreamClaim
from alignprobe.findings import codes_of
from accept_fixtures import specforge_drafter, speculators_from_specforge, tiny_target_and_dumps


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("accept-checks")
    model, target, train, prompts = tiny_target_and_dumps(root)
    return root, model, target, train, prompts


def _codes(ckpt, **kw):
    kw.setdefault("hidden_size", 32)
    kw.setdefault("num_layers", 8)
    return [(f.code, f.severity) for f in check_drafter(ckpt, **kw)]


def _claim(indices):
    return StreamClaim(tuple(indices), 32, 8, "float32")


def test_a_sound_drafter_raises_nothing(tiny):
    root, model, *_ = tiny
    ckpt = load_drafter(specforge_drafter(root / "ok", model.config))
    assert _codes(ckpt, serve_claim=_claim((2, 4, 5)), measured=["HF[2]", "HF[4]", "HF[5]"], target_vocab=512) == []
    mapped = load_drafter(specforge_drafter(root / "ok-d2t", model.config, draft_vocab=128))
    assert _codes(mapped, target_vocab=512) == []


def test_tap_ids_against_claims_measurements_and_engines(tiny):
    root, model, *_ = tiny
    ckpt = load_drafter(specforge_drafter(root / "taps", model.config))
    assert ("drafter_tap_ids", "warn") in _codes(ckpt, serve_claim=_claim((3, 5, 6)))
    assert ("drafter_tap_ids", "error") in _codes(ckpt, serve_claim=_claim((2, 4, 5)), measured=["HF[3]", "HF[5]", "HF[6]"])
    # SGLang reads explicit ids with +1: ids (2, 4, 5) capture HF[3], HF[5], HF[6] there
    assert ("drafter_tap_ids", "warn") in _codes(ckpt, serve_claim=_claim((2, 4, 5)), serve_engine="sglang")
    assert _codes(ckpt, serve_claim=_claim((3, 5, 6)), serve_engine="sglang") == []


def test_nested_and_top_level_ids_disagree(tiny):
    root, model, *_ = tiny
    ckpt = load_drafter(specforge_drafter(root / "two-ids", model.config, config_updates={"eagle_aux_hidden_state_layer_ids": [1, 3, 4]}))
    assert ckpt.layer_ids == (1, 3, 4)  # vLLM's order: the top-level key first
    assert ("drafter_tap_ids", "error") in _codes(ckpt)


@pytest.mark.parametrize("ids", [(5, 5, 2), (2, 4)])
def test_id_collisions_and_counts(tiny, ids):
    """Repeated ids (vLLM de-duplicates: fc gets fewer slices), or fewer ids than fc's 3H takes."""
    root, model, *_ = tiny
    config = {"eagle_config": {"eagle_aux_hidden_state_layer_ids": list(ids), "use_aux_hidden_state": True}}
    ckpt = load_drafter(specforge_drafter(root / f"ids-{len(ids)}", model.config, config_updates=config))
    assert ckpt.fc_input_width == 3 * model.config.hidden_size
    assert ("drafter_tap_collision", "error") in _codes(ckpt)


def test_hidden_width(tiny):
    root, model, *_ = tiny
    ckpt = load_drafter(specforge_drafter(root / "width", model.config))
    assert ("drafter_hidden_width", "error") in _codes(ckpt, hidden_size=64)


def test_vocab_mapping_range_count_consistency_and_absence(tiny):
    root, model, *_ = tiny
    path = specforge_drafter(root / "vocab", model.config, draft_vocab=128)
    ckpt = load_drafter(path)
    ckpt.d2t = ckpt.d2t.clone()
    ckpt.d2t[-1] = 10_000  # past the target vocab
    assert ("drafter_vocab_map", "error") in _codes(ckpt, target_vocab=512)
    ckpt = load_drafter(path)
    ckpt.t2d = ckpt.t2d.clone()
    ckpt.t2d[1] = True  # one more id than the draft vocab
    assert ("drafter_vocab_map", "error") in _codes(ckpt, target_vocab=512)
    ckpt = load_drafter(path)
    ckpt.t2d = ckpt.t2d.roll(1)  # same count, other ids: d2t and t2d disagree
    assert ("drafter_vocab_map", "error") in _codes(ckpt, target_vocab=512)
    ckpt = load_drafter(path)
    ckpt.d2t = None
    assert ("drafter_vocab_map", "error") in _codes(ckpt, target_vocab=512)


def test_target_vocab(tiny):
    root, model, *_ = tiny
    ckpt = load_drafter(specforge_drafter(root / "tv", model.config, draft_vocab=128))
    assert ("drafter_target_vocab", "error") in _codes(ckpt, target_vocab=1024)


def test_norm_flags_without_their_weights_and_weights_without_flags(tiny):
    root, model, *_ = tiny
    sf = specforge_drafter(root / "nf", model.config)
    flagged = load_drafter(speculators_from_specforge(sf, root / "nf-sp", {"norm_before_fc": True}))
    assert ("drafter_norm_flags", "error") in _codes(flagged)
    unflagged = load_drafter(speculators_from_specforge(sf, root / "nf-sp2"))
    unflagged.weights["input_norm.weight"] = torch.ones(96)
    assert ("drafter_norm_flags", "error") in _codes(unflagged)
    both = load_drafter(speculators_from_specforge(sf, root / "nf-sp3", {"norm_before_fc": True}))
    both.weights["input_norm.weight"] = torch.ones(96)
    assert [c for c in _codes(both) if c[1] != "info"] == []


def test_use_aux_false(tiny):
    root, model, *_ = tiny
    ckpt = load_drafter(specforge_drafter(root / "noaux", model.config,
                                          config_updates={"eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 4, 5], "use_aux_hidden_state": False}}))
    assert ("drafter_use_aux", "error") in _codes(ckpt)


def test_a_width_error_stops_the_prediction_with_a_finding(tiny):
    root, model, target, train, prompts = tiny
    from alignprobe.probes.hf import capture_hf

    ckpt_path = specforge_drafter(root / "w2", model.config)
    two_taps = capture_hf(model, prompts, os.path.join(root, "two.h5"), layers="eagle3", aux_layers=(2, 4), progress=False)
    result = alignprobe.accept(ckpt_path, train, two_taps, target=target, explain=False)
    assert result.serve is None and result.train is not None
    assert "drafter_hidden_width" in [f.code for f in result.findings]
    assert "no prediction" in result.sentence() or result.serve is None


def test_an_engine_with_fixed_taps_says_the_drafter_ids_are_ignored(tiny):
    """LMDeploy taps HF[2, N//2, N-3] whatever the drafter config says: ids that read as those layers in
    either numbering pass; others are named, with the fix that the drafter must be trained on the taps."""
    root, model, *_ = tiny
    for ids in ((2, 4, 5), (1, 3, 4)):  # HF[2, 4, 5] as inputs of layers, and as outputs (SpecForge)
        config = {"eagle_config": {"eagle_aux_hidden_state_layer_ids": list(ids), "use_aux_hidden_state": True}}
        ckpt = load_drafter(specforge_drafter(root / f"lmdeploy-{ids[0]}", model.config, config_updates=config))
        assert _codes(ckpt, serve_engine="lmdeploy") == [], ids
    config = {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [3, 4, 6], "use_aux_hidden_state": True}}
    ckpt = load_drafter(specforge_drafter(root / "lmdeploy-off", model.config, config_updates=config))
    found = [f for f in check_drafter(ckpt, hidden_size=32, num_layers=8, serve_engine="lmdeploy")
             if f.code == "drafter_tap_ids"]
    assert [f.severity for f in found] == ["warn"]
    assert found[0].evidence["fixed_taps_hf"] == [2, 4, 5] and "LMDeploy" in found[0].title
    assert "fixed at (2, N//2, N-3) = HF[2, 4, 5]" in found[0].fix and "trained on HF[2, 4, 5]" in found[0].fix


def test_every_accept_finding_is_made_in_checks_py_and_run_py_makes_none():
    package = pathlib.Path(__file__).resolve().parents[2] / "alignprobe" / "accept"
    assert not re.search(r"\bmake\(|Finding\(", (package / "run.py").read_text())
    checks = (package / "checks.py").read_text()
    for code in codes_of("accept"):
        assert f'"{code}"' in checks, code
