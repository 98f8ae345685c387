"""Foreign files with 0 tokens: empty input_ids, all-padding rows, an S=0 safetensors (speculators
and vLLM's connector). Each is refused in one line naming the file, whichever file of the folder."""

from __future__ import annotations

import os

import pytest
import torch
from hypothesis import given, strategies as st
from safetensors.torch import save_file

from bad_input_helpers import FUZZ, assert_refused

H = 16


def specforge_file(path, length, padding):
    g = torch.Generator().manual_seed(length)
    ids = torch.randint(1, 100, (length + padding,), generator=g)
    ids[length:] = 0
    mask = torch.ones(length + padding, dtype=torch.long)
    mask[length:] = 0
    torch.save({"input_ids": ids, "loss_mask": mask,
                "aux_hidden_state": torch.randn(1, length + padding, 3 * H, generator=g),
                "hidden_state": torch.randn(1, length + padding, H, generator=g)}, path)


def speculators_file(path, length):
    g = torch.Generator().manual_seed(length)
    save_file({"hidden_states": torch.randn(length, 4, H, generator=g),
               "token_ids": torch.randint(0, 100, (length,), generator=g)}, str(path))


@FUZZ
@given(system=st.sampled_from(["specforge-empty", "specforge-all-padding", "speculators", "vllm"]),
       files=st.integers(1, 4), bad=st.data(), padding=st.integers(1, 5))
def test_a_file_with_no_tokens_is_one_line(tmp_path_factory, system, files, bad, padding):
    folder = tmp_path_factory.mktemp("f")
    which = bad.draw(st.integers(0, files - 1))
    paths = []
    for i in range(files):
        empty = i == which
        if system.startswith("specforge"):
            rows = folder / "rows_0-2000"
            rows.mkdir(exist_ok=True)
            path = rows / f"data_{i}.ckpt"
            if empty and system == "specforge-empty":
                specforge_file(path, 0, 0)
            else:
                specforge_file(path, 0 if empty else 5 + i, padding)
        else:
            path = folder / (f"hs_{i}.safetensors" if system == "speculators" else f"req-{i}.safetensors")
            if system == "vllm":
                g = torch.Generator().manual_seed(i)
                n = 0 if empty else 5 + i
                save_file({"hidden_states": torch.randn(n, 4, H, generator=g),
                           "token_ids": torch.randint(0, 100, (n,), generator=g)}, str(path))
            else:
                speculators_file(path, 0 if empty else 5 + i)
        paths.append(path)
    out = tmp_path_factory.mktemp("o") / "out.h5"
    if system == "vllm":
        args = ["capture", "vllm", "--from-dir", folder, "--layer-ids", "2,4,5,8", "--num-layers", "8", "--out", out, "--quiet"]
    else:
        args = ["import", folder, "--quiet", "--num-layers", "8", "--out", out, "--layer-ids", "1,3,4" if system != "speculators"
                else "2,4,5,8"]
    line = assert_refused(args, [folder])
    assert "no tokens" in line or "padding" in line, line
    assert not os.path.exists(out)


@pytest.mark.parametrize("fault", ["no-channels", "negative-ids"])
@pytest.mark.parametrize("system", ["specforge", "speculators"])
def test_states_with_no_channels_and_negative_token_ids_are_one_line(tmp_path, system, fault):
    """Found by a hostile sweep: H=0 states reached a division (an internal error, exit 3), and ids
    below 0 (a labels tensor's -100 saved as input_ids) were imported as tokens."""
    import alignprobe

    folder = tmp_path / "in"
    folder.mkdir()
    width = 0 if fault == "no-channels" else H
    for i in range(2):
        ids = torch.arange(1, 6) * (-1 if fault == "negative-ids" else 1)
        if system == "specforge":
            torch.save({"input_ids": ids, "loss_mask": torch.ones(5, dtype=torch.long),
                        "aux_hidden_state": torch.randn(5, 3 * width), "hidden_state": torch.randn(5, width)},
                       folder / f"data_{i}.ckpt")
        else:
            save_file({"hidden_states": torch.randn(5, 4, width), "token_ids": ids}, str(folder / f"hs_{i}.safetensors"))
    out = tmp_path / "out.h5"
    line = assert_refused(["import", folder, "--quiet", "--num-layers", "8", "--out", out], [folder])
    assert ("no channels" in line) if fault == "no-channels" else ("negative id" in line), line
    assert not os.path.exists(out)
    # the audit names both files unreadable and goes on (nothing else is left to read)
    result = alignprobe.audit(str(folder))
    assert result.codes()[0] == "unreadable_file" and result.samples == 0
