"""The HF capture probe: streams against a plain transformers forward, padding, resume, CLI, kill -9."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from alignprobe.dump import open_dump
from alignprobe.errors import BadInput
from alignprobe.probes.hf import capture_hf, load_hf_model, pad_batch
from alignprobe.probes.prompts import Prompt, prompts_from_token_lists
from alignprobe.quant import simulate_weight_quant
from alignprobe.demo.tiny_models import tiny_deepseek_v3, tiny_llama
from alignprobe.demo.tiny_tokenizer import save_tiny_model_dir


def random_prompts(count, seed=0, low=1, high=40, vocab=500):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(low, high, (count,), generator=g)
    return prompts_from_token_lists([torch.randint(0, vocab, (int(n),), generator=g).tolist() for n in lengths])


@pytest.fixture(scope="module")
def llama():
    return tiny_llama(num_layers=8)


@pytest.fixture(scope="module")
def deepseek():
    return tiny_deepseek_v3(num_layers=6)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return save_tiny_model_dir(tmp_path_factory.mktemp("model") / "tiny-llama", "llama", num_layers=4)


def reference_states(model, token_ids):
    """Plain transformers: one unpadded forward of one sample, every HF index and the logits' input."""
    with torch.no_grad():
        out = model(input_ids=torch.tensor([token_ids]), output_hidden_states=True)
    return [h[0].float().numpy() for h in out.hidden_states]


def test_streams_hold_what_they_claim(llama, tmp_path):
    prompts = random_prompts(5)
    path = capture_hf(llama, prompts, tmp_path / "d.h5", layers=[0, 3, 8], batch_size=5, progress=False)
    with open_dump(path) as d:
        assert d.streams["layers"].hf_indices == (0, 3, 8)
        assert d.streams["eagle3_aux"].hf_indices == (2, 4, 5)  # 2, N//2, N-3 for N=8
        assert d.streams["final"].hf_indices == (8,) and d.streams["final"].final_norm == "post"
        assert d.streams["final_prenorm"].final_norm == "pre"
        roles = {name: c.role for name, c in d.streams.items()}
        assert roles == {"layers": "layers", "final_prenorm": "layers", "eagle3_aux": "drafter_input", "final": "final"}
        for p in prompts:
            hf = reference_states(llama, p.token_ids)
            np.testing.assert_allclose(d.states(p.sample_id, "layers"), np.concatenate([hf[0], hf[3], hf[8]], 1), atol=2e-5)
            np.testing.assert_allclose(d.states(p.sample_id, "eagle3_aux"), np.concatenate([hf[2], hf[4], hf[5]], 1), atol=2e-5)
            np.testing.assert_allclose(d.states(p.sample_id, "final"), hf[8], atol=2e-5)
            # the pre-norm state is what the final norm turns into HF[N]
            pre = torch.from_numpy(d.states(p.sample_id, "final_prenorm"))
            with torch.no_grad():
                np.testing.assert_allclose(llama.model.norm(pre).numpy(), hf[8], atol=2e-5)
            np.testing.assert_array_equal(d.token_ids(p.sample_id), p.token_ids)


@pytest.mark.parametrize("arch", ["llama", "deepseek"])
@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_padded_batch_equals_each_sample_alone(arch, padding_side, llama, deepseek, tmp_path):
    model = llama if arch == "llama" else deepseek
    prompts = random_prompts(7, seed=1, low=1, high=30)
    alone = capture_hf(model, prompts, tmp_path / "alone.h5", batch_size=1, progress=False)
    batched = capture_hf(model, prompts, tmp_path / "batched.h5", batch_size=7, padding_side=padding_side, progress=False)
    lengths = {len(p.token_ids) for p in prompts}
    assert len(lengths) > 3  # the batch really is padded, by varying amounts
    with open_dump(alone) as a, open_dump(batched) as b:
        assert a.sample_ids == b.sample_ids
        for name in a.streams:
            for i in range(a.num_samples):
                x, y = a.states(i, name), b.states(i, name)
                assert x.shape == y.shape
                np.testing.assert_allclose(y, x, atol=1e-5, rtol=1e-5, err_msg=f"{name} sample {i}")


