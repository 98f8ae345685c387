"""The arguments of :func:`alignprobe.compare` a notebook passes, checked as the CLI's click types
check the flags: a wrong type or value is one :class:`BadInput` line naming the argument, not a
TypeError or IndexError from deep inside the pass (``sample=1.5``, ``max_tokens=float("nan")``,
``block_bytes=-1``, ``policy=[...]``, ``train=None`` each escaped that way, or ran silently)."""

from __future__ import annotations

import os
from typing import Any, Literal, overload

import numpy as np

from alignprobe.errors import BadInput


@overload
def checked_count(value: Any, name: str, allow_none: Literal[False]) -> int: ...
@overload
def checked_count(value: Any, name: str, allow_none: bool = True) -> int | None: ...
def checked_count(value: Any, name: str, allow_none: bool = True) -> int | None:
    """A whole number of at least 1 (``None`` where the argument is optional)."""
    if value is None and allow_none:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise BadInput(f"{name} must be a whole number of at least 1, got {value!r} ({type(value).__name__})")
    if value < 1:
        raise BadInput(f"{name} must be at least 1, got {value}")
    return int(value)


def checked_source(value: Any, side: str) -> Any:
    """A path (a dump file or a foreign folder) or an already open source with streams."""
    if isinstance(value, (str, os.PathLike)) or hasattr(value, "streams"):
        return value
    raise BadInput(f"{side} must be the path of a dump or a hidden-state folder, or an open Dump; "
                   f"got {type(value).__name__}")


def checked_policy(value: Any) -> Any:
    """What Policy.resolve takes: a Policy, a mapping of overrides, a file path, or None."""
    from collections.abc import Mapping

    from alignprobe.compare.policy import Policy

    if value is None or isinstance(value, (Policy, Mapping, str, os.PathLike)):
        return value
    raise BadInput(f"policy must be a Policy, a dict of overrides or the path of a policy file; got {type(value).__name__}")


def checked_device(value: Any) -> Any:
    """A device name, or an object that already is Kernels (it has ``block_bytes``)."""
    if value is None or isinstance(value, str) or hasattr(value, "block_bytes"):
        return value
    raise BadInput(f"device must be a name such as 'cpu', 'cuda' or 'cuda:1'; got {value!r} ({type(value).__name__})")
