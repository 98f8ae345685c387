"""importers/importer.py: what every import shares: samples paired by tokens with a named capture,
open_source, the command line, and every bad input (a file that is not what it claims, the user's facts)."""

from __future__ import annotations

import gc
import json
import os

import pytest
import torch
from safetensors.torch import save_file

from alignprobe.compare import compare
from alignprobe.errors import BadInput
from alignprobe.importers import import_source, open_source
from alignprobe.probes.hf import capture_hf
from alignprobe.probes.prompts import prompts_from_token_lists

from importer_folders import (N, SPECFORGE_IDS, VLLM_IDS, tree_digest, write_specforge)


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
