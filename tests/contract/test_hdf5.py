"""HDF5 structure attacks on a dump: groups where datasets belong, soft-link cycles, external and
dangling links, damaged bytes, 2-D or complex tokens, fractional or string versions, offsets, HF
indices and hidden sizes, a non-boolean ``complete``; and fixed-length string attributes, which
other HDF5 writers use, are accepted."""

from __future__ import annotations

import shutil

import h5py
import numpy as np
import pytest
from hypothesis import given, strategies as st

from alignprobe.dump import open_dump
from bad_input_helpers import FUZZ, assert_refused, invoke
from dump_helpers import H, claims, random_samples, write


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    path = tmp_path_factory.mktemp("good") / "good.h5"
    return write(path, random_samples([6, 9, 4], {"aux": 3 * H, "final": H}), claims())


def replace(f, name, value):
    del f[name]
    f[name] = value


def as_group(f, name):
    del f[name]
    f.create_group(name)


def soft_cycle(f, name):
    del f[name]
    f[name] = h5py.SoftLink("/" + name)


def soft_chain(f, name):
    del f[name]
    f["loop_a"] = h5py.SoftLink("/loop_b")
    f["loop_b"] = h5py.SoftLink("/loop_a")
    f[name] = h5py.SoftLink("/loop_a")


def dangling(f, name):
    del f[name]
    f[name] = h5py.SoftLink("/nowhere/at/all")


def external(f, name):
    del f[name]
    f[name] = h5py.ExternalLink("/etc/hostname", "/x")


STRUCTURAL = {"as group": as_group, "soft-link cycle": soft_cycle, "soft-link chain": soft_chain,
              "dangling link": dangling, "external link": external}
MEMBERS = ["tokens", "samples/ids", "samples/offsets", "streams/aux", "streams/final", "streams", "samples"]

# Attribute values of the wrong kind: fractional, string, complex, boolean, array, empty.
wrong_int = st.one_of(st.floats(allow_nan=True, allow_infinity=True).filter(lambda x: x != int(x) if np.isfinite(x) else True),
                      st.sampled_from(["1", "one", b"1"]), st.complex_numbers(allow_nan=False).filter(lambda z: z.imag != 0),
                      st.just(np.array([1, 2])), st.booleans())
wrong_bool = st.one_of(st.sampled_from(["true", "yes", b"1", 2, -1, 0.5, 1.5]), st.floats(allow_nan=True),
                       st.just(np.array([True, False])))
wrong_list = st.one_of(st.lists(st.floats(0.1, 5.9), min_size=1, max_size=3).map(np.array),
                       st.sampled_from(["2,3,4", b"2", np.array([], dtype=np.int64), np.array([2 + 1j, 3])]))


@FUZZ
@given(attack=st.sampled_from(sorted(STRUCTURAL)), member=st.sampled_from(MEMBERS))
def test_links_and_groups_where_datasets_belong(tmp_path_factory, good, attack, member):
    path = tmp_path_factory.mktemp("s") / "bad.h5"
    shutil.copy(good, path)
    with h5py.File(path, "r+") as f:
        STRUCTURAL[attack](f, member)
    for args in (["inspect", path], ["compare", "--train-dump", path, "--serve-dump", good]):
        assert_refused(args, [path, good])


@FUZZ
@given(target=st.sampled_from([("/", "format_version"), ("streams/aux", "hidden_size"), ("streams/aux", "num_layers")]),
       value=wrong_int)
def test_integer_attributes_must_be_integers(tmp_path_factory, good, target, value):
    path = tmp_path_factory.mktemp("i") / "bad.h5"
    shutil.copy(good, path)
    with h5py.File(path, "r+") as f:
        f[target[0]].attrs[target[1]] = value
    assert_refused(["inspect", path], [path])


@FUZZ
@given(value=wrong_bool)
def test_complete_must_be_a_boolean(tmp_path_factory, good, value):
    path = tmp_path_factory.mktemp("b") / "bad.h5"
    shutil.copy(good, path)
    with h5py.File(path, "r+") as f:
        f.attrs["complete"] = value
    assert_refused(["inspect", path], [path])


