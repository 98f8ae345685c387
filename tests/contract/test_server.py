"""Servers that never finish: 500 forever with a huge --retries (the total retry time is capped),
one byte every half second (--timeout bounds the whole answer); malformed server URLs. Loopback
only, every case bounded in time."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import given, strategies as st

from bad_input_helpers import FUZZ, LoopbackServer as _Server, assert_refused


def always_500(handler):
    body = b'{"error": {"message": "overloaded"}}'
    handler.send_response(500)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def drip(handler):
    body = json.dumps({"version": "0.5.23", "model_path": "m"}).encode() * 50
    handler.send_response(200)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    try:
        for byte in body:
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()
            time.sleep(0.5)
    except (BrokenPipeError, ConnectionResetError):
        pass


@pytest.fixture
def prompts(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"input_ids": [1, 2, 3]}) + "\n")
    return path


def capture_args(url, prompts, out, *extra):
    return ["capture", "sglang", "--url", url, "--prompts", prompts, "--out", out, "--num-layers", "4",
            "--hidden-size", "8", "--layer-ids", "1", "--quiet", *extra]


def test_500_forever_with_huge_retries_stops_within_the_budget(tmp_path, prompts, monkeypatch):
    from alignprobe.probes import sglang_http

    monkeypatch.setattr(sglang_http, "RETRY_BUDGET_MIN", 2.0)  # the budget's floor, shortened for the test
    server = _Server(always_500)
    try:
        start = time.monotonic()
        line = assert_refused(capture_args(server.url, prompts, tmp_path / "o.h5", "--timeout", "0.3",
                                           "--retries", "1000000000"), [prompts], match="HTTP 500")
        elapsed = time.monotonic() - start
    finally:
        server.close()
    assert elapsed < 2.0 + 1.0, elapsed  # the budget, plus the slack of one request
    assert 2 <= server.requests < 10 and "attempts" in line


def test_a_dripping_server_is_bounded_by_the_timeout(tmp_path, prompts):
    server = _Server(drip)
    try:
        start = time.monotonic()
        assert_refused(capture_args(server.url, prompts, tmp_path / "o.h5", "--timeout", "1", "--retries", "1"),
                       [prompts], match="no answer within 1 s")
        elapsed = time.monotonic() - start
    finally:
        server.close()
    # two attempts of at most 1 s each (plus a chunk's wait and the backoff between them)
    assert elapsed < 2 * (1 + 0.5) + 0.5 + 1.0, elapsed


malformed_urls = st.one_of(
    st.sampled_from(["http://[::1", "http://[::1:80", "http://", "https://", "http://:8080", "http:///x",
                     "http://host:port", "http://h:99999999", "http://h:-1", "ftp://127.0.0.1", "127.0.0.1:30000",
                     "localhost", "", " http://x", "http://[fe80::1%eth0", "http://a b"]),
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=12).map(lambda t: "http://[" + t),
    st.text(st.characters(codec="ascii", categories=("L",)), min_size=1, max_size=6).map(lambda t: f"http://h:{t}"),
    st.text(max_size=20).filter(lambda t: not t.startswith(("http://", "https://"))),
)


@FUZZ
@given(url=malformed_urls, command=st.sampled_from(["sglang", "vllm"]))
def test_malformed_urls_are_one_line(tmp_path_factory, url, command):
    folder = tmp_path_factory.mktemp("u")
    prompts = folder / "p.jsonl"
    prompts.write_text(json.dumps({"input_ids": [1, 2, 3]}) + "\n")
    if command == "sglang":
        args = capture_args(url, prompts, folder / "o.h5", "--retries", "0", "--timeout", "1")
    else:
        args = ["capture", "vllm", "--url", url, "--model", "m", "--layer-ids", "1,2", "--prompts", prompts,
                "--num-layers", "4", "--out", folder / "o.h5", "--timeout", "1"]
    assert_refused(args, [prompts])
