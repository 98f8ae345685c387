"""Talk to a running SGLang server over its HTTP API (the live-engine probe).

Endpoints (sgl-project/sglang 2026 main, python/sglang/srt/entrypoints/http_server.py):
``GET /server_info`` (``/get_server_info`` on older servers), ``POST /generate``. A request the
tokenizer manager rejects (e.g. hidden states asked of a server launched without them) comes back
as HTTP 400 ``{"error": {"message": ...}}``.

Every failure is one :class:`BadInput` line: unreachable server, hidden states not enabled (with the
flag to add), 4xx/5xx, malformed JSON, timeouts. Connection errors, timeouts and 5xx are retried
``retries`` times with exponential backoff, so the number and the duration of requests are bounded.
The client is injectable (``httpx.Client(transport=...)``) for tests.
"""

from __future__ import annotations

import json
import math
import os
import time
from typing import Any, Sequence

import httpx

from alignprobe.errors import BadInput, first_line
from alignprobe.safe_json import loads_json
from alignprobe.probes.http_request import checked_url, http_failure, whole_request
from alignprobe.probes.prompts import Prompt
from alignprobe.probes.sglang_capture import DEFAULT_IN_FLIGHT, capture_from_backend
from alignprobe.probes.decode_workers import DecodeWorkers, worker_count
from alignprobe.probes.sglang_decode import NotAnAnswer
from alignprobe.probes.sglang_facts import FLAG_HIDDEN_STATES, ServerFacts

DEFAULT_TIMEOUT = 120.0  # seconds for one /generate: a long prompt's prefill with a cold server
DEFAULT_RETRIES = 3
BACKOFF_START = 0.5  # seconds before the first retry; doubles each time, capped
BACKOFF_CAP = 8.0
# Retries of one call stop after RETRY_BUDGET_TIMEOUTS timeouts (at least RETRY_BUDGET_MIN seconds),
# whatever --retries says: a server answering 500 forever must not hold a capture forever.
RETRY_BUDGET_TIMEOUTS = 4
RETRY_BUDGET_MIN = 30.0
INFO_ENDPOINTS = ("/server_info", "/get_server_info")
# Words of SGLang's refusals when hidden states are not enabled (tokenizer_manager.py, 2025-2026).
HIDDEN_STATES_REFUSALS = ("return hidden states", "return_hidden_states", "hidden_states mode", "hidden-states-mode")


