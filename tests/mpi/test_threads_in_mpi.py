"""wacoll's calls never hold the GIL while they wait for the MPI library.

With ``MPI_THREAD_MULTIPLE`` a thread may hold the library's lock while it waits
for the GIL: one completing a generalized request whose Python ``free`` callback
runs inside ``MPI_Grequest_complete`` (wacoll's own progress thread does this for
every non-blocking call). A call that entered the library with the GIL held would
then wait for that lock forever, and its peers with it. Here a thread completes
such requests without pause while the main thread makes wacoll's blocking calls on
the paths that call MPI from compiled code: the verdict stream of a communicator on
several clusters, and the library's collective called directly by a replayed
one-cluster call. A hang ends the process (and the run) with every thread's stack.
"""

from __future__ import annotations

import faulthandler
import threading

import numpy as np
import pytest
from mpi4py import MPI

import wacoll
from wacoll import Topology

W = MPI.COMM_WORLD
P = W.Get_size()
#: Calls per case (each one of them may meet the other thread inside the library;
#: the library's own collectives crawl beside that thread, so fewer of them; at 8
#: ranks on 2 cores a call beside it takes some 50 ms, so fewer there too).
CALLS = {"two clusters": 100 if P < 8 else 40, "one cluster": 20}
#: Seconds after which a case counts as hung: the process ends.
HANG_SECONDS = 120

pytestmark = pytest.mark.skipif(
    MPI.Query_thread() < MPI.THREAD_MULTIPLE, reason="needs MPI_THREAD_MULTIPLE"
)


class _CallbacksInTheLibrary:
    """A thread that completes generalized requests freed beforehand, so that
    their Python ``free`` callback runs within the library's
    ``MPI_Grequest_complete``."""

    def __init__(self):
        self.freed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _free(self):
        self.freed += 1

    def _run(self):
        while not self._stop.is_set():
            request = MPI.Grequest.Start(None, self._free, None)
            handle = request
            request.Free()
            handle.Complete()

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def _two_clusters():
    half = max(1, P // 2)
    return Topology.from_clusters([list(range(half)), list(range(half, P))])


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize(
    "clusters, op",
    [("two clusters", op) for op in ("Bcast", "Allreduce", "Gather")]
    + [("one cluster", "Bcast")],
)
def test_calls_beside_callbacks_in_the_library(clusters, op):
    comm = wacoll.Comm(W, _two_clusters() if clusters == "two clusters" else None)
    mine = np.full(4, W.Get_rank() + 1, "i")
    out = np.zeros(4 * P, "i")
    faulthandler.dump_traceback_later(HANG_SECONDS, exit=True)
    try:
        with _CallbacksInTheLibrary() as callbacks:
            for i in range(CALLS[clusters]):
                if op == "Bcast":
                    out[:4] = mine
                    comm.Bcast(out[:4], root=i % P)
                    assert (out[:4] == i % P + 1).all()
                elif op == "Allreduce":
                    comm.Allreduce(mine, out[:4])
                    assert (out[:4] == P * (P + 1) // 2).all()
                else:
                    comm.Gather(mine, out, root=0)
        comm.Free()
    finally:
        faulthandler.cancel_dump_traceback_later()
    assert callbacks.freed > 0
    if op == "Gather" and W.Get_rank() == 0:
        assert (out == np.repeat(np.arange(1, P + 1), 4)).all()
