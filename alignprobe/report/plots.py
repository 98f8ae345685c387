"""The report's pictures, drawn from plain numbers so a notebook can draw them too.

Each function returns a :class:`matplotlib.figure.Figure` built without pyplot: no display, no
global figure list that grows in a long notebook session, and any backend (Agg in CI) can save it.
Every axis speaks in HF-index terms (``HF[30]``), the coordinates a user can act on.
"""

from __future__ import annotations

import io
from typing import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure

from alignprobe.report import tolerance_lines as lines
from alignprobe.report.tolerance_lines import PlotLevels

# Every figure is drawn at the page's width (report.html's body is 1180 px less its padding; PNGs
# are saved at 100 dpi), so no plot is a thumbnail beside empty page and none is scaled down.
PAGE_WIDTH_IN = 11.2


class ReportFigure(Figure):
    """A Figure that shows itself as a PNG in any notebook, whatever matplotlib backend is active.

    Without pyplot, IPython has no display hook for a bare Figure under a non-inline backend
    (MPLBACKEND=Agg, as CI sets it) and would print ``<Figure size ...>`` instead of the plot.
    """

    tolerances: list  # the warn/fail lines drawn: {"metric", "level", "value"} (tolerance_lines.record)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.tolerances = []

    def _repr_png_(self) -> bytes:
        buffer = io.BytesIO()
        self.savefig(buffer, format="png", dpi=100)
        return buffer.getvalue()


# Quantile lines of the per-token cosine, darkest for the worst tokens.
_COSINE_STYLE = {
    "min": ("#7f0000", ":"),
    "p1": ("#b30000", "-"),
    "p5": ("#e34a33", "-"),
    "p50": ("#2b8cbe", "-"),
    "mean": ("#31a354", "--"),
}


def layer_metrics_figure(
    title: str,
    hf_labels: Sequence[str],
    cosine: Mapping[str, Sequence[float]],
    rel_rms: Sequence[float],
    norm_ratio: Sequence[float],
    tolerances: PlotLevels | None = None,
) -> Figure:
    """Cosine percentiles, relative RMS error and norm ratio for each compared HF index of a stream,
    each against the policy's warn and fail lines (``tolerances``) with the axis scaled to show them."""
    x = np.arange(len(hf_labels))
    fig = ReportFigure(figsize=(PAGE_WIDTH_IN, 7.5), layout="constrained")
    ax_cos, ax_rms, ax_norm = fig.subplots(3, 1, sharex=True)
    for name, values in cosine.items():
        color, style = _COSINE_STYLE.get(name, (None, "-"))
        ax_cos.plot(x, _floats(values), style, color=color, marker="o", ms=3, label=name, zorder=3)
    ax_cos.set_ylabel("per-token cosine")
    ax_cos.grid(alpha=0.3)
    all_cosines = np.concatenate([_floats(v) for v in cosine.values()]) if cosine else np.array([])
    if tolerances is not None:
        lines.hline(fig, ax_cos, tolerances.warn_cosine_p1, "cosine_p1", "warn", f"p1 warn {tolerances.warn_cosine_p1:g}")
        lines.hline(fig, ax_cos, tolerances.fail_cosine_p1, "cosine_p1", "fail", f"p1 fail {tolerances.fail_cosine_p1:g}")
        ax_cos.set_ylim(*lines.cosine_limits(all_cosines, tolerances.fail_cosine_p1))
    lines.plain_axis(ax_cos)
    lines.legend_outside(ax_cos)

    rms = _floats(rel_rms)
    ax_rms.plot(x, rms, "o-", color="#756bb1", ms=3, label="rel-RMS", zorder=3)
    ax_rms.set_ylabel("relative RMS error\n||train - serve|| / ||train||")
    if tolerances is not None:
        lines.hline(fig, ax_rms, tolerances.warn_rel_rms, "rel_rms", "warn", f"warn {tolerances.warn_rel_rms:g}")
        lines.hline(fig, ax_rms, tolerances.fail_rel_rms, "rel_rms", "fail", f"fail {tolerances.fail_rel_rms:g}")
        _error_axis(ax_rms, rms, tolerances.fail_rel_rms)
    elif np.isfinite(rms).any() and np.all(rms[np.isfinite(rms)] > 0):
        ax_rms.set_yscale("log")
    ax_rms.grid(alpha=0.3, which="both")
    lines.legend_outside(ax_rms)

    ratio = _floats(norm_ratio)
    ax_norm.plot(x, ratio, "o-", color="#d95f0e", ms=3, label="norm ratio", zorder=3)
    ax_norm.axhline(1.0, color="grey", lw=0.8)
    ax_norm.set_ylabel("norm ratio\n||serve|| / ||train||")
    if tolerances is not None:
        high, low = 1.0 + tolerances.scale_tolerance, 1.0 / (1.0 + tolerances.scale_tolerance)
        lines.hline(fig, ax_norm, high, "norm_ratio", "fail", f"fail outside {low:.3g} to {high:.3g}")
        lines.hline(fig, ax_norm, low, "norm_ratio", "fail")
        finite = ratio[np.isfinite(ratio)]
        margin = 0.25 * tolerances.scale_tolerance
        ax_norm.set_ylim(min(low - margin, float(finite.min()) - margin if finite.size else low),
                         max(high + margin, float(finite.max()) + margin if finite.size else high))
    lines.plain_axis(ax_norm)
    ax_norm.grid(alpha=0.3)
    lines.legend_outside(ax_norm)
    ax_norm.set_xticks(x, list(hf_labels), rotation=45 if len(x) > 8 else 0, ha="right" if len(x) > 8 else "center",
                       fontsize=6 if len(x) > 40 else None)
    ax_norm.set_xlabel("HF index (HF[0] = embeddings, HF[N] = after the final norm)")
    fig.suptitle(title)
    return fig