def test_pad_batch_spans_cover_exactly_the_real_tokens():
    ids, mask, pos, spans = pad_batch([[5, 6, 7], [8]], "left", "cpu", pad_id=0)
    assert ids.tolist() == [[5, 6, 7], [0, 0, 8]] and mask.tolist() == [[1, 1, 1], [0, 0, 1]]
    assert pos.tolist() == [[0, 1, 2], [0, 0, 0]] and spans == [(0, 3), (2, 3)]
    ids, mask, pos, spans = pad_batch([[5], [8, 9]], "right", "cpu", pad_id=3)
    assert ids.tolist() == [[5, 3], [8, 9]] and spans == [(0, 1), (0, 2)] and pos.tolist() == [[0, 0], [0, 1]]


def test_layer_selection_words_and_bad_selections(llama, tmp_path):
    prompts = random_prompts(2)
    path = capture_hf(llama, prompts, tmp_path / "e.h5", layers="eagle3", aux_layers=[1, 7], progress=False)
    with open_dump(path) as d:
        assert d.streams["layers"].hf_indices == (2, 4, 5)
        assert d.streams["eagle3_aux"].hf_indices == (1, 7)
    for bad, message in [([9], "outside 0..8"), ([2, 2], "repeat"), ("some", "not 'all'"), ([], "at least one")]:
        with pytest.raises(BadInput, match=message):
            capture_hf(llama, prompts, tmp_path / "bad.h5", layers=bad, progress=False)
    assert not os.path.exists(tmp_path / "bad.h5") and not os.path.exists(tmp_path / "bad.h5.partial")


def test_eagle3_selection_stores_the_aux_concat_once(llama, tmp_path):
    from alignprobe.compare import compare
    from alignprobe.compare.mapping import train_candidates

    prompts = random_prompts(4, seed=2)
    eagle3 = capture_hf(llama, prompts, tmp_path / "e.h5", layers="eagle3", progress=False)
    full = capture_hf(llama, prompts, tmp_path / "a.h5", progress=False)
    with open_dump(eagle3) as e, open_dump(full) as a:
        assert set(e.streams) == {"final_prenorm", "eagle3_aux", "final"}  # no layers: it is eagle3_aux again
        aux = e.streams["eagle3_aux"]
        assert aux.hf_indices == (2, 4, 5) and "no separate layers stream" in aux.note
        assert e.provenance.capture["layers"] == [2, 4, 5]
        assert {c.hf_index for c in train_candidates(e)} == {2, 4, 5, 8}  # what the mapping search can match
        for p in prompts:
            for name in e.streams:
                np.testing.assert_array_equal(e.states(p.sample_id, name), a.states(p.sample_id, name))
            stack = a.states(p.sample_id, "layers").reshape(len(p.token_ids), 9, -1)  # HF[0..8]
            np.testing.assert_array_equal(e.states(p.sample_id, "eagle3_aux"),
                                          stack[:, [2, 4, 5]].reshape(len(p.token_ids), -1))
    # Either dump on either side of a comparison: the eagle3 one lacks the other layers, and says so.
    for train, serve in ((eagle3, full), (full, eagle3)):
        result = compare(train, serve)
        assert result.verdict == "PASS", result.findings


def test_bad_prompts_and_settings(llama, tmp_path):
    out = tmp_path / "x.h5"
    cases = [
        ([Prompt("a", [1]), Prompt("a", [2])], {}, "appears twice"),
        ([Prompt("a", [600])], {}, "outside the model's vocabulary of 512"),
        ([Prompt("a", [])], {}, "no tokens"),
        ([], {}, "no prompts"),
        ([Prompt("a", [1])], {"batch_size": 0}, "batch size"),
        ([Prompt("a", [1])], {"padding_side": "middle"}, "padding side"),
        ([Prompt("a", [1])], {"dtype": "int8"}, "dtype"),
        ([Prompt("a", [1] * 1025)], {}, "more than the model's max_position_embeddings"),
    ]
    for prompts, kwargs, message in cases:
        with pytest.raises(BadInput, match=message):
            capture_hf(llama, prompts, out, progress=False, **kwargs)


def test_bf16_capture_and_provenance_with_simulated_quant(tmp_path):
    model = simulate_weight_quant(tiny_llama(num_layers=4), "int4", group_size=32)
    path = capture_hf(model, random_prompts(3), tmp_path / "q.h5", dtype="bf16", layers="eagle3",
                      provenance={"model": "tiny", "capture": {"chat_template_sha256": "abc"}}, progress=False)
    with open_dump(path) as d:
        assert all(c.dtype == "bfloat16" for c in d.streams.values())
        p = d.provenance
        assert p.engine == "transformers" and p.engine_version and p.model == "tiny" and p.dtype == "bfloat16"
        assert p.quantization == "int4-w4a16-g32 (simulated RTN)"
        assert p.capture["chat_template_sha256"] == "abc" and p.capture["layers"] == [2, 2, 1]
        assert p.capture["simulated_quant"]["group_size"] == 32 and p.capture["batch_size"] == 8


