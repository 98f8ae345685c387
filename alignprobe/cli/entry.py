"""The console script ``alignprobe``: SIGINT and a closed stdout are handled before anything else loads."""

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
    run()
