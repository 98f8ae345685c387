"""speculators' offline hidden states: ``hs_<idx>.safetensors`` files.

Read from speculators' source (vllm-project/speculators c05b95b, 2026-08-20):
- scripts/data_generation_offline.py moves the file vLLM's hidden-states connector wrote for a
  request to ``{out}/hidden_states/hs_{idx}.safetensors``; src/speculators/data_generation/offline.py
  checks it holds ``token_ids [S]`` and ``hidden_states [S, L, H]``.
- scripts/launch_vllm.py sets vLLM's ``eagle_aux_hidden_state_layer_ids`` to the target layer ids
  (default ``[2, N//2, N-3]``) with ``num_hidden_layers`` appended (--include-last-layer, default on):
  L = 4 slices, the last the pre-norm output of the last layer (vLLM numbering: id k = HF[k]).
- The FP8 backend (hs-connectors' FP8HiddenStatesConnector, hs_connectors/fp8_utils.py) stores
  ``hidden_states`` as float8_e4m3fn with ``hidden_states_scales`` float32 [S, 1, 1] (an older version
  [S, 1]): per token, scale = amax / 448 and fp8 = x / scale, so the values are fp8 * scale.
"""

from __future__ import annotations

import os

import numpy as np
import torch

from alignprobe.errors import BadInput
from alignprobe.dump.schema import FINAL_NORM_PRE
from alignprobe.importers.files import SafetensorsFile, file_index, numbered_files
from alignprobe.importers.layout import DatasetRow, IdsFit, Layout, SampleRef
from alignprobe.importers.sample import ForeignSample, as_states, as_token_ids

SUFFIX = ".safetensors"
SCALES_KEY = "hidden_states_scales"
FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e5m2)


def list_files(root: str) -> list[str]:
    """Every ``hs_<idx>.safetensors`` under ``root`` (or ``root`` itself), by sample index."""
    return numbered_files(root, "hs_", (SUFFIX,))


def _opened(path: str, strict: bool = True) -> tuple[SafetensorsFile, np.ndarray]:
    """The file and its token ids, once it is known to be a speculators file (with tokens, when strict)."""
    f = SafetensorsFile(path)
    missing = {"token_ids", "hidden_states"} - f.keys
    if missing:
        raise BadInput(
            f"{path}: not a speculators hidden-state file: missing {', '.join(sorted(missing))} "
            f"(keys: {', '.join(sorted(f.keys)) or 'none'})"
        )
    tokens = as_token_ids(f.tensor("token_ids"), path, "token_ids")
    if strict and len(tokens) == 0:  # (an S=0 file cannot be reshaped into rows: say so before trying)
        raise BadInput(f"{path}: holds no tokens (token_ids is empty); remove the file or capture it again")
    return f, tokens


def read(path: str, strict: bool = True) -> ForeignSample:
    """One file, its ``[S, L, H]`` states side by side as ``aux [S, L*H]``. ``strict=False`` (the
    audit's) takes states whose rows differ from the tokens and FP8 states stored without a scale (as
    stored), so the checks report them."""
    f, tokens = _opened(path, strict)
    raw = f.tensor("hidden_states")
    scales = f.tensor(SCALES_KEY) if SCALES_KEY in f.keys else None
    rows = len(tokens) if strict else raw.shape[0] if raw.ndim == 3 else -1
    states = dequantized(raw, scales, path, rows) if strict or scales is not None else raw
    states = as_states(states, path, "hidden_states", len(tokens) if strict else None, 3)  # [S, L, H]
    hidden = int(states.shape[-1])
    storage = str(raw.dtype).replace("torch.", "") if scales is not None else ""
    return ForeignSample(path, file_index(path), tokens, None, states.flatten(1), None, hidden, storage)


def dequantized(states: torch.Tensor, scales: torch.Tensor | None, path: str, length: int) -> torch.Tensor:
    """FP8 states times their per-token scale, in float32; any other dtype as stored."""
    if not isinstance(states, torch.Tensor) or states.dtype not in FP8_DTYPES:
        if scales is not None:
            raise BadInput(f"{path}: {SCALES_KEY} is there but hidden_states is {getattr(states, 'dtype', states)}, "
                           "not FP8: the file is not what the FP8 connector writes")
        return states
    if scales is None:
        raise BadInput(f"{path}: hidden_states is {states.dtype} but the file has no {SCALES_KEY}: "
                       "FP8 states cannot be read without their per-token scale")
    if scales.numel() != length or not scales.is_floating_point():
        raise BadInput(f"{path}: {SCALES_KEY} has shape {tuple(scales.shape)} and dtype {scales.dtype}; "
                       f"expected one float scale per token ({length})")
    per_token = scales.to(torch.float32).reshape(length, *([1] * (states.ndim - 1)))
    return states.to(torch.float32) * per_token



