"""From HDF5 dumps the explanations read their rows as the pass starts and never wait for it. Where a
side reads whole files per read (a foreign folder in place: ``cheap_random_reads`` False, set here on
the dumps), the rows the streaming pass hands over are the rows a direct read gives, bit for bit, in
every stored encoding; a pass that stops early never leaves the explanations waiting, and a finished
pass that missed a row has it read."""

import numpy as np
import pytest

from alignprobe.dump.reader import Dump

from alignprobe.compare import streaming
from alignprobe.compare.explaining import ExplainSamples
from alignprobe.compare.kernels import kernels_for
from alignprobe.compare.pairing import pair_samples
from alignprobe.compare.plan import pass_streams, plan_streams, train_geometry
from alignprobe.compare.policy import Policy
from alignprobe.dump import StreamClaim, open_dump
from compare_helpers import AUX, H, N, make_samples, write_dump


def _pair(tmp_path, dtype):
    """A SpecForge-like train side (the aux concat and the final only: every slice a candidate) and a
    serve side of both streams, with noise so the fits have something to measure."""
    samples = make_samples(num=12, length=40)
    streams = {"eagle3_aux": StreamClaim(AUX, H, N, dtype, "post", "drafter_input"),
               "final": StreamClaim((N,), H, N, dtype, "post", "final")}
    rng = np.random.default_rng(1)

    def states(noise):
        return lambda hf, pre, sid: {
            "eagle3_aux": hf[:, list(AUX)].reshape(len(hf), -1) + noise * rng.standard_normal((len(hf), 3 * H)),
            "final": hf[:, N] + noise * rng.standard_normal((len(hf), H)),
        }

    train = write_dump(tmp_path / "train.h5", samples, streams, states(0.0))
    serve = write_dump(tmp_path / "serve.h5", samples, streams, states(0.02))
    return train, serve


def _samples(tr, sv, fed: bool):
    hidden, layers = train_geometry(tr)
    _, segments = pair_samples(tr, sv, tokenizer=None)
    plans = plan_streams(tr, sv, hidden, [])
    read = pass_streams(plans) if fed else (set(), set())
    return ExplainSamples(tr, sv, plans, segments, layers, read), plans, segments, hidden


@pytest.fixture
def whole_file_reads(monkeypatch):
    """The dumps read as a foreign folder does: the pass hands the rows over."""
    monkeypatch.setattr(Dump, "cheap_random_reads", False)


def _fed_by_the_pass(tr, sv):
    samples, plans, segments, hidden = _samples(tr, sv, fed=True)
    measured = [p for p in plans if p.width_ok]
    # small blocks, so the chosen samples' rows are cut across blocks
    streaming.measure(tr, sv, measured, segments, hidden, 4 * 4 * H * 7, kernels_for("cpu"), explain_feed=samples.take)
    samples.pass_over(True)
    return samples


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_rows_from_the_pass_equal_rows_read(tmp_path, dtype, whole_file_reads):
    train, serve = _pair(tmp_path, dtype)
    policy = Policy()
    with open_dump(train) as tr, open_dump(serve) as sv:
        fed = _fed_by_the_pass(tr, sv)
        read, _, _, _ = _samples(tr, sv, fed=False)
        assert fed.fed_serve and fed.fed_keys and not fed.own_serve and not fed.own_keys
        assert not read.fed_serve and not read.fed_keys
        assert fed._received.all()
        by_fit, by_read = fed.explain(policy), read.explain(policy)
        for name in fed.served:
            assert np.array_equal(fed.served[name], read.served[name])
        for key in fed.trained:
            assert np.array_equal(fed.trained[key], read.trained[key])
    assert set(by_fit) == {"eagle3_aux", "final"}
    assert by_fit == by_read
    assert all(e.winner.name == "identity" for es in by_fit.values() for e in es)


def test_a_pass_that_stops_early_never_leaves_them_waiting(tmp_path, whole_file_reads):
    train, serve = _pair(tmp_path, "float32")
    with open_dump(train) as tr, open_dump(serve) as sv:
        samples, *_ = _samples(tr, sv, fed=True)
        samples.pass_over(False)  # nothing was handed over: the compare is failing
        assert samples.explain(Policy()) == {}


def test_rows_a_finished_pass_did_not_hand_over_are_read(tmp_path, whole_file_reads):
    train, serve = _pair(tmp_path, "bfloat16")
    policy = Policy()
    with open_dump(train) as tr, open_dump(serve) as sv:
        missed, *_ = _samples(tr, sv, fed=True)
        missed.pass_over(True)
        read, *_ = _samples(tr, sv, fed=False)
        explained = missed.explain(policy)
        assert explained == read.explain(policy) and explained["eagle3_aux"]


def test_no_paired_rows_explain_nothing(tmp_path):
    train, serve = _pair(tmp_path, "float32")
    with open_dump(train) as tr, open_dump(serve) as sv:
        hidden, layers = train_geometry(tr)
        plans = plan_streams(tr, sv, hidden, [])
        samples = ExplainSamples(tr, sv, plans, [], layers, pass_streams(plans))
        assert samples.explain(Policy()) == {}



def test_from_dumps_the_fits_wait_for_no_row_of_the_pass(tmp_path):
    # handed over by the pass, the middle run's rows came past half of it, and the fits' tail outlasted
    # a short pass: from dumps every row is read as the pass starts (its chunks are then in the page
    # cache when the pass reads them)
    train, serve = _pair(tmp_path, "bfloat16")
    policy = Policy()
    with open_dump(train) as tr, open_dump(serve) as sv:
        samples, plans, segments, hidden = _samples(tr, sv, fed=True)
        assert not samples.fed_serve and not samples.fed_keys and samples._fed.is_set()
        assert samples.own_serve and samples.own_keys
        explained = samples.explain(policy)  # no pass ran, none is waited for
        read, *_ = _samples(tr, sv, fed=False)
        assert explained == read.explain(policy) and explained["eagle3_aux"]
