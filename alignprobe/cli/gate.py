"""``alignprobe gate --config gate.toml``: capture both sides, compare, report, exit with the verdict.

Flags name the same keys as the config file (alignprobe/gate/config.py) and override it.
"""

from __future__ import annotations

import dataclasses
import sys

import click

from alignprobe.cli.compare import finish, people_echo
from alignprobe.cli.json_output import json_option
from alignprobe.cli.terminal import RowsBar
from alignprobe.errors import BadInput


@click.command()
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="The gate's TOML file (keys below).")
@click.option("--model", help="[train] model: local transformers model folder the training states come from.")
@click.option("--prompts", help="[train] prompts: JSONL of text, messages or input_ids.")
@click.option("--dtype", help="[train] dtype: bf16, fp16 or fp32 (default bf16).")
@click.option("--device", help="[train] device: cpu, cuda, cuda:N.")
@click.option("--sglang-url", help="[serve] a running SGLang server (--enable-return-hidden-states).")
@click.option("--vllm-dir", help="[serve] files vLLM's extract_hidden_states connector wrote.")
@click.option("--vllm-url", help="[serve] a running vLLM server (with --vllm-model).")
@click.option("--vllm-model", help="[serve] the name the vLLM server serves the model under.")
@click.option("--vllm-offline-model", help="[serve] run vllm.LLM offline on this model (with --vllm-storage-dir).")
@click.option("--vllm-storage-dir", help="[serve] where offline vLLM writes its files.")
@click.option("--layer-ids", help="[serve] layer_ids: the drafter's ids, e.g. 1,29,57 (required for vLLM).")
@click.option("--out", help="Folder for train.h5, serve.h5, result.json and report/ (default alignprobe-gate).")
@json_option("Where result.json goes (default <out>/result.json), with the exit code and its reason.")
@click.option("--junit", help="Write JUnit XML here: one test case per finding class checked.")
@click.option("--policy", "policy_file", help="Tolerances from a JSON or TOML file (docs/policy.md).")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override one tolerance, as compare --set.")
@click.option("--strict", is_flag=True, default=None, help="Fail on WARN too.")
@click.option("--quiet", "-q", is_flag=True, help="Print the verdict line only, no progress bars.")
@click.option("--verbose", "-v", is_flag=True, help="Print every slice and every finding's fix.")
def gate(config_path, model, prompts, dtype, device, sglang_url, vllm_dir, vllm_url, vllm_model, vllm_offline_model,
         vllm_storage_dir, layer_ids, out, json_path, junit, policy_file, overrides, strict, quiet, verbose) -> int:
    """The pre-training gate: capture hf on the model folder, capture the serving engine, compare, report.

    Exit 0 pass (or warn, unless --strict), 1 fail, 2 bad input."""
    from alignprobe.findings.tolerances import parse_override
    from alignprobe.gate import GateConfig, load_config, run_gate

    config = load_config(config_path) if config_path else GateConfig()
    train = {k: v for k, v in dict(model=model, prompts=prompts, dtype=dtype, device=device).items() if v is not None}
    serve = {k: v for k, v in dict(sglang_url=sglang_url, vllm_dir=vllm_dir, vllm_url=vllm_url, vllm_model=vllm_model,
                                   vllm_offline_model=vllm_offline_model, vllm_storage_dir=vllm_storage_dir).items()
             if v is not None}
    if serve and any(k in serve for k in ("sglang_url", "vllm_dir", "vllm_url", "vllm_offline_model")):
        # a source given on the command line replaces the file's, whichever kind that was
        config.serve = dataclasses.replace(config.serve, sglang_url=None, vllm_dir=None, vllm_url=None,
                                           vllm_offline_model=None)
    if layer_ids is not None:
        try:
            serve["layer_ids"] = [int(x) for x in layer_ids.split(",") if x.strip()]
        except ValueError:
            raise BadInput(f"--layer-ids {layer_ids!r}: give comma-separated integers, e.g. 1,29,57") from None
    config.train = dataclasses.replace(config.train, **train)
    config.serve = dataclasses.replace(config.serve, **serve)
    top = dict(out=out, json=json_path, junit=junit, policy_file=policy_file, strict=strict)
    config = dataclasses.replace(config, **{k: v for k, v in top.items() if v is not None})
    for text in overrides:
        key, value = parse_override(text)
        if key == "severity":
            config.policy.setdefault("severity", {}).update(value)
        else:
            config.policy[key] = value
    if quiet and verbose:
        raise BadInput("--quiet and --verbose contradict each other: give one")
    echo = people_echo(config.json)
    bars = not quiet and sys.stderr.isatty()
    bar = RowsBar(enabled=bars)
    try:
        run = run_gate(config, progress=bars, log=(lambda line: None) if quiet else (lambda line: click.echo(line, err=True)),
                       compare_progress=bar, echo=echo)
    finally:
        bar.close()
    return finish(run.result, run.outputs, quiet=quiet, verbose=verbose)
