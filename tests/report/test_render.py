"""Every renderer puts a finding's text together through alignprobe/findings/render.py: the owner's
title and fix with the notes other classes attached, and the JUnit file's cases from the code registry."""

import json
import math
import xml.etree.ElementTree as ET

from alignprobe.accept.result import AcceptResult, SideAccept
from alignprobe.compare.summary import format_summary
from alignprobe.findings import CODES, Finding, Note, Subject, codes_of, render
from alignprobe.report.finding_html import findings_html
from alignprobe.report.github import annotation
from alignprobe.report.junit import render_junit
from alignprobe.report.markdown import render_markdown
from report_samples import offset_result

NOTE = Note("token_shift", {"samples": 2}, headline="; 2 samples shifted by one token",
            fix_before="Fix the token shift first. ", fix_after=" Then compare again.")
NOTED = Finding("numeric_drift", "warn", "rel-RMS 0.08 at HF[3]", {"rel_rms": 0.08, "worst": math.nan},
                "Serve in the training dtype.", Subject("hidden_states", ("HF[3]",)), (NOTE,))
TITLE = "rel-RMS 0.08 at HF[3]; 2 samples shifted by one token"
FIX = "Fix the token shift first. Serve in the training dtype. Then compare again."


def test_every_renderer_shows_the_title_and_fix_with_their_notes():
    result = offset_result()
    result.findings = [NOTED]
    assert TITLE in format_summary(result, width=400) and FIX in format_summary(result, width=400)
    markdown = render_markdown(result)
    assert TITLE in markdown and FIX in markdown
    page = findings_html([NOTED])
    assert TITLE in page and FIX in page
    assert annotation(NOTED) == f"::warning title=alignprobe numeric_drift [hidden_states]::{TITLE}%0AFix: {FIX}"
    case = ET.fromstring(render_junit([NOTED], "compare", strict=True)).find(".//testcase[@name='numeric_drift']")
    assert case.find("failure").get("message") == f"[hidden_states] {TITLE}" and f"fix: {FIX}" in case.find("failure").text


def test_result_json_holds_the_rendered_text_the_notes_as_data_and_strict_numbers():
    result = offset_result()
    result.findings = [NOTED]
    text = result.to_json()
    written = json.loads(text)["findings"][0]  # json.loads of strict JSON: no NaN literal
    assert (written["title"], written["fix"], written["stream"], written["slices"]) == (TITLE, FIX, "hidden_states", ["HF[3]"])
    assert written["notes"][0]["code"] == "token_shift" and written["own"]["title"] == NOTED.title
    assert written["evidence"]["worst"] == "nan"
    again = type(result).from_json(text).findings[0]
    assert (render.title(again), render.fix(again), again.stream) == (TITLE, FIX, "hidden_states")


def test_junit_lists_each_code_of_the_judge_under_its_group():
    for judge in ("compare", "audit"):
        suite = ET.fromstring(render_junit([], judge, suite=f"alignprobe {judge}")).find("testsuite")
        cases = suite.findall("testcase")
        assert [c.get("name") for c in cases] == codes_of(judge) and suite.get("failures") == "0"
        assert all(c.get("classname") == f"alignprobe.{judge}.{CODES[c.get('name')].group}" for c in cases)


def test_accept_writes_nan_as_nan_and_a_missing_side_as_null():
    side = SideAccept("t.h5", "eagle3_aux", [2, 3, 4], "fc", 10, 3, [0.5, math.nan], [0.5, 0.25], [0.5, 0.25], 1.5)
    raw = json.loads(AcceptResult("d", "eagle3", 2, side, None).to_json())
    assert raw["serve"] is None and raw["cost"] == "nan" and raw["train"]["per_position"] == [0.5, "nan"]
    again = AcceptResult.from_dict(raw)
    assert again.serve is None and math.isnan(again.train.per_position[1]) and again.train.dump == "t.h5"
