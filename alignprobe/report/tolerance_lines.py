"""The policy's warn and fail levels drawn into a plot, and recorded on the figure for the page.

"How bad" is the distance to these lines: every metric plot draws them, and scales its axis so the
lines are in view, so a clean run's points sit far from them instead of an auto-scaled wiggle filling
the axis. Each line drawn is recorded in ``figure.tolerances``; the HTML writes that list into the
image's ``data-tolerances`` attribute, so a browser test can check a plot for its lines.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import numpy as np
from matplotlib.ticker import ScalarFormatter

WARN_STYLE = {"color": "#b26a00", "linestyle": "--", "linewidth": 1.2}
FAIL_STYLE = {"color": "#b3261e", "linestyle": "-", "linewidth": 1.4}
STYLE = {"warn": WARN_STYLE, "fail": FAIL_STYLE}


@dataclasses.dataclass(frozen=True)
class PlotLevels:
    """The drift and scale levels a plot draws, from a result's ``policy`` dict (compare's Policy
    defaults where a key is absent: the levels are never written down a second time)."""

    warn_cosine_p1: float
    fail_cosine_p1: float
    warn_rel_rms: float
    fail_rel_rms: float
    scale_tolerance: float
    mapping_min_cosine: float

    @classmethod
    def from_policy(cls, policy: Mapping[str, Any] | None) -> "PlotLevels":
        from alignprobe.compare.policy import Policy

        base = Policy()
        policy = policy or {}

        def get(key: str) -> float:
            value = policy.get(key, getattr(base, key))
            return float(value) if isinstance(value, (int, float)) else float(getattr(base, key))

        return cls(get("drift_warn_cosine_p1"), get("drift_fail_cosine_p1"), get("drift_warn_rel_rms"),
                   get("drift_fail_rel_rms"), get("scale_tolerance"), get("mapping_min_cosine"))


def record(fig, metric: str, level: str, value: float) -> None:
    if not hasattr(fig, "tolerances"):
        fig.tolerances = []
    fig.tolerances.append({"metric": metric, "level": level, "value": float(value)})


def hline(fig, ax, value: float, metric: str, level: str, label: str | None = None) -> None:
    ax.axhline(value, label=label, zorder=1, **STYLE[level])
    record(fig, metric, level, value)


def vline(fig, ax, value: float, metric: str, level: str, label: str | None = None) -> None:
    ax.axvline(value, label=label, zorder=1, **STYLE[level])
    record(fig, metric, level, value)


def cosine_limits(values: np.ndarray, fail: float) -> tuple[float, float]:
    """From below the fail line (or the lowest value, if lower) to just above 1."""
    finite = values[np.isfinite(values)]
    span = max(1.0 - fail, 1e-6)
    low = min(fail - 0.25 * span, float(finite.min()) - 0.05 * span if finite.size else fail)
    return max(-1.05, low), 1.0 + 0.05 * span


def error_limits(values: np.ndarray, fail: float) -> tuple[float, float] | None:
    """Log-axis limits that keep the fail line in view; None when no value is positive (draw linear)."""
    positive = values[np.isfinite(values) & (values > 0)]
    if not positive.size:
        return None
    low = min(float(positive.min()) / 2.0, fail / 10.0)
    high = max(float(positive.max()) * 2.0, fail * 2.0)
    return low, high


def plain_axis(ax, axis: str = "y") -> None:
    """Tick labels as plain values: never an offset ("1e-6+1") a reader must add back."""
    formatter = ScalarFormatter(useOffset=False)
    formatter.set_scientific(False)
    (ax.yaxis if axis == "y" else ax.xaxis).set_major_formatter(formatter)


def legend_outside(ax, **kwargs) -> None:
    """The legend to the right of the axes: it never covers a point."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, fontsize=8,
                  frameon=False, **kwargs)
