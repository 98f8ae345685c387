"""``alignprobe gate`` on the serve sources test_gate.py leaves out (a vLLM server, offline vLLM in its
own Python), the checks it makes before any capture, and what it leaves behind on bad input.

The vLLM stand-ins speak vLLM's interfaces, not the gate's: the server answers ``/health`` and
``/v1/completions`` as speculators' vllm_client.py reads them (test_vllm_probe.py), and offline vLLM
is a ``vllm`` package (tests/helpers/fake_vllm) behind a Python of its own, the driver run in it unchanged.
Where the real engines are installed, tests/engines/test_gate_vllm.py and test_gate_sglang.py run every
source against them.
"""

from __future__ import annotations

import http.server
import json
import os
import socket
import sys
import threading
import xml.etree.ElementTree as ET

import pytest
import torch

from alignprobe.dump import open_dump
from alignprobe.gate import GateConfig
from tests.gate.test_run import EAGLE3_IDS, N, _gate, _write_config, model, model_dir, prompts  # noqa: F401 - fixtures
from tests.probes.test_vllm_files import write_request

FAKE_VLLM = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "helpers", "fake_vllm")
VLLM_IDS = EAGLE3_IDS + [N]  # the training view plus the pre-norm final: a correct setup


class VllmServer:
    """A loopback vLLM OpenAI server with the extract_hidden_states connector: each completion's states
    are written as a connector file, and the answer names it."""

    def __init__(self, model, folder):
        outer = self
        self.requests = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _reply(self, status, payload):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._reply(200, {}) if self.path == "/health" else self._reply(404, {"detail": "Not Found"})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(self.path)
                path = write_request(model, folder, len(outer.requests), body["prompt"], VLLM_IDS, dtype=torch.float32)
                self._reply(200, {"choices": [{"text": "x", "prompt_token_ids": body["prompt"]}],
                                  "kv_transfer_params": {"hidden_states_path": path}})

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def engine_python(tmp_path, with_vllm: bool) -> str:
    """A Python of its own, as vLLM's venv is: this interpreter with the stand-in vllm on its path, or
    without site-packages (-I -S: no vllm, no torch)."""
    python = tmp_path / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    if with_vllm:
        python.write_text(f'#!/bin/sh\nPYTHONPATH="{FAKE_VLLM}:$PYTHONPATH" exec {sys.executable} "$@"\n')
    else:
        python.write_text(f'#!/bin/sh\nexec {sys.executable} -S -I "$@"\n')
    python.chmod(0o755)
    return str(python)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def assert_passed_and_written(out):
    record = json.loads((out / "result.json").read_text())
    assert record["verdict"] == "PASS" and record["exit_code"] == 0, record["findings"]
    assert [f["code"] for f in record["findings"] if f["severity"] != "info"] == []
    assert (out / "junit.xml").exists() and (out / "report" / "summary.md").exists()  # junit: <out>/junit.xml
    with open_dump(out / "serve.h5") as dump:
        return dump.provenance


@pytest.mark.slow  # captures both sides of a tiny model (3-10 s)
def test_gate_on_a_vllm_server(model, model_dir, prompts, tmp_path):
    files = tmp_path / "hs"
    files.mkdir()
    server = VllmServer(model, str(files))
    try:
        config = _write_config(tmp_path, model_dir, prompts, f'vllm_url = "{server.url}"\nvllm_model = "target"\n'
                               f"layer_ids = {VLLM_IDS}")
        r = _gate("--config", config, "--out", str(tmp_path / "moved"))
    finally:
        server.close()
    assert r.exit_code == 0, r.output
    provenance = assert_passed_and_written(tmp_path / "moved")
    assert provenance.model == "target" and provenance.capture["server"] == server.url
    assert server.requests == ["/v1/completions"] * 4  # one per prompt
    assert not (tmp_path / "out").exists()  # the config's junit path moved with --out


@pytest.mark.slow  # captures both sides of a tiny model, and starts the driver in its own Python
def test_gate_on_offline_vllm_in_its_own_python(model_dir, prompts, tmp_path):
    """This source handed the OfflineRun where a list of files belongs, an internal error (exit 3)."""
    python = engine_python(tmp_path, with_vllm=True)
    config = _write_config(tmp_path, model_dir, prompts,
                           f'vllm_offline_model = "{model_dir}"\nvllm_storage_dir = "hs"\nengine_python = "{python}"\n'
                           f"layer_ids = {VLLM_IDS}\nengine_args = {{ enforce_eager = true, seed = 0 }}")
    r = _gate("--config", config)
    assert r.exit_code == 0, r.output
    provenance = assert_passed_and_written(tmp_path / "out")
    assert provenance.engine_version == "0.0-fake" and provenance.dtype == "float32"
    assert provenance.capture["engine_options"] == {"enforce_eager": True, "seed": 0, "dtype": "float32"}
    assert len([n for n in os.listdir(tmp_path / "hs") if n.endswith(".safetensors")]) == 4


# -- before any capture --------------------------------------------------------------------------


