"""``--json PATH`` for every command that writes a result: ``-`` is stdout, and a run that stops on
bad input still writes a JSON object saying what was wrong (machines need not parse stderr).

The option's callback remembers the path while click parses the command line (click processes the
options given first, so the path is known before a missing option fails); the error handler in
``main.py`` then calls :func:`write_error_json`.
"""

from __future__ import annotations

import click

from alignprobe.findings.exit_status import error_json

_pending: dict[str, str] = {}  # "path" -> where this run's --json goes


def remember_json_path(ctx, param, value):
    if value:
        _pending["path"] = value
    return value


def json_option(help_text: str):
    return click.option("--json", "json_path", type=click.Path(), callback=remember_json_path, is_eager=True,
                        help=help_text + " '-' writes it to stdout (the summary then goes to stderr).")


def people_echo(json_path):
    """Where lines for people go: stdout, or stderr when ``--json -`` takes stdout for the JSON."""
    return (lambda line: click.echo(line, err=True)) if json_path == "-" else click.echo


def forget_json_path() -> None:
    """A result was written: an error after it (there is none today) must not replace it."""
    _pending.pop("path", None)


def write_error_json(message: str, code: int) -> None:
    """Write the error object where --json pointed, if it did; never raises (the error line is on stderr)."""
    path = _pending.pop("path", None)
    if not path:
        return
    from alignprobe.safe_json import replaceable_by_json

    if path != "-" and not replaceable_by_json(path):  # e.g. --json names an input: the error is about it
        return
    from alignprobe.report.outputs import write_json

    try:
        write_json(path, error_json(message, code))
    except Exception:  # noqa: BLE001 - the one-line error on stderr is the contract; this is a courtesy
        pass
