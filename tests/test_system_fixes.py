"""Fix texts name the side's own system: its flag, its ids in its own numbering; a system the table does
not know gets the generic text. End to end, a compare of one shifted capture under each engine's
provenance gives each engine's own fix."""

import pytest

from alignprobe.compare import compare
from alignprobe.dump import Provenance
from alignprobe.system_fixes import (GENERIC_WRONG_TAPS, aux_on_fix, eagle3_fix, eagle_fix, missing_tap_fix,
                                     offset_fix, train_ids_fix, wrong_taps_fix)
from compare_helpers import AUX, N, aux_claim, make_samples, write_serve, write_train

# a word of each engine's switch that no other engine's text holds (SGLang and LMDeploy share --speculative-algorithm)
OTHERS = {"sglang": "--speculative-draft-model-path", "vllm": "--speculative-config", "trtllm": "decoding_type",
          "llamacpp": "--spec-type", "lmdeploy": "--speculative-draft-model DRAFTER"}


def _p(engine: str) -> dict:
    return {"engine": engine}


@pytest.mark.parametrize("engine, own", [
    ("sglang", "--speculative-algorithm EAGLE3"), ("vllm", '"method": "eagle3"'),
    ("trtllm", 'decoding_type "Eagle3"'), ("llama.cpp", "--spec-type draft-eagle3"),
    ("lmdeploy", "--speculative-algorithm eagle3")])
def test_eagle3_fix_names_the_engines_own_switch_and_no_other(engine, own):
    fix = eagle3_fix(_p(engine))
    assert own in fix and "1.0" in fix, fix
    key = "llamacpp" if engine == "llama.cpp" else engine
    assert not [flag for other, flag in OTHERS.items() if other != key and flag in fix], fix


def test_a_system_not_known_gets_the_generic_texts():
    for fix in (eagle3_fix(_p("test")), aux_on_fix(_p("")), eagle_fix(_p("mystery"))):
        assert "--speculative-algorithm" in fix
    assert eagle3_fix(_p("transformers")) == eagle3_fix(_p("test"))  # an extractor picks no algorithm
    assert wrong_taps_fix(_p("test"), N) == GENERIC_WRONG_TAPS
    assert "Shift the engine's aux layer ids by -1" in offset_fix(1, [2, 4, 5], 8, _p("test"), _p(""))[0]


@pytest.mark.parametrize("engine, ids, where", [
    ("vllm", "[2, 4, 5]", "eagle_aux_hidden_state_layer_ids"), ("sglang", "[1, 3, 4]", "eagle_config"),
    ("trtllm", "[1, 3, 4]", "eagle3_layers_to_capture"), ("llama.cpp", "[2, 4, 5]", "eagle3.extract_layers")])
def test_offset_fix_gives_the_ids_in_the_engines_own_numbering(engine, ids, where):
    fix, cause = offset_fix(-1, [2, 4, 5], 8, _p(engine), _p("specforge"))
    assert f"to {ids}" in fix and where in fix and "captures HF[2, 4, 5]" in fix, fix
    assert "specforge" in cause  # the training side's numbering is named beside the engine's


def test_a_llamacpp_offset_is_fixed_in_the_drafter_gguf():
    fix, cause = offset_fix(-1, [2, 4, 5], 8, _p("llama.cpp"), _p("transformers"))
    assert "eagle3.target_layers" in fix and "convert_hf_to_gguf.py" in fix and "top-level" in fix, fix
    assert "vLLM" not in fix and "SGLang" not in fix and "input of layer k" in cause


def test_the_final_layer_in_each_engines_words():
    fix = offset_fix(-1, [2, 4, 8], 8, _p("vllm"), _p(""))[0]
    assert "to [2, 4, 8]" in fix  # vLLM's id N is the pre-norm final
    fix = offset_fix(-1, [2, 4, 8], 8, _p("sglang"), _p(""))[0]
    assert "cannot capture HF[8]" in fix and "HF[1]..HF[N-1]" in fix, fix
    assert "id n_layer" in missing_tap_fix(_p("llama.cpp"), ["HF[8]"], 8)
    assert "id -1" in missing_tap_fix(_p("trtllm"), ["HF[8]"], 8)


def test_an_engine_with_fixed_taps_asks_to_train_on_them():
    for fix in (offset_fix(1, [2, 16, 29], 32, _p("lmdeploy"), _p("specforge"))[0], wrong_taps_fix(_p("lmdeploy"), 32),
                missing_tap_fix(_p("lmdeploy"), ["HF[16]"], 32)):
        assert "LMDeploy reads no layer ids" in fix and "HF[2, 16, 29]" in fix and "trained on" in fix, fix


@pytest.fixture(scope="module")
def shifted(tmp_path_factory):
    """One train dump and a serve capture one layer shallower, under each engine's provenance."""
    root = tmp_path_factory.mktemp("fixes")
    samples = make_samples(num=6, length=40)
    train = write_train(root / "train.h5", samples)
    taps = tuple(i - 1 for i in AUX)

    def serve(engine):
        return write_serve(root / f"{engine}.h5", samples, taps=taps, claim=aux_claim(taps),
                           provenance=Provenance.here(engine=engine, dtype="float32"))
    return train, serve


@pytest.mark.parametrize("engine, words", [
    ("vllm", f"to [{', '.join(str(i) for i in AUX)}] so vLLM"),
    ("sglang", f"to [{', '.join(str(i - 1) for i in AUX)}] so SGLang"),
    ("llama.cpp", f"to [{', '.join(str(i) for i in AUX)}] so llama.cpp"),
    ("lmdeploy", "LMDeploy reads no layer ids")])
def test_compare_names_each_engines_own_fix(shifted, engine, words):
    train, serve = shifted
    f = compare(train, serve(engine)).finding("layer_offset")
    assert f is not None and f.evidence["shift"] == -1 and words in f.fix, f.fix


def test_a_training_sets_ids_read_wrongly_are_named_where_its_system_set_them():
    fix = train_ids_fix({"engine": "speculators"})
    assert "--train-layer-ids" in fix and "--target-layer-ids" in fix and "HF[k]" in fix, fix
    assert "model.aux_hidden_state_layer_ids" in train_ids_fix({"engine": "specforge"})
    assert train_ids_fix({"engine": "test"}).endswith("--drafter-config).")
