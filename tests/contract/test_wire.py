"""What a server on the wire can get wrong, for `capture sglang` and `capture vllm --url`: redirects,
answers broken off mid-body or not HTTP, a server that hangs or refuses connections, 5xx, non-JSON,
JSON of the wrong shape (hidden states missing, ragged, wrong width, strings, too deep, NaN), and for
vLLM a hidden_states_path that is a FIFO, a device, a folder, holds a NUL byte, or never appears.
Each is one line, exit 2, within its time bound; the prompts are never changed."""

from __future__ import annotations

import json
import os
import socket
import time

import pytest
import torch
from hypothesis import given, strategies as st
from safetensors.torch import save_file

from bad_input_helpers import FUZZ, LoopbackServer, assert_one_line, assert_refused, invoke

WIDTH = 8  # --hidden-size of the sglang captures: one final state a token (no EAGLE-3 aux capture)
TOKENS = [1, 2, 3]


def answering(reply):
    """A behaviour for LoopbackServer: read the request body, then ``reply(handler)``; a client that
    already gave up (the timeout cases) is not the server's problem."""
    def behaviour(handler):
        length = int(handler.headers.get("Content-Length") or 0)
        handler.rfile.read(length)
        if handler.path in ("/server_info", "/get_server_info"):
            return send(handler, 404, b'{"detail": "Not Found"}')
        try:
            reply(handler)
        except (BrokenPipeError, ConnectionResetError):
            pass
    return behaviour


def send(handler, status, body: bytes, headers=()):
    handler.send_response(status)
    for key, value in headers:
        handler.send_header(key, value)
    if not any(key.lower() in ("content-length", "transfer-encoding") for key, _ in headers):
        handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def cut_off(body: bytes):
    """Claim a long body, send part of it, close: a server that crashed mid-answer."""
    def reply(handler):
        handler.send_response(200)
        handler.send_header("Content-Length", str(len(body) + 1000))
        handler.end_headers()
        handler.wfile.write(body)
        handler.wfile.flush()
        handler.close_connection = True
        handler.connection.shutdown(socket.SHUT_RDWR)
    return reply


def slam(handler):
    handler.close_connection = True
    handler.connection.shutdown(socket.SHUT_RDWR)


def hang(handler):
    time.sleep(5)


def sglang_answer(hidden_states) -> bytes:
    meta = {"id": "x", "prompt_tokens": len(TOKENS), "completion_tokens": 1, "cached_tokens": 0,
            "hidden_states": hidden_states}
    return json.dumps({"text": "a", "output_ids": [5], "meta_info": meta}).encode()


GOOD_ROWS = [[[0.25 * (i + j) for j in range(WIDTH)] for i in range(len(TOKENS))]]
REDIRECT = [("Location", "http://127.0.0.1:1/generate")]

# The transport and HTTP faults both commands share: (reply, words the one line must hold).
TRANSPORT = {
    "redirect": (lambda h: send(h, 302, b"", REDIRECT), "a redirect to http://127.0.0.1:1/generate"),
    "permanent redirect": (lambda h: send(h, 308, b"", REDIRECT), "HTTP 308, a redirect"),
    "broken off mid-body": (cut_off(b'{"meta_info": {"hidden_states": [[[0.1,'), "broke off its answer"),
    "closed without an answer": (slam, "broke off its answer"),
    "bad chunked encoding": (lambda h: send(h, 200, b"zz\r\nabc\r\n", [("Transfer-Encoding", "chunked")]),
                             "broke off its answer"),
    "hangs": (hang, "no answer within 1 s"),
    "500": (lambda h: send(h, 500, b"Internal Server Error"), "HTTP 500"),
    "html": (lambda h: send(h, 200, b"<html><body>login</body></html>"), "JSON"),
    "gzip that is not": (lambda h: send(h, 200, b"plain", [("Content-Encoding", "gzip")]), "malformed"),
}

# Answers shaped wrong for SGLang's /generate: (hidden_states or raw bytes, words of the line).
SGLANG_SHAPES = {
    "no hidden_states": (json.dumps({"meta_info": {"id": "x"}}).encode(), "returned no hidden states"),
    "empty list": ([], "hidden_states is empty"),
    "ragged rows": ([[[0.1] * WIDTH, [0.1] * (WIDTH - 1), [0.1] * WIDTH]], "not a [tokens][width] list"),
    "wrong width": ([[[0.1] * (WIDTH + 3)] * 3], "not a multiple of the hidden size"),
    "strings": ([[["0.1"] * WIDTH] * 3], "not a [tokens][width] list"),
    "one row too deep": ([[[[0.1] * WIDTH] * 3]], "not a [tokens][width] list"),
    "a flat vector": ([[0.1] * WIDTH], "expected [tokens, width]"),
    "more rows than tokens": ([[[0.1] * WIDTH] * 5], "5 prefill rows for 3 prompt tokens"),
    "a dict": ({"rows": 1}, "not JSON shaped like an SGLang /generate answer"),
    "all NaN (null)": ([[[None] * WIDTH] * 3], "no sample came back with a finite row"),
    "NaN literal": (sglang_answer(GOOD_ROWS).replace(b"0.25", b"NaN"), "not JSON shaped"),
    "nested 100000 deep": (b'{"meta_info": {"hidden_states": ' + b"[" * 100000 + b"]" * 100000 + b"}}", "not JSON shaped"),
}


class Replying:
    """One loopback server for the whole module (starting and stopping one costs half a second);
    each test sets ``reply``."""

    def __init__(self):
        self.reply = None
        self.server = LoopbackServer(answering(lambda handler: self.reply(handler)))
        self.url = self.server.url


@pytest.fixture(scope="module")
def server():
    replying = Replying()
    yield replying
    replying.server.close()


