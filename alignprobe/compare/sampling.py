"""What ``--sample`` / ``--max-tokens`` keep, and the error that keeping only part of a dump implies.

Samples are the sampling units: the tokens of one sample share a prompt and a noise level, so they
are correlated, and a per-token standard error would understate the error of a sampled run. The
standard errors here come from the spread BETWEEN compared samples, for the ratio estimators the
metrics are (cosine mean = sum of per-token cosines / tokens; rel-RMS^2 = sum ||a-b||^2 / sum ||a||^2),
by linearisation (Cochran, Sampling Techniques, 6.9), with the finite-population correction
sqrt(1 - n/N) for n samples compared out of the N that could be:

    SE(Y/X) = sqrt(1 - n/N) * sqrt( sum_i (y_i - R x_i)^2 / (n (n - 1)) ) / mean_i(x_i),   R = sum y / sum x

and SE(rel-RMS) = SE(rel-RMS^2) / (2 rel-RMS) (delta method).

The "±" shown is a 95% interval: the standard error times Student's t quantile with n - 1 degrees
of freedom, since with few samples the spread is itself uncertain (12.7 at 2 samples, 2.36 at 8,
1.96 as n grows). A normal 1.96 missed the full value on a 0.58 GB pair (benchmarks/README.md).
"""

from __future__ import annotations

import math

import numpy as np

Z95 = 1.96  # the normal 95% quantile: what interval_multiplier tends to with many samples


def interval_multiplier(samples: int) -> float:
    """The 95% interval's half-width in standard errors for ``samples`` compared (NaN below 2)."""
    if samples < 2:
        return math.nan
    from scipy.special import stdtrit  # Student's t quantile; imported only by a sampled run

    return float(stdtrit(samples - 1, 0.975))


def spread_order(n: int) -> np.ndarray:
    """The indices 0..n-1 in an order whose every prefix is spread evenly over 0..n-1.

    The van der Corput sequence 0, 1/2, 1/4, 3/4, 1/8, ... scaled to n, first occurrences kept: taking
    samples in this order until a token budget is filled spreads them over the whole dump.
    """
    if n <= 0:
        return np.zeros(0, dtype=np.int64)
    bits = max(1, math.ceil(math.log2(n)))
    m = np.arange(1 << bits, dtype=np.int64)
    reversed_bits = np.zeros_like(m)
    for b in range(bits):
        reversed_bits |= ((m >> b) & 1) << (bits - 1 - b)
    picks = (reversed_bits * n) >> bits  # floor(vdc * n): with 2^bits >= n every index appears
    _, first = np.unique(picks, return_index=True)
    return picks[np.sort(first)]


def ratio_se(y: np.ndarray, x: np.ndarray, population: int) -> float:
    """Standard error of ``sum(y) / sum(x)`` over the compared samples (one entry each), NaN below 2."""
    n = len(x)
    if n < 2 or population < n:
        return math.nan
    total_x = float(x.sum())
    if total_x == 0:
        return math.nan
    residual = y - (float(y.sum()) / total_x) * x
    spread = float(residual @ residual) / (n * (n - 1))
    correction = max(0.0, 1.0 - n / population)
    return math.sqrt(correction * spread) / (total_x / n)


def rel_rms_se(sample_dd: np.ndarray, sample_aa: np.ndarray, population: int) -> float:
    """Standard error of rel-RMS = sqrt(sum dd / sum aa), from that of its square."""
    squared_se = ratio_se(sample_dd, sample_aa, population)
    total_aa = float(sample_aa.sum())
    rel_rms = math.sqrt(float(sample_dd.sum()) / total_aa) if total_aa > 0 else math.nan
    if not math.isfinite(squared_se) or not math.isfinite(rel_rms):
        return math.nan
    return 0.0 if rel_rms == 0 else squared_se / (2.0 * rel_rms)


def describe(samples: int, of_samples: int, rows: int, of_rows: int, multiplier: float) -> str:
    return (
        f"{samples:,} of {of_samples:,} samples, {rows:,} of {of_rows:,} token rows compared; "
        f"± is a 95% interval, {multiplier:.3g} standard errors (Student's t, {samples - 1} degrees of freedom) "
        "from the spread between the compared samples"
    )


def undecided_thresholds(value: float, se: float | None, thresholds: dict[str, float], multiplier: float) -> list[str]:
    """Names of the thresholds inside the 95% interval ``value ± multiplier * se``: the sample cannot
    tell which side of them the whole dump lies."""
    if se is None or not math.isfinite(se) or not math.isfinite(value) or not math.isfinite(multiplier):
        return []
    return [name for name, t in thresholds.items() if abs(value - t) <= multiplier * se]
