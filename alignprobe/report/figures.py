"""Figures of a CompareResult: pick the numbers out of the result and hand them to plots.py.

Streams are named by their serve-side name (``hidden_states``) or train-side name (``eagle3_aux``);
left out, the drafter input (the stream the verdict is about) is drawn.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
from matplotlib.figure import Figure

from alignprobe.compare.result import CompareResult, MappingSearch, StreamComparison
from alignprobe.errors import BadInput
from alignprobe.report import plots
from alignprobe.report.tolerance_lines import PlotLevels

DRAFTER_INPUT = "drafter_input"


def pick_stream(result: CompareResult, stream: str | None = None) -> StreamComparison:
    """The compared stream pair named ``stream`` (serve or train name); default the drafter input."""
    if not result.streams:
        raise BadInput("the result compared no streams: there is nothing to plot")
    if stream is None:
        return next((s for s in result.streams if s.role == DRAFTER_INPUT), result.streams[0])
    for s in result.streams:
        if stream in (s.serve_stream, s.train_stream):
            return s
    names = ", ".join(f"{s.serve_stream} (vs {s.train_stream})" for s in result.streams)
    raise BadInput(f"no compared stream named {stream!r}: the result has {names}")


def pick_mapping(result: CompareResult, stream: str | None = None) -> MappingSearch:
    """The mapping search of serve stream ``stream``; default the drafter input's."""
    if not result.mappings:
        raise BadInput("the result holds no mapping search (it ran with the mapping search off): nothing to plot")
    if stream is None:
        return next((m for m in result.mappings if m.role == DRAFTER_INPUT), result.mappings[0])
    for m in result.mappings:
        if m.serve_stream == stream:
            return m
    names = ", ".join(m.serve_stream for m in result.mappings)
    raise BadInput(f"no mapping search for serve stream {stream!r}: the result has {names}")


def layer_metrics(result: CompareResult, stream: str | None = None) -> Figure:
    pair = pick_stream(result, stream)
    if not pair.slices:
        raise BadInput(f"stream {pair.serve_stream!r} has no per-layer metrics (its mapping did not match)")
    s = pair.slices
    return plots.layer_metrics_figure(
        f"{_pair_name(pair)}: per HF index ({s[0].tokens} tokens)",
        [x.label for x in s],
        {
            "min": [x.cosine_min for x in s],
            "p1": [x.cosine_p1 for x in s],
            "p5": [x.cosine_p5 for x in s],
            "p50": [x.cosine_p50 for x in s],
            "mean": [x.cosine_mean for x in s],
        },
        [x.rel_rms for x in s],
        [x.norm_ratio for x in s],
        PlotLevels.from_policy(result.policy),
    )


def similarity(result: CompareResult, stream: str | None = None) -> Figure:
    search = pick_mapping(result, stream)
    labels = [c.label if _unique_labels(search) else f"{c.stream}:{c.label}" for c in search.candidates]
    # The reference mark: where training put each slice, or (widths differ) what the serve dump claims.
    by_training = len(search.expected) == len(search.serve_labels)
    reference = search.expected if by_training else search.claimed
    marked = [labels.index(r) if r in labels else None for r in reference]
    return plots.similarity_figure(
        f"{search.serve_stream}: which train HF index is each serve slice? ({search.tokens_sampled} tokens)",
        np.asarray(search.cosine, dtype=float).T,
        labels,
        search.serve_labels,
        [m.best for m in search.matches],
        marked,
        marked_label="what training used" if by_training else "claimed",
        tolerances=PlotLevels.from_policy(result.policy),
    )


def position_drift(result: CompareResult, stream: str | None = None) -> Figure:
    pair = pick_stream(result, stream)
    buckets = pair.slices[0].positions if pair.slices else []
    if not buckets:
        raise BadInput(f"stream {pair.serve_stream!r} has no per-position metrics to plot")
    return plots.position_drift_figure(
        f"{_pair_name(pair)}: error along the sequence",
        [str(b.start) if b.stop - b.start == 1 else f"{b.start}-{b.stop - 1}" for b in buckets],
        {x.label: [b.rel_rms for b in x.positions] for x in pair.slices},
        "relative RMS error",
        PlotLevels.from_policy(result.policy),
    )


