"""Make vLLM write hidden-state files for a prompt set: a running server, or an offline ``LLM``.

The offline ``LLM`` runs in vLLM's own Python through probes/engine_side/alignprobe_vllm_driver.py;
both paths use alignprobe's CPU-safe connector (probes/engine_side/alignprobe_vllm_connector.py).

Read from vllm-project/speculators src/speculators/data_generation/vllm_client.py (commit
c05b95b3): ``POST /v1/completions`` with ``prompt`` = the token ids, ``max_tokens: 1`` and
``return_token_ids: true``; the answer's ``choices[0].prompt_token_ids`` echoes the prompt and its
top-level ``kv_transfer_params.hidden_states_path`` names the file the connector writes (vLLM
example_hidden_states_connector.py ``request_finished``). The server must run the
``extract_hidden_states`` method with ``ExampleHiddenStatesConnector`` (see
:func:`server_flags`), on this machine or a shared filesystem, since the files are read from disk.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, Mapping, Sequence

import httpx

from alignprobe.errors import BadInput
from alignprobe.engine_errors import EngineFailed
from alignprobe.probes.engine_process import DEFAULT_TIMEOUT_S, run_driver
from alignprobe.probes.engine_side import VLLM_DRIVER
from alignprobe.probes.http_request import checked_url, http_failure, whole_request
from alignprobe.safe_json import loads_json, local_config
from alignprobe.probes.prompts import Prompt
from alignprobe.importers.vllm_connector import is_locked


def request_files(
    base_url: str,
    model: str,
    prompts: Sequence[Prompt],
    *,
    client: httpx.Client | None = None,
    timeout: float = 120.0,
    lock_wait_s: float | None = None,
) -> list[str]:
    """Send each prompt to a vLLM server; returns the hidden-state file of each, in prompt order.

    ``lock_wait_s``: how long each file may take to appear after its answer (the connector writes
    asynchronously); ``timeout`` when not given, so --timeout bounds the whole capture."""
    checked_url(base_url)
    own = client is None
    client = client or httpx.Client(timeout=timeout)
    url = base_url.rstrip("/") + "/v1/completions"
    paths = []
    try:
        for prompt in prompts:
            body = {"model": model, "prompt": prompt.token_ids, "max_tokens": 1, "return_token_ids": True}
            try:
                response = whole_request(client, "POST", url, body, timeout)
            except httpx.HTTPError as exc:
                raise http_failure(exc, url, "vLLM", timeout) from None
            paths.append(_hidden_states_path(response, url, prompt))
    finally:
        if own:
            client.close()
    for path in paths:
        _wait_written(path, timeout if lock_wait_s is None else lock_wait_s)
    return paths


@dataclasses.dataclass(frozen=True)
class OfflineRun:
    """What an offline vLLM run wrote, and what it ran as (for the dump's provenance)."""

    paths: list[str]
    vllm_version: str
    dtype: str
    engine_options: dict[str, Any]
    start_s: float
    generate_s: float


def generate_offline(
    model_path: str,
    prompts: Sequence[Prompt],
    layer_ids: Sequence[int],
    storage_dir: str,
    *,
    python: str | None = None,
    engine_options: Mapping[str, Any] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> OfflineRun:
    """Run ``vllm.LLM`` with extract_hidden_states on ``prompts``, in vLLM's own Python (``python``).

    ``engine_options`` go to ``LLM(...)`` as given (dtype, max_model_len, enforce_eager, any other
    keyword). Without a dtype the checkpoint's own ``torch_dtype`` is asked for: vLLM's "auto" runs a
    float32 checkpoint in bfloat16 on CPU, which a comparison would then read as drift.
    """
    options = dict(engine_options or {})
    if "dtype" not in options:
        checkpoint_dtype = _checkpoint_dtype(model_path)
        if checkpoint_dtype:
            options["dtype"] = checkpoint_dtype
    storage = os.path.abspath(storage_dir)
    os.makedirs(storage, exist_ok=True)
    request = {"model": os.fspath(model_path), "prompts": [list(map(int, p.token_ids)) for p in prompts],
               "layer_ids": [int(i) for i in layer_ids], "storage_dir": storage, "engine_kwargs": options}
    result = run_driver("vLLM", python, VLLM_DRIVER, request, os.path.join(storage, ".alignprobe-driver"),
                        timeout_s=timeout_s)
    paths = result.get("paths") or []
    version = str(result.get("vllm_version", ""))
    for prompt, path in zip(prompts, paths + [None] * (len(prompts) - len(paths))):
        if not path:
            raise EngineFailed(
                f"vLLM {version} wrote no hidden-state file for sample {prompt.sample_id!r}; check the connector config"
            )
    for path in paths:
        _wait_written(path, 60.0)
    return OfflineRun(list(paths), version, str(result.get("dtype", "")), options,
                      float(result.get("start_s", 0.0)), float(result.get("generate_s", 0.0)))


def _checkpoint_dtype(model_path: str) -> str:
    """The dtype the checkpoint's config.json names, "" when unknown: no readable config (missing,
    not a file, deep nesting, NaN...: the one safe reader's refusals), no such key, or another value."""
    try:
        config = local_config(model_path)
    except BadInput:
        return ""
    value = (config.get("torch_dtype") or config.get("dtype") or "") if config is not None else ""
    return value if isinstance(value, str) and value in ("float32", "bfloat16", "float16") else ""


def _hidden_states_path(response: httpx.Response, url: str, prompt: Prompt) -> str:
    if response.status_code >= 400:
        message = " ".join(response.text[:200].split())
        raise EngineFailed(f"vLLM server {url}: HTTP {response.status_code} for sample {prompt.sample_id!r}: {message}")
    body: Any = loads_json(response.content, f"{url}: the answer")
    params = body.get("kv_transfer_params") if isinstance(body, dict) else None
    path = params.get("hidden_states_path") if isinstance(params, dict) else None
    if not path or not isinstance(path, str):
        raise BadInput(
            f"{url}: the answer has no kv_transfer_params.hidden_states_path: launch vLLM with "
            "--speculative-config method extract_hidden_states and --kv-transfer-config ExampleHiddenStatesConnector"
        )
    if "\x00" in path:
        raise BadInput(f"{url}: kv_transfer_params.hidden_states_path holds a NUL byte, which no file name can hold")
    choices = body.get("choices")
    first = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    echoed = first.get("prompt_token_ids")
    if echoed is not None and not isinstance(echoed, list):
        raise BadInput(f"{url}: choices[0].prompt_token_ids is not a list of token ids")
    if echoed is not None and list(echoed) != list(prompt.token_ids):
        raise BadInput(f"{url}: the server tokenized sample {prompt.sample_id!r} differently from the ids sent")
    return str(path)


def _wait_written(path: str, wait_s: float) -> None:
    # the connector writes asynchronously; the file appears when its .lock is released
    deadline = time.monotonic() + wait_s
    while not os.path.exists(path) or is_locked(path):
        if time.monotonic() >= deadline:
            relative = "" if os.path.isabs(path) else (
                "; the server named a relative path, looked for from this folder: give the connector an absolute "
                "shared_storage_path")
            raise BadInput(f"{path}: not written within {wait_s:g} s (is the server's storage folder visible "
                           f"here?){relative}")
        time.sleep(0.05)
