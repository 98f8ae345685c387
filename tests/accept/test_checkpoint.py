"""Both checkpoint layouts load into the same drafter; the target's tensors come from its safetensors only."""

import json
import os

import pytest
import torch

import alignprobe
from alignprobe.accept import load_drafter
from alignprobe.accept.target_weights import read_target_weights
from alignprobe.errors import BadInput
from accept_fixtures import specforge_drafter, speculators_from_specforge, tiny_target_and_dumps


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("accept-layouts")
    model, target, train, prompts = tiny_target_and_dumps(root)
    return root, model, target, train


def test_specforge_and_speculators_layouts_predict_the_same(tiny):
    root, model, target, train = tiny
    sf = specforge_drafter(root / "sf", model.config)
    sp = speculators_from_specforge(sf, root / "sp")
    a, b = load_drafter(sf), load_drafter(sp)
    assert (a.layout, b.layout) == ("specforge", "speculators")
    assert a.layer_ids == b.layer_ids == (2, 4, 5)
    assert a.layer_ids_source == "eagle_config.eagle_aux_hidden_state_layer_ids"
    assert b.layer_ids_source == "eagle_aux_hidden_state_layer_ids"
    assert set(a.weights) == set(b.weights)
    ra = alignprobe.accept(sf, train, train, target=target, explain=False)
    rb = alignprobe.accept(sp, train, train, target=target, explain=False)
    assert ra.train.per_position == rb.train.per_position
    assert ra.serve.accept_length == ra.train.accept_length  # the same dump on both sides costs nothing
    assert ra.cost == 0.0


def test_speculators_norm_flags_change_the_forward(tiny):
    root, model, target, train = tiny
    sf = specforge_drafter(root / "sf2", model.config, seed=1)
    plain = speculators_from_specforge(sf, root / "sp-plain")
    flagged = speculators_from_specforge(sf, root / "sp-flag", {"norm_before_residual": True, "norm_output": True})
    from alignprobe.accept.drafter import Eagle3Drafter

    embed = read_target_weights(target).embed
    tokens = torch.arange(20) % 7
    states = torch.randn(20, 3 * model.config.hidden_size, generator=torch.Generator().manual_seed(0))
    x = Eagle3Drafter(load_drafter(plain), embed).chain_logits(tokens, states, 3)
    y = Eagle3Drafter(load_drafter(flagged), embed).chain_logits(tokens, states, 3)
    assert not torch.allclose(x[0], y[0])


def test_target_tensors_are_read_alone_and_the_embedding_is_required(tiny, monkeypatch):
    root, model, target, train = tiny
    opened = []
    import safetensors

    real = safetensors.safe_open

    class Spy:
        def __init__(self, *a, **k):
            self.inner = real(*a, **k)

        def __enter__(self):
            self.handle = self.inner.__enter__()
            return self

        def __exit__(self, *exc):
            return self.inner.__exit__(*exc)

        def keys(self):
            return self.handle.keys()

        def get_tensor(self, name):
            opened.append(name)
            return self.handle.get_tensor(name)

    monkeypatch.setattr(safetensors, "safe_open", Spy)
    weights = read_target_weights(target)
    assert sorted(opened) == ["lm_head.weight", "model.embed_tokens.weight", "model.norm.weight"]
    assert torch.equal(weights.embed, model.model.embed_tokens.weight.detach())
    monkeypatch.undo()
    sf = specforge_drafter(root / "sf3", model.config)
    with pytest.raises(BadInput, match="give --target"):
        alignprobe.accept(sf, train, train, explain=False)


def test_a_drafter_folder_without_weights_is_bad_input(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLMEagle3"]}))
    with pytest.raises(BadInput, match="no \\*.safetensors"):
        load_drafter(tmp_path)
    with pytest.raises(BadInput, match="no config.json"):
        load_drafter(os.path.join(tmp_path, "missing"))


def test_eagle31_per_slice_norms_on_five_slices_in_the_specforge_layout(tiny, tmp_path):
    """An EAGLE-3.1 drafter of five taps (fc 5H wide) with fc_norm weights, in the layout vLLM serves as
    LlamaForCausalLMEagle3 (flags at the top level, as llama_eagle3.py reads them): each slice is
    RMS-normed by its own weight before fc, checked against the formula written out here."""
    from safetensors.torch import load_file, save_file

    root, model, target, _ = tiny
    h = model.config.hidden_size
    ids = (1, 2, 4, 5, 7)
    sf = specforge_drafter(tmp_path / "sf5", model.config, layer_ids=ids, config_updates={"fc_norm": True})
    weights = load_file(os.path.join(sf, "model.safetensors"))
    g = torch.Generator().manual_seed(3)
    norms = [1 + 0.3 * torch.randn(h, generator=g) for _ in ids]
    weights.update({f"fc_norm.{i}.weight": w for i, w in enumerate(norms)})
    save_file(weights, os.path.join(sf, "model.safetensors"))
    ckpt = load_drafter(sf)
    assert (ckpt.fc_norm, ckpt.num_taps, ckpt.layer_ids) == (True, 5, ids)
    from alignprobe.accept.drafter import Eagle3Drafter

    states = torch.randn(6, 5 * h, generator=g)
    projected = Eagle3Drafter(ckpt, read_target_weights(target).embed).project(states)
    chunks = states.view(6, 5, h)
    normed = chunks / chunks.pow(2).mean(-1, keepdim=True).add(ckpt.rms_norm_eps).sqrt() * torch.stack(norms)
    torch.testing.assert_close(projected, normed.reshape(6, 5 * h) @ weights["fc.weight"].T)
    # end to end on a dump of those five taps (capture hf --aux-layers), train beside itself
    from alignprobe.probes.hf import capture_hf
    from alignprobe.probes.prompts import Prompt

    five = capture_hf(model, [Prompt("a", list(range(3, 40)))], tmp_path / "five.h5", aux_layers=list(ids),
                      progress=False)
    result = alignprobe.accept(sf, five, five, target=target, explain=False)
    assert result.train is not None and result.serve.accept_length == result.train.accept_length
