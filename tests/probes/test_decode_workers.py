"""Answers decoded in worker processes are the ones decoded here, bit for bit and error for error;
a worker that dies leaves its answers to this process; a capture through workers writes the rows
the server sent."""

import ast
import glob
import json
import subprocess
import sys
import time

import httpx
import msgspec
import numpy as np
import pytest

from alignprobe.dump import open_dump
from alignprobe.probes import decode_workers, sglang_http
from alignprobe.probes.decode_workers import MIN_WORKER_BYTES, DecodeWorkers, worker_count, worker_env
from alignprobe.probes.prompts import Prompt
from alignprobe.probes.sglang_decode import NotAnAnswer, decode_generate

WIDTH = 3000  # ~60 KB of JSON a token: 40 tokens pass MIN_WORKER_BYTES


def answer(rows, cached_tokens=0, **meta) -> bytes:
    states = [rows.tolist() if isinstance(rows, np.ndarray) else rows]
    return msgspec.json.encode({"text": "x", "meta_info": {"hidden_states": states, "cached_tokens": cached_tokens,
                                                           **meta}})


def big_rows(seed=0, tokens=40):
    return np.random.default_rng(seed).standard_normal((tokens, WIDTH), dtype=np.float32)


@pytest.fixture(scope="module")
def workers():
    pool = DecodeWorkers(1)
    yield pool
    pool.close()


def started(pool, content):
    """Decode until the worker is up (it imports for about a second; answers meanwhile are decoded here)."""
    for _ in range(200):
        pool.decode(content)
        worker = pool._idle.get()
        pool._idle.put(worker)
        if worker.ready():
            return worker
    raise AssertionError("the worker never started")


def outcome(decode, content):
    try:
        return decode(content)
    except NotAnAnswer as exc:
        return {"meta_info": {"hidden_states": f"not an answer: {exc}", "cached_tokens": None}}


def assert_same(got, expected):
    assert got["meta_info"]["cached_tokens"] == expected["meta_info"]["cached_tokens"]
    old, new = expected["meta_info"]["hidden_states"], got["meta_info"]["hidden_states"]
    if not old or isinstance(old, str) or old[0] is None:
        assert new == old
        return
    assert new[0].dtype == np.float32 and new[0].shape == old[0].shape
    assert np.array_equal(new[0].view(np.uint32), old[0].view(np.uint32))


def test_a_worker_decodes_what_this_process_decodes(workers):
    rows = big_rows()
    content = answer(rows, cached_tokens=4)
    assert len(content) > MIN_WORKER_BYTES
    started(workers, content)
    rows[3, 7] = np.float32(-0.0)
    rows[5, 1] = np.float32(1e-45)  # a float32 subnormal
    cases = [answer(rows, cached_tokens=4), answer(big_rows(1, tokens=60)),  # larger: the files grow
             answer(rows[0]),  # one vector
             answer(rows).replace(b"[[", b"[[null,", 1),  # a null: ragged here, so no rows
             answer([[None] * WIDTH] * 40),  # nulls (NaN): the msgspec decoder's rows
             answer(rows)[:-9],  # cut off: not an answer
             answer([[]] * 400_000),  # rows of no values
             msgspec.json.encode({"meta_info": {"hidden_states": [], "pad": "x" * MIN_WORKER_BYTES}})]
    for content in cases:
        assert_same(outcome(workers.decode, content), outcome(decode_generate, content))


def test_not_an_answer_is_the_same_error(workers):
    content = b"<html>" + b" " * MIN_WORKER_BYTES
    with pytest.raises(NotAnAnswer) as here:
        decode_generate(content)
    started(workers, answer(big_rows()))
    with pytest.raises(NotAnAnswer) as there:
        workers.decode(content)
    assert str(there.value) == str(here.value)


