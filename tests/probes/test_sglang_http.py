"""The SGLang probe against a loopback server that speaks SGLang's wire format (tests/helpers/fake_sglang.py).

Expectations come from the tiny model itself (forward_states, HF indices picked by hand from the
SGLang source's rules) or from an HF-side capture of the same prompts, never from the probe.
"""

import json
import os
import socket

import httpx
import numpy as np
import pytest
import torch
from click.testing import CliRunner

from alignprobe.cli.main import cli
from alignprobe.dump import open_dump
from alignprobe.errors import BadInput
from alignprobe.probes.hf import capture_hf
from alignprobe.probes.prompts import Prompt
from alignprobe.probes.sglang_http import capture_sglang
from alignprobe.demo.tiny_models import synthetic_corpus, tiny_deepseek_v3, tiny_llama
from fake_sglang import FakeOptions, FakeSGLang, InProcessEngine

N = 8  # tiny llama layers; EAGLE-3 reference layers HF[2, 4, 5]
H = 64


@pytest.fixture(scope="module")
def model():
    return tiny_llama(num_layers=N, hidden_size=H, seed=3)


@pytest.fixture(scope="module")
def prompts():
    corpus = synthetic_corpus(5, 24, seed=7)
    lengths = [24, 9, 17, 5, 12]
    return [Prompt(f"s{i}", corpus[i, :n].tolist()) for i, n in enumerate(lengths)]


@pytest.fixture(scope="module")
def train_dump(model, prompts, tmp_path_factory):
    path = tmp_path_factory.mktemp("train") / "train.h5"
    return capture_hf(model, prompts, path, batch_size=2, progress=False)


def _capture(server, tokens_from, out, **kw):
    kw.setdefault("progress", False)
    kw.setdefault("backoff", 0.01)
    return capture_sglang(server.url, tokens_from, out, **kw)


def _assert_matches_train(serve_path, train_path, hf_indices):
    """Every serve row equals the train dump's HF states at ``hf_indices``, concatenated."""
    with open_dump(serve_path) as serve, open_dump(train_path) as train:
        claim = serve.streams["hidden_states"]
        assert claim.hf_indices == tuple(hf_indices)
        assert serve.sample_ids == train.sample_ids
        layers = train.streams["layers"].hf_indices
        for sid in train.sample_ids:
            assert np.array_equal(serve.token_ids(sid), train.token_ids(sid))
            full = train.states(sid, "layers")
            expected = np.concatenate([full[:, layers.index(i) * H : (layers.index(i) + 1) * H] for i in hf_indices], 1)
            np.testing.assert_allclose(serve.states(sid, "hidden_states"), expected, atol=2e-5, rtol=1e-4)


# -- clean captures: the claims follow SGLang's conventions ------------------------------------------


def test_eagle3_default_ids_capture_the_eagle3_reference_layers(model, train_dump, tmp_path):
    # No ids in the draft config: layers_to_capture = [2, N//2, N-3], no +1.
    with FakeSGLang(model, tmp_path, FakeOptions(speculative_algorithm="EAGLE3")) as server:
        out = _capture(server, train_dump, tmp_path / "serve.h5")
    _assert_matches_train(out, train_dump, (2, 4, 5))
    with open_dump(out) as serve, open_dump(train_dump) as train:
        # the train dump's EAGLE-3 view holds the same layers: the pair is clean
        for sid in train.sample_ids:
            np.testing.assert_allclose(serve.states(sid, "hidden_states"), train.states(sid, "eagle3_aux"), atol=2e-5)
        p = serve.provenance
        assert p.engine == "sglang" and p.engine_version == "0.5.23"
        assert p.capture["speculative_algorithm"] == "EAGLE3"
        assert p.capture["width"] == 3 * H and "3*H" in p.capture["width_means"]
        assert p.capture["server_info_endpoint"] == "/server_info"
        assert p.capture["full_row_risks"] == []


def test_explicit_draft_ids_get_plus_one(model, train_dump, tmp_path):
    # SpecForge's default ids [1, N//2-1, N-4] are read by llama.py as [2, N//2, N-3].
    with FakeSGLang(model, tmp_path, FakeOptions("EAGLE3", draft_layer_ids=[1, 3, 4])) as server:
        out = _capture(server, train_dump, tmp_path / "serve.h5")
    _assert_matches_train(out, train_dump, (2, 4, 5))
    with open_dump(out) as serve:
        assert serve.provenance.capture["aux_layer_ids"] == [1, 3, 4]


