"""A real llama.cpp (llama-cpp-python 0.3.36 built for the CPU, its own venv): capture llamacpp, then judge.

The tiny 8-layer Llama is converted to an F32 GGUF by the converter of the llama.cpp that runs it
(tests/helpers/llamacpp_helpers.py) and captured for the same prompts by `capture hf` (fp32) and
`capture llamacpp`. llama.cpp reads eagle3.target_layers as HF[k], so ids 2,4,5 are the training
view HF[2, 4, 5]; ids 1,3,4 (SGLang's numbering of those layers) are one layer shallow. Id 8
(n_layer) is the pre-norm final by llama.cpp's rule, but a Llama target never builds the state
EAGLE-3 reads for it (llama_get_embeddings_nextn): its slice is zeros, then stale memory.
"""

import json
import os

import numpy as np
import pytest

from engine_helpers import DEFAULT_HF, NUM_LAYERS, best_match, engine_venv, record, run_cli, slice_cosines, summarize, write_prompts
from llamacpp_helpers import HIDDEN, convert_drafter, convert_to_gguf, save_trained_model

pytestmark = [pytest.mark.engine, pytest.mark.slow]
FLOAT32 = ["--cache-type", "f32", "--flash-attn", "off"]  # float32 end to end (llama.cpp's defaults: f16, auto)


@pytest.fixture(scope="module")
def llamacpp(tmp_path_factory):
    venv = engine_venv("llamacpp")
    root = tmp_path_factory.mktemp("llamacpp")
    model = save_trained_model(str(root / "model"))
    gguf = convert_to_gguf(venv, model, str(root / "model-f32.gguf"), str(root / "convert.log"))
    prompts = write_prompts(str(root / "prompts.jsonl"))
    train = str(root / "train-fp32.h5")
    result, _ = run_cli(["capture", "hf", "--model", model, "--prompts", prompts, "--out", train, "--dtype", "fp32",
                         "--quiet"])
    assert result.exit_code == 0, result.output
    train_prenorm = str(root / "train-2-4-8-pre.h5")  # a drafter trained on vLLM's ids 2,4,8 (id 8 pre-norm)
    result, _ = run_cli(["capture", "hf", "--model", model, "--prompts", prompts, "--out", train_prenorm, "--dtype",
                         "fp32", "--aux-layers", "2,4,8", "--aux-final-norm", "pre", "--quiet"])
    assert result.exit_code == 0, result.output
    return {"root": root, "venv": venv, "python": os.path.join(venv, "bin", "python"), "gguf": gguf, "train": train,
            "train_prenorm": train_prenorm, "prompts": prompts, "model": model}


def capture(llamacpp, name, ids, extra=(), train_key="train"):
    """capture llamacpp with ``ids`` (None: the ids come from a --drafter in ``extra``), compared and recorded."""
    from alignprobe.compare.compare import compare
    from alignprobe.dump import open_dump

    out = str(llamacpp["root"] / f"{name}.h5")
    result, capture_s = run_cli(["capture", "llamacpp", "--model", llamacpp["gguf"], "--engine-python", llamacpp["python"],
                                 "--tokens-from", llamacpp[train_key], *(["--layer-ids", ",".join(map(str, ids))] if ids else []),
                                 *extra,
                                 "--out", out, "--quiet"])
    assert result.exit_code == 0, result.output
    with open_dump(out) as dump:
        provenance = dump.provenance
    verdict = compare(llamacpp[train_key], out)
    table = slice_cosines(llamacpp["train"], out)
    rel_rms = per_layer_rel_rms(llamacpp["train"], out) if "layers" in provenance.capture["streams"] else {}
    record(name, engine="llama.cpp", version=provenance.engine_version, layer_ids=provenance.capture["layer_ids"], dtype=provenance.dtype,
           kv_cache=provenance.capture["kv_cache_type"], flash_attn=provenance.capture["flash_attn"],
           start_s=provenance.capture["engine_start_s"], capture_s=round(capture_s, 2), **summarize(verdict),
           rel_rms=rel_rms, cosines=table)
    return out, verdict, table, rel_rms


def per_layer_rel_rms(train_path, serve_path):
    """rel-RMS of every llama.cpp state against the transformers state of the same HF index, all tokens."""
    from alignprobe.dump import open_dump

    h, n = HIDDEN, NUM_LAYERS
    num, den = np.zeros(n + 2), np.zeros(n + 2)
    with open_dump(train_path) as train, open_dump(serve_path) as serve:
        for key in serve.sample_ids:
            t_layers = train.states(key, "layers").astype(np.float64)
            ref = [t_layers[:, k * h:(k + 1) * h] for k in range(n)]
            ref += [train.states(key, "final_prenorm").astype(np.float64), t_layers[:, n * h:]]
            s_layers = serve.states(key, "layers").astype(np.float64)
            got = [s_layers[:, k * h:(k + 1) * h] for k in range(n)]
            got += [serve.states(key, "final_prenorm").astype(np.float64), serve.states(key, "final").astype(np.float64)]
            for i, (a, b) in enumerate(zip(got, ref)):
                num[i] += ((a - b) ** 2).sum()
                den[i] += (b ** 2).sum()
    labels = [f"HF[{k}]" for k in range(n)] + [f"HF[{n}] pre-norm", f"HF[{n}] post-norm"]
    return {label: float(f"{v:.3g}") for label, v in zip(labels, np.sqrt(num / den))}