class FailAfter(torch.nn.Module):
    """A model whose decoder counts the samples it is run on and fails on the k-th forward (an interruption)."""

    def __init__(self, model, fail_on_call):
        super().__init__()
        self.inner, self.fail_on_call, self.calls, self.samples = model, fail_on_call, 0, 0
        self.config, self.layers, self.norm = model.config, model.model.layers, model.model.norm

    def get_decoder(self):
        return self  # the capture runs the decoder alone: this forward is the one it calls

    def get_input_embeddings(self):
        return self.inner.get_input_embeddings()

    def forward(self, **kwargs):
        self.calls += 1
        if self.calls == self.fail_on_call:
            raise KeyboardInterrupt
        self.samples += kwargs["input_ids"].shape[0]
        return self.inner.model(**kwargs)


class OutOfMemory(FailAfter):
    def forward(self, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 80.00 GiB")


def test_out_of_memory_keeps_the_samples_and_says_how_to_go_on(llama, tmp_path):
    with pytest.raises(BadInput, match=r"smaller --batch-size .* --resume"):
        capture_hf(OutOfMemory(llama, 0), random_prompts(3), tmp_path / "oom.h5", progress=False)
    assert (tmp_path / "oom.h5.partial").is_dir()


def durable_samples(partial) -> int:
    """Samples an interrupted capture has made durable: the whole lines of its journal."""
    journal = partial / "journal"
    return journal.read_bytes().count(b"\n") if journal.exists() else 0


def test_samples_are_made_durable_every_flush_seconds(llama, tmp_path):
    with pytest.raises(KeyboardInterrupt):
        capture_hf(FailAfter(llama, fail_on_call=4), random_prompts(20), tmp_path / "t.h5", batch_size=4,
                   flush_seconds=0, shard_tokens=10**9, progress=False)
    assert durable_samples(tmp_path / "t.h5.partial") == 12  # each batch at once, before the failure


def test_resume_skips_finished_samples(llama, tmp_path):
    prompts = random_prompts(20, seed=3)
    out = tmp_path / "r.h5"
    interrupted = FailAfter(llama, fail_on_call=4)
    with pytest.raises(KeyboardInterrupt):
        capture_hf(interrupted, prompts, out, batch_size=4, progress=False)
    assert not out.exists() and (tmp_path / "r.h5.partial").is_dir()
    assert durable_samples(tmp_path / "r.h5.partial") == 12  # the three batches, kept on the way out
    with pytest.raises(BadInput, match="--resume"):
        capture_hf(llama, prompts, out, batch_size=4, progress=False)
    with pytest.raises(BadInput, match="same settings"):
        capture_hf(llama, prompts, out, layers="eagle3", batch_size=4, resume=True, progress=False)
    resumed = FailAfter(llama, fail_on_call=-1)
    capture_hf(resumed, prompts, out, batch_size=4, resume=True, progress=False)
    assert resumed.samples == 20 - 12  # three batches of four were written before the interruption
    straight = capture_hf(llama, prompts, tmp_path / "s.h5", batch_size=4, progress=False)
    assert_same_dump(out, straight)


def assert_same_dump(path_a, path_b, atol=0.0):
    with open_dump(path_a) as a, open_dump(path_b) as b:
        assert sorted(a.sample_ids) == sorted(b.sample_ids) and len(set(a.sample_ids)) == a.num_samples
        for sid in b.sample_ids:
            np.testing.assert_array_equal(a.token_ids(sid), b.token_ids(sid))
            for name in b.streams:
                np.testing.assert_allclose(a.states(sid, name), b.states(sid, name), atol=atol, rtol=0)


# -- the command line ----------------------------------------------------------------------------


# One thread a process: the tests share two cores, and torch's thread pools fight under contention.
SUBPROCESS_ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def run_cli(*args):
    """The real command line in a fresh process (exit code, stderr) ."""
    return subprocess.run([sys.executable, "-m", "alignprobe.cli.main", *map(str, args)], capture_output=True,
                          text=True, timeout=300, env=SUBPROCESS_ENV)


def run_cli_here(*args):
    """The command line in this process (fast): click's runner keeps exit code and stderr apart."""
    from click.testing import CliRunner

    from alignprobe.cli.main import cli

    return CliRunner().invoke(cli, [str(a) for a in args])


def test_cli_end_to_end_with_text_and_chat_prompts(model_dir, tmp_path):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"id": "a", "text": "hi there"}) + "\n"
                       + json.dumps({"id": "b", "messages": [{"role": "user", "content": "why?"}]}) + "\n")
    out = tmp_path / "o.h5"
    r = run_cli("capture", "hf", "--model", model_dir, "--prompts", prompts, "--out", out, "--dtype", "fp32",
                "--layers", "0,2,4", "--simulate-quant", "fp8")
    assert r.returncode == 0, r.stderr
    model, tokenizer = load_hf_model(model_dir, dtype="fp32")
    simulate_weight_quant(model, "fp8")
    with open_dump(out) as d:
        assert d.sample_ids == ["a", "b"] and d.streams["layers"].hf_indices == (0, 2, 4)
        assert d.provenance.capture["chat_template_sha256"] and d.provenance.quantization.startswith("fp8")
        assert d.token_ids("a").tolist() == tokenizer("hi there")["input_ids"]
        hf = reference_states(model, d.token_ids("b").tolist())
        np.testing.assert_allclose(d.states("b", "layers"), np.concatenate([hf[0], hf[2], hf[4]], 1), atol=2e-5)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--model", "{tmp}/none"], "not a local model directory"),
        (["--prompts", "{tmp}/none.jsonl"], "no such prompt file"),
        (["--layers", "2,x"], "comma-separated HF indices"),
        (["--layers", "2,99"], "outside 0..4"),
        (["--dtype", "int3"], "dtype"),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(model_dir, tmp_path, args, message):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"input_ids": [1, 2]}) + "\n")
    base = {"--model": model_dir, "--prompts": str(prompts), "--out": str(tmp_path / "o.h5")}
    for flag, value in zip(args[::2], args[1::2]):
        base[flag] = value.format(tmp=tmp_path)
    r = run_cli_here("capture", "hf", *[x for kv in base.items() for x in kv])
    assert r.exit_code == 2, r.stderr
    lines = [line for line in r.stderr.splitlines() if line.startswith("alignprobe:")]
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in r.stderr