def test_reference_numbered_ids_land_one_layer_deeper(model, train_dump, tmp_path):
    # ids written as HF indices (vLLM / EAGLE-3 numbering) [2, 4, 5] are captured at HF[3, 5, 6].
    with FakeSGLang(model, tmp_path, FakeOptions("EAGLE3", draft_layer_ids=[2, 4, 5])) as server:
        out = _capture(server, train_dump, tmp_path / "serve.h5")
    _assert_matches_train(out, train_dump, (3, 5, 6))


def test_layer_ids_given_by_the_user_override_the_draft_config(model, train_dump, tmp_path):
    with FakeSGLang(model, tmp_path, FakeOptions("EAGLE3", draft_layer_ids=[1, 3, 4])) as server:
        out = _capture(server, train_dump, tmp_path / "serve.h5", layer_ids=[2, 4, 5])
    with open_dump(out) as serve:
        # the claim is what the user said; the states are what the server did (the comparer measures)
        assert serve.streams["hidden_states"].hf_indices == (3, 5, 6)


def test_eagle_algorithm_serves_the_final_state_only(model, train_dump, tmp_path):
    # --speculative-algorithm EAGLE captures no aux states: H wide, post-norm HF[N].
    with FakeSGLang(model, tmp_path, FakeOptions("EAGLE")) as server:
        out = _capture(server, train_dump, tmp_path / "serve.h5")
    _assert_matches_train(out, train_dump, (N,))
    with open_dump(out) as serve, open_dump(train_dump) as train:
        claim = serve.streams["hidden_states"]
        assert claim.role == "drafter_input" and claim.final_norm == "post" and claim.width == H
        assert "aux capture is off" in serve.provenance.capture["width_means"]
        for sid in train.sample_ids:
            np.testing.assert_allclose(serve.states(sid, "hidden_states"), train.states(sid, "final"), atol=2e-5)


def test_bfloat16_server_is_stored_exactly_as_bfloat16(model, prompts, train_dump, tmp_path):
    with FakeSGLang(model, tmp_path, FakeOptions("EAGLE3", bfloat16=True)) as server:
        out = _capture(server, train_dump, tmp_path / "serve.h5")
        expected = {p.sample_id: server.rows_for(p.token_ids).float().numpy() for p in prompts}
    with open_dump(out) as serve:
        assert serve.streams["hidden_states"].dtype == "bfloat16"
        for sid, rows in expected.items():
            assert np.array_equal(serve.states(sid, "hidden_states"), rows)


def test_deepseek_first_id_rule(tmp_path, prompts):
    # deepseek_v2.py (SGLang PR #25454): +1 only when the first id is 1.
    ds = tiny_deepseek_v3(num_layers=6, hidden_size=H, seed=1)
    short = prompts[:2]
    for ids, hf in (([1, 2, 3], (2, 3, 4)), ([2, 3, 4], (2, 3, 4))):
        work = tmp_path / f"ids{ids[0]}"
        work.mkdir()
        with FakeSGLang(ds, work, FakeOptions("EAGLE3", draft_layer_ids=ids)) as server:
            out = capture_sglang(server.url, short, work / "serve.h5", progress=False)
            expected = {p.sample_id: server.rows_for(p.token_ids).numpy() for p in short}
        with open_dump(out) as serve:
            assert serve.streams["hidden_states"].hf_indices == hf
            assert serve.provenance.capture["model_shape"]["arch"] == "deepseek_v3"
            for sid, rows in expected.items():
                np.testing.assert_allclose(serve.states(sid, "hidden_states"), rows, atol=1e-6)
        # and the rows are those HF states, computed independently here
        with torch.no_grad():
            from alignprobe.probes.hf_states import forward_states

            fs = forward_states(ds, torch.tensor([short[0].token_ids]))
        ref = torch.cat([fs.hf[i][0] for i in hf], -1).numpy()
        with open_dump(out) as serve:
            np.testing.assert_allclose(serve.states(short[0].sample_id, "hidden_states"), ref, atol=1e-5)


def test_zero_new_tokens_gets_no_rows_from_a_real_server_and_says_so(model, train_dump, tmp_path):
    # a real SGLang 0.5.23 answers max_new_tokens 0 with hidden_states [] (the default is now 1)
    with FakeSGLang(model, tmp_path, FakeOptions(speculative_algorithm="EAGLE3")) as server:
        with pytest.raises(BadInput, match="asked for 0 new tokens.*--max-new-tokens 1"):
            _capture(server, train_dump, tmp_path / "zero.h5", max_new_tokens=0)
        out = _capture(server, train_dump, tmp_path / "default.h5")
    _assert_matches_train(out, train_dump, [2, 4, 5])


