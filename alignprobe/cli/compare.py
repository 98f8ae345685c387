"""``alignprobe compare --train-dump A --serve-dump B``: the gate a pipeline runs."""

from __future__ import annotations

import os
import sys

import click

from alignprobe.cli.json_output import forget_json_path, json_option, people_echo
from alignprobe.cli.options import NUM_LAYERS
from alignprobe.cli.terminal import RowsBar, use_colour
from alignprobe.compare import compare as run_compare
from alignprobe.compare.policy import Policy
from alignprobe.findings.tolerances import parse_overrides
from alignprobe.compare.summary import format_summary, format_verdict_line
from alignprobe.errors import BadInput
from alignprobe.safe_paths import input_dir, input_path, output_file, refuse_overlap

USAGE = "alignprobe compare --train-dump TRAIN --serve-dump SERVE [--json result.json] [--report DIR] [--junit junit.xml]"


@click.command()
@click.argument("positional", nargs=-1, required=False, metavar="")
@click.option("--train-dump", type=click.Path(),
              help="Dump captured the way training extracts states, or a SpecForge/speculators/EAGLE folder.")
@click.option("--serve-dump", type=click.Path(), help="Dump captured from the serving engine, or a foreign folder "
              "(a vLLM extract_hidden_states connector folder, TensorRT-LLM SaveState files).")
@click.option("--serve-layer-ids", help="For a foreign --serve-dump: the layer ids its run used (2,4,5,8).")
@click.option("--train-layer-ids", help="For a foreign --train-dump: the layer ids its run used (1,29,57).")
@click.option("--train-system", type=click.Choice(["modelopt-hf", "modelopt-vllm"]), default=None,
              help="For a Model-Optimizer --train-dump whose files do not show the backend that wrote them.")
@click.option("--train-drafter-config", type=click.Path(),
              help="For a foreign --train-dump: the drafter config.json holding its layer ids.")
@click.option("--num-layers", type=NUM_LAYERS,
              help="For a foreign dump: the target's decoder layer count (else taken from the other dump).")
@json_option("Write the full result (findings, metrics, mapping, exit code and its reason) here.")
@click.option("--report", "report_dir", type=click.Path(file_okay=False),
              help="Write report.html (with plots), summary.md (for a CI comment) and result.json into this folder.")
@click.option("--junit", "junit_path", type=click.Path(dir_okay=False),
              help="Write JUnit XML: one test case per finding class checked, failures with the title and fix.")
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
@click.option("--quiet", "-q", is_flag=True, help="Print the verdict line only (and no progress bar).")
@click.option("--verbose", "-v", is_flag=True, help="Print every slice, every finding's fix, and a progress bar even off a terminal.")
@click.option("--drafter", type=click.Path(),
              help="An EAGLE-3 drafter folder: also predict its accept length on both dumps (alignprobe accept).")
@click.option("--target", type=click.Path(), help="With --drafter: the target model folder (embedding, LM head).")
def compare(positional, train_dump, serve_dump, serve_layer_ids, train_layer_ids, train_system, train_drafter_config, num_layers, json_path, report_dir,
            junit_path, policy_file, overrides, strict, sample, max_tokens, mapping_tokens, tokenizer, device, quiet,
            verbose, drafter=None, target=None) -> int:
    """Compare per layer; name each disagreement with evidence and a fix; exit 0 pass/warn, 1 fail, 2 bad input."""
    check_dump_options(positional, train_dump, serve_dump, USAGE, "compare")
    if quiet and verbose:
        raise BadInput("--quiet and --verbose contradict each other: give one")
    _refuse_bad_paths(train_dump, serve_dump, train_drafter_config, policy_file, tokenizer, json_path, report_dir,
                      junit_path)
    policy = policy_from_options(policy_file, overrides)
    input_path(train_dump, "file")  # a FIFO or a device would block or never end in the readers
    input_path(serve_dump, "file")
    bar = RowsBar(enabled=not quiet and (verbose or sys.stderr.isatty()))
    try:
        result = run_compare(
            train_dump, serve_dump, policy, sample=sample, max_tokens=max_tokens, mapping_tokens=mapping_tokens,
            tokenizer=None if tokenizer.lower() == "none" else tokenizer, device=device,
            train_import=_import_options(train_layer_ids, train_drafter_config, num_layers, train_system),
            serve_import=_import_options(serve_layer_ids, None, num_layers, flag="--serve-layer-ids"), progress=bar,
        )
    finally:
        bar.close()
    predicted = None
    if drafter:
        from alignprobe.accept import accept

        predicted = accept(drafter, train_dump, serve_dump, target=target, max_tokens=max_tokens, device=device,
                           compare_result=result)
        result.accept = predicted.to_dict()
    from alignprobe.report.outputs import write_outputs

    outputs = write_outputs(result, strict=strict, json_path=json_path, report_dir=report_dir, junit_path=junit_path,
                            suite="alignprobe compare", echo=people_echo(json_path))
    if predicted is not None and not quiet:
        from alignprobe.accept.summary import format_accept

        people_echo(json_path)(format_accept(predicted) + "\n")
    return finish(result, outputs, quiet=quiet, verbose=verbose)


