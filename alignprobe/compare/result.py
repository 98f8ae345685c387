"""What a comparison found: plain records that the CLI, the reporter and notebooks all read.

Field names are stable (the reporter renders them, ``--json`` writes them); add fields, never rename.

``CompareResult``
    verdict           "PASS" | "WARN" | "FAIL" (from the findings' severities, see policy.py)
    findings          list[Finding], most severe first
    tokens            TokenCheck: sample pairing and token alignment
    streams           list[StreamComparison]: one per paired stream (serve stream vs its train stream)
    mappings          list[MappingSearch]: per serve stream, the similarity matrix and the best mapping
    hidden_size       H, from the train side's claims; num_layers N, likewise
    train_path / serve_path, train_provenance / serve_provenance (dicts, as stored in the dumps)
    policy            dict: the tolerances that produced the verdict
    options           dict: sample / max_tokens / mapping_tokens as used; "sampling" (a sentence: samples
                      and rows compared of those available) only when --sample / --max-tokens left rows out
    notes             list[str]: what the comparer had to assume or skip, in one line each
    elapsed_s         wall time of the comparison
    explanations      list[SliceExplanation]: per explained serve slice (drafter_input / final streams)
                      the simplest explanation that fits held-out rows, the runner-up, all tried
    ``bool(result)`` is True unless the verdict is FAIL (a WARN passes, as exit code 0 does);
    ``result.passed(strict=True)`` is True only for PASS.

``Finding``: alignprobe.findings.Finding, written by findings.render.to_dict: code (docs/findings.md),
    severity "info" | "warn" | "error", title (one line), evidence (JSON-able dict of measured numbers),
    fix (what to change), stream (serve stream name, "" when it concerns the whole comparison), slices,
    notes (what other classes add, as data; title and fix include their text), own (the owner's text).

``SliceMetrics``: one serve slice against the train slice it should equal (the expected mapping).
    label ("HF[30]"), train_stream/train_slice/train_hf_index, serve_stream/serve_slice/serve_hf_index
    (claimed), tokens (rows compared), cosine_mean/p1/p5/p50/min (per-token cosine), rel_rms
    (||b-a|| / ||a|| over all rows), sqnr_db (10 log10 ||a||^2/||b-a||^2), norm_ratio (||b|| / ||a||),
    max_abs_diff, train_health / serve_health (RowHealth: rows, nan_rows, inf_rows, zero_rows,
    constant_rows), positions (list[PositionBucket]: start, stop, tokens, cosine_mean, rel_rms,
    norm_ratio), excluded_rows (rows left out of the numbers because a side was not finite),
    cosine_mean_se / rel_rms_se (standard errors from the spread between compared samples when
    --sample / --max-tokens left rows out, see compare/sampling.py; None when all rows were compared,
    NaN when fewer than 2 samples were).
    train = a (the reference), serve = b. Infinite values (sqnr_db of identical states) are
    written to JSON as the strings "inf" / "-inf" / "nan".

``MappingSearch``: for one serve stream, ``cosine[s][c]`` is the mean per-token cosine of serve
    slice s against train candidate c on ``tokens_sampled`` sampled tokens (``sampling`` says how);
    ``norm_ratio[s][c]`` likewise for ||b||/||a||. ``candidates`` are the distinct train slices
    (stream, slice, hf_index, final_norm, label); ``matches[s]`` the best candidate for each serve
    slice with its score, runner-up and margin; ``expected`` / ``claimed`` the labels the mapping
    should be / the serve dump says it is.

``ExplanationFit``: one explanation (compare/explain/<name>.py) of one serve slice: name, complexity,
    fits (held-out rel-RMS within the policy's tolerance), held_out_rel_rms / held_out_cosine /
    held_out_rows (rows the parameters were not fitted on), fit_rel_rms, params (the fitted
    parameters: the evidence), summary (one line). ``SliceExplanation``: serve_stream, serve_slice,
    label (the train slice it should be), winner, runner_up, tried, rows.

``TokenCheck``: paired / train_only / serve_only sample counts (with up to 20 example ids each),
    paired_by ("id", or "tokens" where the samples paired by their token sequences),
    identical (samples whose token ids agree), compared_samples / aligned_tokens (samples and rows the
    numbers cover), alignable_samples / alignable_tokens (those that had aligned rows: the whole), and
    ``issues`` (TokenIssue per sample: kind "shift" | "divergent" | "padding" | "length", shift k
    with serve token i == train token i+k, first_divergence, train/serve token there (and decoded
    text when a tokenizer was given), train_len, serve_len, aligned_length), kept for the first 200
    such samples; ``issue_counts`` (kind -> samples) and ``shift_counts`` (k -> samples) count them all.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Callable

from alignprobe.findings import Finding, render
from alignprobe.findings.exit_status import passed
from alignprobe.findings.severity import SEVERITY_RANK, VERDICTS  # read from here by report, audit, accept


@dataclasses.dataclass
class RowHealth:
    """Counts of rows (tokens) that are not usable hidden states."""

    rows: int = 0
    nan_rows: int = 0  # at least one NaN
    inf_rows: int = 0  # at least one +-Inf (and no NaN)
    zero_rows: int = 0  # every value exactly 0
    constant_rows: int = 0  # every value equal, not all zero

    @property
    def nonfinite_rows(self) -> int:
        return self.nan_rows + self.inf_rows

    @property
    def degenerate_rows(self) -> int:
        return self.zero_rows + self.constant_rows


@dataclasses.dataclass
class PositionBucket:
    start: int  # token positions [start, stop) within a sample
    stop: int
    tokens: int
    cosine_mean: float
    rel_rms: float
    norm_ratio: float


@dataclasses.dataclass
class SliceMetrics:
    label: str
    train_stream: str
    train_slice: int
    train_hf_index: int
    serve_stream: str
    serve_slice: int
    serve_hf_index: int
    tokens: int
    cosine_mean: float
    cosine_p1: float
    cosine_p5: float
    cosine_p50: float
    cosine_min: float
    rel_rms: float
    sqnr_db: float
    norm_ratio: float
    max_abs_diff: float
    train_health: RowHealth
    serve_health: RowHealth
    positions: list[PositionBucket] = dataclasses.field(default_factory=list)
    excluded_rows: int = 0
    # Standard errors of cosine_mean and rel_rms from the spread between compared samples, when
    # --sample / --max-tokens left rows out (None: everything was compared; NaN: under 2 samples).
    cosine_mean_se: float | None = None
    rel_rms_se: float | None = None
    # The distribution of the per-token cosine as [cosine, fraction of tokens at or below it] at
    # fixed fractions (metrics.CDF_LEVELS), from the kept sample of up to 2^20 per-token cosines: the
    # report draws the histogram from it when the dumps are not at hand.
    cosine_cdf: list[list[float]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class StreamComparison:
    role: str
    train_stream: str
    serve_stream: str
    train_claim: dict[str, Any]
    serve_claim: dict[str, Any]
    slices: list[SliceMetrics] = dataclasses.field(default_factory=list)
    mapping_ok: bool = True  # the measured mapping is the expected one, so drift/scale checks apply


@dataclasses.dataclass
class Candidate:
    """One distinct train-side slice a serve slice may turn out to be."""

    stream: str
    slice: int
    hf_index: int
    final_norm: str  # "pre" or "post": what HF[N] means here (irrelevant below N)
    label: str


@dataclasses.dataclass
class SliceMatch:
    serve_slice: int
    best: int  # index into MappingSearch.candidates
    best_label: str
    score: float  # mean cosine of the best candidate
    runner_up: int  # -1 when there was a single candidate
    runner_up_label: str
    runner_up_score: float
    margin: float  # score - runner_up_score
    tie_broken_by_norm: bool = False  # several candidates tied on cosine (pre vs post norm): the norm ratio decided


@dataclasses.dataclass
class MappingSearch:
    serve_stream: str
    role: str
    serve_labels: list[str]  # claimed labels of the serve slices
    candidates: list[Candidate]
    cosine: list[list[float]]  # [serve slice][candidate]
    norm_ratio: list[list[float]]
    matches: list[SliceMatch]
    expected: list[str]  # labels of the train slices each serve slice should be ([] when widths differ)
    claimed: list[str]
    tokens_sampled: int
    sampling: str

    @property
    def measured(self) -> list[str]:
        return [m.best_label for m in self.matches]


@dataclasses.dataclass
class ExplanationFit:
    """One explanation of a serve slice, fitted on some sampled rows and scored on held-out ones."""

    name: str  # the explanation (compare/explain/<name>.py): identity, index_offset, row_shift, ...
    complexity: int  # the simplest explanation that fits wins
    fits: bool  # held-out rel-RMS within the tolerance the policy allows
    held_out_rel_rms: float  # ||serve - transform(train)|| / ||serve|| on the held-out rows
    held_out_cosine: float
    fit_rel_rms: float  # the same on the rows the parameters were fitted on
    held_out_rows: int
    params: dict[str, Any] = dataclasses.field(default_factory=dict)  # the fitted parameters: the evidence
    summary: str = ""  # one line: what the transform is


@dataclasses.dataclass
class SliceExplanation:
    """The simplest explanation that fits one serve slice, the runner-up, and everything tried."""

    serve_stream: str
    serve_slice: int
    label: str  # the train slice it should equal ("HF[4]"), or the claimed one
    winner: ExplanationFit
    runner_up: ExplanationFit | None = None
    tried: list[ExplanationFit] = dataclasses.field(default_factory=list)
    rows: int = 0  # sampled rows fitted and scored on, in all


@dataclasses.dataclass
class TokenIssue:
    sample_id: str
    kind: str  # "shift" | "divergent" | "padding" | "length"
    train_len: int
    serve_len: int
    aligned_length: int
    shift: int = 0  # serve token i == train token i + shift
    first_divergence: int = -1  # position (in the train sample) of the first differing token
    train_token: int = -1
    serve_token: int = -1
    train_text: str = ""
    serve_text: str = ""
    padded_side: str = ""  # "train" or "serve": which side carries extra trailing tokens


@dataclasses.dataclass
class TokenCheck:
    paired: int = 0
    paired_by: str = "id"  # "id", or "tokens" where the ids paired fewer agreeing samples (compare/pairing.py)
    train_only: int = 0
    serve_only: int = 0
    train_only_examples: list[str] = dataclasses.field(default_factory=list)
    serve_only_examples: list[str] = dataclasses.field(default_factory=list)
    identical: int = 0
    compared_samples: int = 0  # paired samples whose states were compared (after --sample)
    aligned_tokens: int = 0  # rows compared (after --max-tokens)
    alignable_samples: int = 0  # paired samples with aligned rows: what --sample / --max-tokens chose from
    alignable_tokens: int = 0  # their aligned rows in all
    issues: list[TokenIssue] = dataclasses.field(default_factory=list)  # the first MAX_ISSUES only
    issue_counts: dict[str, int] = dataclasses.field(default_factory=dict)  # kind -> samples, all of them
    shift_counts: dict[str, int] = dataclasses.field(default_factory=dict)  # str(k) -> samples shifted by k


@dataclasses.dataclass
class CompareResult:
    verdict: str
    findings: list[Finding]
    tokens: TokenCheck
    streams: list[StreamComparison]
    mappings: list[MappingSearch]
    hidden_size: int
    num_layers: int
    train_path: str = ""
    serve_path: str = ""
    train_provenance: dict[str, Any] = dataclasses.field(default_factory=dict)
    serve_provenance: dict[str, Any] = dataclasses.field(default_factory=dict)
    policy: dict[str, Any] = dataclasses.field(default_factory=dict)
    options: dict[str, Any] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)
    elapsed_s: float = 0.0
    accept: dict[str, Any] | None = None  # AcceptResult.to_dict() when compare ran with --drafter (alignprobe.accept)
    explanations: list[SliceExplanation] = dataclasses.field(default_factory=list)  # per serve slice (explain/)

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict {self.verdict!r} is not one of {VERDICTS}")

    def __bool__(self) -> bool:
        return self.verdict != "FAIL"

    def passed(self, strict: bool = False) -> bool:
        return passed(self.verdict, strict)

    def codes(self, min_severity: str = "info") -> list[str]:
        """Codes of the findings at or above ``min_severity``, most severe first."""
        floor = SEVERITY_RANK[min_severity]
        return [f.code for f in self.findings if SEVERITY_RANK[f.severity] >= floor]

    def finding(self, code: str) -> Finding | None:
        return next((f for f in self.findings if f.code == code), None)

    def to_dict(self) -> dict[str, Any]:
        """The result.json form: findings as findings/render.py writes them, numbers as findings/jsonable.py."""
        return render.record_dict(self)

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> "CompareResult":
        return _build(cls, raw)

    @classmethod
    def from_json(cls, text: str) -> "CompareResult":
        return cls.from_dict(json.loads(text))

    # -- notebook view and plots (drawn by alignprobe.report, found by alignprobe.views) ------------------

    def _repr_html_(self) -> str:
        return _view("repr_html")(self)

    def plot_similarity(self, stream: str | None = None):
        """Heatmap: each train HF index against each serve slice, the measured mapping boxed."""
        return _view("similarity")(self, stream)

    def plot_layers(self, stream: str | None = None):
        """Cosine percentiles, rel-RMS and norm ratio per HF index of one compared stream."""
        return _view("layer_metrics")(self, stream)

    def plot_positions(self, stream: str | None = None):
        """Relative RMS error by token position, one line per HF index."""
        return _view("position_drift")(self, stream)

    def plot_slices(self, stream: str | None = None):
        """What each slice of the serve vector measures as, against the training layout."""
        return _view("slice_composition")(self, stream)

    def plot_token_cosines(self, stream: str | None = None):
        """Histogram of the per-token cosine per HF index (re-read from the two dumps where they are at
        hand, else drawn from the distribution the result keeps)."""
        return _view("token_cosine_histogram")(self, stream)


def _view(name: str) -> Callable[..., Any]:
    from alignprobe.views import view  # the report, found when a result is drawn (a result never imports it)

    return view(name)


# -- (de)serialisation ---------------------------------------------------------------------------

_NESTED = {
    (CompareResult, "streams"): StreamComparison,
    (CompareResult, "mappings"): MappingSearch,
    (CompareResult, "tokens"): TokenCheck,
    (StreamComparison, "slices"): SliceMetrics,
    (SliceMetrics, "train_health"): RowHealth,
    (SliceMetrics, "serve_health"): RowHealth,
    (SliceMetrics, "positions"): PositionBucket,
    (MappingSearch, "candidates"): Candidate,
    (MappingSearch, "matches"): SliceMatch,
    (TokenCheck, "issues"): TokenIssue,
    (CompareResult, "explanations"): SliceExplanation,
    (SliceExplanation, "winner"): ExplanationFit,
    (SliceExplanation, "runner_up"): ExplanationFit,
    (SliceExplanation, "tried"): ExplanationFit,
}


def _build(cls, raw: dict[str, Any]):
    """Rebuild a dataclass tree from ``to_dict`` output; unknown keys (newer writers) are ignored. A
    ``_NESTED`` entry is a record class, or the function that builds one (a finding)."""
    kwargs = {}
    for field in dataclasses.fields(cls):
        if field.name not in raw:
            continue
        value = raw[field.name]
        nested = _NESTED.get((cls, field.name))
        if (cls, field.name) == (CompareResult, "findings"):
            value = [render.from_dict(f) for f in value]
        elif nested is not None:
            if value is not None:
                make = (lambda v, record=nested: _build(record, v)) if isinstance(nested, type) else nested
                value = [make(v) for v in value] if isinstance(value, list) else make(value)
        elif field.type == "float" or (field.type == "float | None" and value is not None):
            value = float(value)
        elif field.name in ("cosine", "norm_ratio", "cosine_cdf") and isinstance(value, list):
            value = [[float(x) for x in row] for row in value]
        kwargs[field.name] = value
    return cls(**kwargs)