@pytest.mark.parametrize("server_ids, expected", [(None, [2, 4, 5]), ([1, 3, 4], [2, 4, 5]), ([2, 4, 5], [3, 5, 6])])
def test_claims_follow_the_ids_the_server_ran_with(model, train_dump, tmp_path, server_ids, expected):
    # --enable-return-aux-hidden-states: the server's own ids (reported in /server_info) are what ran;
    # explicit ones get +1 on llama, the defaults do not. Ids the user believes otherwise are recorded.
    options = FakeOptions(speculative_algorithm="EAGLE3", aux_capture_only=True, aux_capture_ids=server_ids)
    with FakeSGLang(model, tmp_path, options) as server:
        out = _capture(server, train_dump, tmp_path / "serve.h5", layer_ids=[7, 7, 7] if server_ids else None)
    _assert_matches_train(out, train_dump, expected)
    with open_dump(out) as dump:
        ids_from = dump.provenance.capture["layer_ids_from"]
    assert ("--return-aux-hidden-state-layer-ids" in ids_from) == (server_ids is not None)
    if server_ids:
        assert "--layer-ids [7, 7, 7] ignored" in ids_from


def test_requests_in_flight_keep_prompt_order(model, prompts, train_dump, tmp_path):
    options = FakeOptions(speculative_algorithm="EAGLE3", slow_first=2, delay_s=0.3)  # the first answers come last
    with FakeSGLang(model, tmp_path, options) as server:
        out = _capture(server, train_dump, tmp_path / "serve.h5", in_flight=4)
    _assert_matches_train(out, train_dump, [2, 4, 5])


def test_legacy_server_info_endpoint_and_max_new_tokens_one(model, train_dump, tmp_path):
    with FakeSGLang(model, tmp_path, FakeOptions("EAGLE3", legacy_info_only=True)) as server:
        out = _capture(server, train_dump, tmp_path / "serve.h5", max_new_tokens=1)
    _assert_matches_train(out, train_dump, (2, 4, 5))
    with open_dump(out) as serve:
        assert serve.provenance.capture["server_info_endpoint"] == "/get_server_info"


def test_prompts_jsonl_of_token_ids(model, prompts, tmp_path):
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps({"id": p.sample_id, "input_ids": p.token_ids}) + "\n" for p in prompts))
    with FakeSGLang(model, tmp_path, FakeOptions("EAGLE3")) as server:
        out = _capture(server, str(path), tmp_path / "serve.h5")
    with open_dump(out) as serve:
        assert serve.sample_ids == [p.sample_id for p in prompts]


# -- every bad input is one clear line ----------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_server(train_dump, tmp_path):
    url = f"http://127.0.0.1:{_free_port()}"
    with pytest.raises(BadInput, match="cannot reach the SGLang server.*2 attempts"):
        capture_sglang(url, train_dump, tmp_path / "serve.h5", retries=1, backoff=0.01, progress=False)
    assert not os.path.exists(tmp_path / "serve.h5")


def test_hidden_states_not_enabled_says_which_flag(model, train_dump, tmp_path):
    with FakeSGLang(model, tmp_path, FakeOptions("EAGLE3", hidden_states_enabled=False)) as server:
        with pytest.raises(BadInput, match="--enable-return-hidden-states"):
            _capture(server, train_dump, tmp_path / "serve.h5")
        assert server.generate_calls == 0  # known from /server_info, before any request


def test_hidden_states_refused_by_an_older_server(model, train_dump, tmp_path):
    # An older server whose info does not report the setting: the 400 refusal names the flag.
    with FakeSGLang(model, tmp_path, FakeOptions("EAGLE3", hidden_states_enabled=False)) as server:
        original = server.server_info
        server.server_info = lambda: {k: v for k, v in original().items()
                                      if k not in ("enable_return_hidden_states", "return_hidden_states_mode")}
        with pytest.raises(BadInput, match="refuses hidden states.*--enable-return-hidden-states"):
            _capture(server, train_dump, tmp_path / "serve.h5")


def test_server_errors_are_retried_then_reported(model, train_dump, tmp_path):
    with FakeSGLang(model, tmp_path, FakeOptions("EAGLE3", fail_first=2)) as server:
        out = _capture(server, train_dump, tmp_path / "ok.h5", retries=2)
        assert os.path.exists(out)
    with FakeSGLang(model, tmp_path, FakeOptions("EAGLE3", fail_first=100)) as server:
        with pytest.raises(BadInput, match="HTTP 503 after 3 attempts"):
            _capture(server, train_dump, tmp_path / "fail.h5", retries=2)
        assert server.generate_calls == 3  # bounded


