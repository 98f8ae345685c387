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
