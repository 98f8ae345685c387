"""A foreign folder read in place (alignprobe/importers/folder_source.py) gives what an import gives.

The folders are the importer tests' real layouts written from a tiny model (tests/helpers/importer_folders.py
has the writers and the sources they follow): SpecForge with ``.ckpt`` and ``.ckpt.gz`` files and
right padding, speculators float32 with the pre-norm final, FP8 with per-token scales, and three
slices. Each is compared with an HF capture twice, once read in place and once imported first
(``open_pair(in_place=False)``, the path compare took before): the findings and every metric must
agree to float rounding (the streaming blocks may be cut at other rows, so sums run in another order).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from alignprobe.compare import compare
from alignprobe.dump import open_dump
from alignprobe.errors import BadInput
from alignprobe.importers import FolderSource, import_source, open_pair
from alignprobe.probes.hf import capture_hf
from alignprobe.probes.prompts import prompts_from_token_lists
from importer_folders import (
    N,
    SPECFORGE_IDS,
    VLLM_IDS,
    tree_digest,
    write_specforge,
    write_speculators,
    write_speculators_fp8,
)


@pytest.fixture(scope="module")
def serve_dump(model, token_lists, tmp_path_factory):
    """What an engine serves: the EAGLE-3 aux layers and the final state."""
    out = tmp_path_factory.mktemp("serve") / "serve.h5"
    return capture_hf(model, prompts_from_token_lists(token_lists), out, layers="eagle3", progress=False)


def _summary(result):
    findings = sorted((f.code, f.severity, f.title) for f in result.findings)
    metrics = {}
    for c in result.streams:
        for m in c.slices:
            metrics[(c.serve_stream, m.label, m.serve_slice)] = {
                k: v for k, v in vars(m).items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    mappings = {k: [(s.best, s.runner_up) for s in v.matches] for k, v in result.mappings.items()} \
        if isinstance(result.mappings, dict) else None
    return result.verdict, findings, metrics, mappings, result.tokens.aligned_tokens


def assert_same_comparison(folder, serve, options, swap=False):
    """compare with ``folder`` read in place == compare with ``folder`` imported first."""
    imported_train, imported_serve = (open_pair(serve, folder, serve_import=options, in_place=False) if swap
                                      else open_pair(folder, serve, train_import=options, in_place=False))
    with imported_train, imported_serve:
        before = compare(imported_train, imported_serve)
    kw = {"serve_import": options} if swap else {"train_import": options}
    after = compare(serve, folder, **kw) if swap else compare(folder, serve, **kw)
    v0, f0, m0, map0, t0 = _summary(before)
    v1, f1, m1, map1, t1 = _summary(after)
    assert (v1, f1, map1, t1) == (v0, f0, map0, t0)
    assert m1.keys() == m0.keys() and m0
    for key, values in m0.items():
        for name, value in values.items():
            other = m1[key][name]
            if isinstance(value, float) and math.isnan(value):
                assert math.isnan(other), (key, name)
            else:
                assert other == pytest.approx(value, rel=1e-6, abs=1e-9), (key, name)
    return after


def test_specforge_ckpt_and_gz_in_place_equals_import(model, token_lists, serve_dump, tmp_path):
    root = write_specforge(tmp_path / "sf", model, token_lists, gz_every=3)  # .ckpt and .ckpt.gz, padded rows
    before = tree_digest(root)
    result = assert_same_comparison(root, serve_dump, {"layer_ids": SPECFORGE_IDS})
    assert result.verdict == "PASS" and result.train_path == root
    assert tree_digest(root) == before  # nothing written beside the user's files


def test_specforge_one_layer_off_finds_the_same_as_import(model, token_lists, serve_dump, tmp_path):
    deeper = [i + 1 for i in SPECFORGE_IDS]
    root = write_specforge(tmp_path / "deeper", model, token_lists, layer_ids=deeper, gz_every=2)
    result = assert_same_comparison(root, serve_dump, {"layer_ids": deeper})
    assert result.verdict == "FAIL"


@pytest.mark.parametrize("kind", ["float32", "fp8", "three_slices"])
def test_speculators_in_place_equals_import(model, token_lists, hf_dump, serve_dump, tmp_path, kind):
    if kind == "float32":
        root, options = write_speculators(tmp_path / "s", model, token_lists), {"layer_ids": VLLM_IDS}
    elif kind == "fp8":
        root, options = write_speculators_fp8(tmp_path / "s8", model, token_lists), {"layer_ids": VLLM_IDS}
    else:
        root, options = write_speculators(tmp_path / "s3", model, token_lists, layer_ids=VLLM_IDS[:3]), {}
    # as the serving side too: the folder's own sample ids come from the train dump's
    assert_same_comparison(root, hf_dump, options, swap=True)


def test_reads_equal_the_imported_dump_bit_for_bit(model, token_lists, hf_dump, tmp_path):
    root = write_specforge(tmp_path / "sf", model, token_lists, gz_every=2)
    imported = import_source(root, tmp_path / "sf.h5", layer_ids=SPECFORGE_IDS, num_layers=N, ids_from=hf_dump,
                             progress=False)
    with open_dump(imported.path) as dump, FolderSource(root, layer_ids=SPECFORGE_IDS, num_layers=N,
                                                           ids_from=hf_dump) as folder:
        assert folder.sample_ids == dump.sample_ids and folder.streams == dump.streams
        np.testing.assert_array_equal(folder.offsets, dump.offsets)
        np.testing.assert_array_equal(folder.token_ids_flat(), dump.token_ids_flat())
        total = dump.num_tokens
        for stream in dump.streams:
            assert folder.encoding(stream) == dump.encoding(stream)
            # random reads first (mapped files), across file boundaries, with columns; then in order
            for a, b, cols in [(total - 7, total, None), (3, 40, slice(5, 21)), (0, total, None)]:
                np.testing.assert_array_equal(folder.read_raw(stream, a, b, cols), dump.read_raw(stream, a, b, cols))
            for i in range(dump.num_samples):
                np.testing.assert_array_equal(folder.states(i, stream), dump.states(i, stream))


def test_bf16_stays_bf16_bits(model, token_lists, tmp_path):
    root = write_specforge(tmp_path / "bf", model.to(torch.bfloat16), token_lists, gz_every=0)
    model.to(torch.float32)
    with FolderSource(root, layer_ids=SPECFORGE_IDS, num_layers=N) as folder:
        assert folder.streams["aux"].dtype == "bfloat16" and folder.encoding("aux") == "bfloat16-bits"
        raw = folder.read_raw("aux", 0, 5)
        assert raw.dtype == np.uint16
        assert np.all(np.isfinite(folder.read("aux", 0, 5)))


def _write_small_folder(root, files=12, S=200, H=64, gz=False):
    import gzip

    folder = root / "rows_0-2000"
    folder.mkdir(parents=True)
    g = torch.Generator().manual_seed(0)
    for idx in range(files):
        record = {"input_ids": torch.randint(1, 1000, (S,), generator=g), "loss_mask": torch.ones(S, dtype=torch.long),
                  "aux_hidden_state": torch.randn(1, S, 3 * H, generator=g), "hidden_state": torch.randn(1, S, H, generator=g)}
        if gz:
            with gzip.open(folder / f"data_{idx}.ckpt.gz", "wb", compresslevel=1) as fh:
                torch.save(record, fh)
        else:
            torch.save(record, folder / f"data_{idx}.ckpt")
    return root, S * 4 * H * 4  # the folder, a file's state bytes


def _read_in_order(folder, rows=37):
    total = 0
    for s in range(0, folder.num_tokens, rows):
        for stream in ("aux", "final"):
            block = folder.read_raw(stream, s, min(folder.num_tokens, s + rows))
            assert block.base is None  # a block of its own: it pins no decoded or mapped file
            total += len(block) if stream == "aux" else 0
        assert folder.held_files() <= 4
    return total


def test_gz_files_are_decoded_once_within_the_budget(tmp_path):
    """A pass in order over 12 .ckpt.gz files with a budget of 2.5 files: each file decoded once (the
    read-ahead thread decodes the next), at most 4 held at once, whatever the folder's size."""
    root, per_file = _write_small_folder(tmp_path / "sf", gz=True)
    with FolderSource(root, layer_ids=[1, 3, 4], num_layers=8, budget_bytes=int(2.5 * per_file)) as folder:
        assert _read_in_order(folder) == folder.num_tokens == 12 * 200
        assert folder.decoded_files.decoded == 12
        # three stay (the one read, the one before, the one decoded ahead); a fourth until it is dropped
        assert folder.decoded_files.peak_bytes <= 4 * per_file


