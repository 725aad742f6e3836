"""Non-blocking calls started compiled (:mod:`wacoll.mpi.startcall`): started in the
calling thread, replayed when repeated, finished by ``Wait``, ``Test`` or the
progress engine, and the same as the MPI library's (a replayed call that the ranks
disagree on: ``test_requests.py``).
Runs at any size, on one cluster and the suite's multi-cluster layouts.
"""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

import wacoll

W = MPI.COMM_WORLD
P, ME = W.Get_size(), W.Get_rank()


def _layouts(mpi):
    return ["single"] + list(mpi.multi[:2])


def _comm(mpi, layout, **kwargs):
    """A communicator of this test's own (the suite's cached ones hold recordings
    of other tests' calls), freed by the test."""
    return wacoll.Comm(W, mpi.topology(layout), **kwargs)


def _calls(comm, i):
    """(label, request, got, want) of one round of non-blocking calls, new arrays
    each round (what a loop gives), the library's own result beside each."""
    rounds = []
    buf = np.arange(5.0) + i if ME == 0 else np.zeros(5)
    rounds.append(("Ibcast", comm.Ibcast(buf, root=0), buf, np.arange(5.0) + i))
    send = np.arange(7.0) * (ME + 1) + i
    out, want = np.zeros(7), np.zeros(7)
    W.Allreduce(send, want, op=MPI.SUM)
    rounds.append(("Iallreduce", comm.Iallreduce(send, out, op=MPI.SUM), out, want))
    inplace = np.full(3, ME + i, np.int64)
    want = np.zeros(3, np.int64)
    W.Allreduce(np.full(3, ME + i, np.int64), want, op=MPI.MAX)
    rounds.append(("Iallreduce in place",
                   comm.Iallreduce(MPI.IN_PLACE, inplace, op=MPI.MAX), inplace, want))
    out, want = np.zeros(4), np.zeros(4)
    W.Reduce(np.full(4, ME + 0.5), want, op=MPI.SUM, root=P - 1)
    rounds.append(("Ireduce", comm.Ireduce(np.full(4, ME + 0.5), out, op=MPI.SUM,
                                           root=P - 1), out, want))
    out, want = np.zeros(2 * P), np.zeros(2 * P)
    W.Allgather(np.full(2, ME + i, float), want)
    rounds.append(("Iallgather", comm.Iallgather(np.full(2, ME + i, float), out),
                   out, want))
    send = np.arange(P, dtype=np.int32) + 10 * ME
    out, want = np.zeros(P, np.int32), np.zeros(P, np.int32)
    W.Alltoall(send, want)
    rounds.append(("Ialltoall", comm.Ialltoall(send, out), out, want))
    rounds.append(("Ibarrier", comm.Ibarrier(), None, None))
    return rounds


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("finish", ["Wait", "Waitall", "Test"])
def test_repeated_nonblocking_calls_are_replayed_and_match_the_library(mpi, finish):
    """The first call of each kind runs compiled, the next ones replay it; however
    the requests are completed, every result is the library's."""
    problems = []
    for layout in _layouts(mpi):
        comm = _comm(mpi, layout)
        routes = []
        for i in range(3):
            rounds = _calls(comm, i)
            routes.append(comm.last_route)
            requests = [r for _, r, _, _ in rounds]
            if finish == "Wait":
                for r in reversed(requests):
                    r.Wait()
            elif finish == "Waitall":
                MPI.Request.Waitall(requests)
            else:
                while not all([r.Test() for r in requests]):
                    pass
            for label, _, got, want in rounds:
                if got is not None and got.tobytes() != want.tobytes():
                    problems.append(f"{layout} {label} round {i}: {got} != {want}")
        if routes[1:] != ["replayed", "replayed"] or \
                routes[0] not in ("compiled", "python"):
            problems.append(f"{layout}: routes {routes}")
        comm.Free()
    mpi.assert_all(not problems, "; ".join(problems[:3]))


@pytest.mark.mpi(min_size=1)
def test_calls_in_flight_of_one_recorded_form_keep_apart(mpi):
    """Many calls of one recorded form in flight at once, over temporary arrays the
    application drops at once: each has its own slot, and its buffers live until
    it is over."""
    for layout in _layouts(mpi):
        comm = _comm(mpi, layout)
        comm.Iallreduce(np.zeros(3), np.zeros(3), op=MPI.SUM).Wait()
        outs = [np.zeros(3) for _ in range(7)]
        requests = [comm.Iallreduce(np.full(3, float(k * ME)), outs[k], op=MPI.SUM)
                    for k in range(7)]
        MPI.Request.Waitall(requests[::2])
        for r in requests[1::2]:
            r.Wait()
        for k in range(7):
            mpi.assert_equal(outs[k], np.full(3, float(k * P * (P - 1) // 2)),
                             f"{layout} call {k}")
        comm.Free()


@pytest.mark.mpi(min_size=1)
def test_unchecked_and_blocking_calls_interleave(mpi):
    """``check="off"`` starts the call alone; blocking and non-blocking calls of
    the same shape keep their own recorded forms."""
    for layout in _layouts(mpi):
        comm = _comm(mpi, layout, check="off")
        for i in range(3):
            out, blocking = np.zeros(2), np.zeros(2)
            request = comm.Iallreduce(np.full(2, float(ME + i)), out, op=MPI.SUM)
            comm.Allreduce(np.full(2, float(ME)), blocking, op=MPI.SUM)
            request.Wait()
            mpi.assert_equal(out, np.full(2, float(P * (P - 1) // 2 + P * i)))
            mpi.assert_equal(blocking, np.full(2, float(P * (P - 1) // 2)))
        comm.Free()
