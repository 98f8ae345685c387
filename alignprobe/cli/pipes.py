"""A closed stdout or stderr (``alignprobe compare ... | head``) must not change the exit code.

Python turns the reader's exit into BrokenPipeError on the next write (or on the flush at exit,
with exit status 120), and click turns it into exit 1, the code of a FAIL. Here a write to a closed
pipe points the stream's file descriptor at /dev/null (as Python's documentation advises) and the
command carries on to its own exit code.
"""

from __future__ import annotations

import os
import sys


class _PipeGuard:
    """Delegates to a text stream; a broken pipe silences the stream instead of raising."""

    def __init__(self, stream):
        self._stream = stream
        self._closed_pipe = False

    def write(self, text):
        if self._closed_pipe:
            return len(text)
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._silence()
            return len(text)

    def flush(self):
        if self._closed_pipe:
            return
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._silence()

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def _silence(self) -> None:
        self._closed_pipe = True
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        except (OSError, ValueError):
            pass

    def __getattr__(self, name):
        return getattr(self._stream, name)


def guard_std_streams() -> None:
    """Wrap sys.stdout and sys.stderr (the console script only)."""
    if sys.stdout is not None and not isinstance(sys.stdout, _PipeGuard):
        sys.stdout = _PipeGuard(sys.stdout)
    if sys.stderr is not None and not isinstance(sys.stderr, _PipeGuard):
        sys.stderr = _PipeGuard(sys.stderr)
