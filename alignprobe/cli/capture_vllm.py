"""``alignprobe capture vllm``: read (or make a server write) vLLM extract_hidden_states files."""

from __future__ import annotations

import click

from alignprobe.cli.capture import capture, parse_layer_list
from alignprobe.cli.engine_args import parse_engine_args
from alignprobe.cli.options import NUM_LAYERS, SECONDS, dump_output_options


@capture.command("vllm")
@click.option("--from-dir", default=None, type=click.Path(),
              help="The ExampleHiddenStatesConnector's shared_storage_path, already filled.")
@click.option("--url", default=None, help="Or a running vLLM server to send the prompts to, e.g. http://127.0.0.1:8000.")
@click.option("--model", "served_model", default=None, help="With --url: the served model name.")
@click.option("--offline-model", default=None, type=click.Path(),
              help="Or run vllm.LLM on this model (in --engine-python; CPU or GPU).")
@click.option("--storage-dir", default=None, type=click.Path(), help="With --offline-model: where vLLM writes its files.")
@click.option("--layer-ids", required=True,
              help="The eagle_aux_hidden_state_layer_ids vLLM ran with (vLLM numbering), e.g. 2,30,58,61.")
@click.option("--num-layers", default=None, type=NUM_LAYERS, help="Target decoder layers N (or take it from --tokens-from).")
@click.option("--tokens-from", default=None, type=click.Path(),
              help="A dump of the same prompts, or a SpecForge / speculators folder (with --num-layers): files take its "
                   "sample ids by matching token ids.")
@click.option("--prompts", "prompts_path", default=None, type=click.Path(),
              help="With --url/--offline-model and no --tokens-from: a JSONL of input_ids lines.")
@dump_output_options
@click.option("--engine-python", default=None, type=click.Path(),
              help="With --offline-model: the Python of vLLM's venv [default: this one].")
@click.option("--dtype", default=None, help="With --offline-model: the dtype vLLM runs in [default: the checkpoint's].")
@click.option("--max-model-len", default=None, type=click.IntRange(min=1), help="With --offline-model: vLLM's max_model_len.")
@click.option("--enforce-eager", is_flag=True, help="With --offline-model: no torch.compile / graphs (starts faster).")
@click.option("--engine-arg", "engine_args", multiple=True, metavar="KEY=VALUE",
              help="With --offline-model: any other vllm.LLM keyword, e.g. seed=0 (repeatable).")
@click.option("--stream-role", default="auto", show_default=True,
              type=click.Choice(["auto", "drafter_input", "layers"]),
              help="drafter_input: aux + final streams; layers: one stack compared index by index "
                   "(auto: layers when every layer 1..N-1 is captured).")
@click.option("--last-layer", default="auto", show_default=True, type=click.Choice(["auto", "aux", "final"]),
              help="Where id N (the pre-norm final) goes: aux (one of the drafter's taps: vLLM's EAGLE-3 feeds every "
                   "id to fc), final (kept apart, speculators' --include-last-layer layout); auto: aux when the "
                   "--tokens-from dump's drafter input holds as many slices as there are ids.")
@click.option("--timeout", default=120.0, show_default=True, type=SECONDS, help="Seconds for one request, and for its file to appear (--url).")
def capture_vllm_command(from_dir, url, served_model, offline_model, storage_dir, layer_ids, num_layers, tokens_from,
                         prompts_path, out_path, engine_python, dtype, max_model_len, enforce_eager, engine_args,
                         stream_role, last_layer, timeout, resume, force, quiet) -> None:
    """Capture what vLLM's extract_hidden_states writes: [S, L, H] per request, split into aux and final."""
    from alignprobe.capture import capture_vllm
    from alignprobe.dump import open_dump
    from alignprobe.dump.marks import summary_line

    options = parse_engine_args(engine_args)
    options.update({k: v for k, v in (("dtype", dtype), ("max_model_len", max_model_len)) if v is not None})
    if enforce_eager:
        options["enforce_eager"] = True
    path = capture_vllm(out_path, layer_ids=parse_layer_list(layer_ids, "--layer-ids"), from_dir=from_dir, url=url,
                        served_model=served_model, offline_model=offline_model, storage_dir=storage_dir,
                        engine_python=engine_python, engine_options=options, tokens_from=tokens_from,
                        prompts_path=prompts_path, timeout=timeout, num_layers=num_layers, stream_role=stream_role, last_layer=last_layer,
                        resume=resume, overwrite=force, progress=not quiet)
    with open_dump(path) as dump:
        parts = ", ".join(f"{name} HF{list(c.hf_indices)}" for name, c in dump.streams.items())
        skipped = dump.provenance.capture.get("files_skipped_no_matching_prompt") or 0
        note = f"; skipped {skipped} files whose tokens match no prompt" if skipped else ""
        click.echo(f"wrote {path} ({dump.num_samples} samples): {parts}{note}")
        marked = summary_line(dump.sample_ids, dump.marks)
        if marked:
            short = len(dump.marks.short_indices())
            click.echo(marked + ("; for whole rows run vLLM with --no-enable-prefix-caching" if short else ""), err=True)

