"""The reporter on real comparisons (the demo's): plots, notebook view and histogram read the right numbers."""

from __future__ import annotations

import os

import numpy as np
import pytest
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from alignprobe.compare.result import CompareResult
from alignprobe.conventions import eagle3_hf_indices
from alignprobe.dump import open_dump
from demo_run import demo_run

pytestmark = pytest.mark.slow

N = 8  # the demo's tiny model


def _result(name: str) -> CompareResult:
    run = demo_run()
    assert run.returncode == 0, run.stderr
    with open(os.path.join(run.out_dir, name, "result.json")) as f:
        return CompareResult.from_json(f.read())


def _boxed_rows(fig: Figure, linestyle: str) -> list[str]:
    ax = fig.axes[0]
    rows = [t.get_text() for t in ax.get_yticklabels()]
    boxes = [p for p in ax.patches if isinstance(p, Rectangle) and p.get_linestyle() == linestyle]
    boxes.sort(key=lambda b: b.get_x())
    return [rows[round(b.get_y() + b.get_height() / 2)] for b in boxes]


def test_similarity_of_the_offset_marks_measured_and_training_rows():
    fig = _result("offset_plus1").plot_similarity()
    aux = eagle3_hf_indices(N)
    assert _boxed_rows(fig, "-") == [f"HF[{i + 1}]" for i in aux]  # measured: one layer deeper
    assert _boxed_rows(fig, "--") == [f"HF[{i}]" for i in aux]  # what training used


def test_slices_of_the_eagle_case_show_the_final_state():
    fig = _result("eagle_not_eagle3").plot_slices()
    texts = {t.get_text() for t in fig.axes[0].texts}
    assert {f"HF[{i}]" for i in eagle3_hf_indices(N)} | {f"HF[{N}]"} <= texts


def test_layers_and_positions_plot_every_compared_hf_index():
    result = _result("int4")
    labels = [s.label for s in result.streams[0].slices]
    fig = result.plot_layers()
    assert [t.get_text() for t in fig.axes[-1].get_xticklabels()] == labels
    p1 = next(line for line in fig.axes[0].get_lines() if line.get_label() == "p1")
    np.testing.assert_allclose(p1.get_ydata(), [s.cosine_p1 for s in result.streams[0].slices])
    fig = result.plot_positions()
    drawn = fig.axes[0].get_lines()
    assert [line.get_label() for line in drawn[: len(labels)]] == labels
    # and the policy's warn and fail rel-RMS lines after them
    assert {line.get_ydata()[0] for line in drawn[len(labels):]} == {
        result.policy["drift_warn_rel_rms"], result.policy["drift_fail_rel_rms"]}


def test_token_cosine_histogram_counts_every_aligned_token():
    result = _result("int4")
    fig = result.plot_token_cosines()
    stairs = fig.axes[0].patches
    assert len(stairs) == len(result.streams[0].slices)
    with open_dump(result.serve_path) as serve:
        finite_rows = int(np.isfinite(serve.read("hidden_states", 0, serve.num_tokens)).all(axis=1).sum())
    for s in stairs:
        counts, _edges, _ = s.get_data()
        assert counts.sum() == finite_rows == result.tokens.aligned_tokens


def test_without_the_dumps_the_histogram_comes_from_the_kept_distribution(tmp_path):
    import dataclasses

    from alignprobe.report import write_report

    exact = _result("int4")
    away = dataclasses.replace(exact, train_path=str(tmp_path / "gone.h5"), serve_path=str(tmp_path / "gone2.h5"))
    assert all(len(s.cosine_cdf) == 37 for s in away.streams[0].slices)
    kept, read = away.plot_token_cosines(), exact.plot_token_cosines()
    assert "(from the result)" in kept.axes[0].get_title()
    for approx, full in zip(kept.axes[0].patches, read.axes[0].patches):
        a_counts, a_edges, _ = approx.get_data()
        f_counts, f_edges, _ = full.get_data()
        assert a_counts.sum() == pytest.approx(exact.tokens.aligned_tokens)
        # the same shape: the median token falls in the same bin, or the next, of the shared range
        a_median = a_edges[np.searchsorted(np.cumsum(a_counts), a_counts.sum() / 2)]
        f_median = f_edges[np.searchsorted(np.cumsum(f_counts), f_counts.sum() / 2)]
        assert abs(a_median - f_median) <= 2 * (f_edges[1] - f_edges[0])
    html = open(write_report(away, tmp_path / "report").html).read()
    assert "Drawn from the distribution the result keeps" in html and "histogram left out" not in html


def test_notebook_view_of_a_real_result():
    result = _result("offset_plus1")
    html = result._repr_html_()
    assert 'data-verdict="FAIL"' in html and "layer_offset" in html
    assert "HF[3]" in html


def test_plot_of_an_unknown_stream_is_a_one_line_error():
    from alignprobe.errors import BadInput

    with pytest.raises(BadInput, match="no compared stream named 'nope'"):
        _result("clean").plot_layers("nope")


def test_compare_report_option_writes_the_three_files(tmp_path):
    from click.testing import CliRunner

    from alignprobe.cli.main import cli

    run = demo_run()
    dumps = os.path.join(run.out_dir, "dumps")
    args = ["compare", "--train-dump", f"{dumps}/train.h5", "--serve-dump", f"{dumps}/offset_plus1.h5"]
    done = CliRunner().invoke(cli, [*args, "--report", str(tmp_path / "report")])
    assert done.exit_code == 1, done.output  # FAIL
    assert sorted(p.name for p in (tmp_path / "report").iterdir()) == ["report.html", "result.json", "summary.md"]
    html = (tmp_path / "report" / "report.html").read_text()
    assert 'data-verdict="FAIL"' in html and html.count("<img ") == 4  # dumps at hand: the histogram too
    (tmp_path / "taken").write_text("x")
    assert CliRunner().invoke(cli, [*args, "--report", str(tmp_path / "taken")]).exit_code == 2
