"""Read-ahead advice names exactly the bytes a read will touch, and never changes the dump."""

import os

import numpy as np

from alignprobe.dump import open_dump
from alignprobe.dump.prefetch import Prefetcher, chunk_ranges
from dump_helpers import claims, random_samples, sha, write


def test_chunk_ranges_cover_every_chunk_once(tmp_path):
    path = write(tmp_path / "d.h5", random_samples([300, 500, 211], {"aux": 48, "final": 16}), claims())
    with open_dump(path) as d:
        ds = d.dataset("aux")
        ranges = chunk_ranges(ds, 0, ds.shape[0])
        assert sum(size for _, size in ranges) == ds.id.get_storage_size()
        assert len(set(ranges)) == len(ranges)
        rows, cols = ds.chunks
        one = chunk_ranges(ds, 1, 2, slice(cols, 2 * cols))  # one row of the middle slice
        info = ds.id.get_chunk_info_by_coord((0, cols))
        assert one == [(info.byte_offset, info.size)]
        assert chunk_ranges(ds, 5, 5) == []


def test_contiguous_dataset_is_one_exact_range(tmp_path):
    import h5py

    path = tmp_path / "c.h5"
    with h5py.File(path, "w") as f:
        ds = f.create_dataset("x", data=np.arange(40 * 8, dtype=np.uint16).reshape(40, 8))
        base = ds.id.get_offset()
        assert chunk_ranges(ds, 10, 20) == [(base + 10 * 16, 10 * 16)]


def test_prefetch_changes_nothing_and_reads_stay_equal(tmp_path):
    path = write(tmp_path / "d.h5", random_samples([300, 500], {"aux": 48, "final": 16}), claims())
    before = sha(path)
    with open_dump(path) as d:
        want = d.read("aux", 0, 800)
        d.prefetch("aux", 0, 800)
        d.prefetch("final", 100, 10_000, slice(0, 16))  # past the end: clipped
        np.testing.assert_array_equal(d.read("aux", 0, 800), want)
    assert sha(path) == before


def test_without_posix_fadvise_it_does_nothing(tmp_path, monkeypatch):
    monkeypatch.delattr(os, "posix_fadvise", raising=False)
    path = write(tmp_path / "d.h5", random_samples([30], {"aux": 48, "final": 16}), claims())
    p = Prefetcher(str(path))
    with open_dump(path) as d:
        p.rows(d.dataset("aux"), 0, 30)
    p.close()
