"""What a CI job reads: the JUnit file, --json - on stdout, the bad-input JSON, the GitHub step summary and
annotations, ``alignprobe diff`` (regression, improvement, no change), and the usage line for positional dumps.

Dumps are the synthetic random walks of compare_helpers; what each must show comes from what was planted.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from click.testing import CliRunner

from alignprobe.cli.main import cli
from alignprobe.compare import compare
from alignprobe.findings import Finding, Subject, codes_of
from alignprobe.compare.diff import EXIT_IMPROVEMENT, EXIT_NO_CHANGE, EXIT_REGRESSION, diff_results
from alignprobe.report.github import annotation
from alignprobe.report.junit import render_junit
from compare_helpers import make_samples, write_serve, write_train


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    d = tmp_path_factory.mktemp("ci")
    samples = make_samples(num=4, length=24)
    noise = np.random.default_rng(1)

    def drift(scale):  # serve = train + scale * ||row|| noise: rel-RMS about `scale`
        return lambda x, sid: x + scale * np.linalg.norm(x, axis=1, keepdims=True) / np.sqrt(x.shape[1]) \
            * noise.standard_normal(x.shape).astype(np.float32)

    return {
        "train": write_train(d / "train.h5", samples),
        "clean": write_serve(d / "clean.h5", samples),
        "offset": write_serve(d / "offset.h5", samples, taps=(3, 4, 5)),
        "drift": write_serve(d / "drift.h5", samples, transform=drift(0.1)),
        "noise": write_serve(d / "noise.h5", samples, transform=drift(1e-5)),
    }


def _run(*args, **env):
    return CliRunner().invoke(cli, list(args), env=env or None)


def _compare(dumps, serve, *more):
    return _run("compare", "--train-dump", dumps["train"], "--serve-dump", dumps[serve], *more)


# -- JUnit ---------------------------------------------------------------------------------------


def test_junit_one_case_per_finding_class_failures_carry_title_and_fix(dumps, tmp_path):
    path = tmp_path / "junit.xml"
    r = _compare(dumps, "offset", "--junit", str(path), "--json", str(tmp_path / "r.json"))
    assert r.exit_code == 1
    root = ET.parse(path).getroot()
    suite = root.find("testsuite")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert list(cases) == codes_of("compare")  # every code compare checks, passed or not, in the registry's order
    result = json.loads((tmp_path / "r.json").read_text())
    errors = {f["code"]: f for f in result["findings"] if f["severity"] == "error"}
    failed = {name for name, c in cases.items() if c.find("failure") is not None}
    assert failed == set(errors) and "layer_offset" in failed
    failure = cases["layer_offset"].find("failure")
    assert errors["layer_offset"]["title"] in failure.get("message")
    assert "fix: " + errors["layer_offset"]["fix"] in failure.text
    assert suite.get("failures") == str(len(failed)) and suite.get("tests") == str(len(cases))


def test_junit_clean_run_has_no_failures_and_strict_fails_warnings():
    warn = Finding("token_shift", "warn", "1 sample shifted <by> one & more", {"samples": 1}, "Check the BOS token.")
    relaxed = ET.fromstring(render_junit([warn], "compare"))
    assert relaxed.find("testsuite").get("failures") == "0"
    assert "1 sample shifted <by> one & more" in relaxed.find(".//system-out").text  # escaped, parsed back intact
    strict = ET.fromstring(render_junit([warn], "compare", strict=True))
    assert [c.get("name") for c in strict.iter("testcase") if c.find("failure") is not None] == ["token_shift"]


# -- JSON: on stdout, with its exit code, and for bad input ----------------------------------------


def test_json_dash_writes_only_json_to_stdout(dumps, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(cli, ["compare", "--train-dump", dumps["train"], "--serve-dump", dumps["offset"],
                                 "--json", "-"])
    assert r.exit_code == 1
    record = json.loads(r.stdout)
    assert record["exit_code"] == 1 and record["exit_reason"].startswith("FAIL: layer_offset")
    assert "alignprobe compare: FAIL" in r.stderr  # the summary moved to stderr
    assert not (tmp_path / "-").exists()


@pytest.mark.parametrize("args, message", [
    (["--train-dump", "absent.h5", "--serve-dump", "absent2.h5"], "no such file"),
    (["--train-dump", "x.h5"], "Missing option --serve-dump"),
    (["--set", "nokey", "--train-dump", "a", "--serve-dump", "b"], "KEY=VALUE"),
])
def test_bad_input_with_json_writes_a_json_error(tmp_path, args, message):
    path = tmp_path / "r.json"
    r = _run("compare", "--json", str(path), *args)
    assert r.exit_code == 2 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1
    record = json.loads(path.read_text())
    assert record["verdict"] is None and record["exit_code"] == 2 and message in record["error"]


def test_bad_input_with_json_dash_puts_the_error_object_on_stdout():
    r = _run("compare", "--json", "-", "--train-dump", "absent.h5", "--serve-dump", "b.h5")
    assert r.exit_code == 2 and json.loads(r.stdout)["exit_code"] == 2


def test_positional_dumps_get_the_usage_line_and_the_flags():
    r = _run("compare", "a.h5", "b.h5")
    assert r.exit_code == 2
    assert "did you mean alignprobe compare --train-dump a.h5 --serve-dump b.h5?" in r.stderr
    assert "usage: alignprobe compare --train-dump TRAIN --serve-dump SERVE" in r.stderr


def test_quiet_verbose_and_no_colour_off_a_terminal(dumps):
    quiet = _compare(dumps, "offset", "--quiet")
    assert quiet.stdout.strip().splitlines() == [quiet.stdout.strip()] and "FAIL (layer_offset" in quiet.stdout
    verbose = _compare(dumps, "offset", "--verbose")
    normal = _compare(dumps, "offset")
    assert len(verbose.stdout) > len(normal.stdout) and "\033[" not in normal.stdout  # CliRunner is no tty


def test_colour_only_without_no_color():
    from alignprobe.compare.summary import format_verdict_line
    from report_samples import offset_result

    assert "\033[31mFAIL\033[0m" in format_verdict_line(offset_result(), colour=True)
    assert "\033[" not in format_verdict_line(offset_result(), colour=False)


def test_compare_progress_reports_every_row(dumps):
    calls = []
    result = compare(dumps["train"], dumps["clean"], progress=lambda done, total: calls.append((done, total)))
    assert calls and calls[-1] == (result.tokens.aligned_tokens, result.tokens.aligned_tokens)


# -- GitHub Actions --------------------------------------------------------------------------------


def test_github_step_summary_and_annotations(dumps, tmp_path):
    summary = tmp_path / "step_summary.md"
    summary.write_text("earlier step\n")
    r = _run("compare", "--train-dump", dumps["train"], "--serve-dump", dumps["offset"],
             GITHUB_STEP_SUMMARY=str(summary), GITHUB_ACTIONS="true")
    assert r.exit_code == 1
    text = summary.read_text()
    assert text.startswith("earlier step\n") and "alignprobe: **FAIL**" in text  # appended, not replaced
    lines = [line for line in r.stdout.splitlines() if line.startswith("::")]
    assert lines and lines[0].startswith("::error title=alignprobe layer_offset [hidden_states]::")
    outside = _run("compare", "--train-dump", dumps["train"], "--serve-dump", dumps["offset"])
    assert "::error" not in outside.stdout


def test_annotation_escapes_newlines_and_colons():
    line = annotation(Finding("layer_offset", "error", "a: b, c\nd", {}, "50% lower", Subject("x:y")))
    assert line == "::error title=alignprobe layer_offset [x%3Ay]::a: b, c%0Ad%0AFix: 50%25 lower"


# -- diff --------------------------------------------------------------------------------------------


def _json(dumps, serve, tmp_path):
    path = tmp_path / f"{serve}.json"
    _compare(dumps, serve, "--json", str(path))
    return str(path)


def test_diff_regression_improvement_and_no_change(dumps, tmp_path):
    clean, offset, drift = (_json(dumps, name, tmp_path) for name in ("clean", "offset", "drift"))
    noise = _json(dumps, "noise", tmp_path)

    worse = _run("diff", clean, offset)
    assert worse.exit_code == EXIT_REGRESSION and "REGRESSION (verdict PASS -> FAIL)" in worse.stdout
    assert "appeared error layer_offset" in " ".join(worse.stdout.split())

    better = _run("diff", offset, clean)
    assert better.exit_code == EXIT_IMPROVEMENT and "gone" in better.stdout and "layer_offset" in better.stdout

    same = _run("diff", clean, noise)  # 1e-5 noise: far below a twentieth of the warn tolerance
    assert same.exit_code == EXIT_NO_CHANGE and "NO CHANGE" in same.stdout

    drifted = _run("diff", clean, drift, "--json", "-")
    record = json.loads(drifted.stdout)
    assert drifted.exit_code == EXIT_REGRESSION and record["kind"] == "regression"
    moved = {(m["label"], m["metric"]) for m in record["moved"] if m["worse"]}
    assert ("HF[2]", "rel_rms") in moved and all(m["new"] > m["old"] for m in record["moved"] if m["metric"] == "rel_rms")


def test_diff_of_sampled_results_needs_the_change_beyond_the_interval(dumps):
    """Two samplings of the same pair differ by sampling error only: no change; the same sampling of a
    drifting pair moves beyond both intervals."""
    a = compare(dumps["train"], dumps["clean"], sample=2)
    b = compare(dumps["train"], dumps["noise"], sample=3)
    assert diff_results(a, b).kind == "no change"
    c = compare(dumps["train"], dumps["drift"], sample=3)
    change = diff_results(a, c)
    assert change.kind == "regression" and all(m.interval > 0 for m in change.moved)


def test_diff_bad_input(tmp_path):
    error = tmp_path / "error.json"
    error.write_text(json.dumps({"verdict": None, "exit_code": 2, "error": "no such file"}))
    r = _run("diff", str(error), str(error))
    assert r.exit_code == 2 and "stopped before a result (no such file)" in r.stderr
    assert _run("diff", "absent.json", str(error)).exit_code == 2
