"""Isolated token outliers are named MoE routing flips (info) only where they can be: never on a model a
capture knows to be dense, and never where they pile up at one place of every sample (a capture that
mishandles its first or last row). Planted on the explanation dumps' clean pair (tests/helpers/explain_dumps.py)."""

from __future__ import annotations

import os
import shutil

import h5py
import numpy as np
import pytest

import explain_dumps as ed
from alignprobe.compare import compare
from alignprobe.dump import open_dump
from alignprobe.dump.encoding import to_storage

pytestmark = pytest.mark.slow


def _perturbed(arch: str, name: str, rows_of, size: float) -> str:
    """The clean serve dump with rows ``rows_of(sample length)`` of every sample moved by rel-RMS ``size``."""
    clean = ed.planted(arch)["clean"]
    path = os.path.join(os.path.dirname(clean), f"flips-{name}-{size}.h5")
    shutil.copyfile(clean, path)
    with open_dump(path) as d:
        spans = [d.span(i) for i in range(d.num_samples)]
        data = {s: d.read(s, 0, spans[-1][1]).copy() for s in d.streams}
        dtypes = {s: c.dtype for s, c in d.streams.items()}
    rng = np.random.default_rng(3)
    with h5py.File(path, "r+") as f:
        for stream, x in data.items():
            for a, b in spans:
                for r in rows_of(b - a):
                    x[a + r] += size * np.linalg.norm(x[a + r]) / np.sqrt(x.shape[1]) * rng.standard_normal(x.shape[1])
            f[f"streams/{stream}"][:] = to_storage(x, dtypes[stream])
    return path


def _flips(result) -> bool:
    return any("discrete_flips" in f.evidence for f in result.findings)


@pytest.mark.parametrize("arch, routed", [("llama", 0), ("deepseek_v3", 8)])
def test_capture_hf_records_how_many_experts_the_model_routes_among(arch, routed):
    with open_dump(ed.planted(arch)["train"]) as train:
        assert train.provenance.capture["routed_experts"] == routed


@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_a_dense_models_outlier_rows_are_never_routing_flips(where):
    rows_of = {"first": lambda n: [0], "middle": lambda n: [n // 3], "last": lambda n: [n - 1]}[where]
    r = compare(ed.planted("llama")["train"], _perturbed("llama", where, rows_of, 0.3))
    assert r.verdict != "PASS" and not _flips(r), [(f.code, f.severity) for f in r.findings]


def test_outliers_at_every_samples_last_row_are_not_flips_on_a_moe_model():
    r = compare(ed.planted("deepseek_v3")["train"], _perturbed("deepseek_v3", "last", lambda n: [n - 1], 0.3))
    assert r.verdict != "PASS" and not _flips(r), [(f.code, f.severity) for f in r.findings]
