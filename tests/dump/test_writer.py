"""Atomic writing and resume: a dump under its final name is complete; a partial one is marked."""

import os

import numpy as np
import pytest
import torch

from alignprobe.dump import DumpWriter, Provenance, StreamClaim, open_dump
from alignprobe.errors import BadInput
from dump_helpers import H, N, as_f32, claims, random_samples, write


def test_no_final_file_until_finished(tmp_path):
    path = tmp_path / "d.h5"
    samples = random_samples([30, 30, 30], {"aux": 3 * H, "final": H})
    w = DumpWriter(path, Provenance(), claims(), shard_tokens=40)
    for sid, (ids, st) in samples.items():
        w.add(sid, ids, st)
        assert not path.exists()
    assert os.path.isdir(f"{path}.partial")
    w.finish()
    assert path.exists() and not os.path.exists(f"{path}.partial")


def test_interrupted_capture_resumes_without_recomputing(tmp_path):
    path = tmp_path / "d.h5"
    samples = random_samples([8] * 10, {"aux": 3 * H, "final": H})
    items = list(samples.items())
    with pytest.raises(KeyboardInterrupt):
        with DumpWriter(path, Provenance(), claims(), shard_tokens=16) as w:
            for i, (sid, (ids, st)) in enumerate(items):
                if i == 6:
                    raise KeyboardInterrupt
                w.add(sid, ids, st)
    assert not path.exists()
    with pytest.raises(BadInput, match="--resume"):
        open_dump(path)
    with pytest.raises(BadInput, match="--resume"):
        DumpWriter(path, Provenance(), claims())
    with DumpWriter(path, Provenance(), claims(), resume=True, shard_tokens=16) as w:
        assert w.done_ids == {sid for sid, _ in items[:6]}
        for sid, (ids, st) in items:
            if sid not in w.done_ids:
                w.add(sid, ids, st)
    with open_dump(path) as d:
        assert sorted(d.sample_ids) == sorted(samples)
        for sid, (_ids, st) in samples.items():
            np.testing.assert_array_equal(d.states(sid, "aux"), as_f32(st["aux"]))


def test_a_shard_cut_off_mid_write_is_ignored_on_resume(tmp_path):
    path = tmp_path / "d.h5"
    samples = random_samples([8] * 4, {"aux": 3 * H, "final": H})
    w = DumpWriter(path, Provenance(), claims(), shard_tokens=8)
    for sid, (ids, st) in list(samples.items())[:2]:
        w.add(sid, ids, st)
    # What a kill -9 during a shard write leaves: a .tmp file that was never renamed.
    (tmp_path / "d.h5.partial" / "shard-000002.h5.tmp").write_bytes(b"\x89HDF\r\n\x1a\n half")
    w2 = DumpWriter(path, Provenance(), claims(), resume=True)
    assert w2.done_ids == set(list(samples)[:2])
    assert not list((tmp_path / "d.h5.partial").glob("*.tmp"))


def test_resume_refuses_other_streams(tmp_path):
    path = tmp_path / "d.h5"
    w = DumpWriter(path, Provenance(), claims())
    w.abandon()
    other = {"aux": StreamClaim((1, 2, 3), H, N)}
    with pytest.raises(BadInput, match="other streams"):
        DumpWriter(path, Provenance(), other, resume=True)


def test_refuses_to_overwrite_unless_asked(tmp_path):
    path = write(tmp_path / "d.h5", random_samples([3], {"aux": 3 * H, "final": H}), claims())
    with pytest.raises(BadInput, match="already exists"):
        DumpWriter(path, Provenance(), claims())
    write(path, random_samples([4], {"aux": 3 * H, "final": H}, seed=1), claims(), overwrite=True)
    with open_dump(path) as d:
        assert d.num_tokens == 4


def test_background_writing_gives_the_same_dump(tmp_path):
    samples = random_samples([5, 40, 3, 22, 9], {"aux": 3 * H, "final": H})
    a = write(tmp_path / "a.h5", samples, claims(), shard_tokens=10)
    b = write(tmp_path / "b.h5", samples, claims(), shard_tokens=10, background=True)
    with open_dump(a) as da, open_dump(b) as db:
        assert da.sample_ids == db.sample_ids
        np.testing.assert_array_equal(da.read("aux", 0, da.num_tokens), db.read("aux", 0, db.num_tokens))


def test_bad_samples_are_refused(tmp_path):
    w = DumpWriter(tmp_path / "d.h5", Provenance(), claims())
    ids = torch.arange(4)
    good = {"aux": torch.zeros(4, 3 * H), "final": torch.zeros(4, H)}
    with pytest.raises(ValueError, match="shape"):
        w.add("a", ids, {**good, "aux": torch.zeros(4, H)})
    with pytest.raises(ValueError, match="streams"):
        w.add("a", ids, {"aux": good["aux"]})
    w.add("a", ids, good)
    with pytest.raises(ValueError, match="already"):
        w.add("a", ids, good)


def test_an_empty_capture_writes_nothing(tmp_path):
    w = DumpWriter(tmp_path / "d.h5", Provenance(), claims())
    with pytest.raises(BadInput, match="no samples"):
        w.finish()
    assert not (tmp_path / "d.h5").exists()
