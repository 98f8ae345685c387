"""``alignprobe demo``: the planted-fault walkthrough a newcomer runs first (no download, ~1 minute)."""

from __future__ import annotations

import click

from alignprobe.errors import EXIT_FAIL, EXIT_PASS


@click.command()
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="alignprobe-demo", show_default=True,
              help="Folder for the dumps and one report per scenario.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def demo(out_dir: str, quiet: bool) -> int:
    """Build a tiny DeepseekV3 model, plant the Kimi-K2.5 faults, compare and report each; exit 0 when all verdicts are right."""
    from alignprobe.demo.run import run_demo

    result = run_demo(out_dir, log=lambda line: click.echo(line, err=True), progress=not quiet)
    click.echo(result.format())
    return EXIT_PASS if result else EXIT_FAIL
