"""dump/reader.py, on dumps the writer wrote: every dtype read back exactly (bfloat16 as its raw bits), blocks
that cover every token once in order, random access by id and position, claims and provenance, and
opening that never writes."""

import numpy as np
import pytest
import torch

from alignprobe.dump import StreamClaim, open_dump
from dump_helpers import H, N, as_f32, claims, random_samples, write

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


@pytest.mark.parametrize("dtype", DTYPES)
def test_round_trip_is_exact_for_every_dtype(tmp_path, dtype):
    lengths = [1, 5, 17, 64, 3, 200, 33]
    samples = random_samples(lengths, {"aux": 3 * H, "final": H}, dtype=DTYPES[dtype])
    path = write(tmp_path / "d.h5", samples, claims(dtype), shard_tokens=50)
    with open_dump(path) as d:
        assert d.num_samples == len(lengths)
        assert d.num_tokens == sum(lengths)
        assert d.sample_ids == list(samples)
        assert d.streams["aux"].width == 3 * H and d.streams["final"].width == H
        assert d.streams["aux"].dtype == dtype
        for sid, (ids, states) in samples.items():
            np.testing.assert_array_equal(d.token_ids(sid), ids.numpy())
            for name, x in states.items():
                got = d.states(sid, name)
                assert got.dtype == np.float32
                # Bit-exact: compare the float32 widening done by torch, a different code path.
                np.testing.assert_array_equal(got, as_f32(x))


def test_bfloat16_is_stored_as_raw_bits(tmp_path):
    x = torch.tensor([[1.0, -2.5, 3.0e38, 1.0e-40, float("inf"), float("nan")] + [0.0] * (H - 6)])
    samples = {"one": (torch.tensor([7]), {"final": x.bfloat16()})}
    path = write(tmp_path / "d.h5", samples, {"final": StreamClaim((N,), H, N, "bfloat16", role="final")})
    with open_dump(path) as d:
        raw = d.dataset("final")[()]
        assert raw.dtype == np.uint16 and d.encoding("final") == "bfloat16-bits"
        np.testing.assert_array_equal(raw, x.bfloat16().view(torch.int16).numpy().view(np.uint16))
        np.testing.assert_array_equal(d.states("one", "final"), as_f32(x.bfloat16()))


def test_blocks_cover_every_token_once_and_in_order(tmp_path):
    lengths = [10, 1, 25, 7]
    samples = random_samples(lengths, {"aux": 3 * H, "final": H})
    path = write(tmp_path / "d.h5", samples, claims())
    with open_dump(path) as d:
        seen = {sid: [] for sid in samples}
        for block in d.iter_blocks("aux", max_tokens=4):
            assert block.states.shape[0] <= 4
            seen[block.sample_id].append((block.start, block.states))
        for sid, (ids, states) in samples.items():
            starts = [s for s, _ in seen[sid]]
            assert starts == list(range(0, len(ids), 4))
            np.testing.assert_array_equal(np.concatenate([b for _, b in seen[sid]]), as_f32(states["aux"]))


def test_random_access_by_id_and_position(tmp_path):
    samples = random_samples([4, 9, 2], {"aux": 3 * H, "final": H})
    path = write(tmp_path / "d.h5", samples, claims())
    with open_dump(path) as d:
        assert d.span("prompt-1") == (4, 13) and d.span(2) == (13, 15)
        np.testing.assert_array_equal(d.states(1, "final"), as_f32(samples["prompt-1"][1]["final"]))


def test_claims_and_provenance_survive(tmp_path):
    streams = {
        "aux": StreamClaim((3, 4, 5), H, N, "float16", note="SGLang ids [2,3,4] +1"),
        "final": StreamClaim((N,), H, N, "float16", final_norm="pre", role="final"),
    }
    samples = random_samples([3], {"aux": 3 * H, "final": H}, dtype=torch.float16)
    path = write(tmp_path / "d.h5", samples, streams)
    with open_dump(path) as d:
        assert d.streams == streams
        assert d.provenance.engine == "test" and d.provenance.tool_version.startswith("alignprobe")
        assert d.streams["final"].slice_label(0) == f"HF[{N}] pre-norm"
        assert d.notes == []


def test_opening_never_writes(tmp_path):
    from dump_helpers import sha

    path = write(tmp_path / "d.h5", random_samples([5, 6], {"aux": 3 * H, "final": H}), claims())
    before, mtime = sha(path), path.stat().st_mtime_ns
    with open_dump(path) as d:
        list(d.iter_blocks("aux"))
    assert sha(path) == before and path.stat().st_mtime_ns == mtime
