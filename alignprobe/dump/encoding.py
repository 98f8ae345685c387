"""How each captured dtype is stored in HDF5, exactly.

HDF5 has no bfloat16 type. A bfloat16 value is the upper 16 bits of a float32, so we store its raw
bits as uint16 (attribute ``encoding = "bfloat16-bits"``) and widen them back by a 16-bit shift:
no rounding on the way in or out. float16 and float32 are stored natively.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

# torch is imported where a tensor is made, not here: reading a dump (compare, inspect) needs only
# numpy and h5py, and importing torch costs ~2 s and 230 MB (CPU build) to 500 MB (CUDA build) of
# resident memory that a reader never uses (benchmarks/read_memory.py).

ENCODING_NATIVE = "native"
ENCODING_BF16_BITS = "bfloat16-bits"

STORAGE_DTYPE = {"bfloat16": np.uint16, "float16": np.float16, "float32": np.float32}


def __getattr__(name: str):
    """``TORCH_DTYPE`` (dump dtype name -> torch dtype) and ``DTYPE_NAME`` (its inverse), made on first use."""
    if name in ("TORCH_DTYPE", "DTYPE_NAME"):
        import torch

        torch_dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
        globals().update(TORCH_DTYPE=torch_dtype, DTYPE_NAME={v: k for k, v in torch_dtype.items()})
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def is_tensor(x) -> bool:
    """Whether ``x`` is a torch tensor, without importing torch (a tensor exists only once it is imported)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def encoding_of(dtype: str) -> str:
    return ENCODING_BF16_BITS if dtype == "bfloat16" else ENCODING_NATIVE


def stored_dtype(stored: np.dtype, encoding: str, where: str) -> str:
    """The dtype a stream stored as ``stored`` with this ``encoding`` attribute ("" where absent:
    native) holds, or one :class:`BadInput` line for a pairing no writer makes: 16-bit integers said
    native were read as the numbers 0..65535 and compared, float32 said bfloat16 bits failed inside
    the widening."""
    from alignprobe.errors import BadInput

    stored = np.dtype(stored)
    native = {np.dtype(t): name for name, t in STORAGE_DTYPE.items() if name != "bfloat16"}
    if encoding == ENCODING_BF16_BITS:
        if stored == np.uint16:
            return "bfloat16"
        instead = f"a {stored} stream says encoding = '{ENCODING_NATIVE}'" if stored in native else \
            "write bfloat16 states as uint16 bits"
        raise BadInput(f"{where} is {stored} with encoding '{ENCODING_BF16_BITS}', which is only ever uint16: {instead}")
    if encoding not in ("", ENCODING_NATIVE):
        raise BadInput(f"{where}: encoding {encoding!r} is not one alignprobe reads: '{ENCODING_BF16_BITS}' "
                       f"(bfloat16 as its uint16 bits) or '{ENCODING_NATIVE}' (float16, float32)")
    if stored in native:
        return native[stored]
    said = f"encoding '{ENCODING_NATIVE}'" if encoding else "no encoding attribute (native)"
    if stored in (np.uint16, np.int16):
        bits = "" if stored == np.uint16 else " stored as uint16 (raw.view(np.uint16))"
        raise BadInput(f"{where} holds 16-bit integers ({stored}) with {said}: integers are no hidden state; "
                       f"if they are bfloat16 bit patterns, write them{bits} with encoding = '{ENCODING_BF16_BITS}'")
    raise BadInput(f"{where} is stored as {stored}: hidden states are float16 or float32 (encoding "
                   f"'{ENCODING_NATIVE}') or bfloat16 bits in uint16 (encoding '{ENCODING_BF16_BITS}')")


def dtype_name(states: "torch.Tensor | np.ndarray") -> str:
    """The dump dtype name of a tensor or array; raises ValueError for anything else."""
    if is_tensor(states):
        name = __getattr__("DTYPE_NAME").get(states.dtype)
    else:
        name = {np.dtype(np.float16): "float16", np.dtype(np.float32): "float32"}.get(states.dtype)
    if name is None:
        raise ValueError(f"states of dtype {states.dtype} cannot be stored: use bfloat16, float16 or float32")
    return name


def to_storage(states: "torch.Tensor | np.ndarray", dtype: str) -> np.ndarray:
    """States (any float dtype) cast to ``dtype`` and laid out as stored on disk."""
    import torch

    if isinstance(states, np.ndarray):
        states = torch.from_numpy(states)
    states = states.detach().to(device="cpu", dtype=__getattr__("TORCH_DTYPE")[dtype]).contiguous()
    if dtype == "bfloat16":
        return states.view(torch.int16).numpy().view(np.uint16)
    return states.numpy()


def from_storage(raw: np.ndarray, encoding: str) -> np.ndarray:
    """Stored values widened to float32 (exact for every stored dtype)."""
    if encoding == ENCODING_BF16_BITS:
        # One pass into one new array: ``raw.astype(uint32) << 16`` made two 2x-sized temporaries
        # and ran at a fifth of this speed (benchmarks/read_memory.py).
        widened = np.empty(raw.shape, dtype=np.uint32)
        np.left_shift(raw, 16, out=widened, dtype=np.uint32)
        return widened.view(np.float32)
    return raw.astype(np.float32, copy=False)


def widen_into(out: np.ndarray, raw: np.ndarray, encoding: str) -> None:
    """:func:`from_storage` into ``out`` (float32, C-contiguous, raw's shape): no array of its own."""
    if encoding == ENCODING_BF16_BITS:
        np.left_shift(raw, 16, out=out.view(np.uint32), dtype=np.uint32)
    else:
        out[...] = raw
