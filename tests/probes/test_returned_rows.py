"""NaN/Inf rows and short rows from a server: capture keeps and marks them, compare says where they are.

The server is the loopback SGLang (tests/helpers/fake_sglang.py): it writes NaN as null (as SGLang's orjson
does), and its radix cache returns the uncached suffix only. Expectations come from the planted
positions and the tiny model's own forward, never from the probe.
"""

import os
import shutil

import h5py
import numpy as np
import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import save_file

from alignprobe.cli.main import cli
from alignprobe.compare import compare
from alignprobe.compare.kernels.torch_kernels import TorchKernels
from alignprobe.dump import open_dump
from alignprobe.errors import BadInput
from alignprobe.probes.hf import capture_hf
from alignprobe.probes.hf_states import forward_states
from alignprobe.probes.prompts import Prompt
from alignprobe.probes.sglang_http import capture_sglang
from alignprobe.probes.vllm_files import capture_vllm_files
from alignprobe.demo.tiny_models import synthetic_corpus, tiny_llama
from fake_sglang import FakeOptions, FakeSGLang, InProcessEngine

N, H = 8, 64
NAN_SAMPLE, NAN_POSITIONS = "s2", [3, 10]  # s2 has 17 tokens; NaN in the second aux slice (HF[4])
SHORT_SAMPLE, CACHED = "s5", 9  # s5 shares its first 9 tokens with s0: a radix-cache hit


@pytest.fixture(scope="module")
def model():
    return tiny_llama(num_layers=N, hidden_size=H, seed=3)


@pytest.fixture(scope="module")
def prompts():
    corpus = synthetic_corpus(5, 24, seed=7)
    lengths = [24, 9, 17, 5, 12]
    base = [Prompt(f"s{i}", corpus[i, :n].tolist()) for i, n in enumerate(lengths)]
    return base + [Prompt(SHORT_SAMPLE, base[0].token_ids[:CACHED] + [1, 2, 3])]


@pytest.fixture(scope="module")
def train_dump(model, prompts, tmp_path_factory):
    return capture_hf(model, prompts, tmp_path_factory.mktemp("train") / "train.h5", batch_size=2, progress=False)


def _options():
    return FakeOptions("EAGLE3", radix_cache=True, nan_values={17: (NAN_POSITIONS, (H, 2 * H))})


@pytest.fixture(scope="module")
def bad_serve(model, prompts, tmp_path_factory):
    work = tmp_path_factory.mktemp("serve")
    with FakeSGLang(model, work, _options()) as server:
        path = capture_sglang(server.url, prompts, work / "serve.h5", progress=False, backoff=0.01)
        expected = {p.sample_id: server.rows_for(p.token_ids).numpy() for p in prompts}
    return path, expected


def test_capture_keeps_nan_and_short_samples_and_marks_them(bad_serve, prompts):
    path, expected = bad_serve
    with open_dump(path) as serve:
        assert serve.version == 2 and serve.sample_ids == [p.sample_id for p in prompts]
        nan = serve.mark(NAN_SAMPLE)
        assert (nan.returned, nan.nonfinite_rows, nan.short) == ((0, 17), len(NAN_POSITIONS), False)
        rows = serve.states(NAN_SAMPLE, "hidden_states")
        bad = ~np.isfinite(rows)
        assert sorted(set(np.flatnonzero(bad.any(axis=1)))) == NAN_POSITIONS
        assert bad[:, H:2 * H][NAN_POSITIONS].all() and not bad[:, :H].any() and not bad[:, 2 * H:].any()
        good = np.isfinite(rows).all(axis=1)
        np.testing.assert_allclose(rows[good], expected[NAN_SAMPLE][good], atol=2e-5)  # the rest, as returned

        short = serve.mark(SHORT_SAMPLE)
        assert (short.returned, short.rows_returned, short.length, short.nonfinite_rows) == ((CACHED, 12), 3, 12, 0)
        rows = serve.states(SHORT_SAMPLE, "hidden_states")
        assert np.isnan(rows[:CACHED]).all()  # placeholders where nothing came back
        np.testing.assert_allclose(rows[CACHED:], expected[SHORT_SAMPLE][CACHED:], atol=2e-5)  # at their positions
        assert list(serve.marks.marked_indices()) == [2, 5]
        for sid in ("s0", "s1", "s3", "s4"):
            assert not serve.mark(sid).marked


