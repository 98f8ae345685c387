"""Paths: FIFOs, /dev/null, /dev/zero, symlink loops, dangling links and folders under /proc as any
input or output; and outputs that are an input or lie inside an input folder, with or without
--force, for every command that writes."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given, strategies as st

from bad_input_helpers import FUZZ, assert_refused, invoke
from dump_helpers import H, claims, random_samples, write


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Real inputs, plus one of each kind of path that is not a regular file."""
    folder = tmp_path_factory.mktemp("world")
    a = write(folder / "a.h5", random_samples([5, 7], {"aux": 3 * H, "final": H}), claims())
    b = write(folder / "b.h5", random_samples([5, 7], {"aux": 3 * H, "final": H}, seed=1), claims())
    prompts = folder / "p.jsonl"
    prompts.write_text(json.dumps({"input_ids": [1, 2, 3]}) + "\n")
    fifo = folder / "fifo"
    os.mkfifo(fifo)
    loop = folder / "loop"
    os.symlink(loop, loop)
    dangling = folder / "dangling"
    os.symlink(folder / "nothing-here", dangling)
    result = folder / "result.json"
    assert invoke(["compare", "--train-dump", a, "--serve-dump", b, "--json", result]).exit_code in (0, 1)
    odd = {"fifo": fifo, "/dev/null": "/dev/null", "/dev/zero": "/dev/zero", "symlink loop": loop,
           "dangling": dangling, "/proc folder": "/proc/self", "folder": folder}
    return dict(folder=folder, a=a, b=b, prompts=prompts, result=result, odd=odd)


def commands(w, slot):
    """Each command with ``slot`` in one input position."""
    f = w["folder"]
    return {
        "inspect": ["inspect", slot],
        "compare train": ["compare", "--train-dump", slot, "--serve-dump", w["b"]],
        "compare serve": ["compare", "--train-dump", w["a"], "--serve-dump", slot],
        "compare policy": ["compare", "--train-dump", w["a"], "--serve-dump", w["b"], "--policy", slot],
        "compare tokenizer": ["compare", "--train-dump", w["a"], "--serve-dump", w["b"], "--tokenizer", slot],
        "report": ["report", slot, "--out", f / "r"],
        "import": ["import", slot, "--num-layers", "8", "--out", f / "imp.h5"],
        "capture prompts": ["capture", "sglang", "--url", "http://127.0.0.1:9", "--prompts", slot, "--out", f / "c.h5"],
        "capture tokens-from": ["capture", "sglang", "--url", "http://127.0.0.1:9", "--tokens-from", slot,
                                "--out", f / "c.h5"],
        "capture hf prompts": ["capture", "hf", "--model", f, "--prompts", slot, "--out", f / "h.h5"],
    }


@FUZZ
@given(command=st.sampled_from(["inspect", "compare train", "compare serve", "compare policy", "compare tokenizer", "report", "import",
                                "capture prompts", "capture tokens-from", "capture hf prompts"]),
       kind=st.sampled_from(["fifo", "/dev/null", "/dev/zero", "symlink loop", "dangling", "/proc folder"]))
def test_inputs_that_are_not_files(world, command, kind):
    if kind == "/proc folder" and command in ("import", "compare train", "compare serve", "compare tokenizer"):
        kind = "/dev/zero"  # a folder is a valid source there (a foreign dump); /proc/self is checked below
    args = commands(world, world["odd"][kind])[command]
    assert_refused(args, [world["a"], world["b"], world["prompts"], world["result"]])


@FUZZ
@given(command=st.sampled_from(["json", "report", "report cmd"]),
       where=st.sampled_from(["/proc/self/alignprobe", "/proc/alignprobe-report", "/dev/null/x", "/sys/kernel/x",
                              "fifo", "dev-zero"]))
def test_outputs_where_nothing_can_be_written(world, command, where):
    target = {"fifo": world["odd"]["fifo"], "dev-zero": "/dev/zero"}.get(where, where)
    args = {
        "json": ["compare", "--train-dump", world["a"], "--serve-dump", world["b"], "--json", target],
        "report": ["compare", "--train-dump", world["a"], "--serve-dump", world["b"], "--report", target],
        "report cmd": ["report", world["result"], "--out", target],
    }[command]
    result = invoke(args)
    if result.exit_code == 0 and where == "fifo":
        pytest.fail("wrote into a FIFO")
    assert_refused(args, [world["a"], world["b"], world["result"]])


def test_json_naming_a_folder_leaves_no_tmp(world, tmp_path):
    folder = tmp_path / "already-a-folder"
    folder.mkdir()
    assert_refused(["compare", "--train-dump", world["a"], "--serve-dump", world["b"], "--json", folder],
                   [world["a"], world["b"]], match="is a folder")
    assert os.listdir(tmp_path) == ["already-a-folder"] and os.listdir(folder) == []


# -- outputs that are inputs -------------------------------------------------------------------------------------


