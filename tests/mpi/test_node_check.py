"""The check of one node's blocking calls in shared memory (``NodeCheck``).

On one node a blocking call's cross-rank check is a MAX over every rank's flags in a
shared window, not a message. These tests check that a one-node communicator uses
it, that it computes what the library's MAX all-reduce computes, that it
synchronises like a barrier, and that a rank waiting in it still lets the MPI
library progress (a peer may wait in the library for this rank's data).
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from mpi4py import MPI

import wacoll
from wacoll.mpi._runner import RING_LINES, NodeRing
from wacoll.mpi.agreement import NodeCheck

P = MPI.COMM_WORLD.Get_size()
ME = MPI.COMM_WORLD.Get_rank()
W = MPI.COMM_WORLD


@pytest.mark.mpi(min_size=1)
def test_one_node_checks_in_shared_memory(mpi):
    comm = wacoll.Comm(W)
    mpi.assert_all(isinstance(comm.route.argcheck.blocking, NodeCheck))
    off = wacoll.Comm(W, check="off")
    mpi.assert_all(off.route.argcheck.blocking is None)
    off.Free()
    comm.Free()


@pytest.fixture
def node_check():
    dup = W.Dup()
    check = NodeCheck(dup)
    yield check
    check.free()
    dup.Free()


@pytest.mark.mpi(min_size=1)
def test_the_node_check_is_the_max_all_reduce(mpi, node_check):
    check = node_check
    rng = np.random.default_rng(7)
    for call in range(50):
        mine = (
            rng.integers(-(2**62), 2**62, size=4, dtype=np.int64)
            if call % 3
            else np.array([0, 0, 99, -99], np.int64)
        )  # every third call: all ranks agree
        want = np.zeros(4, np.int64)
        W.Allreduce(mine, want, op=MPI.MAX)
        passed = check.run(mine if call % 2 else mine.tobytes())
        mpi.assert_equal(check.flags, want, f"call {call}")
        mpi.assert_all(
            passed == (bool((want == mine).all()) and mine[0] == 0),
            f"call {call}: passed={passed}",
        )


@pytest.mark.mpi(min_size=2)
def test_the_node_check_waits_for_every_rank(mpi, node_check):
    mine = np.array([0, 0, 5, -5], np.int64)
    if ME == P - 1:
        time.sleep(0.2)
    arrived = np.array([time.monotonic()])  # one node: one monotonic clock
    node_check.run(mine)
    left = time.monotonic()
    latest = np.zeros(1)
    W.Allreduce(arrived, latest, op=MPI.MAX)
    assert left >= latest[0], "a rank left the check before the last one arrived"


@pytest.mark.mpi(min_size=3)
def test_a_peer_waiting_in_the_library_for_this_rank_is_progressed(mpi):
    # rank 0 starts a non-blocking barrier, then enters a checked Barrier; the others
    # first wait for the non-blocking barrier, whose later rounds need rank 0 to
    # forward what it received. Rank 0 waits in the check for them, they wait in the
    # library for rank 0: unless the check lets the library progress, none moves.
    comm = wacoll.Comm(W)
    request = W.Ibarrier()
    if ME == 0:
        comm.Barrier()
        request.Wait()
    else:
        request.Wait()
        comm.Barrier()
    comm.Free()


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("check", ["beside", "first"])
def test_non_blocking_calls_check_in_the_nodes_ring(mpi, check):
    """On one node a non-blocking call's check is published in the node's ring when
    it starts and read when it is waited for: no message, whichever route runs the
    call (compiled, or the Python route with ``check="first"``). More calls than the
    ring holds may be in flight at once, waited for in any order."""
    comm = wacoll.Comm(W, check=check)
    ring = comm.route.argcheck.node_ring
    mpi.assert_all(isinstance(ring, NodeRing))
    before = ring.seq
    calls = 2 * RING_LINES + 5
    outs = [np.zeros(3) for _ in range(calls)]
    requests = [
        comm.Iallreduce(np.full(3, float(k + ME)), outs[k], op=MPI.SUM)
        for k in range(calls)
    ]
    buf = np.arange(4.0) if ME == 0 else np.zeros(4)
    requests.append(comm.Ibcast(buf, root=0))
    requests[1::2] = requests[1::2][::-1]
    MPI.Request.Waitall(requests[: calls // 2])
    for request in requests[calls // 2 :]:
        request.Wait()
    mpi.assert_equal(buf, np.arange(4.0))
    for k in range(calls):
        mpi.assert_equal(
            outs[k], np.full(3, float(k * P + P * (P - 1) // 2)), f"call {k}"
        )
    mpi.assert_equal(ring.seq - before, calls + 1, "checks published in the ring")
    comm.Free()


@pytest.mark.mpi(min_size=2)
def test_a_wait_for_a_check_lets_the_library_progress(mpi):
    """Rank 0 waits for a non-blocking call's check while a peer, before it starts
    that call, waits in the library for rank 0's part of an earlier collective on
    another communicator (legal MPI: each communicator's collectives start in the
    same order on every rank). Unless the wait lets the library progress, neither
    moves."""
    comm = wacoll.Comm(W)
    big = np.ones(1 << 20)
    total = np.zeros(1 << 20)
    buf = np.arange(4.0) if ME == 0 else np.zeros(4)
    if ME == 0:
        request = comm.Ibcast(buf, root=0)
        other = W.Iallreduce(big, total, op=MPI.SUM)
        request.Wait()
        other.Wait()
    else:
        time.sleep(0.3)
        W.Iallreduce(big, total, op=MPI.SUM).Wait()
        comm.Ibcast(buf, root=0).Wait()
    mpi.assert_equal(buf, np.arange(4.0))
    mpi.assert_equal(total[:3], np.full(3, float(P)))
    comm.Free()


@pytest.mark.mpi(min_size=2)
def test_ranks_far_apart_in_their_non_blocking_starts(mpi):
    """A rank starts many more non-blocking calls than another before both meet in
    the library (within the ring's bound): neither waits at a start."""
    comm = wacoll.Comm(W)
    ahead = RING_LINES - 10
    first = ahead if ME == 0 else 10
    outs = [np.zeros(2) for _ in range(ahead)]
    requests = [
        comm.Iallreduce(np.full(2, 1.0), outs[k], op=MPI.SUM) for k in range(first)
    ]
    W.Barrier()
    requests += [
        comm.Iallreduce(np.full(2, 1.0), outs[k], op=MPI.SUM) for k in range(first, ahead)
    ]
    MPI.Request.Waitall(requests)
    comm.Barrier()  # collects the verdicts
    mpi.assert_equal(np.array(outs), np.full((ahead, 2), float(P)))
    comm.Free()
