"""A loopback SGLang server for tests: a real HTTP server on 127.0.0.1 with a tiny seeded model.

It speaks SGLang's wire format as read from sgl-project/sglang (2026 main); it shares no code with
the probe, so a probe that misspells a field fails against it:

- ``POST /generate`` (entrypoints/http_server.py ``generate_request``): body fields ``input_ids``,
  ``sampling_params.max_new_tokens``, ``return_hidden_states`` (managers/io_struct.py
  GenerateReqInput). Answer ``{"text", "output_ids", "meta_info"}``; ``meta_info`` carries ``id``,
  ``finish_reason``, ``prompt_tokens``, ``completion_tokens``, ``cached_tokens`` and
  ``hidden_states`` (tokenizer_manager.py: ``meta_info["hidden_states"] =
  recv_obj.output_hidden_states[i]``): element 0 the prefill rows of the computed (uncached) tokens,
  then one vector per decoded token after the first (batch_result_processor.py).
- A refused request is HTTP 400 ``{"error": {"message": str(e)}}`` (``_create_error_response``),
  with the tokenizer manager's own words when hidden states are not enabled.
- ``GET /server_info`` = ``{**asdict(server_args), **scheduler_info, "internal_states", "version"}``;
  ``GET /get_server_info`` the deprecated alias (``legacy_info_only`` serves only that one).

Capture convention (models/llama.py, deepseek_v2.py, logits_processor.py): with speculative
algorithm EAGLE3 the target captures ``hidden_states + residual`` BEFORE layer i for i in
``layers_to_capture`` (= HF[i]) and returns their concat in layer order; explicit draft-config ids
get +1 (deepseek_v2: only when the first id is 1), no ids mean [2, N//2, N-3]. Otherwise the rows
are the final post-norm state HF[N].
"""

from __future__ import annotations

import dataclasses
import http.server
import json
import os
import threading
import time
from typing import Any

import torch

from alignprobe.probes.hf_states import forward_states

DEEPSEEK = ("deepseek_v2", "deepseek_v3")


@dataclasses.dataclass
class FakeOptions:
    speculative_algorithm: str | None = None  # None, "EAGLE" or "EAGLE3"
    draft_layer_ids: list[int] | None = None  # the draft config's eagle_aux_hidden_state_layer_ids
    hidden_states_enabled: bool = True  # --enable-return-hidden-states
    radix_cache: bool = False  # True: prompts sharing a prefix with an earlier one get short rows
    chunked_prefill_size: int = -1  # > 0: only the last chunk's rows come back
    bfloat16: bool = False  # round states to bfloat16, as a bf16 server's .tolist() does
    fail_first: int = 0  # answer the first n /generate calls with HTTP 503
    fail_status: int = 503
    slow_first: int = 0  # sleep before answering the first n /generate calls
    delay_s: float = 0.0
    malformed_json: bool = False  # /generate answers garbage with status 200
    legacy_info_only: bool = False  # an older server: /get_server_info only
    version: str = "0.5.23"
    quantization: str | None = None
    # --enable-return-aux-hidden-states --speculative-algorithm EAGLE3 [--return-aux-hidden-state-layer-ids ...]
    # (0.5.23): aux capture without a draft; the server then reports speculative_algorithm None.
    aux_capture_only: bool = False
    aux_capture_ids: list[int] | None = None
    # prompt length -> (positions, column range) whose values the server computes as NaN: they go out as
    # null, which is how SGLang's orjson writes NaN and Inf (orjson.dumps([nan, inf]) == b"[null,null]")
    nan_values: dict[int, tuple[list[int], tuple[int, int]]] = dataclasses.field(default_factory=dict)