def overlap_cases(w, tmp):
    """(args, inputs) where an output is one of the command's inputs or lies inside an input folder."""
    model = tmp / "model"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text('{"model_type": "llama"}')
    source = tmp / "spec"
    source.mkdir(exist_ok=True)
    (source / "hs_0.safetensors").write_bytes(b"not really")
    drafter = tmp / "drafter.json"
    drafter.write_text('{"eagle_aux_hidden_state_layer_ids": [1, 2, 3]}')
    url = ["--url", "http://127.0.0.1:9"]
    return [
        (["compare", "--train-dump", w["a"], "--serve-dump", w["b"], "--json", w["a"]], [w["a"], w["b"]]),
        (["compare", "--train-dump", w["a"], "--serve-dump", w["b"], "--json", w["b"]], [w["a"], w["b"]]),
        (["compare", "--train-dump", source, "--serve-dump", w["b"], "--json", source / "r.json"], [source, w["b"]]),
        (["compare", "--train-dump", source, "--serve-dump", w["b"], "--report", source / "rep"], [source, w["b"]]),
        (["compare", "--train-dump", w["a"], "--serve-dump", w["b"], "--policy", drafter, "--json", drafter],
         [w["a"], w["b"], drafter]),
        (["report", tmp / "report.html"], []),  # a result.json named like the page the report writes
        (["import", source, "--out", source / "o.h5"], [source]),
        (["import", source, "--out", drafter, "--drafter-config", drafter], [source, drafter]),
        (["import", source, "--out", w["a"], "--ids-from", w["a"]], [source, w["a"]]),
        (["capture", "hf", "--model", model, "--prompts", w["prompts"], "--out", model / "config.json"], [model]),
        (["capture", "hf", "--model", model, "--prompts", w["prompts"], "--out", w["prompts"]], [model, w["prompts"]]),
        (["capture", "hf", "--model", model, "--prompts", w["prompts"], "--out", model / "sub.h5"], [model]),
        (["capture", "sglang", *url, "--prompts", w["prompts"], "--out", w["prompts"]], [w["prompts"]]),
        (["capture", "sglang", *url, "--tokens-from", w["a"], "--out", w["a"]], [w["a"]]),
        (["capture", "vllm", "--from-dir", source, "--layer-ids", "1,2", "--out", source / "o.h5"], [source]),
        (["capture", "vllm", "--from-dir", source, "--layer-ids", "1,2", "--tokens-from", w["a"], "--out", w["a"]],
         [source, w["a"]]),
        # audit, accept, diff and gate wrote over their inputs until a hostile sweep tried them
        (["audit", w["a"], "--junit", w["a"]], [w["a"]]),
        (["audit", w["a"], "--json", w["a"]], [w["a"]]),
        (["audit", source, "--report", source], [source]),
        (["audit", w["b"], source, "--json", source / "hs_0.safetensors"], [source, w["b"]]),
        (["accept", "--drafter", model, "--train-dump", w["a"], "--serve-dump", w["b"], "--json", w["a"]],
         [model, w["a"], w["b"]]),
        (["accept", "--drafter", model, "--train-dump", w["a"], "--serve-dump", w["b"], "--json", model / "r.json"],
         [model, w["a"], w["b"]]),
        (["diff", w["result"], w["result"], "--json", w["result"]], [w["result"]]),
        (["gate", "--model", model, "--prompts", w["prompts"], "--sglang-url", "http://127.0.0.1:9", "--out", model],
         [model, w["prompts"]]),
        (["gate", "--model", model, "--prompts", w["prompts"], "--sglang-url", "http://127.0.0.1:9", "--json",
          w["prompts"]], [model, w["prompts"]]),
    ]


@pytest.mark.parametrize("force", [False, True])
def test_no_output_is_an_input_even_with_force(world, tmp_path, force, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a refused gate leaves its error outputs in ./alignprobe-gate: here
    report_input = tmp_path / "report.html"  # a result.json named like the page the report writes
    report_input.write_text(open(world["result"]).read())
    for args, inputs in overlap_cases(world, tmp_path):
        if args[:2] == ["report", tmp_path / "report.html"]:
            args, inputs = ["report", report_input], [report_input]
        elif force and args[0] in ("import", "capture"):
            args = [*args, "--force"]
        line = assert_refused(args, [*inputs, world["a"], world["b"], world["prompts"]])
        assert "never writes over its inputs" in line, (args, line)


@pytest.mark.parametrize("case", ["usage error", "missing other dump", "bad policy"])
def test_the_error_record_never_lands_on_an_input(world, tmp_path, case):
    """A run that stops early writes its error to --json; not when --json names an input."""
    b = world["b"]
    args = {
        "usage error": ["compare", "--serve-dump", b, "--json", b],
        "missing other dump": ["compare", "--train-dump", tmp_path / "absent.h5", "--serve-dump", b, "--json", b],
        "bad policy": ["compare", "--train-dump", world["a"], "--serve-dump", world["a"], "--json", world["prompts"],
                       "--set", "drift_fail_rel_rms=nan"],
    }[case]
    assert_refused(args, [world["a"], b, world["prompts"]])
