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
from alignprobe.findings import Note
from alignprobe.findings.severity import Severity

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
    # Where a serve sample's token ids are a strict prefix of its train sample's, the expected train
    # slices' rows of the train sample's END, aligned row by row with the serve rows (row r: train
    # position position[r] + end_offsets[sample[r]]); NaN rows elsewhere. Empty when no sample is shorter.
    end_rows: dict[Key, np.ndarray] = dataclasses.field(default_factory=dict)
    end_offsets: list[int] = dataclasses.field(default_factory=list)  # per sample: train length - serve length, or 0
    # Where the train side holds a few layers only (a SpecForge or speculators set) and the serve dump
    # holds a layer stack too (capture hf), the serve side's own layers near the expected and claimed
    # indices, on the same rows: the index a train slice really is can then be measured (index_offset).
    serve_layers: dict[Key, np.ndarray] = dataclasses.field(default_factory=dict)
    # The power of two every value above was multiplied by (set here, never given): 1 unless a value
    # exceeds LARGEST_FITTED, where float32 squares and their sums over channels and rows overflowed
    # (rotation's SVD did not converge on states of 1e30). A common power of two is exact, so every
    # fit of a linear transform and every rel-RMS and cosine is the same; a fit whose parameter is a
    # value (saturated's limit) or depends on the bits (reinterpreted) divides it back out.
    value_scale: float = dataclasses.field(default=1.0, init=False)

    def __post_init__(self):
        self.value_scale = fitting_scale([self.serve, *self.train.values(), *self.end_rows.values(),
                                          *self.serve_layers.values()])
        if self.value_scale != 1.0:
            self.serve = _scaled(self.serve, self.value_scale)
            self.train = {key: _scaled(v, self.value_scale) for key, v in self.train.items()}
            self.end_rows = {key: _scaled(v, self.value_scale) for key, v in self.end_rows.items()}
            self.serve_layers = {key: _scaled(v, self.value_scale) for key, v in self.serve_layers.items()}

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

    def serve_squares(self, j: int) -> np.ndarray:
        """Each row's squared norm of serve slice ``j`` (:func:`row_sums`), measured once."""
        return self._cached("_serve_squares", j, lambda: row_sums(self.serve[:, j]))

    def train_squares(self, key: Key) -> np.ndarray:
        """Each row's squared norm of train slice ``key``, measured once."""
        return self._cached("_train_squares", key, lambda: row_sums(self.train[key]))

    def as_is_rows(self, key: Key, j: int) -> RowFit:
        """Train slice ``key`` taken unchanged as serve slice ``j``, per row: identity, drift (its
        signature scores this prediction on a dozen subsets of rows), index_offset's drift check and
        the other slices' depth signature all read it, so the H channels are read once for all."""
        return self._cached("_as_is_rows", (key, j), lambda: RowFit.of(
            self.train[key], self.serve[:, j], actual_squares=self.serve_squares(j),
            predicted_squares=self.train_squares(key)))

    def as_is(self, key: Key, j: int) -> tuple[float, float, float]:
        """:func:`scores` of train slice ``key`` taken unchanged as serve slice ``j``: identity, drift
        and index_offset's drift check all predict that, so it is measured once (the same numbers)."""
        return self._cached("_as_is", (key, j), lambda: self.as_is_rows(key, j).scores(self.fit))

    def _cached(self, table: str, key, make):
        cache = self.__dict__.setdefault(table, {})  # not a field: the rows' own derived data
        if key not in cache:
            cache[key] = make()
        return cache[key]

    def label(self, key: Key) -> str:
        return self.labels.get(key) or f"HF[{key[0]}]" + (" pre-norm" if key[1] == "pre" and key[0] == self.num_layers else "")


# The largest value the fits take as it is: its square (1.8e19) summed over 2^17 channels and 2^17 rows
# stays below float32's limit (3.4e38); real hidden states stay below 1e5, so only broken ones are scaled.
LARGEST_FITTED = 2.0**32


