"""Whole-chunk parallel reads give exactly what h5py gives, and step aside where they cannot."""

import h5py
import numpy as np
import pytest

from alignprobe.dump import open_dump
from alignprobe.dump.chunk_reader import ChunkReader
from dump_helpers import claims, random_samples, sha, write


@pytest.fixture
def odd_chunks(tmp_path):
    """Datasets whose chunks do not divide their shape: edge chunks in both directions."""
    path = tmp_path / "c.h5"
    g = np.random.default_rng(0)
    with h5py.File(path, "w") as f:
        f.create_dataset("u16", data=g.integers(0, 65535, (103, 37), dtype=np.uint16), chunks=(10, 8))
        f.create_dataset("f32", data=g.standard_normal((64, 12)).astype(np.float32), chunks=(16, 12))
        f.create_dataset("gzip", data=np.ones((20, 4), np.float32), chunks=(5, 4), compression="gzip")
        f.create_dataset("big_endian", data=np.ones((20, 4), ">f4"), chunks=(5, 4))
        f.create_dataset("never_written", shape=(20, 4), dtype=np.float32, chunks=(5, 4))
    return str(path)


def test_every_range_and_column_slice_equals_h5py(odd_chunks):
    reader = ChunkReader(odd_chunks)
    g = np.random.default_rng(1)
    with h5py.File(odd_chunks, "r") as f:
        for name in ("u16", "f32"):
            ds = f[name]
            rows, width = ds.shape
            cases = [(0, rows, None), (rows - 1, rows, None), (9, 11, slice(7, 9))]
            for _ in range(40):
                a = int(g.integers(0, rows))
                b = int(g.integers(a + 1, rows + 1))
                c = int(g.integers(0, width))
                cases.append((a, b, slice(c, int(g.integers(c + 1, width + 1)))))
            for a, b, cols in cases:
                got = reader.read(ds, a, b, cols)
                assert got is not None
                np.testing.assert_array_equal(got, ds[a:b, cols if cols else slice(None)], err_msg=f"{name} {a}:{b} {cols}")
    reader.close()


@pytest.mark.parametrize("name", ["gzip", "big_endian", "never_written"])
def test_what_it_cannot_read_is_left_to_h5py(odd_chunks, name):
    reader = ChunkReader(odd_chunks)
    with h5py.File(odd_chunks, "r") as f:
        assert reader.read(f[name], 0, 20, None) is None
        assert reader.read(f["u16"], 0, 5, slice(0, 30, 2)) is None  # a strided column slice
    reader.close()


def test_dump_reads_go_through_it_and_change_nothing(tmp_path):
    path = write(tmp_path / "d.h5", random_samples([300, 500, 7], {"aux": 48, "final": 16}), claims())
    before = sha(path)
    with open_dump(path) as d, h5py.File(path, "r") as f:
        for stream in ("aux", "final"):
            np.testing.assert_array_equal(d.read_raw(stream, 3, 801), f[f"streams/{stream}"][3:801])
        np.testing.assert_array_equal(d.read_raw("aux", 0, 5, slice(16, 32)), f["streams/aux"][0:5, 16:32])
        assert d._chunks is not None and d._chunks._places  # the direct path was taken
    assert sha(path) == before
