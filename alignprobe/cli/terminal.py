"""What a terminal gets: colour only on a tty (and never with NO_COLOR set), and a progress bar that
appears only when a compare takes more than a couple of seconds."""

from __future__ import annotations

import os
import sys

BAR_DELAY_S = 2.0  # a quick compare shows no bar at all


def use_colour(stream=None) -> bool:
    """https://no-color.org: NO_COLOR set to anything non-empty turns colour off."""
    stream = stream or sys.stdout
    return not os.environ.get("NO_COLOR") and hasattr(stream, "isatty") and stream.isatty()


class RowsBar:
    """``progress(rows_done, rows_total)`` for compare(): a tqdm bar on stderr, made on the first call."""

    def __init__(self, enabled: bool, desc: str = "compare"):
        self.enabled = enabled
        self.desc = desc
        self._bar = None

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        if self._bar is None:
            from tqdm import tqdm

            self._bar = tqdm(total=total, unit="rows", unit_scale=True, desc=self.desc, delay=BAR_DELAY_S,
                             file=sys.stderr, dynamic_ncols=True, leave=False)
        self._bar.update(done - self._bar.n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
