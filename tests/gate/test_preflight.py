"""gate/preflight.py: every input the gate can check is checked before a capture, in one line that names
the config key it is about."""

import importlib.util
import json
import socket
import sys

import pytest

from alignprobe.errors import BadInput
from alignprobe.gate.config import GateConfig, ServeSide, TrainSide
from alignprobe.gate.preflight import check_inputs
from bad_input_helpers import LoopbackServer


@pytest.fixture
def train(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "llama", "num_hidden_layers": 4, "hidden_size": 8}))
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"input_ids": [1, 2, 3]}\n')
    return TrainSide(model=str(model), prompts=str(prompts))


def _free_port() -> int:
    with socket.socket() as s:  # free a moment ago: nothing listens on it now
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _health(handler):
    handler.send_response(200 if handler.path == "/health" else 404)
    handler.send_header("Content-Length", "0")
    handler.end_headers()


def test_a_config_whose_inputs_are_all_there_passes(train, tmp_path):
    (tmp_path / "hs").mkdir()
    check_inputs(GateConfig(train=train, serve=ServeSide(vllm_dir=str(tmp_path / "hs"))))
    server = LoopbackServer(_health)
    try:
        check_inputs(GateConfig(train=train, serve=ServeSide(sglang_url=server.url)))
    finally:
        server.close()


@pytest.mark.parametrize("change, key, said", [
    (lambda t, s, tmp: (TrainSide(model=str(tmp / "none"), prompts=t.prompts), s), "train.model", "no config.json"),
    (lambda t, s, tmp: (TrainSide(model=t.model, prompts=str(tmp / "none.jsonl")), s), "train.prompts", "prompt file"),
    (lambda t, s, tmp: (t, ServeSide(vllm_url=f"http://127.0.0.1:{_free_port()}")), "serve.vllm_url",
     "cannot reach the vLLM server"),
    (lambda t, s, tmp: (t, ServeSide(vllm_dir=str(tmp / "no-folder"))), "serve.vllm_dir", "connector folder"),
    pytest.param(lambda t, s, tmp: (t, ServeSide(vllm_offline_model=t.model, engine_python=sys.executable)),
                 "serve.engine_python", "has no vllm module",
                 marks=pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")),
])
def test_each_missing_input_is_one_line_naming_its_key(train, tmp_path, change, key, said):
    side, serve = change(train, ServeSide(), tmp_path)
    with pytest.raises(BadInput) as info:
        check_inputs(GateConfig(train=side, serve=serve))
    line = str(info.value)
    assert line.startswith(f"gate: {key}: ") and said in line and "\n" not in line
