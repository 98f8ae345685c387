"""``alignprobe report RESULT_JSON --out DIR``: re-render a saved comparison."""

from __future__ import annotations

import os

import click


@click.command()
@click.argument("result_json", type=click.Path(dir_okay=False))
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Folder for report.html and summary.md (default: the folder of RESULT_JSON).")
def report(result_json: str, out_dir: str | None) -> None:
    """Render report.html and summary.md from a result.json written by `alignprobe compare`."""
    from alignprobe.report.load import load_result
    from alignprobe.report.writer import write_report

    from alignprobe.report.writer import HTML_NAME, JSON_NAME, MARKDOWN_NAME
    from alignprobe.safe_paths import refuse_unusable_name, refuse_overlap

    if out_dir is None:
        out_dir = os.path.dirname(os.path.abspath(result_json))
    refuse_unusable_name(out_dir, "--out")
    result = load_result(result_json)
    target = os.path.join(out_dir, JSON_NAME)
    # Never rewrite the file we were given; elsewhere, the folder gets the full set.
    same_file = os.path.exists(target) and os.path.samefile(target, result_json)
    written = [HTML_NAME, MARKDOWN_NAME] + ([] if same_file else [JSON_NAME])
    refuse_overlap({f"--out ({name})": os.path.join(out_dir, name) for name in written}, {"RESULT_JSON": result_json})
    try:
        files = write_report(result, out_dir, write_json=not same_file)
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, ZeroDivisionError) as exc:
        # The types were checked on load; what is left is a hand-edited file whose parts disagree
        # (a mapping matrix of the wrong size, a slice index past its stream).
        from alignprobe.errors import BadInput, first_line

        raise BadInput(f"{result_json}: its parts disagree, so it cannot be rendered ({type(exc).__name__}: "
                       f"{first_line(exc)}); give the result.json that alignprobe compare wrote") from None
    click.echo(f"{result.verdict}: report {files.html}, summary {files.markdown}")
    for note in files.notes:
        click.echo(f"  note: {note}")
