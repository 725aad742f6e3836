"""Composed plans under MPI (family "han"): the MPI library's collectives inside the
clusters, MagPIe's plan between coordinators; results equal the library's own on
every multi-cluster layout and root; refusals raise the same error everywhere; a
failed call leaves the communicator (and its cluster communicator) usable."""

from __future__ import annotations

import time

import numpy as np
import pytest
from mpi4py import MPI

import wacoll
from wacoll.errors import WacollError

P = MPI.COMM_WORLD.Get_size()
ME = MPI.COMM_WORLD.Get_rank()
W = MPI.COMM_WORLD

#: Elements: one, and more than a 256 KiB segment of float64 (the plan phase pipelines).
COUNTS = (1, 40000)


def _data(n, rank, dtype=np.float64):
    # integers: any order of combination gives the library's bits
    return ((np.arange(n) * 7 + rank * 13) % 29 - 11).astype(dtype)


@pytest.mark.mpi(min_size=2)
def test_results_equal_the_library_on_every_layout_and_root(mpi):
    problems = []
    for layout in mpi.multi:
        comm = mpi.comm(layout, level=None, family="han")
        for n in COUNTS:
            mine = _data(n, ME)
            want = np.empty(n)
            W.Allreduce(mine, want, op=MPI.SUM)
            got = np.full(n, np.nan)
            comm.Allreduce(mine, got, op=MPI.SUM)
            if got.tobytes() != want.tobytes():
                problems.append(f"{layout} Allreduce n={n}")
            inplace = mine.copy()
            comm.Allreduce(MPI.IN_PLACE, inplace, op=MPI.SUM)
            if inplace.tobytes() != want.tobytes():
                problems.append(f"{layout} Allreduce IN_PLACE n={n}")
            if comm.last_family != "han":
                problems.append(f"{layout} ran {comm.last_family}")
            for root in range(P):
                maxed = np.empty(n) if ME == root else None
                W.Reduce(mine, maxed, op=MPI.MAX, root=root)
                got = np.full(n, np.nan) if ME == root else None
                comm.Reduce(mine, got, op=MPI.MAX, root=root)
                if ME == root and got.tobytes() != maxed.tobytes():
                    problems.append(f"{layout} Reduce MAX root={root} n={n}")
                buf = _data(n, root) if ME == root else np.zeros(n)
                comm.Bcast(buf, root=root)
                if buf.tobytes() != _data(n, root).tobytes():
                    problems.append(f"{layout} Bcast root={root} n={n}")
        comm.Barrier()
        ints = np.arange(5, dtype=np.int32) + ME
        got = np.empty(5, np.int32)
        comm.Allreduce(ints, got, op=MPI.PROD)
        want = np.empty(5, np.int32)
        W.Allreduce(ints, want, op=MPI.PROD)
        if got.tobytes() != want.tobytes():
            problems.append(f"{layout} int32 PROD")
    mpi.assert_all(not problems, "; ".join(problems[:3]))


@pytest.mark.mpi(min_size=2)
def test_barrier_waits_for_every_rank(mpi):
    """With the check off the Barrier is the composite's own: no rank leaves before
    the last one (which arrives 0.2 s late) has entered. (The ranks share this
    machine's monotonic clock; MPI.Wtime need not be global: Open MPI's is not.)"""
    for layout in mpi.multi:
        comm = mpi.comm(layout, family="han", check="off")
        late = P - 1
        W.Barrier()
        if ME == late:
            time.sleep(0.2)
        entered = time.monotonic() if ME == late else 0.0
        comm.Barrier()
        left = time.monotonic()
        entered = W.allreduce(entered, op=MPI.MAX)
        mpi.assert_all(left >= entered, f"{layout}: left {entered - left:.4f} s early")


@pytest.mark.mpi(min_size=2)
def test_refusals_raise_everywhere_and_the_communicator_goes_on(mpi):
    layout = mpi.multi[0]
    comm = mpi.comm(layout, level=None)
    x, y = np.ones(3), np.zeros(3)
    mpi.same_error(
        lambda: comm.Allreduce(x, y, family="han", level="strict"),
        WacollError,
        match="han",
    )
    mpi.same_error(
        lambda: comm.Gather(x, np.zeros(3 * P), family="han"),
        WacollError,
        match="has no gather plan",
    )
    # a bad call on one rank only (a root out of range), then the composite again
    mpi.same_error(
        lambda: comm.Bcast(y, root=P if ME == 0 else 0, family="han"), WacollError
    )
    comm.Allreduce(x, y, op=MPI.SUM, family="han")
    mpi.assert_equal(y, np.full(3, float(P)))


@pytest.mark.mpi(min_size=2)
def test_non_blocking_calls_refuse_a_forced_han_and_a_han_default_falls_back(mpi):
    layout = mpi.multi[0]
    # a failed non-blocking call leaves its communicator unusable: a fresh one
    forced = wacoll.Comm(W, mpi.topology(layout))
    mpi.same_error(
        lambda: forced.Iallreduce(np.ones(2), np.zeros(2), family="han").Wait(),
        WacollError,
    )
    forced.Free()
    comm = mpi.comm(layout, level=None, family="han")
    y = np.zeros(4)
    comm.Iallreduce(np.ones(4), y, op=MPI.SUM).Wait()
    mpi.assert_equal(y, np.full(4, float(P)))
    mpi.assert_all(comm.last_family == "magpie", comm.last_family)


@pytest.mark.mpi(min_size=2)
def test_an_operator_by_name(mpi):
    comm = mpi.comm(mpi.multi[0], level=None, family="han")
    got = np.zeros(3)
    comm.Allreduce(np.full(3, ME + 1.0), got, op="max")
    mpi.assert_equal(got, np.full(3, float(P)))


@pytest.mark.mpi(min_size=1)
def test_one_cluster_composes_the_library_alone(mpi):
    # no coordinators to join: the library's collective over every rank
    comm = mpi.comm("single", level=None, family="han")
    mine = _data(5, ME)
    want = np.empty(5)
    W.Allreduce(mine, want, op=MPI.SUM)
    got = np.full(5, np.nan)
    comm.Allreduce(mine, got, op=MPI.SUM)
    buf = _data(5, P - 1) if ME == P - 1 else np.zeros(5)
    comm.Bcast(buf, root=P - 1)
    comm.Barrier()
    mpi.assert_all(got.tobytes() == want.tobytes(), "Allreduce")
    mpi.assert_all(buf.tobytes() == _data(5, P - 1).tobytes(), "Bcast")
    mpi.assert_all(comm.last_family == "han", f"ran {comm.last_family}")
