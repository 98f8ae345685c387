"""Planted-fault dumps built once per test process and shared by the test modules that need them."""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile

# Few training steps: the tests need real architectures and trained-ish states, not a good model.
TRAIN_STEPS = 8
NUM_LAYERS = 8
HIDDEN = 64


@functools.lru_cache(maxsize=None)
def scenario_paths(arch: str) -> dict[str, str]:
    from alignprobe.demo.scenarios import build_scenarios

    out = tempfile.mkdtemp(prefix=f"alignprobe-test-{arch}-")
    atexit.register(shutil.rmtree, out, True)
    return build_scenarios(out, arch=arch, num_layers=NUM_LAYERS, hidden_size=HIDDEN, train_steps=TRAIN_STEPS)


@functools.lru_cache(maxsize=None)
def scenario_result(arch: str, name: str):
    from alignprobe.compare import compare

    paths = scenario_paths(arch)
    return compare(paths["train"], paths[name])
