"""The contract every explanation meets, and the sampled rows they are fitted on.

An explanation is one hypothesis about what a serve slice is, as a transform of the train states
(the same HF index, another index, the same rows shifted, rotated, scaled...). Each is a small module
with a ``fit(rows, j)`` that fits its parameters on the FIT rows and scores the fitted transform on
the HELD-OUT rows, so a flexible transform (a rotation has H(H-1)/2 parameters) cannot win by
overfitting. ``complexity`` orders them: the simplest one that fits within the noise the policy
allows is the cause named (explain/__init__.py).
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

import numpy as np

from alignprobe.compare.result import ExplanationFit

Key = tuple[int, str]  # (HF index, "pre"/"post"), as mapping.candidate_key


@dataclasses.dataclass
class ExplainRows:
    """Sampled rows of one serve stream and of the train slices it may be a transform of.

    ``serve[:, j]`` is serve slice j ([R, k, H], float32); ``train[key]`` the train slice of that
    key on the same rows (train row r is aligned with serve row r by the token pairing). ``sample``
    / ``position`` say where each row is; ``fit`` marks the rows parameters are fitted on (alternate
    runs of positions inside each sample), the others are held out.
    """

    serve: np.ndarray
    train: dict[Key, np.ndarray]
    sample: np.ndarray
    position: np.ndarray
    sample_ids: list[str]
    fit: np.ndarray
    expected: list[Key | None]  # per serve slice: the train slice it should equal
    claimed: list[int | None]  # per serve slice: the HF index the serve dump claims
    num_layers: int
    tolerance: float  # held-out rel-RMS within which a transform "fits": the noise the policy allows
    drift_tolerance: float  # ... and the most that numeric drift alone explains
    position_growth: float
    train_provenance: dict
    serve_provenance: dict
    labels: dict[Key, str] = dataclasses.field(default_factory=dict)

    @property
    def held_out(self) -> np.ndarray:
        return ~self.fit

    def rows_at(self, sample: np.ndarray, position: np.ndarray) -> np.ndarray:
        """The row index of each (sample, position), -1 where that row was not read."""
        table = self.__dict__.get("_table")
        if table is None:
            table = np.full((int(self.sample.max()) + 1, int(self.position.max()) + 1), -1, dtype=np.int64)
            table[self.sample, self.position] = np.arange(len(self.sample))
            self.__dict__["_table"] = table
        sample, position = np.asarray(sample), np.asarray(position)
        inside = (sample >= 0) & (sample < table.shape[0]) & (position >= 0) & (position < table.shape[1])
        out = np.full(sample.shape, -1, dtype=np.int64)
        out[inside] = table[sample[inside], position[inside]]
        return out

    def as_is(self, key: Key, j: int) -> tuple[float, float, float]:
        """:func:`scores` of train slice ``key`` taken unchanged as serve slice ``j``: identity, drift
        and index_offset's drift check all predict that, so it is measured once (the same numbers)."""
        cache = self.__dict__.setdefault("_as_is", {})
        if (key, j) not in cache:
            cache[key, j] = scores(self.train[key], self.serve[:, j], self.fit)
        return cache[key, j]

    def label(self, key: Key) -> str:
        return self.labels.get(key) or f"HF[{key[0]}]" + (" pre-norm" if key[1] == "pre" and key[0] == self.num_layers else "")


class Explanation(Protocol):
    """One hypothesis: ``fit`` returns its held-out fit for serve slice ``j``, or None when it does
    not apply (the train side lacks what it needs)."""

    name: str
    complexity: int  # lower is simpler; the simplest explanation that fits wins

    def fit(self, rows: ExplainRows, j: int) -> ExplanationFit | None: ...


SELECT_COLUMNS = 1024  # channels, at most, that a choice among candidates is made on


def choice_columns(hidden: int) -> slice:
    """Evenly spaced channels a choice among candidates (which shift, which other index) is made on,
    before the chosen one is scored on every channel of the held-out rows. A dense hidden state's
    rel-RMS over 1024 of 7168 channels estimates the whole within a few percent, while the
    candidates being told apart differ by far more (an exact match against a neighbour layer); the
    choice took a third of the explanations' time at H = 7168."""
    return slice(None, None, max(1, -(-hidden // SELECT_COLUMNS)))


def rel_rms(predicted: np.ndarray, actual: np.ndarray) -> float:
    """||actual - predicted|| / ||actual|| over the rows given (inf when actual is all zero)."""
    den = float(np.sum(actual * actual, dtype=np.float64))
    if den <= 0:
        return float("inf")
    diff = actual - predicted
    return float(np.sqrt(np.sum(diff * diff, dtype=np.float64) / den))


def mean_cosine(predicted: np.ndarray, actual: np.ndarray) -> float:
    num = np.sum(predicted * actual, axis=1)
    den = np.linalg.norm(predicted, axis=1) * np.linalg.norm(actual, axis=1)
    ok = den > 0
    return float(np.mean(num[ok] / den[ok])) if ok.any() else float("nan")


def scores(predicted: np.ndarray, actual: np.ndarray, fit_mask: np.ndarray) -> tuple[float, float, float]:
    """(held-out rel-RMS, held-out mean cosine, fit rel-RMS) of predictions on every row (NaN where
    there are no such rows)."""
    held = ~fit_mask
    held_rms = held_cosine = float("nan")
    if held.any():
        held_predicted, held_actual = predicted[held], actual[held]  # once for both scores
        held_rms, held_cosine = rel_rms(held_predicted, held_actual), mean_cosine(held_predicted, held_actual)
    fit_rms = rel_rms(predicted[fit_mask], actual[fit_mask]) if fit_mask.any() else float("nan")
    return held_rms, held_cosine, fit_rms


def scored(name: str, complexity: int, rows: ExplainRows, predicted: np.ndarray, actual: np.ndarray,
           params: dict, summary: str, *, fit_mask: np.ndarray | None = None, tolerance: float | None = None,
           measured: tuple[float, float, float] | None = None) -> ExplanationFit:
    """An ExplanationFit from predictions on every row: fitted on ``rows.fit``, scored on the rest
    (``measured``: their :func:`scores`, where already known)."""
    fit_mask = rows.fit if fit_mask is None else fit_mask
    held = ~fit_mask
    limit = rows.tolerance if tolerance is None else tolerance
    held_rms, held_cosine, fit_rms = scores(predicted, actual, fit_mask) if measured is None else measured
    return ExplanationFit(
        name=name,
        complexity=complexity,
        fits=bool(np.isfinite(held_rms) and held_rms <= limit),
        held_out_rel_rms=held_rms,
        held_out_cosine=held_cosine,
        fit_rel_rms=fit_rms,
        held_out_rows=int(held.sum()),
        params=params,
        summary=summary,
    )
