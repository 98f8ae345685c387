"""Click parameter types the commands share."""

from __future__ import annotations

import math

import click


class _Seconds(click.ParamType):
    """A positive, finite number of seconds: click's FloatRange lets ``nan`` through (no comparison
    with NaN is false), and ``inf`` would disable a timeout."""

    name = "SECONDS"

    def convert(self, value, param, ctx):
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not (math.isfinite(seconds) and seconds > 0):
            self.fail(f"{value!r} must be a positive, finite number of seconds", param, ctx)
        return seconds


SECONDS = _Seconds()
