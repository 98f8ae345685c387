"""A result.json written by an older alignprobe still loads and renders (``alignprobe report``).

tests/data/result_main_863af76.json was written by main at 863af76 (before findings went through
alignprobe/findings/render.py): a +1 layer offset compared on 2 of 3 samples, with an infinite SQNR
and a NaN standard error as that code encoded them ("inf" / "nan"), and a --drafter accept section
whose NaNs it wrote as null (a missing serve side, a NaN accept rate).
"""

import html
import json
import math
import pathlib

from click.testing import CliRunner

from alignprobe.cli.main import cli
from alignprobe.findings import render
from alignprobe.report.load import load_result

OLD = pathlib.Path(__file__).parents[1] / "helpers" / "data" / "result_main_863af76.json"


def test_an_old_result_loads_with_its_findings_and_numbers():
    raw = json.loads(OLD.read_text())
    result = load_result(OLD)
    assert result.verdict == "FAIL" and [f.code for f in result.findings] == ["layer_offset"]
    finding, written = result.findings[0], raw["findings"][0]
    assert (render.title(finding), render.fix(finding), finding.stream) == (written["title"], written["fix"],
                                                                             written["stream"])
    first = result.streams[0].slices[0]
    assert math.isinf(first.sqnr_db) and math.isnan(first.cosine_mean_se)
    assert raw["accept"]["serve"] is None and raw["accept"]["cost"] is None  # how the old code wrote a NaN


def test_alignprobe_report_renders_an_old_result(tmp_path):
    done = CliRunner().invoke(cli, ["report", str(OLD), "--out", str(tmp_path / "r")])
    assert done.exit_code == 0, done.output
    page = (tmp_path / "r" / "report.html").read_text()
    written = json.loads(OLD.read_text())["findings"][0]
    title = written["title"]
    assert 'data-code="layer_offset"' in page and "Predicted accept length" in page and "not predicted" in page
    assert html.escape(title) in page and html.escape(written["fix"]) in page
    again = json.loads((tmp_path / "r" / "result.json").read_text())
    assert again["findings"][0]["title"] == title and again["findings"][0]["notes"] == []  # re-saved in today's form
    assert again["streams"][0]["slices"][0]["sqnr_db"] == "inf" and again["accept"]["serve"] is None
