"""With the checks first (check="first"), the MPI library's collectives start in
program order, whichever call's check passes first and whichever thread advances it
(wacoll.mpi.task.StartOrder): the library matches collectives by their order."""

import threading
import time

from mpi4py import MPI

from wacoll.mpi.task import CallTask, NativeWork, StartOrder


class _Check:
    """A check that passes when told to."""

    polled = False
    waiting = ()

    def __init__(self):
        self.done = self.ok = False

    def pass_now(self):
        self.done = self.ok = True

    def advance(self, block=False):
        while block and not self.done:
            time.sleep(1e-4)
        return self.done

    def abandon(self):
        pass


def _task(order, started, name, check):
    return CallTask(
        NativeWork(lambda: started.append(name) or MPI.REQUEST_NULL),
        check,
        gated=True,
        exchange=False,
        order=(order, order.ticket()),
    )


def test_a_later_call_whose_check_passes_first_starts_second():
    order, started = StartOrder(), []
    first, second = _Check(), _Check()
    a = _task(order, started, "a", first)
    b = _task(order, started, "b", second)
    second.pass_now()
    assert b.advance() is False and started == []  # waits for a's collective
    first.pass_now()
    assert a.advance() is True and b.advance() is True
    assert started == ["a", "b"]


def test_a_blocking_call_waits_for_an_earlier_ones_collective():
    order, started = StartOrder(), []
    first, second = _Check(), _Check()
    a = _task(order, started, "a", first)  # non-blocking, in flight
    b = _task(order, started, "b", second)  # blocking, made after it
    second.pass_now()

    def later():  # the progress thread, say, advances a once its check passes
        time.sleep(0.05)
        first.pass_now()
        a.advance()

    helper = threading.Thread(target=later)
    helper.start()
    b.advance(block=True)
    helper.join()
    assert started == ["a", "b"]


def test_a_call_whose_check_failed_lets_the_next_start():
    order, started = StartOrder(), []
    first, second = _Check(), _Check()
    first.done, first.failure = True, lambda exchange: RuntimeError("disagree")
    a = _task(order, started, "a", first)
    b = _task(order, started, "b", second)
    try:
        a.advance()
    except RuntimeError:
        pass
    second.pass_now()
    assert b.advance() is True and started == ["b"]
