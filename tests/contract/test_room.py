"""No room to write: a per-file size limit (``ulimit -f``, RLIMIT_FSIZE, set in the child only; no
tmpfs is needed) stands in for a full disk. HDF5 that runs out of room mid-write died with SIGSEGV
(`import` under a 2 KB limit, `capture sglang` under 1-4 KB) or exited 3 ("Can't decrement id ref
count"); each is now refused in one line before a byte of the dump is written, and the JSON, JUnit
and report writers leave no temporary file behind. Real processes: the limit must not touch pytest."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys

import pytest

from bad_input_helpers import LoopbackServer, fingerprints
from dump_helpers import H, claims, random_samples, write
from tests.contract.test_foreign import speculators_file
from tests.contract.test_wire import GOOD_ROWS, answering, send, sglang_answer

pytestmark = pytest.mark.slow  # a real process a case (about 2 s each)

ALIGNPROBE = [sys.executable, "-c", "from alignprobe.cli.entry import main; main()"]


def run_limited(args, limit_bytes, cwd):
    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))
    return subprocess.run(ALIGNPROBE + [os.fspath(a) for a in args], capture_output=True, text=True, cwd=cwd,
                          preexec_fn=limit, timeout=120)


def assert_one_line_refusal(run, match):
    lines = [line for line in run.stderr.splitlines() if line.startswith("alignprobe: ")]
    assert run.returncode == 2, (run.returncode, run.stderr[-600:])
    assert len(lines) == 1 and match in lines[0], run.stderr[-600:]
    assert "Traceback" not in run.stderr and "internal error" not in run.stderr


@pytest.mark.parametrize("limit", [1, 2048, 900_000])
def test_import_that_cannot_fit_is_refused_up_front(tmp_path, limit):
    source = tmp_path / "s"
    source.mkdir()
    for i in range(3):
        speculators_file(source / f"hs_{i}.safetensors", 50 + i)
    before = fingerprints([source])
    run = run_limited(["import", source, "--num-layers", "8", "--out", tmp_path / "i.h5"], limit, tmp_path)
    assert_one_line_refusal(run, "(ulimit -f)")
    assert fingerprints([source]) == before
    assert not any(p.name.startswith("i.h5") for p in tmp_path.iterdir())  # no dump, no .partial


@pytest.mark.parametrize("limit", [1000, 4096])
def test_capture_that_cannot_fit_is_one_line_and_resumable(tmp_path, limit):
    body = sglang_answer(GOOD_ROWS)
    server = LoopbackServer(answering(lambda h: send(h, 200, body)))
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"input_ids": [1, 2, 3]}) + "\n")
    try:
        run = run_limited(["capture", "sglang", "--url", server.url, "--prompts", prompts, "--out", tmp_path / "o.h5",
                           "--num-layers", "4", "--hidden-size", "8", "--layer-ids", "1", "--quiet", "--retries", "0"],
                          limit, tmp_path)
    finally:
        server.close()
    assert_one_line_refusal(run, "(ulimit -f)")
    assert not (tmp_path / "o.h5").exists()


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    folder = tmp_path_factory.mktemp("room")
    return (write(folder / "a.h5", random_samples([6, 9, 4], {"aux": 3 * H, "final": H}), claims()),
            write(folder / "b.h5", random_samples([6, 9, 4], {"aux": 3 * H, "final": H}, seed=1), claims()))


@pytest.mark.parametrize("flag, name", [("--json", "r.json"), ("--junit", "j.xml"), ("--report", "rep")])
def test_compare_outputs_that_cannot_be_written(tmp_path, dumps, flag, name):
    before = fingerprints(dumps)
    run = run_limited(["compare", "--train-dump", dumps[0], "--serve-dump", dumps[1], flag, tmp_path / name], 1, tmp_path)
    assert_one_line_refusal(run, "File too large")
    assert fingerprints(dumps) == before
    left = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert left == [], left  # no temporary file, no half-written output
