"""Hostile JSON (and TOML) wherever alignprobe reads it: prompts, policy, drafter/target configs,
result.json, dump provenance, server replies. Every reader goes through alignprobe.safe_json."""

from __future__ import annotations

import json

import h5py
import httpx
import pytest
from hypothesis import given, strategies as st

from alignprobe.errors import BadInput
from alignprobe.safe_json import MAX_DEPTH, loads_json
from bad_input_helpers import FUZZ, assert_refused, invoke
from dump_helpers import H, claims, random_samples, write


def nested(depth: int, open_: str, close: str, core: str = "1") -> str:
    return open_ * depth + core + close * depth


# Texts that are JSON-shaped but hostile: too deep, non-finite, too large, or not text at all.
hostile_json = st.one_of(
    st.integers(MAX_DEPTH + 1, 20000).map(lambda d: nested(d, "[", "]")),
    st.integers(MAX_DEPTH + 1, 5000).map(lambda d: nested(d, '{"a":', "}")),
    st.integers(MAX_DEPTH + 1, 3000).map(lambda d: '{"x": ' + nested(d, "[", "]") + "}"),
    st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "-1e400"]).map(lambda v: '{"drift_fail_rel_rms": %s}' % v),
    st.integers(310, 5000).map(lambda n: '{"drift_fail_rel_rms": ' + "9" * n + "}"),
    st.binary(min_size=1, max_size=64).map(lambda b: b"\xff\xfe" + b),  # binary junk, not UTF-8
    st.text(min_size=1, max_size=40).filter(lambda t: _not_json(t)),
)


def _not_json(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return True
    return False


def as_bytes(text) -> bytes:
    return text if isinstance(text, bytes) else text.encode("utf-8")


@FUZZ
@given(text=hostile_json)
def test_loader_refuses_in_one_line(text):
    with pytest.raises(BadInput) as info:
        loads_json(as_bytes(text), "where")
    assert "\n" not in str(info.value) and str(info.value).startswith("where")


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    folder = tmp_path_factory.mktemp("dumps")
    a = write(folder / "a.h5", random_samples([5, 7], {"aux": 3 * H, "final": H}), claims())
    b = write(folder / "b.h5", random_samples([5, 7], {"aux": 3 * H, "final": H}), claims())
    return a, b


@pytest.fixture(scope="module")
def speculators_dir(tmp_path_factory):
    """A speculators folder ([S, 4, H]: 3 aux + the pre-norm final), as the wheel smoke test makes."""
    import torch
    from safetensors.torch import save_file

    folder = tmp_path_factory.mktemp("spec") / "hidden_states"
    folder.mkdir()
    g = torch.Generator().manual_seed(0)
    for i in range(2):
        save_file({"hidden_states": torch.randn(5, 4, 16, generator=g),
                   "token_ids": torch.randint(0, 100, (5,), generator=g)}, str(folder / f"hs_{i}.safetensors"))
    return folder


@pytest.fixture(scope="module")
def result_json(dumps, tmp_path_factory):
    out = tmp_path_factory.mktemp("result") / "result.json"
    assert_refused.__globals__["invoke"](["compare", "--train-dump", dumps[0], "--serve-dump", dumps[1], "--json", out])
    return out


@FUZZ
@given(text=hostile_json, reader=st.sampled_from(["prompts", "policy.json", "policy.toml", "drafter", "result"]))
def test_every_json_reader_refuses_in_one_line(tmp_path_factory, dumps, speculators_dir, text, reader):
    folder = tmp_path_factory.mktemp("in")
    path = folder / ("input.toml" if reader == "policy.toml" else "input.json")
    data = as_bytes(text)
    if reader == "policy.toml":
        data = b"drift_fail_rel_rms = " + data  # an inline value (arrays nest like JSON)
    path.write_bytes(data)
    a, b = dumps
    args = {
        "prompts": ["capture", "sglang", "--url", "http://127.0.0.1:9", "--prompts", path, "--out", folder / "o.h5"],
        "policy.json": ["compare", "--train-dump", a, "--serve-dump", b, "--policy", path],
        "policy.toml": ["compare", "--train-dump", a, "--serve-dump", b, "--policy", path],
        "drafter": ["import", folder, "--drafter-config", path, "--out", folder / "x" / "o.h5"],
        "result": ["report", path, "--out", folder / "report"],
    }[reader]
    if reader == "drafter":  # a speculators folder beside it, so the config is what is read
        args = ["import", speculators_dir, "--drafter-config", path, "--num-layers", "8", "--out", folder / "o.h5"]
    assert_refused(args, [path, a, b, speculators_dir])


@FUZZ
@given(depth=st.integers(MAX_DEPTH + 1, 3000))
def test_deep_provenance_in_a_dump_is_one_line(tmp_path_factory, dumps, depth):
    path = tmp_path_factory.mktemp("prov") / "deep.h5"
    path.write_bytes(open(dumps[0], "rb").read())
    with h5py.File(path, "r+") as f:
        f.attrs["provenance"] = '{"capture": ' + nested(depth, "[", "]") + "}"
    assert_refused(["inspect", path], [path], match="nested deeper")
    assert_refused(["compare", "--train-dump", path, "--serve-dump", dumps[1]], [path, dumps[1]])


@FUZZ
@given(body=hostile_json)
def test_server_replies_are_one_line(body):
    from alignprobe.probes.sglang_http import HttpBackend

    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=as_bytes(body)))
    backend = HttpBackend("http://127.0.0.1:1", client=httpx.Client(transport=transport), retries=0)
    with pytest.raises(BadInput) as info:
        backend.generate([1, 2, 3], 0)
    assert "\n" not in str(info.value)


