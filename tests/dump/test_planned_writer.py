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
        for sid, (_ids, states) in samples.items():
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


# -- add_batch: a padded batch written from where it lies ----------------------------------------


def padded(samples, padding_side="right", extra=3):
    """The samples as one padded batch: (ids, token id lists, {stream: [batch, columns, width]}, spans)."""
    items = list(samples.items())
    columns = max(len(ids) for _, (ids, _) in items) + extra
    names = list(items[0][1][1])
    batch = {n: torch.full((len(items), columns, items[0][1][1][n].shape[1]), float("nan"),
                           dtype=items[0][1][1][n].dtype) for n in names}
    spans = []
    for row, (_, (ids, states)) in enumerate(items):
        first = columns - len(ids) if padding_side == "left" else 0
        for n in names:
            batch[n][row, first : first + len(ids)] = states[n]
        spans.append((first, first + len(ids)))
    return [sid for sid, _ in items], [ids for _, (ids, _) in items], batch, spans


def count_pwritev(monkeypatch):
    calls = []
    real = os.pwritev

    def counting(fd, buffers, offset):
        calls.append(len(buffers))
        return real(fd, buffers, offset)

    monkeypatch.setattr(os, "pwritev", counting)
    return calls


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_add_batch_writes_what_add_writes_one_pwritev_per_stream(tmp_path, dtype, padding_side, monkeypatch):
    samples = random_samples([5, 17, 1, 9, 30, 2, 11], {"aux": 3 * H, "final": H}, dtype=DTYPES[dtype])
    a = write_planned(tmp_path / "one.h5", samples, claims(dtype))
    items = list(samples.items())
    calls = count_pwritev(monkeypatch)
    with PlannedDumpWriter(tmp_path / "batch.h5", Provenance.here(engine="test", model="tiny"), claims(dtype),
                           plan_of(samples), flush_tokens=20) as w:
        for part in (items[:4], items[4:]):
            ids, tokens, batch, spans = padded(dict(part), padding_side)
            w.add_batch(ids, tokens, batch, spans if padding_side == "left" else None)
            for t in batch.values():
                t.fill_(7.0)  # the caller reuses its buffer at once: the batch must be in the file already
    assert calls == [4, 4, 4, 3, 3, 3]  # per batch: tokens, aux, final, each one call of a buffer per sample
    with open_dump(a) as da, open_dump(tmp_path / "batch.h5") as db:
        assert da.sample_ids == db.sample_ids
        np.testing.assert_array_equal(da.token_ids_flat(), db.token_ids_flat())
        for name in da.streams:
            np.testing.assert_array_equal(da.read(name, 0, da.num_tokens), db.read(name, 0, db.num_tokens))
        for sid, (_ids, states) in samples.items():
            np.testing.assert_array_equal(db.states(sid, "final"), as_f32(states["final"]))


def test_add_batch_samples_apart_in_the_plan_and_converted_dtypes(tmp_path, monkeypatch):
    # A resumed capture: the batch skips samples already written, so it is several runs of rows.
    samples = random_samples([3, 4, 5, 6, 7, 8], {"aux": 3 * H, "final": H}, dtype=torch.float32)
    items = list(samples.items())
    path = tmp_path / "d.h5"
    with PlannedDumpWriter(path, Provenance(), claims("bfloat16"), plan_of(samples)) as w:
        for sid, (ids, st) in (items[1], items[4]):
            w.add(sid, ids, st)
        calls = count_pwritev(monkeypatch)
        rest = [items[i] for i in (5, 0, 2, 3)]  # not in plan order either
        ids, tokens, batch, spans = padded(dict(rest), "left")
        w.add_batch(ids, tokens, batch, spans)  # float32 states into bfloat16 streams: converted
    assert sorted(calls) == [1] * 6 + [2] * 3  # runs of plan rows [0], [2, 3], [5]: one call each per stream
    with open_dump(path) as d:
        assert d.sample_ids == list(samples)
        for sid, (ids, st) in samples.items():
            np.testing.assert_array_equal(d.token_ids(sid), ids.numpy())
            np.testing.assert_array_equal(d.states(sid, "aux"), as_f32(st["aux"].bfloat16()))


def test_partial_pwritev_calls_are_continued(tmp_path, monkeypatch):
    real = os.pwritev

    def stingy(fd, buffers, offset):  # writes at most 1000 bytes, of the first buffer only
        return real(fd, [memoryview(b)[:1000] for b in buffers[:2]][:1], offset)

    monkeypatch.setattr(os, "pwritev", stingy)
    samples = random_samples([40, 3, 25], {"aux": 3 * H, "final": H})
    path = tmp_path / "d.h5"
    with PlannedDumpWriter(path, Provenance(), claims(), plan_of(samples)) as w:
        ids, tokens, batch, _ = padded(samples)
        w.add_batch(ids, tokens, batch)
    with open_dump(path) as d:
        for sid, (ids, st) in samples.items():
            np.testing.assert_array_equal(d.token_ids(sid), ids.numpy())
            np.testing.assert_array_equal(d.states(sid, "aux"), as_f32(st["aux"]))


def test_bad_batches_are_refused_before_anything_is_written(tmp_path):
    samples = random_samples([4, 6], {"aux": 3 * H, "final": H})
    w = PlannedDumpWriter(tmp_path / "d.h5", Provenance(), claims(), plan_of(samples))
    ids, tokens, batch, spans = padded(samples)
    cases = [
        ((["prompt-0", "other"], tokens, batch), "not in the plan"),
        ((ids, [tokens[0], tokens[1][:5]], batch), "the plan says"),
        ((ids, tokens, batch, [(0, 4), (1, 6)]), "spans columns 1:6"),
        ((ids, tokens, batch, [(0, 4)]), "2 token id lists and 1 spans"),
        ((["prompt-0", "prompt-0"], [tokens[0]] * 2, batch), "unique"),
        ((ids, tokens, {"aux": batch["aux"]}), "expected \\['aux', 'final'\\]"),
        ((ids, tokens, {**batch, "aux": batch["aux"][:, :, :H]}), "shape"),
        ((ids, tokens, {**batch, "aux": batch["aux"][:, :5]}), "shape"),
        ((ids, tokens, {**batch, "aux": batch["aux"][:1]}), "shape"),
    ]
    for args, message in cases:
        with pytest.raises(ValueError, match=message):
            w.add_batch(*args)
    assert not w.done_ids
    w.add_batch(ids, tokens, batch)
    with pytest.raises(ValueError, match="already"):
        w.add_batch(ids[:1], tokens[:1], {n: t[:1] for n, t in batch.items()})
    w.finish()
