"""``alignprobe compare --train-dump A --serve-dump B``: the gate a pipeline runs."""

from __future__ import annotations

import os

import click

from alignprobe.compare import compare as run_compare
from alignprobe.compare.policy import Policy, parse_override
from alignprobe.compare.summary import format_summary
from alignprobe.errors import EXIT_FAIL, EXIT_PASS, BadInput


@click.command()
@click.option("--train-dump", required=True, type=click.Path(),
              help="Dump captured the way training extracts states, or a SpecForge/speculators/EAGLE folder.")
@click.option("--serve-dump", required=True, type=click.Path(), help="Dump captured from the serving engine.")
@click.option("--train-layer-ids", help="For a foreign --train-dump: the layer ids its run used (1,29,57).")
@click.option("--train-drafter-config", type=click.Path(),
              help="For a foreign --train-dump: the drafter config.json holding its layer ids.")
@click.option("--num-layers", type=click.IntRange(min=1),
              help="For a foreign dump: the target's decoder layer count (else taken from the other dump).")
@click.option("--json", "json_path", type=click.Path(), help="Write the full result (findings, metrics, mapping) here.")
@click.option("--report", "report_dir", type=click.Path(file_okay=False),
              help="Write report.html (with plots), summary.md (for a CI comment) and result.json into this folder.")
@click.option("--policy", "policy_file", type=click.Path(), help="Tolerances from a JSON or TOML file (docs/policy.md).")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override one tolerance, e.g. --set drift_fail_rel_rms=0.3 or --set severity.token_shift=error.")
@click.option("--strict", is_flag=True, help="Exit 1 on WARN too, not only on FAIL.")
@click.option("--sample", type=click.IntRange(min=1),
              help="Compare this many paired samples, evenly spread; the result then carries each slice's "
              "sampling error (a 95% interval from the spread between samples).")
@click.option("--max-tokens", type=click.IntRange(min=1),
              help="Compare at most this many aligned token rows: whole samples spread over the dump, the "
              "last one cut (not the first rows); with the sampling error, as --sample.")
@click.option("--mapping-tokens", type=click.IntRange(min=1), default=2048, show_default=True,
              help="Token rows sampled for the layer-mapping search.")
@click.option("--tokenizer", default="auto", show_default=True, metavar="PATH",
              help="Local tokenizer folder to show differing tokens as text ('auto': the model folder in the "
              "dumps' provenance, if local; 'none': never).")
@click.option("--device", default="cpu", show_default=True, metavar="DEVICE",
              help="Where the per-row arithmetic runs: cpu (numpy) or a torch device (cuda, cuda:1); same result.")
def compare(train_dump, serve_dump, train_layer_ids, train_drafter_config, num_layers, json_path, report_dir, policy_file, overrides, strict, sample, max_tokens,
            mapping_tokens, tokenizer, device) -> int:
    """Compare per layer; name each disagreement with evidence and a fix; exit 0 pass/warn, 1 fail, 2 bad input."""
    if json_path:
        for dump in (train_dump, serve_dump):
            if os.path.exists(json_path) and os.path.exists(dump) and os.path.samefile(json_path, dump):
                raise BadInput(f"--json {json_path} is one of the input dumps: choose another path")
    policy = Policy.from_file(policy_file) if policy_file else Policy()
    if overrides:
        merged: dict = {}
        for text in overrides:
            key, value = parse_override(text)
            if key == "severity":
                merged.setdefault("severity", {}).update(value)
            else:
                merged[key] = value
        policy = policy.updated(merged)
    result = run_compare(
        train_dump, serve_dump, policy, sample=sample, max_tokens=max_tokens, mapping_tokens=mapping_tokens,
        tokenizer=None if tokenizer.lower() == "none" else tokenizer, device=device,
        train_import=_import_options(train_layer_ids, train_drafter_config, num_layers),
        serve_import=_import_options(None, None, num_layers),
    )
    if json_path:
        _write_atomic(json_path, result.to_json())
    click.echo(format_summary(result))
    if json_path:
        click.echo(f"\nfull result: {json_path}")
    if report_dir:
        from alignprobe.report import write_report

        click.echo(f"report: {write_report(result, report_dir).html}")
    return EXIT_PASS if result.passed(strict=strict) else EXIT_FAIL


def _import_options(layer_ids, drafter_config, num_layers) -> dict:
    """open_source() options for a side that is a foreign folder (ignored for our own dumps)."""
    options: dict = {}
    if layer_ids:
        from alignprobe.importers.layer_ids import parse_ids  # only for foreign dumps: it loads torch

        options["layer_ids"] = parse_ids(layer_ids, "--train-layer-ids")
    if drafter_config:
        options["config"] = drafter_config
    if num_layers:
        options["num_layers"] = num_layers
    return options


def _write_atomic(path: str, text: str) -> None:
    tmp = f"{path}.tmp"
    try:
        with open(tmp, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        raise BadInput(f"--json {path}: cannot write it ({exc.strerror})") from None
