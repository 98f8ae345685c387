"""CompareResult: truthiness, JSON round trip, strict JSON for infinite values."""

import json
import math

import pytest

from alignprobe.compare import CompareResult, compare
from compare_helpers import make_samples, write_serve, write_train


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    d = tmp_path_factory.mktemp("res")
    samples = make_samples(num=3, length=16)
    train = write_train(d / "t.h5", samples)
    return compare(train, write_serve(d / "a.h5", samples)), compare(train, write_serve(d / "b.h5", samples, taps=(1, 2, 3)))


def test_truthiness_follows_the_verdict(results):
    clean, offset = results
    assert clean and clean.passed(strict=True) and clean.verdict == "PASS"
    assert not offset and offset.verdict == "FAIL" and offset.codes("error") == ["layer_offset"]


def test_json_round_trip_is_exact(results):
    for r in results:
        text = r.to_json()
        json.loads(text)  # strict JSON: no Infinity / NaN literals
        assert "Infinity" not in text
        again = CompareResult.from_json(text)
        assert again == r
    # identical states: infinite SQNR survives as "inf"
    assert math.isinf(CompareResult.from_json(results[0].to_json()).streams[0].slices[0].sqnr_db)


def test_from_dict_ignores_keys_from_newer_writers(results):
    raw = results[1].to_dict()
    raw["added_later"] = 1
    raw["findings"][0]["also_new"] = True
    assert CompareResult.from_dict(raw).findings[0].code == "layer_offset"


def test_the_package_is_the_library_call(tmp_path):
    import alignprobe
    import alignprobe.compare.result as result_module

    samples = make_samples(num=2, length=8)
    train = write_train(tmp_path / "t.h5", samples)
    r = alignprobe.compare(train, write_serve(tmp_path / "s.h5", samples), policy=alignprobe.Policy())
    assert isinstance(r, alignprobe.CompareResult) and r.verdict == "PASS"
    assert alignprobe.compare.compare is compare and result_module.CompareResult is CompareResult


def test_result_module_imports_nothing_from_the_report():
    import ast
    import pathlib

    source = pathlib.Path(__file__).parents[2] / "alignprobe" / "compare" / "result.py"
    tree = ast.parse(source.read_text())
    names = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module]
    names += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert not [n for n in names if n.startswith("alignprobe.report")]
