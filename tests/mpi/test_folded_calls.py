"""Calls with nothing to move (count 0 on every rank) have no check of their own:
their signature digests fold into the communicator's next check, on one cluster
(its blocking check) as on several (the ring of checks). A repeated one costs a
key and a fold. A rank whose count is 0 where the others' is not still raises the
same error as they do: at its next check, or where the communicator's verdicts
are collected (``Free``, a new communicator, a non-blocking start, the end of the
process).
"""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

import wacoll
from wacoll.errors import WacollError
from wacoll.mpi.route import FoldedCall

P = MPI.COMM_WORLD.Get_size()
ME = MPI.COMM_WORLD.Get_rank()
LAST = P - 1


def _fresh(mpi, layout):
    """A new communicator with the defaults (a failed call may stop it)."""
    name = "single" if layout == "one cluster" else mpi.multi[0]
    return wacoll.Comm(MPI.COMM_WORLD, mpi.topology(name))


LAYOUTS = ["one cluster", "several clusters"]


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("where", LAYOUTS)
def test_zero_count_calls_fold_into_the_next_check(mpi, where):
    comm = _fresh(mpi, where)
    try:
        for _ in range(4):
            comm.Bcast(np.zeros(0), root=0)
            comm.Allreduce(np.zeros(0), np.zeros(0), op=MPI.SUM)
            out = np.zeros(2)
            comm.Allreduce(np.full(2, ME + 1.0), out, op=MPI.SUM)
            mpi.assert_equal(out, np.full(2, P * (P + 1) / 2))
        comm.Bcast(np.zeros(0), root=0)
        folded = type(comm._route.recorded.last) is FoldedCall
        mpi.assert_all(comm.last_route == "replayed" and folded, comm.last_route)
        comm.Barrier()  # checks the folded call with its own
    finally:
        comm.Free()


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("where", LAYOUTS)
@pytest.mark.parametrize("zero_on", ["the last rank", "every rank but the last"])
def test_a_count_of_zero_on_some_ranks_raises_everywhere(mpi, where, zero_on):
    comm = _fresh(mpi, where)
    try:
        for _ in range(3):  # recorded and replayed, as in a loop
            comm.Bcast(np.zeros(3), root=0)
            comm.Bcast(np.zeros(0), root=0)
        folded = type(comm._route.recorded.last) is FoldedCall
        mpi.assert_all(folded, "the 0-count call was not replayed as a fold")
        zero = (ME == LAST) == (zero_on == "the last rank")
        buf = np.full(0 if zero else 3, -7.0)
        message = mpi.same_error(
            lambda: comm.Bcast(buf, root=0), WacollError, match="disagree"
        )
        assert "disagree" in message
    finally:
        comm.Free()


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("where", LAYOUTS)
def test_folded_calls_are_checked_before_a_nonblocking_start(mpi, where):
    comm = _fresh(mpi, where)
    try:
        comm.Bcast(np.zeros(0), root=0)
        mpi.assert_all(comm.last_route == "folded", comm.last_route)
        checks = comm._route.argcheck.blocking or comm._route.argcheck.verdicts
        mpi.assert_all(checks.nfolded == 1, f"{checks.nfolded} folded calls")
        buf = np.full(3, float(ME))
        comm.Ibcast(buf, root=0).Wait()
        mpi.assert_equal(buf, np.zeros(3))
        blocking = comm._route.argcheck.blocking
        ring = comm._route.argcheck.verdicts
        pending = (blocking or ring).nfolded
        mpi.assert_all(pending == 0, f"{pending} folded calls unchecked")
    finally:
        comm.Free()


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("where", LAYOUTS)
def test_unchecked_zero_count_calls_do_nothing(mpi, where):
    name = "single" if where == "one cluster" else mpi.multi[0]
    comm = wacoll.Comm(MPI.COMM_WORLD, mpi.topology(name), check="off")
    try:
        for i in range(3):
            comm.Gather(np.zeros(0), np.zeros(0), root=0)
            mpi.assert_all(comm.last_route in ("folded", "replayed"), comm.last_route)
            out = np.zeros(1)
            comm.Allreduce(np.full(1, float(i)), out, op=MPI.SUM)
            mpi.assert_equal(out, np.full(1, float(i * P)))
        comm.Gather(np.zeros(0), np.zeros(0), root=0)
        folded = comm._route.recorded.last
        mpi.assert_all(type(folded) is FoldedCall and folded.checks is None)
    finally:
        comm.Free()


@pytest.mark.mpi(min_size=2)
def test_a_disagreement_over_a_folded_call_stops_one_cluster_everywhere(mpi):
    """The rank whose count was 0 returned from the call the others raised in: the
    ranks may be a call apart, so the communicator stops on every rank."""
    comm = _fresh(mpi, "one cluster")
    try:
        buf = np.zeros(0 if ME == LAST else 3)
        mpi.same_error(lambda: comm.Bcast(buf, root=0), WacollError, match="disagree")
        mpi.same_error(
            lambda: comm.Bcast(np.zeros(3), root=0),
            WacollError,
            match="runs no further collectives",
        )
    finally:
        comm.Free()


@pytest.mark.mpi(min_size=2)
def test_check_first_does_not_fold(mpi):
    """With ``check="first"`` every call waits for its own verdict, count 0 too."""
    comm = wacoll.Comm(MPI.COMM_WORLD, mpi.topology("single"), check="first")
    try:
        comm.Bcast(np.zeros(0), root=0)
        mpi.assert_all(comm.last_route != "folded", comm.last_route)
        buf = np.zeros(0 if ME == LAST else 3)
        mpi.same_error(lambda: comm.Bcast(buf, root=0), WacollError, match="disagree")
    finally:
        comm.Free()


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("where", LAYOUTS)
def test_create_group_leaves_folded_calls_pending(mpi, where):
    """``Create_group`` is collective over the group's members only: a fold pending
    there is not flushed (that would need every rank), and the program goes on."""
    comm = _fresh(mpi, where)
    try:
        comm.Bcast(np.zeros(0), root=0)
        group = comm.Get_group().Incl([0])
        if ME == 0:
            alone = comm.Create_group(group)
            alone.Free()
        group.Free()
        buf = np.full(3, float(ME))
        comm.Bcast(buf, root=0)
        mpi.assert_equal(buf, np.zeros(3))
    finally:
        comm.Free()
