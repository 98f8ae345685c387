"""``--engine-arg KEY=VALUE``: any keyword of the engine's constructor, passed through as given."""

from __future__ import annotations

import json
from typing import Any, Iterable

from alignprobe.errors import BadInput
from alignprobe.safe_json import loads_json


def parse_engine_args(pairs: Iterable[str]) -> dict[str, Any]:
    """``["max_model_len=1024", "enforce_eager=true", "device=cpu"]`` -> keywords; values are JSON, else text."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key.isidentifier():
            raise BadInput(f"--engine-arg {pair!r}: give KEY=VALUE, e.g. max_model_len=1024 or enforce_eager=true")
        try:
            json.loads(value)
        except ValueError:
            options[key] = value  # a plain word: cpu, torch_native, a path
            continue
        except RecursionError:
            pass  # JSON too deep to read: the checked read below says so in one line
        options[key] = loads_json(value, f"--engine-arg {key}")  # NaN, 1e999 and depth refused
    return options
