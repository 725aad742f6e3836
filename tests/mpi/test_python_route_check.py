"""The Python route's calls on several clusters are checked by the compiled check, the
one every compiled call runs beside its work (:meth:`ArgumentCheck.of_call`): the
results are the MPI library's, a finished check's runner serves the next call, and a
call whose ranks disagree raises the same error on every rank, blocking or not."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

import wacoll
from wacoll.mpi.runner import runner_ready

W = MPI.COMM_WORLD
P, ME = W.Get_size(), W.Get_rank()

pytestmark = pytest.mark.skipif(
    not runner_ready(), reason="the compiled runner cannot load here"
)


def _traced(mpi, layout, **kwargs):
    # tracing keeps every call on the Python route (the executor records its steps)
    return wacoll.Comm(W, mpi.topology(layout), trace=True, **kwargs)


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("check", ["beside", "first"])
def test_python_route_calls_run_the_compiled_check(mpi, check):
    comm = _traced(mpi, mpi.multi[0], check=check)
    try:
        argcheck = comm._route.argcheck
        mpi.assert_all(argcheck.several and argcheck.spare == [], "fresh communicator")
        send = np.arange(5, dtype="f8") * (ME + 1)
        got, want = np.zeros(5), np.zeros(5)
        for _ in range(3):
            mpi.run(lambda: comm.Allreduce(send, got, op=MPI.SUM), "Allreduce")
            W.Allreduce(send, want, op=MPI.SUM)
            mpi.assert_equal(got, want)
            mpi.assert_all(comm.last_route == "python", comm.last_route)
            if argcheck.verdicts is None:
                # the check's runner came back, and the next call took it again
                mpi.assert_all(len(argcheck.spare) == 1, f"{len(argcheck.spare)} spare")
            else:
                # a blocking call checks in the ring of verdicts, whatever its route
                # (every rank numbers the checks alike): its slot came back
                mpi.assert_all(argcheck.verdicts.idle, "a verdict left in flight")
        outs = [np.zeros(5) for _ in range(3)]
        requests = [comm.Iallreduce(send, out, op=MPI.SUM) for out in outs]
        MPI.Request.Waitall(requests)
        for out in outs:
            mpi.assert_equal(out, want)
        # each call in flight had a runner of its own (one whose check had finished
        # may have served the next); every one is spare again
        mpi.assert_all(
            1 <= len(argcheck.spare) <= 3
            and len(set(map(id, argcheck.spare))) == len(argcheck.spare),
            f"{len(argcheck.spare)} spare",
        )
        buf = np.arange(4.0) if ME == 0 else np.zeros(4)
        mpi.run(lambda: comm.Bcast(buf, root=0), "Bcast")
        mpi.assert_equal(buf, np.arange(4.0))
    finally:
        comm.Free()


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("blocking", [True, False])
def test_disagreement_raises_everywhere_through_the_compiled_check(mpi, blocking):
    comm = _traced(mpi, mpi.multi[0])
    try:
        n = 4 if ME else 6  # rank 0 disagrees on the count
        buf = np.zeros(n)

        def call():
            if blocking:
                comm.Bcast(buf, root=0)
            else:
                comm.Ibcast(buf, root=0).Wait()

        mpi.same_error(call)
    finally:
        comm.Free()


class _Runner:
    """A stand-in for a compiled check's runner whose run raises on its way."""

    def __init__(self, fails):
        self.fails, self.abandoned = fails, False

    def begin(self, mine, flags, tag):
        return False

    def proceed(self, block):
        raise self.fails

    def abandon(self):
        self.abandoned = True


class _Pool:
    def __init__(self):
        self.spare, self.abandoned = [], []


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("fails", [KeyboardInterrupt(), MPI.Exception(MPI.ERR_OTHER)])
def test_a_check_that_raises_is_kept_never_reused(fails):
    from wacoll.mpi.agreement import Check, Signature

    pool, runner = _Pool(), _Runner(fails)
    check = Check(
        MPI.COMM_SELF, None, Signature("bcast", 0, 1, "<f8"), runner=runner, pool=pool
    )
    assert check.polled and check.waiting == []
    with pytest.raises(type(fails)):
        check.advance(block=True)
    # its receives were cancelled, and it stays alive with its buffers: MPI may
    # still write them; its runner never serves another call
    assert runner.abandoned and pool.abandoned == [check] and pool.spare == []
    check.abandon()  # twice: nothing more
    assert pool.abandoned == [check]


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("clusters", ["one", "several"])
def test_checks_first_library_collectives_start_in_program_order(mpi, clusters):
    """With ``check="first"`` each library collective starts once its check passes,
    in program order (wacoll.mpi.task.StartOrder), however the requests complete."""
    topology = (
        wacoll.Topology.from_sizes([P])
        if clusters == "one"
        else mpi.topology(mpi.multi[0])
    )
    comm = wacoll.Comm(W, topology, check="first", family="native")
    try:
        for _ in range(3):
            bufs = [np.full(3, float(ME + k)) for k in range(4)]
            outs = [np.zeros(3) for _ in range(4)]
            requests = []
            for k in range(4):
                if k % 2:
                    requests.append(comm.Ibcast(bufs[k], root=k % P))
                else:
                    requests.append(comm.Iallreduce(bufs[k], outs[k], op=MPI.SUM))
            buf = np.full(2, float(ME))
            comm.Bcast(buf, root=P - 1)  # a blocking one after them
            for request in reversed(requests):
                request.Wait()
            mpi.assert_equal(buf, np.full(2, float(P - 1)))
            for k in range(4):
                if k % 2:
                    mpi.assert_equal(bufs[k], np.full(3, float(k % P + k)))
                else:
                    mpi.assert_equal(outs[k], np.full(3, float(sum(range(P)) + P * k)))
    finally:
        comm.Free()
