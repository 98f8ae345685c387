"""``alignprobe capture llamacpp``: run a GGUF model through llama.cpp (llama-cpp-python) and keep its states."""

from __future__ import annotations

import click

from alignprobe.cli.options import dump_output_options

from alignprobe.cli.capture import capture, parse_layer_list


@capture.command("llamacpp")
@click.option("--model", "model", required=True, type=click.Path(), help="The target model as a .gguf file.")
@click.option("--tokens-from", default=None, type=click.Path(),
              help="A dump of the same prompts (e.g. the train capture): its sample ids and token ids are replayed.")
@click.option("--prompts", "prompts_path", default=None, type=click.Path(), help="Or a JSONL of input_ids lines.")
@dump_output_options
@click.option("--layer-ids", default=None,
              help="The drafter GGUF's eagle3.target_layers (eagle3.extract_layers in older files; llama.cpp numbering: "
                   "id k is the input of layer k, id n_layer the state before the final norm), e.g. 2,4,5: the aux stream.")
@click.option("--drafter", default=None, type=click.Path(),
              help="Instead of --layer-ids: the EAGLE-3 drafter GGUF; llama.cpp reads its ids (and their width) itself.")
@click.option("--layers", default="all", show_default=True, type=click.Choice(["all", "aux"]),
              help="all: every layer's input too; aux: only what --layer-ids needs (a large model's every layer is big).")
@click.option("--engine-python", default=None, type=click.Path(),
              help="The Python of the venv llama-cpp-python is installed in [default: this one].")
@click.option("--threads", default=None, type=click.IntRange(min=1), help="llama.cpp's CPU threads [default: all cores].")
@click.option("--cache-type", default="f16", show_default=True, type=click.Choice(["f16", "f32", "bf16", "q8_0"]),
              help="The KV cache's type, as llama-server's --cache-type-k/-v (its default f16).")
@click.option("--flash-attn", default="auto", show_default=True, type=click.Choice(["auto", "on", "off"]),
              help="As llama-server's --flash-attn; with an F32 GGUF, --cache-type f32 --flash-attn off is float32 end to end.")
@click.option("--limit", default=None, type=click.IntRange(min=1), help="Capture only the first N prompts.")
def capture_llamacpp_command(model, tokens_from, prompts_path, out_path, layer_ids, drafter, layers, engine_python, threads,
                             cache_type, flash_attn, limit, resume, force, quiet) -> None:
    """Capture what llama.cpp computes for a GGUF model: every layer's input, both finals, the drafter's taps."""
    from alignprobe.capture import capture_llamacpp
    from alignprobe.dump import open_dump

    ids = parse_layer_list(layer_ids, "--layer-ids", ())
    path = capture_llamacpp(out_path, model=model, tokens_from=tokens_from, prompts_path=prompts_path, layer_ids=ids,
                            drafter=drafter, engine_python=engine_python, limit=limit, layers=layers, threads=threads,
                            cache_type=cache_type, flash_attn=flash_attn, resume=resume, overwrite=force,
                            progress=not quiet)
    with open_dump(path) as dump:
        parts = ", ".join(f"{name} HF{list(c.hf_indices)}" for name, c in dump.streams.items())
        click.echo(f"wrote {path} ({dump.num_samples} samples): {parts}")