def finish(result, outputs, *, quiet: bool, verbose: bool) -> int:
    """Print the summary (to stderr when the JSON took stdout) and return the exit code."""
    from alignprobe.report.outputs import STDOUT

    forget_json_path()
    to_stderr = outputs.json == STDOUT
    echo = people_echo(outputs.json)
    colour = use_colour(sys.stderr if to_stderr else sys.stdout)
    echo(format_verdict_line(result, colour) if quiet else format_summary(result, verbose=verbose, colour=colour))
    if not quiet:
        written = [("full result", outputs.json if outputs.json != STDOUT else None), ("report", outputs.report_html),
                   ("junit", outputs.junit)]
        shown = [f"{name}: {path}" for name, path in written if path]
        if shown:
            echo("\n" + "\n".join(shown))
        for line in outputs.notes:
            echo(f"note: {line}")
        if verbose:
            for line in outputs.github:
                echo(f"github: {line}")
        echo(f"exit {outputs.status.code}: {outputs.status.reason}")
    return outputs.status.code


def check_dump_options(positional, train_dump, serve_dump, usage: str, command: str) -> None:
    """The natural first try, ``alignprobe compare a.h5 b.h5``, gets the usage and the flags to use."""
    if positional:
        guess = list(positional) + ["SERVE"] * (2 - len(positional))
        raise click.UsageError(
            f"{command} takes the dumps as options, not positional arguments: did you mean "
            f"alignprobe {command} --train-dump {guess[0]} --serve-dump {guess[1]}? (usage: {usage})"
        )
    missing = [name for name, value in (("--train-dump", train_dump), ("--serve-dump", serve_dump)) if not value]
    if missing:
        raise click.UsageError(f"Missing option {' and '.join(missing)} (usage: {usage})")


def policy_from_options(policy_file, overrides) -> Policy:
    policy = Policy.from_file(policy_file) if policy_file else Policy()
    return policy.updated(parse_overrides(overrides)) if overrides else policy


def _import_options(layer_ids, drafter_config, num_layers, system=None, flag="--train-layer-ids") -> dict:
    """open_source() options for a side that is a foreign folder (ignored for our own dumps)."""
    options: dict = {"system": system} if system else {}
    if layer_ids:
        from alignprobe.layer_ids import parse_ids

        options["layer_ids"] = parse_ids(layer_ids, flag)
    if drafter_config:
        options["config"] = drafter_config
    if num_layers:
        options["num_layers"] = num_layers
    return options


def _refuse_bad_paths(train_dump, serve_dump, drafter_config, policy_file, tokenizer, json_path, report_dir,
                      junit_path) -> None:
    """Inputs that are not files or folders, and outputs over an input, before any work (safe_paths)."""
    from alignprobe.report.writer import HTML_NAME, JSON_NAME, MARKDOWN_NAME

    # Outputs first: an error about an input is also written to --json, which must then be safe to write.
    outputs = {"--json": output_file(json_path, "--json") if json_path is not None and json_path != "-" else None,
               "--junit": output_file(junit_path, "--junit") if junit_path is not None and junit_path != "-" else None}
    if report_dir is not None:
        outputs.update({f"--report ({name})": os.path.join(report_dir, name) for name in (HTML_NAME, MARKDOWN_NAME, JSON_NAME)})
    inputs = {"--train-dump": train_dump, "--serve-dump": serve_dump, "--train-drafter-config": drafter_config,
              "--policy": policy_file}
    if tokenizer.lower() not in ("auto", "none"):
        inputs["--tokenizer"] = tokenizer
    refuse_overlap(outputs, inputs)
    if tokenizer.lower() not in ("auto", "none"):  # loaded only if tokens differ: a wrong path must not wait for that
        input_dir(tokenizer, "tokenizer folder (--tokenizer)")