class HttpBackend:
    """One SGLang server at ``base_url``; ``where`` names it in messages."""

    def __init__(
        self,
        base_url: str,
        *,
        client: httpx.Client | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = DEFAULT_RETRIES,
        backoff: float = BACKOFF_START,
        sleep=time.sleep,
        decode_workers: int = 0,
    ):
        checked_url(base_url)
        if not (isinstance(timeout, (int, float)) and math.isfinite(timeout) and timeout > 0):
            raise BadInput(f"timeout must be a positive, finite number of seconds, got {timeout}")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise BadInput(f"retries must be 0 or more, got {retries}")
        self.where = base_url.rstrip("/")
        # However many retries are allowed, one call stops trying after this long.
        self.retry_budget = max(RETRY_BUDGET_MIN, RETRY_BUDGET_TIMEOUTS * timeout)
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self._sleep = sleep
        self._owns_client = client is None
        self._client = client or httpx.Client(timeout=timeout)
        # Worker processes decode large answers under their own GILs (probes/decode_workers.py), so the
        # capture may decode in its request threads: the transfer goes on while an answer is parsed.
        self._workers = DecodeWorkers(decode_workers)
        self.decodes_in_parallel = decode_workers > 0

    # -- the two calls a capture makes --------------------------------------------------------------

    def server_info(self) -> ServerFacts:
        for endpoint in INFO_ENDPOINTS:
            response = self._send("GET", endpoint)
            if response.status_code == 404:
                continue
            info = self._json(response, endpoint)
            if not isinstance(info, dict):
                raise BadInput(f"{self.where}{endpoint}: expected a JSON object, got {type(info).__name__}")
            return ServerFacts.from_info(info, endpoint)
        return ServerFacts()  # neither endpoint: facts stay unknown, the requests will tell

    def generate(self, token_ids: list[int], max_new_tokens: int) -> Any:
        return self.decode(self.request(token_ids, max_new_tokens))

    def request(self, token_ids: list[int], max_new_tokens: int) -> bytes:
        """Send one /generate and return the answer's bytes, undecoded (the capture decodes them in order)."""
        body = {
            "input_ids": [int(t) for t in token_ids],
            "sampling_params": {"max_new_tokens": max_new_tokens, "temperature": 0.0},
            "return_hidden_states": True,
        }
        response = self._send("POST", "/generate", body)
        if response.status_code == 404:
            self._json(response, "/generate")  # says "is this an SGLang server?"
        return response.content

    def decode(self, content: bytes) -> Any:
        try:
            return self._workers.decode(content)  # the prefill rows straight into float32 (sglang_decode.py)
        except NotAnAnswer:
            start = content[:60].decode("utf-8", "replace").replace("\n", " ")
            raise BadInput(f"{self.where}/generate: the answer is not JSON shaped like an SGLang /generate answer (it starts {start!r})") from None

    def close(self) -> None:
        self._workers.close()
        if self._owns_client:
            self._client.close()

    # -- plumbing ----------------------------------------------------------------------------------

    def _send(self, method: str, path: str, body: dict | None = None) -> httpx.Response:
        url = self.where + path
        delay = self.backoff
        give_up_at = time.monotonic() + self.retry_budget
        for attempt in range(self.retries + 1):
            wait = min(delay, BACKOFF_CAP)
            # The last attempt: the count is spent, or another wait and try would pass the budget.
            last = attempt == self.retries or time.monotonic() + wait + self.timeout > give_up_at
            tries = f"{attempt + 1} attempt{'s' if attempt else ''}"
            try:
                response = whole_request(self._client, method, url, body, self.timeout)
            except httpx.HTTPError as exc:
                # a connection error, a timeout or a broken-off answer is tried again; a malformed one is not
                if last or not isinstance(exc, httpx.TransportError):
                    raise http_failure(exc, url, "SGLang", self.timeout, f" after {tries}") from None
            else:
                if response.status_code < 500 or last:
                    return self._checked(response, url, tries)
            self._sleep(wait)
            delay *= 2
        raise AssertionError("unreachable")  # the loop returns or raises on its last attempt

    def _checked(self, response: httpx.Response, url: str, tries: str = "") -> httpx.Response:
        code = response.status_code
        if code < 400 or code == 404:  # 404 is the caller's to judge (older endpoint names)
            return response
        message = _error_message(response)
        if code < 500 and any(word in message.lower() for word in HIDDEN_STATES_REFUSALS):
            raise BadInput(f"{url}: the server refuses hidden states ({message}); relaunch it with {FLAG_HIDDEN_STATES}")
        kind = "rejected the request" if code < 500 else "failed"
        retried = f" after {tries}" if code >= 500 and tries else ""
        raise BadInput(f"{url}: the server {kind} with HTTP {code}{retried}: {message}")

    def _json(self, response: httpx.Response, endpoint: str) -> Any:
        if response.status_code == 404:
            raise BadInput(f"{self.where}{endpoint}: not found (HTTP 404); is this an SGLang server?")
        try:
            return loads_json(response.content, f"{self.where}{endpoint}: the answer")
        except BadInput as exc:
            start = response.text[:60].replace("\n", " ")
            raise BadInput(f"{first_line(exc)} (it starts {start!r})") from None


def capture_sglang(
    base_url: str,
    prompts: Sequence[Prompt] | str | os.PathLike,
    out_path: str | os.PathLike,
    *,
    client: httpx.Client | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    retries: int = DEFAULT_RETRIES,
    backoff: float = BACKOFF_START,
    in_flight: int = DEFAULT_IN_FLIGHT,
    **capture_options: Any,
) -> str:
    """Capture ``prompts`` from the SGLang server at ``base_url`` into ``out_path``; returns its path.

    ``timeout``: seconds for one request; ``retries``: extra attempts after a connection error,
    timeout or 5xx, ``backoff`` seconds apart at first, doubling. ``in_flight``: requests kept in
    flight, so the server computes and sends the next answers while this process decodes the last.
    The other options are :func:`capture_from_backend`'s (layer ids, the model's shape, resume...).
    """
    backend = HttpBackend(base_url, client=client, timeout=timeout, retries=retries, backoff=backoff,
                          decode_workers=worker_count(in_flight))
    try:
        return capture_from_backend(backend, prompts, out_path, in_flight=in_flight,
                                    capture_settings={"timeout_s": timeout, "retries": retries}, **capture_options)
    finally:
        backend.close()


def _error_message(response: httpx.Response) -> str:
    try:
        body = loads_json(response.content, "the error")
    except BadInput:
        return response.text[:200].strip().replace("\n", " ") or response.reason_phrase
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        for key in ("message", "detail", "error"):
            if body.get(key):
                return str(body[key])
    return json.dumps(body)[:200]