def fitting_scale(arrays: list[np.ndarray]) -> float:
    """The power of two that brings the largest finite magnitude of ``arrays`` to at most
    LARGEST_FITTED (1.0 where it already is)."""
    largest = 0.0
    for x in arrays:
        if x.size:
            with np.errstate(invalid="ignore"):
                peak = float(np.nanmax(np.abs(x), initial=0.0))  # NaN rows: end rows of no sample
            largest = max(largest, peak)
    if not largest > LARGEST_FITTED or not np.isfinite(largest):
        return 1.0
    _, exponent = np.frexp(largest / LARGEST_FITTED)  # largest / LARGEST_FITTED < 2^exponent
    return float(np.ldexp(1.0, -int(exponent)))


# A scaled row whose largest value is below this is a zero row: its squares would fall below float32's
# normal range (its norm 0 or a few bits, a norm ratio to the other side overflowing). It is 2^80 times
# smaller than the largest state, so no fit at this common scale could tell it from zero anyway.
SMALLEST_FITTED = 2.0**-48


def _scaled(x: np.ndarray, scale: float) -> np.ndarray:
    out = x * np.float32(scale)
    with np.errstate(invalid="ignore"):  # NaN rows (end rows of no sample) stay NaN
        out[np.abs(out).max(axis=-1) < SMALLEST_FITTED] = 0
    return out


@dataclasses.dataclass(frozen=True)
class Named:
    """What an explanation names where it wins some slices of a stream: the finding's code and fix (its
    title is the slices' summaries, its evidence their fits, unless ``title`` / ``evidence`` are its own)."""

    code: str
    fix: str
    severity: Severity | None = None  # None: the policy's or the code's
    notes: tuple[Note, ...] = ()
    # a finding it words itself (a title and evidence of its own), never joined with another of its code
    title: str = ""
    evidence: dict | None = None


@dataclasses.dataclass(frozen=True)
class Naming:
    """What an explanation may read to name its slices: the stream, what training expected and both sides."""

    stream: str
    role: str
    explained: list  # every SliceExplanation of the stream
    expected_hf: list[int]
    num_layers: int
    serve_provenance: dict
    train_provenance: dict
    drafter_reads_aux: bool  # an EAGLE-3 drafter reads the aux concat, never the final state


def evidence_of(group: list) -> dict:
    """The evidence of a finding named by the explanations of ``group`` (SliceExplanations): each fit."""
    return {"explained": [
        {"serve_slice": e.serve_slice, "expected": e.label, "explanation": e.winner.name,
         "params": e.winner.params, "held_out_rel_rms": e.winner.held_out_rel_rms,
         "held_out_rows": e.winner.held_out_rows,
         "runner_up": e.runner_up.name if e.runner_up else "",
         "runner_up_held_out_rel_rms": e.runner_up.held_out_rel_rms if e.runner_up else None}
        for e in group]}


class Explanation(Protocol):
    """One hypothesis: ``fit`` returns its held-out fit for serve slice ``j``, or None when it does
    not apply (the train side lacks what it needs). It names its own finding (``code``, ``fix``, or
    ``names`` where that depends on the fits) and says how the selection treats it; an explanation
    subclasses this Protocol for the defaults."""

    name: str  # the explanation's name (ExplanationFit.name); its module is compare/explain/<name>.py
    complexity: int  # lower is simpler; the simplest explanation that fits wins
    code: str | None = None  # the finding it names; None: the slice is its expected train slice (no finding)
    fix: str = ""
    judged: bool = False  # a slice it wins is the expected train slice (perhaps scaled): the numeric checks judge it
    defers_to_mapping: bool = False  # names nothing (and is judged) where the mapping search measured the slice right
    transform: bool = False  # a continuous transform: a cause only where it moves the states past the tolerance
    tried_where_identity_fits: bool = True  # False: where identity fits it cannot win, so it is not fitted
    predicts_as_identity: bool = False  # predicts what identity does: never replaces a simpler winner
    from_serve: bool = False  # predicted from another serve slice: its residual says nothing of the train state
    narrower_than: tuple[str, ...] = ()  # explanations not tried where this one fits (they would blur its pattern)

    def fit(self, rows: ExplainRows, j: int) -> ExplanationFit | None: ...

    def names(self, group: list, naming: Naming) -> Named | None:
        """The finding this names on ``group`` (SliceExplanations it wins on one stream)."""
        return Named(self.code, self.fix) if self.code else None