def slice_composition(result: CompareResult, stream: str | None = None) -> Figure:
    search = pick_mapping(result, stream)
    pair = _pair_of(result, search)
    return plots.slice_composition_figure(
        f"{search.serve_stream}: what each slice is (measured on {search.tokens_sampled} tokens)",
        pair.train_stream if pair else "drafter input",
        training_layout(result, search),
        search.serve_stream,
        search.claimed or search.serve_labels,
        search.measured,
        [m.score for m in search.matches],
    )


def training_layout(result: CompareResult, search: MappingSearch) -> list[str]:
    """Labels of the train slices this serve stream is judged against, in order."""
    if search.expected:
        return list(search.expected)
    pair = _pair_of(result, search)
    return _claim_labels(pair.train_claim if pair else {}, result.num_layers)


def widths_differ(result: CompareResult, search: MappingSearch) -> bool:
    """The serve stream has a different number of slices than the train stream it is judged against."""
    layout = training_layout(result, search)
    return bool(layout) and len(layout) != len(search.serve_labels)


def token_cosine_histogram(result: CompareResult, stream: str | None = None, train=None, serve=None) -> Figure:
    """Histogram of the per-token cosine of each HF index of a stream: exact, re-read from the two
    dumps where they are at hand; otherwise drawn from the distribution the result keeps."""
    from alignprobe.report.token_cosines import dumps_available, token_cosines

    pair = pick_stream(result, stream)
    if not pair.slices:
        raise BadInput(f"stream {pair.serve_stream!r} has no compared slices (its mapping did not match)")
    title = f"{_pair_name(pair)}: per-token cosine"
    if (train is None or serve is None) and not dumps_available(result) and all(s.cosine_cdf for s in pair.slices):
        return cdf_histogram({s.label: (s.cosine_cdf, s.tokens) for s in pair.slices}, title + " (from the result)",
                             tolerances=PlotLevels.from_policy(result.policy))
    return cosine_histogram(token_cosines(result, pair, train, serve), title,
                            tolerances=PlotLevels.from_policy(result.policy))


def cosine_histogram(series: Mapping[str, np.ndarray], title: str, bins: int = 60,
                     tolerances: PlotLevels | None = None) -> Figure:
    """Histogram of per-token cosines ``{label: cosines}`` on shared bins (see report.token_cosines)."""
    finite = [v[np.isfinite(v)] for v in series.values()]
    low = min((float(v.min()) for v in finite if v.size), default=0.0)
    edges = np.linspace(min(low, 0.999), 1.0, bins + 1)
    counts = {label: np.histogram(np.clip(v, edges[0], edges[-1]), bins=edges)[0] for label, v in zip(series, finite)}
    return plots.cosine_histogram_figure(title, {label: (edges, c) for label, c in counts.items()}, tolerances)


def cdf_histogram(series: Mapping[str, tuple[list[list[float]], int]], title: str, bins: int = 60,
                  tolerances: PlotLevels | None = None) -> Figure:
    """The histogram of per-token cosines ``{label: (cdf, tokens)}`` from kept CDF points
    (``SliceMetrics.cosine_cdf``): each bin's count is tokens x the CDF's rise across it, the CDF
    taken as linear between its points."""
    low = min((cdf[0][0] for cdf, _ in series.values() if cdf), default=0.0)
    edges = np.linspace(min(low, 0.999), 1.0, bins + 1)
    counts = {}
    for label, (cdf, tokens) in series.items():
        values, fractions = np.array(cdf, dtype=float).T
        counts[label] = (edges, tokens * np.diff(np.interp(edges, values, fractions, left=0.0, right=1.0)))
    return plots.cosine_histogram_figure(title, counts, tolerances)


def _pair_name(pair: StreamComparison) -> str:
    if pair.serve_stream == pair.train_stream:
        return pair.serve_stream
    return f"serve {pair.serve_stream} vs train {pair.train_stream}"


def _unique_labels(search: MappingSearch) -> bool:
    labels = [c.label for c in search.candidates]
    return len(set(labels)) == len(labels)


def _pair_of(result: CompareResult, search: MappingSearch) -> StreamComparison | None:
    return next((s for s in result.streams if s.serve_stream == search.serve_stream), None)


def _claim_labels(claim: dict, num_layers: int) -> list[str]:
    from alignprobe.dump.schema import hf_label

    final_norm = claim.get("final_norm", "post")
    return [hf_label(int(i), int(claim.get("num_layers", num_layers)), final_norm) for i in claim.get("hf_indices", ())]
