"""``capture_train``: the training extractor's view, from a local transformers model folder and a prompts file."""

from __future__ import annotations

import os
from typing import Any


def capture_train(
    model_dir: str | os.PathLike,
    prompts_path: str | os.PathLike,
    out_path: str | os.PathLike,
    *,
    dtype: str = "bf16",
    device: str = "cpu",
    trust_remote_code: bool = False,
    limit: int | None = None,
    simulate_quant: str | None = None,
    group_size: int = 128,
    quiet: bool = False,
    **capture_options: Any,
) -> str:
    """Load the model, read the prompts (text, chat messages or token ids), capture; returns the dump's path.

    ``simulate_quant`` (int4, int8, fp8) fake-quantizes the decoder weights first, as quantized serving
    would; ``capture_options`` go to :func:`alignprobe.probes.hf.capture_hf` (layers, aux_layers,
    batch_size, padding_side, shard_tokens, resume, overwrite, progress)."""
    from alignprobe.probes.hf import capture_hf, load_hf_model
    from alignprobe.probes.prompts import load_prompts
    from alignprobe.safe_paths import input_file, output_file, refuse_overlap

    refuse_overlap({"--out": output_file(out_path, "--out")},
                   {"--model": model_dir, "--prompts": input_file(prompts_path, "prompt file")})
    model, tokenizer = load_hf_model(model_dir, dtype=dtype, device=device, trust_remote_code=trust_remote_code,
                                     quiet=quiet)
    prompt_set = load_prompts(prompts_path, tokenizer, limit=limit)
    if simulate_quant:
        from alignprobe.quant import simulate_weight_quant

        simulate_weight_quant(model, simulate_quant, group_size=group_size)
    return capture_hf(model, prompt_set.prompts, out_path,
                      provenance={"model": os.fspath(model_dir), "capture": prompt_set.provenance()}, **capture_options)
