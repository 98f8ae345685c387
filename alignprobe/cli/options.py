"""Click parameter types the commands share."""

from __future__ import annotations

import math

import click

from alignprobe.dump.schema import MAX_NUM_LAYERS


def dump_output_options(command):
    """``--out``, ``--resume``, ``--force`` and ``--quiet``: what every capture into a dump takes."""
    for option in reversed((
        click.option("--out", "out_path", required=True, type=click.Path(), help="Dump to write (HDF5)."),
        click.option("--resume", is_flag=True, help="Continue an interrupted capture into the same --out."),
        click.option("--force", is_flag=True, help="Replace --out if it exists."),
        click.option("--quiet", is_flag=True, help="No progress bar."),
    )):
        command = option(command)
    return command


# --num-layers: a model's decoder layer count; beyond the schema's bound it is a typo (an extra 0) or
# an id pasted in its place, and code walking 0..N ran out of memory on 99999999999999999999.
NUM_LAYERS = click.IntRange(1, MAX_NUM_LAYERS)


class _Finite(click.ParamType):
    """A finite number, at least ``minimum`` when one is given (above 0 when ``positive``): click's
    FloatRange and ``float`` let ``nan`` and ``inf`` through (accept --temperature nan ran and passed;
    --fail-cost nan always failed; a timeout of inf is none)."""

    def __init__(self, minimum: float | None = None, positive: bool = False, name: str = "NUMBER"):
        self.minimum, self.positive, self.name = minimum, positive, name

    def convert(self, value, param, ctx):
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        if self.minimum is not None and number < self.minimum:
            self.fail(f"{value!r} is below {self.minimum:g}", param, ctx)
        if self.positive and number <= 0:
            self.fail(f"{value!r} is not a positive number", param, ctx)
        return number


FINITE = _Finite()
FINITE_NONNEGATIVE = _Finite(minimum=0.0)
SECONDS = _Finite(positive=True, name="SECONDS")  # a timeout: inf would disable it

# --num-draft-tokens: engines draft a handful of tokens a step (SGLang and vLLM configs use 1-10);
# 99999999999999999999 overflowed torch's index type inside the chain (an internal error).
MAX_DRAFT_TOKENS = 64
