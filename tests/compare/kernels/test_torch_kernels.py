"""compare on a torch device gives the numpy result: kernels row by row, and whole comparisons.

The torch kernels run here on the CPU (``TorchKernels("cpu")``): the same code as ``--device cuda``
but for the device. The CUDA run itself is checked where a GPU exists (skipped otherwise) and
measured by benchmarks/gpu_compare.py.
"""

import dataclasses
import subprocess
import sys

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from alignprobe.cli.main import cli
from alignprobe.compare import compare
from alignprobe.compare.kernels.numpy_kernels import NumpyKernels, constant_rows, row_dot, row_terms
from alignprobe.compare.kernels.torch_kernels import TorchKernels
from compare_helpers import awkward_rows, make_samples, write_serve, write_train

H = 64


def test_torch_kernels_agree_with_numpy_row_by_row():
    a, b = awkward_rows()
    want = row_terms(a, b)
    torch_kernels = TorchKernels("cpu")
    got = torch_kernels.row_terms([(torch_kernels.load(a, "native"), torch_kernels.load(b, "native"))])[0]
    for field in dataclasses.fields(want):
        w, g = getattr(want, field.name), getattr(got, field.name)
        if w.dtype == bool:
            np.testing.assert_array_equal(g, w, err_msg=field.name)
        else:
            usable = ~(want.nan_a | want.inf_a | want.nan_b | want.inf_b)
            np.testing.assert_allclose(g[usable], w[usable], rtol=2e-6, err_msg=field.name)
    assert list(np.flatnonzero(want.const_b)) == [4]  # row 6 passed the screen only
    assert want.nan_a[1] and want.inf_b[2] and want.aa[3] == 0


def test_constant_screen_confirms_every_candidate():
    x = np.ones((3, H), np.float32)
    x[1, 3] = 2.0  # equal at the screened columns, not constant
    x[2] = 0.0
    sq = row_dot(x, x)
    assert constant_rows(x, sq, np.zeros(3, bool)).tolist() == [True, False, False]


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("device")
    samples = make_samples(num=5, length=30)
    noisy = lambda x, sid: x * 1.01 + 0.02  # noqa: E731 - a drift big enough to measure
    return write_train(d / "train.h5", samples), write_serve(d / "serve.h5", samples, taps=(3, 4, 5), transform=noisy)


def _same_result(want, got):
    assert got.verdict == want.verdict
    assert [f.code for f in got.findings] == [f.code for f in want.findings]
    for ws, gs in zip(want.streams, got.streams):
        for wm, gm in zip(ws.slices, gs.slices):
            for name in ("cosine_mean", "cosine_p1", "cosine_min", "rel_rms", "norm_ratio", "max_abs_diff"):
                np.testing.assert_allclose(getattr(gm, name), getattr(wm, name), rtol=1e-5, atol=1e-7, err_msg=name)
            assert gm.train_health == wm.train_health and gm.serve_health == wm.serve_health
    for wm, gm in zip(want.mappings, got.mappings):
        np.testing.assert_allclose(gm.cosine, wm.cosine, atol=1e-6)
        assert [m.best for m in gm.matches] == [m.best for m in wm.matches]


def test_whole_compare_on_torch_kernels_equals_numpy(pair):
    want = compare(*pair, tokenizer=None)
    got = compare(*pair, tokenizer=None, device=TorchKernels("cpu"), block_bytes=1 << 14)  # many small blocks
    assert want.verdict == "FAIL" and want.options["device"] == "cpu" and got.options["device"] == "cpu"
    _same_result(want, got)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_compare_equals_cpu(pair):
    # the kernels given, not the name: "cuda" runs on the CPU of a many-core host (kernels/choice.py)
    _same_result(compare(*pair, tokenizer=None), compare(*pair, tokenizer=None, device=TorchKernels("cuda")))


@pytest.mark.parametrize(
    "device, message",
    [("nonsense", "not a device name"), ("cuda:99", "CUDA")],
)
def test_bad_device_is_one_line_exit_2(pair, device, message):
    if device == "cuda:99" and torch.cuda.device_count() > 99:
        pytest.skip("a machine with 100 GPUs")
    r = CliRunner().invoke(cli, ["compare", "--train-dump", pair[0], "--serve-dump", pair[1], "--device", device])
    assert r.exit_code == 2, r.output
    assert message in r.output and "Traceback" not in r.output and len(r.output.strip().splitlines()) == 1


def test_cpu_compare_never_imports_torch(pair):
    # torch costs ~2 s and 230-500 MB of resident memory that a CPU comparison of two dumps never uses.
    code = (
        "import sys; from alignprobe.compare import compare; "
        f"r = compare({pair[0]!r}, {pair[1]!r}, tokenizer=None); "
        "print(r.verdict, 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["FAIL", "False"]
