"""SGLang capture speed at Kimi width (3 x 7168 = 21504 values a token) against the raw transfer.

A loopback server (a separate process, so it does not share this one's GIL) answers /generate with
pre-encoded JSON in SGLang 0.5.23's wire format: ``meta_info.hidden_states[0]`` is the prompt's
``[tokens][21504]`` rows as decimal floats (float32 values, ~20 bytes each, as the issue measured;
orjson's format, no spaces: msgspec's encoder writes the same bytes). In the same run, each figure
the best of ``--repeat`` rounds (the rounds interleave, so a busy machine slows every variant alike):

- raw: the same answers fetched with httpx and thrown away (the transfer alone, one at a time);
- decode: the answers, fetched once, decoded by the msgspec decoder (before: ``msgspec_answer``)
  and by alignprobe's decoder (now: ``decode_generate``, simdjson for the numbers), as a rate of
  the answers' bytes against the raw transfer's;
- capture: ``alignprobe.probes.sglang_http.capture_sglang`` end to end (request, decode into
  float32, dump write), for each ``--in-flight`` count, three ways: as before (msgspec, in the
  capture's thread), simdjson in the capture's thread, and simdjson in one worker process a request
  in flight (probes/decode_workers.py: the request threads decode, the transfer goes on meanwhile).
  The last line says which of the last two ``capture sglang`` picks on this machine.

    python benchmarks/sglang_capture_throughput.py --prompts 16 --tokens 100
"""

from __future__ import annotations

