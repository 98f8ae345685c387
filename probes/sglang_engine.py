"""The SGLang probe without a server: ``sglang.Engine`` in this process (when sglang is installed).

``sgl.Engine(model_path=..., enable_return_hidden_states=True, ...)`` then ``engine.generate(
input_ids=..., sampling_params=..., return_hidden_states=True)`` answers the same dicts as
``/generate`` (sgl-project/sglang examples/runtime/engine/hidden_states.py), and
``engine.get_server_info()`` the same facts as ``/server_info``. The engine is started with the
radix cache off and chunked prefill off, so every prompt's rows come back whole.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

from alignprobe.engine_errors import engine_failure
from alignprobe.errors import BadInput
from alignprobe.probes.prompts import Prompt
from alignprobe.probes.sglang_capture import capture_from_backend
from alignprobe.probes.sglang_facts import ServerFacts

# What a capture needs from the engine; the caller's engine_kwargs may add the speculative settings.
ENGINE_DEFAULTS = {"enable_return_hidden_states": True, "disable_radix_cache": True, "chunked_prefill_size": -1}


class EngineBackend:
    """An ``sglang.Engine`` (or anything with its ``generate`` and ``get_server_info``)."""

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


def capture_sglang_engine(
    model_path: str | os.PathLike,
    prompts: Sequence[Prompt] | str | os.PathLike,
    out_path: str | os.PathLike,
    *,
    engine_kwargs: Mapping[str, Any] | None = None,
    **capture_options,
) -> str:
    """Start ``sglang.Engine`` on ``model_path`` and capture ``prompts`` through it (see capture_sglang)."""
    try:
        import sglang
    except ImportError:
        raise BadInput("the offline mode needs sglang (pip install sglang); or capture from a server with --url") from None
    kwargs = {**ENGINE_DEFAULTS, **dict(engine_kwargs or {})}
    with engine_failure("SGLang", f"starting sglang.Engine on {os.fspath(model_path)}"):
        engine = sglang.Engine(model_path=os.fspath(model_path), **kwargs)
    try:
        backend = EngineBackend(engine, f"sglang.Engine({os.fspath(model_path)})")
        return capture_from_backend(backend, prompts, out_path, capture_settings={"engine_kwargs": kwargs},
                                    **capture_options)
    finally:
        engine.shutdown()
