"""Counts no model or machine has: --num-layers and a dump's num_layers beyond any model (capture vllm
walked 0..N and ran out of memory on 99999999999999999999; import overflowed an int64), audit
--workers beyond the cores (a LocalCluster of 100000 processes), --scheduler addresses Dask cannot
parse (internal errors), and layer ids given twice (imported as slices all claiming one HF index)."""

from __future__ import annotations

import os
import shutil

import h5py
import pytest
from hypothesis import given, strategies as st

from alignprobe.dump.schema import MAX_NUM_LAYERS
from bad_input_helpers import FUZZ, assert_refused
from dump_helpers import H, claims, random_samples, write


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    import audit_datasets

    folder = tmp_path_factory.mktemp("sizes")
    a = write(folder / "a.h5", random_samples([5, 7], {"aux": 3 * H, "final": H}), claims())
    samples = audit_datasets.make_samples(count=3)
    specforge = audit_datasets.write_specforge(folder / "sf", samples, gz_every=0)
    speculators = audit_datasets.write_speculators(folder / "spec", samples)
    return dict(folder=folder, a=a, specforge=specforge, speculators=speculators)


beyond_any_model = st.one_of(st.integers(MAX_NUM_LAYERS + 1, 10**6), st.integers(10**6, 10**30))


@FUZZ
@given(n=beyond_any_model, command=st.sampled_from(["import", "compare", "capture vllm", "capture sglang"]))
def test_num_layers_beyond_any_model_is_one_line(world, tmp_path_factory, n, command):
    out = tmp_path_factory.mktemp("o") / "out.h5"
    args = {"import": ["import", world["specforge"], "--num-layers", n, "--out", out, "--quiet"],
            "compare": ["compare", "--train-dump", world["specforge"], "--serve-dump", world["a"], "--num-layers", n],
            "capture vllm": ["capture", "vllm", "--from-dir", world["speculators"], "--layer-ids", "2,4,5,8",
                             "--num-layers", n, "--out", out, "--quiet"],
            "capture sglang": ["capture", "sglang", "--url", "http://127.0.0.1:9", "--tokens-from", world["a"],
                               "--num-layers", n, "--out", out]}[command]
    assert_refused([str(x) for x in args], [world["folder"]], match="--num-layers")
    assert not os.path.exists(out) and not os.path.exists(f"{out}.partial")


@FUZZ
@given(n=st.one_of(st.integers(MAX_NUM_LAYERS + 1, 10**6), st.integers(2**62, 2**63 - 1)), both=st.booleans())
def test_a_dump_claiming_more_layers_than_any_model_is_one_line(world, tmp_path_factory, n, both):
    path = tmp_path_factory.mktemp("d") / "huge.h5"
    shutil.copy(world["a"], path)
    with h5py.File(path, "r+") as f:  # both: the streams agree, so no mismatch check stops it first
        for name in ("aux", "final") if both else ("aux",):
            f[f"streams/{name}"].attrs["num_layers"] = n
    for args in (["inspect", path], ["compare", "--train-dump", path, "--serve-dump", world["a"]]):
        assert_refused(args, [path, world["a"]])


def test_audit_workers_beyond_the_cores_and_bad_schedulers(world):
    pytest.importorskip("distributed")
    cores = len(os.sched_getaffinity(0))
    line = assert_refused(["audit", world["specforge"], "--workers", str(cores + 1), "--no-progress"], [world["folder"]])
    assert f"at most {cores}" in line
    for address, said in [("", "is empty"), ("nonsense://x", "not a Dask scheduler address"),
                          ("tcp://127.0.0.1", "not a Dask scheduler address")]:
        assert_refused(["audit", world["specforge"], "--scheduler", address, "--no-progress"], [world["folder"]], match=said)


@pytest.mark.parametrize("system, ids", [("specforge", "1,1,1"), ("specforge", "1,4,1"), ("speculators", "2,2,5,8")])
def test_import_refuses_repeated_layer_ids(world, tmp_path, system, ids):
    out = tmp_path / "out.h5"
    line = assert_refused(["import", world[system], "--layer-ids", ids, "--num-layers", "8", "--out", out, "--quiet"],
                          [world["folder"]], match="repeats")
    assert ids in line.replace(" ", "").replace("[", "").replace("]", "")
    assert not os.path.exists(out)
    config = tmp_path / "drafter.json"
    config.write_text('{"eagle_config": {"eagle_aux_hidden_state_layer_ids": [%s]}}' % ids)
    assert_refused(["import", world[system], "--drafter-config", config, "--num-layers", "8", "--out", out, "--quiet"],
                   [world["folder"], config], match="repeats")


@pytest.mark.parametrize("layers, nested", [(100000, False), (10**9, True), (-1, False), (0, True)])
def test_a_model_config_with_a_layer_count_no_model_has(world, tmp_path, layers, nested):
    """capture hf built 100000 layers for minutes (no end in sight) before this check; the config alone
    is read, so the folder needs no weights."""
    import json

    model = tmp_path / "model"
    model.mkdir()
    config = {"model_type": "llama", "hidden_size": 32, "num_attention_heads": 4, "vocab_size": 64}
    if nested:
        config["text_config"] = {"num_hidden_layers": layers}
    else:
        config["num_hidden_layers"] = layers
    (model / "config.json").write_text(json.dumps(config))
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"input_ids": [1, 2, 3]}\n')
    assert_refused(["capture", "hf", "--model", model, "--prompts", prompts, "--out", tmp_path / "o.h5", "--quiet"],
                   [model, prompts], match="num_hidden_layers is")


@pytest.mark.parametrize("scheme", ["int4", "int8"])
def test_a_quant_group_wider_than_the_row_is_the_whole_row(scheme):
    """capture hf --simulate-quant int4 --group-size 99999999999999999999 was an internal error (pad()
    overflowed), and 10**6 padded every weight out to a million columns; one scale a row is the same."""
    import torch

    from alignprobe.quant import fake_quantize

    w = torch.randn(8, 48, generator=torch.Generator().manual_seed(0))
    whole_row = fake_quantize(w, scheme, 48)
    for group in (49, 10**6, 99999999999999999999):
        assert torch.equal(fake_quantize(w, scheme, group), whole_row)
    assert not torch.equal(fake_quantize(w, scheme, 16), whole_row)  # narrower groups do differ
