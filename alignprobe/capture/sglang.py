"""``capture_sglang``: what SGLang feeds the drafter, from a running server or an offline ``sglang.Engine``.

    url             a running SGLang server (launched with --enable-return-hidden-states), sent the prompts
    engine_model    sglang.Engine run offline on this model folder in SGLang's own Python (engine_python)

The prompts come from ``tokens_from`` (a dump of the same prompts, whose sample ids the dump takes)
or ``prompts_path`` (a JSONL of input_ids). SGLang reports the aux ids it ran with, so ``layer_ids``
is needed only where it cannot: the model's defaults with a drafter whose config is not local.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

from alignprobe.errors import BadInput


def capture_sglang(
    out_path: str | os.PathLike,
    *,
    url: str | None = None,
    engine_model: str | os.PathLike | None = None,
    engine_python: str | os.PathLike | None = None,
    engine_options: Mapping[str, Any] | None = None,
    tokens_from: str | os.PathLike | None = None,
    prompts_path: str | os.PathLike | None = None,
    layer_ids: Sequence[int] | None = None,
    timeout: float = 120.0,
    retries: int = 3,
    in_flight: int | None = None,
    **capture_options: Any,
) -> str:
    """Capture from one SGLang source into ``out_path``; returns its path.

    ``engine_options`` go to ``sglang.Engine(...)`` as given (device, dtype, attention_backend,
    enable_return_aux_hidden_states, any keyword); ``timeout``, ``retries`` and ``in_flight`` are the
    server's (one request, its retries, requests kept in flight); ``capture_options`` go to
    :func:`alignprobe.probes.sglang_capture.capture_from_backend` (num_layers, hidden_size, arch,
    max_new_tokens, sglang_first_id_rule, resume, overwrite, progress)."""
    from alignprobe.safe_paths import input_file, input_path, output_file, refuse_overlap

    one_of = "give exactly one of --url (a running server) or --engine-model (offline sglang.Engine)"
    if url is not None and engine_model is not None:
        raise BadInput(one_of)
    given = [path for path in (tokens_from, prompts_path) if path is not None]
    if len(given) != 1:
        raise BadInput("give exactly one of --tokens-from DUMP or --prompts JSONL")
    prompts = given[0]
    refuse_overlap({"--out": output_file(out_path, "--out")},
                   {"--tokens-from": tokens_from and input_path(tokens_from, "dump or training-set folder"),
                    "--prompts": prompts_path and input_file(prompts_path, "prompt file"), "--engine-model": engine_model})
    ids = None if layer_ids is None else list(layer_ids)
    if url is not None:
        from alignprobe.probes.sglang_http import capture_sglang as capture_http

        if engine_python or engine_options:
            raise BadInput("--engine-python and --engine-arg go with --engine-model, not --url")
        server: dict[str, Any] = {"in_flight": in_flight} if in_flight is not None else {}
        return capture_http(url, prompts, out_path, timeout=timeout, retries=retries, layer_ids=ids, **server,
                            **capture_options)
    if engine_model is None:
        raise BadInput(one_of)
    from alignprobe.probes.sglang_engine import capture_sglang_engine

    # the engine's start is not one request: it keeps the driver's own limit, not ``timeout``
    return capture_sglang_engine(engine_model, prompts, out_path, python=os.fspath(engine_python) if engine_python else None,
                                 engine_kwargs=dict(engine_options or {}), layer_ids=ids, **capture_options)
