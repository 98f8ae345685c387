"""``alignprobe demo``: the planted-fault walkthrough a newcomer runs first (no download, ~1 minute)."""

from __future__ import annotations

import click

from alignprobe.errors import EXIT_FAIL, EXIT_PASS


@click.command()
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="alignprobe-demo", show_default=True,
              help="Folder for the dumps and one report per scenario.")
@click.option("--keep", "keep_dir", type=click.Path(file_okay=False), default=None,
              help="Also leave a tiny model folder, prompts, a trained drafter, vLLM connector files and a gate.toml "
                   "here, to try gate, accept, audit and capture on.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def demo(out_dir: str, keep_dir: str | None, quiet: bool) -> int:
    """Build a tiny DeepseekV3 model, plant the Kimi-K2.5 faults, compare and report each; exit 0 when all verdicts are right."""
    from alignprobe.demo.run import run_demo

    if keep_dir is not None:
        from alignprobe.demo.keep import keep_folder

        keep_folder(keep_dir)
    result = run_demo(out_dir, log=lambda line: click.echo(line, err=True), progress=not quiet)
    click.echo(result.format())
    if keep_dir is not None:
        from alignprobe.demo.keep import keep_setup, try_lines

        keep_setup(keep_dir, log=lambda line: click.echo(line, err=True))
        click.echo(try_lines(keep_dir))
    return EXIT_PASS if result else EXIT_FAIL
