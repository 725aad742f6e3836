"""The keeper of the verdict streams: a rank that returned from its last call sends
its entries all the same.

A blocking call on several clusters logs its check's entry in its communicator's
:class:`~wacoll.mpi._runner.VerdictStream` and returns; the entries leave in
batches, with a later call. A rank that returns from a call and then waits in the
application's own MPI calls (a ``Recv``, the library's ``Barrier``) makes no later
call, yet a peer still inside that call may need its entry to learn that the
ranks' arguments disagreed. The keeper, one daemon thread per process, sends such
entries once their stream's last call returned :data:`KEEP_AFTER` seconds ago and
none has begun since (a rank within a call asks for what it needs itself).

It wakes only while some stream holds unsent entries (a stream arms it once per
batch, as its first unsent entry is opened), and never waits for the MPI library:
it needs ``MPI_THREAD_MULTIPLE`` (mpi4py's default), and without it there is no
keeper (such a rank's entries leave at its next call on the communicator, its
``Free``, or the end of the process).

Examples
--------
>>> keeper = StreamKeeper()
>>> len(keeper)
0
"""

from __future__ import annotations

import atexit
import sys
import threading
import time
import weakref

from mpi4py import MPI

__all__ = ["KEEP_AFTER", "StreamKeeper", "stop_keeper", "stream_keeper"]

#: Seconds :meth:`StreamKeeper.stop` waits for a sweep under way (its sends never
#: wait: microseconds, unless MPI's lock is held by the thread that stops it, within
#: ``MPI_Finalize``; then the wait ends unfinished).
STOP_WAIT = 0.1
#: Seconds after a stream's last call returned (none begun since) before the keeper
#: sends its unsent entries: long against the gap between two calls of a loop
#: (which batch them), short against the wait of a peer that needs them.
KEEP_AFTER = 2e-3

_keeper = None
_lock = threading.Lock()


class StreamKeeper:
    """The process's keeper of verdict streams (see the module's docstring)."""

    def __init__(self):
        self._streams = weakref.WeakSet()
        self._lock = threading.Lock()  # (the set changes in the calling thread)
        self._armed = threading.Event()
        # held through a sweep: its MPI calls release the GIL, and the end of the
        # process must not finalize MPI under them
        self._sweeping = threading.Lock()
        self._stopped = False
        self._thread = None

    def __len__(self):
        return len(self._streams)

    def add(self, stream):
        """Keep ``stream`` (held weakly): it calls :meth:`arm` as entries wait."""
        with self._lock:
            self._streams.add(stream)
        stream.arm = self.arm

    def arm(self):
        """A stream holds entries not yet sent: look again in :data:`KEEP_AFTER`.
        The thread starts here, at the first entry (starting it waits for it to
        run: milliseconds where ranks share cores, which a communicator whose
        calls never wait would pay for nothing)."""
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    thread = threading.Thread(
                        target=self._run, name="wacoll-stream-keeper", daemon=True
                    )
                    try:
                        thread.start()
                    except RuntimeError:  # (no thread to be had: inside a call,
                        # whose peers wait for its entry, raise nothing; without a
                        # keeper the entries leave with a later call, as without
                        # MPI_THREAD_MULTIPLE)
                        self._thread = False
                        return
                    self._thread = thread
        self._armed.set()

    def stop(self):
        """Send nothing more (the process ends: MPI is about to finalize), once a
        sweep under way is over (waiting at most :data:`STOP_WAIT`)."""
        self._stopped = True
        self._armed.set()
        if self._sweeping.acquire(timeout=STOP_WAIT):
            self._sweeping.release()

    def _run(self):
        while True:
            self._armed.wait()
            if self._stopped:
                return
            time.sleep(KEEP_AFTER)
            self._armed.clear()  # (before looking: an arm from now on is seen)
            if self._stopped or MPI.Is_finalized():
                return
            with self._lock:
                streams = list(self._streams)
            with self._sweeping:
                later = [not self._stopped and self._keep(s) for s in streams]
            if any(later):
                self._armed.set()

    @staticmethod
    def _keep(stream):
        """``stream.keep``; an error (the MPI library's) is reported, and the
        stream's entries are left to its next call: the thread goes on."""
        try:
            return stream.keep(KEEP_AFTER)
        except Exception as exc:  # noqa: BLE001 -- no caller to raise it to
            print(f"wacoll: the verdict stream's keeper: {exc}", file=sys.stderr)
            return False


def stream_keeper():
    """The process's :class:`StreamKeeper`, or None where MPI runs below
    ``MPI_THREAD_MULTIPLE`` (a thread must not call it beside the application)."""
    global _keeper
    if MPI.Query_thread() < MPI.THREAD_MULTIPLE:
        return None
    with _lock:
        if _keeper is None:
            _keeper = StreamKeeper()
            atexit.register(_keeper.stop)  # (runs before mpi4py finalizes MPI)
    return _keeper


def stop_keeper():
    """Stop the process's keeper, if there is one (MPI is about to finalize)."""
    if _keeper is not None:
        _keeper.stop()
