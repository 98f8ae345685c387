"""User-facing errors: each one is a single line for stderr and an exit code.

The CLI prints ``str(error)`` and exits with ``error.exit_code``; nothing else reaches the user.
Library callers (notebooks) catch :class:`AlignprobeError` like any exception.
"""

# Exit codes, documented in README.md ("Exit codes").
EXIT_PASS = 0
EXIT_FAIL = 1
EXIT_BAD_INPUT = 2


class AlignprobeError(Exception):
    """An error that is the user's to fix; its message says what was wrong and how to fix it."""

    exit_code = EXIT_BAD_INPUT


class BadInput(AlignprobeError):
    """A file, flag or server answer that alignprobe cannot use."""


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (or its type name): for one-line error messages."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