def _error_axis(ax, values: np.ndarray, fail: float) -> None:
    """A log axis from well below the values to above the fail line; linear from 0 when nothing is positive."""
    limits = lines.error_limits(values, fail)
    if limits is None:
        ax.set_ylim(0.0, fail * 1.5)
        lines.plain_axis(ax)
        return
    finite = values[np.isfinite(values)]
    if (finite == 0).any():
        # Identical rows (rel-RMS exactly 0, e.g. the first positions) cannot sit on a log axis: a
        # linear stretch below the smallest positive value holds them, so they read as 0, not as a cliff.
        ax.set_yscale("symlog", linthresh=limits[0], linscale=0.3)
        ax.set_ylim(0.0, limits[1])
        return
    ax.set_yscale("log")
    ax.set_ylim(*limits)


def similarity_figure(
    title: str,
    matrix: np.ndarray,
    train_labels: Sequence[str],
    serve_labels: Sequence[str],
    chosen: Sequence[int | None],
    marked: Sequence[int | None] | None = None,
    marked_label: str = "claimed",
    tolerances: PlotLevels | None = None,
) -> Figure:
    """Mean cosine of every train HF index (rows) against every serve slice (columns).

    ``chosen[j]`` is the row the comparer matched to serve slice ``j`` (solid red box); ``marked[j]``
    the row it should have been, or was claimed to be (dashed black box), so a layer offset reads as
    a red box one row from a dashed one. Small matrices carry their values in the cells.
    """
    m = np.asarray(matrix, dtype=float)
    rows, cols = m.shape
    # Kimi-K2.5 has 63 candidate rows (HF[0..61], pre- and post-norm final): cap the size, shrink the labels.
    fig = ReportFigure(figsize=(PAGE_WIDTH_IN, min(14.0, max(3.5, 0.34 * rows + 2.0))), layout="constrained")
    ax = fig.subplots()
    finite = m[np.isfinite(m)]
    # Neighbouring layers of a real model agree to 0.9 and more: spread the colours over the range
    # the values use, not over [-1, 1], so the best match stands out.
    low = float(np.clip(np.floor(finite.min() * 20) / 20, -1.0, 0.95)) if finite.size else 0.0
    if tolerances is not None:  # keep the "matches no train slice" level on the colour scale
        low = min(low, float(np.floor(tolerances.mapping_min_cosine * 20) / 20))
    image = ax.imshow(m, aspect="auto", cmap="viridis", vmin=low, vmax=1.0)
    colorbar = fig.colorbar(image, ax=ax, label="mean per-token cosine")
    if tolerances is not None:
        lines.hline(fig, colorbar.ax, tolerances.mapping_min_cosine, "mapping_cosine", "fail")
        colorbar.ax.text(0.5, tolerances.mapping_min_cosine, "no match below", transform=colorbar.ax.get_yaxis_transform(),
                         ha="center", va="bottom", fontsize=6, color="black", rotation=90,
                         bbox=dict(facecolor="white", edgecolor="none", alpha=0.7, pad=0.5))
    best = {(i, j) for j, i in enumerate(chosen) if i is not None}
    if rows * cols <= 160:
        for i in range(rows):
            for j in range(cols):
                r, g, b, _ = image.cmap(image.norm(m[i, j]))
                ink = "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"
                weight = "bold" if (i, j) in best else "normal"
                ax.text(j, i, f"{m[i, j]:.3f}", ha="center", va="center", fontsize=7, color=ink, weight=weight)
    for i, j in best:
        ax.add_patch(_box(j, i, "#ff2d2d"))
    for j, i in enumerate(marked or ()):
        if i is not None:
            ax.add_patch(_box(j, i, "black", inset=0.12, linestyle="--"))
    ax.set_xticks(range(cols), list(serve_labels), rotation=20 if cols > 1 else 0, ha="right" if cols > 1 else "center")
    ax.set_yticks(range(rows), list(train_labels), fontsize=6 if rows > 30 else None)
    ax.set_xlabel("serve slice (as the serve dump claims it)")
    ax.set_ylabel("train HF index")
    handles, labels = [_box(0, 0, "#ff2d2d")], ["best match (measured)"]
    if marked is not None and any(i is not None for i in marked):
        handles.append(_box(0, 0, "black", linestyle="--"))
        labels.append(marked_label)
    fig.legend(handles, labels, loc="outside lower center", ncol=2, fontsize=8, frameon=False)
    ax.set_title(title, fontsize=10, wrap=True)
    return fig


