"""``alignprobe accept --drafter DIR --train-dump A --serve-dump B``: the accept length serving will cost."""

from __future__ import annotations

import click

from alignprobe.cli.options import FINITE, FINITE_NONNEGATIVE, MAX_DRAFT_TOKENS
from alignprobe.errors import EXIT_FAIL, EXIT_PASS
from alignprobe.cli.json_output import forget_json_path, json_option, people_echo
from alignprobe.safe_paths import output_file, refuse_overlap


@click.command()
@click.option("--drafter", required=True, type=click.Path(), help="EAGLE-3 drafter folder (SpecForge or speculators layout).")
@click.option("--train-dump", required=True, type=click.Path(), help="Dump of the states the drafter was trained on.")
@click.option("--serve-dump", required=True, type=click.Path(), help="Dump of the states the serving engine feeds it.")
@click.option("--target", type=click.Path(), help="Target model folder: its embedding and LM head are read from the "
              "safetensors (only those tensors). Needed when the drafter has no embedding; it also limits scoring "
              "to the target's own greedy tokens (greedy) and gives the expected acceptance under --temperature.")
@click.option("--num-draft-tokens", "-k", default=3, show_default=True, type=click.IntRange(1, MAX_DRAFT_TOKENS),
              help="Draft chain length (the engine's num_speculative_tokens).")
@click.option("--temperature", default=0.0, show_default=True, type=FINITE_NONNEGATIVE,
              help="The engine samples at this temperature: give dumps of text sampled at it; every chain start is "
              "walked (vLLM accepts a draft when its sample equals it), with --target also the expected acceptance.")
@click.option("--max-tokens", type=click.IntRange(min=1), help="Run the drafter on at most this many token rows per side.")
@click.option("--score-from", default=0, show_default=True, type=click.IntRange(min=0), metavar="POS",
              help="Score chain starts from this position of each sample on (dumps of prompt + generated text: "
              "the prompt length - 1, where an engine starts drafting).")
@click.option("--no-explain", is_flag=True, help="Skip the comparison that names the finding behind a loss.")
@json_option("Write the AcceptResult here.")
@click.option("--fail-cost", default=None, type=FINITE, metavar="AL",
              help="Exit 1 when serving costs more than this accept length (default: exit 1 only on a drafter error).")
@click.option("--device", default="cpu", show_default=True, help="Torch device the drafter runs on.")
def accept(drafter, train_dump, serve_dump, target, num_draft_tokens, temperature, max_tokens, score_from, no_explain,
           json_path, fail_cost, device) -> int:
    """Run the drafter on both dumps; predict the accept length per draft position and what serving costs."""
    from alignprobe.accept import accept as run_accept
    from alignprobe.accept.summary import format_accept
    from alignprobe.report.outputs import write_json

    if json_path is not None and json_path != "-":  # before the drafter runs: never a result written over an input
        refuse_overlap({"--json": output_file(json_path, "--json")},
                       {"--drafter": drafter, "--train-dump": train_dump, "--serve-dump": serve_dump, "--target": target})
    result = run_accept(drafter, train_dump, serve_dump, target=target, num_draft_tokens=num_draft_tokens,
                        temperature=temperature, max_tokens=max_tokens, device=device, explain=not no_explain, score_from=score_from)
    if json_path:
        write_json(json_path, result.to_json())
        forget_json_path()
    people_echo(json_path)(format_accept(result))
    failed = result.worst_severity == "error" or (fail_cost is not None and not result.cost <= fail_cost)
    return EXIT_FAIL if failed else EXIT_PASS
