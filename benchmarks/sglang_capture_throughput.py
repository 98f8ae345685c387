"""SGLang capture speed at Kimi width (3 x 7168 = 21504 values a token) against the raw transfer.

A loopback server (a separate process, so it does not share this one's GIL) answers /generate with
pre-encoded JSON in SGLang 0.5.23's wire format: ``meta_info.hidden_states[0]`` is the prompt's
``[tokens][21504]`` rows as decimal floats (float32 values, ~20 bytes each, as the issue measured;
orjson-style, no spaces). In the same run it measures:

- raw: the same answers fetched with httpx and thrown away (the transfer alone, one at a time);
- capture: ``alignprobe.probes.sglang_http.capture_sglang`` end to end (request, msgspec decode into
  float32, dump write), with 1 and with 2 requests in flight;
- decode: one answer decoded by the standard library's json + numpy vs alignprobe's decoder.

    python benchmarks/sglang_capture_throughput.py --prompts 16 --tokens 100
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WIDTH, HIDDEN, LAYERS = 21504, 7168, 61


def answer_bytes(seed: int, tokens: int) -> bytes:
    import numpy as np
    import orjson

    rng = np.random.default_rng(seed)
    rows = rng.standard_normal((tokens, WIDTH), dtype=np.float32)  # a float32 server: ~20 bytes a value
    return orjson.dumps({"text": "x", "output_ids": [0], "meta_info": {"id": str(seed), "hidden_states": [rows.tolist()],
                                                                   "cached_tokens": 0, "prompt_tokens": tokens}})


def serve(port: int, prompts: int, tokens: int) -> None:
    """The loopback server: every answer encoded before the first request, so serving is a copy."""
    answers = [answer_bytes(i, tokens) for i in range(prompts)]
    info = json.dumps({"version": "bench", "model_path": "", "enable_return_hidden_states": True,
                       "speculative_algorithm": "EAGLE3", "disable_radix_cache": True,
                       "chunked_prefill_size": -1}).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def _send(self, body: bytes):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path.startswith("/raw/"):
                return self._send(answers[int(self.path[5:]) % prompts])
            if self.path in ("/server_info", "/health"):
                return self._send(info)
            self.send_error(404)

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            self._send(answers[body["input_ids"][0] % prompts])  # the first token names the answer

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print("ready", flush=True)
    server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=100)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return serve(args.port, args.prompts, args.tokens)

    import httpx
    import numpy as np

    from alignprobe.probes.prompts import Prompt
    from alignprobe.probes.sglang_decode import decode_generate
    from alignprobe.probes.sglang_http import capture_sglang

    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, __file__, "--serve", "--port", str(port), "--prompts", str(args.prompts),
                               "--tokens", str(args.tokens)], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout.readline().strip() == "ready"
        url = f"http://127.0.0.1:{port}"
        total_tokens = args.prompts * args.tokens
        with httpx.Client(timeout=600) as client:
            started = time.perf_counter()
            sizes = [len(client.get(f"{url}/raw/{i}").content) for i in range(args.prompts)]
            raw_s = time.perf_counter() - started
            one = client.get(f"{url}/raw/0").content
        megabytes = sum(sizes) / 1e6
        print(f"{args.prompts} answers x {args.tokens} tokens x {WIDTH} values: {megabytes:.0f} MB of JSON "
              f"({megabytes * 1e6 / total_tokens / 1e3:.0f} KB a token)")
        print(f"raw transfer           {total_tokens / raw_s:8.0f} tokens/s  {megabytes / raw_s:7.0f} MB/s  (baseline)")

        started = time.perf_counter()
        np.asarray(json.loads(one)["meta_info"]["hidden_states"][0], dtype=np.float32)
        stdlib_s = time.perf_counter() - started
        started = time.perf_counter()
        decode_generate(one)
        fast_s = time.perf_counter() - started
        print(f"decode one answer      json+numpy {stdlib_s:.2f} s, alignprobe (msgspec) {fast_s:.2f} s: "
              f"{stdlib_s / fast_s:.1f}x")

        prompts = [Prompt(f"p{i}", [i] + [1] * (args.tokens - 1)) for i in range(args.prompts)]
        with tempfile.TemporaryDirectory(prefix="sglang-bench-") as work:
            # one capture first: imports and first-use costs are not the steady state
            capture_sglang(url, prompts[:1], os.path.join(work, "warm.h5"), num_layers=LAYERS, hidden_size=HIDDEN,
                           progress=False)
            for in_flight in (1, 2):
                out = os.path.join(work, f"serve-{in_flight}.h5")
                started = time.perf_counter()
                capture_sglang(url, prompts, out, num_layers=LAYERS, hidden_size=HIDDEN, in_flight=in_flight,
                               progress=False)
                seconds = time.perf_counter() - started
                print(f"capture, {in_flight} in flight   {total_tokens / seconds:8.0f} tokens/s  "
                      f"{megabytes / seconds:7.0f} MB/s  = {raw_s / seconds:.2f} x raw")
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