def test_zip_checkpoints_are_mapped_a_few_at_a_time(tmp_path):
    root, _ = _write_small_folder(tmp_path / "sf")
    with FolderSource(root, layer_ids=[1, 3, 4], num_layers=8) as folder:
        assert _read_in_order(folder) == 12 * 200
        assert folder.decoded_files.decoded == 0  # nothing decoded whole: rows copied from the mappings
        # a random read far from the others maps that one file, and no file is decoded
        folder.read_raw("aux", 5 * 200 + 3, 5 * 200 + 9)
        assert folder.decoded_files.decoded == 0 and folder.held_files() <= 4


def test_a_file_damaged_after_opening_is_one_line(tmp_path, model, token_lists, serve_dump):
    root = write_specforge(tmp_path / "sf", model, token_lists, gz_every=0)
    folder = FolderSource(root, layer_ids=SPECFORGE_IDS, num_layers=N)
    with folder:
        last = folder.plan.files[-1]
        with open(last, "r+b") as fh:
            fh.truncate(100)
        with pytest.raises(BadInput, match="data_8.ckpt"):
            folder.read_raw("aux", 0, folder.num_tokens)


def test_a_later_file_unlike_the_first_stops_compare_in_one_line(model, token_lists, serve_dump, tmp_path):
    """The in-place reader meets a bad file only when the pass reaches it: still one line, exit 2."""
    from click.testing import CliRunner

    from alignprobe.cli.main import cli

    root = write_specforge(tmp_path / "sf", model, token_lists, gz_every=0)
    last = sorted(p for p in (tmp_path / "sf").rglob("data_*.ckpt"))[-1]
    record = torch.load(last, weights_only=True)
    record["aux_hidden_state"] = record["aux_hidden_state"][..., :-8].clone()  # narrower than the first file
    torch.save(record, last)
    before = tree_digest(root)
    r = CliRunner().invoke(cli, ["compare", "--train-dump", root, "--serve-dump", serve_dump,
                                 "--train-layer-ids", ",".join(map(str, SPECFORGE_IDS))])
    assert r.exit_code == 2, r.output + r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and last.name in lines[0] and "wide" in lines[0] and "Traceback" not in r.stderr
    assert tree_digest(root) == before


@pytest.mark.parametrize("fp8", [False, True])
def test_speculators_rows_are_read_by_themselves(model, token_lists, tmp_path, fp8):
    """safetensors' own slices: rows read alone, no file decoded whole, the same bits as the import."""
    write = write_speculators_fp8 if fp8 else write_speculators
    root = write(tmp_path / "s", model, token_lists)
    imported = import_source(root, tmp_path / "s.h5", layer_ids=VLLM_IDS, progress=False)
    with open_dump(imported.path) as dump, FolderSource(root, layer_ids=VLLM_IDS) as folder:
        for stream in dump.streams:
            for a, b, cols in [(5, 31, slice(3, 17)), (0, dump.num_tokens, None)]:
                np.testing.assert_array_equal(folder.read_raw(stream, a, b, cols), dump.read_raw(stream, a, b, cols))
        assert folder.decoded_files.decoded == 0
