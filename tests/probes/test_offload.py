"""StateOffloader: what reaches the sink equals what was submitted, in order, and memory stays bounded."""

import threading

import pytest
import torch

from alignprobe.probes.offload import StateOffloader


def _batches(n, device="cpu"):
    g = torch.Generator().manual_seed(0)
    for i in range(n):
        rows = 3 + i % 5  # different lengths, so a mix-up of batches shows
        yield [f"s{i}"], {
            "layers": torch.randn(rows, 24, generator=g).to(device=device, dtype=torch.bfloat16),
            "final": torch.randn(rows, 8, generator=g).to(device),
        }


def _collect(device):
    expected = [(ids, {k: v.cpu().clone() for k, v in t.items()}) for ids, t in _batches(12, device)]
    received = []
    with StateOffloader(lambda ids, states: received.append((ids, states)), max_in_flight=2) as off:
        for ids, tensors in _batches(12, device):
            off.submit(ids, tensors)
            if device == "cpu":
                for t in tensors.values():
                    t.fill_(float("nan"))  # the caller reuses its buffers at once: the copy must be taken already
            else:
                # The caller drops its states at once and the allocator hands their memory to new
                # tensors: the offloader must hold the originals until they are copied.
                del tensors
                torch.randn(64, 64, device=device).fill_(float("nan"))
    assert [ids for ids, _ in received] == [ids for ids, _ in expected]
    for (_, got), (_, want) in zip(received, expected):
        assert got.keys() == want.keys()
        for name in want:
            assert got[name].device.type == "cpu"
            assert got[name].dtype == want[name].dtype
            assert torch.equal(got[name], want[name])


def test_sink_receives_exact_copies_in_submission_order():
    _collect("cpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_copies_are_pinned_exact_and_ordered():
    _collect("cuda")
    seen = []
    with StateOffloader(lambda ids, st: seen.append(st["x"].is_pinned())) as off:
        off.submit(0, {"x": torch.ones(4, 4, device="cuda")})
    assert seen == [True]


def test_submit_blocks_while_the_sink_is_behind():
    release = threading.Event()
    handled = []
    off = StateOffloader(lambda ids, st: (release.wait(10), handled.append(ids)), max_in_flight=2)
    # One batch in the sink, two waiting: the fourth submit must wait for the sink.
    for i in range(3):
        off.submit(i, {"x": torch.zeros(2)})
    fourth = threading.Thread(target=off.submit, args=(3, {"x": torch.zeros(2)}))
    fourth.start()
    fourth.join(0.5)
    assert fourth.is_alive(), "submit() did not wait for a sink that fell behind"
    release.set()
    fourth.join(10)
    off.close()
    assert handled == [0, 1, 2, 3]


@pytest.mark.parametrize("error, raised", [(OSError("disk full"), OSError), (ValueError("disk full"), RuntimeError)])
def test_a_failing_sink_is_reported_to_the_caller(error, raised):
    # The machine's errors (OSError) and the user's (BadInput) come back as they are, for the CLI
    # to print as one line; anything else is wrapped, naming the sink.
    def sink(ids, states):
        if ids == 1:
            raise error

    off = StateOffloader(sink)
    off.submit(0, {"x": torch.zeros(2)})
    off.submit(1, {"x": torch.zeros(2)})
    with pytest.raises(raised, match="disk full"):
        off.drain()
    with pytest.raises(raised, match="disk full"):
        off.submit(2, {"x": torch.zeros(2)})
    with pytest.raises(raised, match="disk full"):
        off.close()


def test_mixed_devices_in_one_submit_are_refused():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    with StateOffloader(lambda *_: None) as off, pytest.raises(ValueError, match="one device"):
        off.submit(0, {"a": torch.zeros(1), "b": torch.zeros(1, device="cuda")})
