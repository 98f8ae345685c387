"""Two outputs of one run on one path: the later overwrote the earlier (``--json o.json --junit
o.json`` left JUnit XML where a pipeline reads the result). Refused before any work, in every
command that writes two files; the same record twice (--json into the --report folder) still runs."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, strategies as st

from bad_input_helpers import FUZZ, assert_refused, invoke
from dump_helpers import H, claims, random_samples, write


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    folder = tmp_path_factory.mktemp("outputs")
    a = write(folder / "a.h5", random_samples([5, 7], {"aux": 3 * H, "final": H}), claims())
    b = write(folder / "b.h5", random_samples([5, 7], {"aux": 3 * H, "final": H}, seed=1), claims())
    return a, b


REPORT_FILES = ("report.html", "summary.md")


@FUZZ
@given(command=st.sampled_from(["compare", "audit"]), first=st.sampled_from(["--json", "--junit"]),
       second=st.sampled_from(["--json", "--junit", "--report"]), name=st.sampled_from(["o.json", "out.xml"] + list(REPORT_FILES)))
def test_two_outputs_on_one_path_are_refused(dumps, tmp_path_factory, command, first, second, name):
    a, b = dumps
    folder = tmp_path_factory.mktemp("o")
    target = folder / name
    if first == second:
        second = "--report"
    if second == "--report":
        if name not in REPORT_FILES:
            name = "summary.md"
            target = folder / name
        args2 = ["--report", folder]
    else:
        args2 = [second, target]
    run = ["compare", "--train-dump", a, "--serve-dump", b] if command == "compare" else ["audit", a, "--no-progress"]
    line = assert_refused(run + [first, target] + args2, [a, b])
    assert "is also the" in line, line
    assert not os.path.exists(target)


def test_json_into_the_report_folder_is_the_same_record(dumps, tmp_path):
    a, b = dumps
    result = invoke(["compare", "--train-dump", a, "--serve-dump", b, "--json", tmp_path / "result.json", "--report", tmp_path])
    assert result.exit_code in (0, 1), result.stderr
    assert (tmp_path / "result.json").read_text().lstrip().startswith("{")
