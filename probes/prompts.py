"""The prompts a capture runs: token ids with a stable sample id, loaded from JSONL.

One JSON object a line, in one of three forms:

    {"id": "a1", "text": "plain text"}                               tokenized with the model's tokenizer
    {"id": "a2", "messages": [{"role": "user", "content": "..."}]}   the tokenizer's chat template applied
    {"id": "a3", "input_ids": [1, 2, 3]}                            used as given

``id`` is optional. Without it the sample id is a hash of the token ids (see :func:`token_sample_id`),
so two systems that see the same tokens name the sample the same way, and a foreign dump imported
without ids (alignprobe.importers) pairs with a capture of the same prompts.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
import os
from typing import Any, Iterable, Sequence

from alignprobe.errors import BadInput
from alignprobe.safe_json import loads_json
from alignprobe.safe_paths import input_file

KIND_TEXT, KIND_MESSAGES, KIND_TOKENS = "text", "messages", "input_ids"
KINDS = (KIND_TEXT, KIND_MESSAGES, KIND_TOKENS)


@dataclasses.dataclass(frozen=True)
class Prompt:
    """One sample to capture: its id (how two dumps pair it) and its token ids."""

    sample_id: str
    token_ids: list[int]


@dataclasses.dataclass
class PromptSet:
    """Prompts loaded from a file, with what a dump's provenance should say about them."""

    prompts: list[Prompt]
    source: str
    kinds: dict[str, int]  # how many lines of each form
    chat_template_sha256: str = ""  # sha256 of the chat template applied, "" when none was

    def provenance(self) -> dict[str, Any]:
        record = {"prompts": self.source, "prompt_kinds": self.kinds, "num_prompts": len(self.prompts)}
        if self.chat_template_sha256:
            record["chat_template_sha256"] = self.chat_template_sha256
        return record

    def __len__(self) -> int:
        return len(self.prompts)

    def __iter__(self):
        return iter(self.prompts)

    def __getitem__(self, index):
        return self.prompts[index]


def token_sample_id(token_ids: Sequence[int]) -> str:
    """The id of a sample that came without one: ``tok-`` and 16 hex digits of sha256 of its tokens."""
    digest = hashlib.sha256(",".join(str(int(t)) for t in token_ids).encode()).hexdigest()
    return f"tok-{digest[:16]}"


class ContentIds:
    """Ids for samples without one, one sample at a time: the k-th repeat of the same tokens gets ``#k``.

    Both a capture and an importer number repeats in file order, so repeats pair up too.
    """

    def __init__(self) -> None:
        self._seen: collections.Counter[str] = collections.Counter()

    def __call__(self, token_ids: Sequence[int]) -> str:
        base = token_sample_id(token_ids)
        repeat = self._seen[base]
        self._seen[base] += 1
        return f"{base}#{repeat}" if repeat else base


def content_ids(token_lists: Iterable[Sequence[int]]) -> list[str]:
    """:class:`ContentIds` over a whole list."""
    assign = ContentIds()
    return [assign(tokens) for tokens in token_lists]


def chat_template_sha256(tokenizer) -> str:
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, dict):  # several named templates: hash them all, in a stable order
        template = json.dumps(template, sort_keys=True)
    return hashlib.sha256(template.encode()).hexdigest() if template else ""


def load_prompts(path: str | os.PathLike, tokenizer=None, *, limit: int | None = None) -> PromptSet:
    """Read a JSONL prompt file. ``tokenizer`` is needed for text and chat lines only.

    Chat lines get the generation prompt appended when their last message is not the assistant's
    (a question to answer), and none when it is (a finished conversation, as training data is).
    """
    path = input_file(os.fspath(path), "prompt file")
    parsed: list[tuple[int, str | None, list[int]]] = []
    kinds: collections.Counter[str] = collections.Counter()
    used_template = False
    with open(path, "rb") as fh:
        for line_number, raw_line in enumerate(fh, start=1):
            where = f"{path}:{line_number}"
            try:
                line = raw_line.decode("utf-8")
            except UnicodeDecodeError:
                raise BadInput(f"{where}: not UTF-8 text; a prompt file is JSONL, one JSON object a line") from None
            if not line.strip():
                continue
            record = _parse_line(line, where)
            kind = _kind_of(record, where)
            kinds[kind] += 1
            used_template |= kind == KIND_MESSAGES
            token_ids = _tokenize(record, kind, tokenizer, where)
            if not token_ids:
                raise BadInput(f"{where}: the prompt has no tokens; remove the line or give it content")
            parsed.append((line_number, _given_id(record, where), token_ids))
            if limit is not None and len(parsed) >= limit:
                break
    if not parsed:
        raise BadInput(f"{path}: holds no prompts (one JSON object a line)")
    prompts = _with_ids(parsed, path)
    template_hash = chat_template_sha256(tokenizer) if used_template else ""
    return PromptSet(prompts, path, dict(kinds), template_hash)


