"""``alignprobe gate --config gate.toml``: capture both sides, compare, report, exit with the verdict.

Flags name the same keys as the config file (alignprobe/gate/config.py) and override it.
"""

from __future__ import annotations

import dataclasses
import sys

import click

from alignprobe.cli.compare import finish
from alignprobe.cli.json_output import forget_json_path, json_option, people_echo
from alignprobe.cli.terminal import RowsBar
from alignprobe.errors import BadInput
from alignprobe.layer_ids import parse_layer_list


@click.command()
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="The gate's TOML file (keys below).")
@click.option("--model", help="[train] model: local transformers model folder the training states come from.")
@click.option("--prompts", help="[train] prompts: JSONL of text, messages or input_ids.")
@click.option("--dtype", help="[train] dtype: bf16, fp16 or fp32 (default bf16).")
@click.option("--device", help="[train] device: cpu, cuda, cuda:N.")
@click.option("--sglang-url", help="[serve] a running SGLang server (--enable-return-hidden-states).")
@click.option("--sglang-offline-model", help="[serve] run sglang.Engine offline on this model (engine_args: its keywords).")
@click.option("--vllm-dir", help="[serve] files vLLM's extract_hidden_states connector wrote.")
@click.option("--vllm-url", help="[serve] a running vLLM server (with --vllm-model).")
@click.option("--vllm-model", help="[serve] the name the vLLM server serves the model under.")
@click.option("--vllm-offline-model", help="[serve] run vllm.LLM offline on this model (with --vllm-storage-dir).")
@click.option("--vllm-storage-dir", help="[serve] where offline vLLM writes its files.")
@click.option("--engine-python", help="[serve] engine_python: the Python of the engine's venv "
                                     "(with --vllm-offline-model or --sglang-offline-model).")
@click.option("--engine-arg", "engine_args", multiple=True, metavar="KEY=VALUE",
              help="[serve] engine_args: a vllm.LLM or sglang.Engine keyword, e.g. enforce_eager=true (repeatable).")
@click.option("--layer-ids", help="[serve] layer_ids: the drafter's ids, e.g. 1,29,57 (required for vLLM).")
@click.option("--out", help="Folder for train.h5, serve.h5, result.json, junit.xml and report/ (default alignprobe-gate); "
                            "the config's json and junit paths inside its out folder move with it.")
@json_option("Where result.json goes (default <out>/result.json), with the exit code and its reason.")
@click.option("--junit", help="JUnit XML here (default <out>/junit.xml): one test case per finding class checked.")
@click.option("--policy", "policy_file", help="Tolerances from a JSON or TOML file (docs/policy.md).")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override one tolerance, as compare --set.")
@click.option("--strict", is_flag=True, default=None, help="Fail on WARN too.")
@click.option("--quiet", "-q", is_flag=True, help="Print the verdict line only, no progress bars.")
@click.option("--verbose", "-v", is_flag=True, help="Print every slice and every finding's fix.")
def gate(config_path, model, prompts, dtype, device, sglang_url, sglang_offline_model, vllm_dir, vllm_url, vllm_model,
         vllm_offline_model, vllm_storage_dir, engine_python, engine_args, layer_ids, out, json_path, junit, policy_file,
         overrides, strict, quiet, verbose) -> int:
    """The pre-training gate: check the inputs, capture hf on the model folder, capture the serving engine,
    compare, report.

    Exit 0 pass (or warn, unless --strict), 1 fail, 2 bad input (result.json, report/summary.md and the
    JUnit file then say why)."""
    from alignprobe.errors import AlignprobeError, printable_line
    from alignprobe.gate import GateConfig, load_config, run_gate
    from alignprobe.gate.run import output_paths, write_gate_error

    flags = dict(out=out, json=json_path, junit=junit)
    config = None
    try:
        config = load_config(config_path) if config_path else GateConfig()
        config = _with_flags(config, flags, model, prompts, dtype, device, sglang_url, sglang_offline_model, vllm_dir,
                             vllm_url, vllm_model, vllm_offline_model, vllm_storage_dir, engine_python, engine_args,
                             layer_ids, policy_file, strict, overrides)
        if quiet and verbose:
            raise BadInput("--quiet and --verbose contradict each other: give one")
        echo = people_echo(config.json)
        bars = not quiet and sys.stderr.isatty()
        bar = RowsBar(enabled=bars)
        try:
            run = run_gate(config, progress=bars,
                           log=(lambda line: None) if quiet else (lambda line: click.echo(line, err=True)),
                           compare_progress=bar, echo=echo)
        finally:
            bar.close()
    except AlignprobeError as exc:
        # where this run would have written (the file's paths, or the defaults where it could not be read)
        config = _outputs_from_flags(config or GateConfig(), flags)
        line = printable_line(str(exc).strip() or type(exc).__name__)
        named = {"--config": config_path, "--model": model, "--prompts": prompts, "--policy": policy_file,
                 "--vllm-dir": vllm_dir, "--vllm-offline-model": vllm_offline_model, "--engine-python": engine_python,
                 "--sglang-offline-model": sglang_offline_model}
        written = write_gate_error(config, line, exc.exit_code, named)
        if output_paths(config)["--json"] in written:
            forget_json_path()  # written: the CLI's own error record must not write it a second time
        raise
    return finish(run.result, run.outputs, quiet=quiet, verbose=verbose)


def _with_flags(config, flags, model, prompts, dtype, device, sglang_url, sglang_offline_model, vllm_dir, vllm_url,
                vllm_model, vllm_offline_model, vllm_storage_dir, engine_python, engine_args, layer_ids, policy_file,
                strict, overrides):
    """The config with the flags laid over it (a flag wins over its key)."""
    from alignprobe.cli.engine_args import parse_engine_args
    from alignprobe.findings.tolerances import parse_overrides
    from alignprobe.gate.config import SERVE_SOURCES

    train = {k: v for k, v in dict(model=model, prompts=prompts, dtype=dtype, device=device).items() if v is not None}
    serve = {k: v for k, v in dict(sglang_url=sglang_url, sglang_offline_model=sglang_offline_model, vllm_dir=vllm_dir,
                                   vllm_url=vllm_url, vllm_model=vllm_model, vllm_offline_model=vllm_offline_model,
                                   vllm_storage_dir=vllm_storage_dir, engine_python=engine_python).items()
             if v is not None}
    if engine_args:
        serve["engine_args"] = {**config.serve.engine_args, **parse_engine_args(engine_args)}
    if any(k in serve for k in SERVE_SOURCES):
        # a source given on the command line replaces the file's, whichever kind that was
        config.serve = dataclasses.replace(config.serve, **dict.fromkeys(SERVE_SOURCES))
    if layer_ids is not None:
        serve["layer_ids"] = parse_layer_list(layer_ids, "--layer-ids", words=())
    config.train = dataclasses.replace(config.train, **train)
    config.serve = dataclasses.replace(config.serve, **serve)
    config = _outputs_from_flags(config, flags)
    top = dict(policy_file=policy_file, strict=strict)
    config = dataclasses.replace(config, **{k: v for k, v in top.items() if v is not None})
    for key, value in parse_overrides(overrides).items():
        if key == "severity":
            config.policy.setdefault("severity", {}).update(value)
        else:
            config.policy[key] = value
    return config


def _outputs_from_flags(config, flags):
    """--out moves the config's outputs with it; --json and --junit name theirs."""
    if flags["out"] is not None:
        config = config.moved_to(flags["out"])
    return dataclasses.replace(config, **{k: flags[k] for k in ("json", "junit") if flags[k] is not None})
