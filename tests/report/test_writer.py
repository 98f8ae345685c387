"""write_report and `alignprobe report`: the three files, what the page and the summary say, bad input."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re

import pytest
from click.testing import CliRunner
from PIL import Image

from alignprobe.cli.main import cli
from alignprobe.compare.result import CompareResult
from alignprobe.report import write_report
from alignprobe.report.notebook import repr_html
from report_samples import offset_result, width_result

IMG_SRC = re.compile(r'<img [^>]*src="([^"]*)"')


def _images(html: str) -> list[Image.Image]:
    out = []
    for src in IMG_SRC.findall(html):
        assert src.startswith("data:image/png;base64,"), src[:60]
        out.append(Image.open(io.BytesIO(base64.b64decode(src.split(",", 1)[1]))))
    return out


@pytest.fixture(scope="module")
def offset_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("offset")
    files = write_report(offset_result(), out)
    return files, open(files.html, encoding="utf-8").read()


def test_page_shows_verdict_first_then_findings_by_severity(offset_report):
    _, html = offset_report
    assert html.index('data-verdict="FAIL"') < html.index("<h2>Findings</h2>")
    codes = [html.index(f'data-code="{c}"') for c in ("layer_offset", "position_drift", "token_shift")]
    assert codes == sorted(codes)
    assert "Configure the engine&#x27;s layer ids one lower" in html  # the fix, escaped
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_page_is_self_contained_and_its_plots_are_pngs(offset_report):
    files, html = offset_report
    assert not re.search(r'(src|href)="(https?:)?//', html)
    assert "<link" not in html and "<script" not in html
    images = _images(html)
    # No dumps at the result's paths: similarity, layer metrics and position drift, no histogram.
    assert len(images) == 3
    assert all(img.format == "PNG" and img.width > 100 and img.height > 100 for img in images)
    assert "histogram left out" in html
    assert "histogram left out" not in open(files.json).read()  # the JSON stays the comparison's record


def test_width_mismatch_draws_the_slice_composition(tmp_path):
    files = write_report(width_result(), tmp_path)
    html = open(files.html, encoding="utf-8").read()
    assert len(_images(html)) == 2  # composition + similarity; no per-layer numbers to plot
    assert "slices as measured, against the training layout" in html
    assert "No per-layer numbers" in html


def test_json_round_trips(offset_report):
    files, _ = offset_report
    with open(files.json) as f:
        again = CompareResult.from_dict(json.load(f))
    assert again.to_dict() == offset_result().to_dict()


def test_summary_is_short_and_names_each_finding(offset_report):
    files, _ = offset_report
    md = open(files.markdown, encoding="utf-8").read()
    assert len(md.splitlines()) <= 30
    assert "**FAIL**" in md
    for code in ("layer_offset", "position_drift", "token_shift"):
        assert f"`{code}`" in md
    assert "Configure the engine's layer ids one lower" in md
    assert "<script>" not in md
    # every slice has p1 0.8 - 0.05; rel-RMS 0.1, 0.2, 0.3 for slices 0, 1, 2 (HF[2], HF[3], HF[3])
    assert "lowest cosine p1 0.75 at HF[2]; highest rel-RMS 0.3 at HF[3]; norm ratio 1.02 to 1.02" in md


def test_notebook_view_has_verdict_findings_and_table():
    html = repr_html(offset_result())
    assert 'data-verdict="FAIL"' in html
    assert all(code in html for code in ("layer_offset", "position_drift", "token_shift"))
    assert html.count("<td class=\"l\">HF[3]</td>") >= 1 and "cos p1" in html
    assert "<body" not in html


def _sha(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def test_report_command_rerenders_without_touching_its_input(tmp_path):
    src = tmp_path / "run"
    src.mkdir()
    (src / "result.json").write_text(offset_result().to_json())
    before = _sha(src / "result.json")
    done = CliRunner().invoke(cli, ["report", str(src / "result.json")])
    assert done.exit_code == 0, done.output
    assert (src / "report.html").exists() and (src / "summary.md").exists()
    assert _sha(src / "result.json") == before

    done = CliRunner().invoke(cli, ["report", str(src / "result.json"), "--out", str(tmp_path / "elsewhere")])
    assert done.exit_code == 0, done.output
    assert sorted(p.name for p in (tmp_path / "elsewhere").iterdir()) == ["report.html", "result.json", "summary.md"]


@pytest.mark.parametrize(
    "content, message",
    [(None, "no such file"), ("{not json", "not JSON"), ('{"a": 1}', "not an alignprobe compare result"),
     ('{"verdict": "MAYBE", "findings": []}', "cannot read")],
)
def test_report_command_bad_input_is_one_line_exit_2(tmp_path, content, message):
    path = tmp_path / "result.json"
    if content is not None:
        path.write_text(content)
    done = CliRunner().invoke(cli, ["report", str(path), "--out", str(tmp_path / "out")])
    assert done.exit_code == 2
    assert message in done.stderr and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert content is None or path.read_text() == content


def test_report_folder_that_is_a_file_is_bad_input(tmp_path):
    (tmp_path / "taken").write_text("x")
    path = tmp_path / "result.json"
    path.write_text(offset_result().to_json())
    done = CliRunner().invoke(cli, ["report", str(path), "--out", str(tmp_path / "taken")])
    assert done.exit_code == 2


def test_layer_rows_past_the_drift_warning_are_shaded():
    from alignprobe.report.html import layer_table

    pair = offset_result().streams[0]  # p1 0.75 and rel-RMS 0.1 .. 0.3 on every slice; 1 NaN row each
    assert layer_table(pair, {"drift_warn_cosine_p1": 0.998, "drift_warn_rel_rms": 0.05}).count('class="ap-bad"') == 3
    assert layer_table(pair, {"drift_warn_cosine_p1": 0.7, "drift_warn_rel_rms": 0.25}).count('class="ap-bad"') == 1
    assert layer_table(pair, {"drift_warn_cosine_p1": 0.7, "drift_warn_rel_rms": 0.5}).count('class="ap-bad"') == 0
    assert layer_table(pair).count("<td>1</td>") == 3  # the bad-rows column counts the serve side's NaN row
