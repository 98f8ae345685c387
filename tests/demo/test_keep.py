"""demo --keep: the kept setup runs the gate to a PASS from its own folder; a used folder is refused first."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from alignprobe.demo.keep import keep_folder, keep_setup
from alignprobe.errors import BadInput


def test_a_folder_with_files_is_refused_before_anything_runs(tmp_path):
    (tmp_path / "mine.txt").write_text("keep me")
    with pytest.raises(BadInput, match="not empty"):
        keep_folder(tmp_path)
    assert os.listdir(tmp_path) == ["mine.txt"]


@pytest.mark.slow
def test_the_kept_gate_config_passes_from_its_folder(tmp_path):
    paths = keep_setup(tmp_path / "kept")
    assert all(os.path.exists(p) for p in paths.values())
    run = subprocess.run([sys.executable, "-c", "from alignprobe.cli.entry import main; main()", "gate", "--config", "gate.toml"],
                         cwd=tmp_path / "kept", capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert {"result.json", "junit.xml", "report"} <= set(os.listdir(tmp_path / "kept" / "gate-out"))
