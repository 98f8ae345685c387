"""One sample read from a foreign dump, in the shape every format reader returns."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from alignprobe.errors import BadInput


@dataclasses.dataclass
class ForeignSample:
    """A sample as its file stores it, states still in the file's dtype."""

    path: str  # the file, for messages
    index: int | None  # the sample index in the file name (data_12 -> 12)
    token_ids: np.ndarray  # int64 [S]
    loss_mask: np.ndarray | None  # [S], where the format keeps one
    aux: torch.Tensor | None  # [S, k*H]: layer states side by side (all of them for speculators)
    final: torch.Tensor | None  # [S, H]: the last hidden state, where the format stores it apart
    hidden_size: int | None  # H where the file shows it (a final state, or speculators' [S, L, H])
    storage: str = ""  # the stored dtype when it is not the states' own (speculators FP8: "float8_e4m3fn")
    layout: str = ""  # the file's own layout where a format has several (specforge, specforge-online, eagle)

    def truncated(self, length: int) -> "ForeignSample":
        """The first ``length`` tokens (drops right padding)."""
        return dataclasses.replace(
            self,
            token_ids=self.token_ids[:length],
            loss_mask=None if self.loss_mask is None else self.loss_mask[:length],
            aux=None if self.aux is None else self.aux[:length],
            final=None if self.final is None else self.final[:length],
        )


def as_token_ids(value, path: str, key: str) -> np.ndarray:
    """A 1-D integer tensor (a leading batch dim of 1 is dropped) as int64 numpy."""
    if not isinstance(value, torch.Tensor):
        raise BadInput(f"{path}: {key} is a {type(value).__name__}, expected a tensor of token ids")
    if value.ndim == 2 and value.shape[0] == 1:
        value = value[0]
    if value.ndim != 1 or value.is_floating_point() or value.is_complex():
        raise BadInput(f"{path}: {key} has shape {tuple(value.shape)} and dtype {value.dtype}; expected integer ids [S]")
    ids = value.to(torch.int64).numpy()
    if len(ids) and ids.min() < 0:  # -100 is a label's ignore index, never a token id
        raise BadInput(f"{path}: {key} holds a negative id ({int(ids.min())}); token ids are >= 0")
    return ids


def as_states(value, path: str, key: str, length: int | None, ndim: int) -> torch.Tensor:
    """A float tensor of ``ndim`` dims (a leading batch dim of 1 is dropped) whose first dim is ``length``;
    ``length=None`` (a lenient read) takes any number of rows."""
    if not isinstance(value, torch.Tensor) or not value.is_floating_point():
        kind = value.dtype if isinstance(value, torch.Tensor) else type(value).__name__
        raise BadInput(f"{path}: {key} is {kind}, expected floating-point hidden states")
    if value.ndim == ndim + 1 and value.shape[0] == 1:
        value = value[0]
    if value.ndim != ndim:
        raise BadInput(f"{path}: {key} has shape {tuple(value.shape)}; expected {ndim} dims (plus an optional batch of 1)")
    if 0 in value.shape[1:]:
        raise BadInput(f"{path}: {key} has shape {tuple(value.shape)}: a state with no channels")
    if length is not None and value.shape[0] != length:
        raise BadInput(f"{path}: {key} holds {value.shape[0]} tokens but input_ids holds {length}")
    return value
