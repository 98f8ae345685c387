"""result.json with fields of the wrong type, given to ``alignprobe report``: one line naming the field."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import given, settings, strategies as st

from bad_input_helpers import FUZZ, assert_one_line, assert_refused, fingerprints, invoke
from dump_helpers import H, claims, random_samples, write


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    folder = tmp_path_factory.mktemp("r")
    a = write(folder / "a.h5", random_samples([5, 7], {"aux": 3 * H, "final": H}), claims())
    out = folder / "result.json"
    import shutil

    twin = folder / "twin.h5"
    shutil.copy(a, twin)
    run = invoke(["compare", "--train-dump", a, "--serve-dump", twin, "--json", out, "--tokenizer", "none",
                  "--set", "severity.same_dump=info"])
    assert run.exit_code == 0, run.stdout
    raw = json.loads(out.read_text())
    assert raw["streams"] and raw["mappings"] and raw["findings"] is not None
    return raw


def paths(value, prefix=()):
    """Every path into a JSON value."""
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from paths(item, prefix + (key,))
    elif isinstance(value, list):
        for i, item in enumerate(value[:3]):
            yield from paths(item, prefix + (i,))


def put(raw, path, value):
    raw = copy.deepcopy(raw)
    node = raw
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return raw


JSON_VALUES = [None, "text", 7, 2.5, True, [1, "x"], {"k": [None]}, [], {}]


def other_type(original):
    return st.sampled_from([v for v in JSON_VALUES if type(v) is not type(original)])


@pytest.mark.slow  # a mutation that keeps the types renders the whole report (matplotlib): ~0.5 s a case
@settings(FUZZ, max_examples=80)
@given(data=st.data())
def test_any_field_of_the_wrong_type_is_one_line_or_renders(tmp_path_factory, result, data):
    path = data.draw(st.sampled_from([p for p in paths(result) if p]))
    node = result
    for key in path:
        node = node[key]
    raw = put(result, path, data.draw(other_type(node)))
    folder = tmp_path_factory.mktemp("x")
    given_file = folder / "result.json"
    given_file.write_text(json.dumps(raw))
    before = fingerprints([given_file])
    run = invoke(["report", given_file, "--out", folder / "report"])
    assert fingerprints([given_file]) == before
    if run.exit_code == 0:  # a field whose type is free (provenance values, evidence values, notes text)
        assert "Traceback" not in run.stderr
    else:
        assert_one_line(run, 2)


NAMED = {
    "evidence a list": (("findings", 0, "evidence"), [1, 2]),
    "tokens a number": (("tokens",), 3),
    "options a list": (("options",), ["sample"]),
    "policy a string": (("policy",), "strict"),
    "provenance a list": (("train_provenance",), [1]),
    "null label": (("streams", 0, "slices", 0, "label"), None),
    "null labels list": (("mappings", 0, "serve_labels"), None),
    "issue counts text": (("tokens", "issue_counts"), {"shift": "many"}),
    "cosine of text": (("mappings", 0, "cosine"), [["a"]]),
    "hidden size text": (("hidden_size",), "64"),
    "verdict null": (("verdict",), None),
}


@pytest.mark.parametrize("case", sorted(NAMED))
def test_named_wrong_types_are_refused(tmp_path, result, case):
    path, value = NAMED[case]
    if path[0] == "findings" and not result["findings"]:
        result = put(result, ("findings",), [{"code": "x", "severity": "info", "title": "t", "evidence": {}}])
    given_file = tmp_path / "result.json"
    given_file.write_text(json.dumps(put(result, path, value)))
    assert_refused(["report", given_file, "--out", tmp_path / "report"], [given_file])