def read_tokens(path: str):
    """Only ``token_ids`` of a file (safetensors reads just that tensor)."""
    f = SafetensorsFile(path)
    if "token_ids" not in f.keys:
        raise BadInput(f"{path}: not a speculators hidden-state file: missing token_ids")
    return as_token_ids(f.tensor("token_ids"), path, "token_ids"), None


class LazyFile:
    """One ``hs_<idx>.safetensors`` whose rows are read on demand (safetensors' own slices): a random
    read of a few rows reads those rows, not the file. ``open`` checks what :func:`read` checks, from
    the header and the token ids alone; ``rows(a, b)`` gives what :func:`read`'s states hold there
    (FP8 times its per-token scale, the same arithmetic row by row)."""

    def __init__(self, path: str, states, scales, tokens, shape: tuple[int, ...], dtype: torch.dtype):
        self.path, self._states, self._scales, self.token_ids = path, states, scales, tokens
        self.shape, self.dtype = shape, dtype

    @classmethod
    def open(cls, path: str, opened=_opened) -> "LazyFile | None":
        """The file opened lazily, or None when its layout needs the whole-file reader (a batch dim).
        ``opened``: what opens it and reads its token ids (another layout of these files: its checks)."""
        f, tokens = opened(path)
        states = f.slice("hidden_states")
        shape = tuple(states.get_shape())
        if len(shape) != 3 or shape[0] != len(tokens) or shape[0] == 0:
            return None
        dtype = states[0:1].dtype
        scales = f.slice(SCALES_KEY) if SCALES_KEY in f.keys else None
        if scales is not None:
            scale_shape = tuple(scales.get_shape())
            first = scales[0:1]
            if dtype not in FP8_DTYPES or int(np.prod(scale_shape)) != len(tokens) or not first.is_floating_point() \
                    or scale_shape[0] != len(tokens):
                return None  # the whole-file reader says what is wrong, in its words
        elif dtype in FP8_DTYPES or not torch.empty(0, dtype=dtype).is_floating_point():
            return None
        return cls(path, states, scales, tokens, shape, dtype)

    def rows(self, a: int, b: int) -> torch.Tensor:
        """Rows ``[a, b)`` as ``read`` gives them: ``[b - a, L * H]``, FP8 dequantized to float32."""
        states = self._states[a:b]
        scales = self._scales[a:b] if self._scales is not None else None
        return dequantized(states, scales, self.path, b - a).reshape(b - a, -1)


class SpeculatorsLayout(Layout):
    """``hs_<idx>.safetensors``, one sample each, the states ``[S, L, H]``: no final state apart; with
    --include-last-layer (speculators' default) the last slice is vLLM's id N, the pre-norm final."""

    name = "speculators"
    described = "speculators hs_*.safetensors"
    stacked = "hidden_states"

    def files(self, path: str) -> list[str]:
        return list_files(path) if os.path.isdir(path) or path.endswith(SUFFIX) else []

    def read(self, ref: SampleRef, mmap: bool = True, strict: bool = True) -> ForeignSample:
        return read(ref.path, strict=strict)

    def read_tokens(self, ref: SampleRef):
        return read_tokens(ref.path)

    def fit_ids(self, ids: list[int], slices: int, num_layers: int, given: bool) -> IdsFit:
        notes: list[str] = []
        if not given and slices == len(ids) - 1:
            ids = ids[:-1]  # --no-include-last-layer: the three aux ids without N
        if len(ids) == slices - 1:
            ids = ids + [num_layers]
            notes.append(f"{slices} slices for {slices - 1} ids: appended N={num_layers} (speculators' --include-last-layer)")
        if ids and ids[-1] == num_layers and len(ids) == slices:
            # the last slice is the last layer's pre-norm output: the final state, not an aux slice
            return IdsFit(ids, slices - 1, tail_final_norm=FINAL_NORM_PRE, notes=tuple(notes))
        return IdsFit(ids, slices, notes=tuple(notes))

    def storage_note(self, storage: str) -> str:
        return f"states stored as {storage} with a per-token scale: dequantized to float32 (values * scale)"

    def lazy_rows(self, ref: SampleRef) -> "LazyFile | None":
        return LazyFile.open(ref.path)

    def dataset_row(self, ref: SampleRef, source: str) -> DatasetRow:
        """prepare-data's row ``i`` for ``hs_{i}.safetensors``: the trainer takes the loss mask from it."""
        from alignprobe.importers import speculators_dataset

        try:
            ids, mask = speculators_dataset.row_of(ref.path, source)
        except speculators_dataset.Missing as missing:
            return DatasetRow(missing=str(missing))
        return DatasetRow(ids, mask)


LAYOUT = SpeculatorsLayout()