def test_compare_names_samples_positions_and_slices(bad_serve, train_dump):
    path, _ = bad_serve
    for device in ("cpu", TorchKernels("cpu")):  # the numpy kernels, and the torch ones on the CPU
        result = compare(train_dump, path, device=device, tokenizer=None)
        nonfinite = result.finding("nonfinite")
        assert nonfinite is not None and nonfinite.severity == "error"
        ev = nonfinite.evidence
        assert ev["nonfinite_rows_total"] == len(NAN_POSITIONS) and ev["nonfinite_samples_total"] == 1
        assert [(w["sample_id"], w["position"], w["slices"], w["side"], w["value"]) for w in ev["locations"]] == [
            (NAN_SAMPLE, p, ["HF[4]"], "serve", "NaN") for p in NAN_POSITIONS]
        assert ev["samples"] == [{"sample_id": NAN_SAMPLE, "rows": 2, "serve_rows": 2, "train_rows": 0,
                                  "positions": "3-10", "slices": ["HF[4]"]}]
        assert ev["marked_at_capture"] == [NAN_SAMPLE]
        assert f"{NAN_SAMPLE} (2 rows at 3-10)" in nonfinite.title

        short = result.finding("short_rows")
        assert short is not None and short.severity == "warn"
        assert short.evidence["samples"] == [{"sample_id": SHORT_SAMPLE, "rows_returned": 3, "tokens": 12,
                                              "positions_returned": "9-11"}]
        assert short.evidence["rows_not_returned"] == CACHED
        assert "--disable-radix-cache --chunked-prefill-size -1" in short.fix
        assert short.evidence["server_settings"] == ["the radix (prefix) cache is on"]
        # the placeholders never reach the numbers: only the planted NaN rows are left out
        assert sum(m.excluded_rows for s in result.streams for m in s.slices if s.serve_stream == "hidden_states") \
            == len(NAN_POSITIONS)
        assert result.tokens.aligned_tokens == 24 + 9 + 17 + 5 + 12 + 12 - CACHED  # s5's returned rows only
        assert not {f.code for f in result.findings} & {"row_shift", "foreign_rows", "unexplained", "layer_offset"}


def test_cli_says_on_stderr_how_many_samples_were_marked(model, prompts, tmp_path):
    runner = CliRunner()  # click 8.2+: result.stderr apart from result.stdout
    with FakeSGLang(model, tmp_path, _options()) as server:
        jsonl = tmp_path / "prompts.jsonl"
        jsonl.write_text("".join(f'{{"id": "{p.sample_id}", "input_ids": {p.token_ids}}}\n' for p in prompts))
        r = runner.invoke(cli, ["capture", "sglang", "--url", server.url, "--prompts", str(jsonl),
                                "--out", str(tmp_path / "serve.h5"), "--quiet"])
    assert r.exit_code == 0, r.output
    line = [x for x in r.stderr.splitlines() if "marked" in x]
    assert len(line) == 1 and "marked 2 of 6 samples" in line[0] and "--disable-radix-cache" in line[0]
    assert f"{SHORT_SAMPLE} (3 of 12 rows returned)" in line[0] and f"{NAN_SAMPLE} (2 NaN/Inf rows)" in line[0]


def test_nothing_comparable_is_still_refused(model, prompts, tmp_path):
    every = {len(p.token_ids): (list(range(len(p.token_ids))), (0, H)) for p in prompts}
    with FakeSGLang(model, tmp_path, FakeOptions("EAGLE3", nan_values=every)) as server:
        with pytest.raises(BadInput, match="no sample came back with a finite row"):
            capture_sglang(server.url, prompts, tmp_path / "serve.h5", progress=False)


def test_offline_engine_tensors_with_nan_are_kept(model, prompts, tmp_path):
    # the offline Engine hands back tensors (NaN as NaN, not null): the same keep-and-mark
    from alignprobe.probes.sglang_capture import capture_from_backend
    from alignprobe.probes.sglang_engine import EngineBackend

    with FakeSGLang(model, tmp_path, _options()) as fake:
        out = capture_from_backend(EngineBackend(InProcessEngine(fake)), prompts, tmp_path / "serve.h5", progress=False)
    with open_dump(out) as serve:
        assert serve.mark(NAN_SAMPLE).nonfinite_rows == 2 and serve.mark(SHORT_SAMPLE).returned == (CACHED, 12)


def test_vllm_files_short_and_nan_are_kept(model, prompts, train_dump, tmp_path):
    ids = [2, 4, 5, N]
    folder = tmp_path / "hs"
    folder.mkdir()
    for i, p in enumerate(prompts[:3]):
        with torch.no_grad():
            fs = forward_states(model, torch.tensor([p.token_ids]))
        states = torch.stack([fs.final_prenorm[0] if k == N else fs.hf[k][0] for k in ids], dim=1).contiguous()
        if p.sample_id == "s0":
            states = states[4:].contiguous()  # a prefix-cache hit: the computed suffix only
        if p.sample_id == "s2":
            states[6, 1, 0] = float("inf")
        save_file({"hidden_states": states, "token_ids": torch.tensor(p.token_ids)}, str(folder / f"r{i}.safetensors"))
    out = capture_vllm_files(str(folder), tmp_path / "serve.h5", layer_ids=ids, tokens_from=train_dump, progress=False)
    with open_dump(out) as serve:
        assert serve.mark("s0").returned == (4, 24) and np.isnan(serve.states("s0", "aux")[:4]).all()
        assert serve.mark("s2").nonfinite_rows == 1 and not serve.mark("s1").marked
    result = compare(train_dump, out, tokenizer=None)
    short = result.finding("short_rows")
    assert short.evidence["samples"][0]["sample_id"] == "s0" and "--no-enable-prefix-caching" in short.fix
    where = result.finding("nonfinite").evidence["locations"]
    assert [(w["sample_id"], w["position"], w["slices"], w["value"]) for w in where] == [("s2", 6, ["HF[4]"], "Inf")]


