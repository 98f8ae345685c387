"""Bad vLLM connector files: each is one line, exit 2, the folder untouched (import, compare in place)."""

from __future__ import annotations

import os

import pytest
import torch
from safetensors.torch import save_file

from bad_input_helpers import assert_refused, invoke

H, S = 16, 6


def _states(sample, rows=S, layers=3):
    return torch.randn(rows, layers, H, generator=torch.Generator().manual_seed(sample))


def _file(path, sample=1, states=None, tokens=None):
    """Request ``sample``'s file (tokens ``sample..sample+S-1``, states seeded by it), or what is given."""
    tensors = {"hidden_states": _states(sample) if states is None else states,
               "token_ids": torch.arange(sample, sample + S) if tokens is None else tokens}
    save_file({k: v for k, v in tensors.items() if v is not False}, path)


def _bad(path, **given):
    _file(path, 2, **given)  # the train side's second sample: the in-place compare reads it


FAULTS = {
    "truncated": lambda p: open(p, "wb").write(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json"),
    "no-token-ids": lambda p: _bad(p, tokens=False),
    "float-ids": lambda p: _bad(p, tokens=torch.rand(S)),
    "empty-ids": lambda p: _bad(p, states=_states(2, 0), tokens=torch.zeros(0, dtype=torch.long)),
    "two-dims": lambda p: _bad(p, states=_states(2).flatten(1)),
    "more-rows": lambda p: _bad(p, states=_states(2, S + 1)),
    "prefix-cache-rows": lambda p: _bad(p, states=_states(2, S - 2)),
    "int-states": lambda p: _bad(p, states=_states(2).to(torch.int32)),
    "fp8-no-scale": lambda p: _bad(p, states=_states(2).to(torch.float8_e4m3fn)),
    "other-layers": lambda p: _bad(p, states=_states(2, layers=2)),
    "fifo": lambda p: os.mkfifo(p),
    "lock-fifo": lambda p: (_bad(p), os.mkfifo(p + ".lock")),
}


@pytest.fixture
def train(tmp_path):
    """An import of a good folder: the other side of the in-place compare."""
    good = tmp_path / "good"
    good.mkdir()
    for i in range(2):
        _file(str(good / f"req-{i}.safetensors"), i + 1)
    out = tmp_path / "train.h5"
    result = invoke(["import", good, "--num-layers", "8", "--layer-ids", "2,4,5", "--out", out, "--quiet"])
    assert result.exit_code == 0, result.stderr
    return str(out)


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_bad_file_is_one_line(tmp_path, train, fault):
    folder = tmp_path / "in"
    folder.mkdir()
    _file(str(folder / "req-0.safetensors"))
    FAULTS[fault](str(folder / "req-1.safetensors"))
    out = tmp_path / "out.h5"
    assert_refused(["import", str(folder), "--quiet", "--num-layers", "8", "--layer-ids", "2,4,5", "--out", str(out)],
                   [str(folder)])
    assert not os.path.exists(out)
    assert_refused(["compare", "--train-dump", train, "--serve-dump", str(folder), "--serve-layer-ids", "2,4,5",
                    "--quiet"], [str(folder), train])


def test_ids_that_do_not_fit_are_one_line(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    _file(str(folder / "req-0.safetensors"))
    for ids in ("2,4", "2,4,5,6", "2,4,-1", "2,2,4"):
        assert_refused(["import", str(folder), "--quiet", "--num-layers", "8", f"--layer-ids={ids}",
                        "--out", str(tmp_path / "o.h5")], [str(folder)])
