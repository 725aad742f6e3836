"""The keeper of the verdict streams (:mod:`wacoll.mpi.keeper`), with streams that
stand in for :class:`~wacoll.mpi._runner.VerdictStream` (no MPI calls)."""

import threading
import time

from wacoll.mpi.keeper import KEEP_AFTER, STOP_WAIT, StreamKeeper


class _SlowStream:
    """A stream whose ``keep`` takes ``seconds`` (as a send would, without the
    GIL), recording when it began and ended."""

    def __init__(self, seconds):
        self.seconds = seconds
        self.arm = None
        self.began = threading.Event()
        self.ended = None

    def keep(self, after):
        assert after == KEEP_AFTER
        self.began.set()
        time.sleep(self.seconds)
        self.ended = time.monotonic()
        return False


def test_stop_waits_for_a_sweep_under_way():
    keeper = StreamKeeper()
    stream = _SlowStream(STOP_WAIT / 2)
    keeper.add(stream)
    stream.arm()
    assert stream.began.wait(5), "the keeper never swept"
    keeper.stop()
    stopped = time.monotonic()
    assert stream.ended is not None and stream.ended <= stopped


def test_stop_waits_no_longer_than_its_bound():
    keeper = StreamKeeper()
    stream = _SlowStream(STOP_WAIT * 5)  # (a sweep that cannot finish soon)
    keeper.add(stream)
    stream.arm()
    assert stream.began.wait(5), "the keeper never swept"
    began = time.monotonic()
    keeper.stop()
    assert time.monotonic() - began < STOP_WAIT * 3
    assert stream.ended is None  # (it returned before the sweep ended)


def test_a_stopped_keeper_sweeps_no_more():
    keeper = StreamKeeper()
    stream = _SlowStream(0)
    keeper.add(stream)
    keeper.stop()
    stream.arm()
    time.sleep(KEEP_AFTER * 5)
    assert not stream.began.is_set()


def test_a_keeper_starts_its_thread_at_the_first_entry_and_survives_none(monkeypatch):
    """The thread starts when a stream first holds an unsent entry, not when the
    stream is added (a communicator whose calls never wait pays for none); where
    no thread can be started, arming raises nothing (it happens inside a call,
    whose peers wait for its entry) and the keeper stays without one."""
    keeper = StreamKeeper()
    stream = _SlowStream(0)
    keeper.add(stream)
    assert keeper._thread is None
    stream.arm()
    assert stream.began.wait(5), "the keeper never swept"
    keeper.stop()

    def refused(self):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refused)
    keeper = StreamKeeper()
    stream = _SlowStream(0)
    keeper.add(stream)
    stream.arm()
    stream.arm()
    assert keeper._thread is False and not stream.began.is_set()
