"""An engine's own crash (transformers, SGLang, vLLM) is the engine's failure, not alignprobe's.

It reaches the user as one line that names the engine, what it was doing and why it failed, with
exit 2 (README "Exit codes"), instead of an "internal error" (exit 3). alignprobe's own refusals
and Ctrl-C pass through unchanged.
"""

from __future__ import annotations

import contextlib

from alignprobe.errors import AlignprobeError, BadInput, first_line


class EngineFailed(BadInput):
    """The inference engine failed while alignprobe drove it: raised in this process, or crashed, hung
    or reported an error in its own (the message then says where its log is)."""


@contextlib.contextmanager
def engine_failure(engine: str, doing: str, fix: str = ""):
    """Turn any exception raised inside the block into :class:`EngineFailed`."""
    try:
        yield
    except AlignprobeError:
        raise
    except Exception as exc:
        if type(exc).__name__ == "OutOfMemoryError":  # the caller says which setting to lower
            raise
        tail = f"; {fix}" if fix else ""
        raise EngineFailed(f"{engine} failed while {doing}: {type(exc).__name__}: {first_line(exc)}{tail}") from exc

