"""`alignprobe demo` end to end: each planted fault gets its verdict and finding, reports are written."""

from __future__ import annotations

import json
import os
import re

import pytest
from click.testing import CliRunner

from alignprobe.cli.main import cli
from demo_run import demo_run

# What each planted fault must produce, written here and not read from alignprobe.demo: the
# verdict, and the finding code that must be among the findings at warn or above (None: none at all).
EXPECTED = {
    "clean": ("PASS", None),
    "eagle_not_eagle3": ("FAIL", "width_mismatch"),
    "offset_plus1": ("FAIL", "layer_offset"),
    "int4": ("FAIL", "numeric_drift"),
}


@pytest.fixture(scope="module")
def run():
    return demo_run()


@pytest.mark.slow
def test_demo_exits_0_and_prints_one_line_per_scenario(run):
    assert run.returncode == 0, run.stdout + run.stderr
    for name, (verdict, code) in EXPECTED.items():
        lines = [line for line in run.stdout.splitlines() if re.search(rf"^  \w+ +{name} ", line)]
        assert len(lines) == 1, run.stdout
        assert lines[0].startswith("  ok ") and f" {verdict} " in lines[0]
        if code:
            assert code in lines[0]
    assert f"reports: {run.out_dir}" in run.stdout


@pytest.mark.slow
@pytest.mark.parametrize("name", EXPECTED)
def test_each_scenario_gets_its_verdict_and_finding(run, name):
    verdict, code = EXPECTED[name]
    folder = os.path.join(run.out_dir, name)
    with open(os.path.join(folder, "result.json")) as f:
        raw = json.load(f)
    serious = [f["code"] for f in raw["findings"] if f["severity"] in ("warn", "error")]
    assert raw["verdict"] == verdict, serious
    if code is None:
        assert serious == []
    else:
        assert code in serious
        assert raw["findings"][0]["code"] == code  # the planted fault is the headline
    html = open(os.path.join(folder, "report.html"), encoding="utf-8").read()
    assert f'data-verdict="{verdict}"' in html
    assert f"**{verdict}**" in open(os.path.join(folder, "summary.md"), encoding="utf-8").read()


def test_demo_refuses_a_folder_it_did_not_make(tmp_path):
    (tmp_path / "mine.txt").write_text("keep me")
    done = CliRunner().invoke(cli, ["demo", "--out", str(tmp_path)])
    assert done.exit_code == 2
    assert "did not make" in done.stderr and done.stderr.count("\n") == 1
    assert (tmp_path / "mine.txt").read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.txt"]


def _outcome(verdict, codes, expected_verdict="FAIL", expected_code="layer_offset"):
    from alignprobe.demo.run import ScenarioOutcome

    return ScenarioOutcome("s", "planted", expected_verdict, expected_code, verdict, codes, "title", "dir")


def test_a_scenario_is_right_only_with_its_verdict_and_its_code():
    assert _outcome("FAIL", ["layer_offset"]).as_expected
    assert _outcome("FAIL", ["width_mismatch", "layer_offset"]).as_expected
    assert not _outcome("WARN", ["layer_offset"]).as_expected
    assert not _outcome("FAIL", ["wrong_taps"]).as_expected
    assert _outcome("PASS", [], "PASS", None).as_expected
    assert not _outcome("PASS", ["position_drift"], "PASS", None).as_expected  # clean means no warnings either


def test_a_wrong_scenario_makes_the_demo_fail_and_says_what_was_expected():
    from alignprobe.demo.run import DemoResult

    demo = DemoResult("out", "model", [_outcome("FAIL", ["layer_offset"]), _outcome("FAIL", ["wrong_taps"])], 1.0, 1.0)
    assert not demo
    lines = demo.format().splitlines()
    assert lines[0].startswith("  ok ") and lines[1].startswith("  WRONG ")
    assert "expected FAIL layer_offset; got: title" in lines[1]
