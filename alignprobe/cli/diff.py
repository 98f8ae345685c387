"""``alignprobe diff old.json new.json``: a regression, an improvement, or the known state.

Exit codes: 0 no change, 1 a regression (anything worse, even beside an improvement), 4 an
improvement only, 2 bad input.
"""

from __future__ import annotations

import json

import click

from alignprobe.cli.json_output import forget_json_path, json_option


@click.command()
@click.argument("old_json", type=click.Path())
@click.argument("new_json", type=click.Path())
@json_option("Write the diff as JSON here (with its kind and exit code).")
def diff(old_json, new_json, json_path) -> int:
    """Compare two results: verdict, findings appeared/gone, metrics moved beyond their interval.

    Exit 0 no change, 1 regression, 4 improvement only, 2 bad input."""
    from alignprobe.compare.diff import diff_results
    from alignprobe.report.load import load_result
    from alignprobe.report.outputs import STDOUT, write_json
    from alignprobe.safe_paths import BadOutputPath, output_file, refuse_overlap

    if json_path is not None and json_path != STDOUT:
        try:
            refuse_overlap({"--json": output_file(json_path, "--json")}, {"OLD_JSON": old_json, "NEW_JSON": new_json})
        except BadOutputPath:
            forget_json_path()  # the error record must not go there either: that file is an input result
            raise
    change = diff_results(load_result(old_json), load_result(new_json))
    if json_path:
        write_json(json_path, json.dumps(change.to_dict(), indent=2, allow_nan=False))
        forget_json_path()
    click.echo(change.format(), err=json_path == STDOUT)
    return change.exit_code