def test_client_errors_are_not_retried(model, train_dump, tmp_path):
    with FakeSGLang(model, tmp_path, FakeOptions("EAGLE3", fail_first=100, fail_status=400)) as server:
        with pytest.raises(BadInput, match="rejected the request with HTTP 400"):
            _capture(server, train_dump, tmp_path / "serve.h5", retries=3)
        assert server.generate_calls == 1


def test_malformed_json(model, train_dump, tmp_path):
    with FakeSGLang(model, tmp_path, FakeOptions("EAGLE3", malformed_json=True)) as server:
        with pytest.raises(BadInput, match="not JSON"):
            _capture(server, train_dump, tmp_path / "serve.h5")


def test_timeouts_are_retried_with_a_bound(model, train_dump, tmp_path):
    options = FakeOptions("EAGLE3", slow_first=1, delay_s=1.0)
    with FakeSGLang(model, tmp_path, options) as server:
        with pytest.raises(BadInput, match="no answer within 0.3 s"):
            _capture(server, train_dump, tmp_path / "a.h5", timeout=0.3, retries=0)
    with FakeSGLang(model, tmp_path, options) as server:
        out = _capture(server, train_dump, tmp_path / "b.h5", timeout=0.5, retries=1)
        assert os.path.exists(out)


def test_radix_cache_short_rows_are_kept_at_their_positions_and_marked(model, prompts, tmp_path):
    # s5 shares its first 9 tokens with s0: a radix-cache hit returns rows for the suffix only; the
    # capture keeps them at positions 9-11 and marks the sample (tests/probes/test_returned_rows.py: the comparison)
    shared = prompts + [Prompt("s5", prompts[0].token_ids[:9] + [1, 2, 3])]
    out = tmp_path / "serve.h5"
    with FakeSGLang(model, tmp_path, FakeOptions("EAGLE3", radix_cache=True)) as server:
        capture_sglang(server.url, shared, out, progress=False)
        whole = server.rows_for(shared[-1].token_ids).numpy()
    with open_dump(out) as serve:
        assert serve.sample_ids == [p.sample_id for p in shared]
        mark = serve.mark("s5")
        assert (mark.returned, mark.rows_returned, mark.nonfinite_rows) == ((9, 12), 3, 0)
        rows = serve.states("s5", "hidden_states")
        assert np.isnan(rows[:9]).all()
        np.testing.assert_allclose(rows[9:], whole[9:], atol=2e-5)
        assert list(serve.marks.marked_indices()) == [5]


def test_chunked_prefill_short_rows(model, train_dump, tmp_path):
    with FakeSGLang(model, tmp_path, FakeOptions("EAGLE3", chunked_prefill_size=8)) as server:
        out = _capture(server, train_dump, tmp_path / "serve.h5")
    with open_dump(out) as serve:  # chunks of 8 tokens: only the last chunk's rows come back
        returned = {sid: serve.mark(sid).returned for sid in serve.sample_ids}
        assert returned == {"s0": (16, 24), "s1": (8, 9), "s2": (16, 17), "s3": (0, 5), "s4": (8, 12)}
        assert not serve.mark("s3").marked


def test_width_that_is_not_a_multiple_of_the_hidden_size(model, prompts, tmp_path):
    # the model config is not local and the user gives the wrong hidden size
    with FakeSGLang(model, tmp_path, FakeOptions("EAGLE3")) as server:
        os.remove(os.path.join(server.model_path, "config.json"))
        with pytest.raises(BadInput, match="not a multiple of the hidden size 50"):
            capture_sglang(server.url, prompts, tmp_path / "serve.h5", num_layers=N, hidden_size=50, progress=False)


def test_unknown_model_shape(model, prompts, tmp_path):
    with FakeSGLang(model, tmp_path, FakeOptions("EAGLE3")) as server:
        os.remove(os.path.join(server.model_path, "config.json"))
        with pytest.raises(BadInput, match="--num-layers and --hidden-size"):
            capture_sglang(server.url, prompts, tmp_path / "serve.h5", progress=False)


def test_aux_count_that_disagrees_with_the_layer_ids(model, train_dump, tmp_path):
    with FakeSGLang(model, tmp_path, FakeOptions("EAGLE3")) as server:
        with pytest.raises(BadInput, match="returned 3 aux states.*name 2"):
            _capture(server, train_dump, tmp_path / "serve.h5", layer_ids=[1, 3])


