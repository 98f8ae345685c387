"""One sample as the audit sees it, whatever file layout it came from."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch


@dataclasses.dataclass
class AuditSample:
    """A sample: token ids, optional loss mask, and each stream's states [rows, slices, H]."""

    name: str  # stable across runs: "<file relative to the source>" or "<dump>#<sample id>"
    source: str  # the dataset (PATH argument) it belongs to
    token_ids: np.ndarray  # int64 [S]
    loss_mask: np.ndarray | None  # int64 0/1 [S], where the layout keeps one
    states: dict[str, torch.Tensor]  # stream -> [rows, slices, H] in the stored dtype (rows may differ from S)
    labels: dict[str, list[str]]  # stream -> a label per slice
    padding: int = 0  # trailing rows that are the layout's padding (SpecForge: pad id 0 with loss_mask 0)
    mask_missing: str | None = None  # why the layout gives no loss mask here (a note of the audit)
    dataset_mismatch: tuple[int, int] | None = None  # speculators: (dataset row's ids, token_ids) where they differ
    # A marked dump's short sample (dump/marks.py): the token positions [start, stop) the engine
    # returned rows for. ``states`` then holds only those rows; the rest were NaN placeholders.
    returned: tuple[int, int] | None = None
    engine: str = ""  # the capture's engine (dump provenance), for the fix text of a short sample

    @property
    def expected_rows(self) -> int:
        """The state rows the sample should hold: one per token, or those the engine returned."""
        return len(self.token_ids) if self.returned is None else self.returned[1] - self.returned[0]
