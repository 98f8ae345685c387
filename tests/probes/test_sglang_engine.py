"""probes/sglang_engine.py: the driver's answers, served to the capture loop's threads."""

import concurrent.futures
import sys
import time

import numpy as np
import pytest

from alignprobe.probes.prompts import Prompt
from alignprobe.probes.sglang_engine import DriverBackend


class _SwitchesThreadOnCollect:
    """Garbage whose collection hands the GIL to another thread, as any object with a __del__ may."""

    def __init__(self):
        self.me = self  # a cycle: freed by the collector, at a moment of its choosing

    def __del__(self):
        time.sleep(0)


@pytest.fixture
def backend(tmp_path):
    prompts = [Prompt(f"s{i}", [i, i + 1, i + 2]) for i in range(16)]
    files = []
    for i in range(len(prompts)):
        path = tmp_path / f"{i}.npy"
        np.save(path, np.full((3, 4), i, np.float32))
        files.append(str(path))
    return DriverBackend({"files": files, "cached_tokens": [0] * len(files)}, prompts, "driver"), prompts


def test_answers_come_back_whole_when_eight_threads_ask_at_once(backend):
    # numpy parses each .npy header with ast.literal_eval; on CPython 3.11 two threads parsing at
    # once raise SystemError (the CI failure this pins). Without the lock this fails within a few
    # hundred loads; the forced thread switches make the overlap likely rather than rare.
    driver, prompts = backend

    def ask(prompt):
        for _ in range(20):
            _SwitchesThreadOnCollect()
        return driver.generate(prompt.token_ids, 1)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            for _ in range(60):
                answers = list(pool.map(ask, prompts))
    finally:
        sys.setswitchinterval(interval)
    for i, answer in enumerate(answers):
        assert answer["meta_info"]["hidden_states"][0][0, 0] == i
        assert answer["meta_info"]["cached_tokens"] == 0


def test_a_prompt_the_driver_did_not_answer_is_the_engines_failure(backend):
    from alignprobe.engine_errors import EngineFailed

    driver, _ = backend
    with pytest.raises(EngineFailed, match="answered fewer prompts"):
        driver.generate([999], 1)