def test_missing_transformers_is_bad_input(monkeypatch, model_dir):
    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(BadInput, match=r"pip install 'alignprobe\[hf\]'"):
        load_hf_model(model_dir)


@pytest.mark.slow
def test_thousand_prompts_progress_bar_and_resume_after_kill_9(model_dir, tmp_path):
    g = torch.Generator().manual_seed(5)
    token_lists = [torch.randint(0, 256, (int(n),), generator=g).tolist() for n in torch.randint(2, 12, (1000,), generator=g)]
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"input_ids": t}) + "\n" for t in token_lists))
    out = tmp_path / "big.h5"

    def args(batch_size):
        return ["capture", "hf", "--model", model_dir, "--prompts", prompts, "--out", out, "--dtype", "fp32",
                "--batch-size", batch_size, "--shard-tokens", "200"]

    proc = subprocess.Popen([sys.executable, "-m", "alignprobe.cli.main", *map(str, args(1))],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=SUBPROCESS_ENV)
    partial = tmp_path / "big.h5.partial"
    deadline = time.time() + 120
    started = time.time()
    while time.time() < deadline and durable_samples(partial) < 60:
        assert proc.poll() is None, "the capture finished before it could be killed"
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL and not out.exists()
    durable_before = durable_samples(partial)
    assert durable_before >= 60
    print(f"killed after {time.time() - started:.1f} s with {durable_before} samples durable")

    # The batch size is free to change on resume (only the streams must match): finish in big batches.
    r = run_cli(*args(16), "--resume")
    assert r.returncode == 0, r.stderr
    print(f"resumed by {time.time() - started:.1f} s")
    assert "1000/1000" in r.stderr  # tqdm's bar, counting the samples found on disk
    with open_dump(out) as d:
        assert d.num_samples == 1000
    model, _ = load_hf_model(model_dir, dtype="fp32")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matmuls: one thread is faster than two fighting other processes
    try:
        straight = capture_hf(model, prompts_from_token_lists(token_lists), tmp_path / "straight.h5", batch_size=64,
                              progress=False)
    finally:
        torch.set_num_threads(threads)
    print(f"straight capture by {time.time() - started:.1f} s")
    assert_same_dump(out, straight, atol=1e-5)


