"""PlannedDumpWriter: the same dump as DumpWriter, written in place; resume from its journal."""

import os

import numpy as np
import pytest
import torch

from alignprobe.dump import Provenance, open_dump
from alignprobe.dump.planned_writer import JOURNAL, PlannedDumpWriter
from alignprobe.errors import BadInput
from dump_helpers import H, as_f32, claims, random_samples, write

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def plan_of(samples):
    return [(sid, len(ids)) for sid, (ids, _) in samples.items()]


def write_planned(path, samples, streams, **options):
    with PlannedDumpWriter(path, Provenance.here(engine="test", model="tiny"), streams, plan_of(samples), **options) as w:
        for sid, (ids, states) in samples.items():
            w.add(sid, ids, states)
    return path


@pytest.mark.parametrize("dtype", DTYPES)
def test_same_dump_as_the_shard_writer(tmp_path, dtype):
    samples = random_samples([1, 5, 17, 64, 3, 200], {"aux": 3 * H, "final": H}, dtype=DTYPES[dtype])
    a = write(tmp_path / "shards.h5", samples, claims(dtype), shard_tokens=40)
    b = write_planned(tmp_path / "planned.h5", samples, claims(dtype), flush_tokens=40)
    assert not os.path.exists(f"{b}.partial")
    with open_dump(a) as da, open_dump(b) as db:
        assert da.sample_ids == db.sample_ids and da.streams == db.streams
        np.testing.assert_array_equal(da.offsets, db.offsets)
        np.testing.assert_array_equal(da.token_ids_flat(), db.token_ids_flat())
        for name in da.streams:
            np.testing.assert_array_equal(da.read(name, 0, da.num_tokens), db.read(name, 0, db.num_tokens))
        # Checked against the samples too, not only against the other writer.
        for sid, (ids, states) in samples.items():
            np.testing.assert_array_equal(db.states(sid, "aux"), as_f32(states["aux"]))


def test_resume_after_a_crash_keeps_only_journaled_samples(tmp_path):
    path = tmp_path / "d.h5"
    samples = random_samples([8] * 10, {"aux": 3 * H, "final": H})
    items = list(samples.items())
    w = PlannedDumpWriter(path, Provenance(), claims(), plan_of(samples), flush_tokens=16)
    for sid, (ids, st) in items[:5]:
        w.add(sid, ids, st)
    # A kill -9 now: samples 0-3 were flushed (16 tokens each flush), sample 4 was not; a journal line
    # cut off mid-write is left behind as well.
    with open(tmp_path / "d.h5.partial" / JOURNAL, "a") as fh:
        fh.write('"prompt-9')
    w._fd and os.close(w._fd)
    assert not path.exists()
    with pytest.raises(BadInput, match="--resume"):
        PlannedDumpWriter(path, Provenance(), claims(), plan_of(samples))
    with PlannedDumpWriter(path, Provenance(), claims(), plan_of(samples), resume=True) as w2:
        assert w2.done_ids == {sid for sid, _ in items[:4]}
        for sid, (ids, st) in items:
            if sid not in w2.done_ids:
                w2.add(sid, ids, st)
    with open_dump(path) as d:
        assert d.sample_ids == list(samples)
        for sid, (ids, st) in samples.items():
            np.testing.assert_array_equal(d.states(sid, "aux"), as_f32(st["aux"]))
            np.testing.assert_array_equal(d.token_ids(sid), ids.numpy())


def test_resume_refuses_another_plan(tmp_path):
    path = tmp_path / "d.h5"
    samples = random_samples([4, 6], {"aux": 3 * H, "final": H})
    PlannedDumpWriter(path, Provenance(), claims(), plan_of(samples)).abandon()
    with pytest.raises(BadInput, match="other prompts"):
        PlannedDumpWriter(path, Provenance(), claims(), [("prompt-0", 4), ("prompt-1", 7)], resume=True)


def test_an_unfinished_plan_is_not_moved_into_place(tmp_path):
    path = tmp_path / "d.h5"
    samples = random_samples([4, 6], {"aux": 3 * H, "final": H})
    w = PlannedDumpWriter(path, Provenance(), claims(), plan_of(samples))
    sid, (ids, st) = next(iter(samples.items()))
    w.add(sid, ids, st)
    with pytest.raises(BadInput, match="1 planned samples were not captured"):
        w.finish()
    assert not path.exists() and os.path.isdir(f"{path}.partial")


def test_bad_samples_are_refused(tmp_path):
    samples = random_samples([4], {"aux": 3 * H, "final": H})
    w = PlannedDumpWriter(tmp_path / "d.h5", Provenance(), claims(), plan_of(samples))
    ids, st = samples["prompt-0"]
    with pytest.raises(ValueError, match="not in the plan"):
        w.add("other", ids, st)
    with pytest.raises(ValueError, match="the plan says"):
        w.add("prompt-0", ids[:3], st)
    with pytest.raises(ValueError, match="shape"):
        w.add("prompt-0", ids, {**st, "aux": st["aux"][:, :H]})
    w.add("prompt-0", ids, st)
    with pytest.raises(ValueError, match="already"):
        w.add("prompt-0", ids, st)
    w.finish()
