"""``alignprobe gate`` against a real engine (tests/engines/test_gate_*.py): run it, read what it left.

A gate run is judged the way a CI pipeline reads it: the exit code, result.json, the JUnit file and
report/ (summary.md, report.html), never the Python objects behind them.
"""

from __future__ import annotations

import json
import os
import time
import xml.etree.ElementTree as ET

from engine_helpers import record


def write_config(folder, engine_work, serve: dict, train: dict | None = None) -> str:
    """A gate TOML in ``folder`` (out = "out" beside it) whose [serve] holds ``serve``; the train side is
    engine_work's model and prompts in fp32, plus ``train``."""
    train = {"model": engine_work["model"], "prompts": engine_work["prompts"], "dtype": "fp32", **(train or {})}
    lines = ['out = "out"']
    for section, keys in (("train", train), ("serve", serve)):
        lines += ["", f"[{section}]"]
        for key, value in keys.items():
            if isinstance(value, dict):  # an inline table; JSON's strings, numbers, lists and booleans are TOML's
                value = "{ " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in value.items()) + " }"
            else:
                value = json.dumps(value)
            lines.append(f"{key} = {value}")
    path = os.path.join(folder, "gate.toml")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    return path


def run_gate(name: str, engine: str, args: list[str], out) -> dict:
    """``alignprobe gate ARGS --out OUT``; records the run (engine, verdict, seconds) and returns what it left."""
    from click.testing import CliRunner

    from alignprobe.cli.main import cli

    started = time.monotonic()
    result = CliRunner().invoke(cli, ["gate", *args, "--out", str(out), "--quiet"])
    seconds = time.monotonic() - started
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    outcome = {"exit_code": result.exit_code, "output": result.output}
    with open(os.path.join(out, "result.json"), encoding="utf-8") as fh:
        outcome["record"] = json.load(fh)
    outcome["junit"] = ET.parse(os.path.join(out, "junit.xml")).getroot().find("testsuite")
    with open(os.path.join(out, "report", "summary.md"), encoding="utf-8") as fh:
        outcome["summary"] = fh.read()
    assert os.path.isfile(os.path.join(out, "report", "report.html")), result.output
    findings = outcome["record"].get("findings") or []
    record(f"gate-{name}", engine=engine, mode="gate", verdict=outcome["record"]["verdict"],
           exit_code=result.exit_code, gate_s=round(seconds, 1),
           findings=[{"code": f["code"], "severity": f["severity"]} for f in findings])
    return outcome


def assert_passed(outcome: dict) -> None:
    """PASS, exit 0, nothing above info, every JUnit case passing, the summary saying PASS."""
    record = outcome["record"]
    loud = [(f["code"], f["title"]) for f in record["findings"] if f["severity"] != "info"]
    assert outcome["exit_code"] == 0 and record["verdict"] == "PASS" and record["exit_code"] == 0, \
        (outcome["output"], loud)
    assert not loud, loud
    suite = outcome["junit"]
    assert suite.get("failures") == "0" and suite.get("errors") == "0" and len(suite.findall("testcase")) >= 10
    assert "alignprobe: **PASS**" in outcome["summary"]


def assert_failed_on(outcome: dict, code: str) -> dict:
    """FAIL, exit 1, ``code`` the reason, its JUnit case failing with the finding's title and fix, the
    summary naming it; returns the finding."""
    record = outcome["record"]
    assert outcome["exit_code"] == 1 and record["verdict"] == "FAIL" and record["exit_code"] == 1, \
        (outcome["output"], [(f["code"], f["title"]) for f in record["findings"]])
    assert code in record["exit_reason"], record["exit_reason"]
    finding = next(f for f in record["findings"] if f["code"] == code)
    assert finding["severity"] == "error"
    cases = {case.get("name"): case for case in outcome["junit"].iter("testcase")}
    failure = cases[code].find("failure")
    assert failure is not None and finding["title"] in failure.get("message") and finding["fix"] in failure.text
    assert int(outcome["junit"].get("failures")) >= 1
    assert "alignprobe: **FAIL**" in outcome["summary"] and code in outcome["summary"]
    return finding
