"""The gate's TOML file with a value of the wrong type for any key (a path given as a number or a
list was an internal error), and bytes that are not UTF-8, NaN, deep nesting (read by safe_json)."""

from __future__ import annotations

import dataclasses
import os

import pytest
from hypothesis import given, strategies as st

from alignprobe.gate.config import GateConfig, ServeSide, TrainSide
from bad_input_helpers import FUZZ, assert_refused

SECTIONS = {"": GateConfig, "train": TrainSide, "serve": ServeSide}
TOML_VALUES = {"a string": '"x"', "an integer": "5", "a float": "2.5", "a boolean": "true", "a list": '["a", 1]',
               "a table": "{ k = 1 }", "a date": "1979-05-27"}


def keys():
    for section, cls in SECTIONS.items():
        for field in dataclasses.fields(cls):
            if field.name not in ("train", "serve", "policy"):
                yield section, field.name, str(field.type).replace(" | None", "")


def wrong_values(kind):
    fits = {"str": ("a string",), "int": ("an integer",), "float": ("an integer", "a float"), "bool": ("a boolean",),
            "list[int]": ("a list",), "dict[str, Any]": ("a table",)}[kind]
    return [v for k, v in TOML_VALUES.items() if k not in fits]


@pytest.fixture(scope="module", autouse=True)
def _in_a_folder_of_its_own(tmp_path_factory):
    """A refused gate leaves its error outputs in the default out folder, alignprobe-gate/ in the
    current folder: here, not the repository."""
    before = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("cwd"))
    yield
    os.chdir(before)


CASES = [(s, k, v) for s, k, kind in keys() for v in wrong_values(kind)
         if not (k in ("layers", "aux_layers") and v in ('"x"', '["a", 1]'))]  # layer lists take words or lists


@FUZZ
@given(case=st.sampled_from(CASES))
def test_a_value_of_the_wrong_type_is_one_line(tmp_path_factory, case):
    section, key, value = case
    path = tmp_path_factory.mktemp("g") / "gate.toml"
    path.write_text((f"[{section}]\n" if section else "") + f"{key} = {value}\n")
    line = assert_refused(["gate", "--config", path], [path])
    assert key in line, line


@pytest.mark.parametrize("raw, said", [(b"\xff\xfe = 1\n", "not UTF-8"), (b"x = nan\n", "not a finite number"),
                                       (b"a = " + b"[" * 100 + b"]" * 100 + b"\n", "nested deeper")])
def test_text_that_is_not_a_config(tmp_path, raw, said):
    path = tmp_path / "gate.toml"
    path.write_bytes(raw)
    assert_refused(["gate", "--config", path], [path], match=said)
