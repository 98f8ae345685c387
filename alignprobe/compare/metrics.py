"""Streaming per-slice metrics: feed blocks of aligned rows, read the numbers at the end.

Train is ``a`` (the reference), serve is ``b``. The work over whole rows is done by a device's
kernels (compare/kernels/: numpy or torch), which hand over per-row terms; everything here works on
those per-row arrays. Memory is bounded by the block plus a capped sample of per-token cosines kept
for the percentiles.

Why several numbers: cosine is blind to scale (a 50x scale error reads as cosine 1.000003 after
rounding), so the norm ratio ||b||/||a|| and the relative RMS error ||b-a||/||a|| stand beside it.
"""

from __future__ import annotations

import math

import numpy as np

from alignprobe.compare.kernels import RowTerms
from alignprobe.compare.kernels.numpy_kernels import row_terms
from alignprobe.compare.result import PositionBucket, RowHealth
from alignprobe.compare.sampling import ratio_se, rel_rms_se

# Per-token cosines kept for the percentiles: past this, every other kept value is dropped and
# the sampling stride doubles, so the sample stays evenly spread over the stream (and bounded).
PERCENTILE_SAMPLE = 1 << 20
# Fractions of tokens at which the result keeps the per-token cosine (its CDF), finer in the low
# tail where the tokens the drafter sees worst are: 37 numbers a slice draw the histogram.
CDF_LEVELS = np.array(
    [0.0, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.075]
    + [round(0.1 + 0.05 * i, 2) for i in range(17)]
    + [0.925, 0.95, 0.97, 0.98, 0.99, 0.995, 0.998, 0.999, 0.9995, 1.0]
)


def position_edges(max_position: int) -> np.ndarray:
    """Bucket edges 0, 1, 2, 4, 8, ...: position 0 alone (the attention-sink token differs from the
    rest), then doubling buckets, so drift that grows along the sequence shows as a trend."""
    edges = [0, 1]
    while edges[-1] < max_position:
        edges.append(edges[-1] * 2)
    return np.asarray(edges, dtype=np.int64)


def _health(nan: np.ndarray, inf: np.ndarray, sq: np.ndarray, constant: np.ndarray) -> RowHealth:
    zero = ~(nan | inf) & (sq == 0)  # float64 squares of float32 values never underflow to 0
    return RowHealth(len(sq), int(nan.sum()), int(inf.sum()), int(zero.sum()), int(constant.sum()))


def _add_health(total: RowHealth, part: RowHealth) -> None:
    total.rows += part.rows
    total.nan_rows += part.nan_rows
    total.inf_rows += part.inf_rows
    total.zero_rows += part.zero_rows
    total.constant_rows += part.constant_rows


def token_cosine(aa: np.ndarray, bb: np.ndarray, dd: np.ndarray) -> np.ndarray:
    """Per-row cosine from the three squared norms.

    ``1 - cos = (||a-b||^2 - (||a||-||b||)^2) / (2 ||a|| ||b||)`` keeps its precision near 1, where
    ``dot / (|a||b|)`` loses it. Two zero rows are identical (cosine 1); one zero row has cosine 0.
    """
    na, nb = np.sqrt(aa), np.sqrt(bb)
    denom = 2.0 * na * nb
    with np.errstate(divide="ignore", invalid="ignore"):
        cos = 1.0 - (dd - (na - nb) ** 2) / denom
    cos = np.where(denom > 0, cos, np.where((aa == 0) & (bb == 0), 1.0, 0.0))
    return np.clip(cos, -1.0, 1.0)