def test_a_dead_worker_leaves_its_answers_here():
    pool = DecodeWorkers(1)
    try:
        content = answer(big_rows())
        worker = started(pool, content)
        worker._process.kill()
        worker._process.wait()
        assert_same(pool.decode(content), decode_generate(content))
        assert pool._alive == 0
        assert_same(pool.decode(content), decode_generate(content))  # no worker left: decoded here
    finally:
        pool.close()


def test_full_shared_memory_leaves_the_answers_here(monkeypatch):
    pool = DecodeWorkers(1)
    try:
        content = answer(big_rows())
        started(pool, content)

        def full(fd, offset, size):
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(decode_workers.os, "posix_fallocate", full)
        assert_same(pool.decode(answer(big_rows(tokens=80))), decode_generate(answer(big_rows(tokens=80))))
        assert pool._alive == 0
    finally:
        pool.close()


def test_no_file_is_left_behind():
    before = set(glob.glob("/dev/shm/alignprobe-decode-*"))
    pool = DecodeWorkers(1)
    started(pool, answer(big_rows()))
    assert set(glob.glob("/dev/shm/alignprobe-decode-*")) == before  # unlinked at once
    pool.close()


def test_small_answers_and_no_workers_start_no_process():
    pool = DecodeWorkers(0)
    content = answer(big_rows())
    assert_same(pool.decode(content), decode_generate(content))
    assert pool._alive == 0
    small = DecodeWorkers(1)
    small.decode(answer(big_rows(tokens=2)))
    assert small._alive == 0 and not small._started
    small.close()


@pytest.mark.parametrize("in_flight, cores, expected", [(2, 2, 0), (1, 1, 0), (2, 3, 1), (2, 16, 2), (8, 16, 8),
                                                         (32, 16, 14)])
def test_worker_count_leaves_two_cores(in_flight, cores, expected):
    assert worker_count(in_flight, cores) == expected


def test_a_capture_through_workers_writes_the_rows_sent(tmp_path, monkeypatch):
    prompts = [Prompt(f"p{i}", [i + 1] * 40) for i in range(6)]
    sent = {p.token_ids[0]: big_rows(i) for i, p in enumerate(prompts)}

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path in ("/server_info", "/get_server_info"):
            return httpx.Response(200, json={"version": "test", "enable_return_hidden_states": True})
        body = json.loads(request.content)
        return httpx.Response(200, content=answer(sent[body["input_ids"][0]]))

    monkeypatch.setattr(sglang_http, "worker_count", lambda in_flight: 1)
    real_ready, real_decode, decoded = decode_workers._Worker.ready, decode_workers._Worker.decode, []

    def ready_at_once(worker):  # wait for the worker's start, so that every answer goes through it
        while not real_ready(worker):
            time.sleep(0.05)
        return True

    monkeypatch.setattr(decode_workers._Worker, "ready", ready_at_once)
    monkeypatch.setattr(decode_workers._Worker, "decode", lambda w, content: decoded.append(1) or real_decode(w, content))
    client = httpx.Client(transport=httpx.MockTransport(handler))
    out = sglang_http.capture_sglang("http://127.0.0.1:1", prompts, tmp_path / "serve.h5", client=client,
                                     num_layers=4, hidden_size=WIDTH, progress=False, in_flight=2)
    assert len(decoded) == len(prompts)
    with open_dump(out) as dump:
        for prompt in prompts:
            assert np.array_equal(dump.states(prompt.sample_id, "hidden_states"), sent[prompt.token_ids[0]])


@pytest.mark.skipif(sys.version_info < (3, 11), reason="PYTHONSAFEPATH came with Python 3.11")
def test_a_worker_does_not_import_from_its_working_directory(tmp_path):
    # `python -m` would put the working directory first: a source checkout there (an alignprobe/
    # without its probes) would shadow the package this process runs
    shown = subprocess.run([sys.executable, "-m", "site"], env=worker_env(), cwd=tmp_path, capture_output=True,
                           text=True, check=True).stdout
    path = ast.literal_eval("[" + shown.split("sys.path = [", 1)[1].split("]", 1)[0] + "]")
    assert path and str(tmp_path) not in path and "" not in path
