"""``alignprobe capture <backend>``: the group, and its ``hf`` subcommand.

Each capture backend's subcommand lives in its own file (``capture_sglang.py``, ...), attaches
itself with ``@capture.command("name")`` and is imported in ``main._register``; this file needs
no change for a new backend.
"""

from __future__ import annotations

import click

from alignprobe.cli.options import dump_output_options

from alignprobe.layer_ids import parse_layer_list


@click.group()
def capture() -> None:
    """Capture hidden states of a prompt set into a dump, the way one system sees them."""


@capture.command("hf")
@click.option("--model", "model_dir", required=True, type=click.Path(), help="Local transformers model directory.")
@click.option("--prompts", "prompts_path", required=True, type=click.Path(), help="JSONL: text, messages or input_ids.")
@dump_output_options
@click.option("--dtype", default="bf16", show_default=True, help="bf16, fp16 or fp32: the dtype the model runs in.")
@click.option("--device", default="cpu", show_default=True, help="cpu, cuda or cuda:N.")
@click.option("--device-map", default=None, type=click.Choice(["auto", "balanced", "balanced_low_0", "sequential", "cpu"]),
              help="Spread a model too big for one GPU over this host's GPUs (accelerate); replaces --device.")
@click.option("--max-memory", default=None,
              help="With --device-map: the most each device holds, e.g. 0=120GiB,1=120GiB,cpu=400GiB (the rest offloads).")
@click.option("--offload-folder", default=None, type=click.Path(),
              help="With --device-map: where weights that fit neither GPUs nor --max-memory's cpu go.")
@click.option("--layers", default="all", show_default=True,
              help="all, eagle3, or HF indices like 2,30,58 (eagle3: no layers stream, eagle3_aux holds them).")
@click.option("--aux-layers", default=None, help="HF indices of the EAGLE-3 training view [default: 2,N//2,N-3].")
@click.option("--aux-final-norm", default="post", show_default=True, type=click.Choice(["post", "pre"]),
              help="HF[N] in --aux-layers: after the final norm (transformers, SGLang) or before it (vLLM's id N, "
                   "speculators): what the drafter was trained on.")
@click.option("--batch-size", default=8, show_default=True, type=click.IntRange(min=1))
@click.option("--padding-side", default="right", show_default=True, type=click.Choice(["right", "left"]))
@click.option("--simulate-quant", default=None, type=click.Choice(["int4", "int8", "fp8"]),
              help="Fake-quantize the decoder weights first (weight-only RTN: approximates INT4/FP8 serving).")
@click.option("--group-size", default=128, show_default=True, type=click.IntRange(min=1), help="Input columns per scale for int4/int8.")
@click.option("--limit", default=None, type=click.IntRange(min=1), help="Capture only the first N prompts.")
@click.option("--shard-tokens", default=16384, show_default=True, type=click.IntRange(min=1),
              help="Tokens captured between two durable checkpoints: the most a crash loses before --resume.")
@click.option("--trust-remote-code", is_flag=True, help="Run the model directory's own modeling code (Kimi).")
def capture_hf_command(model_dir, prompts_path, out_path, dtype, device, device_map, max_memory, offload_folder, layers,
                       aux_layers, aux_final_norm, batch_size, padding_side,
                       simulate_quant, group_size, limit, shard_tokens, resume, force, trust_remote_code, quiet) -> None:
    """Capture with transformers, as a training extractor does (all HF indices by default)."""
    from alignprobe.capture import capture_train
    from alignprobe.dump import open_dump

    path = capture_train(
        model_dir, prompts_path, out_path, dtype=dtype, device=None if device_map else device, device_map=device_map,
        max_memory=max_memory, offload_folder=offload_folder, trust_remote_code=trust_remote_code,
        limit=limit, simulate_quant=simulate_quant, group_size=group_size, quiet=quiet,
        layers=parse_layer_list(layers, "--layers"), aux_layers=parse_layer_list(aux_layers, "--aux-layers"),
        aux_final_norm=aux_final_norm, batch_size=batch_size, padding_side=padding_side, resume=resume, overwrite=force, progress=not quiet,
        shard_tokens=shard_tokens,
    )
    with open_dump(path) as dump:
        click.echo(f"wrote {path} ({dump.num_samples} samples)")
