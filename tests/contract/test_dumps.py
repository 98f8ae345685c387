"""Every broken dump: one line on stderr, exit code 2, no traceback, the file untouched."""

import shutil
import subprocess
import sys

import h5py
import numpy as np
import pytest
from click.testing import CliRunner

from alignprobe.cli.main import cli
from dump_helpers import H, claims, random_samples, sha, write


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    path = tmp_path_factory.mktemp("good") / "good.h5"
    return write(path, random_samples([6, 9, 4], {"aux": 3 * H, "final": H}), claims())


def broken(tmp_path, good, edit):
    path = tmp_path / "broken.h5"
    shutil.copy(good, path)
    with h5py.File(path, "r+") as f:
        edit(f)
    return path


def replace(f, name, data):
    del f[name]
    f[name] = data


CASES = {
    "newer version": (lambda f: f.attrs.__setitem__("format_version", 99), "newer than this alignprobe reads"),
    "not a dump": (lambda f: f.attrs.__delitem__("format"), "not an alignprobe dump"),
    "no tokens": (lambda f: f.__delitem__("tokens"), "/tokens is missing"),
    "no ids": (lambda f: f.__delitem__("samples/ids"), "/samples/ids is missing"),
    "no streams": (lambda f: f.__delitem__("streams"), "no streams"),
    "short offsets": (lambda f: replace(f, "samples/offsets", np.array([0, 6, 15])), "needs 4"),
    "offsets past tokens": (lambda f: replace(f, "samples/offsets", np.array([0, 6, 15, 40])), "ends at 40"),
    "decreasing offsets": (lambda f: replace(f, "samples/offsets", np.array([0, 9, 6, 19])), "never decrease"),
    "stream too short": (
        lambda f: replace(f, "streams/final", np.zeros((5, H), np.float32)),
        "has 5 rows but the dump has 19 tokens",
    ),
    "width disagrees with claim": (
        lambda f: f["streams/aux"].attrs.__setitem__("hf_indices", np.array([2, 3])),
        "48 wide but claims 2 slices",
    ),
    "unfinished": (lambda f: f.attrs.__setitem__("complete", False), "not finished"),
    "duplicate ids": (lambda f: replace(f, "samples/ids", np.array([b"a", b"a", b"b"])), "duplicate ids"),
    "bad dtype claim": (lambda f: f["streams/aux"].attrs.__setitem__("dtype", "float32"), "stored as uint16"),
    # stored dtype and encoding that no writer pairs (dump/encoding.py storage_of): bfloat16 bits said
    # native were read as the integers 0..65535 and compared (a confident `unexplained`)
    "bfloat16 bits said native": (lambda f: f["streams/aux"].attrs.__setitem__("encoding", "native"),
                                  "stream 'aux' holds 16-bit integers (uint16) with encoding 'native'"),
    "bfloat16 bits said native, no dtype": (lambda f: _attrs(f, "aux", encoding="native", dtype=None),
                                            "encoding = 'bfloat16-bits'"),
    "int16 bits said native": (lambda f: _restored(f, "aux", np.int16, encoding="native"), "16-bit integers (int16)"),
    "float32 said bfloat16 bits": (lambda f: _restored(f, "final", np.float32, dtype="float32"),
                                   "stream 'final' is float32 with encoding 'bfloat16-bits'"),
    "unknown encoding": (lambda f: _restored(f, "final", np.float32, dtype="float32", encoding="bf16"),
                         "encoding 'bf16' is not one alignprobe reads"),
    "integer states": (lambda f: _restored(f, "final", np.int32, dtype=None, encoding=None), "stored as int32"),
    "float64 states": (lambda f: _restored(f, "final", np.float64, dtype=None, encoding=None), "stored as float64"),
    "HF index out of range": (lambda f: f["streams/final"].attrs.__setitem__("hf_indices", np.array([99])), "outside"),
    # the marks of samples kept as an engine returned them (dump/marks.py)
    "marks half there": (lambda f: f.__setitem__("samples/nonfinite_rows", np.zeros(3, np.int64)), "marks come as a pair"),
    "marks past the sample": (lambda f: _marks(f, [[0, 6], [0, 10], [0, 4]], [0, 0, 0]), "rows [0, 10)"),
    "marks count too many NaN rows": (lambda f: _marks(f, [[0, 6], [3, 9], [0, 4]], [0, 7, 0]), "7 non-finite"),
    "marks of the wrong shape": (lambda f: _marks(f, [0, 6, 0], [0, 0, 0]), "[samples, 2] integers"),
    "marks of floats": (lambda f: _marks(f, [[0.5, 6], [0, 9], [0, 4]], [0, 0, 0]), "[samples, 2] integers"),
    "marks for other samples": (lambda f: _marks(f, [[0, 6], [0, 9]], [0, 0]), "for 3 samples"),
}


