"""HTTP to an engine's server, bounded: a URL checked before any request, a timeout for the whole answer."""

from __future__ import annotations

import time

import httpx

from alignprobe.errors import BadInput, first_line


def checked_url(base_url: str) -> httpx.URL:
    """The server URL, parsed: one line for a scheme other than http(s), no host, or a malformed one."""
    if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
        raise BadInput(f"server URL {base_url!r} must start with http:// or https://")
    try:
        url = httpx.URL(base_url)
        host = url.host
        url.port  # noqa: B018 - parsing the port raises for a malformed one
    except (httpx.InvalidURL, ValueError, TypeError) as exc:
        raise BadInput(f"server URL {base_url!r} is malformed ({first_line(exc)}); write it like http://127.0.0.1:30000") from None
    if not host:
        raise BadInput(f"server URL {base_url!r} names no host; write it like http://127.0.0.1:30000")
    return url


def whole_request(client: httpx.Client, method: str, url: str, body: dict | None, timeout: float) -> httpx.Response:
    """One request whose whole answer must arrive within ``timeout`` seconds.

    httpx's timeouts bound each read, so a server that drips a byte every half second never trips
    them; here the body is streamed and the clock checked after every chunk (and every read is
    bounded by the time left).
    """
    deadline = time.monotonic() + timeout
    with client.stream(method, url, json=body, timeout=timeout) as response:
        chunks = []
        for chunk in response.iter_bytes():
            chunks.append(chunk)
            if time.monotonic() > deadline:
                raise httpx.ReadTimeout(f"the answer took longer than {timeout:g} s", request=response.request)
    refuse_redirect(response, url)
    # The body is decoded already (gzip...): the copy must not claim an encoding or a length.
    headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in ("content-encoding", "content-length")]
    return httpx.Response(response.status_code, headers=headers, content=b"".join(chunks), request=response.request)


def refuse_redirect(response: httpx.Response, url: str) -> None:
    """A 3xx is not followed (a redirected POST may lose its body, and the states must come from the
    server named): one line that names where it points, instead of "not JSON" about an empty body."""
    if 300 <= response.status_code < 400:
        location = response.headers.get("location")
        to = f" to {location[:200]}" if location else " without a Location"
        raise BadInput(f"{url}: the server answered HTTP {response.status_code}, a redirect{to}; give --url the "
                       "address of the server itself (alignprobe does not follow redirects)")


def http_failure(exc: httpx.HTTPError, url: str, engine: str, timeout: float, after: str = "") -> BadInput:
    """One line for a request to ``engine``'s server that failed on the wire; ``after`` (e.g. " after 2
    attempts") where it was retried. A protocol error is its own line: the server was reached but broke
    off its answer (or broke HTTP), so "cannot reach" would send the user looking at the wrong thing."""
    what = f"{type(exc).__name__}: {first_line(exc)}"
    if isinstance(exc, httpx.TimeoutException):
        return BadInput(f"{url}: no answer within {timeout:g} s, for the whole answer{after}; raise --timeout or "
                        f"check the {engine} server's load")
    if isinstance(exc, httpx.ProtocolError):
        return BadInput(f"{url}: the server broke off its answer or broke HTTP ({what}){after}; check the {engine} "
                        "server's log")
    if isinstance(exc, httpx.TransportError):
        return BadInput(f"{url}: cannot reach the {engine} server ({what}){after}; is it running on that host and port?")
    return BadInput(f"{url}: the {engine} server's answer is malformed ({what})")


def check_health(base_url: str, engine: str, timeout: float = 10.0, client: httpx.Client | None = None) -> None:
    """``GET /health`` answers 200 (SGLang and vLLM both serve it): the server is up and ready."""
    url = str(checked_url(base_url)).rstrip("/") + "/health"
    own = client is None
    client = client or httpx.Client(timeout=timeout)
    try:
        response = whole_request(client, "GET", url, None, timeout)
    except httpx.HTTPError as exc:
        raise http_failure(exc, url, engine, timeout) from None
    finally:
        if own:
            client.close()
    if response.status_code != 200:
        raise BadInput(f"{url}: the {engine} server answered HTTP {response.status_code}; is it still starting, "
                       "or is this another service?")
