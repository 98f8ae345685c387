"""A pass's read buffers: a set is taken, given back and taken again; a stopped pass frees its waiters."""

import threading

import numpy as np
import pytest

from alignprobe.dump.block_buffers import Aborted, BlockBuffers


def test_sets_are_reused_and_shaped():
    buffers = BlockBuffers({"serve/final": (4, 8, np.dtype(np.uint16))}, count=1)
    first = buffers.take()
    assert first["serve/final"].shape == (4, 8) and first["serve/final"].dtype == np.uint16
    buffers.give(first)
    assert buffers.take() is first


def test_abort_releases_a_reader_waiting_for_a_set():
    buffers = BlockBuffers({"a": (1, 1, np.dtype(np.float32))}, count=1)
    buffers.take()
    raised = []

    def wait():
        with pytest.raises(Aborted):
            buffers.take()
        raised.append(True)

    waiter = threading.Thread(target=wait)
    waiter.start()
    buffers.abort()
    waiter.join(timeout=5)
    assert not waiter.is_alive() and raised
