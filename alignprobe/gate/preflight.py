"""What the gate checks before it captures anything: every input it can check without a capture.

The train side of a real model takes minutes to hours; a serve URL that is down, or a venv without
vLLM, must be one line before that, not after it. Checked: the model folder (config.json and its
layer count), the prompts file, and the serve source (a server answering /health, the connector
folder, or the offline model's folder and a Python that has the engine).
"""

from __future__ import annotations

from alignprobe.errors import BadInput
from alignprobe.gate.config import GateConfig

HEALTH_TIMEOUT_S = 10.0  # a ready server answers /health in milliseconds; a slow one still gets --timeout later


def check_inputs(config: GateConfig) -> None:
    from alignprobe.probes.hf import local_model_dir
    from alignprobe.safe_paths import input_dir, input_file

    _named("train.model", local_model_dir, config.train.model)
    _named("train.prompts", input_file, config.train.prompts, "prompt file")
    serve = config.serve
    source = serve.source
    if source in ("sglang_url", "vllm_url"):
        from alignprobe.probes.http_request import check_health

        engine = "SGLang" if source == "sglang_url" else "vLLM"
        _named(f"serve.{source}", check_health, getattr(serve, source), engine, min(HEALTH_TIMEOUT_S, serve.timeout))
    elif source == "vllm_dir":
        _named("serve.vllm_dir", input_dir, serve.vllm_dir, "connector folder")
    else:
        from alignprobe.probes.engine_process import check_engine_python

        engine, module = ("SGLang", "sglang") if source == "sglang_offline_model" else ("vLLM", "vllm")
        _named(f"serve.{source}", local_model_dir, getattr(serve, source))
        _named("serve.engine_python", check_engine_python, engine, serve.engine_python, module)


def _named(key: str, check, *args) -> None:
    """The check's own line, prefixed with the config key (or flag) it is about."""
    try:
        check(*args)
    except BadInput as exc:
        raise type(exc)(f"gate: {key}: {exc}") from None
