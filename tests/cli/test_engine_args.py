"""cli/engine_args.py: ``--engine-arg KEY=VALUE`` values are JSON where they are JSON, else text."""

import pytest

from alignprobe.cli.engine_args import parse_engine_args
from alignprobe.errors import BadInput


def test_json_values_and_plain_words():
    assert parse_engine_args(["max_model_len=1024", "enforce-eager=true", "device=cpu", "ids=[1, 3, 4]"]) == {
        "max_model_len": 1024, "enforce_eager": True, "device": "cpu", "ids": [1, 3, 4]}


@pytest.mark.parametrize("value, said", [("NaN", "NaN"), ("1e999", "1e999"), ("[" * 100_000 + "]" * 100_000, "nested")])
def test_hostile_json_is_one_line_not_an_engine_keyword(value, said):
    # 1e999 once reached the engine as inf, and a deep list ended in a RecursionError (exit 3)
    with pytest.raises(BadInput, match="--engine-arg gpu") as info:
        parse_engine_args([f"gpu={value}"])
    assert said in str(info.value) and "\n" not in str(info.value)


def test_a_pair_without_a_key_is_refused():
    with pytest.raises(BadInput, match="KEY=VALUE"):
        parse_engine_args(["=1"])
