"""probes/http_request.py: a checked URL, a bounded whole answer, and one line for each way a request fails."""

import socket

import httpx
import pytest

from alignprobe.errors import BadInput
from alignprobe.probes.http_request import check_health, http_failure
from bad_input_helpers import LoopbackServer


def _ok(handler):
    handler.send_response(200)
    handler.send_header("Content-Length", "0")
    handler.end_headers()


def _slam(handler):
    handler.close_connection = True
    handler.connection.shutdown(socket.SHUT_RDWR)


@pytest.mark.parametrize("behaviour, said", [(_ok, None), (_slam, "broke off its answer")])
def test_health_of_a_server_that_answers_or_breaks_off(behaviour, said):
    # A server that was reached but closed the connection once read "cannot reach ... is it running?"
    server = LoopbackServer(behaviour)
    try:
        if said is None:
            check_health(server.url, "SGLang", timeout=5)
        else:
            with pytest.raises(BadInput, match=said):
                check_health(server.url, "SGLang", timeout=5)
    finally:
        server.close()


def test_health_of_nothing_listening_cannot_reach():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(BadInput, match="cannot reach the vLLM server"):
        check_health(f"http://127.0.0.1:{port}", "vLLM", timeout=5)


@pytest.mark.parametrize("exc, said", [
    (httpx.ReadTimeout("slow"), "no answer within 3 s, for the whole answer after 2 attempts"),
    (httpx.RemoteProtocolError("cut"), "broke off its answer or broke HTTP (RemoteProtocolError: cut) after 2 attempts"),
    (httpx.ConnectError("refused"), "cannot reach the SGLang server (ConnectError: refused) after 2 attempts"),
    (httpx.DecodingError("gzip"), "the SGLang server's answer is malformed (DecodingError: gzip)"),
])
def test_each_failure_is_one_line_naming_the_url(exc, said):
    line = str(http_failure(exc, "http://h:1/generate", "SGLang", 3, " after 2 attempts"))
    assert line.startswith("http://h:1/generate: ") and said in line and "\n" not in line
