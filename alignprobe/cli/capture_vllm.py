"""``alignprobe capture vllm``: read (or make a server write) vLLM extract_hidden_states files."""

from __future__ import annotations

import click

from alignprobe.cli.capture import capture, parse_layer_list
from alignprobe.cli.engine_args import parse_engine_args
from alignprobe.cli.options import NUM_LAYERS, SECONDS
from alignprobe.errors import BadInput
from alignprobe.safe_paths import input_dir, input_file, output_file, refuse_overlap


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
              help="A dump of the same prompts: files take its sample ids by matching token ids.")
@click.option("--prompts", "prompts_path", default=None, type=click.Path(),
              help="With --url/--offline-model and no --tokens-from: a JSONL of input_ids lines.")
@click.option("--out", "out_path", required=True, type=click.Path(), help="Dump to write (HDF5).")
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
@click.option("--timeout", default=120.0, show_default=True, type=SECONDS, help="Seconds for one request, and for its file to appear (--url).")
@click.option("--resume", is_flag=True, help="Continue an interrupted capture into the same --out.")
@click.option("--force", is_flag=True, help="Replace --out if it exists.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def capture_vllm_command(from_dir, url, served_model, offline_model, storage_dir, layer_ids, num_layers, tokens_from,
                         prompts_path, out_path, engine_python, dtype, max_model_len, enforce_eager, engine_args,
                         stream_role, timeout, resume, force, quiet) -> None:
    """Capture what vLLM's extract_hidden_states writes: [S, L, H] per request, split into aux and final."""
    from alignprobe.dump import open_dump
    from alignprobe.dump.marks import summary_line
    from alignprobe.probes.vllm_files import capture_vllm_files

    if sum(x is not None for x in (from_dir, url, offline_model)) != 1:
        raise BadInput("give exactly one of --from-dir, --url or --offline-model")
    refuse_overlap({"--out": output_file(out_path, "--out")},
                   {"--from-dir": from_dir and input_dir(from_dir, "connector folder"),
                    "--tokens-from": tokens_from and input_file(tokens_from, "dump"),
                    "--prompts": prompts_path and input_file(prompts_path, "prompt file"),
                    "--offline-model": offline_model, "--storage-dir": storage_dir})
    ids = parse_layer_list(layer_ids, "--layer-ids")
    if isinstance(ids, str) or not ids:
        raise BadInput("--layer-ids takes the ids vLLM ran with, e.g. 2,30,58,61")
    options = parse_engine_args(engine_args)
    options.update({k: v for k, v in (("dtype", dtype), ("max_model_len", max_model_len)) if v is not None})
    if enforce_eager:
        options["enforce_eager"] = True
    if offline_model is None and (options or engine_python):
        raise BadInput("--engine-python, --dtype, --max-model-len, --enforce-eager and --engine-arg go with --offline-model")
    source, prompts, provenance = from_dir, None, None
    if from_dir is None:
        prompts = _prompts(tokens_from, prompts_path)
        if url is not None:
            from alignprobe.probes.vllm_drive import request_files

            if not served_model:
                raise BadInput("--url needs --model, the name the server serves the model under")
            source = request_files(url, served_model, prompts, timeout=timeout)
        else:
            from alignprobe.probes.vllm_drive import generate_offline

            if not storage_dir:
                raise BadInput("--offline-model needs --storage-dir, where vLLM writes its files")
            run = generate_offline(offline_model, prompts, ids, storage_dir, python=engine_python, engine_options=options)
            source = run.paths
            provenance = {"model": offline_model, "dtype": run.dtype, "engine_version": run.vllm_version,
                          "capture": {"engine_options": run.engine_options, "engine_start_s": round(run.start_s, 2),
                                      "engine_generate_s": round(run.generate_s, 3)}}
        if url is not None:
            provenance = {"model": served_model, "capture": {"server": url}}
    path = capture_vllm_files(source, out_path, layer_ids=ids, num_layers=num_layers, tokens_from=tokens_from,
                              prompts=prompts, stream_role=stream_role, resume=resume, overwrite=force,
                              progress=not quiet, provenance=provenance)
    with open_dump(path) as dump:
        parts = ", ".join(f"{name} HF{list(c.hf_indices)}" for name, c in dump.streams.items())
        skipped = dump.provenance.capture.get("files_skipped_no_matching_prompt") or 0
        note = f"; skipped {skipped} files whose tokens match no prompt" if skipped else ""
        click.echo(f"wrote {path} ({dump.num_samples} samples): {parts}{note}")
        marked = summary_line(dump.sample_ids, dump.marks)
        if marked:
            short = len(dump.marks.short_indices())
            click.echo(marked + ("; for whole rows run vLLM with --no-enable-prefix-caching" if short else ""), err=True)


def _prompts(tokens_from, prompts_path):
    if (tokens_from is None) == (prompts_path is None):
        raise BadInput("give exactly one of --tokens-from DUMP or --prompts JSONL for the prompts to send")
    if tokens_from is not None:
        from alignprobe.probes.dump_prompts import prompts_from_dump

        return prompts_from_dump(tokens_from).prompts
    from alignprobe.probes.prompts import load_prompts

    return load_prompts(prompts_path).prompts
