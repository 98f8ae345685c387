"""read_ahead: results in order, the next loads run while the caller works (by count, by bytes, in
several threads), errors surface in the caller; advance_ahead: an iterator produced one item ahead."""

import threading

import pytest

from alignprobe.dump.readahead import advance_ahead, read_ahead


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


def _watched(n):
    """``n`` loads that record which ran, and a function telling which had run when result i came."""
    ran = []
    lock = threading.Lock()

    def load(i):
        with lock:
            ran.append(i)
        return i

    return [lambda i=i: load(i) for i in range(n)], ran


def test_by_bytes_the_loads_ahead_fit_the_budget():
    sizes = [10, 10, 10, 30, 10]
    loads, ran = _watched(len(sizes))
    for i in read_ahead(loads, sizes=sizes, budget_bytes=25):
        if i == 0:  # 1 and 2 fit (20 bytes), 3 does not
            assert _wait_for(lambda: {1, 2} <= set(ran))
            assert 3 not in ran
        if i == 2:  # 3 alone is over the budget: it is read only when its turn comes
            assert 3 not in ran
        if i == 3:  # holding 3, 4 fits
            assert _wait_for(lambda: 4 in ran)
    assert sorted(ran) == [0, 1, 2, 3, 4]


def test_several_threads_keep_depth_loads_in_flight():
    barrier = threading.Barrier(3, timeout=5)

    def load(i):
        if i < 3:
            barrier.wait()  # only returns when three loads run at once
        return i

    assert list(read_ahead([lambda i=i: load(i) for i in range(6)], 3, threads=3)) == list(range(6))


def test_an_iterator_advanced_ahead_yields_its_items_and_stops_at_its_end():
    produced = []

    def items():
        for i in range(4):
            produced.append(i)
            yield i

    got = []
    for i in advance_ahead(items()):
        if i < 3:
            assert _wait_for(lambda i=i: i + 1 in produced), "the next item was not produced ahead"
        got.append(i)
    assert got == [0, 1, 2, 3]


def _wait_for(condition, seconds=5.0):
    import time

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.001)
    return False