class FromExpected(Explanation):
    """An explanation of serve slice j as a transform of the train slice it is expected to be: ``fit``
    gives both to ``fit_pair``, and None where that slice is unknown or not among the rows read."""

    def fit(self, rows: ExplainRows, j: int) -> ExplanationFit | None:
        key = rows.expected[j]
        if key is None or key not in rows.train:
            return None
        return self.fit_pair(rows, j, key, rows.train[key], rows.serve[:, j])

    def fit_pair(self, rows: ExplainRows, j: int, key: Key, a: np.ndarray, b: np.ndarray) -> ExplanationFit | None:
        """The fit of serve rows ``b`` (slice ``j``) as a transform of train rows ``a`` (slice ``key``)."""
        ...


SELECT_COLUMNS = 1024  # channels, at most, that a choice among candidates is made on


def choice_columns(hidden: int) -> slice:
    """Evenly spaced channels a choice among candidates (which shift, which other index) is made on,
    before the chosen one is scored on every channel of the held-out rows. A dense hidden state's
    rel-RMS over 1024 of 7168 channels estimates the whole within a few percent, while the
    candidates being told apart differ by far more (an exact match against a neighbour layer); the
    choice took a third of the explanations' time at H = 7168."""
    return slice(None, None, max(1, -(-hidden // SELECT_COLUMNS)))


SUM_CHUNK = 128  # channels a row's float32 partial sum runs over before it is added in float64


def row_sums(x: np.ndarray, y: np.ndarray | None = None) -> np.ndarray:
    """Each row's sum of ``x * y`` (of ``x * x`` without ``y``) over the channels (the last axis), in
    float64. einsum multiplies and adds in one pass with no temporary of the rows' size: about 3x
    faster than a product then a sum on 160 x 7168 float32 rows (2-core box), where the fits spent
    half their time in such sums. Its float32 accumulation is biased on rows widened from bfloat16
    (-3.4e-7 relative over a whole 7168-channel row, -1.5e-7 over 512 channels, measured), so it runs
    over SUM_CHUNK channels at a time and the parts are added in float64: -2e-8 to -4e-8, as close as
    numpy's pairwise float32 sum (-1e-8 to -2e-8 mean, 1e-7 at most a row) at the same speed. Any
    subset of rows is then scored from these sums (:class:`RowFit`) without another pass over the
    channels."""
    y = x if y is None else y
    whole = x.shape[-1] - x.shape[-1] % SUM_CHUNK
    out = np.einsum("...i,...i->...", x[..., whole:], y[..., whole:]).astype(np.float64)  # the channels past the chunks
    if whole:
        shape = x.shape[:-1] + (whole // SUM_CHUNK, SUM_CHUNK)
        parts = np.einsum("...ci,...ci->...c", x[..., :whole].reshape(shape), y[..., :whole].reshape(shape))
        out += parts.sum(axis=-1, dtype=np.float64)
    return out


def _ratio(error_squares: np.ndarray, actual_squares: np.ndarray) -> float:
    den = float(np.sum(actual_squares, dtype=np.float64))
    if den <= 0:
        return float("inf")
    return float(np.sqrt(float(np.sum(error_squares, dtype=np.float64)) / den))


def rel_rms(predicted: np.ndarray, actual: np.ndarray, actual_squares: np.ndarray | None = None) -> float:
    """||actual - predicted|| / ||actual|| over the rows given (inf when actual is all zero);
    ``actual_squares``: :func:`row_sums` of ``actual``, where already measured (a choice among many
    predictions of the same rows)."""
    return _ratio(row_sums(actual - predicted), row_sums(actual) if actual_squares is None else actual_squares)


@dataclasses.dataclass(frozen=True)
class RowFit:
    """A prediction of serve rows reduced to per-row sums: every score of any subset of its rows
    (held-out, fit, early, late, the bulk of drift...) follows from them in O(rows), without another
    pass over the H channels."""

    error: np.ndarray  # per row: ||actual - predicted||^2
    actual: np.ndarray  # ||actual||^2
    predicted: np.ndarray  # ||predicted||^2
    dot: np.ndarray  # predicted . actual

    @classmethod
    def of(cls, predicted: np.ndarray, actual: np.ndarray, *, actual_squares: np.ndarray | None = None,
           predicted_squares: np.ndarray | None = None) -> RowFit:
        """``*_squares``: those rows' :func:`row_sums`, where already measured."""
        return cls(error=row_sums(actual - predicted),
                   actual=row_sums(actual) if actual_squares is None else actual_squares,
                   predicted=row_sums(predicted) if predicted_squares is None else predicted_squares,
                   dot=row_sums(predicted, actual))

    def subset(self, rows: np.ndarray) -> RowFit:
        return RowFit(self.error[rows], self.actual[rows], self.predicted[rows], self.dot[rows])

    def rel_rms(self, rows: np.ndarray | None = None) -> float:
        """:func:`rel_rms` over ``rows`` (a mask or indices; all rows without)."""
        if rows is None:
            return _ratio(self.error, self.actual)
        return _ratio(self.error[rows], self.actual[rows])

    def mean_cosine(self, rows: np.ndarray | None = None) -> float:
        """The mean cosine of predicted and actual rows over ``rows``, rows of zero norm left out."""
        s = self if rows is None else self.subset(rows)
        den = np.sqrt(s.predicted) * np.sqrt(s.actual)
        ok = den > 0
        return float(np.mean(s.dot[ok] / den[ok])) if ok.any() else float("nan")

    def scores(self, fit_mask: np.ndarray) -> tuple[float, float, float]:
        """:func:`scores` of this prediction."""
        held = ~fit_mask
        held_rms = held_cosine = float("nan")
        if held.any():
            held_rms, held_cosine = self.rel_rms(held), self.mean_cosine(held)
        fit_rms = self.rel_rms(fit_mask) if fit_mask.any() else float("nan")
        return held_rms, held_cosine, fit_rms


def scores(predicted: np.ndarray, actual: np.ndarray, fit_mask: np.ndarray) -> tuple[float, float, float]:
    """(held-out rel-RMS, held-out mean cosine, fit rel-RMS) of predictions on every row (NaN where
    there are no such rows)."""
    return RowFit.of(predicted, actual).scores(fit_mask)


class ScoredRows(Protocol):
    """What :func:`scored` reads of the rows: which are fitted, and the tolerance."""

    fit: np.ndarray
    tolerance: float


def scored(explanation: Explanation, rows: ScoredRows, predicted: np.ndarray | None, actual: np.ndarray | None,
           params: dict, summary: str, *, fit_mask: np.ndarray | None = None, tolerance: float | None = None,
           measured: tuple[float, float, float] | None = None) -> ExplanationFit:
    """``explanation``'s ExplanationFit from predictions on every row: fitted on ``rows.fit`` (or
    ``fit_mask``, one entry a prediction), scored on the rest (``measured``: their :func:`scores`, where
    already known; ``predicted`` and ``actual`` are not read then)."""
    fit_mask = rows.fit if fit_mask is None else fit_mask
    held = ~fit_mask
    limit = rows.tolerance if tolerance is None else tolerance
    if measured is None:
        assert predicted is not None and actual is not None  # one of the two is given
        measured = scores(predicted, actual, fit_mask)
    held_rms, held_cosine, fit_rms = measured
    return ExplanationFit(
        name=explanation.name,
        complexity=explanation.complexity,
        fits=bool(np.isfinite(held_rms) and held_rms <= limit),
        held_out_rel_rms=held_rms,
        held_out_cosine=held_cosine,
        fit_rel_rms=fit_rms,
        held_out_rows=int(held.sum()),
        params=params,
        summary=summary,
    )