class SliceAccumulator:
    """Running metrics of one (train slice, serve slice) pair over blocks of aligned rows.

    With ``num_samples`` > 0 it also keeps per-sample sums (tokens, cosine, ||a||^2, ||a-b||^2) for
    the sampling error of a sampled run; ``update`` then takes each row's sample number too.
    """

    def __init__(self, max_position: int, percentile_sample: int = PERCENTILE_SAMPLE, num_samples: int = 0):
        self.per_sample = np.zeros((4, num_samples)) if num_samples else None  # tokens, cos, aa, dd
        self.edges = position_edges(max_position)
        nb = len(self.edges)
        self.bucket_tokens = np.zeros(nb, dtype=np.int64)
        self.bucket_cos = np.zeros(nb)
        self.bucket_aa = np.zeros(nb)
        self.bucket_bb = np.zeros(nb)
        self.bucket_dd = np.zeros(nb)
        self.tokens = 0
        self.sum_aa = self.sum_bb = self.sum_dd = self.sum_cos = 0.0
        self.cos_min = math.inf
        self.max_abs = 0.0
        self.excluded = 0
        self.train_health = RowHealth()
        self.serve_health = RowHealth()
        self._sample: list[np.ndarray] = []
        self._sample_len = 0
        self._stride = 1
        self._seen = 0  # finite rows offered to the percentile sample so far
        self._cap = percentile_sample

    def update(self, a: np.ndarray, b: np.ndarray, positions: np.ndarray, samples: np.ndarray | None = None) -> None:
        """Add rows ``a`` (train) and ``b`` (serve), ``[n, H]`` float32, at sample ``positions`` ``[n]``
        of samples numbered ``samples`` ``[n]`` (needed when the accumulator keeps per-sample sums)."""
        self.add(row_terms(a, b), positions, samples)

    def add(self, terms: RowTerms, positions: np.ndarray, samples: np.ndarray | None = None) -> np.ndarray | None:
        """Add the rows whose per-row terms (from any device's kernels) are ``terms``: see :meth:`update`.

        Returns the mask of the rows left out for a NaN or Inf on either side, None when there are none
        (the pass locates those rows: compare/nonfinite_where.py)."""
        _add_health(self.train_health, _health(terms.nan_a, terms.inf_a, terms.aa, terms.const_a))
        _add_health(self.serve_health, _health(terms.nan_b, terms.inf_b, terms.bb, terms.const_b))
        aa, bb, dd, dmax = terms.aa, terms.bb, terms.dd, terms.dmax
        keep = ~(terms.nan_a | terms.inf_a | terms.nan_b | terms.inf_b)
        left_out = None
        if not keep.all():
            left_out = ~keep
            self.excluded += int(len(keep) - keep.sum())
            aa, bb, dd, dmax, positions = aa[keep], bb[keep], dd[keep], dmax[keep], positions[keep]
            samples = samples[keep] if samples is not None else None
        if not len(aa):
            return left_out
        cos = token_cosine(aa, bb, dd)
        self.tokens += len(aa)
        self.sum_aa += float(aa.sum())
        self.sum_bb += float(bb.sum())
        self.sum_dd += float(dd.sum())
        self.sum_cos += float(cos.sum())
        self.cos_min = min(self.cos_min, float(cos.min()))
        self.max_abs = max(self.max_abs, float(dmax.max()))
        bucket = np.searchsorted(self.edges, positions, side="right") - 1
        nb = len(self.edges)
        self.bucket_tokens += np.bincount(bucket, minlength=nb)
        self.bucket_cos += np.bincount(bucket, weights=cos, minlength=nb)
        self.bucket_aa += np.bincount(bucket, weights=aa, minlength=nb)
        self.bucket_bb += np.bincount(bucket, weights=bb, minlength=nb)
        self.bucket_dd += np.bincount(bucket, weights=dd, minlength=nb)
        if self.per_sample is not None and samples is not None:
            self._add_per_sample(self.per_sample, samples, cos, aa, dd)
        self._keep_sample(cos)
        return left_out

    @staticmethod
    def _add_per_sample(per_sample: np.ndarray, samples: np.ndarray, cos: np.ndarray, aa: np.ndarray, dd: np.ndarray) -> None:
        # A block spans a few consecutive samples: count over that range only, not over all samples.
        first, last = int(samples.min()), int(samples.max())
        local = samples - first
        span = last - first + 1
        into = per_sample[:, first : last + 1]
        into[0] += np.bincount(local, minlength=span)
        into[1] += np.bincount(local, weights=cos, minlength=span)
        into[2] += np.bincount(local, weights=aa, minlength=span)
        into[3] += np.bincount(local, weights=dd, minlength=span)

    def _keep_sample(self, cos: np.ndarray) -> None:
        first = (-self._seen) % self._stride  # the next kept row continues the global stride
        self._seen += len(cos)
        kept = cos[first :: self._stride].astype(np.float32)
        self._sample.append(kept)
        self._sample_len += len(kept)
        if self._sample_len > self._cap:
            whole = np.concatenate(self._sample)[::2]
            self._sample, self._sample_len = [whole], len(whole)
            self._stride *= 2

    # -- results ---------------------------------------------------------------------------------

    @property
    def rel_rms(self) -> float:
        return _ratio_sqrt(self.sum_dd, self.sum_aa)

    @property
    def norm_ratio(self) -> float:
        return _ratio_sqrt(self.sum_bb, self.sum_aa)

    @property
    def sqnr_db(self) -> float:
        if self.sum_dd == 0:
            return math.inf if self.sum_aa > 0 else math.nan
        if self.sum_aa == 0:
            return -math.inf
        return 10.0 * math.log10(self.sum_aa / self.sum_dd)

    @property
    def cosine_mean(self) -> float:
        return self.sum_cos / self.tokens if self.tokens else math.nan

    def percentiles(self, qs=(1, 5, 50)) -> list[float]:
        if not self._sample_len:
            return [math.nan] * len(qs)
        values = np.concatenate(self._sample).astype(np.float64)
        return [float(v) for v in np.percentile(values, qs)]


    def buckets(self) -> list[PositionBucket]:
        out = []
        for i, n in enumerate(self.bucket_tokens):
            if not n:
                continue
            stop = int(self.edges[i + 1]) if i + 1 < len(self.edges) else int(self.edges[i]) * 2
            out.append(
                PositionBucket(
                    start=int(self.edges[i]),
                    stop=stop,
                    tokens=int(n),
                    cosine_mean=float(self.bucket_cos[i] / n),
                    rel_rms=_ratio_sqrt(self.bucket_dd[i], self.bucket_aa[i]),
                    norm_ratio=_ratio_sqrt(self.bucket_bb[i], self.bucket_aa[i]),
                )
            )
        return out

    def standard_errors(self, population: int) -> dict:
        """``cosine_mean_se`` and ``rel_rms_se`` of the samples fed, out of ``population`` samples that
        could have been (compare/sampling.py: between-sample spread, finite-population correction)."""
        if self.per_sample is None:
            raise ValueError("standard errors need per-sample sums: build the accumulator with num_samples")
        tokens, cos, aa, dd = self.per_sample
        return dict(cosine_mean_se=ratio_se(cos, tokens, population), rel_rms_se=rel_rms_se(dd, aa, population))

    def summary(self) -> dict:
        """The metric fields of :class:`SliceMetrics` (the caller adds the labels)."""
        # One pass over the kept sample for the three percentiles and the CDF points.
        p1, p5, p50, *levels = self.percentiles((1, 5, 50, *(100.0 * CDF_LEVELS)))
        return dict(
            tokens=self.tokens,
            cosine_mean=self.cosine_mean,
            cosine_p1=p1,
            cosine_p5=p5,
            cosine_p50=p50,
            cosine_min=self.cos_min if self.tokens else math.nan,
            rel_rms=self.rel_rms,
            sqnr_db=self.sqnr_db,
            norm_ratio=self.norm_ratio,
            max_abs_diff=self.max_abs if self.tokens else math.nan,
            train_health=self.train_health,
            serve_health=self.serve_health,
            positions=self.buckets(),
            excluded_rows=self.excluded,
            # [cosine, fraction of tokens at or below it] (empty without tokens)
            cosine_cdf=[[v, float(f)] for v, f in zip(levels, CDF_LEVELS)] if self._sample_len else [],
        )


def _ratio_sqrt(num: float, den: float) -> float:
    if den == 0:
        return 0.0 if num == 0 else math.inf
    return math.sqrt(num / den)
