"""``capture hf`` on corrupt model folders (truncated or corrupt safetensors, a junk
pytorch_model.bin, a config of wrong types or sizes), binary-junk prompts, --device values torch
knows but alignprobe cannot use (mps, meta); an engine's own crash named in one line; no
transformers loading bar with --quiet; warnings held back before a refusal."""

from __future__ import annotations

import json
import os
import shutil
import warnings

import pytest
from hypothesis import given, settings, strategies as st

from alignprobe.demo.tiny_tokenizer import save_tiny_model_dir
from alignprobe.errors import BadInput
from bad_input_helpers import FUZZ, assert_refused, invoke


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return save_tiny_model_dir(tmp_path_factory.mktemp("m") / "tiny", "llama", num_layers=2, hidden_size=32)


@pytest.fixture
def prompts(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"input_ids": [1, 2, 3]}) + "\n")
    return path


def broken_copy(model_dir, tmp_path, damage):
    folder = tmp_path / "broken-model"
    shutil.copytree(model_dir, folder)
    damage(folder)
    return folder


def truncate_weights(folder):
    path = os.path.join(folder, "model.safetensors")
    data = open(path, "rb").read()
    open(path, "wb").write(data[: len(data) // 3])


def corrupt_header(folder):
    path = os.path.join(folder, "model.safetensors")
    data = bytearray(open(path, "rb").read())
    data[8:40] = b"{not a header at all" + b"!" * 12
    open(path, "wb").write(bytes(data))


def junk_bin(folder):
    os.remove(os.path.join(folder, "model.safetensors"))
    open(os.path.join(folder, "pytorch_model.bin"), "wb").write(b"\x80\x04junk" * 100)


def edit_config(**changes):
    def damage(folder):
        path = os.path.join(folder, "config.json")
        config = json.load(open(path))
        config.update(changes)
        json.dump(config, open(path, "w"))
    return damage


DAMAGES = {
    "truncated safetensors": truncate_weights,
    "corrupt safetensors header": corrupt_header,
    "junk pytorch_model.bin": junk_bin,
    "hidden_size a string": edit_config(hidden_size="wide"),
    "num_hidden_layers a list": edit_config(num_hidden_layers=[2]),
    "hidden_size mismatch": edit_config(hidden_size=48, intermediate_size=96),
    "vocab mismatch": edit_config(vocab_size=7),
    "negative heads": edit_config(num_attention_heads=-2),
}


@pytest.mark.slow  # transformers loads (or fails to load) a model for each: ~1 s a case
@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_corrupt_model_folders_are_one_line(model_dir, tmp_path, prompts, damage):
    folder = broken_copy(model_dir, tmp_path, DAMAGES[damage])
    assert_refused(["capture", "hf", "--model", folder, "--prompts", prompts, "--out", tmp_path / "o.h5",
                   "--quiet", "--dtype", "fp32", "--aux-layers", "0,1,2"], [folder, prompts])
    assert not os.path.exists(tmp_path / "o.h5")


@FUZZ
@given(junk=st.binary(min_size=1, max_size=200))
def test_binary_junk_prompts_are_one_line(tmp_path_factory, junk):
    folder = tmp_path_factory.mktemp("j")
    path = folder / "p.jsonl"
    path.write_bytes(b"\xff" + junk)
    # capture sglang reads the prompts before it ever calls the server
    assert_refused(["capture", "sglang", "--url", "http://127.0.0.1:9", "--prompts", path, "--out", folder / "o.h5"],
                   [path])


@settings(FUZZ, max_examples=30)
@given(device=st.sampled_from(["mps", "meta", "xpu", "cuda:99", "cpu:x", "gpu", "", "  ", "cuda:-1", "hpu", "mtia"]),
       command=st.sampled_from(["compare", "checked"]))
def test_devices_torch_knows_but_we_cannot_use(tmp_path_factory, device, command):
    from alignprobe.devices import checked_device

    if command == "checked":
        with pytest.raises(BadInput) as info:
            checked_device(device)
        assert "\n" not in str(info.value)
        return
    from dump_helpers import H, claims, random_samples, write

    folder = tmp_path_factory.mktemp("d")
    a = write(folder / "a.h5", random_samples([5], {"aux": 3 * H, "final": H}), claims())
    assert_refused(["compare", "--train-dump", a, "--serve-dump", a, "--device", device], [a], match="--device")


@pytest.mark.slow
@pytest.mark.parametrize("device", ["mps", "meta", "cuda:7"])
def test_capture_hf_devices(model_dir, tmp_path, prompts, device):
    assert_refused(["capture", "hf", "--model", model_dir, "--prompts", prompts, "--out", tmp_path / "o.h5",
                    "--quiet", "--device", device, "--aux-layers", "0,1,2"], [model_dir, prompts], match="--device")


@pytest.mark.slow
def test_engine_crash_is_one_line_naming_the_engine(model_dir, tmp_path, prompts, monkeypatch):
    import transformers

    def crash(self, *args, **kwargs):
        raise RuntimeError("CUDA error: an illegal memory access was encountered\nmore detail on a second line")

    # capture hf runs the decoder alone (no LM head): the crash is in LlamaModel.forward
    monkeypatch.setattr(transformers.LlamaModel, "forward", crash)
    line = assert_refused(["capture", "hf", "--model", model_dir, "--prompts", prompts, "--out", tmp_path / "o.h5",
                           "--quiet", "--dtype", "fp32", "--aux-layers", "0,1,2"], [model_dir, prompts])
    assert line.startswith("alignprobe: transformers failed while running the model forward: RuntimeError: CUDA error")


@pytest.mark.slow
def test_quiet_capture_prints_nothing_on_stderr(model_dir, tmp_path, prompts):
    run = invoke(["capture", "hf", "--model", model_dir, "--prompts", prompts, "--out", tmp_path / "o.h5",
                  "--quiet", "--dtype", "fp32", "--aux-layers", "0,1,2"])
    assert run.exit_code == 0, run.stderr
    assert run.stderr == "", run.stderr  # no weight-loading bar, no transformers logging, no warnings


def test_warnings_before_a_refusal_are_held_back(tmp_path, monkeypatch):
    import numpy as np

    from alignprobe.cli import inspect as inspect_command

    def warn_then_refuse(path):
        np.float32(1e38) * np.float32(10)  # numpy: overflow encountered (RuntimeWarning)
        warnings.warn("TypedStorage is deprecated", UserWarning, stacklevel=2)  # what torch says on some loads
        raise BadInput(f"{path}: refused")

    monkeypatch.setattr(inspect_command, "inspect_dump", warn_then_refuse)
    assert_refused(["inspect", tmp_path / "x.h5"], match="refused")


@pytest.mark.slow
def test_default_aux_layers_of_a_model_too_small_are_one_line(model_dir, tmp_path, prompts):
    assert_refused(["capture", "hf", "--model", model_dir, "--prompts", prompts, "--out", tmp_path / "o.h5",
                    "--quiet"], [model_dir, prompts], match="--aux-layers")


class _CrashingEngine:
    """Stands in for sglang.Engine / vllm.LLM: raises as a real engine does when its kernel dies."""

    def generate(self, *args, **kwargs):
        raise RuntimeError("CUDA error: device-side assert triggered\nCompile with TORCH_USE_CUDA_DSA")

    def get_server_info(self):
        raise ValueError("scheduler died")


@pytest.mark.parametrize("call", ["generate", "server_info"])
def test_sglang_engine_crash_names_sglang(call):
    from alignprobe.engine_errors import EngineFailed
    from alignprobe.probes.sglang_engine import EngineBackend

    backend = EngineBackend(_CrashingEngine())
    with pytest.raises(EngineFailed) as info:
        backend.generate([1, 2], 0) if call == "generate" else backend.server_info()
    line = str(info.value)
    assert line.startswith("SGLang failed while") and "\n" not in line and info.value.exit_code == 2
