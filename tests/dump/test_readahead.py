"""read_ahead: results in order, the next load runs while the caller works, errors surface in the caller."""

import threading

import pytest

from alignprobe.dump.readahead import read_ahead


@pytest.mark.parametrize("depth", [0, 1, 3])
def test_results_come_in_order(depth):
    loads = [lambda i=i: i * i for i in range(20)]
    assert list(read_ahead(loads, depth)) == [i * i for i in range(20)]


def test_the_next_load_runs_while_the_caller_holds_this_one():
    started = [threading.Event() for _ in range(3)]

    def load(i):
        started[i].set()
        return i

    got = []
    for i in read_ahead([lambda i=i: load(i) for i in range(3)], depth=1):
        if i + 1 < 3:
            # Without read-ahead this would time out: load i+1 only starts when asked for.
            assert started[i + 1].wait(5), "the next block was not read ahead"
        got.append(i)
    assert got == [0, 1, 2]


def test_depth_zero_reads_only_when_asked():
    started = []
    for i in read_ahead([lambda i=i: started.append(i) or i for i in range(3)], depth=0):
        assert started == list(range(i + 1))


def test_a_failing_load_raises_in_the_caller_at_its_turn():
    def boom():
        raise OSError("bad block")

    out = []
    with pytest.raises(OSError, match="bad block"):
        for x in read_ahead([lambda: 1, boom, lambda: 3], depth=1):
            out.append(x)
    assert out == [1]


def test_stopping_early_leaves_no_thread_behind():
    before = threading.active_count()
    gen = read_ahead([lambda i=i: i for i in range(100)], depth=2)
    assert next(gen) == 0
    gen.close()
    assert threading.active_count() == before
