"""User-facing errors: each one is a single line for stderr and an exit code.

The CLI prints ``str(error)`` and exits with ``error.exit_code``; nothing else reaches the user.
Library callers (notebooks) catch :class:`AlignprobeError` like any exception.
"""

# Exit codes, documented in README.md ("Exit codes").
EXIT_PASS = 0
EXIT_FAIL = 1
EXIT_BAD_INPUT = 2
EXIT_BUG = 3  # an internal error: alignprobe's fault, reported as one line
EXIT_INTERRUPTED = 130  # Ctrl-C, as a shell reports a process killed by SIGINT


class AlignprobeError(Exception):
    """An error that is the user's to fix; its message says what was wrong and how to fix it."""

    exit_code = EXIT_BAD_INPUT


class BadInput(AlignprobeError):
    """A file, flag or server answer that alignprobe cannot use."""


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (or its type name): for one-line error messages."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


# A message longer than this is cut: one line on a terminal, even when it quotes a huge value.
MAX_LINE_CHARS = 2000


def printable_line(text: str) -> str:
    """``text`` as one printable line: a path or an id holding a newline, a tab or another control
    character (a file named ``a\\nb.h5``) is shown escaped, as Python writes it in a string, and the
    bytes of a non-UTF-8 file name (decoded by Python as lone surrogates) as ``\\xNN``. Without this
    such a name split the one error line in two, or was cut at its newline."""
    out = []
    for char in text.strip():
        code = ord(char)
        if 0xDC80 <= code <= 0xDCFF:  # os.fsdecode's surrogateescape of one undecodable byte
            out.append(f"\\x{code - 0xDC00:02x}")
        elif code < 0x20 or code == 0x7F or 0x80 <= code < 0xA0 or char in "\u2028\u2029":
            out.append(repr(char)[1:-1])
        else:
            out.append(char)
    line = "".join(out)
    return line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS - 3] + "..."
