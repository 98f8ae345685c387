"""norm_outlier on a trained model's own states: the model's recurring large states (one token, the
same state in every sample that holds it in one context: a massive activation) are told from a data
fault and named as what they are; a clean set of such states gets no warning, and every planted
fault is still found, the scaled sample named as the outlier.

The states are a briefly trained tiny Llama's (tests/helpers/audit_datasets.py: trained_model_samples), one
token of which carries a state ~4.5x the median wherever it sits; five samples share a prefix that
holds it, as chat samples share a system prompt."""

from __future__ import annotations

import numpy as np
import pytest

import alignprobe
from audit_datasets import HEADER, make_samples, trained_model_samples, write_specforge

PREFIX = {30, 31, 32, 33, 34}
FAULTS = {"nan": [3], "zero": [5], "norm": [7], "repeat": [8], "duplicate": [11], "nomask": [21]}
NAMED = {"nonfinite", "degenerate", "norm_outlier", "repeated_tap", "duplicate_samples", "empty_loss_mask"}


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    samples, sink = trained_model_samples()
    return write_specforge(tmp_path_factory.mktemp("model") / "sf", samples), sink


@pytest.fixture(scope="module")
def faulty(tmp_path_factory):
    samples, sink = trained_model_samples(faults=FAULTS)
    return write_specforge(tmp_path_factory.mktemp("model_faults") / "sf", samples), sink


def _sample_index(name: str) -> int:
    return int(name.rsplit("data_", 1)[1].split(".")[0])


@pytest.mark.slow
def test_a_clean_set_of_a_models_states_gets_no_warning(clean):
    path, sink = clean
    result = alignprobe.audit(path)
    assert result.verdict == "PASS" and "norm_outlier" not in result.codes(), [f.title for f in result.findings]
    own = result.finding("recurring_norm_outlier")
    assert own is not None and own.severity == "info"
    tokens = {g["token"]: g for s in own.evidence["slices"].values() for g in s["tokens"]}
    assert sink in tokens and tokens[sink]["samples"] >= len(PREFIX)
    assert min(t for s in own.evidence["slices"].values() for g in s["tokens"] for t in g["times_median"]) > 4
    assert not {flag.sample for flag in result.samples_flagged}  # no sample is named as at fault


@pytest.mark.slow
def test_without_telling_them_apart_the_same_set_warns(clean):
    """The case holds outliers: with recurrence set out of reach they are norm_outlier, on the prefix samples."""
    path, sink = clean
    result = alignprobe.audit(path, policy={"norm_outlier_recurring_samples": 1000})
    outlier = result.finding("norm_outlier")
    assert result.verdict == "WARN" and outlier is not None
    named = {_sample_index(e["sample"]) for e in outlier.evidence["examples"]}
    assert PREFIX <= named and {e["token"] for e in outlier.evidence["examples"] if e["times_median"] > 1} == {sink}


@pytest.mark.slow
def test_every_planted_fault_is_named_and_only_the_scaled_sample_is_an_outlier(faulty):
    path, sink = faulty
    result = alignprobe.audit(path)
    assert NAMED <= set(result.codes()) and result.verdict == "FAIL", result.codes()
    outlier = result.finding("norm_outlier")
    assert {_sample_index(e["sample"]) for e in outlier.evidence["examples"]} == set(FAULTS["norm"])
    assert {key.split(" ")[0] for key in outlier.subject.slices} == {"sf:aux:aux[1]"}  # the slice scaled (its position 0 too)
    own = result.finding("recurring_norm_outlier")
    assert sink in {g["token"] for s in own.evidence["slices"].values() for g in s["tokens"]}


def test_a_recurring_state_is_the_models_and_a_lone_row_or_a_scaled_batch_is_a_fault(tmp_path):
    """Seeded rows (no model): the header's second token carries one fixed state 5x the median norm in
    every sample; one sample has a single row 50x, three more are scaled 100x whole (their header too)."""
    samples = make_samples(40, seed=3)
    sink = np.random.default_rng(0).standard_normal(32).astype(np.float32)
    median = np.median([np.linalg.norm(s["aux"][1:, 1], axis=-1) for s in samples][0])
    for s in samples:
        s["aux"][1, 1] = sink * (5 * median / np.linalg.norm(sink))
    samples[9]["aux"][6, 1] *= 50
    for i in (3, 4, 5):
        samples[i]["aux"][:, 1] *= 100
    result = alignprobe.audit(write_specforge(tmp_path / "sf", samples))
    own = result.finding("recurring_norm_outlier")
    groups = own.evidence["slices"]["sf:aux:aux[1]"]
    assert {g["token"] for g in groups["tokens"]} == {HEADER[1]} and {g["position"] for g in groups["positions"]} == {1}
    # the scaled samples' copies of that row lie far from the recurring state: they stay the fault's
    assert groups["tokens"][0]["outlier_rows"] == 37 and groups["recurring_rows"] == 37
    outlier = result.finding("norm_outlier")
    assert {int(e["sample"].rsplit("data_", 1)[1].split(".")[0]) for e in outlier.evidence["examples"]} == {3, 4, 5, 9}
    assert result.verdict == "WARN"
    pinned = alignprobe.audit(tmp_path / "sf", policy={"norm_outlier_recurring_samples": 38})
    assert pinned.finding("recurring_norm_outlier") is None  # 37 rows alike: not enough at 38
    assert pinned.finding("norm_outlier").evidence["slices"]["sf:aux:aux[1]"]["recurring_rows"] == 0
