"""Engine-side drivers run as subprocesses: whatever the engine does, the user gets one line naming it."""

import json
import os
import sys

import pytest

from alignprobe.errors import BadInput
from alignprobe.engine_errors import EngineFailed
from alignprobe.probes.engine_process import run_driver
from alignprobe.probes.engine_side import ENGINE_SIDE_DIR


def driver(tmp_path, body: str) -> str:
    path = tmp_path / "driver.py"
    path.write_text("import json, os, sys, time\nrequest = json.load(open(sys.argv[1]))\nresult_path = sys.argv[2]\n"
                    + body)
    return str(path)


def test_a_result_comes_back_and_the_driver_folder_is_on_the_path(tmp_path):
    script = driver(tmp_path, "json.dump({'echo': request['x'], 'path': os.environ['PYTHONPATH']}, open(result_path, 'w'))\n")
    result = run_driver("vLLM", sys.executable, script, {"x": 3}, tmp_path / "work")
    assert result["echo"] == 3 and result["path"].split(os.pathsep)[0] == ENGINE_SIDE_DIR


def test_the_engines_own_error_is_one_line_naming_it(tmp_path):
    script = driver(tmp_path, "print('INFO loading', file=sys.stderr)\n"
                              "json.dump({'error': 'RuntimeError: pin_memory=True requires a CUDA'}, open(result_path, 'w'))\n"
                              "sys.exit(1)\n")
    with pytest.raises(EngineFailed, match=r"^vLLM failed: RuntimeError: pin_memory=True requires a CUDA \(engine log: "):
        run_driver("vLLM", sys.executable, script, {}, tmp_path / "work")


def test_a_crash_without_a_result_names_the_last_error_line_of_the_log(tmp_path):
    script = driver(tmp_path, "print('ImportError: libcuda.so.1: cannot open shared object file', file=sys.stderr)\n"
                              "print('bye', file=sys.stderr)\nsys.stderr.flush()\nos._exit(134)\n")
    with pytest.raises(EngineFailed, match=r"SGLang failed: ImportError: libcuda.so.1"):
        run_driver("SGLang", sys.executable, script, {}, tmp_path / "work")


def test_a_hang_is_stopped_at_the_timeout(tmp_path):
    script = driver(tmp_path, "time.sleep(60)\n")
    with pytest.raises(EngineFailed, match="SGLang did not finish within 1 s"):
        run_driver("SGLang", sys.executable, script, {}, tmp_path / "work", timeout_s=1)


def test_a_missing_engine_python_says_which_flag(tmp_path):
    with pytest.raises(BadInput, match="--engine-python"):
        run_driver("vLLM", str(tmp_path / "nope" / "python"), "x.py", {}, tmp_path / "work")


def test_the_cli_exits_2_with_one_line_when_the_engine_is_absent(tmp_path):
    # a Python without vLLM: the driver's ImportError is vLLM's failure, exit 2, never "internal error"
    from click.testing import CliRunner

    from alignprobe.cli.main import cli

    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"input_ids": [1, 2, 3]}) + "\n")
    fake = tmp_path / "bin"
    fake.mkdir()
    python = fake / "python"
    python.write_text(f"#!/bin/sh\nexec {sys.executable} -S -I \"$@\"\n")  # -I: no site, so no vLLM
    python.chmod(0o755)
    model = tmp_path / "model"  # apart from the outputs: no output may lie inside an input folder
    model.mkdir()
    result = CliRunner().invoke(cli, ["capture", "vllm", "--offline-model", str(model), "--engine-python",
                                      str(python), "--storage-dir", str(tmp_path / "hs"), "--layer-ids", "2,4,5",
                                      "--num-layers", "8", "--prompts", str(prompts), "--out", str(tmp_path / "s.h5")])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("alignprobe: vLLM failed: "), result.output
    assert not (tmp_path / "s.h5").exists()