def assert_passes_quietly(result):
    loud = [(f.code, f.title) for f in result.findings if f.severity in ("warn", "error")]
    assert result.verdict == "PASS" and not loud, loud


def test_float32_end_to_end_matches_transformers_at_every_layer(llamacpp):
    out, result, table, rel_rms = capture(llamacpp, "llamacpp-2-4-5-f32-cache-no-fa", DEFAULT_HF, FLOAT32)
    assert_passes_quietly(result)
    # every slice measures as the HF index it claims: HF[0..7], both finals, the aux taps
    assert best_match(table) == [label.split(" claims ")[1] for label in table], list(table)
    assert max(rel_rms.values()) < 1e-5, rel_rms  # measured 1.8e-7 at most: float32 round-off


def test_llamacpp_defaults_pass(llamacpp):
    # an f16 KV cache and flash attention (on, on the CPU): rel-RMS ~2e-4, as served by llama-server
    out, result, table, rel_rms = capture(llamacpp, "llamacpp-2-4-5-defaults", DEFAULT_HF)
    assert_passes_quietly(result)
    assert 1e-6 < max(rel_rms.values()) < 1e-3, rel_rms


def test_ids_one_layer_shallow_are_named(llamacpp):
    out, result, table, _ = capture(llamacpp, "llamacpp-1-3-4-aux-only", [1, 3, 4], ["--layers", "aux", *FLOAT32])
    assert best_match(table)[:3] == ["HF[1]", "HF[3]", "HF[4]"]  # aux first: the streams in name order
    assert result.verdict == "FAIL"
    offset = next(f for f in result.findings if f.code == "layer_offset")
    assert offset.evidence["shift"] == -1
    assert "eagle3.target_layers" in offset.fix and "to [2, 4, 5]" in offset.fix and "vLLM" not in offset.fix


def test_id_n_layer_on_a_llama_target_feeds_the_drafter_no_state(llamacpp):
    # what speculative.cpp reads for id 8 is llama_get_embeddings_nextn: never computed by a Llama graph
    out, result, table, _ = capture(llamacpp, "llamacpp-2-4-8-nextn", [2, 4, NUM_LAYERS], FLOAT32, "train_prenorm")
    assert result.verdict == "FAIL"
    aux = {label: max(row.values()) for label, row in table.items() if label.startswith("aux")}
    assert aux["aux[0] claims HF[2]"] > 0.99999 and aux["aux[1] claims HF[4]"] > 0.99999, aux
    assert aux[f"aux[2] claims HF[{NUM_LAYERS}] pre-norm"] < 0.5, aux  # zeros (first prompt), then no state of the prompt
    assert "degenerate" in {f.code for f in result.findings}
    assert max(table["final_prenorm[0] claims HF[8] pre-norm"].values()) > 0.99999  # the graph's l_out-7 is right


@pytest.mark.parametrize("ids, top_level, read, verdict", [
    ([2, 4, 5], True, [2, 4, 5], "PASS"),
    ([1, 3, 4], True, [1, 3, 4], "FAIL"),
    # SpecForge's layout (ids only in eagle_config): the converter writes its default, [2, N//2, N-3]
    ([1, 3, 4], False, [2, 4, 5], "PASS"),
])
def test_a_drafter_gguf_says_which_layers_llamacpp_feeds_it(llamacpp, ids, top_level, read, verdict):
    # a drafter converted by llama.cpp's own converter: llama.cpp reads its target layers itself
    from alignprobe.dump import open_dump

    name = "-".join(map(str, ids)) + ("" if top_level else "-eagle-config")
    drafter = convert_drafter(llamacpp["venv"], llamacpp["model"], ids, str(llamacpp["root"] / f"draft-{name}.gguf"),
                              str(llamacpp["root"] / "convert.log"), top_level=top_level)
    out, result, table, _ = capture(llamacpp, f"llamacpp-drafter-{name}", None, ["--drafter", drafter, "--layers", "aux",
                                                                               *FLOAT32])
    with open_dump(out) as dump:
        assert dump.provenance.capture["drafter"]["layer_ids"] == read
        assert dump.provenance.capture["drafter"]["target_hidden_size"] == HIDDEN
    assert result.verdict == verdict, [(f.code, f.title) for f in result.findings]
    if verdict == "FAIL":
        offset = next(f for f in result.findings if f.code == "layer_offset")
        assert offset.evidence["shift"] == -1 and "eagle3.target_layers" in offset.fix and "to [2, 4, 5]" in offset.fix


def test_an_engine_failure_is_one_line_naming_llamacpp(llamacpp, tmp_path):
    prompts = tmp_path / "outside.jsonl"
    prompts.write_text(json.dumps({"id": "p0", "input_ids": [1, 2, 600]}) + "\n")  # the vocabulary is 512
    out = tmp_path / "s.h5"
    result, _ = run_cli(["capture", "llamacpp", "--model", llamacpp["gguf"], "--engine-python", llamacpp["python"],
                         "--prompts", str(prompts), "--out", str(out)])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("alignprobe: llama.cpp failed: "), result.output
    assert "vocabulary of 512" in lines[0]
    assert not out.exists()
    # the target given as its own drafter: llama.cpp finds no target layers in it
    result, _ = run_cli(["capture", "llamacpp", "--model", llamacpp["gguf"], "--engine-python", llamacpp["python"],
                         "--drafter", llamacpp["gguf"], "--tokens-from", llamacpp["train"], "--out", str(out)])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1 and "not an EAGLE-3 drafter GGUF" in lines[0], result.output
    assert not out.exists()
