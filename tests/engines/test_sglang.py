"""A real SGLang 0.5.23 (CPU engine, its own venv): capture over HTTP and through sglang.Engine, then judge.

What is planted is what SGLang's own flags do: EAGLE3 aux capture with the model's default ids
(HF[2, 4, 5] on 8 layers: the training view), explicit ids 1 3 4 (SGLang adds 1 on llama: the same
HF[2, 4, 5]), explicit ids 2 4 5 (vLLM's numbering given to SGLang: one layer deep), aux capture off
(the final state only), and a bf16 server against fp32 training.
"""

import json
import os

import pytest

from engine_helpers import (
    DEFAULT_HF, SGLANG_AUX_EAGLE3, SGLANG_ENGINE_ARGS, best_match, engine_venv, engine_work, free_port, record,
    run_cli, server, sglang_env, sglang_version, slice_cosines, summarize,
)
from engine_helpers import sglang_launch_argv as launch_argv

pytestmark = [pytest.mark.engine, pytest.mark.slow]
_ = engine_work  # a fixture, imported for its name

AUX_EAGLE3 = SGLANG_AUX_EAGLE3


@pytest.fixture(scope="module")
def sglang_venv():
    return engine_venv("sglang")


def capture_over_http(sglang_venv, engine_work, name, dtype, extra, train_dtype):
    from alignprobe.compare.compare import compare

    root, port = engine_work["root"], free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, **sglang_env(sglang_venv)}
    argv = launch_argv(sglang_venv, engine_work["model"], port, dtype, extra)
    out = str(root / f"{name}.h5")
    with server(argv, env, url, "/health", str(root / f"{name}.log")) as start_s:
        # the real server's defaults: no --max-new-tokens (a real 0.5.23 returns nothing for 0)
        result, capture_s = run_cli(["capture", "sglang", "--url", url, "--tokens-from", engine_work["train"][train_dtype],
                                     "--out", out, "--quiet"])
    assert result.exit_code == 0, result.output
    verdict = compare(engine_work["train"][train_dtype], out)
    table = slice_cosines(engine_work["train"]["fp32"], out)
    record(name, engine="sglang", version=sglang_version(sglang_venv), mode="http", server_flags=extra, dtype=dtype,
           train_dtype=train_dtype, start_s=round(start_s, 1), capture_s=round(capture_s, 2), **summarize(verdict),
           cosines=table)
    return out, verdict, table


def codes(result):
    return [f.code for f in result.findings if f.severity == "error"]


def test_http_eagle3_default_ids_pass_fp32(sglang_venv, engine_work):
    from alignprobe.dump import open_dump

    out, result, table = capture_over_http(sglang_venv, engine_work, "sglang-http-eagle3-default-fp32", "float32",
                                           AUX_EAGLE3, "fp32")
    assert best_match(table) == [f"HF[{i}]" for i in DEFAULT_HF]
    assert all(max(row.values()) > 0.99999 for row in table.values())  # exact, in the server dtype
    with open_dump(out) as dump:
        assert list(dump.streams["hidden_states"].hf_indices) == DEFAULT_HF
    assert result.verdict == "PASS", [(f.code, f.title) for f in result.findings]


def test_http_explicit_ids_in_vllm_numbering_are_one_layer_deep(sglang_venv, engine_work):
    # ids 2 4 5 are right for vLLM (HF[k]); SGLang adds 1 on llama: HF[3, 5, 6]. The claim follows the
    # ids the server reports it ran with, so the dump says HF[3, 5, 6] and the verdict names the offset.
    from alignprobe.dump import open_dump

    out, result, table = capture_over_http(sglang_venv, engine_work, "sglang-http-explicit-2-4-5-fp32", "float32",
                                           AUX_EAGLE3 + ["--return-aux-hidden-state-layer-ids", "2", "4", "5"], "fp32")
    assert best_match(table) == ["HF[3]", "HF[5]", "HF[6]"]
    with open_dump(out) as dump:
        assert list(dump.streams["hidden_states"].hf_indices) == [3, 5, 6]
        assert dump.provenance.capture["aux_layer_ids"] == [2, 4, 5]
    assert result.verdict == "FAIL"
    offset = next(f for f in result.findings if f.code == "layer_offset")
    assert offset.evidence["shift"] == 1
    assert "SGLang" in offset.fix  # the engine's convention names the fix: ids 1 3 4


def test_http_aux_capture_off_serves_the_final_state_only(sglang_venv, engine_work):
    out, result, table = capture_over_http(sglang_venv, engine_work, "sglang-http-aux-off-fp32", "float32", [], "fp32")
    assert best_match(table) == ["HF[8]"]  # post-norm final (pre-norm scores lower)
    assert result.verdict == "FAIL"
    width = next(f for f in result.findings if f.code == "width_mismatch")
    assert "EAGLE3" in width.fix


def test_offline_engine_explicit_ids_pass_bf16_and_name_the_dtype_against_fp32(sglang_venv, engine_work):
    from alignprobe.compare.compare import compare

    root = engine_work["root"]
    out = str(root / "sglang-engine-explicit-1-3-4-bf16.h5")
    args = ["capture", "sglang", "--engine-model", engine_work["model"], "--engine-python",
            os.path.join(sglang_venv, "bin", "python"), "--tokens-from", engine_work["train"]["bf16"], "--out", out,
            "--quiet"]
    engine_args = {**SGLANG_ENGINE_ARGS, "dtype": "bfloat16", "return_aux_hidden_state_layer_ids": [1, 3, 4]}
    for key, value in engine_args.items():
        args += ["--engine-arg", f"{key}={json.dumps(value)}"]
    saved = dict(os.environ)
    os.environ.update(sglang_env(sglang_venv))  # the engine process inherits it
    try:
        result, capture_s = run_cli(args)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    assert result.exit_code == 0, result.output
    from alignprobe.dump import open_dump

    with open_dump(out) as dump:
        assert list(dump.streams["hidden_states"].hf_indices) == DEFAULT_HF
        assert dump.streams["hidden_states"].dtype == "bfloat16"
        start_s = dump.provenance.capture["engine_start_s"]
    same = compare(engine_work["train"]["bf16"], out)
    other = compare(engine_work["train"]["fp32"], out)
    table = slice_cosines(engine_work["train"]["fp32"], out)
    record("sglang-engine-explicit-1-3-4-bf16", engine="sglang", version=sglang_version(sglang_venv),
           mode="offline sglang.Engine", dtype="bfloat16", train_dtype="bf16", start_s=round(start_s, 1),
           capture_s=round(capture_s, 2), **summarize(same), against_fp32_train=summarize(other), cosines=table)
    assert best_match(table) == [f"HF[{i}]" for i in DEFAULT_HF]
    assert same.verdict == "PASS", [(f.code, f.title) for f in same.findings]
    assert other.verdict != "FAIL", [(f.code, f.title) for f in other.findings]  # bf16 vs fp32: named, not a FAIL
    assert other.finding("dtype_mismatch") is not None, [(f.code, f.title) for f in other.findings]
