"""The library calls a notebook makes, given the bad values the CLI's types refuse: each raises
BadInput (the project's error, one line) naming the argument, never a TypeError, an IndexError or an
AttributeError from inside the pass, and never runs on silently (``sample=float("nan")`` compared
everything, ``block_bytes=-1`` ran, ``dump.states(-1)`` read the span of no sample)."""

from __future__ import annotations

import math

import pytest

import alignprobe
from alignprobe import BadInput
from dump_helpers import H, claims, random_samples, write


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    folder = tmp_path_factory.mktemp("api")
    a = write(folder / "a.h5", random_samples([6, 9, 4], {"aux": 3 * H, "final": H}), claims())
    b = write(folder / "b.h5", random_samples([6, 9, 4], {"aux": 3 * H, "final": H}, seed=1), claims())
    return a, b


BAD_COMPARE = {
    "train None": ({"train": None}, "train must be the path"),
    "serve an int": ({"serve": 7}, "serve must be the path"),
    "train bytes": ({"train": b"a.h5"}, "train must be the path"),
    "sample 1.5": ({"sample": 1.5}, "sample must be a whole number"),
    "sample nan": ({"sample": math.nan}, "sample must be a whole number"),
    "sample inf": ({"sample": math.inf}, "sample must be a whole number"),
    "sample True": ({"sample": True}, "sample must be a whole number"),
    "sample '3'": ({"sample": "3"}, "sample must be a whole number"),
    "sample 0": ({"sample": 0}, "sample must be at least 1"),
    "max_tokens nan": ({"max_tokens": math.nan}, "max_tokens must be a whole number"),
    "max_tokens -1": ({"max_tokens": -1}, "max_tokens must be at least 1"),
    "mapping_tokens None": ({"mapping_tokens": None}, "mapping_tokens must be a whole number"),
    "block_bytes 0": ({"block_bytes": 0}, "block_bytes must be at least 1"),
    "block_bytes -1": ({"block_bytes": -1}, "block_bytes must be at least 1"),
    "block_bytes '8MB'": ({"block_bytes": "8MB"}, "block_bytes must be a whole number"),
    "device 3": ({"device": 3}, "device must be a name"),
    "policy a list": ({"policy": [1, 2]}, "policy must be a Policy"),
    "policy an int": ({"policy": 5}, "policy must be a Policy"),
    "policy nan": ({"policy": {"drift_fail_rel_rms": math.nan}}, "drift_fail_rel_rms = nan is out of range"),
}


@pytest.mark.parametrize("case", sorted(BAD_COMPARE))
def test_compare_refuses_bad_arguments_with_its_own_error(pair, case):
    changes, match = BAD_COMPARE[case]
    arguments = {"train": pair[0], "serve": pair[1], "tokenizer": None, **changes}
    with pytest.raises(BadInput, match=match.replace("(", r"\(")) as caught:
        alignprobe.compare(arguments.pop("train"), arguments.pop("serve"), **arguments)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("path", [None, 5, ["a.h5"]])
def test_open_and_inspect_refuse_a_path_that_is_not_one(path):
    for call in (alignprobe.open_dump, alignprobe.inspect_dump):
        with pytest.raises(BadInput, match="a dump is opened from its path"):
            call(path)


@pytest.mark.parametrize("position", [3, 99, -1, -99])
def test_a_sample_position_outside_the_dump(pair, position):
    with alignprobe.open_dump(pair[0]) as dump:
        with pytest.raises(BadInput, match=f"no sample at position {position}; it holds 3"):
            dump.states(position, "aux")
        assert dump.states(2, "aux").shape == (4, 3 * H)  # the last one still reads


def test_good_arguments_still_compare(pair):
    result = alignprobe.compare(*pair, tokenizer=None, sample=2, max_tokens=100, block_bytes=1 << 12, device="cpu")
    assert result.verdict in ("PASS", "WARN", "FAIL")
