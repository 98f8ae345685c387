"""The one atomic writer (safe_paths.replace_atomically): temporary beside the target, fsynced, renamed."""

import os

import pytest

from alignprobe import safe_paths
from alignprobe.safe_paths import BadOutputPath, replace_atomically, write_text_atomic


def test_replaces_the_file_whole_and_leaves_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "out.json"
    target.write_text("old")
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(safe_paths.os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    replace_atomically(target, "new")
    assert target.read_text() == "new" and synced
    assert sorted(os.listdir(tmp_path)) == ["out.json"]


def test_a_failed_rename_keeps_the_old_file_and_removes_the_temporary(tmp_path, monkeypatch):
    target = tmp_path / "out.json"
    target.write_text("old")

    def refuse(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(safe_paths.os, "replace", refuse)
    with pytest.raises(BadOutputPath, match="report .*out.json: cannot write it \\(No space left on device\\)"):
        write_text_atomic(target, "new", "report")
    assert target.read_text() == "old"
    assert sorted(os.listdir(tmp_path)) == ["out.json"]


def test_every_writer_uses_it():
    """The report, the audit report, the junit file and the dump manifests write their text through the
    one writer (the dump's HDF5 shards are h5py's files, renamed into place by the dump writer)."""
    import inspect

    from alignprobe.audit.render import writer as audit_writer
    from alignprobe.dump import planned_writer, writer as dump_writer
    from alignprobe.report import junit, writer as report_writer

    for module in (audit_writer, report_writer, junit, dump_writer, planned_writer):
        source = inspect.getsource(module)
        assert "write_text_atomic" in source or "replace_atomically" in source, module.__name__
