"""Prompt files: the three forms, stable ids, and a one-line error naming the line for each bad input."""

from __future__ import annotations

import hashlib
import json

import pytest

from alignprobe.errors import BadInput
from alignprobe.probes.prompts import content_ids, load_prompts, token_sample_id
from alignprobe.demo.tiny_tokenizer import CHAT_TEMPLATE, tiny_tokenizer


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_tokenizer()


def write_lines(tmp_path, lines, name="p.jsonl"):
    path = tmp_path / name
    path.write_text("\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n")
    return str(path)


def test_three_forms_tokenize_as_the_tokenizer_says(tmp_path, tokenizer):
    path = write_lines(
        tmp_path,
        [
            {"id": "t", "text": "héllo"},
            "",  # blank lines are skipped
            {"id": 7, "messages": [{"role": "user", "content": "hi"}]},
            {"id": "done", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]},
            {"id": "ids", "input_ids": [5, 6, 7]},
        ],
    )
    ps = load_prompts(path, tokenizer)
    by_id = {p.sample_id: p.token_ids for p in ps}
    assert by_id["t"] == list("héllo".encode())  # byte-level: one token a byte
    special = {t: tokenizer.convert_tokens_to_ids(t) for t in ("<|bos|>", "<|user|>", "<|end|>", "<|assistant|>")}
    assert by_id["7"] == [special["<|bos|>"], special["<|user|>"], ord("h"), ord("i"), special["<|end|>"],
                          special["<|assistant|>"]]  # a question: generation prompt appended
    assert by_id["done"][-3:] == [ord("y"), ord("o"), special["<|end|>"]]  # a finished chat: none appended
    assert by_id["ids"] == [5, 6, 7]
    assert ps.kinds == {"text": 1, "messages": 2, "input_ids": 1}
    assert ps.chat_template_sha256 == hashlib.sha256(CHAT_TEMPLATE.encode()).hexdigest()
    assert ps.provenance()["chat_template_sha256"] == ps.chat_template_sha256


def test_ids_default_to_a_hash_of_the_tokens_and_repeats_are_numbered(tmp_path, tokenizer):
    path = write_lines(tmp_path, [{"text": "ab"}, {"input_ids": [97, 98]}, {"input_ids": [1]}])
    ids = [p.sample_id for p in load_prompts(path, tokenizer)]
    base = "tok-" + hashlib.sha256(b"97,98").hexdigest()[:16]
    assert ids == [base, base + "#1", "tok-" + hashlib.sha256(b"1").hexdigest()[:16]]
    assert token_sample_id([97, 98]) == base
    assert content_ids([[97, 98], [1], [97, 98]]) == [base, ids[2], base + "#1"]
    # stable: the same file gives the same ids again, and no chat template was used
    again = load_prompts(path, tokenizer)
    assert [p.sample_id for p in again] == ids and again.chat_template_sha256 == ""


def test_limit_reads_only_the_first_prompts(tmp_path):
    path = write_lines(tmp_path, [{"input_ids": [i]} for i in range(10)])
    assert [p.token_ids for p in load_prompts(path, limit=3)] == [[0], [1], [2]]


@pytest.mark.parametrize(
    "bad_line, message",
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "expected a JSON object"),
        ({"id": "x"}, "exactly one of text, messages or input_ids"),
        ({"text": "a", "input_ids": [1]}, "text and input_ids"),
        ({"input_ids": [1, -2]}, "non-negative integers"),
        ({"input_ids": "12"}, "non-negative integers"),
        ({"input_ids": []}, "no tokens"),
        ({"text": 5}, "text must be a string"),
        ({"messages": []}, "non-empty list"),
        ({"messages": [{"content": "no role"}]}, "string role"),
        ({"id": ["a"], "input_ids": [1]}, "id must be"),
        ({"id": "", "input_ids": [1]}, "id must be"),
    ],
)
def test_bad_line_names_its_line_number(tmp_path, tokenizer, bad_line, message):
    path = write_lines(tmp_path, [{"input_ids": [1]}, bad_line])
    with pytest.raises(BadInput, match=message) as info:
        load_prompts(path, tokenizer)
    assert f"{path}:2:" in str(info.value) and "\n" not in str(info.value)


def test_duplicate_ids_name_both_lines(tmp_path):
    path = write_lines(tmp_path, [{"id": "a", "input_ids": [1]}, {"id": "b", "input_ids": [2]}, {"id": "a", "input_ids": [3]}])
    with pytest.raises(BadInput, match=r":3: id 'a' was already used on line 1"):
        load_prompts(path)


def test_text_without_tokenizer_says_to_give_input_ids(tmp_path):
    path = write_lines(tmp_path, [{"text": "hello"}])
    with pytest.raises(BadInput, match=r":1: a text prompt needs a tokenizer.*give input_ids"):
        load_prompts(path, None)


def test_messages_without_chat_template(tmp_path, tokenizer):
    bare = tiny_tokenizer()
    bare.chat_template = None
    path = write_lines(tmp_path, [{"messages": [{"role": "user", "content": "x"}]}])
    with pytest.raises(BadInput, match="needs a chat template, and the tokenizer has none"):
        load_prompts(path, bare)


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(BadInput, match="no such prompt file"):
        load_prompts(tmp_path / "nope.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n\n")
    with pytest.raises(BadInput, match="holds no prompts"):
        load_prompts(tmp_path / "empty.jsonl")


def test_tiny_tokenizer_is_byte_level_with_special_tokens_after_the_bytes(tokenizer):
    text = "aZ ~\n\t€ü"
    ids = tokenizer(text)["input_ids"]
    assert ids == list(text.encode())  # token id == byte value, for ASCII, controls and multi-byte UTF-8
    assert tokenizer.decode(ids) == text
    assert [tokenizer.convert_tokens_to_ids(t) for t in ("<|pad|>", "<|end|>")] == [256, 262]
    assert tokenizer.pad_token_id == 256 and len(tokenizer) == 263
