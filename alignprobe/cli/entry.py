"""The console script ``alignprobe``: SIGINT and a closed stdout are handled before anything else loads.

Importing ``alignprobe`` loads nothing heavy (its root is lazy), so the handler is in place before
numpy, h5py or torch start loading, and it stays in place until the process has ended (interrupt.leave).
"""

from __future__ import annotations


def main() -> None:
    from alignprobe.cli import interrupt

    interrupt.install()
    try:
        from alignprobe.cli.main import main as run
        from alignprobe.cli.pipes import guard_std_streams
    except KeyboardInterrupt:  # the handler exits first; this is for a SIGINT it did not see
        interrupt.exit_now()
    guard_std_streams()
    interrupt.running()
    try:
        run()
        code = 0
    except SystemExit as stop:
        code = _exit_code(stop.code)
    except KeyboardInterrupt:  # after the command's outcome was decided, before the CLI marked it done
        interrupt.exit_now()
    interrupt.leave(code)


def _exit_code(value) -> int:
    """``sys.exit(value)`` as Python would end with it: None is 0, an int itself, anything else printed and 1."""
    import sys

    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1
