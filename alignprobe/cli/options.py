"""Click parameter types the commands share."""

from __future__ import annotations

import math

import click

from alignprobe.dump.schema import MAX_NUM_LAYERS


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


# --num-layers: a model's decoder layer count; beyond the schema's bound it is a typo (an extra 0) or
# an id pasted in its place, and code walking 0..N ran out of memory on 99999999999999999999.
NUM_LAYERS = click.IntRange(1, MAX_NUM_LAYERS)
