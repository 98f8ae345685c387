"""``alignprobe capture sglang``: capture from a running SGLang server (or an offline sglang.Engine)."""

from __future__ import annotations

import click

from alignprobe.cli.capture import capture, parse_layer_list
from alignprobe.cli.options import NUM_LAYERS, SECONDS, dump_output_options
from alignprobe.errors import BadInput


@capture.command("sglang")
@click.option("--url", default=None, help="The server, e.g. http://127.0.0.1:30000.")
@click.option("--engine-model", default=None, type=click.Path(),
              help="Instead of --url: run sglang.Engine offline on this model (needs sglang installed).")
@click.option("--tokens-from", default=None, type=click.Path(),
              help="A dump (e.g. the train capture) or a SpecForge / speculators folder whose sample ids and token ids to replay "
                   "(a folder needs --num-layers).")
@click.option("--prompts", "prompts_path", default=None, type=click.Path(), help="Or a JSONL of input_ids lines.")
@dump_output_options
@click.option("--layer-ids", default=None,
              help="The drafter's eagle_aux_hidden_state_layer_ids (SGLang numbering) if the server's draft config "
                   "is not a local folder, e.g. 1,29,57.")
@click.option("--num-layers", default=None, type=NUM_LAYERS, help="Target decoder layers N if its config.json is not local.")
@click.option("--hidden-size", default=None, type=click.IntRange(min=1), help="Target hidden size H if its config.json is not local.")
@click.option("--arch", default=None, help="Target model_type (llama, deepseek_v3, kimi_k2...) if not local.")
@click.option("--max-new-tokens", default=1, show_default=True, type=click.IntRange(0, 1),
              help="New tokens to ask for; the prompt's rows are taken either way (SGLang 0.5.23 returns none for 0).")
@click.option("--in-flight", default=2, show_default=True, type=click.IntRange(1, 64),
              help="Requests kept in flight, so the server works while the last answer is decoded.")
@click.option("--engine-python", default=None, type=click.Path(),
              help="With --engine-model: the Python of SGLang's venv [default: this one].")
@click.option("--engine-arg", "engine_args", multiple=True, metavar="KEY=VALUE",
              help="With --engine-model: a sglang.Engine keyword, e.g. device=cpu or dtype=float32 (repeatable).")
@click.option("--old-deepseek-rule", is_flag=True,
              help="SGLang before PR #25454 (2026-05): deepseek_v2 added +1 to every explicit id.")
@click.option("--timeout", default=120.0, show_default=True, type=SECONDS, help="Seconds for one request, all of it.")
@click.option("--retries", default=3, show_default=True, type=click.IntRange(min=0),
              help="Extra attempts after errors/timeouts/5xx; one call stops retrying after 4 --timeouts (at least 30 s).")
def capture_sglang_command(url, engine_model, tokens_from, prompts_path, out_path, layer_ids, num_layers, hidden_size,
                           arch, max_new_tokens, in_flight, engine_python, engine_args, old_deepseek_rule, timeout,
                           retries, resume, force, quiet) -> None:
    """Capture what SGLang feeds the drafter: /generate with return_hidden_states, prefill only."""
    from alignprobe.capture import capture_sglang
    from alignprobe.cli.engine_args import parse_engine_args
    from alignprobe.dump import open_dump
    from alignprobe.dump.marks import summary_line

    ids = parse_layer_list(layer_ids, "--layer-ids")
    if isinstance(ids, str):
        raise BadInput("--layer-ids takes the drafter's ids, e.g. 1,29,57")
    path = capture_sglang(out_path, url=url, engine_model=engine_model, engine_python=engine_python,
                          engine_options=parse_engine_args(engine_args), tokens_from=tokens_from,
                          prompts_path=prompts_path, layer_ids=ids, timeout=timeout, retries=retries,
                          in_flight=in_flight, num_layers=num_layers, hidden_size=hidden_size, arch=arch,
                          max_new_tokens=max_new_tokens, sglang_first_id_rule=not old_deepseek_rule, resume=resume,
                          overwrite=force, progress=not quiet)
    with open_dump(path) as dump:
        claim = dump.streams["hidden_states"]
        means = dump.provenance.capture.get("width_means", "")
        click.echo(f"wrote {path} ({dump.num_samples} samples): hidden_states claims HF{list(claim.hf_indices)}; {means}")
        marked = summary_line(dump.sample_ids, dump.marks)
        if marked:
            from alignprobe.probes.sglang_facts import FLAGS_FULL_ROWS

            short = len(dump.marks.short_indices())
            click.echo(marked + (f"; for whole rows relaunch the server with {FLAGS_FULL_ROWS}" if short else ""), err=True)
