"""``capture_llamacpp``: a GGUF model run through llama.cpp (llama-cpp-python) in llama.cpp's own Python.

The prompts come from ``tokens_from`` (a dump of the same prompts, whose sample ids the dump takes)
or ``prompts_path`` (a JSONL of input_ids: llama.cpp's tokenizer is not asked, so both sides see the
same tokens).
"""

from __future__ import annotations

import os
from typing import Any, Sequence

from alignprobe.errors import BadInput


def capture_llamacpp(
    out_path: str | os.PathLike,
    *,
    model: str | os.PathLike,
    tokens_from: str | os.PathLike | None = None,
    prompts_path: str | os.PathLike | None = None,
    layer_ids: Sequence[int] | None = None,
    drafter: str | os.PathLike | None = None,
    engine_python: str | os.PathLike | None = None,
    limit: int | None = None,
    **capture_options: Any,
) -> str:
    """Capture ``model`` (a .gguf file) into ``out_path``; returns its path. The drafter's ids: ``layer_ids``
    (llama.cpp's numbering) or ``drafter``, its GGUF, whose ids llama.cpp reads. ``capture_options`` go to
    :func:`alignprobe.probes.llamacpp.capture_llamacpp` (layers, threads, cache_type, flash_attn, resume,
    overwrite, progress)."""
    from alignprobe.probes.llamacpp import capture_llamacpp as capture
    from alignprobe.safe_paths import input_file, input_path, output_file, refuse_overlap

    if (tokens_from is None) == (prompts_path is None):
        raise BadInput("give exactly one of --tokens-from DUMP or --prompts JSONL")
    gguf = input_file(model, "GGUF model")
    draft = input_file(drafter, "drafter GGUF") if drafter is not None else None
    refuse_overlap({"--out": output_file(out_path, "--out")},
                   {"--model": gguf, "--drafter": draft, "--tokens-from": tokens_from and input_path(tokens_from, "dump or training-set folder"),
                    "--prompts": prompts_path and input_file(prompts_path, "prompt file")})
    for path in (gguf, draft):
        if path is not None:
            _gguf_or_refuse(path)
    if tokens_from is not None:
        from alignprobe.probes.dump_prompts import prompts_from_dump

        prompts = prompts_from_dump(tokens_from, limit=limit).prompts
    elif prompts_path is not None:  # the one left: exactly one was given (checked above)
        from alignprobe.probes.prompts import load_prompts

        prompts = load_prompts(prompts_path, limit=limit).prompts
    return capture(gguf, prompts, out_path, layer_ids=layer_ids, drafter=draft,
                   python=os.fspath(engine_python) if engine_python else None, **capture_options)


def _gguf_or_refuse(path: str) -> None:
    with open(path, "rb") as fh:
        if fh.read(4) != b"GGUF":
            raise BadInput(f"{path}: not a GGUF file (it does not start with GGUF); convert the model with "
                           "llama.cpp's convert_hf_to_gguf.py")
