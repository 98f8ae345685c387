"""``alignprobe inspect DUMP``"""

from __future__ import annotations

import json

import click

from alignprobe.inspect import inspect_dump


@click.command()
@click.argument("dump", type=click.Path(dir_okay=True))
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def inspect(dump: str, as_json: bool) -> None:
    """Show a dump's provenance, samples, streams, claims and value statistics."""
    summary = inspect_dump(dump)
    click.echo(json.dumps(summary.to_dict(), indent=2) if as_json else summary.format())
