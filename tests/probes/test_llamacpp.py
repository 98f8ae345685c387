"""probes/llamacpp.py without llama.cpp: the streams it claims, how the driver's rows become them, bad input.

The driver's answer is written here by hand (one .npz a prompt, as the driver writes it), each
state a constant that names where it came from, so every slice of the dump can be traced back.
"""

import json
import os
import sys

import numpy as np
import pytest

from bad_input_helpers import assert_refused

from alignprobe.dump import open_dump
from alignprobe.dump.schema import FINAL_NORM_POST, FINAL_NORM_PRE, ROLE_DRAFTER_INPUT, ROLE_FINAL, ROLE_LAYERS
from alignprobe.probes.llamacpp import _write, stream_claims
from alignprobe.probes.prompts import Prompt

N, H = 8, 4


def test_the_streams_of_an_every_layer_capture_with_drafter_ids():
    streams = stream_claims(N, H, [2, 4, N])
    assert {name: (c.hf_indices, c.role, c.final_norm) for name, c in streams.items()} == {
        "layers": (tuple(range(N)), ROLE_LAYERS, FINAL_NORM_PRE),
        "final_prenorm": ((N,), ROLE_LAYERS, FINAL_NORM_PRE),
        "final": ((N,), ROLE_FINAL, FINAL_NORM_POST),
        "aux": ((2, 4, N), ROLE_DRAFTER_INPUT, FINAL_NORM_PRE),  # id k = HF[k], id N the pre-norm final
    }
    assert all(c.dtype == "float32" for c in streams.values())


def layer_inputs_needed(num_layers: int, layer_ids, layers: str) -> list[int]:
    """The layer ids whose inputs the driver keeps (probes/engine_side/alignprobe_llamacpp_driver.py): every
    layer, or the aux ids below n_layer."""
    if layers == "all":
        return list(range(num_layers))
    return sorted({int(i) for i in layer_ids or () if int(i) < num_layers})


def test_aux_only_keeps_the_inputs_the_ids_need():
    assert "layers" not in stream_claims(N, H, [1, 3], layers="aux")
    assert layer_inputs_needed(N, [5, 1, N], "aux") == [1, 5]  # id N is the pre-norm final, not a layer input
    assert layer_inputs_needed(N, None, "all") == list(range(N))


def driver_answer(folder, prompts, kept, nextn=False):
    """What the driver writes: layer il's input is il + 1, the pre-norm final 100, the post-norm 200,
    what EAGLE-3 reads for id n_layer (llama_get_embeddings_nextn) 300."""
    files = []
    for i, p in enumerate(prompts):
        s = len(p.token_ids)
        layers = np.stack([np.full((s, H), il + 1, np.float32) for il in kept], axis=1)
        path = os.path.join(folder, f"{i:06d}.npz")
        np.savez(path, layer_inputs=layers, prenorm=np.full((s, H), 100, np.float32),
                 postnorm=np.full((s, H), 200, np.float32), nextn=np.full((s if nextn else 0, H), 300, np.float32),
                 token_ids=np.asarray(p.token_ids))
        files.append(path)
    return {"files": files, "layer_inputs": kept, "n_layer": N, "n_embd": H, "file_type": "0", "bindings_version": "x"}


def request(ids, layers):
    return {"model": "m.gguf", "aux_ids": ids, "layer_inputs": layers, "threads": 1, "cache_type": "f16",
            "flash_attn": "auto"}


@pytest.mark.parametrize("layers", ["all", "aux"])
def test_each_slice_is_the_state_it_claims(tmp_path, layers):
    prompts = [Prompt("a", [1, 2, 3]), Prompt("b", [4, 5])]
    ids = [2, 5, N]
    kept = layer_inputs_needed(N, ids, layers)
    out = _write(driver_answer(str(tmp_path), prompts, kept, nextn=True), prompts, tmp_path / "d.h5", ids, layers,
                 request(ids, layers), False, False, False, None)
    with open_dump(out) as dump:
        assert dump.provenance.engine == "llama.cpp" and dump.provenance.quantization == ""  # an F32 GGUF
        for p in prompts:
            aux = dump.states(p.sample_id, "aux").reshape(len(p.token_ids), 3, H)
            # id N in the aux stream is what EAGLE-3 reads (nextn), final_prenorm the graph's l_out-{N-1}
            assert aux[:, :, 0].tolist() == [[3, 6, 300]] * len(p.token_ids)
            assert set(dump.states(p.sample_id, "final").ravel()) == {200}
            assert set(dump.states(p.sample_id, "final_prenorm").ravel()) == {100}
            if layers == "all":
                stack = dump.states(p.sample_id, "layers").reshape(len(p.token_ids), N, H)
                assert stack[0, :, 0].tolist() == [il + 1 for il in range(N)]
            assert [int(t) for t in dump.token_ids(dump.sample_ids.index(p.sample_id))] == p.token_ids


def test_rows_of_other_tokens_are_an_engine_failure(tmp_path):
    from alignprobe.engine_errors import EngineFailed

    prompts = [Prompt("a", [1, 2, 3])]
    answer = driver_answer(str(tmp_path), [Prompt("a", [1, 2, 9])], list(range(N)))
    with pytest.raises(EngineFailed, match="other tokens"):
        _write(answer, prompts, tmp_path / "d.h5", None, "all", request([], "all"), False, False, False, None)


@pytest.fixture
def inputs(tmp_path):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF" + bytes(60))
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"id": "a", "input_ids": [1, 2]}) + "\n")
    return gguf, prompts, tmp_path / "out.h5"


def test_bad_input_is_one_line(inputs, tmp_path):
    gguf, prompts, out = inputs
    base = ["capture", "llamacpp", "--prompts", prompts, "--out", out]
    not_gguf = tmp_path / "model.safetensors"
    not_gguf.write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    assert_refused([*base, "--model", not_gguf], [not_gguf, prompts], match="not a GGUF file")
    assert_refused([*base, "--model", tmp_path / "missing.gguf"], [prompts])
    # the Python running these tests has no llama_cpp: said before anything starts
    assert_refused([*base, "--model", gguf, "--engine-python", sys.executable], [gguf, prompts], match="no llama_cpp module")
    assert_refused([*base, "--model", gguf, "--layers", "aux"], [gguf, prompts], match="--layer-ids")
    assert_refused([*base, "--model", gguf, "--layer-ids", "2,2,5"], [gguf, prompts], match="repeat")
    assert_refused([*base, "--model", gguf, "--layer-ids", "two"], [gguf, prompts])
    assert_refused(["capture", "llamacpp", "--model", gguf, "--out", out], [gguf], match="--tokens-from")
    assert not out.exists()