@FUZZ
@given(stream=st.sampled_from(["aux", "final"]), value=wrong_list)
def test_hf_indices_must_be_integers(tmp_path_factory, good, stream, value):
    path = tmp_path_factory.mktemp("h") / "bad.h5"
    shutil.copy(good, path)
    with h5py.File(path, "r+") as f:
        f[f"streams/{stream}"].attrs["hf_indices"] = value
    assert_refused(["inspect", path], [path])


TOKENS = {
    "2-D": lambda n: np.zeros((n, 2), np.int64),
    "complex": lambda n: np.zeros(n, np.complex64),
    "float": lambda n: np.zeros(n, np.float32) + 0.5,
    "string": lambda n: np.array([b"a"] * n),
    "bool": lambda n: np.zeros(n, bool),
}
OFFSETS = {
    "float": np.array([0.0, 6.0, 15.0, 19.0]),
    "fractional": np.array([0.0, 6.5, 15.0, 19.0]),
    "string": np.array([b"0", b"6", b"15", b"19"]),
    "2-D": np.array([[0, 6], [15, 19]]),
    "complex": np.array([0, 6, 15, 19], np.complex64),
}


@pytest.mark.parametrize("kind", sorted(TOKENS))
def test_tokens_must_be_1d_integers(tmp_path, good, kind):
    path = tmp_path / "bad.h5"
    shutil.copy(good, path)
    with h5py.File(path, "r+") as f:
        replace(f, "tokens", TOKENS[kind](19))
    assert_refused(["inspect", path], [path])


@pytest.mark.parametrize("kind", sorted(OFFSETS))
def test_offsets_must_be_1d_integers(tmp_path, good, kind):
    path = tmp_path / "bad.h5"
    shutil.copy(good, path)
    with h5py.File(path, "r+") as f:
        replace(f, "samples/offsets", OFFSETS[kind])
    assert_refused(["inspect", path], [path])


@FUZZ
@given(data=st.data())
def test_damaged_bytes_are_one_line_or_still_read(tmp_path_factory, good, data):
    """Bytes overwritten anywhere (object headers, the superblock, the B-trees, the data): either the
    dump still reads, or one line says it cannot; never a traceback, never an internal error."""
    raw = bytearray(open(good, "rb").read())
    for _ in range(data.draw(st.integers(1, 8))):
        at = data.draw(st.integers(0, len(raw) - 1))
        length = data.draw(st.integers(1, 64))
        raw[at:at + length] = data.draw(st.binary(min_size=length, max_size=length))
    path = tmp_path_factory.mktemp("d") / "bad.h5"
    path.write_bytes(bytes(raw))
    for args in (["inspect", path], ["compare", "--train-dump", path, "--serve-dump", good]):
        result = invoke(args)
        if result.exit_code in (0, 1):  # damage the reader cannot see (inside the data) is compared as data
            assert "Traceback" not in result.stderr
            continue
        assert_refused(args, [path, good])


def test_fixed_length_string_attributes_are_accepted(tmp_path, good):
    """Other HDF5 writers store strings fixed-length (numpy bytes): the same dump must read the same."""
    path = tmp_path / "fixed.h5"
    shutil.copy(good, path)
    with h5py.File(path, "r+") as f:
        for obj in (f, f["streams/aux"], f["streams/final"]):
            for key, value in list(obj.attrs.items()):
                if isinstance(value, str):
                    obj.attrs[key] = np.bytes_(value.encode())
        replace(f, "samples/ids", np.array([s.encode() for s in ["prompt-0", "prompt-1", "prompt-2"]], dtype="S16"))
        f.attrs["complete"] = np.int8(1)  # an integer boolean, as some writers store it
        assert isinstance(f.attrs["format"], np.bytes_)
    with open_dump(path) as fixed, open_dump(good) as original:
        assert fixed.sample_ids == original.sample_ids and fixed.streams == original.streams
        assert fixed.provenance == original.provenance
    run = invoke(["compare", "--train-dump", path, "--serve-dump", good, "--set", "severity.same_dump=info"])
    assert run.exit_code == 0, run.stdout[-400:]
