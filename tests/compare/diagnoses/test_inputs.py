"""compare/diagnoses/inputs.py: the inputs themselves: one dump given twice, the two swapped, other dtypes."""

import shutil

from alignprobe.compare import compare
from alignprobe.dump import Provenance
from compare_helpers import make_samples, write_serve, write_train


def test_the_same_dump_on_both_sides_is_an_error_naming_both_paths(tmp_path):
    serve = write_serve(tmp_path / "s.h5", make_samples(num=3, length=20))
    copy = shutil.copy(serve, tmp_path / "copy.h5")
    f = compare(serve, copy).finding("same_dump")
    assert f.severity == "error" and f.evidence["same_provenance"]
    assert f.evidence["train_path"].endswith("s.h5") and f.evidence["serve_path"].endswith("copy.h5")


def test_a_serve_dump_given_as_the_train_side_is_called_swapped(tmp_path):
    samples = make_samples(num=3, length=20)
    train = write_train(tmp_path / "t.h5", samples, provenance=Provenance.here(engine="hf", dtype="float32"))
    serve = write_serve(tmp_path / "s.h5", samples, provenance=Provenance.here(engine="sglang", dtype="float32"))
    assert compare(train, serve).finding("dumps_swapped") is None
    f = compare(serve, train).finding("dumps_swapped")
    assert f.severity == "error" and f.evidence["train_engine"] == "sglang" and f.evidence["serve_engine"] == "hf"


def test_dumps_run_in_other_dtypes_are_said_at_info(tmp_path):
    samples = make_samples(num=3, length=20)
    train = write_train(tmp_path / "t.h5", samples, provenance=Provenance.here(engine="hf", dtype="bfloat16"))
    serve = write_serve(tmp_path / "s.h5", samples, provenance=Provenance.here(engine="sglang", dtype="float16"))
    f = compare(train, serve).finding("dtype_mismatch")
    assert f.severity == "info" and (f.evidence["train_dtype"], f.evidence["serve_dtype"]) == ("bfloat16", "float16")
