"""Bad TensorRT-LLM SaveState files: each is one line, exit 2, the folder untouched (import)."""

from __future__ import annotations

import os

import pytest
import torch

from bad_input_helpers import assert_refused

H = 16


def _record(i, length=6, **over):
    record = {"id": i, "input_ids": torch.arange(1, length + 1), "hidden_state": torch.randn(length, H),
              "aux_hidden_states": torch.randn(length, 3 * H)}
    record.update(over)
    return {k: v for k, v in record.items() if v is not None}


FAULTS = {
    "truncated": lambda p: open(p, "wb").write(b"PK\x03\x04 not a zip"),
    "rows-differ": lambda p: torch.save([_record(1), _record(2, aux_hidden_states=torch.randn(5, 3 * H))], p),
    "aux-not-multiple": lambda p: torch.save([_record(1, aux_hidden_states=torch.randn(6, 3 * H + 1))], p),
    "float-ids": lambda p: torch.save([_record(1, input_ids=torch.rand(6))], p),
    "no-final": lambda p: torch.save([_record(1, hidden_state=None)], p),
    "other-width": lambda p: torch.save([_record(1, aux_hidden_states=torch.randn(6, 2 * H))], p),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_bad_file_is_one_line(tmp_path, fault):
    folder = tmp_path / "in"
    folder.mkdir()
    torch.save([_record(1), _record(2)], folder / "data_2.pt")
    FAULTS[fault](str(folder / "data_4.pt"))
    out = tmp_path / "out.h5"
    assert_refused(["import", str(folder), "--quiet", "--num-layers", "8", "--layer-ids", "1,3,4", "--out", str(out)],
                   [str(folder)])
    assert not os.path.exists(out)


def test_ids_that_do_not_fit_are_one_line(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    torch.save([_record(1)], folder / "data_1.pt")
    for ids in ("1,3", "1,3,4,5", "1,3,-2"):
        assert_refused(["import", str(folder), "--quiet", "--num-layers", "8", f"--layer-ids={ids}",
                        "--out", str(tmp_path / "o.h5")], [str(folder)])