HIST_DASHES = ("-", "--", "-.", ":")


def cosine_histogram_figure(
    title: str, series: Mapping[str, tuple[Sequence[float], Sequence[float]]], tolerances: PlotLevels | None = None
) -> Figure:
    """Distribution of per-token cosine, one step curve per HF index: ``{label: (bin_edges, counts)}``; the
    cosine-p1 warn and fail levels are drawn where the worst 1% of tokens must stay above."""
    fig = ReportFigure(figsize=(PAGE_WIDTH_IN, 4.2), layout="constrained")
    ax = fig.subplots()
    low = 1.0
    for i, (label, (edges, counts)) in enumerate(series.items()):
        edges, counts = _floats(edges), _floats(counts)
        # Healthy layers share one distribution, so their curves lie on each other: each is drawn
        # thinner than the one before and with its own dash, so every one stays visible.
        ax.stairs(counts, edges, label=label, lw=max(0.8, 3.2 - 0.6 * i), ls=HIST_DASHES[i % len(HIST_DASHES)],
                  zorder=3 + i)
        occupied = edges[:-1][counts > 0]
        if occupied.size:
            low = min(low, float(occupied.min()))
    ax.set_yscale("symlog", linthresh=1)
    if tolerances is not None:
        lines.vline(fig, ax, tolerances.warn_cosine_p1, "cosine_p1", "warn", f"p1 warn {tolerances.warn_cosine_p1:g}")
        lines.vline(fig, ax, tolerances.fail_cosine_p1, "cosine_p1", "fail", f"p1 fail {tolerances.fail_cosine_p1:g}")
        low = min(low, tolerances.fail_cosine_p1 - 0.25 * (1.0 - tolerances.fail_cosine_p1))
    ax.set_xlim(max(-1.0, low - 0.01), 1.0005)
    lines.plain_axis(ax, "x")
    ax.set_xlabel("per-token cosine (train vs serve)")
    ax.set_ylabel("tokens")
    ax.grid(alpha=0.3)
    lines.legend_outside(ax)
    ax.set_title(title)
    return fig


