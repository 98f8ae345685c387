"""``--device cuda`` runs on the CPU where the CPU is faster (compare/kernels/choice.py), and says so.

Checked with torch out of sys.modules, as in a fresh ``alignprobe compare`` process, so the choice
never imports it; the many-core host is the ``cores`` argument (or the threshold lowered).
"""

import sys

import pytest

from alignprobe.compare import compare
from alignprobe.compare.kernels import choice
from alignprobe.compare.kernels.numpy_kernels import NumpyKernels
from alignprobe.errors import BadInput
from compare_helpers import make_samples, write_serve, write_train


@pytest.fixture
def no_torch(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)


@pytest.mark.parametrize("device", ["cuda", "cuda:1", " cuda "])
def test_a_many_core_host_measures_on_the_cpu_and_says_why(no_torch, device):
    kernels, note = choice.chosen_kernels(device, cores=choice.CPU_KEEPS_UP_CORES)
    assert isinstance(kernels, NumpyKernels) and kernels.name == "cpu"
    assert note.startswith(f"--device {device.strip()}: measured on the CPU") and "torch" not in sys.modules


def test_cpu_and_kernel_objects_are_taken_as_given():
    given = NumpyKernels(threads=1)
    assert choice.chosen_kernels(given, cores=64) == (given, None)
    kernels, note = choice.chosen_kernels("cpu", cores=64)
    assert kernels.name == "cpu" and note is None


def test_a_bad_name_is_refused_even_when_the_cpu_would_run(no_torch):
    with pytest.raises(BadInput, match="not a device name"):
        choice.chosen_kernels("nonsense", cores=64)


def test_compare_reports_where_it_ran(tmp_path, monkeypatch):
    samples = make_samples(num=3, length=20)
    pair = write_train(tmp_path / "train.h5", samples), write_serve(tmp_path / "serve.h5", samples, taps=(3, 4, 5))
    monkeypatch.delitem(sys.modules, "torch", raising=False)  # writing the dumps loaded it
    monkeypatch.setattr(choice, "CPU_KEEPS_UP_CORES", 1)
    asked, plain = compare(*pair, tokenizer=None, device="cuda"), compare(*pair, tokenizer=None)
    assert asked.options["device"] == "cpu" and asked.options["device_asked"] == "cuda"
    assert "device_asked" not in plain.options
    assert [n for n in asked.notes if n not in plain.notes] == [
        n for n in asked.notes if n.startswith("--device cuda: measured on the CPU")]
    assert asked.verdict == plain.verdict and [f.code for f in asked.findings] == [f.code for f in plain.findings]
    assert [m.cosine_mean for s in asked.streams for m in s.slices] == [m.cosine_mean for s in plain.streams for m in s.slices]


@pytest.mark.parametrize("failure", [ImportError("No module named 'numba'"),
                                     RuntimeError("cannot cache function '_pair_terms': no locator available"),
                                     OSError(30, "Read-only file system")])
def test_a_large_pass_without_usable_compiled_kernels_runs_on_numpys(monkeypatch, failure):
    """No numba, or none that can cache its code (numba raises RuntimeError where no cache folder is
    writable): the same results from numpy's kernels, only slower."""
    import builtins

    real_import = builtins.__import__

    def failing(name, *args, **kwargs):
        if name == "alignprobe.compare.kernels.fused_kernels":
            raise failure
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", failing)
    kernels, note = choice.chosen_kernels(None, pass_values=choice.FUSED_MIN_VALUES)
    assert type(kernels) is NumpyKernels and note is None
