"""The SGLang probe without a server: an offline ``sglang.Engine``, run in SGLang's own Python.

``sgl.Engine(model_path=..., enable_return_hidden_states=True, ...)`` then ``engine.generate(
input_ids=..., sampling_params=..., return_hidden_states=True)`` answers the same dicts as
``/generate`` (sgl-project/sglang examples/runtime/engine/hidden_states.py), and
``engine.get_server_info()`` the same facts as ``/server_info``. SGLang pins its own torch, so the
engine runs in a subprocess under ``python`` (its venv; this interpreter by default) through
probes/engine_side/alignprobe_sglang_driver.py, which writes each prompt's prefill rows as float32
``.npy``; the capture loop then reads them like HTTP answers. The engine starts with the radix
cache off and chunked prefill off, so every prompt's rows come back whole.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from typing import Any, Mapping, Sequence

import numpy as np

from alignprobe.probes.engine_process import DEFAULT_TIMEOUT_S, run_driver
from alignprobe.probes.engine_side import SGLANG_DRIVER
from alignprobe.engine_errors import EngineFailed, engine_failure
from alignprobe.probes.prompts import Prompt
from alignprobe.probes.sglang_capture import DEFAULT_MAX_NEW_TOKENS, capture_from_backend, resolve_prompts
from alignprobe.probes.sglang_facts import ServerFacts

# What a capture needs from the engine; the caller's engine options may add the speculative settings.
ENGINE_DEFAULTS = {"enable_return_hidden_states": True, "disable_radix_cache": True, "chunked_prefill_size": -1}

# numpy reads a .npy header with ast.literal_eval, and CPython 3.11 keeps one AST recursion counter
# per interpreter: two threads parsing at once can fail with "SystemError: AST constructor recursion
# depth mismatch" (it did, in CI). The capture loop asks for answers from several threads, so the
# loads take turns (each is one small local file: the turns cost nothing measurable).
_NPY_LOAD = threading.Lock()


class EngineBackend:
    """An ``sglang.Engine`` in this process (or anything with its ``generate`` and ``get_server_info``)."""

    def __init__(self, engine, where: str = "sglang.Engine"):
        self.engine = engine
        self.where = where

    def server_info(self) -> ServerFacts:
        with engine_failure("SGLang", "answering get_server_info"):
            info = self.engine.get_server_info()
        return ServerFacts.from_info(dict(info) if isinstance(info, Mapping) else {}, "Engine.get_server_info")

    def generate(self, token_ids: list[int], max_new_tokens: int) -> Any:
        with engine_failure("SGLang", "generating"):
            return self.engine.generate(
                input_ids=[int(t) for t in token_ids],
                sampling_params={"max_new_tokens": max_new_tokens, "temperature": 0.0},
                return_hidden_states=True,
            )


class DriverBackend:
    """The answers of one driver run, served to the capture loop as if it asked for them one by one."""

    def __init__(self, result: Mapping[str, Any], prompts: Sequence[Prompt], where: str):
        self.where = where
        self._info = result.get("server_info") or {}
        files, cached = result.get("files") or [], result.get("cached_tokens") or []
        self._answers: dict[tuple[int, ...], tuple[str | None, Any]] = {}
        for i, prompt in enumerate(prompts):
            path = files[i] if i < len(files) else None
            self._answers.setdefault(tuple(prompt.token_ids), (path, cached[i] if i < len(cached) else None))

    def server_info(self) -> ServerFacts:
        return ServerFacts.from_info(dict(self._info), "Engine.get_server_info")

    def generate(self, token_ids: list[int], max_new_tokens: int) -> Any:
        answer = self._answers.get(tuple(token_ids))
        if answer is None:
            raise EngineFailed(f"{self.where} answered fewer prompts than it was sent")
        path, cached = answer
        with _NPY_LOAD:
            states = [] if path is None else [np.load(path)]
        return {"meta_info": {"hidden_states": states, "cached_tokens": cached}}


def capture_sglang_engine(
    model_path: str | os.PathLike,
    prompts: Sequence[Prompt] | str | os.PathLike,
    out_path: str | os.PathLike,
    *,
    engine_kwargs: Mapping[str, Any] | None = None,
    python: str | None = None,
    env: Mapping[str, str] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
    batch_size: int = 8,
    **capture_options,
) -> str:
    """Start ``sglang.Engine`` on ``model_path`` under ``python`` and capture ``prompts`` (see capture_sglang).

    ``engine_kwargs`` go to ``sglang.Engine(...)`` as given (e.g. ``device="cpu"``, ``dtype``,
    ``enable_return_aux_hidden_states``); ``env`` is added to the engine's environment (on a CPU
    machine: ``SGLANG_USE_CPU_ENGINE=1`` and the libcuda stub on LD_LIBRARY_PATH, .ci/engines/).
    """
    kwargs = {**ENGINE_DEFAULTS, **dict(engine_kwargs or {})}
    source = resolve_prompts(prompts, capture_options.get("num_layers"))
    work = tempfile.mkdtemp(prefix="alignprobe-sglang-")  # kept when the engine fails: its log is there
    request = {"model": os.fspath(model_path), "prompts": [list(map(int, p.token_ids)) for p in source.prompts],
               "engine_kwargs": kwargs, "out_dir": os.path.join(work, "rows"), "max_new_tokens": max_new_tokens,
               "batch_size": batch_size}
    result = run_driver("SGLang", python, SGLANG_DRIVER, request, work, timeout_s=timeout_s, env=env)
    try:
        where = f"sglang.Engine {result.get('sglang_version', '')} ({os.fspath(model_path)})"
        backend = DriverBackend(result, source.prompts, where)
        settings = {"engine_kwargs": kwargs, "engine_start_s": result.get("start_s"),
                    "engine_generate_s": result.get("generate_s")}
        return capture_from_backend(backend, source, out_path, capture_settings=settings,
                                    max_new_tokens=max_new_tokens, **capture_options)
    finally:
        shutil.rmtree(work, ignore_errors=True)