def position_drift_figure(
    title: str,
    position_labels: Sequence[str],
    series: Mapping[str, Sequence[float]],
    metric: str,
    tolerances: PlotLevels | None = None,
) -> Figure:
    """One metric against token position (bucketed), one line per HF index: drift that grows along the
    sequence. With ``tolerances`` the metric is the rel-RMS, drawn against its warn and fail lines."""
    x = np.arange(len(position_labels))
    fig = ReportFigure(figsize=(PAGE_WIDTH_IN, 4.2), layout="constrained")
    ax = fig.subplots()
    for label, values in series.items():
        ax.plot(x, _floats(values), "o-", ms=3, label=label, zorder=3)
    if tolerances is not None:
        lines.hline(fig, ax, tolerances.warn_rel_rms, "rel_rms", "warn", f"warn {tolerances.warn_rel_rms:g}")
        lines.hline(fig, ax, tolerances.fail_rel_rms, "rel_rms", "fail", f"fail {tolerances.fail_rel_rms:g}")
        values = np.concatenate([_floats(v) for v in series.values()]) if series else np.array([])
        _error_axis(ax, values, tolerances.fail_rel_rms)
    else:
        lines.plain_axis(ax)
    ax.set_xticks(x, list(position_labels), rotation=30 if len(x) > 6 else 0, ha="right" if len(x) > 6 else "center")
    ax.set_xlabel("token position")
    ax.set_ylabel(metric)
    ax.grid(alpha=0.3, which="both")
    lines.legend_outside(ax)
    ax.set_title(title)
    return fig


def slice_composition_figure(
    title: str,
    train_name: str,
    train_slices: Sequence[str],
    serve_name: str,
    serve_claimed: Sequence[str],
    serve_measured: Sequence[str],
    serve_similarity: Sequence[float],
) -> Figure:
    """What each slice of the two drafter inputs is, drawn to width: which HF index sits where.

    The training vector's slices are drawn from its claims; the serving vector's from what the
    comparer measured, with the claim underneath, so "H wide, and that H is HF[N]" is one glance.
    """
    slices = max(len(train_slices), len(serve_claimed), 1)
    fig = ReportFigure(figsize=(PAGE_WIDTH_IN, 2.6), layout="constrained")
    ax = fig.subplots()
    labels = sorted(set(train_slices) | set(serve_measured), key=_hf_sort_key)
    palette = {label: _color(k) for k, label in enumerate(labels)}
    serve_notes = [_claim_text(c, m, s) for c, m, s in zip(serve_claimed, serve_measured, serve_similarity)]
    for row, top, bottom in ((1, list(train_slices), [""] * len(train_slices)), (0, list(serve_measured), serve_notes)):
        for j, (label, note) in enumerate(zip(top, bottom)):
            # A serve slice that is not what training put in that column is hatched: the drafter's fc
            # weights for those columns were trained on something else.
            wrong = row == 0 and (j >= len(train_slices) or train_slices[j] != label)
            ax.barh(row, 1.0, left=j, height=0.6, color=palette.get(label, "#cccccc"), edgecolor="black",
                    hatch="//" if wrong else None)
            ax.text(j + 0.5, row + 0.06, label, ha="center", va="center", fontsize=10, weight="bold",
                    bbox=dict(facecolor="white", edgecolor="none", alpha=0.8, pad=1))
            if note:
                ax.text(j + 0.5, row - 0.16, note, ha="center", va="center", fontsize=7,
                        bbox=dict(facecolor="white", edgecolor="none", alpha=0.8, pad=1))
    ax.set_yticks([1, 0], [f"train: {train_name}\n{len(train_slices)} x H", f"serve: {serve_name}\n{len(serve_claimed)} x H"])
    ax.set_xlim(0, slices)
    ax.set_ylim(-0.5, 1.5)
    ax.set_xticks(range(slices + 1), [f"{k}H" if k else "0" for k in range(slices + 1)])
    ax.set_xlabel("column of the drafter input (H = hidden size)")
    ax.set_title(title)
    return fig


def _claim_text(claimed: str, measured: str, similarity: float) -> str:
    agreement = "as claimed" if claimed == measured else f"claimed {claimed}"
    return f"{agreement}, cos {similarity:.3f}"


def _box(col: int, row: int, color: str, inset: float = 0.0, linestyle: str = "-"):
    from matplotlib.patches import Rectangle

    size = 1 - 2 * inset
    return Rectangle((col - 0.5 + inset, row - 0.5 + inset), size, size, fill=False, edgecolor=color, lw=2.5,
                     linestyle=linestyle)


def _color(k: int):
    from matplotlib import colormaps

    return colormaps["tab10"](k % 10)


def _hf_sort_key(label: str):
    digits = "".join(ch for ch in label.split("]")[0] if ch.isdigit())
    return (int(digits) if digits else 10**9, label)


def _floats(values) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in values], dtype=float)
