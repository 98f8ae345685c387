"""``alignprobe gate`` end to end on a real SGLang 0.5.23 (CPU engine, its own venv): server and offline Engine.

Each SGLang serve source once correct (EAGLE3 aux capture with the model's default ids: HF[2, 4, 5],
the training view) and once faulty, judged by what a pipeline reads: exit code, result.json, JUnit,
report/.

Offline, the gate starts the engine itself, so the fault is SGLang's own: explicit ids 2,4,5 (vLLM's
numbering given to SGLang, which adds 1 on llama) capture HF[3, 5, 6], one layer deep. One server
serves both server runs (an engine start is most of this file's time), so there the fault is on the
training side: a drafter trained on HF[3, 5, 6] (train.aux_layers), which the served HF[2, 4, 5]
reach one layer shallow.
"""

import json
import os

import pytest

from engine_gate import assert_failed_on, assert_passed, run_gate, write_config
from engine_helpers import (
    SGLANG_AUX_EAGLE3, SGLANG_ENGINE_ARGS, engine_venv, engine_work, free_port, server, sglang_env, sglang_launch_argv,
)

pytestmark = [pytest.mark.engine, pytest.mark.slow]
_ = engine_work  # a fixture, imported for its name

HF_NUMBERED = [2, 4, 5]  # right for vLLM; SGLang reads them as HF[3, 5, 6]
TRAINED_DEEPER = [3, 5, 6]  # a drafter trained on HF[3, 5, 6]; the default ids serve HF[2, 4, 5]
ENGINE_ARGS = {**SGLANG_ENGINE_ARGS, "dtype": "float32"}


@pytest.fixture(scope="module")
def sglang_venv():
    return engine_venv("sglang")


@pytest.fixture(autouse=True)
def _cpu_engine(sglang_venv, monkeypatch):
    for key, value in sglang_env(sglang_venv).items():  # the engine process the gate starts inherits them
        monkeypatch.setenv(key, value)


def test_gate_offline_engine_default_ids_pass(sglang_venv, engine_work, tmp_path):
    # the engine's Python and its keywords as config keys
    config = write_config(tmp_path, engine_work, {
        "sglang_offline_model": engine_work["model"], "engine_python": os.path.join(sglang_venv, "bin", "python"),
        "engine_args": ENGINE_ARGS})
    assert_passed(run_gate("sglang-engine-default", "sglang", ["--config", config], tmp_path / "out"))
    from alignprobe.dump import open_dump

    with open_dump(tmp_path / "out" / "serve.h5") as dump:  # what ran, recorded
        assert dump.provenance.capture["engine_kwargs"]["dtype"] == "float32"


def test_gate_offline_engine_ids_in_hf_numbering_fail(sglang_venv, engine_work, tmp_path):
    # the same as flags, with the ids SGLang reads one layer deep
    engine_args = {**ENGINE_ARGS, "return_aux_hidden_state_layer_ids": HF_NUMBERED}
    args = ["--model", engine_work["model"], "--prompts", engine_work["prompts"], "--dtype", "fp32",
            "--sglang-offline-model", engine_work["model"], "--engine-python", os.path.join(sglang_venv, "bin", "python")]
    for key, value in engine_args.items():
        args += ["--engine-arg", f"{key}={json.dumps(value)}"]
    finding = assert_failed_on(run_gate("sglang-engine-hf-numbered", "sglang", args, tmp_path / "out"), "layer_offset")
    assert finding["evidence"]["shift"] == 1 and "SGLang" in finding["fix"]


# the server last: a module fixture lives until the module ends, and the offline engines must not share the
# machine with it
@pytest.fixture(scope="module")
def sglang_server(sglang_venv, engine_work):
    root, port = engine_work["root"], free_port()
    url = f"http://127.0.0.1:{port}"
    argv = sglang_launch_argv(sglang_venv, engine_work["model"], port, "float32", SGLANG_AUX_EAGLE3)
    with server(argv, {**os.environ, **sglang_env(sglang_venv)}, url, "/health", str(root / "gate-sglang.log")):
        yield url


def test_gate_server_default_ids_pass(sglang_server, engine_work, tmp_path):
    config = write_config(tmp_path, engine_work, {"sglang_url": sglang_server})
    assert_passed(run_gate("sglang-url-default", "sglang", ["--config", config], tmp_path / "out"))


def test_gate_server_fails_a_drafter_trained_one_layer_deeper(sglang_server, engine_work, tmp_path):
    config = write_config(tmp_path, engine_work, {"sglang_url": sglang_server}, train={"aux_layers": TRAINED_DEEPER})
    outcome = run_gate("sglang-url-trained-deeper", "sglang", ["--config", config], tmp_path / "out")
    assert assert_failed_on(outcome, "layer_offset")["evidence"]["shift"] == -1
