"""The report's pictures draw the numbers they are given, labelled in HF-index terms."""

from __future__ import annotations

import io

import numpy as np
from matplotlib.patches import Rectangle

from alignprobe.report import plots

LABELS = [f"HF[{i}]" for i in range(5)]


def _tick_texts(axis):
    return [t.get_text() for t in axis.get_ticklabels()]


def _renders(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=40)
    data = buffer.getvalue()
    assert data.startswith(b"\x89PNG")
    return data


def test_layer_metrics_draws_each_series_against_hf_labels():
    p1 = [1.0, 0.99, 0.95, 0.9, 0.8]
    rms = [1e-3, 2e-3, 5e-2, 0.1, 0.3]
    ratio = [1.0, 1.01, 1.02, 0.9, 1.5]
    fig = plots.layer_metrics_figure("aux", LABELS, {"p1": p1, "p50": [1.0] * 5}, rms, ratio)
    ax_cos, ax_rms, ax_norm = fig.axes
    lines = {line.get_label(): line.get_ydata() for line in ax_cos.get_lines()}
    np.testing.assert_allclose(lines["p1"], p1)
    np.testing.assert_allclose(ax_rms.get_lines()[0].get_ydata(), rms)
    np.testing.assert_allclose(ax_norm.get_lines()[0].get_ydata(), ratio)
    assert ax_rms.get_yscale() == "log"
    assert _tick_texts(ax_norm.xaxis) == LABELS
    _renders(fig)


def test_layer_metrics_tolerates_missing_values():
    fig = plots.layer_metrics_figure("x", LABELS[:2], {"p1": [None, 0.5]}, [0.0, None], [1.0, None])
    assert fig.axes[1].get_yscale() == "linear"  # a zero error cannot go on a log axis
    _renders(fig)


def test_similarity_boxes_the_chosen_cells_and_marks_the_expected_ones():
    matrix = np.full((5, 3), 0.1)
    chosen, expected = [3, 4, None], [2, 3, 4]
    fig = plots.similarity_figure("sim", matrix, LABELS, ["HF[2]", "HF[3]", "HF[4]"], chosen, expected)
    ax = fig.axes[0]
    boxes = [p for p in ax.patches if isinstance(p, Rectangle)]

    def cells(style):
        return sorted((round(b.get_x() + b.get_width() / 2), round(b.get_y() + b.get_height() / 2))
                      for b in boxes if b.get_linestyle() == style)

    assert cells("-") == [(0, 3), (1, 4)]  # (column = serve slice, row = train index)
    assert cells("--") == [(0, 2), (1, 3), (2, 4)]
    assert _tick_texts(ax.yaxis) == LABELS
    assert _tick_texts(ax.xaxis) == ["HF[2]", "HF[3]", "HF[4]"]
    np.testing.assert_allclose(ax.images[0].get_array(), matrix)
    assert sorted(t.get_text() for t in ax.texts) == ["0.100"] * 15  # small matrix: values in the cells
    _renders(fig)


def test_histogram_draws_one_step_curve_per_series():
    edges = np.linspace(0.9, 1.0, 11)
    counts = np.arange(10)
    fig = plots.cosine_histogram_figure("h", {"HF[2]": (edges, counts), "HF[4]": (edges, counts[::-1])})
    ax = fig.axes[0]
    assert len(ax.patches) == 2
    values, drawn_edges, _baseline = ax.patches[0].get_data()
    np.testing.assert_allclose(values, counts)
    np.testing.assert_allclose(drawn_edges, edges)
    assert ax.get_xlim()[0] < 0.91  # the worst occupied bin stays in view
    _renders(fig)


def test_position_drift_draws_a_line_per_hf_index():
    fig = plots.position_drift_figure("d", ["0-15", "16-31"], {"HF[2]": [0.99, 0.9], "HF[4]": [0.98, 0.7]}, "p5 cosine")
    ax = fig.axes[0]
    assert [line.get_label() for line in ax.get_lines()] == ["HF[2]", "HF[4]"]
    np.testing.assert_allclose(ax.get_lines()[1].get_ydata(), [0.98, 0.7])
    assert ax.get_ylabel() == "p5 cosine"
    _renders(fig)


def test_slice_composition_draws_every_slice_to_width():
    fig = plots.slice_composition_figure(
        "c", "eagle3_aux", ["HF[2]", "HF[3]", "HF[3]"], "hidden_states", ["HF[2]"], ["HF[6]"], [0.999]
    )
    ax = fig.axes[0]
    bars = [p for p in ax.patches if isinstance(p, Rectangle)]
    assert len(bars) == 4  # three train slices, one serve slice
    texts = [t.get_text() for t in ax.texts]
    assert "HF[6]" in texts and "claimed HF[2], cos 0.999" in texts
    assert ax.get_xlim() == (0, 3)
    _renders(fig)


def test_tolerance_lines_are_drawn_where_the_figure_says_and_keep_a_clean_run_calm():
    """Each line recorded in figure.tolerances (what data-tolerances holds) is a line on an axis at that
    value; a clean run's tiny wiggle is drawn against the band, not stretched over the axis; tick
    labels carry no offset."""
    from alignprobe.report.tolerance_lines import PlotLevels

    tol = PlotLevels.from_policy(None)  # compare's default policy
    p50 = [1.0, 0.999999, 1.0, 0.9999995, 1.0]  # a clean PASS: differences of 1e-6
    fig = plots.layer_metrics_figure("clean", LABELS, {"p1": p50, "p50": p50}, [1e-4, 2e-4, 1.2e-4, 1e-4, 3e-4],
                                     [1.0, 1.0, 1.0, 1.0, 1.0], tol)
    recorded = {(t["metric"], t["level"]) for t in fig.tolerances}
    assert recorded == {("cosine_p1", "warn"), ("cosine_p1", "fail"), ("rel_rms", "warn"), ("rel_rms", "fail"),
                        ("norm_ratio", "fail")}
    ax_cos, ax_rms, ax_norm = fig.axes[:3]
    horizontal = {round(float(line.get_ydata()[0]), 9) for ax in (ax_cos, ax_rms, ax_norm) for line in ax.get_lines()
                  if len(set(line.get_ydata())) == 1}
    assert {round(t["value"], 9) for t in fig.tolerances} <= horizontal
    low, high = ax_cos.get_ylim()
    assert low < tol.fail_cosine_p1 and high - low > 0.1  # the band is in view: 1e-6 wiggles stay flat
    assert ax_rms.get_ylim()[1] > tol.fail_rel_rms
    fig.canvas.draw()
    assert not ax_cos.yaxis.get_major_formatter().get_offset()  # no "1e-6+1" above the axis


def test_identical_histogram_curves_stay_apart():
    from alignprobe.report.plots import cosine_histogram_figure

    same = ([0.9, 0.95, 1.0], [3, 7])
    fig = cosine_histogram_figure("t", {"HF[2]": same, "HF[4]": same, "HF[5]": same})
    styles = {(p.get_linewidth(), str(p.get_linestyle())) for p in fig.axes[0].patches}
    assert len(styles) == 3