import argparse
import functools
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
    import msgspec
    import numpy as np

    rng = np.random.default_rng(seed)
    rows = rng.standard_normal((tokens, WIDTH), dtype=np.float32)  # a float32 server: ~20 bytes a value
    decode_step = rows[-1].tolist()  # SGLang appends one [width] vector per new token after the prefill
    return msgspec.json.encode({"text": "x", "output_ids": [0], "meta_info": {
        "id": str(seed), "hidden_states": [rows.tolist(), decode_step], "cached_tokens": 0, "prompt_tokens": tokens}})


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
    parser.add_argument("--repeat", type=int, default=3, help="rounds; each figure is the best of them")
    parser.add_argument("--decode-answers", type=int, default=4, help="answers the decode rows decode")
    parser.add_argument("--in-flight", default="1,2", help="requests in flight, a capture each (comma-separated)")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    in_flights = [int(n) for n in args.in_flight.split(",")]
    if args.serve:
        return serve(args.port, args.prompts, args.tokens)

    import socket

    import httpx
    import numpy as np

    from alignprobe.probes import decode_workers, sglang_http
    from alignprobe.probes.prompts import Prompt
    from alignprobe.probes.sglang_decode import decode_generate, msgspec_answer

    decoders = {"msgspec (before)": msgspec_answer, "alignprobe (now)": decode_generate}
    # capture variant -> (the decoder, worker processes: a count for the requests in flight)
    captures = {"msgspec, here (before)": (msgspec_answer, lambda in_flight: 0),
                "simdjson, here": (decode_generate, lambda in_flight: 0),
                "simdjson, 1 worker a request": (decode_generate, lambda in_flight: in_flight)}
    real_worker_count = sglang_http.worker_count
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, __file__, "--serve", "--port", str(port), "--prompts", str(args.prompts),
                               "--tokens", str(args.tokens)], stdout=subprocess.PIPE, text=True)
    best: dict[str, float] = {}
    # answers the capture's own process decoded, a variant: with workers, those a worker did not take
    # (none had started yet, or one failed): a worker row is only a worker figure where this is low
    decoded_here: dict[str, list[int]] = {}

    def timed(name, run):
        started = time.perf_counter()
        run()
        best[name] = min(best.get(name, float("inf")), time.perf_counter() - started)

    try:
        assert server.stdout.readline().strip() == "ready"
        url = f"http://127.0.0.1:{port}"
        total_tokens = args.prompts * args.tokens
        prompts = [Prompt(f"p{i}", [i] + [1] * (args.tokens - 1)) for i in range(args.prompts)]
        with httpx.Client(timeout=600) as client, tempfile.TemporaryDirectory(prefix="sglang-bench-") as work:
            sizes = [len(client.get(f"{url}/raw/{i}").content) for i in range(args.prompts)]
            answers = [client.get(f"{url}/raw/{i}").content for i in range(min(args.decode_answers, args.prompts))]
            expected = msgspec_answer(answers[0])["meta_info"]["hidden_states"][0]
            for decode in decoders.values():  # the same rows from both, bit for bit
                rows = decode(answers[0])["meta_info"]["hidden_states"][0]
                assert rows.shape == (args.tokens, WIDTH) and np.array_equal(rows.view(np.uint32), expected.view(np.uint32))

            def capture(variant, in_flight):
                decoder, workers = captures[variant]
                counted = decoded_here.setdefault(f"{variant}, {in_flight} in flight", [0, 0])

                def decode_here(content):
                    counted[0] += 1
                    return decoder(content)

                counted[1] += args.prompts
                decode_workers.decode_generate = decode_here  # what HttpBackend.decode runs in this process
                sglang_http.worker_count = workers
                try:
                    sglang_http.capture_sglang(url, prompts, os.path.join(work, "serve.h5"), num_layers=LAYERS,
                                               hidden_size=HIDDEN, in_flight=in_flight, progress=False, overwrite=True)
                finally:
                    decode_workers.decode_generate, sglang_http.worker_count = decode_generate, real_worker_count

            capture("simdjson, 1 worker a request", 2)  # imports and first-use costs are not the steady state
            decoded_here.clear()
            for _ in range(args.repeat):
                timed("raw", lambda: [client.get(f"{url}/raw/{i}").content for i in range(args.prompts)])
                for name, decode in decoders.items():
                    timed(f"decode {name}", functools.partial(lambda decode: [decode(a) for a in answers], decode))
                for variant in captures:
                    for in_flight in in_flights:
                        timed(f"capture {variant}, {in_flight} in flight", functools.partial(capture, variant, in_flight))
        megabytes = sum(sizes) / 1e6
        decoded_mb = sum(sizes[: len(answers)]) / 1e6
        raw_rate = megabytes / best["raw"]
        print(f"{args.prompts} answers x {args.tokens} tokens x {WIDTH} values: {megabytes:.0f} MB of JSON "
              f"({megabytes * 1e6 / total_tokens / 1e3:.0f} KB a token); best of {args.repeat} rounds")
        print(f"raw transfer                              {total_tokens / best['raw']:8.0f} tokens/s  "
              f"{raw_rate:7.0f} MB/s  (baseline)")
        for name in decoders:
            rate = decoded_mb / best[f"decode {name}"]
            print(f"decode {name:34s} {rate * 1e6 / (megabytes * 1e6 / total_tokens):8.0f} tokens/s  {rate:7.0f} MB/s"
                  f"  = {rate / raw_rate:.2f} x raw")
        for variant in captures:
            for in_flight in in_flights:
                seconds = best[f"capture {variant}, {in_flight} in flight"]
                here, asked = decoded_here[f"{variant}, {in_flight} in flight"]
                print(f"capture {variant + ', ' + str(in_flight) + ' in flight':34s} {total_tokens / seconds:8.0f} tokens/s  "
                      f"{megabytes / seconds:7.0f} MB/s  = {best['raw'] / seconds:.2f} x raw"
                      f"  ({here} of {asked} answers decoded in this process)")
        print(f"(capture sglang's default here, {os.cpu_count()} cores: "
              f"{' / '.join(str(real_worker_count(n)) for n in in_flights)} worker processes for "
              f"{' / '.join(map(str, in_flights))} in flight)")
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
