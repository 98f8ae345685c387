"""``alignprobe``: the click group, and the one place errors become exit codes.

Exit codes (README.md): 0 pass, 1 fail, 2 bad input or usage (or a full disk, a permission), 3 a bug in alignprobe.
"""

from __future__ import annotations

import errno
import importlib
import os
import sys

import click

from alignprobe import __version__
from alignprobe.cli.json_output import write_error_json
from alignprobe.errors import EXIT_BAD_INPUT, AlignprobeError

EXIT_BUG = 3


class _Group(click.Group):
    """Turns every error into one line on stderr and a documented exit code."""

    def main(self, *args, **kwargs):
        kwargs["standalone_mode"] = False
        try:
            code = super().main(*args, **kwargs)
        except click.exceptions.Abort:
            click.echo("alignprobe: interrupted", err=True)
            code = 130
            write_error_json("interrupted", code)
        except click.ClickException as exc:  # usage errors: bad flag, missing argument
            click.echo(f"alignprobe: {exc.format_message()}", err=True)
            code = EXIT_BAD_INPUT
            write_error_json(exc.format_message(), code)
        except AlignprobeError as exc:
            click.echo(f"alignprobe: {exc}", err=True)
            code = exc.exit_code
            write_error_json(str(exc), code)
        except OSError as exc:
            if not _is_environment_error(exc):
                raise
            # The machine, not alignprobe: say what failed; a capture's finished samples are kept.
            click.echo(f"alignprobe: {_oserror_line(exc)}: free space or fix the permissions, then run again "
                       "(a capture continues with --resume)", err=True)
            code = EXIT_BAD_INPUT
            write_error_json(_oserror_line(exc), code)
        except Exception as exc:  # noqa: BLE001 - a bug of ours, still one line unless asked
            if os.environ.get("ALIGNPROBE_DEBUG"):
                raise
            click.echo(
                f"alignprobe: internal error: {type(exc).__name__}: {exc} (set ALIGNPROBE_DEBUG=1 for the traceback)",
                err=True,
            )
            code = EXIT_BUG
        sys.exit(code or 0)


# A full disk, a quota, a read-only file system, a permission: the machine's state, not a bug.
_ENVIRONMENT_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EFBIG}


def _is_environment_error(exc: OSError) -> bool:
    # h5py reports a failed write with the errno in its message only ("errno = 28, ...").
    text = str(exc)
    return exc.errno in _ENVIRONMENT_ERRNOS or any(f"errno = {n}," in text for n in _ENVIRONMENT_ERRNOS)


def _oserror_line(exc: OSError) -> str:
    where = f" ({exc.filename})" if exc.filename else ""
    return f"{exc.strerror or str(exc).splitlines()[0]}{where}"


# Each command's module is imported only when that command runs: the capture and import commands
# need torch (2 s, 230-500 MB resident), which `compare`, `inspect` and `report` never touch. The
# one-line help is kept here so that `alignprobe --help` lists the commands without importing any.
COMMANDS = {
    "inspect": ("alignprobe.cli.inspect", "inspect", "Show a dump's provenance, streams, claims and value statistics."),
    "capture": ("alignprobe.cli.capture_all", "capture", "Capture hidden states of a prompt set into a dump."),
    "compare": ("alignprobe.cli.compare", "compare", "Compare a train and a serve dump per layer; the gate."),
    "report": ("alignprobe.cli.report", "report", "Render report.html and summary.md from a result.json."),
    "import": ("alignprobe.cli.import_", "import_command", "Import SpecForge, speculators or EAGLE hidden states."),
    "audit": ("alignprobe.cli.audit", "audit", "Audit a training set in place: every sample once, data faults named."),
    "demo": ("alignprobe.cli.demo", "demo", "Plant the Kimi-K2.5 faults in a tiny model; compare each."),
    "gate": ("alignprobe.cli.gate", "gate", "Capture both sides, compare, report; exit with the verdict."),
    "diff": ("alignprobe.cli.diff", "diff", "What changed between two result.json files; exit 1 on a regression."),
    "accept": ("alignprobe.cli.accept", "accept", "Run an EAGLE-3 drafter on both dumps; predict the accept length."),
}


class _LazyGroup(_Group):
    def list_commands(self, ctx) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx, name: str):
        if name not in COMMANDS:
            return None
        module, attribute, _ = COMMANDS[name]
        return getattr(importlib.import_module(module), attribute)

    def format_commands(self, ctx, formatter) -> None:
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="alignprobe")
def cli() -> None:
    """Check that a drafter is served the hidden states it was trained on."""


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
