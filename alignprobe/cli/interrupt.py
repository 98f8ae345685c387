"""Ctrl-C, at any instant: one line on stderr and exit 130, never a traceback, never a silent death.

The first SIGINT while a command runs raises KeyboardInterrupt, so writers leave their partial
folder consistent (their ``with`` blocks keep what is durable for ``--resume``) and the CLI says
"interrupted". Any SIGINT while importing, a second one during that cleanup, or one after the
command has finished ends the process at once with the same line: everything a capture keeps is
written by atomic renames and journals, so this is as safe as kill -9 (which resume is tested
against), and the user is told instead of left with a dead process or a traceback.

A Ctrl-C that lands after the command finished still exits 130, not the command's own code: its
outputs are complete, but the user asked the run to stop, and a script's next step (``gate &&
train``) must not start as if nothing had been pressed. Python's own shutdown puts SIGINT back to
its default action before it tears down torch and h5py (long enough for a Ctrl-C to land), so the
console script does not end through it: :func:`leave` runs the exit handlers with this handler still
in place, then ends the process.

Stdlib only (and the exit codes of alignprobe.errors): the console script installs this before anything
heavy is imported.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading

from alignprobe.errors import EXIT_INTERRUPTED  # a module of constants: this one stays stdlib-light

LINE = b"alignprobe: interrupted\n"

_IMPORTING, _RUNNING, _DONE = "importing", "running", "done"
_state = {"phase": _IMPORTING, "raised": False, "said": False}


def install() -> None:
    """Take over SIGINT for the whole process (the console script only; never in-process callers)."""
    signal.signal(signal.SIGINT, _on_sigint)


def running() -> None:
    """The command starts: the next SIGINT raises KeyboardInterrupt for an orderly cleanup."""
    _state["phase"] = _RUNNING


def done() -> None:
    """The command has finished (its output is written): a SIGINT now just ends the process."""
    _state["phase"] = _DONE


def said() -> None:
    """The CLI has printed the interrupted line itself."""
    _state["said"] = True


def leave(code: int) -> None:
    """End the console script with ``code``: what Python's shutdown would do that matters (the
    other non-daemon threads joined, atexit handlers, stdio flushed), with the SIGINT handler kept."""
    done()
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _on_sigint(signum, frame) -> None:
    if _state["phase"] == _RUNNING and not _state["raised"]:
        _state["raised"] = True
        raise KeyboardInterrupt
    exit_now()


def exit_now() -> None:
    if not _state["said"]:
        try:
            os.write(2, LINE)
        except OSError:
            pass
    os._exit(EXIT_INTERRUPTED)
