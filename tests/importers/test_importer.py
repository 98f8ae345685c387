"""Importers: SpecForge / speculators / EAGLE ge_data files written in their real layouts from a tiny
model, imported, and checked against an HF capture of the same prompts; and every bad input.

The writers below follow each system's own code (see alignprobe/importers/*.py for the sources):
SpecForge pads a batch with zeros and runs each padded row whole, its aux ids [1, N//2-1, N-4] are
layer outputs = HF[k+1], ``hidden_state`` is post-norm; speculators stacks vLLM's HF[k] for
[2, N//2, N-3] and the pre-norm final; ge_data stores ``hidden_states[-1]`` unbatched.
"""

from __future__ import annotations

import gc
import gzip
import hashlib
import json
import os

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from alignprobe.compare import compare
from alignprobe.dump import open_dump
from alignprobe.errors import BadInput
from alignprobe.importers import detect_format, import_source, open_source
from alignprobe.probes.hf import capture_hf
from alignprobe.probes.prompts import prompts_from_token_lists
from alignprobe.demo.tiny_models import tiny_llama

N = 8  # tiny target: SpecForge default ids [1, 3, 4] -> HF[2, 4, 5] = the EAGLE-3 view (2, N//2, N-3)
SPECFORGE_IDS = [1, N // 2 - 1, N - 4]
VLLM_IDS = [2, N // 2, N - 3, N]


@pytest.fixture(scope="module")
def model():
    return tiny_llama(num_layers=N)


@pytest.fixture(scope="module")
def token_lists():
    g = torch.Generator().manual_seed(11)
    lists = [torch.randint(1, 500, (int(n),), generator=g).tolist() for n in torch.randint(3, 20, (9,), generator=g)]
    lists[3][-1] = 0  # a real token 0 at the end, which looks like SpecForge padding
    return lists


@pytest.fixture(scope="module")
def hf_dump(model, token_lists, tmp_path_factory):
    out = tmp_path_factory.mktemp("hf") / "train.h5"
    return capture_hf(model, prompts_from_token_lists(token_lists), out, batch_size=4, progress=False)


def forward(model, rows: torch.Tensor):
    """HF states and the pre-norm final of unmasked rows (a hook of our own, independent of the probe)."""
    kept = {}
    hook = model.model.norm.register_forward_hook(lambda _m, inp, _o: kept.__setitem__("pre", inp[0]) or None)
    try:
        with torch.no_grad():
            out = model(input_ids=rows, output_hidden_states=True)
    finally:
        hook.remove()
    return out.hidden_states, kept["pre"]


def write_specforge(root, model, token_lists, layer_ids=SPECFORGE_IDS, *, online=False, gz_every=3, batch=4):
    """SpecForge's prepare_hidden_states: batches padded with 0, each padded row run whole."""
    for start in range(0, len(token_lists), batch):
        group = token_lists[start : start + batch]
        width = max(len(t) for t in group)
        rows = torch.zeros(len(group), width, dtype=torch.long)
        loss = torch.zeros(len(group), width, dtype=torch.long)
        for r, t in enumerate(group):
            rows[r, : len(t)] = torch.tensor(t)
            loss[r, 1 : len(t)] = 1  # any mask; the tail past the sample stays 0 like the collator's padding
        hs, _ = forward(model, rows)
        for r in range(len(group)):
            idx = start + r
            aux = torch.cat([hs[k + 1][r] for k in layer_ids], dim=-1).unsqueeze(0)  # output of layer k
            final = hs[-1][r].unsqueeze(0)  # post-norm, as SGLang returns it
            record = {"input_ids": rows[r].clone(), "loss_mask": loss[r].clone()}
            record.update({"hidden_state": aux, "target": final} if online else {"aux_hidden_state": aux, "hidden_state": final})
            folder = os.path.join(root, f"rows_{idx // 2000 * 2000}-{idx // 2000 * 2000 + 2000}")
            os.makedirs(folder, exist_ok=True)
            if gz_every and idx % gz_every == 0:
                with gzip.open(os.path.join(folder, f"data_{idx}.ckpt.gz"), "wb") as fh:
                    torch.save(record, fh)
            else:
                torch.save(record, os.path.join(folder, f"data_{idx}.ckpt"))
    return str(root)


def write_speculators(root, model, token_lists, layer_ids=VLLM_IDS):
    os.makedirs(root, exist_ok=True)
    for idx, t in enumerate(token_lists):
        hs, pre = forward(model, torch.tensor([t]))
        slices = [pre[0] if k == N else hs[k][0] for k in layer_ids]  # vLLM: id k = HF[k], id N = pre-norm
        save_file({"hidden_states": torch.stack(slices, dim=1).contiguous(), "token_ids": torch.tensor(t)},
                  os.path.join(root, f"hs_{idx}.safetensors"))
    return str(root)


def write_ge_data(root, model, token_lists):
    folder = os.path.join(root, "0")
    os.makedirs(folder, exist_ok=True)
    for idx, t in enumerate(token_lists):
        hs, _ = forward(model, torch.tensor([t]))
        torch.save({"input_ids": torch.tensor(t), "hidden_state": hs[-1][0], "loss_mask": torch.ones(len(t))},
                   os.path.join(folder, f"data_{idx}.ckpt"))
    return str(root)


@pytest.fixture(scope="module")
def specforge_dir(model, token_lists, tmp_path_factory):
    return write_specforge(tmp_path_factory.mktemp("specforge") / "hidden_states", model, token_lists)


@pytest.fixture(scope="module")
def speculators_dir(model, token_lists, tmp_path_factory):
    return write_speculators(tmp_path_factory.mktemp("speculators") / "hidden_states", model, token_lists)


def tree_digest(root):
    digest = hashlib.sha256()
    for folder, _dirs, files in sorted(os.walk(root)):
        for name in sorted(files):
            digest.update(name.encode())
            with open(os.path.join(folder, name), "rb") as fh:
                digest.update(fh.read())
    return digest.hexdigest()


def assert_streams_match(imported, hf, pairs, atol=1e-5):
    """``pairs``: (imported stream, HF stream, HF column slice) compared sample by sample."""
    with open_dump(imported) as a, open_dump(hf) as b:
        assert sorted(a.sample_ids) == sorted(b.sample_ids)
        for sid in b.sample_ids:
            np.testing.assert_array_equal(a.token_ids(sid), b.token_ids(sid))
            for mine, theirs, columns in pairs:
                np.testing.assert_allclose(a.states(sid, mine), b.states(sid, theirs)[:, columns], atol=atol, err_msg=sid)


def verdict(train, serve):
    result = compare(train, serve)
    # an import of the very states capture hf wrote is bit-identical to it: named at info (same_dump)
    return result.verdict, [f"{f.code}: {f.title}" for f in result.findings
                            if not (f.code == "same_dump" and f.severity == "info")]


# -- SpecForge -----------------------------------------------------------------------------------


def test_specforge_import_matches_hf_and_compares_clean(specforge_dir, hf_dump, tmp_path):
    before = tree_digest(specforge_dir)
    result = import_source(specforge_dir, tmp_path / "sf.h5", layer_ids=SPECFORGE_IDS, num_layers=N, progress=False)
    assert tree_digest(specforge_dir) == before  # the user's files are never changed
    assert result.samples == 9 and result.padded_samples > 0
    with open_dump(result.path) as d:
        aux, final = d.streams["aux"], d.streams["final"]
        assert aux.hf_indices == (2, 4, 5) and aux.role == "drafter_input" and aux.final_norm == "post"
        assert final.hf_indices == (N,) and final.role == "final" and final.final_norm == "post"
        assert d.provenance.engine == "specforge" and d.provenance.capture["layer_ids"] == SPECFORGE_IDS
    # HF[2, 4, 5] are the HF capture's eagle3_aux; padding was dropped, so every id pairs by tokens
    assert_streams_match(result.path, hf_dump, [("aux", "eagle3_aux", slice(None)), ("final", "final", slice(None))])
    assert verdict(hf_dump, result.path) == ("PASS", [])


def test_specforge_online_layout_names_the_aux_concat_hidden_state(model, token_lists, hf_dump, tmp_path):
    root = write_specforge(tmp_path / "online", model, token_lists, online=True, gz_every=0)
    result = import_source(root, tmp_path / "on.h5", layer_ids=SPECFORGE_IDS, num_layers=N, progress=False)
    assert_streams_match(result.path, hf_dump, [("aux", "eagle3_aux", slice(None)), ("final", "final", slice(None))])


def test_specforge_default_ids_reveal_n_and_drafter_config_gives_ids(specforge_dir, hf_dump, tmp_path):
    config = tmp_path / "drafter.json"
    config.write_text(json.dumps({"eagle_config": {"eagle_aux_hidden_state_layer_ids": SPECFORGE_IDS}, "num_hidden_layers": 1}))
    result = import_source(specforge_dir, tmp_path / "c.h5", config=config, progress=False)
    assert result.plan.num_layers == N and any("SpecForge's default" in n for n in result.plan.notes)
    assert result.plan.hf_indices == (2, 4, 5)


def test_specforge_ids_off_by_one_fail_the_comparison(model, token_lists, hf_dump, tmp_path):
    # the run captured ids [2, 4, 5] as SpecForge reads them (HF[3, 5, 6]) but training expects HF[2, 4, 5]
    root = write_specforge(tmp_path / "shifted", model, token_lists, layer_ids=[2, 4, 5], gz_every=0)
    result = import_source(root, tmp_path / "s.h5", layer_ids=[2, 4, 5], num_layers=N, progress=False)
    assert result.plan.hf_indices == (3, 5, 6)
    with open_dump(result.path) as d, open_dump(hf_dump) as h:
        sid = h.sample_ids[0]
        np.testing.assert_allclose(d.states(sid, "aux")[:, :64], h.states(sid, "layers")[:, 3 * 64 : 4 * 64], atol=1e-5)
    assert verdict(hf_dump, result.path)[0] != "PASS"


def test_ids_from_names_samples_after_the_reference_and_keeps_a_real_final_zero(model, token_lists, specforge_dir,
                                                                              tmp_path):
    named = capture_hf(model, prompts_from_token_lists(token_lists, [f"q{i}" for i in range(9)]), tmp_path / "n.h5",
                       layers="eagle3", progress=False)
    result = import_source(specforge_dir, tmp_path / "i.h5", layer_ids=SPECFORGE_IDS, num_layers=N, ids_from=named,
                           progress=False)
    assert result.matched_ids == 9
    with open_dump(result.path) as d:
        assert sorted(d.sample_ids) == sorted(f"q{i}" for i in range(9))
        assert d.token_ids("q3").tolist() == token_lists[3]  # its last token, 0, is real and was kept
    assert verdict(named, result.path)[0] == "PASS"


# -- speculators and EAGLE ge_data ---------------------------------------------------------------


def test_speculators_import_splits_aux_and_prenorm_final(speculators_dir, hf_dump, tmp_path):
    result = import_source(speculators_dir, tmp_path / "sp.h5", layer_ids=VLLM_IDS, progress=False)
    assert result.plan.num_layers == N  # the last id is N in speculators' layout
    with open_dump(result.path) as d:
        assert d.streams["aux"].hf_indices == (2, 4, 5) and d.streams["final"].final_norm == "pre"
    assert_streams_match(result.path, hf_dump, [("aux", "eagle3_aux", slice(None)), ("final", "final_prenorm", slice(None))])
    # The aux states agree, and speculators' pre-norm final is paired with the HF extractor's pre-norm
    # final (capture hf holds both): a correct dataset passes (issue 11)
    outcome, findings = verdict(hf_dump, result.path)
    assert outcome == "PASS" and [f for f in findings if not f.startswith(("mapping_ambiguous", "same_dump"))] == []


def test_speculators_without_the_last_layer_compares_clean(model, token_lists, hf_dump, tmp_path):
    root = write_speculators(tmp_path / "aux_only", model, token_lists, layer_ids=VLLM_IDS[:3])  # --no-include-last-layer
    result = import_source(root, tmp_path / "a.h5", layer_ids=VLLM_IDS[:3], num_layers=N, progress=False)
    assert list(result.plan.streams) == ["aux"]
    assert verdict(hf_dump, result.path) == ("PASS", [])


def test_folders_without_prompt_ids_pair_with_a_named_capture_by_tokens(model, token_lists, speculators_dir,
                                                                         specforge_dir, tmp_path):
    """A capture of prompts with their own ids ("q0".."q8") against folders imported without --ids-from
    (samples named by their tokens' hash): every sample pairs by its tokens and a correct set passes
    (issue 22). Read in place, a folder takes the other side's ids, so those pair by id."""
    named = capture_hf(model, prompts_from_token_lists(token_lists, ids=[f"q{i}" for i in range(9)]),
                       tmp_path / "named.h5", batch_size=4, progress=False)
    for folder, ids in ((speculators_dir, VLLM_IDS), (specforge_dir, SPECFORGE_IDS)):
        imported = import_source(folder, tmp_path / f"{len(ids)}.h5", layer_ids=ids, num_layers=N, progress=False)
        result = compare(named, imported.path)
        assert result.tokens.paired_by == "tokens" and result.tokens.paired == 9, folder
        assert result.verdict == "PASS" and not [f for f in result.findings if f.severity != "info"], result.findings


def test_speculators_three_ids_get_n_appended(speculators_dir, tmp_path):
    result = import_source(speculators_dir, tmp_path / "sp3.h5", layer_ids=VLLM_IDS[:3], num_layers=N, progress=False)
    assert result.plan.layer_ids == tuple(VLLM_IDS) and any("appended N" in n for n in result.plan.notes)


def test_ge_data_import_is_the_post_norm_final(model, token_lists, hf_dump, tmp_path):
    root = write_ge_data(tmp_path / "ge", model, token_lists)
    assert detect_format(root) == "eagle"
    result = import_source(root, tmp_path / "ge.h5", num_layers=N, progress=False)
    with open_dump(result.path) as d:
        assert list(d.streams) == ["final"] and d.streams["final"].final_norm == "post"
    assert_streams_match(result.path, hf_dump, [("final", "final", slice(None))])


def test_bf16_files_stay_bf16(model, token_lists, tmp_path):
    root = tmp_path / "bf"
    write_speculators(root, model.to(torch.bfloat16), token_lists[:2])
    model.to(torch.float32)
    with open_dump(import_source(root, tmp_path / "bf.h5", layer_ids=VLLM_IDS, progress=False).path) as d:
        assert {c.dtype for c in d.streams.values()} == {"bfloat16"}


# -- open_source and the command line -------------------------------------------------------------


def test_open_source_opens_dumps_and_imports_folders(specforge_dir, hf_dump, tmp_path):
    with open_source(hf_dump) as d:
        assert d.path == hf_dump
    dump = open_source(specforge_dir, layer_ids=SPECFORGE_IDS, num_layers=N)
    folder = os.path.dirname(dump.path)
    assert "aux" in dump.streams and os.path.isdir(folder)
    dump.close()
    del dump
    gc.collect()
    assert not os.path.exists(folder)  # the temporary import goes with the Dump
    kept = open_source(specforge_dir, layer_ids=SPECFORGE_IDS, num_layers=N, workdir=tmp_path / "work")
    kept.close()
    assert os.path.isfile(tmp_path / "work" / "hidden_states.h5")


def test_cli_import(specforge_dir, tmp_path):
    from click.testing import CliRunner

    from alignprobe.cli.main import cli

    out = tmp_path / "cli.h5"
    r = CliRunner().invoke(cli, ["import", specforge_dir, "--out", str(out), "--system", "specforge",
                                 "--layer-ids", "1,3,4", "--num-layers", str(N), "--quiet"])
    assert r.exit_code == 0, r.output
    assert "HF [2, 4, 5]" in r.output and out.is_file()
    r = CliRunner().invoke(cli, ["import", specforge_dir, "--out", str(out), "--layer-ids", "1,3,4", "--num-layers", "8"])
    assert r.exit_code == 2 and "already exists" in r.stderr
    r = CliRunner().invoke(cli, ["import", specforge_dir, "--out", str(tmp_path / "x.h5"), "--layer-ids", "1,a"])
    assert r.exit_code == 2 and "comma-separated integers" in r.stderr


# -- bad inputs ----------------------------------------------------------------------------------


class NotATensor:
    pass


def one_file(tmp_path, name, write):
    root = tmp_path / "src"
    root.mkdir(exist_ok=True)
    write(str(root / name))
    return str(root)


def good_record(length=5, hidden=64, slices=3):
    return {"input_ids": torch.arange(1, length + 1), "loss_mask": torch.ones(length, dtype=torch.long),
            "aux_hidden_state": torch.randn(1, length, slices * hidden), "hidden_state": torch.randn(1, length, hidden)}


BAD_FILES = [
    ("data_0.ckpt", lambda p: open(p, "wb").write(b"not a checkpoint"), "not a torch.save file"),
    ("data_0.ckpt.gz", lambda p: open(p, "wb").write(b"\x1f\x8b broken gzip"), "truncated or damaged"),
    ("data_0.ckpt", lambda p: torch.save({"input_ids": torch.arange(3), "x": NotATensor()}, p), "weights_only=True"),
    ("data_0.ckpt", lambda p: torch.save(torch.zeros(3), p), "not the dict of tensors"),
    ("data_0.ckpt", lambda p: torch.save({"input_ids": torch.arange(3), "other": torch.zeros(3)}, p), "expected one of: SpecForge"),
    ("data_0.ckpt", lambda p: torch.save({**good_record(), "input_ids": torch.arange(1, 7)}, p), "holds 5 tokens but input_ids holds 6"),
    ("data_0.ckpt", lambda p: torch.save({**good_record(), "input_ids": torch.zeros(5)}, p), "expected integer ids"),
    ("data_0.ckpt", lambda p: torch.save({**good_record(), "aux_hidden_state": torch.randn(1, 5, 100)}, p), "not a multiple"),
    ("data_0.ckpt", lambda p: torch.save({**good_record(), "hidden_state": torch.arange(5)}, p), "floating-point"),
    ("hs_0.safetensors", lambda p: open(p, "wb").write(b"\x08\x00\x00\x00\x00\x00\x00\x00garbage!"), "not a readable safetensors"),
    ("hs_0.safetensors", lambda p: save_file({"hidden_states": torch.randn(4, 4, 8)}, p), "missing token_ids"),
    ("hs_0.safetensors", lambda p: save_file({"hidden_states": torch.randn(4, 8), "token_ids": torch.arange(4)}, p), "3 dims"),
]


@pytest.mark.parametrize("name, write, message", BAD_FILES, ids=[m for _, _, m in BAD_FILES])
def test_a_file_that_is_not_what_it_claims_is_bad_input(tmp_path, name, write, message):
    root = one_file(tmp_path, name, write)
    with pytest.raises(BadInput, match=message) as info:
        import_source(root, tmp_path / "o.h5", layer_ids=[1, 2, 3, 8], num_layers=8, progress=False)
    assert "\n" not in str(info.value)
    assert not (tmp_path / "o.h5").exists() and not (tmp_path / "o.h5.partial").exists()


def test_bad_user_facts(specforge_dir, tmp_path):
    out = tmp_path / "o.h5"
    config = tmp_path / "cfg.json"
    config.write_text(json.dumps({"num_hidden_layers": 1}))
    cases = [
        ({"layer_ids": [1, 3], "num_layers": 8}, "holds 3 layer slices of hidden size 64, but 2 layer ids"),
        ({"layer_ids": [2, 3, 4]}, "do not say how many layers"),
        ({"layer_ids": [1, 3, 4], "num_layers": 8, "system": "speculators"}, "are specforge files, not speculators"),
        ({"layer_ids": [1, 3, 4], "config": config}, "not both"),
        ({"config": config, "num_layers": 8}, "no eagle_aux_hidden_state_layer_ids, eagle_config.eagle_aux_hidden_state_layer_ids or dflash_config"),
        ({"config": tmp_path / "none.json", "num_layers": 8}, "no such config file"),
        ({"layer_ids": [1, 3, 7], "num_layers": 8}, "outside 1..7"),  # SpecForge id 7 = HF[8]: not capturable
        ({"layer_ids": [1, 3, 4], "num_layers": 8, "target_config": config}, "not both"),
    ]
    for kwargs, message in cases:
        with pytest.raises(BadInput, match=message):
            import_source(specforge_dir, out, progress=False, **kwargs)
    (tmp_path / "broken.json").write_text("{nope")
    with pytest.raises(BadInput, match="not JSON"):
        import_source(specforge_dir, out, config=tmp_path / "broken.json", num_layers=8, progress=False)
    with pytest.raises(BadInput, match="no such file or directory"):
        import_source(tmp_path / "missing", out, progress=False)
    (tmp_path / "empty").mkdir()
    with pytest.raises(BadInput, match="neither an alignprobe dump nor a known"):
        import_source(tmp_path / "empty", out, progress=False)


def test_a_later_file_unlike_the_first_is_bad_input(tmp_path):
    root = tmp_path / "mixed"
    root.mkdir()
    torch.save(good_record(), root / "data_0.ckpt")
    torch.save(good_record(slices=2), root / "data_1.ckpt")
    with pytest.raises(BadInput, match=r"data_1.ckpt: the layer states are 128 wide, but the first file's are 192"):
        import_source(root, tmp_path / "o.h5", layer_ids=[1, 3, 4], num_layers=8, progress=False)
    assert not (tmp_path / "o.h5.partial").exists()


def test_import_of_our_own_dump_is_refused(hf_dump, tmp_path):
    with pytest.raises(BadInput, match="alignprobe dumps are read as they are"):
        import_source(hf_dump, tmp_path / "o.h5", progress=False)


def test_compare_takes_a_foreign_folder_directly(model, token_lists, specforge_dir, tmp_path):
    """`alignprobe compare` imports a SpecForge folder on the way: N and sample ids from the other dump."""
    from click.testing import CliRunner

    from alignprobe.cli.main import cli

    # The serving side as an engine sees it: the EAGLE-3 aux layers only.
    serve = capture_hf(model, prompts_from_token_lists(token_lists), tmp_path / "serve.h5", layers="eagle3",
                       progress=False)
    before = tree_digest(specforge_dir)
    args = ["compare", "--train-dump", specforge_dir, "--serve-dump", serve, "--json", str(tmp_path / "r.json")]
    r = CliRunner().invoke(cli, [*args, "--train-layer-ids", ",".join(map(str, SPECFORGE_IDS))])
    assert r.exit_code == 0, r.output + r.stderr
    assert json.loads((tmp_path / "r.json").read_text())["verdict"] == "PASS"
    # Training data captured one layer deeper than the engine serves: the comparer measures the offset.
    deeper = write_specforge(tmp_path / "deeper", model, token_lists, layer_ids=[i + 1 for i in SPECFORGE_IDS],
                             gz_every=0)
    args[2] = str(deeper)
    r = CliRunner().invoke(cli, [*args, "--train-layer-ids", ",".join(str(i + 1) for i in SPECFORGE_IDS)])
    assert r.exit_code == 1, r.output + r.stderr
    # Training holds HF[3, 5, 6] only; serving's HF[2, 4, 5]: serve HF[5] equals train HF[5] and both
    # sides' claims are one layer apart, so the explanations name the offset (issue 11)
    codes = {f["code"] for f in json.loads((tmp_path / "r.json").read_text())["findings"]}
    assert "layer_offset" in codes
    r = CliRunner().invoke(cli, [*args, "--train-layer-ids", "1,x"])
    assert r.exit_code == 2 and "--train-layer-ids" in r.stderr
    assert tree_digest(specforge_dir) == before


# -- speculators FP8 files and the default ids (issue 11, imports found wrong on real files) -------


def write_speculators_fp8(root, model, token_lists, layer_ids=VLLM_IDS, scale_shape=(1, 1)):
    """hs-connectors' FP8HiddenStatesConnector: per token, scale = amax / 448 and fp8 = x / scale."""
    os.makedirs(root, exist_ok=True)
    for idx, t in enumerate(token_lists):
        hs, pre = forward(model, torch.tensor([t]))
        states = torch.stack([pre[0] if k == N else hs[k][0] for k in layer_ids], dim=1).float()
        amax = states.abs().amax(dim=(1, 2)).reshape(-1, *scale_shape)
        scale = (amax / torch.finfo(torch.float8_e4m3fn).max).clamp(min=1e-12)
        save_file({"hidden_states": (states / scale.reshape(-1, 1, 1)).to(torch.float8_e4m3fn).contiguous(),
                   "hidden_states_scales": scale.contiguous(), "token_ids": torch.tensor(t)},
                  os.path.join(root, f"hs_{idx}.safetensors"))
    return str(root)


@pytest.mark.parametrize("scale_shape", [(1, 1), (1,)])  # [S, 1, 1] today, [S, 1] in an older connector
def test_speculators_fp8_states_are_dequantized_with_their_scale(model, token_lists, hf_dump, tmp_path, scale_shape):
    root = write_speculators_fp8(tmp_path / "fp8", model, token_lists, scale_shape=scale_shape)
    result = import_source(root, tmp_path / "fp8.h5", layer_ids=VLLM_IDS, progress=False)
    assert any("float8_e4m3fn" in n and "dequantized" in n for n in result.plan.notes)
    with open_dump(result.path) as d:
        assert d.provenance.capture["states_storage"] == "float8_e4m3fn"
    # e4m3 keeps 3 mantissa bits: each value within 2^-4 of itself relative, far from a 1/scale error
    with open_dump(result.path) as a, open_dump(hf_dump) as b:
        for sid in b.sample_ids:
            mine, theirs = a.states(sid, "aux"), b.states(sid, "eagle3_aux")
            rel = np.linalg.norm(mine - theirs) / np.linalg.norm(theirs)
            assert rel < 0.05, (sid, rel)


def test_fp8_states_without_their_scale_are_bad_input(tmp_path):
    root = tmp_path / "noscale"
    root.mkdir()
    save_file({"hidden_states": torch.zeros(4, 3, 8).to(torch.float8_e4m3fn), "token_ids": torch.arange(4)},
              str(root / "hs_0.safetensors"))
    with pytest.raises(BadInput, match="no hidden_states_scales"):
        import_source(root, tmp_path / "o.h5", layer_ids=[2, 4, 5], num_layers=8, progress=False)


def test_speculators_three_slices_need_no_ids(model, token_lists, tmp_path):
    root = write_speculators(tmp_path / "aux3", model, token_lists, layer_ids=VLLM_IDS[:3])
    result = import_source(root, tmp_path / "a3.h5", num_layers=N, progress=False)
    assert result.plan.layer_ids == tuple(VLLM_IDS[:3]) and list(result.plan.streams) == ["aux"]
    with open_dump(result.path) as d:
        assert d.streams["aux"].hf_indices == (2, 4, 5)


def test_default_ids_that_do_not_fit_do_not_claim_the_user_gave_them(tmp_path):
    root = tmp_path / "two"
    root.mkdir()
    save_file({"hidden_states": torch.zeros(4, 2, 8), "token_ids": torch.arange(4)}, str(root / "hs_0.safetensors"))
    with pytest.raises(BadInput) as info:
        import_source(root, tmp_path / "o.h5", num_layers=8, progress=False)
    assert "4 layer ids were given" not in str(info.value) and "no layer ids were given" in str(info.value)
