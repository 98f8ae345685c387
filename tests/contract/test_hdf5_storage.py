"""Dumps whose data lives in other files: a virtual dataset (its source missing, or present) and
external raw storage (a raw file, a missing one, /dev/zero) at every dataset a dump holds. A missing
virtual source reads as zeros without any error, so such a dump compared as given could PASS on values
nobody captured; each is refused in one line that names where the values live."""

from __future__ import annotations

import os
import shutil

import h5py
import pytest

from bad_input_helpers import assert_refused
from dump_helpers import H, claims, random_samples, write

MEMBERS = ["tokens", "samples/offsets", "streams/aux", "streams/final"]


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    path = tmp_path_factory.mktemp("good") / "good.h5"
    return write(path, random_samples([6, 9, 4], {"aux": 3 * H, "final": H}), claims())


def rebuilt(f, name, make):
    """Replace dataset ``name`` by ``make(f, name, values)``, keeping its attributes."""
    values, attrs = f[name][()], dict(f[name].attrs)
    del f[name]
    ds = make(f, name, values)
    for key, value in attrs.items():
        ds.attrs[key] = value


def virtual(source_exists):
    def make(f, name, values):
        source = os.path.join(os.path.dirname(f.filename), "source-" + name.replace("/", "-") + ".h5")
        if source_exists:
            with h5py.File(source, "w") as s:
                s["x"] = values
        layout = h5py.VirtualLayout(shape=values.shape, dtype=values.dtype)
        layout[:] = h5py.VirtualSource(source, "x", shape=values.shape)
        return f.create_virtual_dataset(name, layout, fillvalue=0)
    return make


def external(target):
    def make(f, name, values):
        raw = target or os.path.join(os.path.dirname(f.filename), "raw-" + name.replace("/", "-"))
        if target is None:
            with open(raw, "wb") as fh:
                fh.write(values.tobytes())
        return f.create_dataset(name, shape=values.shape, dtype=values.dtype, external=[(raw, 0, h5py.h5f.UNLIMITED)])
    return make


ELSEWHERE = {
    "virtual, source missing": (virtual(False), "is a virtual dataset"),
    "virtual, source present": (virtual(True), "is a virtual dataset"),
    "external raw file": (external(None), "stored in external raw files"),
    "external raw file missing": (external("missing.raw"), "stored in external raw files"),
    "external /dev/zero": (external("/dev/zero"), "(its values live in /dev/zero)"),
}


@pytest.mark.parametrize("member", MEMBERS)
@pytest.mark.parametrize("case", sorted(ELSEWHERE))
def test_data_stored_in_other_files_is_refused(tmp_path, good, member, case):
    make, match = ELSEWHERE[case]
    path = tmp_path / "bad.h5"
    shutil.copy(good, path)
    with h5py.File(path, "r+") as f:
        rebuilt(f, member, make)
    inputs = [path, good, *[p for p in tmp_path.iterdir() if p != path]]
    for args in (["inspect", path], ["compare", "--train-dump", good, "--serve-dump", path]):
        line = assert_refused(args, inputs, match=match)
        assert f"/{member.rsplit('/', 1)[-1]} " in line and "a dump stores its data in place" in line