@pytest.fixture
def prompts(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"input_ids": TOKENS}) + "\n")
    return path


def sglang_args(url, prompts, out):
    return ["capture", "sglang", "--url", url, "--prompts", prompts, "--out", out, "--num-layers", "4",
            "--hidden-size", str(WIDTH), "--layer-ids", "1", "--quiet", "--timeout", "1", "--retries", "0"]


def vllm_args(url, prompts, out):
    return ["capture", "vllm", "--url", url, "--model", "m", "--prompts", prompts, "--out", out,
            "--num-layers", "4", "--layer-ids", "1,2", "--quiet", "--timeout", "1"]


def refused_within(args, inputs, match, seconds):
    start = time.monotonic()
    line = assert_refused(args, inputs, match=match)
    assert time.monotonic() - start < seconds, line
    return line


@pytest.mark.parametrize("command", ["sglang", "vllm"])
@pytest.mark.parametrize("fault", sorted(TRANSPORT))
def test_transport_faults_are_one_line(tmp_path, server, prompts, command, fault):
    server.reply, match = TRANSPORT[fault]
    args = (sglang_args if command == "sglang" else vllm_args)(server.url, prompts, tmp_path / "o.h5")
    refused_within(args, [prompts], match if command == "sglang" or "redirect" not in fault else "a redirect",
                   seconds=8)
    assert not (tmp_path / "o.h5").exists()


def test_a_refused_connection_says_so(tmp_path, prompts):
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens on it now
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for args in (sglang_args(f"http://127.0.0.1:{port}", prompts, tmp_path / "o.h5"),
                 vllm_args(f"http://127.0.0.1:{port}", prompts, tmp_path / "o.h5")):
        refused_within(args, [prompts], "cannot reach", seconds=5)


@pytest.mark.parametrize("shape", sorted(SGLANG_SHAPES))
def test_sglang_answers_of_the_wrong_shape(tmp_path, server, prompts, shape):
    payload, match = SGLANG_SHAPES[shape]
    body = payload if isinstance(payload, bytes) else sglang_answer(payload)
    server.reply = lambda h: send(h, 200, body)
    refused_within(sglang_args(server.url, prompts, tmp_path / "o.h5"), [prompts], match, seconds=8)


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20), st.floats(allow_nan=False, allow_infinity=False),
              st.text(max_size=4)),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=30,
)


@FUZZ
@given(hidden_states=json_values)
def test_any_json_as_hidden_states_is_captured_or_one_line(tmp_path_factory, server, hidden_states):
    folder = tmp_path_factory.mktemp("w")
    prompts = folder / "p.jsonl"
    prompts.write_text(json.dumps({"input_ids": TOKENS}) + "\n")
    body = sglang_answer(hidden_states)
    server.reply = lambda h: send(h, 200, body)
    result = invoke(sglang_args(server.url, prompts, folder / "o.h5"))
    if result.exit_code != 0:  # a shape that happens to be rows of numbers 8 wide is a capture
        assert_one_line(result)


# -- vLLM: the file the answer names --------------------------------------------------------------

def vllm_answer(path) -> bytes:
    return json.dumps({"id": "c", "choices": [{"text": "a", "prompt_token_ids": TOKENS}],
                       "kv_transfer_params": {"hidden_states_path": path}}).encode()


@pytest.fixture
def files(tmp_path):
    good = tmp_path / "good.safetensors"
    save_file({"hidden_states": torch.randn(3, 2, 8), "token_ids": torch.tensor(TOKENS)}, str(good))
    fifo = tmp_path / "fifo.safetensors"
    os.mkfifo(fifo)
    locked_by_fifo = tmp_path / "lockfifo.safetensors"
    save_file({"hidden_states": torch.randn(3, 2, 8), "token_ids": torch.tensor(TOKENS)}, str(locked_by_fifo))
    os.mkfifo(str(locked_by_fifo) + ".lock")
    folder = tmp_path / "folder.safetensors"
    folder.mkdir()
    return {"good": good, "fifo": fifo, "lock fifo": locked_by_fifo, "folder": folder}


VLLM_PATHS = {
    # a FIFO opened for reading waits for a writer forever: it hung the capture
    "fifo": (lambda f: f["fifo"], "is a FIFO, not a regular file"),
    "lock file a fifo": (lambda f: f["lock fifo"], "lock file is a FIFO"),
    "folder": (lambda f: f["folder"], "is a folder, not a regular file"),
    "/dev/zero": (lambda f: "/dev/zero", "is a device or socket"),
    # a NUL byte: os.path.exists says False, so the capture waited 60 s for a file no name can hold
    "NUL byte": (lambda f: f"{f['good']}\x00x", "holds a NUL byte"),
    "never written": (lambda f: str(f["good"]) + ".gone", "not written within 1 s"),
    "relative": (lambda f: "nowhere/req.safetensors", "absolute shared_storage_path"),
}


@pytest.mark.parametrize("case", sorted(VLLM_PATHS))
def test_vllm_hidden_state_paths_that_cannot_be_read(tmp_path, server, prompts, files, case):
    pick, match = VLLM_PATHS[case]
    body = vllm_answer(os.fspath(pick(files)))
    server.reply = lambda h: send(h, 200, body)
    # the file wait is bounded by --timeout (1 s here); it was a fixed 60 s
    refused_within(vllm_args(server.url, prompts, tmp_path / "o.h5"), [prompts, files["good"]], match, seconds=6)


def test_vllm_a_good_answer_still_captures(tmp_path, server, prompts, files):
    body = vllm_answer(os.fspath(files["good"]))
    server.reply = lambda h: send(h, 200, body)
    result = invoke(vllm_args(server.url, prompts, tmp_path / "o.h5"))
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "o.h5").is_file()
