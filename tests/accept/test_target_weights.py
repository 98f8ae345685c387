"""accept/target_weights.py: the target's embedding, lm_head and final norm, read from its folder."""

import json

import pytest
import torch
from safetensors.torch import save_file

from alignprobe.accept.target_weights import read_target_weights
from alignprobe.errors import BadInput


@pytest.fixture
def target(tmp_path):
    folder = tmp_path / "target"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"vocab_size": 11, "hidden_size": 4, "num_hidden_layers": 2,
                                                    "tie_word_embeddings": True}))
    save_file({"model.embed_tokens.weight": torch.ones(11, 4), "model.norm.weight": torch.ones(4)},
              str(folder / "model-00001-of-00001.safetensors"))
    return folder


def test_the_tensors_by_index_and_without_one(target):
    found = read_target_weights(target)
    assert found.embed is not None and found.lm_head is found.embed and found.final_norm is not None
    (target / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {"model.embed_tokens.weight": "model-00001-of-00001.safetensors",
                        "model.norm.weight": "model-00001-of-00001.safetensors"}}))
    assert read_target_weights(target).embed.shape == (11, 4)


@pytest.mark.parametrize("index, said", [("[" * 100_000 + "]" * 100_000, "nested"), ('{"weight_map": NaN}', "NaN"),
                                         ('{"weight_map": [1]}', "not a safetensors index"), ("{", "not JSON")])
def test_a_bad_index_is_one_line(target, index, said):
    (target / "model.safetensors.index.json").write_text(index)
    with pytest.raises(BadInput, match="model.safetensors.index.json") as info:
        read_target_weights(target)
    assert said in str(info.value) and "\n" not in str(info.value)