def test_target_config_and_result_types(tmp_path, speculators_dir, result_json):
    deep = tmp_path / "config.json"
    deep.write_text(nested(5000, "[", "]"))
    assert_refused(["import", speculators_dir, "--target-config", deep, "--out", tmp_path / "o.h5"], [deep, speculators_dir], match="nested")
    # a valid result.json still renders (the loader is not too strict)
    rendered = invoke(["report", result_json, "--out", tmp_path / "r"])
    assert rendered.exit_code == 0, rendered.stderr


@FUZZ
@given(body=hostile_json)
def test_vllm_replies_are_one_line(body):
    from alignprobe.probes.prompts import Prompt
    from alignprobe.probes.vllm_drive import request_files

    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=as_bytes(body)))
    with pytest.raises(BadInput) as info:
        request_files("http://127.0.0.1:1", "m", [Prompt("a", [1, 2])], client=httpx.Client(transport=transport))
    assert "\n" not in str(info.value)


# Files alignprobe wrote itself (journals, manifests, its driver's answer, its own result records) and
# the stdlib call the checked reader wraps; every other JSON from outside is read by safe_json.
OWN_JSON = {"alignprobe/safe_json.py", "alignprobe/audit/journal.py", "alignprobe/dump/planned_writer.py",
            "alignprobe/dump/writer.py", "alignprobe/compare/result.py",
            "alignprobe/audit/result.py", "alignprobe/cli/engine_args.py", "probes/engine_process.py"}


def test_no_reader_of_outside_json_bypasses_safe_json():
    import ast
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[2]
    bypass = []
    for path in sorted([*root.joinpath("alignprobe").rglob("*.py"), *root.joinpath("probes").rglob("*.py")]):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(("alignprobe/probes/", "probes/engine_side/")) or rel in OWN_JSON:
            continue  # the symlink to probes/; the drivers run inside the engine's Python
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("load", "loads")
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "json"):
                bypass.append(f"{rel}:{node.lineno}")
    assert not bypass, f"JSON read without alignprobe.safe_json: {bypass}"