def _attrs(f, stream, **values):
    """Set (None: delete) attributes of a stream."""
    for key, value in values.items():
        if value is None:
            f[f"streams/{stream}"].attrs.pop(key, None)
        else:
            f[f"streams/{stream}"].attrs[key] = value


def _restored(f, stream, stored, **values):
    """The stream rewritten with values of type ``stored`` and its attributes, ``values`` changed."""
    ds = f[f"streams/{stream}"]
    attrs, data = dict(ds.attrs), ds[()]
    del f[f"streams/{stream}"]
    f[f"streams/{stream}"] = data.astype(stored)
    f[f"streams/{stream}"].attrs.update(attrs)
    _attrs(f, stream, **values)


def _marks(f, returned, nonfinite):
    f["samples/returned_rows"] = np.array(returned)
    f["samples/nonfinite_rows"] = np.array(nonfinite, dtype=np.int64)


def run_inspect(path, *extra):
    result = CliRunner().invoke(cli, ["inspect", str(path), *extra])
    return result.exit_code, result.stderr


@pytest.mark.parametrize("case", CASES)
def test_broken_dump_gets_one_line_and_exit_2(tmp_path, good, case):
    edit, message = CASES[case]
    path = broken(tmp_path, good, edit)
    before = sha(path)
    code, err = run_inspect(path)
    assert code == 2, err
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert sha(path) == before


def test_compare_refuses_bfloat16_bits_said_native(tmp_path, good):
    # compare read them as integers and named the slices `unexplained`, exit 1
    path = broken(tmp_path, good, lambda f: f["streams/aux"].attrs.__setitem__("encoding", "native"))
    result = CliRunner().invoke(cli, ["compare", "--train-dump", str(good), "--serve-dump", str(path)])
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1 and "stream 'aux' holds 16-bit integers" in result.stderr


def test_missing_file(tmp_path):
    code, err = run_inspect(tmp_path / "nope.h5")
    assert code == 2 and "no such file" in err


def test_not_hdf5(tmp_path):
    path = tmp_path / "notes.h5"
    path.write_text("these are not hidden states\n")
    code, err = run_inspect(path)
    assert code == 2 and "not an HDF5 file" in err
    assert path.read_text() == "these are not hidden states\n"


def test_truncated_file(tmp_path, good):
    path = tmp_path / "cut.h5"
    data = open(good, "rb").read()
    path.write_bytes(data[: len(data) // 2])
    before = sha(path)
    code, err = run_inspect(path)
    assert code == 2 and ("truncated" in err or "damaged" in err), err
    assert sha(path) == before


def test_corrupted_bytes_anywhere(tmp_path, good):
    """Garbage over one stretch of the file, at several places: metadata damage must give one clean
    line and exit 2; damage inside raw state values reads back as other numbers (exit 0)."""
    data = open(good, "rb").read()
    codes = []
    for k in range(1, 8):
        path = tmp_path / f"garbled{k}.h5"
        garbled = bytearray(data)
        at = len(data) * k // 8
        garbled[at : at + 512] = np.random.default_rng(k).integers(0, 256, 512, dtype=np.uint8).tobytes()
        path.write_bytes(bytes(garbled))
        before = sha(path)
        code, err = run_inspect(path)
        assert code in (0, 2) and "Traceback" not in err, err
        if code == 2:
            assert err.count("\n") == 1, err
        assert sha(path) == before
        codes.append(code)
    assert 2 in codes, "no corruption was detected at any of the places"


def test_a_partial_capture_folder_is_named_as_such(tmp_path):
    (tmp_path / "d.h5.partial").mkdir()
    code, err = run_inspect(tmp_path / "d.h5")
    assert code == 2 and "--resume" in err
    code, err = run_inspect(tmp_path / "d.h5.partial")
    assert code == 2 and "unfinished capture" in err


def test_real_process_prints_no_traceback(tmp_path):
    path = tmp_path / "x.h5"
    path.write_bytes(b"\x89HDF\r\n\x1a\n" + b"\0" * 100)
    proc = subprocess.run(
        [sys.executable, "-m", "alignprobe.cli.main", "inspect", str(path)], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("alignprobe: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stdout == ""
