"""Odd names and empty paths: a file name holding a newline, a tab, an escape or bytes that are not
UTF-8 is named on one printable line (it split the line in two, or cut the message at its newline);
an empty output path (``--out ""``, an unset shell variable) is refused before any work in every
command (some took it as the current folder, import failed only after importing everything)."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given, strategies as st

from alignprobe.errors import printable_line
from bad_input_helpers import FUZZ, assert_refused
from dump_helpers import H, claims, random_samples, write

CONTROL = ["\n", "\r", "\t", "\x1b", "\x7f", "\x85", "\u2028", "\x01"]
# one undecodable byte of a file name, as Python hands it over (os.fsdecode's surrogateescape)
UNDECODABLE = [os.fsdecode(bytes([b])) for b in (0xFF, 0xFE, 0xC3, 0x80)]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    folder = tmp_path_factory.mktemp("names")
    a = write(folder / "a.h5", random_samples([5, 7], {"aux": 3 * H, "final": H}), claims())
    b = write(folder / "b.h5", random_samples([5, 7], {"aux": 3 * H, "final": H}, seed=1), claims())
    result = folder / "result.json"
    from bad_input_helpers import invoke

    assert invoke(["compare", "--train-dump", a, "--serve-dump", b, "--json", result]).exit_code in (0, 1)
    prompts = folder / "p.jsonl"
    prompts.write_text(json.dumps({"input_ids": [1, 2, 3]}) + "\n")
    return dict(folder=folder, a=a, b=b, result=result, prompts=prompts)


odd_name = st.builds(lambda head, odd, tail: f"{head}{odd}{tail}.h5",
                     st.text("abc-_. ", min_size=1, max_size=4), st.sampled_from(CONTROL + UNDECODABLE),
                     st.text("xyz", max_size=3))


@FUZZ
@given(name=odd_name, where=st.sampled_from(["inspect", "compare train", "compare serve", "diff", "report", "import", "audit"]),
       exists=st.booleans())
def test_an_odd_input_name_is_one_printable_line(world, tmp_path_factory, name, where, exists):
    folder = tmp_path_factory.mktemp("odd")
    path = os.path.join(folder, name)
    if exists:  # a file of that name that is not what the command reads
        with open(path, "wb") as fh:
            fh.write(b"not a dump, not JSON \xff")
    args = {"inspect": ["inspect", path],
            "compare train": ["compare", "--train-dump", path, "--serve-dump", world["b"]],
            "compare serve": ["compare", "--train-dump", world["a"], "--serve-dump", path],
            "diff": ["diff", world["result"], path],
            "report": ["report", path, "--out", folder / "r"],
            "import": ["import", path, "--num-layers", "8", "--out", folder / "o.h5", "--quiet"],
            "audit": ["audit", path, "--no-progress"]}[where]
    line = assert_refused(args, [folder, world["a"], world["b"], world["result"]])
    assert printable_line(name) in line, line  # the whole name, escaped, not cut at its newline


@pytest.mark.parametrize("text, shown", [("a\nb.h5", "a\\nb.h5"), ("tab\there", "tab\\there"),
                                         (os.fsdecode(b"caf\xe9.h5"), "caf\\xe9.h5"), ("plain", "plain")])
def test_printable_line(text, shown):
    assert printable_line(text) == shown
    assert "\n" not in printable_line("x" * 5000 + "\n")  # and long messages stay one (cut) line
    assert len(printable_line("x" * 5000)) <= 2000


def empty_output_commands(w):
    a, b, f = w["a"], w["b"], w["folder"]
    return {
        "compare --json": ["compare", "--train-dump", a, "--serve-dump", b, "--json", ""],
        "compare --report": ["compare", "--train-dump", a, "--serve-dump", b, "--report", ""],
        "compare --junit": ["compare", "--train-dump", a, "--serve-dump", b, "--junit", ""],
        "report --out": ["report", w["result"], "--out", ""],
        "diff --json": ["diff", w["result"], w["result"], "--json", ""],
        "audit --json": ["audit", a, "--json", "", "--no-progress"],
        "audit --report": ["audit", a, "--report", "", "--no-progress"],
        "audit --junit": ["audit", a, "--junit", "", "--no-progress"],
        "import --out": ["import", a, "--out", "", "--quiet"],
        "capture hf --out": ["capture", "hf", "--model", f, "--prompts", w["prompts"], "--out", ""],
        "capture sglang --out": ["capture", "sglang", "--url", "http://127.0.0.1:9", "--prompts", w["prompts"], "--out", ""],
        "capture vllm --out": ["capture", "vllm", "--from-dir", f, "--layer-ids", "2,4,5,8", "--num-layers", "8", "--out", ""],
        "accept --json": ["accept", "--drafter", f, "--train-dump", a, "--serve-dump", b, "--json", ""],
        "gate --out": ["gate", "--model", f, "--prompts", w["prompts"], "--vllm-dir", f, "--layer-ids", "2,4,5", "--out", ""],
        "demo --out": ["demo", "--out", ""],
    }


@pytest.mark.parametrize("command", sorted(empty_output_commands({"a": "", "b": "", "folder": "", "result": "", "prompts": ""})))
def test_an_empty_output_path_is_refused_up_front(world, command, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # where an empty path would have landed
    line = assert_refused(empty_output_commands(world)[command], [world["folder"]])
    assert "is empty" in line, line
    assert os.listdir(tmp_path) == [], "something was written to the current folder"
