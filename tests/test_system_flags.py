"""The system table: every row is a system conventions.py knows, a provenance names its row, and the
ids a row's fix gives are the ones conventions.map_layer_ids reads back as the HF indices asked for."""

import pytest

from alignprobe.conventions import SYSTEMS, map_layer_ids
from alignprobe.system_flags import SERVE, SYSTEM_FLAGS, TRAIN, ids_in, system_of


def test_every_row_is_a_known_system_with_its_words_and_source():
    assert {"sglang", "vllm", "trtllm", "llamacpp", "lmdeploy", "specforge", "speculators", "modelopt-hf",
            "modelopt-vllm", "hf"} <= set(SYSTEM_FLAGS) <= set(SYSTEMS)
    for key, flags in SYSTEM_FLAGS.items():
        assert flags.role in (SERVE, TRAIN) and flags.aux_ids and flags.numbering and flags.source, key
        assert bool(flags.eagle3) == (flags.role == SERVE), key  # a serving engine says how EAGLE-3 is picked


@pytest.mark.parametrize("engine, system", [
    ("sglang", "sglang"), ("vllm", "vllm"), ("vllm-lens", "vllm"), ("vllm (simulated by transformers)", "vllm"),
    ("transformers", "hf"), ("specforge", "specforge"), ("speculators", "speculators"),
    ("TensorRT-LLM 1.2", "trtllm"), ("trtllm", "trtllm"), ("llama.cpp b7000", "llamacpp"), ("lmdeploy", "lmdeploy"),
    ("modelopt", ""), ("test", ""), ("", "")])
def test_a_provenance_engine_names_its_row(engine, system):
    assert system_of({"engine": engine}) == system


def test_an_import_names_its_system_outright():
    # Model-Optimizer's two backends share one format: the import records which convention it read
    assert system_of({"engine": "modelopt", "capture": {"system": "modelopt-vllm"}}) == "modelopt-vllm"
    assert system_of({"engine": "modelopt", "capture": {"system": "modelopt-hf"}}) == "modelopt-hf"


@pytest.mark.parametrize("system", sorted(set(SYSTEM_FLAGS) - {"lmdeploy"}))
@pytest.mark.parametrize("num_layers", [8, 12, 61])
def test_the_ids_given_capture_the_indices_asked_for(system, num_layers):
    for h in range(num_layers + 1):
        (k,) = ids_in(system, [h], num_layers)
        if k is None:
            continue
        assert map_layer_ids(system, [k], num_layers).hf_indices == (h,), (system, h, k)


def test_ids_in_each_systems_own_numbering():
    assert ids_in("vllm", [2, 4, 8], 8) == [2, 4, 8]
    assert ids_in("llamacpp", [2, 4, 8], 8) == [2, 4, 8]
    assert ids_in("sglang", [2, 4, 5], 8) == [1, 3, 4]
    assert ids_in("trtllm", [2, 4, 5], 8) == [1, 3, 4]
    assert ids_in("specforge", [2, 4, 5], 8) == [1, 3, 4]
    assert ids_in("sglang", [8], 8) == [None]  # SGLang captures HF[1]..HF[N-1] only