class FakeSGLang:
    """``with FakeSGLang(model, tmp_path, FakeOptions(...)) as server: server.url``"""

    def __init__(self, model, workdir, options: FakeOptions | None = None):
        self.model = model.eval()
        self.options = options or FakeOptions()
        self.generate_calls = 0
        self._seen: list[list[int]] = []  # the radix cache: every prompt computed so far
        self._lock = threading.Lock()
        self.model_path = os.path.join(os.fspath(workdir), "target")
        self.model.config.save_pretrained(self.model_path)
        self.draft_path = ""
        if self.options.speculative_algorithm:
            self.draft_path = os.path.join(os.fspath(workdir), "draft")
            os.makedirs(self.draft_path, exist_ok=True)
            eagle = {"use_aux_hidden_state": self.options.speculative_algorithm == "EAGLE3"}
            if self.options.draft_layer_ids is not None:
                eagle["eagle_aux_hidden_state_layer_ids"] = self.options.draft_layer_ids
            with open(os.path.join(self.draft_path, "config.json"), "w") as fh:
                json.dump({"architectures": ["LlamaForCausalLMEagle3"], "eagle_config": eagle}, fh)
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> "FakeSGLang":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    # -- what the server computes ------------------------------------------------------------------

    @property
    def num_layers(self) -> int:
        return self.model.config.num_hidden_layers

    def layers_to_capture(self) -> list[int] | None:
        """SGLang's model.layers_to_capture, or None when aux capture is off."""
        capture_only = self.options.aux_capture_only
        if self.options.speculative_algorithm != "EAGLE3" and not capture_only:
            return None
        n = self.num_layers
        ids = self.options.aux_capture_ids if capture_only else self.options.draft_layer_ids
        if ids is None:
            return [2, n // 2, n - 3]
        if self.model.config.model_type in DEEPSEEK and ids[0] != 1:
            return list(ids)
        return [i + 1 for i in ids]

    def rows_for(self, token_ids: list[int]) -> torch.Tensor:
        """The rows SGLang computes for the whole prompt ``[S, width]`` (the test's expectation, too)."""
        with torch.no_grad():
            fs = forward_states(self.model, torch.tensor([token_ids]))
        capture = self.layers_to_capture()
        if capture is None:
            rows = fs.hf[self.num_layers][0]
        else:
            rows = torch.cat([fs.hf[i][0] for i in sorted(capture)], dim=-1)
        if self.options.bfloat16:
            rows = rows.to(torch.bfloat16)
        return rows

    def _generate(self, body: dict) -> tuple[int, Any]:
        o = self.options
        with self._lock:
            self.generate_calls += 1
            call = self.generate_calls
        if call <= o.slow_first:
            time.sleep(o.delay_s)
        if call <= o.fail_first:
            return o.fail_status, {"error": {"message": "Service Unavailable"}}
        ids = body.get("input_ids")
        if not isinstance(ids, list) or not ids or not all(isinstance(t, int) for t in ids):
            return 400, {"error": {"message": "Either text, input_ids or input_embeds should be provided."}}
        if body.get("return_hidden_states") and not o.hidden_states_enabled:
            # tokenizer_manager.py, the refusal when the server maximum is off
            return 400, {"error": {"message": (
                "The server is not configured to return hidden states. Please set `--return-hidden-states-mode "
                "last`, `--return-hidden-states-mode full`, or the legacy `--enable-return-hidden-states` flag."
            )}}
        max_new = int((body.get("sampling_params") or {}).get("max_new_tokens", 128))
        cached = self._cached_prefix(ids)
        start = cached
        if o.chunked_prefill_size > 0 and len(ids) - cached > o.chunked_prefill_size:
            start = len(ids) - ((len(ids) - cached - 1) % o.chunked_prefill_size + 1)  # the last chunk only
        rows = self.rows_for(ids)
        meta = {
            "id": f"req-{call}",
            "finish_reason": {"type": "length", "length": max_new},
            "prompt_tokens": len(ids),
            "completion_tokens": max_new,
            "cached_tokens": cached,
            "e2e_latency": 0.001,
        }
        output_ids: list[int] = []
        if body.get("return_hidden_states") and max_new == 0:
            meta["hidden_states"] = []  # what a real 0.5.23 answers (tests/engines/test_sglang.py): no prefill rows either
        elif body.get("return_hidden_states"):
            prefill = rows.float().clone()
            positions, (c0, c1) = o.nan_values.get(len(ids), ([], (0, 0)))
            for p in positions:
                prefill[p, c0:c1] = float("nan")
            hidden = [prefill[start:].tolist()]
            if positions:
                hidden = [[[None if v != v else v for v in row] for row in hidden[0]]]
            seq = list(ids)
            for step in range(max_new):
                with torch.no_grad():
                    nxt = int(self.model(torch.tensor([seq])).logits[0, -1].argmax())
                output_ids.append(nxt)
                seq.append(nxt)
                if step < max_new - 1:  # a decode forward runs for every token after the first
                    hidden.append(self.rows_for(seq)[-1].float().tolist())
            meta["hidden_states"] = hidden
        with self._lock:
            self._seen.append(list(ids))
        return 200, {"text": "", "output_ids": output_ids, "meta_info": meta}

    def _cached_prefix(self, ids: list[int]) -> int:
        if not self.options.radix_cache:
            return 0
        best = 0
        with self._lock:
            for seen in self._seen:
                common = 0
                for a, b in zip(seen, ids):
                    if a != b:
                        break
                    common += 1
                best = max(best, common)
        return min(best, len(ids) - 1)  # SGLang always computes at least the last token

    def server_info(self) -> dict:
        o = self.options
        return {
            "model_path": self.model_path,
            "tokenizer_path": self.model_path,
            "dtype": "bfloat16" if o.bfloat16 else "float32",
            "quantization": o.quantization,
            "speculative_algorithm": None if o.aux_capture_only else o.speculative_algorithm,
            "enable_return_aux_hidden_states": o.aux_capture_only,
            "aux_hidden_state_capture": "eagle3" if o.aux_capture_only else None,
            "return_aux_hidden_state_layer_ids": o.aux_capture_ids,
            "speculative_draft_model_path": self.draft_path or None,
            "enable_return_hidden_states": o.hidden_states_enabled,
            "return_hidden_states_mode": "full" if o.hidden_states_enabled else None,
            "disable_radix_cache": not o.radix_cache,
            "chunked_prefill_size": o.chunked_prefill_size,
            "tp_size": 1,
            "max_total_num_tokens": 4096,
            "internal_states": [{"avg_spec_accept_length": None}],
            "version": o.version,
        }

    # -- HTTP ----------------------------------------------------------------------------------------

    def _handler_class(self):
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep pytest output clean
                pass

            def _reply(self, status: int, payload: Any, raw: bytes | None = None) -> None:
                data = raw if raw is not None else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path == "/health":
                    self._reply(200, {})
                elif self.path == "/server_info" and not fake.options.legacy_info_only:
                    self._reply(200, fake.server_info())
                elif self.path == "/get_server_info":
                    self._reply(200, fake.server_info())
                else:
                    self._reply(404, {"detail": "Not Found"})

            def do_POST(self):
                if self.path != "/generate":
                    self._reply(404, {"detail": "Not Found"})
                    return
                length = int(self.headers.get("Content-Length", 0))
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    self._reply(422, {"detail": "JSON decode error"})
                    return
                status, payload = fake._generate(body)
                if fake.options.malformed_json and status == 200:
                    self._reply(200, None, raw=b'{"text": "", "meta_info": {"hidden_states": [[0.1, ')
                    return
                try:
                    self._reply(status, payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

        return Handler


class InProcessEngine:
    """An object with sglang.Engine's ``generate`` / ``get_server_info`` over a running FakeSGLang:
    the offline mode's backend, whose hidden states come back as tensors (NaN as NaN, where the HTTP
    server's orjson sends ``null``)."""

    def __init__(self, fake: "FakeSGLang"):
        self.fake = fake

    def get_server_info(self):
        return self.fake.server_info()

    def generate(self, input_ids, sampling_params, return_hidden_states):
        _, body = self.fake._generate({"input_ids": input_ids, "sampling_params": sampling_params,
                                       "return_hidden_states": return_hidden_states})
        body["meta_info"]["hidden_states"] = [torch.tensor(_nan_for_null(h)) for h in body["meta_info"]["hidden_states"]]
        return body


def _nan_for_null(value):
    if isinstance(value, list):
        return [_nan_for_null(v) for v in value]
    return float("nan") if value is None else value
