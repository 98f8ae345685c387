"""alignprobe accept and compare --drafter from the command line; the report's accept section."""

import json
import os
import subprocess
import sys

import pytest

from alignprobe.compare.result import CompareResult
from accept_fixtures import specforge_drafter, tiny_target_and_dumps


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("accept-cli")
    model, target, train, prompts = tiny_target_and_dumps(root)
    from alignprobe.probes.hf import capture_hf

    shifted = capture_hf(model, prompts, os.path.join(root, "plus1.h5"), layers="eagle3", aux_layers=(3, 5, 6), progress=False)
    drafter = specforge_drafter(root / "drafter", model.config)
    return root, target, train, shifted, drafter


def _run(*args):
    return subprocess.run([sys.executable, "-m", "alignprobe.cli.main", *args], capture_output=True, text=True)


def test_accept_prints_both_sides_and_writes_json(tiny):
    root, target, train, shifted, drafter = tiny
    out = root / "accept.json"
    done = _run("accept", "--drafter", drafter, "--train-dump", train, "--serve-dump", shifted, "--target", target,
                "--json", str(out))
    assert done.returncode == 1, done.stderr  # the drafter would be fed other layers than its ids give: an error
    assert "train " in done.stdout and "serve " in done.stdout and "cost about" in done.stdout
    assert "drafter_tap_ids" in done.stdout
    raw = json.loads(out.read_text())
    assert raw["train"]["per_position"] and raw["serve"]["per_position"] and raw["explained_by"] == "layer_offset"
    same = _run("accept", "--drafter", drafter, "--train-dump", train, "--serve-dump", train, "--target", target)
    assert same.returncode == 0, same.stdout + same.stderr
    assert "cost about 0.00" in same.stdout
    strict = _run("accept", "--drafter", drafter, "--train-dump", train, "--serve-dump", train, "--target", target,
                  "--fail-cost", "-1")
    assert strict.returncode == 1


def test_accept_bad_input_is_one_line_exit_2(tiny):
    root, target, train, shifted, drafter = tiny
    done = _run("accept", "--drafter", drafter, "--train-dump", train, "--serve-dump", shifted)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "give --target" in done.stderr
    done = _run("accept", "--drafter", str(root / "none"), "--train-dump", train, "--serve-dump", shifted)
    assert done.returncode == 2 and "no config.json" in done.stderr


def test_compare_with_drafter_puts_the_prediction_in_the_report(tiny):
    root, target, train, shifted, drafter = tiny
    report = root / "report"
    done = _run("compare", "--train-dump", train, "--serve-dump", shifted, "--drafter", drafter, "--target", target,
                "--report", str(report))
    assert done.returncode == 1, done.stderr  # the offset fails the gate
    assert "cost about" in done.stdout
    html = (report / "report.html").read_text()
    assert "Predicted accept length" in html and html.count("<td>train</td>") == 1 and "<td>serve</td>" in html
    result = CompareResult.from_json((report / "result.json").read_text())
    assert result.accept["serve"]["per_position"] and result.accept["explained_by"] == "layer_offset"


def test_json_dash_is_stdout_and_bad_input_still_writes_the_json(tiny):
    root, target, train, shifted, drafter = tiny
    done = _run("accept", "--drafter", drafter, "--train-dump", train, "--serve-dump", train, "--target", target,
                "--json", "-", "--no-explain")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["serve"]["per_position"]  # stdout is the JSON alone
    assert "cost about" in done.stderr and not os.path.lexists("-")  # where a file named "-" would land: the cwd
    error = root / "error.json"
    done = _run("accept", "--drafter", drafter, "--train-dump", train, "--serve-dump", shifted, "--json", str(error))
    assert done.returncode == 2 and "give --target" in done.stderr
    raw = json.loads(error.read_text())
    assert raw["verdict"] is None and raw["exit_code"] == 2 and "give --target" in raw["error"]
