"""Make vLLM write hidden-state files for a prompt set: a running server, or an offline ``LLM``.

Read from vllm-project/speculators src/speculators/data_generation/vllm_client.py (commit
c05b95b3): ``POST /v1/completions`` with ``prompt`` = the token ids, ``max_tokens: 1`` and
``return_token_ids: true``; the answer's ``choices[0].prompt_token_ids`` echoes the prompt and its
top-level ``kv_transfer_params.hidden_states_path`` names the file the connector writes (vLLM
example_hidden_states_connector.py ``request_finished``). The server must run the
``extract_hidden_states`` method with ``ExampleHiddenStatesConnector`` (see
:func:`server_flags`), on this machine or a shared filesystem, since the files are read from disk.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Sequence

import httpx

from alignprobe.engine_errors import engine_failure
from alignprobe.errors import BadInput
from alignprobe.probes.http_request import checked_url, whole_request
from alignprobe.safe_json import loads_json
from alignprobe.probes.prompts import Prompt
from alignprobe.probes.vllm_files import is_locked


def server_flags(layer_ids: Sequence[int], storage_dir: str) -> list[str]:
    """The ``vllm serve`` flags that make a server write the files this probe reads."""
    speculative = {
        "method": "extract_hidden_states",
        "num_speculative_tokens": 1,
        "draft_model_config": {"hf_config": {"eagle_aux_hidden_state_layer_ids": [int(i) for i in layer_ids]}},
    }
    transfer = {
        "kv_connector": "ExampleHiddenStatesConnector",
        "kv_role": "kv_producer",
        "kv_connector_extra_config": {"shared_storage_path": storage_dir},
    }
    return ["--speculative-config", json.dumps(speculative), "--kv-transfer-config", json.dumps(transfer)]


def request_files(
    base_url: str,
    model: str,
    prompts: Sequence[Prompt],
    *,
    client: httpx.Client | None = None,
    timeout: float = 120.0,
    lock_wait_s: float = 60.0,
) -> list[str]:
    """Send each prompt to a vLLM server; returns the hidden-state file of each, in prompt order."""
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
            except httpx.TimeoutException:
                raise BadInput(f"{url}: no answer within {timeout:g} s; raise --timeout") from None
            except httpx.TransportError as exc:
                raise BadInput(f"{url}: cannot reach the vLLM server ({type(exc).__name__}); is it running?") from None
            except httpx.HTTPError as exc:
                raise BadInput(f"{url}: the server's answer is malformed ({type(exc).__name__})") from None
            paths.append(_hidden_states_path(response, url, prompt))
    finally:
        if own:
            client.close()
    for path in paths:
        _wait_written(path, lock_wait_s)
    return paths


def generate_offline(
    model_path: str,
    prompts: Sequence[Prompt],
    layer_ids: Sequence[int],
    storage_dir: str,
    **llm_kwargs,
) -> list[str]:
    """Run ``vllm.LLM`` with extract_hidden_states in this process (needs vllm and a GPU)."""
    try:
        from vllm import LLM, SamplingParams
    except ImportError:
        raise BadInput("the offline vLLM mode needs vllm installed; or point --from-dir at files a server wrote") from None
    flags = server_flags(layer_ids, storage_dir)
    with engine_failure("vLLM", f"starting vllm.LLM on {model_path}"):
        llm = LLM(
            model=model_path,
            speculative_config=json.loads(flags[1]),
            kv_transfer_config=json.loads(flags[3]),
            **llm_kwargs,
        )
    with engine_failure("vLLM", "generating"):
        outputs = llm.generate([{"prompt_token_ids": p.token_ids} for p in prompts], SamplingParams(max_tokens=1))
    paths = []
    for prompt, output in zip(prompts, outputs):
        params = getattr(output, "kv_transfer_params", None) or {}
        if "hidden_states_path" not in params:
            raise BadInput(f"vLLM wrote no hidden-state file for sample {prompt.sample_id!r}; check the connector config")
        paths.append(params["hidden_states_path"])
    for path in paths:
        _wait_written(path, 60.0)
    return paths


def _hidden_states_path(response: httpx.Response, url: str, prompt: Prompt) -> str:
    if response.status_code >= 400:
        raise BadInput(f"{url}: HTTP {response.status_code} for sample {prompt.sample_id!r}: {response.text[:200]}")
    body: Any = loads_json(response.content, f"{url}: the answer")
    params = body.get("kv_transfer_params") if isinstance(body, dict) else None
    path = params.get("hidden_states_path") if isinstance(params, dict) else None
    if not path or not isinstance(path, str):
        raise BadInput(
            f"{url}: the answer has no kv_transfer_params.hidden_states_path: launch vLLM with "
            "--speculative-config method extract_hidden_states and --kv-transfer-config ExampleHiddenStatesConnector"
        )
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
            raise BadInput(f"{path}: not written within {wait_s:g} s (is the server's storage folder visible here?)")
        time.sleep(0.05)
