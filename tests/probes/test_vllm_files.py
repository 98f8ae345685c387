"""The vLLM probe on files written in the real ExampleHiddenStatesConnector layout from a tiny model.

The writer below follows vLLM's source (example_hidden_states_connector.py, extract_hidden_states.py):
``{dir}/{req_id}.safetensors`` with ``hidden_states [S, L, H]`` in the model dtype, L = the aux ids in
layer order (id k = HF[k], id N = the last layer's output before the final norm), ``token_ids [S]``
int64, and a ``.lock`` companion left behind after the write.
"""

import fcntl
import json
import os

import httpx
import numpy as np
import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file, save_file

from alignprobe.cli.main import cli
from alignprobe.dump import open_dump
from alignprobe.errors import BadInput
from alignprobe.probes.hf import capture_hf
from alignprobe.probes.hf_states import forward_states
from alignprobe.probes.prompts import Prompt, token_sample_id
from alignprobe.probes.vllm_drive import request_files
from engine_helpers import server_flags
from alignprobe.probes.vllm_files import capture_vllm_files
from alignprobe.demo.tiny_models import synthetic_corpus, tiny_llama

N, H = 8, 64
SPECULATORS_IDS = [2, N // 2, N - 3, N]  # speculators launch_vllm.py default


@pytest.fixture(scope="module")
def model():
    return tiny_llama(num_layers=N, hidden_size=H, seed=5)


@pytest.fixture(scope="module")
def prompts():
    corpus = synthetic_corpus(4, 20, seed=11)
    return [Prompt(f"p{i}", corpus[i, :n].tolist()) for i, n in enumerate([20, 7, 13, 4])]


@pytest.fixture(scope="module")
def train_dump(model, prompts, tmp_path_factory):
    return capture_hf(model, prompts, tmp_path_factory.mktemp("train") / "train.h5", batch_size=2, progress=False)


def vllm_states(model, token_ids, layer_ids, dtype=torch.bfloat16) -> torch.Tensor:
    """[S, L, H] as vLLM stores it: HF[k] for k < N, the pre-norm last-layer output for k = N."""
    with torch.no_grad():
        fs = forward_states(model, torch.tensor([token_ids]))
    picked = [fs.final_prenorm[0] if k == N else fs.hf[k][0] for k in sorted(layer_ids)]
    return torch.stack(picked, dim=1).to(dtype).contiguous()


def write_request(model, folder, index, token_ids, layer_ids, dtype=torch.bfloat16) -> str:
    path = os.path.join(folder, f"cmpl-{index:04x}-0.safetensors")
    save_file({"hidden_states": vllm_states(model, token_ids, layer_ids, dtype),
               "token_ids": torch.tensor(token_ids, dtype=torch.long)}, path)
    open(path + ".lock", "w").close()  # the connector's lock file, released
    return path


@pytest.fixture(scope="module")
def vllm_dir(model, prompts, tmp_path_factory):
    folder = tmp_path_factory.mktemp("vllm")
    for i, p in enumerate(reversed(prompts)):  # request order differs from the dump's sample order
        write_request(model, folder, i, p.token_ids, SPECULATORS_IDS)
    return str(folder)


def test_files_split_into_aux_and_prenorm_final(vllm_dir, train_dump, tmp_path):
    out = capture_vllm_files(vllm_dir, tmp_path / "serve.h5", layer_ids=SPECULATORS_IDS, tokens_from=train_dump,
                             progress=False)
    with open_dump(out) as serve, open_dump(train_dump) as train:
        aux, final = serve.streams["aux"], serve.streams["final"]
        assert (aux.hf_indices, aux.role, aux.dtype) == ((2, 4, 5), "drafter_input", "bfloat16")
        assert (final.hf_indices, final.role, final.final_norm) == ((N,), "final", "pre")
        assert sorted(serve.sample_ids) == sorted(train.sample_ids)
        for sid in train.sample_ids:
            assert np.array_equal(serve.token_ids(sid), train.token_ids(sid))
            # bf16 storage of the same forward: equal to the train states within bf16 rounding
            np.testing.assert_allclose(serve.states(sid, "aux"), train.states(sid, "eagle3_aux"), rtol=1e-2, atol=1e-2)
            np.testing.assert_allclose(serve.states(sid, "final"), train.states(sid, "final_prenorm"), rtol=1e-2,
                                       atol=1e-2)
        assert serve.provenance.engine == "vllm"
        assert serve.provenance.capture["layer_ids"] == SPECULATORS_IDS


def test_stored_values_are_the_files_bits(vllm_dir, train_dump, tmp_path):
    out = capture_vllm_files(vllm_dir, tmp_path / "serve.h5", layer_ids=SPECULATORS_IDS, tokens_from=train_dump,
                             progress=False)
    with open_dump(out) as serve:
        for name in sorted(os.listdir(vllm_dir)):
            if not name.endswith(".safetensors"):
                continue
            data = load_file(os.path.join(vllm_dir, name))
            tokens = data["token_ids"].tolist()
            sid = next(s for s in serve.sample_ids if serve.token_ids(s).tolist() == tokens)
            hs = data["hidden_states"].float().numpy()
            assert np.array_equal(serve.states(sid, "aux"), hs[:, :3, :].reshape(len(tokens), -1))
            assert np.array_equal(serve.states(sid, "final"), hs[:, 3, :])


def test_ids_in_any_order_and_content_ids_without_a_reference(vllm_dir, prompts, tmp_path):
    out = capture_vllm_files(vllm_dir, tmp_path / "serve.h5", layer_ids=[8, 5, 2, 4], num_layers=N, progress=False)
    with open_dump(out) as serve:
        assert serve.streams["aux"].hf_indices == (2, 4, 5)
        assert sorted(serve.sample_ids) == sorted(token_sample_id(p.token_ids) for p in prompts)


def test_aux_only_when_n_is_not_among_the_ids(model, prompts, train_dump, tmp_path):
    folder = tmp_path / "aux"
    folder.mkdir()
    for i, p in enumerate(prompts):
        write_request(model, folder, i, p.token_ids, [1, 4, 7], dtype=torch.float32)
    out = capture_vllm_files(str(folder), tmp_path / "serve.h5", layer_ids=[1, 4, 7], tokens_from=train_dump,
                             progress=False)
    with open_dump(out) as serve, open_dump(train_dump) as train:
        assert list(serve.streams) == ["aux"]
        assert serve.streams["aux"].hf_indices == (1, 4, 7) and serve.streams["aux"].dtype == "float32"
        layers = train.streams["layers"].hf_indices
        for sid in train.sample_ids:
            full = train.states(sid, "layers")
            expected = np.concatenate([full[:, layers.index(k) * H:(layers.index(k) + 1) * H] for k in (1, 4, 7)], 1)
            np.testing.assert_allclose(serve.states(sid, "aux"), expected, atol=2e-5, rtol=1e-4)


# -- bad inputs ------------------------------------------------------------------------------------


def test_layer_count_that_disagrees_with_the_ids(vllm_dir, tmp_path):
    with pytest.raises(BadInput, match="holds 4 layers but 3 distinct layer ids"):
        capture_vllm_files(vllm_dir, tmp_path / "s.h5", layer_ids=[2, 4, 5], num_layers=N, progress=False)


def test_missing_key_garbage_and_bad_shapes(tmp_path):
    folder = tmp_path / "bad"
    folder.mkdir()
    save_file({"hidden_states": torch.zeros(3, 2, 4)}, str(folder / "a.safetensors"))
    with pytest.raises(BadInput, match="lacks token_ids"):
        capture_vllm_files(str(folder), tmp_path / "s.h5", layer_ids=[2, 8], num_layers=N, progress=False)
    (folder / "a.safetensors").write_bytes(b"not a safetensors file at all")
    with pytest.raises(BadInput, match="not a readable safetensors file"):
        capture_vllm_files(str(folder), tmp_path / "s.h5", layer_ids=[2, 8], num_layers=N, progress=False)
    save_file({"hidden_states": torch.zeros(3, 8), "token_ids": torch.arange(3)}, str(folder / "a.safetensors"))
    with pytest.raises(BadInput, match=r"expected \[S, L, H\]"):
        capture_vllm_files(str(folder), tmp_path / "s.h5", layer_ids=[2, 8], num_layers=N, progress=False)
    save_file({"hidden_states": torch.zeros(4, 2, 8), "token_ids": torch.arange(3)}, str(folder / "a.safetensors"))
    with pytest.raises(BadInput, match="4 rows for 3 token ids"):
        capture_vllm_files(str(folder), tmp_path / "s.h5", layer_ids=[2, 8], num_layers=N, progress=False)


def test_empty_or_missing_folder(tmp_path):
    with pytest.raises(BadInput, match="no such folder"):
        capture_vllm_files(str(tmp_path / "nope"), tmp_path / "s.h5", layer_ids=[2], num_layers=N)
    with pytest.raises(BadInput, match="holds no .safetensors files"):
        capture_vllm_files(str(tmp_path), tmp_path / "s.h5", layer_ids=[2], num_layers=N)


def test_tokens_that_match_no_reference_sample(model, train_dump, tmp_path):
    folder = tmp_path / "other"
    folder.mkdir()
    write_request(model, folder, 0, [5, 6, 7, 8], SPECULATORS_IDS)
    with pytest.raises(BadInput, match="none of the 1 files holds the token ids of a sample"):
        capture_vllm_files(str(folder), tmp_path / "s.h5", layer_ids=SPECULATORS_IDS, tokens_from=train_dump,
                           progress=False)


def test_files_of_other_requests_are_skipped_and_counted(model, prompts, train_dump, tmp_path):
    # A live server's storage folder holds other clients' requests too (a real run aborted on one).
    folder = tmp_path / "live"
    folder.mkdir()
    for i, prompt in enumerate(prompts):
        write_request(model, folder, i, prompt.token_ids, SPECULATORS_IDS)
    write_request(model, folder, 99, [5, 6, 7, 8], SPECULATORS_IDS)
    out = capture_vllm_files(str(folder), tmp_path / "s.h5", layer_ids=SPECULATORS_IDS, tokens_from=train_dump,
                             progress=False)
    with open_dump(out) as dump:
        assert dump.num_samples == len(prompts)
        assert dump.provenance.capture["files_skipped_no_matching_prompt"] == 1
    result = CliRunner().invoke(cli, ["capture", "vllm", "--from-dir", str(folder), "--layer-ids", "2,4,5,8",
                                      "--tokens-from", str(train_dump), "--out", str(tmp_path / "c.h5"), "--quiet"])
    assert result.exit_code == 0, result.output
    assert "skipped 1 files whose tokens match no prompt" in result.output


def test_an_all_layer_capture_is_a_layer_stack_that_passes(model, prompts, train_dump, tmp_path):
    # ids 0..N: no drafter reads N+1 states, so judging them as the drafter input was a width FAIL.
    from alignprobe.compare.compare import compare

    every = list(range(N + 1))
    folder = tmp_path / "all"
    folder.mkdir()
    for i, prompt in enumerate(prompts):
        write_request(model, folder, i, prompt.token_ids, every, dtype=torch.float32)
    out = capture_vllm_files(str(folder), tmp_path / "s.h5", layer_ids=every, tokens_from=train_dump, progress=False)
    with open_dump(out) as dump:
        assert list(dump.streams) == ["layers"]
        assert dump.streams["layers"].role == "layers"
        assert list(dump.streams["layers"].hf_indices) == every
    result = compare(train_dump, out)
    assert result.verdict == "PASS", [f.code for f in result.findings]
    forced = capture_vllm_files(str(folder), tmp_path / "d.h5", layer_ids=every, tokens_from=train_dump,
                                stream_role="drafter_input", progress=False)
    with open_dump(forced) as dump:
        assert set(dump.streams) == {"aux", "final"}


def test_unknown_layer_count(vllm_dir, tmp_path):
    with pytest.raises(BadInput, match="--num-layers"):
        capture_vllm_files(vllm_dir, tmp_path / "s.h5", layer_ids=SPECULATORS_IDS, progress=False)


def test_file_still_being_written(model, tmp_path):
    folder = tmp_path / "busy"
    folder.mkdir()
    path = write_request(model, folder, 0, [1, 2, 3], SPECULATORS_IDS)
    with open(path + ".lock") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # as the connector holds it while writing
        with pytest.raises(BadInput, match="still writing"):
            capture_vllm_files(str(folder), tmp_path / "s.h5", layer_ids=SPECULATORS_IDS, num_layers=N)


# -- driving a server ------------------------------------------------------------------------------


def test_server_flags_match_the_speculators_launcher_with_a_cpu_safe_connector():
    # speculators' launcher flags, except the connector: alignprobe's subclass of vLLM's, loaded by
    # module path (the stock one dies on a CPU-only machine at its pinned-memory copy).
    flags = server_flags([2, 4, 5, 8], "/data/hs")
    assert flags[0] == "--speculative-config" and flags[2] == "--kv-transfer-config"
    assert json.loads(flags[1]) == {
        "method": "extract_hidden_states",
        "num_speculative_tokens": 1,
        "draft_model_config": {"hf_config": {"eagle_aux_hidden_state_layer_ids": [2, 4, 5, 8]}},
    }
    assert json.loads(flags[3]) == {
        "kv_connector": "CpuSafeHiddenStatesConnector",
        "kv_connector_module_path": "alignprobe_vllm_connector",
        "kv_role": "kv_producer",
        "kv_connector_extra_config": {"shared_storage_path": "/data/hs"},
    }


def test_requests_through_an_injected_transport(model, prompts, tmp_path):
    # A stand-in for `vllm serve` with the flags above: it writes the file, answers its path.
    folder = tmp_path / "served"
    folder.mkdir()
    sent = []

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/completions"
        body = json.loads(request.content)
        assert body["max_tokens"] == 1 and body["return_token_ids"] is True and body["model"] == "tiny"
        path = write_request(model, folder, len(sent), body["prompt"], SPECULATORS_IDS)
        sent.append(body["prompt"])
        return httpx.Response(200, json={"choices": [{"text": "x", "prompt_token_ids": body["prompt"]}],
                                         "kv_transfer_params": {"hidden_states_path": path}})

    client = httpx.Client(transport=httpx.MockTransport(handler))
    paths = request_files("http://127.0.0.1:8000", "tiny", prompts, client=client)
    assert sent == [p.token_ids for p in prompts]
    out = capture_vllm_files(paths, tmp_path / "serve.h5", layer_ids=SPECULATORS_IDS, num_layers=N, prompts=prompts,
                             progress=False)
    with open_dump(out) as serve:
        assert serve.sample_ids == [p.sample_id for p in prompts]


def test_server_without_the_connector(prompts):
    client = httpx.Client(transport=httpx.MockTransport(
        lambda request: httpx.Response(200, json={"choices": [{"text": "x"}]})))
    with pytest.raises(BadInput, match="no kv_transfer_params.hidden_states_path.*extract_hidden_states"):
        request_files("http://127.0.0.1:8000", "tiny", prompts, client=client)


# -- the command line ------------------------------------------------------------------------------


def test_cli_capture_vllm(vllm_dir, train_dump, tmp_path):
    runner = CliRunner()
    ok = runner.invoke(cli, ["capture", "vllm", "--from-dir", vllm_dir, "--tokens-from", str(train_dump),
                             "--layer-ids", "2,4,5,8", "--out", str(tmp_path / "serve.h5"), "--quiet"])
    assert ok.exit_code == 0, ok.output
    assert "aux HF[2, 4, 5], final HF[8]" in ok.output
    bad = runner.invoke(cli, ["capture", "vllm", "--from-dir", vllm_dir, "--num-layers", "8",
                              "--layer-ids", "2,4,5", "--out", str(tmp_path / "x.h5")])
    assert bad.exit_code == 2 and len(bad.output.strip().splitlines()) == 1



def test_compares_clean_against_the_hf_capture(model, prompts, train_dump, tmp_path):
    # What an EAGLE-3 drafter is fed under vLLM: the aux ids, HF[2, N//2, N-3] in vLLM numbering.
    from alignprobe.compare.compare import compare

    folder = tmp_path / "eagle3"
    folder.mkdir()
    for i, p in enumerate(prompts):
        write_request(model, folder, i, p.token_ids, [2, 4, 5])
    out = capture_vllm_files(str(folder), tmp_path / "serve.h5", layer_ids=[2, 4, 5], tokens_from=train_dump,
                             progress=False)
    result = compare(train_dump, out)
    assert result.verdict == "PASS" and bool(result), [f.title for f in result.findings]


@pytest.mark.parametrize("text, expected", [
    ('{"torch_dtype": "bfloat16"}', "bfloat16"),
    ('{"dtype": "float16"}', "float16"),
    ('{"torch_dtype": "int8"}', ""),
    ('{"torch_dtype": ["bfloat16"]}', ""),
    ('["bfloat16"]', ""),
    ('{"torch_dtype": NaN}', ""),
    ("[" * 100 + "]" * 100, ""),
    ("not json", ""),
    (None, ""),  # no config.json: unknown, vLLM picks its default
])
def test_checkpoint_dtype_is_unknown_where_the_config_cannot_say(tmp_path, text, expected):
    from alignprobe.probes.vllm_drive import _checkpoint_dtype

    if text is not None:
        (tmp_path / "config.json").write_text(text)
    assert _checkpoint_dtype(str(tmp_path)) == expected


# -- the final layer inside the aux concat (a drafter with ids [6, 7, 8] on an 8-layer target) ---------

LATE_IDS = [6, 7, N]  # vLLM feeds all three to fc, the last the pre-norm final (REAL: accept length 1.956)


@pytest.fixture(scope="module")
def late_dir(model, prompts, tmp_path_factory):
    folder = tmp_path_factory.mktemp("late")
    for i, p in enumerate(prompts):
        write_request(model, folder, i, p.token_ids, LATE_IDS, dtype=torch.float32)
    return str(folder)


@pytest.fixture(scope="module")
def late_train(model, prompts, tmp_path_factory):
    """The drafter's own training view: HF[6], HF[7] and the PRE-norm HF[8], as vLLM / speculators took it."""
    return capture_hf(model, prompts, tmp_path_factory.mktemp("late-train") / "train.h5", aux_layers=LATE_IDS,
                      aux_final_norm="pre", batch_size=2, progress=False)


def test_id_n_stays_a_drafter_tap_where_the_train_side_reads_as_many_slices(late_dir, late_train, tmp_path):
    out = capture_vllm_files(late_dir, tmp_path / "serve.h5", layer_ids=LATE_IDS, tokens_from=late_train, progress=False)
    with open_dump(out) as serve, open_dump(late_train) as train:
        assert list(serve.streams) == ["aux"]
        aux = serve.streams["aux"]
        assert (aux.hf_indices, aux.final_norm, aux.width) == ((6, 7, N), "pre", 3 * H)
        assert train.streams["eagle3_aux"].final_norm == "pre"
        for sid in train.sample_ids:
            np.testing.assert_allclose(serve.states(sid, "aux"), train.states(sid, "eagle3_aux"), atol=2e-5, rtol=1e-4)


def test_late_taps_compare_clean_and_pre_norm_matters(late_dir, late_train, model, prompts, tmp_path):
    from alignprobe.compare.compare import compare

    out = capture_vllm_files(late_dir, tmp_path / "serve.h5", layer_ids=LATE_IDS, tokens_from=late_train, progress=False)
    r = compare(late_train, out)
    assert r.verdict == "PASS" and r.codes("warn") == [], r.codes()
    # trained on transformers' post-norm HF[8] instead: the last slice is the other form of HF[N]
    post = capture_hf(model, prompts, tmp_path / "post.h5", aux_layers=LATE_IDS, batch_size=2, progress=False)
    f = compare(post, out).finding("final_norm_mismatch")
    assert f is not None and f.subject.stream == "aux"


@pytest.mark.parametrize("last_layer, streams", [("final", {"aux": (6, 7), "final": (N,)}), ("aux", {"aux": (6, 7, N)})])
def test_last_layer_chosen_by_hand(late_dir, last_layer, streams, tmp_path):
    out = capture_vllm_files(late_dir, tmp_path / "serve.h5", layer_ids=LATE_IDS, num_layers=N, last_layer=last_layer,
                             progress=False)
    with open_dump(out) as serve:
        assert {name: c.hf_indices for name, c in serve.streams.items()} == streams


def test_speculators_layout_keeps_n_apart_under_auto(vllm_dir, train_dump, tmp_path):
    """Four ids against a 3-slice drafter input: N is the final state kept beside the aux."""
    out = capture_vllm_files(vllm_dir, tmp_path / "serve.h5", layer_ids=SPECULATORS_IDS, tokens_from=train_dump,
                             progress=False)
    with open_dump(out) as serve:
        assert serve.streams["aux"].hf_indices == (2, 4, 5) and serve.streams["final"].hf_indices == (N,)


def test_a_last_layer_choice_that_is_not_one(late_dir, tmp_path):
    with pytest.raises(BadInput, match="last layer 'middle'"):
        capture_vllm_files(late_dir, tmp_path / "serve.h5", layer_ids=LATE_IDS, num_layers=N, last_layer="middle",
                           progress=False)


def test_accept_on_a_capture_that_split_id_n_off_names_the_flag(model, late_dir, late_train, tmp_path):
    """A capture that kept id 8 apart hands a 3-tap drafter two slices: vLLM would fail at the first
    decode; accept says so and names --last-layer aux."""
    import alignprobe
    from alignprobe.demo import tiny_drafter

    target = str(tmp_path / "target")
    model.save_pretrained(target)
    config = tiny_drafter.drafter_config(model.config, LATE_IDS)
    drafter = str(tmp_path / "drafter")
    os.makedirs(drafter)
    save_file({k: v.contiguous() for k, v in tiny_drafter.init_drafter_weights(config).items()},
              os.path.join(drafter, "model.safetensors"))
    json.dump(config, open(os.path.join(drafter, "config.json"), "w"))
    split = capture_vllm_files(late_dir, tmp_path / "split.h5", layer_ids=LATE_IDS, num_layers=N, last_layer="final",
                               progress=False)
    result = alignprobe.accept(drafter, late_train, split, target=target, explain=False)
    f = next(f for f in result.findings if f.code == "drafter_hidden_width")
    assert result.serve is None and "--last-layer aux" in f.fix
    kept = capture_vllm_files(late_dir, tmp_path / "kept.h5", layer_ids=LATE_IDS, tokens_from=late_train, progress=False)
    assert alignprobe.accept(drafter, late_train, kept, target=target, explain=False).serve is not None