def test_injected_transport_without_a_server(prompts, tmp_path):
    # httpx.MockTransport: an answer with no hidden states (a server that ignores the field).
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path in ("/server_info", "/get_server_info"):
            return httpx.Response(404, json={"detail": "Not Found"})
        body = json.loads(request.content)
        assert body["return_hidden_states"] is True and body["input_ids"] == prompts[0].token_ids
        return httpx.Response(200, json={"text": "", "meta_info": {"prompt_tokens": len(body["input_ids"])}})

    client = httpx.Client(transport=httpx.MockTransport(handler))
    with pytest.raises(BadInput, match="returned no hidden states.*--enable-return-hidden-states"):
        capture_sglang("http://127.0.0.1:1", prompts, tmp_path / "serve.h5", client=client,
                       num_layers=N, hidden_size=H, progress=False)


# -- the command line ------------------------------------------------------------------------------


def test_cli_capture_sglang(model, train_dump, tmp_path):
    out = tmp_path / "serve.h5"
    runner = CliRunner()
    with FakeSGLang(model, tmp_path, FakeOptions("EAGLE3")) as server:
        ok = runner.invoke(cli, ["capture", "sglang", "--url", server.url, "--tokens-from", str(train_dump),
                                 "--out", str(out), "--quiet"])
    assert ok.exit_code == 0, ok.output
    assert "HF[2, 4, 5]" in ok.output
    bad = runner.invoke(cli, ["capture", "sglang", "--url", f"http://127.0.0.1:{_free_port()}", "--tokens-from",
                              str(train_dump), "--out", str(tmp_path / "x.h5"), "--retries", "0"])
    assert bad.exit_code == 2
    assert len(bad.output.strip().splitlines()) == 1 and "cannot reach" in bad.output


# -- with the comparer: the loopback capture compares clean against the HF capture ----------------


def test_compares_clean_against_the_hf_capture(model, train_dump, tmp_path):
    from alignprobe.compare.compare import compare

    with FakeSGLang(model, tmp_path, FakeOptions("EAGLE3")) as server:
        out = _capture(server, train_dump, tmp_path / "serve.h5")
    result = compare(train_dump, out)
    assert result.verdict == "PASS" and bool(result), [f.title for f in result.findings]


def test_eagle_instead_of_eagle3_fails_the_comparison(model, train_dump, tmp_path):
    from alignprobe.compare.compare import compare

    with FakeSGLang(model, tmp_path, FakeOptions("EAGLE")) as server:
        out = _capture(server, train_dump, tmp_path / "serve.h5")
    result = compare(train_dump, out)
    assert result.verdict == "FAIL"
    assert "width_mismatch" in [f.code for f in result.findings]


def test_engine_backend_with_an_in_process_engine(model, train_dump, tmp_path):
    # The offline mode's backend over an object with sglang.Engine's generate/get_server_info; its
    # hidden states come back as tensors, as an in-process engine may hand them.
    from alignprobe.probes.sglang_capture import capture_from_backend
    from alignprobe.probes.sglang_engine import EngineBackend

    with FakeSGLang(model, tmp_path, FakeOptions("EAGLE3")) as fake:
        out = capture_from_backend(EngineBackend(InProcessEngine(fake)), train_dump, tmp_path / "serve.h5", progress=False)
    _assert_matches_train(out, train_dump, (2, 4, 5))
    with open_dump(out) as serve:
        assert serve.provenance.capture["server_info_endpoint"] == "Engine.get_server_info"


def test_shards_are_written_while_capturing_so_kill_9_loses_little(model, prompts, tmp_path, monkeypatch):
    # A shard per FLUSH_EVERY_S seconds (here: per prompt); an abrupt stop keeps them all.
    import alignprobe.probes.sglang_capture as sglang_capture

    monkeypatch.setattr(sglang_capture, "FLUSH_EVERY_S", 0.0)
    rejected = prompts + [Prompt("s5", [])]  # the server answers HTTP 400 for an empty prompt
    out = tmp_path / "serve.h5"
    with FakeSGLang(model, tmp_path, FakeOptions("EAGLE3")) as server:
        with pytest.raises(BadInput, match="HTTP 400"):
            capture_sglang(server.url, rejected, out, progress=False)
    shards = sorted(f for f in os.listdir(f"{out}.partial") if f.startswith("shard-"))
    assert len(shards) == len(prompts)  # one per prompt, written before the failure


def test_risky_server_settings_are_recorded(model, prompts, tmp_path):
    # distinct prompts pass a radix-cache server whole; the setting still goes into provenance
    with FakeSGLang(model, tmp_path, FakeOptions("EAGLE3", radix_cache=True, chunked_prefill_size=512)) as server:
        out = capture_sglang(server.url, prompts, tmp_path / "serve.h5", progress=False)
    with open_dump(out) as serve:
        assert serve.provenance.capture["full_row_risks"] == [
            "the radix (prefix) cache is on", "chunked prefill is on (chunk 512 tokens)"]
