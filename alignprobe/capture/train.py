"""``capture_train``: the training extractor's view, from a local transformers model folder and a prompts file."""

from __future__ import annotations

import os
from typing import Any

from alignprobe.errors import BadInput


def capture_train(
    model_dir: str | os.PathLike,
    prompts_path: str | os.PathLike,
    out_path: str | os.PathLike,
    *,
    dtype: str = "bf16",
    device: str | None = "cpu",
    device_map: str | None = None,
    max_memory: str | None = None,
    offload_folder: str | os.PathLike | None = None,
    trust_remote_code: bool = False,
    limit: int | None = None,
    simulate_quant: str | None = None,
    group_size: int = 128,
    quiet: bool = False,
    **capture_options: Any,
) -> str:
    """Load the model, read the prompts (text, chat messages or token ids), capture; returns the dump's path.

    ``device_map`` / ``max_memory`` (``"0=120GiB,cpu=400GiB"``) / ``offload_folder`` place a model too
    large for one GPU over this host's GPUs and memory (``load_hf_model``); ``device`` is then ignored.
    ``simulate_quant`` (int4, int8, fp8) fake-quantizes the decoder weights first, as quantized serving
    would; ``capture_options`` go to :func:`alignprobe.probes.hf.capture_hf` (layers, aux_layers,
    batch_size, padding_side, shard_tokens, resume, overwrite, progress)."""
    from alignprobe.probes.hf import capture_hf, load_hf_model, parse_max_memory
    from alignprobe.probes.prompts import load_prompts
    from alignprobe.safe_paths import input_file, output_file, refuse_overlap

    refuse_overlap({"--out": output_file(out_path, "--out")},
                   {"--model": model_dir, "--prompts": input_file(prompts_path, "prompt file")})
    placement: dict[str, Any] = {"device": device}
    if device_map is not None:
        placement = {"device_map": device_map, "max_memory": parse_max_memory(max_memory), "offload_folder": offload_folder}
    elif max_memory or offload_folder:
        raise BadInput("--max-memory and --offload-folder need --device-map")
    model, tokenizer = load_hf_model(model_dir, dtype=dtype, trust_remote_code=trust_remote_code, quiet=quiet,
                                     **placement)
    prompt_set = load_prompts(prompts_path, tokenizer, limit=limit)
    if simulate_quant:
        from alignprobe.quant import simulate_weight_quant

        simulate_weight_quant(model, simulate_quant, group_size=group_size)
    return capture_hf(model, prompt_set.prompts, out_path,
                      provenance={"model": os.fspath(model_dir), "capture": prompt_set.provenance()}, **capture_options)
