"""`alignprobe inspect`, and a dump written by hand from docs/dump-format.md without our writer."""

import json

import h5py
import numpy as np
import torch
from click.testing import CliRunner

from alignprobe import inspect_dump, open_dump
from alignprobe.cli.main import cli
from dump_helpers import H, claims, random_samples, write


def test_statistics_match_an_independent_count(tmp_path):
    samples = random_samples([5, 7], {"aux": 3 * H, "final": H}, dtype=torch.float32)
    aux = samples["prompt-1"][1]["aux"]
    aux[0, 3] = float("nan")
    aux[1, 0] = float("inf")
    aux[2] = 0.0
    aux[3, :H] = float("nan")
    path = write(tmp_path / "d.h5", samples, claims("float32"))
    summary = inspect_dump(path)
    stream = {s.name: s for s in summary.streams}["aux"]
    assert (stream.nan_rows, stream.inf_rows, stream.zero_rows) == (2, 1, 1)
    everything = torch.cat([samples[s][1]["aux"] for s in samples]).double()
    finite = everything[torch.isfinite(everything).all(dim=1)]
    assert np.isclose(stream.mean_norm, finite.norm(dim=1).mean().item(), rtol=1e-6)
    per_slice = finite.view(len(finite), 3, H).norm(dim=2).mean(dim=0)
    np.testing.assert_allclose(stream.mean_slice_norms, per_slice.numpy(), rtol=1e-6)
    assert (summary.num_samples, summary.num_tokens, summary.min_length, summary.max_length) == (2, 12, 5, 7)


def test_cli_text_and_json(tmp_path):
    path = write(tmp_path / "d.h5", random_samples([3, 4], {"aux": 3 * H, "final": H}), claims())
    text = CliRunner().invoke(cli, ["inspect", str(path)])
    assert text.exit_code == 0
    assert "HF[2], HF[3], HF[4]" in text.stdout and "engine     test" in text.stdout
    out = CliRunner().invoke(cli, ["inspect", str(path), "--json"])
    data = json.loads(out.stdout)
    assert data["num_tokens"] == 7 and data["streams"][0]["hf_indices"] == [2, 3, 4]
    assert data["format_version"] == 1


def test_a_minimal_hand_written_dump_is_read_and_upgraded(tmp_path):
    """Only the required parts of docs/dump-format.md, written with plain h5py."""
    path = tmp_path / "mine.h5"
    states = np.random.default_rng(0).standard_normal((7, 2 * H)).astype(np.float16)
    with h5py.File(path, "w") as f:
        f.attrs["format"] = "alignprobe.dump"
        f.attrs["format_version"] = 1
        f["samples/ids"] = np.array([b"a", b"b"])
        f["samples/offsets"] = np.array([0, 3, 7])
        f["tokens"] = np.arange(7)
        f["streams/mine"] = states
        f["streams/mine"].attrs["hf_indices"] = [4, 8]
    with open_dump(path) as d:
        claim = d.streams["mine"]
        assert (claim.hidden_size, claim.num_layers, claim.dtype, claim.role) == (H, 8, "float16", "drafter_input")
        np.testing.assert_array_equal(d.states("b", "mine"), states[3:].astype(np.float32))
        assert any("no provenance" in n for n in d.notes)
        assert any("hidden_size" in n for n in d.notes)
    text = CliRunner().invoke(cli, ["inspect", str(path)]).stdout
    assert "note: no provenance" in text


def test_hand_written_bfloat16(tmp_path):
    path = tmp_path / "bf.h5"
    x = torch.randn(3, H).bfloat16()
    with h5py.File(path, "w") as f:
        f.attrs["format"] = "alignprobe.dump"
        f.attrs["format_version"] = 1
        f["samples/ids"] = np.array([b"only"])
        f["samples/offsets"] = np.array([0, 3])
        f["tokens"] = np.arange(3)
        f["streams/s"] = x.view(torch.int16).numpy().view(np.uint16)
        f["streams/s"].attrs.update({"hf_indices": [2], "encoding": "bfloat16-bits", "num_layers": 4})
    with open_dump(path) as d:
        assert d.streams["s"].dtype == "bfloat16"
        np.testing.assert_array_equal(d.states("only", "s"), x.float().numpy())