def test_nan_planted_in_a_capture_hf_dump_is_located_over_all_rows(model, prompts, train_dump, bad_serve, tmp_path):
    # a clean serve side (the whole samples of the loopback capture) against a train dump with one NaN
    planted = tmp_path / "train_nan.h5"
    shutil.copy(train_dump, planted)
    with open_dump(train_dump) as train:
        start = train.span("s4")[0]
        layers = train.streams["layers"].hf_indices
    with h5py.File(planted, "r+") as f:
        for name, column in (("eagle3_aux", 1), ("layers", layers.index(4))):  # HF[4] wherever it is stored
            ds = f[f"streams/{name}"]
            row = ds[start + 7]
            row[column * H + 5] = np.nan
            ds[start + 7] = row
    result = compare(planted, bad_serve[0], tokenizer=None, block_bytes=1 << 12)  # many small blocks
    ev = result.finding("nonfinite").evidence
    train_side = [w for w in ev["locations"] if w["side"] == "train"]
    assert [(w["sample_id"], w["position"], w["slices"]) for w in train_side] == [("s4", 7, ["HF[4]"])]


def test_marks_survive_shards_merge_and_resume_and_unmarked_dumps_stay_version_1(tmp_path):
    from alignprobe.dump import DumpWriter, Provenance, StreamClaim
    from alignprobe.dump.marks import SampleMark

    streams = {"aux": StreamClaim((2, 4, 5), H, N, "bfloat16")}
    states = lambda n: np.random.default_rng(n).standard_normal((n, 3 * H)).astype(np.float32)  # noqa: E731
    plain = tmp_path / "plain.h5"
    with DumpWriter(plain, Provenance(engine="test"), streams, shard_tokens=8) as w:
        for i, n in enumerate([5, 6, 7]):
            w.add(f"x{i}", list(range(n)), {"aux": states(n)})
    with open_dump(plain) as d:
        assert d.version == 1 and d.marks is None and not d.mark("x1").marked
        with h5py.File(plain) as f:
            assert "returned_rows" not in f["samples"]

    marked = tmp_path / "marked.h5"
    w = DumpWriter(marked, Provenance(engine="test"), streams, shard_tokens=8)
    w.add("a", list(range(5)), {"aux": states(5)})
    w.add("b", list(range(6)), {"aux": states(6)}, SampleMark(6, (2, 6), 1))
    w.abandon()  # a capture cut short: its shards stay for --resume
    with DumpWriter(marked, Provenance(engine="test"), streams, shard_tokens=8, resume=True) as w:
        assert w.done_ids == {"a", "b"}
        w.add("c", list(range(7)), {"aux": states(7)}, SampleMark(7, (0, 7), 3))
        w.add("d", list(range(4)), {"aux": states(4)})
    with open_dump(marked) as d:
        assert d.version == 2 and d.sample_ids == ["a", "b", "c", "d"]
        assert [(d.mark(s).returned, d.mark(s).nonfinite_rows) for s in d.sample_ids] == [
            ((0, 5), 0), ((2, 6), 1), ((0, 7), 3), ((0, 4), 0)]
    with pytest.raises(ValueError, match="for 9 tokens"):
        with DumpWriter(tmp_path / "x.h5", Provenance(), streams) as w:
            w.add("a", list(range(5)), {"aux": states(5)}, SampleMark(9, (0, 9), 0))


def test_no_rows_returned_at_all_is_named_for_the_short_rows_not_the_token_ids(train_dump, tmp_path):
    """Every paired sample marked short with nothing returned: no row lines up, and the tokens agree,
    so no_aligned_tokens gives short_rows' fix (the engine's prefix cache), not "capture the same ids"."""
    import shutil

    import h5py
    import numpy as np

    from alignprobe.compare import compare

    empty = tmp_path / "empty.h5"
    shutil.copyfile(train_dump, empty)
    with open_dump(str(empty)) as d:
        n = d.num_samples
    with h5py.File(empty, "r+") as f:
        f.attrs["format_version"] = 2
        f["samples/returned_rows"] = np.zeros((n, 2), np.int64)
        f["samples/nonfinite_rows"] = np.zeros(n, np.int64)
    result = compare(train_dump, str(empty))
    none = result.finding("no_aligned_tokens")
    assert none is not None and result.finding("short_rows") is not None
    assert "see short_rows" in none.fix and "prefix" in none.fix and "same token ids" not in none.fix