def prompts_from_token_lists(token_lists: Sequence[Sequence[int]], ids: Sequence[str] | None = None) -> list[Prompt]:
    """Prompts from token lists already at hand (ids default to :func:`content_ids`)."""
    ids = list(ids) if ids is not None else content_ids(token_lists)
    if len(ids) != len(token_lists):
        raise ValueError(f"{len(ids)} ids for {len(token_lists)} prompts")
    return [Prompt(str(i), [int(t) for t in tokens]) for i, tokens in zip(ids, token_lists)]


# -- one line ------------------------------------------------------------------------------------


def _parse_line(line: str, where: str) -> dict:
    record = loads_json(line, where)
    if not isinstance(record, dict):
        raise BadInput(f"{where}: expected a JSON object with text, messages or input_ids, got {type(record).__name__}")
    return record


def _kind_of(record: dict, where: str) -> str:
    present = [k for k in KINDS if k in record]
    if len(present) != 1:
        what = "none" if not present else " and ".join(present)
        raise BadInput(f"{where}: a prompt has exactly one of text, messages or input_ids (this one has {what})")
    return present[0]


def _given_id(record: dict, where: str) -> str | None:
    if "id" not in record:
        return None
    value = record["id"]
    if isinstance(value, bool) or not isinstance(value, (str, int)) or str(value) == "":
        raise BadInput(f"{where}: id must be a non-empty string or an integer, got {value!r}")
    return str(value)


def _tokenize(record: dict, kind: str, tokenizer, where: str) -> list[int]:
    value = record[kind]
    if kind == KIND_TOKENS:
        if not isinstance(value, list) or not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in value):
            raise BadInput(f"{where}: input_ids must be a list of non-negative integers")
        return list(value)
    if tokenizer is None:
        raise BadInput(f"{where}: a {kind} prompt needs a tokenizer, and the model has none; give input_ids instead")
    if kind == KIND_TEXT:
        if not isinstance(value, str):
            raise BadInput(f"{where}: text must be a string, got {type(value).__name__}")
        return list(tokenizer(value)["input_ids"])
    return _apply_chat_template(value, tokenizer, where)


def _apply_chat_template(messages, tokenizer, where: str) -> list[int]:
    if not isinstance(messages, list) or not messages:
        raise BadInput(f"{where}: messages must be a non-empty list of {{role, content}} objects")
    for m in messages:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or "content" not in m:
            raise BadInput(f"{where}: every message needs a string role and a content, got {m!r}")
    if not getattr(tokenizer, "chat_template", None):
        raise BadInput(f"{where}: a messages prompt needs a chat template, and the tokenizer has none; give text instead")
    add_generation_prompt = messages[-1]["role"] != "assistant"
    try:
        out = tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=add_generation_prompt)
    except Exception as exc:  # noqa: BLE001 - a template error is the user's data or template
        raise BadInput(f"{where}: the chat template failed on these messages ({type(exc).__name__}: {exc})") from None
    # transformers 5 returns a BatchEncoding, 4.x a plain list
    ids = out["input_ids"] if hasattr(out, "keys") else out
    return [int(t) for t in ids]


def _with_ids(parsed: list[tuple[int, str | None, list[int]]], path: str) -> list[Prompt]:
    fallback = iter(content_ids([tokens for _, given, tokens in parsed if given is None]))
    first_line: dict[str, int] = {}
    prompts = []
    for line_number, given, tokens in parsed:
        sample_id = given if given is not None else next(fallback)
        if sample_id in first_line:
            raise BadInput(
                f"{path}:{line_number}: id {sample_id!r} was already used on line {first_line[sample_id]}; ids must be unique"
            )
        first_line[sample_id] = line_number
        prompts.append(Prompt(sample_id, tokens))
    return prompts
