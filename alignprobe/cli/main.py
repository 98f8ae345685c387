"""``alignprobe``: the click group, and the one place errors become exit codes.

Exit codes (README.md): 0 pass, 1 fail, 2 bad input or usage (or a full disk, a permission), 3 a bug in alignprobe.
"""

from __future__ import annotations

import errno
import importlib
import os
import sys
import warnings

import click

from alignprobe.version import __version__
from alignprobe.cli.json_output import write_error_json
from alignprobe.errors import EXIT_BAD_INPUT, EXIT_BUG, EXIT_INTERRUPTED, AlignprobeError, first_line, printable_line
from alignprobe.safe_paths import BadOutputPath



class _Interrupted(Exception):
    """KeyboardInterrupt, carried past click (which would print a blank line before it)."""


class _Group(click.Group):
    """Turns every error into one line on stderr and a documented exit code."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise _Interrupted() from None

    def main(self, *args, **kwargs):
        kwargs["standalone_mode"] = False
        # Warnings (numpy, torch, transformers) are held back: a refusal is one line, and a result
        # is followed by them, each on one line.
        with warnings.catch_warnings(record=True) as held:
            warnings.simplefilter("default")
            code, line, error_json = self._run(args, kwargs)
        if line is not None:
            line = printable_line(line)
            click.echo(f"alignprobe: {line}", err=True)
            if error_json:
                write_error_json(line, code)
        elif held:
            for w in _distinct(held):
                click.echo(f"alignprobe: warning: {first_line(w.message)} ({w.category.__name__})", err=True)
        from alignprobe.cli import interrupt

        if code == EXIT_INTERRUPTED:
            interrupt.said()
        interrupt.done()
        sys.exit(code or 0)

    def _run(self, args, kwargs) -> tuple[int, str | None, bool]:
        """The exit code, the one line to print (None after a normal exit), and whether --json gets the
        error too (not when --json itself is the bad path: it may be an input, a FIFO or a device)."""
        try:
            return super().main(*args, **kwargs) or 0, None, False
        except (click.exceptions.Abort, _Interrupted, KeyboardInterrupt):
            return EXIT_INTERRUPTED, "interrupted", True
        except click.ClickException as exc:  # usage errors: bad flag, missing argument
            return EXIT_BAD_INPUT, exc.format_message(), True
        except AlignprobeError as exc:
            # Our messages are one line by design; the whole text is kept (printable_line escapes a
            # newline inside a quoted path, which first_line would cut the message at).
            return exc.exit_code, str(exc).strip() or type(exc).__name__, not isinstance(exc, BadOutputPath)
        except OSError as exc:
            # The machine or a path, not alignprobe: say what failed; a capture's finished samples are kept.
            if _is_environment_error(exc):
                return EXIT_BAD_INPUT, (f"{_oserror_line(exc)}: free space or fix the permissions, then run again "
                                        "(a capture continues with --resume)"), True
            return EXIT_BAD_INPUT, f"{_oserror_line(exc)}: check the path", True
        except RecursionError:
            return EXIT_BAD_INPUT, "an input is nested too deeply to read (a JSON or HDF5 structure)", True
        except Exception as exc:  # noqa: BLE001 - a bug of ours, still one line unless asked
            if isinstance(exc, RuntimeError) and _is_environment_error(exc):
                # HDF5 reports a write that failed for lack of room as a RuntimeError when it surfaces while
                # closing ("Can't decrement id ref count (... errno = 27 ...)"): the machine, not a bug
                return EXIT_BAD_INPUT, (f"an HDF5 write failed ({_hdf5_reason(exc)}): free space or fix the "
                                        "permissions, then run again (a capture continues with --resume)"), True
            if os.environ.get("ALIGNPROBE_DEBUG"):
                raise
            return EXIT_BUG, f"internal error: {type(exc).__name__}: {first_line(exc)} (set ALIGNPROBE_DEBUG=1 for the traceback)", False


def _distinct(held) -> list:
    seen, kept = set(), []
    for w in held:
        key = (w.category, str(w.message))
        if key not in seen:
            seen.add(key)
            kept.append(w)
    return kept


# A full disk, a quota, a read-only file system, a permission: the machine's state, not a bug.
_ENVIRONMENT_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EFBIG}


def _is_environment_error(exc: OSError) -> bool:
    # h5py reports a failed write with the errno in its message only ("errno = 28, ...").
    text = str(exc)
    return getattr(exc, "errno", None) in _ENVIRONMENT_ERRNOS or any(f"errno = {n}," in text for n in _ENVIRONMENT_ERRNOS)


def _hdf5_reason(exc: Exception) -> str:
    """The errno's words out of HDF5's long message (it spans lines and names buffer addresses)."""
    text = str(exc)
    for number in _ENVIRONMENT_ERRNOS:
        if f"errno = {number}," in text:
            return f"{os.strerror(number)}, errno {number}"
    return first_line(exc)


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