@pytest.fixture
def inputs(tmp_path):
    """A model folder as far as the checks read it (config.json), and a prompts file."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "llama", "num_hidden_layers": 8}))
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"input_ids": [1, 2, 3]}) + "\n")
    return str(model), str(prompts)


def error_outputs(out, message):
    """What a run that stopped on bad input leaves in its folder: the error, three ways."""
    record = json.loads((out / "result.json").read_text())
    assert record == {"verdict": None, "exit_code": 2, "exit_reason": "bad input or usage", "error": record["error"]}
    assert message in record["error"]
    summary = (out / "report" / "summary.md").read_text()
    assert summary.startswith("<!-- alignprobe-summary -->") and message in summary and "no verdict" in summary
    suite = ET.parse(out / "junit.xml").getroot().find("testsuite")
    assert suite.get("errors") == "1" and message in suite.find("testcase").find("error").get("message")
    return record


@pytest.mark.parametrize("source, message", [
    (lambda tmp, port: ["--sglang-url", f"http://127.0.0.1:{port}"], "cannot reach the SGLang server"),
    (lambda tmp, port: ["--vllm-url", f"http://127.0.0.1:{port}", "--vllm-model", "m", "--layer-ids", "2,4,5"],
     "cannot reach the vLLM server"),
    (lambda tmp, port: ["--vllm-dir", str(tmp / "absent"), "--layer-ids", "2,4,5"], "serve.vllm_dir"),
    (lambda tmp, port: ["--vllm-offline-model", str(tmp / "model"), "--vllm-storage-dir", str(tmp / "hs"),
                        "--engine-python", engine_python(tmp, with_vllm=False), "--layer-ids", "2,4,5"],
     "has no vllm module"),
    (lambda tmp, port: ["--vllm-offline-model", str(tmp / "p.jsonl"), "--vllm-storage-dir", str(tmp / "hs"),
                        "--layer-ids", "2,4,5"], "not a local model directory"),
    (lambda tmp, port: ["--sglang-offline-model", str(tmp / "model"),
                        "--engine-python", engine_python(tmp, with_vllm=False)], "has no sglang module"),
    (lambda tmp, port: ["--sglang-offline-model", str(tmp / "p.jsonl")], "serve.sglang_offline_model"),
    (lambda tmp, port: ["--sglang-url", f"http://127.0.0.1:{port}", "--engine-arg", "device=cpu"],
     "engine_python and engine_args go with"),
])
def test_a_serve_source_that_cannot_work_is_refused_before_any_capture(inputs, tmp_path, source, message):
    model, prompts = inputs
    out = tmp_path / "gate"
    r = _gate("--model", model, "--prompts", prompts, *source(tmp_path, closed_port()), "--out", str(out))
    assert r.exit_code == 2 and message in r.stderr and "Traceback" not in r.output, r.output
    assert not (out / "train.h5").exists() and "capturing" not in r.stderr  # no capture started
    error_outputs(out, message)


def test_a_serve_url_that_is_not_ready_is_refused(inputs, tmp_path):
    class Starting(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Starting)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        r = _gate("--model", inputs[0], "--prompts", inputs[1], "--sglang-url",
                  f"http://127.0.0.1:{httpd.server_address[1]}", "--out", str(tmp_path / "gate"))
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert r.exit_code == 2 and "answered HTTP 503" in r.stderr, r.output


@pytest.mark.parametrize("train, message", [({"model": "absent"}, "train.model"),
                                            ({"prompts": "absent.jsonl"}, "train.prompts")])
def test_train_inputs_are_checked_first(inputs, tmp_path, train, message):
    args = {"model": inputs[0], "prompts": inputs[1], **train}
    (tmp_path / "hs").mkdir()
    r = _gate("--model", args["model"], "--prompts", args["prompts"], "--vllm-dir", str(tmp_path / "hs"),
              "--layer-ids", "2,4,5", "--out", str(tmp_path / "gate"))
    assert r.exit_code == 2 and message in r.stderr, r.output
    error_outputs(tmp_path / "gate", message)


# -- what bad input leaves -----------------------------------------------------------------------


def test_a_config_that_cannot_be_read_still_leaves_the_outputs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a file that cannot be read names no out folder: the default, here
    (tmp_path / "gate.toml").write_text('[train]\nmodle = "x"\n')
    r = _gate("--config", "gate.toml")
    assert r.exit_code == 2
    error_outputs(tmp_path / "alignprobe-gate", "unknown key(s) modle")


def test_out_moves_the_configs_outputs_and_an_old_report_goes(inputs, tmp_path):
    config = tmp_path / "gate.toml"
    config.write_text(f'out = "out"\njunit = "out/junit.xml"\njson = "elsewhere.json"\n[train]\nmodel = "{inputs[0]}"\n'
                      f'prompts = "{inputs[1]}"\n[serve]\nsglang_url = "http://127.0.0.1:{closed_port()}"\n')
    moved = tmp_path / "moved"
    (moved / "report").mkdir(parents=True)
    (moved / "report" / "report.html").write_text("an earlier run's PASS")
    r = _gate("--config", str(config), "--out", str(moved))
    assert r.exit_code == 2, r.output
    assert (moved / "junit.xml").exists() and not (tmp_path / "out").exists()
    assert json.loads((tmp_path / "elsewhere.json").read_text())["exit_code"] == 2  # outside out: stays put
    assert not (moved / "report" / "report.html").exists()


def test_json_to_stdout_on_bad_input_is_one_object(inputs, tmp_path):
    r = _gate("--model", inputs[0], "--prompts", inputs[1], "--sglang-url", f"http://127.0.0.1:{closed_port()}",
              "--out", str(tmp_path / "gate"), "--json", "-")
    assert r.exit_code == 2
    assert json.loads(r.stdout)["exit_code"] == 2  # written once: a second copy would not parse


def test_moved_to_follows_only_paths_inside_the_old_out():
    config = GateConfig(out="/ci/gate", junit="/ci/gate/junit.xml", json="/ci/result.json")
    moved = config.moved_to("/tmp/new")
    assert (moved.out, moved.junit, moved.json) == ("/tmp/new", "/tmp/new/junit.xml", "/ci/result.json")
    assert GateConfig(out="/ci/gate", json="-").moved_to("/x").json == "-"
