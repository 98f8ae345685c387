"""direct_read: the rows a positioned read returns are h5py's, for every layout it takes; others are left to h5py."""

import os

import h5py
import numpy as np
import pytest
import torch

from alignprobe.dump import StreamClaim, open_dump
from alignprobe.dump import direct_read
from alignprobe.dump.direct_read import DirectRows
from alignprobe.dump.planned_writer import PlannedDumpWriter
from alignprobe.dump.schema import Provenance
from alignprobe.errors import BadInput
from dump_helpers import random_samples, write

WIDE = 1024  # bf16 chunk rows of 2 KB: the narrowest a stream of several column chunks is read directly
RANGES = [(0, 1), (0, 5), (3, 700), (1023, 1025), (1500, 2400), (2390, 2400), (0, 2400), (2399, 2400), (5, 5)]


def claims(hidden):
    return {"aux": StreamClaim((2, 3, 4), hidden, 6, "bfloat16"),
            "final": StreamClaim((6,), hidden, 6, "bfloat16", role="final")}


def samples(hidden):
    return random_samples([700, 1, 900, 799], {"aux": 3 * hidden, "final": hidden})


@pytest.fixture(params=["chunked", "contiguous"])
def dump_path(request, tmp_path):
    path = tmp_path / "d.h5"
    if request.param == "chunked":
        return write(path, samples(WIDE), claims(WIDE))
    rows = samples(WIDE)
    plan = [(sid, len(ids)) for sid, (ids, _) in rows.items()]
    with PlannedDumpWriter(path, Provenance.here(engine="test"), claims(WIDE), plan) as w:
        for sid, (ids, states) in rows.items():
            w.add(sid, ids, states)
    return path


@pytest.mark.parametrize("threads", [0, 3])
def test_rows_and_chunk_columns_are_what_h5py_reads(dump_path, monkeypatch, threads):
    monkeypatch.setattr(direct_read, "READ_THREADS", threads)
    monkeypatch.setattr(direct_read, "MIN_PARALLEL_PIECES", 1)
    with open_dump(dump_path) as d, h5py.File(dump_path, "r") as f:
        for stream in ("aux", "final"):
            ds = f["streams"][stream]
            direct = d._direct_rows(stream)
            assert direct is not None, f"{stream} fell back to h5py"
            for start, stop in RANGES:
                np.testing.assert_array_equal(d.read_raw(stream, start, stop), ds[start:stop])
            if ds.chunks is not None and ds.shape[1] > WIDE:
                columns = slice(WIDE, 2 * WIDE)
                assert direct.read(10, 900, columns) is not None
                np.testing.assert_array_equal(d.read_raw(stream, 10, 900, columns), ds[10:900, columns])


def test_columns_off_the_chunk_boundaries_are_read_by_h5py(tmp_path):
    path = write(tmp_path / "d.h5", samples(WIDE), claims(WIDE))
    with open_dump(path) as d, h5py.File(path, "r") as f:
        assert d._direct_rows("aux").read(0, 10, slice(3, 9)) is None
        np.testing.assert_array_equal(d.read_raw("aux", 0, 10, slice(3, 9)), f["streams/aux"][0:10, 3:9])


def plain_file(tmp_path, **options):
    path = tmp_path / "plain.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", **options)
    return path


@pytest.mark.parametrize("options", [
    {"data": np.ones((64, 3 * WIDE), np.uint16), "chunks": (16, WIDE), "compression": "gzip"},  # a filter
    {"shape": (64, 3 * WIDE), "dtype": np.uint16, "chunks": (16, WIDE)},  # chunks never written
    {"data": np.ones((64, 3 * 16), np.uint16), "chunks": (16, 16)},  # rows of 32-byte segments
    {"data": np.ones((64, 3 * WIDE), ">u2"), "chunks": (16, WIDE)},  # big-endian
    {"data": np.ones((4, 4, 4), np.uint16)},  # not rows
])
def test_what_is_not_stored_plainly_is_left_to_h5py(tmp_path, options):
    path = plain_file(tmp_path, **options)
    fd = os.open(path, os.O_RDONLY)
    try:
        with h5py.File(path, "r") as f:
            assert DirectRows.of(fd, f["x"]) is None
    finally:
        os.close(fd)


def test_a_file_cut_short_inside_a_chunk_is_one_line(tmp_path):
    path = write(tmp_path / "d.h5", samples(WIDE), claims(WIDE))
    with h5py.File(path, "r") as f:
        ds = f["streams/final"]
        last = max(ds.id.get_chunk_info(i).byte_offset for i in range(ds.id.get_num_chunks()))
    with open_dump(path) as d:
        d._direct_rows("final")  # the chunk index is read while the file is whole
        os.truncate(path, last + 100)
        with pytest.raises(BadInput, match="damaged"):
            d.read_raw("final", 0, 2400)


def test_bfloat16_bits_read_directly_widen_exactly(tmp_path):
    x = torch.randn(300, WIDE).bfloat16()
    rows = {"one": (torch.arange(300), {"final": x})}
    path = write(tmp_path / "d.h5", rows, {"final": StreamClaim((6,), WIDE, 6, "bfloat16", role="final")})
    with open_dump(path) as d:
        assert d._direct_rows("final") is not None
        np.testing.assert_array_equal(d.read("final", 0, 300), x.float().numpy())


def test_a_file_replaced_since_the_open_is_read_by_h5py(tmp_path):
    path = write(tmp_path / "d.h5", samples(WIDE), claims(WIDE))
    with open_dump(path) as d, h5py.File(path, "r") as f:
        want = f["streams/final"][0:50]
        other = write(tmp_path / "other.h5", random_samples([2400], {"aux": 3 * WIDE, "final": WIDE}, seed=5),
                      claims(WIDE))
        os.replace(other, path)  # the open dump still holds the file it opened
        assert d._direct_rows("final") is None
        np.testing.assert_array_equal(d.read_raw("final", 0, 50), want)


def test_rows_counted_from_the_end_follow_h5py(tmp_path):
    path = write(tmp_path / "d.h5", samples(WIDE), claims(WIDE))
    with open_dump(path) as d, h5py.File(path, "r") as f:
        assert d._direct_rows("final").read(-5, 2400) is None
        np.testing.assert_array_equal(d.read_raw("final", -5, 2400), f["streams/final"][-5:2400])
