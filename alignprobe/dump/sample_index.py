"""The per-sample facts every dump-like reader derives from its sample ids and token offsets (the
HDF5 dump, a foreign folder read in place): one place, so the readers cannot disagree on them."""

from __future__ import annotations

import numpy as np

from alignprobe.errors import BadInput


class SampleIndex:
    """Mixed into a reader that sets ``path``, ``sample_ids``, ``offsets`` ([S+1] int64, row 0 of
    each sample and the total) and ``_index`` (sample id -> position)."""

    path: str
    sample_ids: list[str]
    offsets: np.ndarray
    _index: dict[str, int]
    # A read of a few rows costs about those rows (a chunked HDF5 dump), so a reader beside an in-order
    # pass may read ahead of it; False where a read decodes or warms whole files, into caches sized for
    # a pass in order (a foreign folder read in place).
    cheap_random_reads: bool = False

    @property
    def num_samples(self) -> int:
        return len(self.sample_ids)

    @property
    def num_tokens(self) -> int:
        return int(self.offsets[-1])

    def index_of(self, sample_id: str) -> int:
        try:
            return self._index[sample_id]
        except KeyError:
            raise BadInput(f"{self.path}: no sample with id {sample_id!r}") from None

    def span(self, sample: int | str) -> tuple[int, int]:
        """Flat token range ``[start, stop)`` of a sample, by position or id."""
        i = self.index_of(sample) if isinstance(sample, str) else int(sample)
        # a negative or past-the-end position gave an IndexError, or (-1) the span of no sample at all
        if not 0 <= i < len(self.offsets) - 1:
            raise BadInput(f"{self.path}: no sample at position {i}; it holds {len(self.offsets) - 1} (0 to {len(self.offsets) - 2})")
        return int(self.offsets[i]), int(self.offsets[i + 1])

    def sample_length(self, sample: int | str) -> int:
        start, stop = self.span(sample)
        return stop - start