def test_saved_deepseek_model_dir_loads_the_same_model(tmp_path):
    path = save_tiny_model_dir(tmp_path / "ds", "deepseek_v3", num_layers=3, seed=4)
    model, tokenizer = load_hf_model(path, dtype="fp32")
    assert type(model).__name__ == "DeepseekV3ForCausalLM" and tokenizer is not None
    reference = tiny_deepseek_v3(num_layers=3, seed=4)
    ids = tokenizer("same weights?")["input_ids"]
    for mine, theirs in zip(reference_states(model, ids), reference_states(reference, ids)):
        np.testing.assert_array_equal(mine, theirs)


def test_full_disk_is_one_line_exit_2_and_the_capture_resumes(model_dir, tmp_path, monkeypatch):
    import errno

    import alignprobe.dump.planned_writer as planned_writer

    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"id": f"p{i}", "input_ids": [1, 2, 3 + i]}) + "\n" for i in range(4)))
    out = tmp_path / "o.h5"
    real = planned_writer.pwrite_all
    calls = [0]

    def full_after_two(fd, buffers, offset):
        calls[0] += 1
        if calls[0] > 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, buffers, offset)

    monkeypatch.setattr(planned_writer, "pwrite_all", full_after_two)
    args = ("capture", "hf", "--model", model_dir, "--prompts", prompts, "--out", out, "--batch-size", "1")
    r = run_cli_here(*args)
    assert r.exit_code == 2, r.stderr
    lines = [line for line in r.stderr.splitlines() if line.startswith("alignprobe:")]
    assert len(lines) == 1 and "No space left on device" in lines[0] and "--resume" in lines[0]
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    monkeypatch.setattr(planned_writer, "pwrite_all", real)
    assert run_cli_here(*args, "--resume").exit_code == 0
    with open_dump(out) as d:
        assert d.sample_ids == ["p0", "p1", "p2", "p3"]


def test_device_map_load_gives_the_one_device_states(model_dir, tmp_path):
    pytest.importorskip("accelerate")
    prompts = random_prompts(4, seed=5)
    plain, _ = load_hf_model(model_dir, dtype="fp32", device="cpu", quiet=True)
    # with no GPU accelerate places everything on the CPU (and sets no hf_device_map): the load path
    # and the states are checked here, the GPU placement by benchmarks/gpu_capture_hf.py
    mapped, _ = load_hf_model(model_dir, dtype="fp32", device_map="auto", max_memory={"cpu": "2GiB"}, quiet=True)
    a = capture_hf(plain, prompts, tmp_path / "a.h5", layers="eagle3", progress=False)
    b = capture_hf(mapped, prompts, tmp_path / "b.h5", layers="eagle3", progress=False)
    with open_dump(a) as da, open_dump(b) as db:
        for p in prompts:
            for stream in da.streams:
                np.testing.assert_array_equal(da.states(p.sample_id, stream), db.states(p.sample_id, stream))


@pytest.mark.parametrize("kwargs, words", [
    ({"device": "cpu", "device_map": "auto"}, "not both"),
    ({"device_map": "everywhere"}, "not one of"),
    ({"max_memory": {0: "1GiB"}}, "need --device-map"),
])
def test_placement_mistakes_are_one_line(model_dir, kwargs, words):
    with pytest.raises(BadInput, match=words):
        load_hf_model(model_dir, quiet=True, **kwargs)


def test_max_memory_parses_device_size_pairs():
    from alignprobe.probes.hf import parse_max_memory

    assert parse_max_memory("0=120GiB, 1=100GiB,cpu=400GiB") == {0: "120GiB", 1: "100GiB", "cpu": "400GiB"}
    assert parse_max_memory(None) is None
    for bad in ("0:120GiB", "gpu=1GiB", "0=lots"):
        with pytest.raises(BadInput):
            parse_max_memory(bad)


@pytest.mark.parametrize("device_map, expected", [
    ({"model.embed_tokens": 0, "model.layers": 1, "lm_head": 1}, "cuda:0"),
    ({"model.embed_tokens": "cpu", "model.layers.0": 1, "model.layers.1": "cpu"}, "cuda:1"),
    ({"": "cpu"}, "cpu"),
])
def test_token_ids_go_to_the_embedding_execution_device(llama, device_map, expected):
    from alignprobe.probes.hf import input_device

    class Mapped:
        hf_device_map = device_map

    assert str(input_device(Mapped())) == expected
