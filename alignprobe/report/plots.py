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

class ReportFigure(Figure):
    """A Figure that shows itself as a PNG in any notebook, whatever matplotlib backend is active.

    Without pyplot, IPython has no display hook for a bare Figure under a non-inline backend
    (MPLBACKEND=Agg, as CI sets it) and would print ``<Figure size ...>`` instead of the plot.
    """

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
) -> Figure:
    """Cosine percentiles, relative RMS error and norm ratio for each compared HF index of a stream."""
    x = np.arange(len(hf_labels))
    fig = ReportFigure(figsize=(min(18.0, max(6.0, 0.55 * len(x) + 3)), 7.0), layout="constrained")
    ax_cos, ax_rms, ax_norm = fig.subplots(3, 1, sharex=True)
    for name, values in cosine.items():
        color, style = _COSINE_STYLE.get(name, (None, "-"))
        ax_cos.plot(x, _floats(values), style, color=color, marker="o", ms=3, label=name)
    ax_cos.set_ylabel("per-token cosine")
    ax_cos.legend(loc="best", fontsize=8, ncol=len(cosine))
    ax_cos.grid(alpha=0.3)

    rms = _floats(rel_rms)
    ax_rms.plot(x, rms, "o-", color="#756bb1", ms=3)
    ax_rms.set_ylabel("relative RMS error\n||train - serve|| / ||train||")
    if np.all(rms[np.isfinite(rms)] > 0) and np.isfinite(rms).any():
        ax_rms.set_yscale("log")
    ax_rms.grid(alpha=0.3, which="both")

    ax_norm.plot(x, _floats(norm_ratio), "o-", color="#d95f0e", ms=3)
    ax_norm.axhline(1.0, color="grey", lw=0.8)
    ax_norm.set_ylabel("norm ratio\n||serve|| / ||train||")
    ax_norm.grid(alpha=0.3)
    ax_norm.set_xticks(x, list(hf_labels), rotation=45 if len(x) > 8 else 0, ha="right" if len(x) > 8 else "center",
                       fontsize=6 if len(x) > 40 else None)
    ax_norm.set_xlabel("HF index (HF[0] = embeddings, HF[N] = after the final norm)")
    fig.suptitle(title)
    return fig


def similarity_figure(
    title: str,
    matrix: np.ndarray,
    train_labels: Sequence[str],
    serve_labels: Sequence[str],
    chosen: Sequence[int | None],
    marked: Sequence[int | None] | None = None,
    marked_label: str = "claimed",
) -> Figure:
    """Mean cosine of every train HF index (rows) against every serve slice (columns).

    ``chosen[j]`` is the row the comparer matched to serve slice ``j`` (solid red box); ``marked[j]``
    the row it should have been, or was claimed to be (dashed black box), so a layer offset reads as
    a red box one row from a dashed one. Small matrices carry their values in the cells.
    """
    m = np.asarray(matrix, dtype=float)
    rows, cols = m.shape
    # Kimi-K2.5 has 63 candidate rows (HF[0..61], pre- and post-norm final): cap the size, shrink the labels.
    fig = ReportFigure(figsize=(min(16.0, max(6.5, 1.0 * cols + 4.0)), min(14.0, max(3.5, 0.34 * rows + 2.0))),
                       layout="constrained")
    ax = fig.subplots()
    finite = m[np.isfinite(m)]
    # Neighbouring layers of a real model agree to 0.9 and more: spread the colours over the range
    # the values use, not over [-1, 1], so the best match stands out.
    low = float(np.clip(np.floor(finite.min() * 20) / 20, -1.0, 0.95)) if finite.size else 0.0
    image = ax.imshow(m, aspect="auto", cmap="viridis", vmin=low, vmax=1.0)
    fig.colorbar(image, ax=ax, label="mean per-token cosine")
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


def cosine_histogram_figure(title: str, series: Mapping[str, tuple[Sequence[float], Sequence[float]]]) -> Figure:
    """Distribution of per-token cosine, one step curve per HF index: ``{label: (bin_edges, counts)}``."""
    fig = ReportFigure(figsize=(7.0, 3.8), layout="constrained")
    ax = fig.subplots()
    low = 1.0
    for label, (edges, counts) in series.items():
        edges, counts = _floats(edges), _floats(counts)
        ax.stairs(counts, edges, label=label, lw=1.4)
        occupied = edges[:-1][counts > 0]
        if occupied.size:
            low = min(low, float(occupied.min()))
    ax.set_yscale("symlog", linthresh=1)
    ax.set_xlim(max(-1.0, low - 0.01), 1.0005)
    ax.set_xlabel("per-token cosine (train vs serve)")
    ax.set_ylabel("tokens")
    ax.grid(alpha=0.3)
    if series:
        ax.legend(fontsize=8, ncol=min(4, len(series)))
    ax.set_title(title)
    return fig


def position_drift_figure(
    title: str, position_labels: Sequence[str], series: Mapping[str, Sequence[float]], metric: str
) -> Figure:
    """One metric against token position (bucketed), one line per HF index: drift that grows along the sequence."""
    x = np.arange(len(position_labels))
    fig = ReportFigure(figsize=(7.0, 3.8), layout="constrained")
    ax = fig.subplots()
    for label, values in series.items():
        ax.plot(x, _floats(values), "o-", ms=3, label=label)
    ax.set_xticks(x, list(position_labels), rotation=30 if len(x) > 6 else 0, ha="right" if len(x) > 6 else "center")
    ax.set_xlabel("token position")
    ax.set_ylabel(metric)
    ax.grid(alpha=0.3)
    if series:
        ax.legend(fontsize=8, ncol=min(4, len(series)))
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
    fig = ReportFigure(figsize=(max(7.0, 2.4 * slices), 2.6), layout="constrained")
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
