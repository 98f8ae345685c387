"""The fast SGLang decoder (simdjson for the prefill's numbers) against the msgspec decoder it stands in
for, and both against Python's own ``float`` (the reference for a decimal's float64), bit for bit.

The numbers are the hard ones: subnormals of float64 and of float32, -0.0, halfway cases, 17 and 40
significant digits, exponents far out of range, integers past 2**53 and past 64 bits, nulls (what
SGLang's orjson writes for NaN and Inf), in rows or one vector, in orjson's compact form and json's
spaced one. The answers around them are the hard ones too: the key inside strings and inside other
keys, batches, answers that are not answers.
"""

import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from alignprobe.probes import json_rows
from alignprobe.probes.sglang_decode import NotAnAnswer, decode_generate, msgspec_answer

CASES = settings(derandomize=True, database=None, deadline=None, print_blob=False, max_examples=300,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

HARD_NUMBERS = [
    "0", "-0", "0.0", "-0.0", "0e0", "-0E-0", "1", "-1", "1e0", "1E+2", "1e-2",
    "4.9e-324", "5e-324", "2.4703282292062327e-324", "2.4703282292062328e-324", "1e-400", "-1e-400",
    "2.2250738585072011e-308", "2.2250738585072014e-308", "1.7976931348623157e308", "1.7976931348623159e308",
    "1e309", "-1e309", "1e400",
    "1.401298464324817e-45", "7.006492321624085e-46", "7.006492321624086e-46", "1.1754942e-38",
    "3.4028235e38", "3.4028236e38", "3.40282357e38", "-1.0000000596046448", "1.0000000596046449",
    "0.1", "0.30000000000000004", "1.00000000000000011102230246251565404236316680908203125",
    "1.00000000000000011102230246251565404236316680908203124", "123456789012345678901234567890.5e-10",
    "9007199254740993", "-9007199254740993", "9223372036854775807", "9223372036854775808",
    "18446744073709551615", "18446744073709551616", "-9223372036854775809", "123456789012345678901234567890",
    "0.000000000000000000000000000000000000000000001", "1" + "0" * 400, "0." + "0" * 330 + "1",
]

decimals = st.from_regex(r"-?(0|[1-9][0-9]{0,40})(\.[0-9]{1,40})?([eE][-+]?[0-9]{1,3})?", fullmatch=True)
float64_texts = st.floats(allow_nan=False, allow_infinity=False).flatmap(
    lambda x: st.sampled_from([repr(x), f"{x:.17e}", f"{x:.25g}", f"{x:.40e}"]))
float32_texts = st.floats(width=32, allow_nan=False, allow_infinity=False).map(lambda x: repr(float(np.float32(x))))
numbers = st.one_of(st.sampled_from(HARD_NUMBERS), decimals, float64_texts, float32_texts,
                    st.integers(-2**70, 2**70).map(str))
values = st.one_of(numbers, numbers, numbers, st.just("null"))


def as_float64(text: str) -> float:
    """What a JSON number means as float64, by the standard library: a decimal by Python's float
    (correctly rounded), an integer (no fraction, no exponent: "-0" is 0) by int, then rounded."""
    value = json.loads(text)
    try:
        return float(value)
    except OverflowError:  # an integer past float64's range
        return math.inf


def reference(text: str) -> np.float32:
    """The float32 a JSON number means here: its float64, then numpy's cast."""
    with np.errstate(over="ignore"):
        return np.float32(as_float64(text))


def array_text(texts, separator: str) -> str:
    return "[" + separator.join(texts) + "]"


@st.composite
def prefills(draw):
    """A prefill's text and the float32 values it means (None where it holds a null)."""
    separator = draw(st.sampled_from([",", ", ", " ,\n ", "\t,"]))
    if draw(st.booleans()):
        row = draw(st.lists(values, max_size=12))
        return array_text(row, separator), [row]
    width = draw(st.integers(0, 8))
    rows = draw(st.lists(st.lists(values, min_size=width, max_size=width), min_size=1, max_size=6))
    return array_text([array_text(row, separator) for row in rows], separator), rows


def answer(prefill: str, spaced: bool) -> bytes:
    decode_step = "[0.5, -0.25]"
    if spaced:  # json.dumps's spacing, as the tests' fake server answers
        return (f'{{"text": "a", "output_ids": [5], "meta_info": {{"id": "x", "hidden_states": '
                f'[{prefill}, {decode_step}], "cached_tokens": 3}}}}').encode()
    return f'{{"text":"a","meta_info":{{"id":"x","hidden_states":[{prefill},{decode_step}],"cached_tokens":3}}}}'.encode()


def assert_same(content: bytes):
    """decode_generate gives what msgspec_answer gives, rows parsed one at a time and all at once
    (json_rows.ROW_BYTES chooses): the same rows bit for bit, or the same error."""
    saved = json_rows.ROW_BYTES
    try:
        json_rows.ROW_BYTES = 0  # every row its own parse, as at Kimi width
        decoded = assert_same_one_way(content)
        json_rows.ROW_BYTES = 1 << 40  # one parse of all rows, as for narrow rows
        assert_same_one_way(content)
    finally:
        json_rows.ROW_BYTES = saved
    return decoded


def assert_same_one_way(content: bytes):
    try:
        expected = msgspec_answer(content)
    except NotAnAnswer as exc:
        with pytest.raises(NotAnAnswer) as got:
            decode_generate(content)
        assert str(got.value) == str(exc)
        return None
    got = decode_generate(content)
    assert got["meta_info"]["cached_tokens"] == expected["meta_info"]["cached_tokens"]
    old, new = expected["meta_info"]["hidden_states"], got["meta_info"]["hidden_states"]
    if old is None or not old or old[0] is None:
        assert new == old
        return None
    assert new[0].dtype == old[0].dtype == np.float32 and new[0].shape == old[0].shape
    assert np.array_equal(new[0].view(np.uint32), old[0].view(np.uint32))
    return old[0]


@CASES
@given(prefill=prefills(), spaced=st.booleans())
def test_the_fast_path_gives_the_msgspec_rows_bit_for_bit(prefill, spaced):
    text, rows = prefill
    decoded = assert_same(answer(text, spaced))
    if decoded is None:  # a number out of float64's range: no rows, in both
        assert any(math.isinf(as_float64(v)) for row in rows for v in row if v != "null")
        return
    expected = [[np.float32("nan") if v == "null" else reference(v) for v in row] for row in rows]
    expected = np.asarray(expected[0] if decoded.ndim == 1 else expected, dtype=np.float32).reshape(decoded.shape)
    assert np.array_equal(decoded.view(np.uint32), expected.view(np.uint32))


@pytest.mark.parametrize("number", HARD_NUMBERS)
def test_each_hard_number_alone_and_in_a_row(number):
    for prefill in (f"[{number}]", f"[[{number},{number}],[1,{number}]]", f"[[{number}]]"):
        assert_same(answer(prefill, spaced=False))


def test_a_real_sized_answer_takes_the_fast_path(monkeypatch):
    from alignprobe.probes import sglang_decode

    rows = np.random.default_rng(0).standard_normal((20, 300), dtype=np.float32)
    content = answer(json.dumps(rows.tolist(), separators=(",", ":")), spaced=False)
    monkeypatch.setattr(sglang_decode, "msgspec_answer", _refuse_slow_path(sglang_decode.msgspec_answer))
    decoded = decode_generate(content)["meta_info"]["hidden_states"][0]
    assert np.array_equal(decoded.view(np.uint32), rows.view(np.uint32))


def _refuse_slow_path(real):
    def fast_only(content, rows=None):
        assert rows is bytes, "fell back to the msgspec decoder"
        return real(content, rows)
    return fast_only


# Answers around a good prefill that a search for the key could be fooled by, and answers that are none.
ROWS = "[[1.5,2.5],[3.5,4.5]]"
TRICKY = [
    '{"meta_info":{"hidden_states":[%s]}}' % ROWS,
    '{"meta_info":{"cached_tokens":0,"hidden_states":[%s,[1,2]],"cached_tokens":7}}' % ROWS,
    '{"text":"\\"hidden_states\\":[[[9]]]","meta_info":{"hidden_states":[%s]}}' % ROWS,
    '{"x":{"a\\"hidden_states":[[9,9]]},"meta_info":{"hidden_states":[%s]}}' % ROWS,
    '{"x":{"a\\"hidden_states":[[]]},"meta_info":{"hidden_states":[[]]}}',
    '{"hidden_states":[[[7,7]]],"meta_info":{"hidden_states":[%s]}}' % ROWS,
    '{"meta_info":{"hidden_states":[%s]},"meta_info":{"hidden_states":[[[8,8]]]}}' % ROWS,
    '{"meta_info":{"hidden_states":[[[8,8]]]},"meta_info":{"hidden_states":[%s]}}' % ROWS,
    '{"meta_info":{"hidden_states":[%s],"hidden_states":[[[8,8]]]}}' % ROWS,
    '[{"meta_info":{"hidden_states":[%s]}}]' % ROWS,
    '[{"meta_info":{"hidden_states":[%s]}},{"meta_info":{}}]' % ROWS,
    '{"meta_info":{"hidden_states":[%s]},"x":[}' % ROWS,
    '{"meta_info":{"hidden_states":[%s]}} trailing' % ROWS,
    '{"meta_info":{"hidden_states":[%s]}' % ROWS,
    '{"meta_info":{"hidden_states":[%s],"cached_tokens":1.5}}' % ROWS,
    '{"meta_info":{"hidden_states":[%s],"cached_tokens":"3"}}' % ROWS,
    '{"meta_info":{"hidden_states":null}}',
    '{"meta_info":{"hidden_states":[]}}',
    '{"meta_info":{"hidden_states":[null]}}',
    '{"meta_info":{"hidden_states":[[]]}}',
    '{"meta_info":{"hidden_states":[[[]]]}}',
    '{"meta_info":{"hidden_states":[[[],[]]]}}',
    '{"meta_info":{"hidden_states":[[[1],[]]]}}',
    '{"meta_info":{"hidden_states":[[[1,2],[3]]]}}',
    '{"meta_info":{"hidden_states":[[[1,[2]],[3,4]]]}}',
    '{"meta_info":{"hidden_states":[[[[1],[2]],[[3],[4]]]]}}',
    '{"meta_info":{"hidden_states":[[[1,2],3]]}}',
    '{"meta_info":{"hidden_states":[[1,[2]]]}}',
    '{"meta_info":{"hidden_states":[[[1,"2"],[3,4]]]}}',
    '{"meta_info":{"hidden_states":[[[1,"]"],[3,4]]]}}',
    '{"meta_info":{"hidden_states":[[[1,true],[3,4]]]}}',
    '{"meta_info":{"hidden_states":[[[1,{"a":1}],[3,4]]]}}',
    '{"meta_info":{"hidden_states":[[[1,null],[3,4]]]}}',
    '{"meta_info":{"hidden_states":[[[1,NaN],[3,4]]]}}',
    '{"meta_info":{"hidden_states":[[[1,Infinity],[3,4]]]}}',
    '{"meta_info":{"hidden_states":[[[1,2]] [[3,4]]]}}',
    '{"meta_info":{"hidden_states":[[[1,2],,[3,4]]]}}',
    '{"meta_info":{"hidden_states":[[[1,2],[3,4],]]}}',
    '{"meta_info":{"hidden_states":[[[01,2],[3,4]]]}}',
    '{"meta_info":{"hidden_states":[[[1.,2],[3,4]]]}}',
    '{"meta_info":{"hidden_states":[[[+1,2],[3,4]]]}}',
    '{"meta_info":{"hidden_states":[[[1,2],[3,4]]}}',
    '{"meta_info":{"hidden_states":[[[1,2],[3,4]]]]}}',
    '{"meta_info":{"hidden_states" : [ [ [1 , 2] , [3,4] ] ]}}',
    '{"meta_info":{"hidden_states":[[[1,2],[3,4]]]}, "text": "\u00e9\\ud800"}',
    b'{"meta_info":{"hidden_states":[[[1,2],[3,4]]]},"text":"\xff"}',
    '{"meta_info":5}', '{"meta_info":null}', '{}', '[]', 'null', '', '{"meta_info":{"hidden_states":[',
    '{"meta_info":{"hidden_states":' + "[" * 5000 + "]" * 5000 + "}}",
]


@pytest.mark.parametrize("content", TRICKY)
def test_answers_a_search_for_the_key_could_be_fooled_by(content):
    assert_same(content if isinstance(content, bytes) else content.encode())


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20), st.floats(allow_nan=False, allow_infinity=False),
              st.text(max_size=4), st.sampled_from(['"hidden_states"', "[[", "]]", "],[", "[1,2]"])),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["hidden_states", "meta_info", "cached_tokens", "a", 'x"hidden_states']), inner, max_size=3),
    max_leaves=30,
)


@CASES
@given(document=json_values, spaced=st.booleans())
def test_any_json_decodes_as_msgspec_decodes_it(document, spaced):
    separators = (", ", ": ") if spaced else (",", ":")
    assert_same(json.dumps(document, separators=separators).encode())
