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
from wacoll.errors import WacollError

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
    rounds.append(
        (
            "Iallreduce in place",
            comm.Iallreduce(MPI.IN_PLACE, inplace, op=MPI.MAX),
            inplace,
            want,
        )
    )
    out, want = np.zeros(4), np.zeros(4)
    W.Reduce(np.full(4, ME + 0.5), want, op=MPI.SUM, root=P - 1)
    rounds.append(
        (
            "Ireduce",
            comm.Ireduce(np.full(4, ME + 0.5), out, op=MPI.SUM, root=P - 1),
            out,
            want,
        )
    )
    out, want = np.zeros(2 * P), np.zeros(2 * P)
    W.Allgather(np.full(2, ME + i, float), want)
    rounds.append(
        ("Iallgather", comm.Iallgather(np.full(2, ME + i, float), out), out, want)
    )
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
        if routes[1:] != ["replayed", "replayed"] or routes[0] not in (
            "compiled",
            "python",
        ):
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
        requests = [
            comm.Iallreduce(np.full(3, float(k * ME)), outs[k], op=MPI.SUM)
            for k in range(7)
        ]
        MPI.Request.Waitall(requests[::2])
        for r in requests[1::2]:
            r.Wait()
        for k in range(7):
            mpi.assert_equal(
                outs[k], np.full(3, float(k * P * (P - 1) // 2)), f"{layout} call {k}"
            )
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


class _ArrayInterfaceOnly:
    """An object exposing only ``__array_interface__`` (which wacoll reads and
    mpi4py does not)."""

    def __init__(self, array):
        self.array = array
        self.__array_interface__ = array.__array_interface__


@pytest.mark.mpi(min_size=1)
def test_a_library_collective_gets_its_arguments_as_the_library_reads_them(mpi):
    """The root's buffer is an object mpi4py cannot read: the library's
    non-blocking collective is given a numpy view of it, as a blocking call is."""
    for layout in _layouts(mpi):
        comm = _comm(mpi, layout, family="native")
        buf = np.arange(4.0) if ME == 0 else np.zeros(4)
        comm.Ibcast(_ArrayInterfaceOnly(buf) if ME == 0 else buf, root=0).Wait()
        mpi.assert_equal(buf, np.arange(4.0), layout)
        comm.Free()


@pytest.mark.mpi(min_size=2)
def test_calls_on_the_python_route_are_advanced_by_one_thread(mpi):
    """Traced calls take the Python route: their requests are tested by the
    progress thread alone, while the application waits or tests several of them
    in turns (two threads testing one request broke the library's state)."""
    layout = mpi.multi[0] if mpi.multi else "single"
    comm = _comm(mpi, layout, trace=True)
    rng = np.random.default_rng(ME)
    for i in range(60):
        outs = [np.zeros(16) for _ in range(3)]
        requests = [
            comm.Iallreduce(np.full(16, float(ME + i + k)), outs[k], op=MPI.SUM)
            for k in range(3)
        ]
        for r in requests[::-1]:
            if rng.random() < 0.5:
                r.Wait()
            else:
                while not r.Test():
                    pass
        for k in range(3):
            mpi.assert_equal(
                outs[k], np.full(16, float(P * (P - 1) // 2 + P * (i + k))), f"{i}.{k}"
            )
    comm.Free()


@pytest.mark.mpi(min_size=2)
def test_a_stopped_communicator_fails_the_next_call_on_every_rank(mpi):
    """A non-blocking call the ranks disagree on stops the communicator, on each
    rank when it learns of it. A call started before every rank has learned (the
    ranks but the last one start it first) either runs on every rank or raises on
    every rank, never hangs; once the request was waited for, the next call raises
    on every rank."""
    import time

    comm = _comm(mpi, mpi.multi[0] if mpi.multi else "single")
    if ME == 0:
        time.sleep(0.2)  # the others start the next call first
    n = 4 + (ME == P - 1)
    request = comm.Iallreduce(np.ones(n), np.zeros(n), op=MPI.SUM)
    _, exc = mpi.outcome(lambda: comm.Bcast(np.zeros(3), root=0))
    raised = W.allgather(None if exc is None else str(exc))
    mpi.assert_all(len(set(raised)) == 1, f"the next call ended as {raised}")
    mpi.assert_all(raised[0] is None or "Free it" in raised[0], raised[0])
    mpi.same_error(request.Wait, WacollError, match="disagree")
    mpi.same_error(comm.Barrier, WacollError, match="Free it")
    comm.Free()


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize(
    "complete", ["Waitall", "Testall", "Waitany", "Wait on rank 0, Waitall elsewhere"]
)
def test_a_verdict_the_library_completed_is_collected_at_the_next_call(mpi, complete):
    """On one node a non-blocking call the library runs returns the library's own
    request (no progress engine): the library's own functions complete it without
    wacoll. Its check's verdict is then collected at the communicator's next call,
    replayed or not: where the ranks disagreed (an operator, which the library's
    messages do not show), that call raises the same error on every rank, however
    each rank completed the request, and the communicator stops."""
    comm = _comm(mpi, "single")
    for _ in range(3):
        requests = [comm.Iallreduce(np.ones(4), np.zeros(4), op=MPI.SUM)]
        mpi.assert_all(type(requests[0]).__name__ == "NodeRequest", type(requests[0]))
        MPI.Request.Waitall(requests)
        comm.Bcast(np.zeros(3), root=0)  # recorded: replayed from the second round
    mpi.assert_all(comm.last_route == "replayed", comm.last_route)
    request = comm.Iallreduce(
        np.ones(4), np.zeros(4), op=MPI.MAX if ME == P - 1 else MPI.SUM
    )
    raised = None
    if complete == "Waitall" or (complete.startswith("Wait on") and ME != 0):
        MPI.Request.Waitall([request])
    elif complete == "Testall":
        while not MPI.Request.Testall([request]):
            pass
    elif complete == "Waitany":
        MPI.Request.Waitany([request])
    else:
        with pytest.raises(WacollError, match="disagree"):
            request.Wait()
        raised = request.error
    mpi.assert_all(not request, "the request is complete")
    mpi.same_error(
        lambda: comm.Bcast(np.zeros(3), root=0), WacollError, match="failed its"
    )
    mpi.assert_all(
        "disagree" in str(request.error), f"the request's error: {request.error}"
    )
    mpi.assert_all(raised is None or raised is request.error)
    mpi.same_error(comm.Barrier, WacollError, match="Free it")
    comm.Free()


@pytest.mark.mpi(min_size=2)
def test_a_request_tested_before_its_peers_start_stays_the_applications(mpi):
    """``Test`` of a call whose peers have not started it yet returns False and
    leaves the request as it was: not ``MPI.REQUEST_NULL``, so that the library's
    own functions wait for it beside other requests (a generalized one too)."""
    import threading
    import time

    comm = _comm(mpi, "single")
    buf = np.arange(4.0) if ME == 0 else np.zeros(4)
    if ME != 0:
        time.sleep(0.3)  # rank 0 tests before the others start
    request = comm.Ibcast(buf, root=0)
    problems = []
    if ME == 0:
        if request.Test():
            problems.append("the call completed before its peers started it")
        if request == MPI.REQUEST_NULL:
            problems.append("Test freed the request")
        other = MPI.Grequest.Start(lambda status: None, None, None)
        later = threading.Timer(0.3, other.Complete)
        later.start()
        MPI.Request.Waitall([request, other])
        later.join()
    else:
        request.Wait()
    mpi.assert_all(not problems, "; ".join(problems))
    mpi.assert_equal(buf, np.arange(4.0))
    comm.Free()
