"""Each rank's clock read as rank 0's (wacoll.mpi.clocks): the ranks of one system
share a monotonic clock, so their offset is 0; estimated (as for ranks on several
systems), it is zero within the exchange's own round trip there, and every rank
gets its own from one collective call."""

import pytest
from mpi4py import MPI

from wacoll.mpi import clocks
from wacoll.mpi.clocks import now, offset_to_root

from .conftest import RANK, WORLD

pytestmark = pytest.mark.mpi(min_size=1)


def _timed_offset(comm, **kwargs):
    """This rank's offset, and a bound on its error on one host: the longest the
    exchange took on any rank (an estimate is off by at most half a round trip)."""
    began = now()
    offset = offset_to_root(comm, **kwargs)
    return offset, comm.allreduce(now() - began, op=MPI.MAX)


def test_ranks_of_one_system_read_one_clock(mpi):
    """Every rank here runs on this one system: no estimate, the offset is 0."""
    comm = WORLD.Dup()
    try:
        offset = offset_to_root(comm)
        mpi.assert_all(offset == 0.0, f"offset {offset!r}")
    finally:
        comm.Free()


@pytest.fixture
def separate_systems(monkeypatch):
    """Each rank believes it runs on a system of its own: the offset is estimated."""
    monkeypatch.setattr(clocks, "machine_identity", lambda: f"system {RANK}")


def test_offsets_on_one_host_are_zero_within_a_round_trip(mpi, separate_systems):
    comm = WORLD.Dup()
    try:
        offset, bound = _timed_offset(comm)
        mpi.assert_all(abs(offset) <= bound, f"offset {offset!r} s, bound {bound!r} s")
        if RANK == 0:
            assert offset == 0.0
        # the exchange leaves nothing behind: a second one agrees with the first
        again, more = _timed_offset(comm, rounds=1)
        mpi.assert_all(abs(again - offset) <= bound + more, f"{offset!r} then {again!r}")
    finally:
        comm.Free()


def test_times_put_on_rank_0s_clock_order_events_across_ranks(mpi, separate_systems):
    comm = WORLD.Dup()
    try:
        offset, bound = _timed_offset(comm)
        mine = now() + offset
        comm.Barrier()  # every rank has read its clock before rank 0 reads its own
        later = comm.bcast(now() if RANK == 0 else None, root=0)
        mpi.assert_all(
            mine <= later + bound,
            f"read {mine!r}, after rank 0's later reading {later!r} (bound {bound!r} s)",
        )
    finally:
        comm.Free()


def test_the_exchange_tag_is_none_of_a_calls_tags():
    from wacoll.mpi.clocks import TAG
    from wacoll.mpi.executor import BLOCKING_TAG, TAG_BASE, TAG_SPAN

    assert TAG not in (BLOCKING_TAG, *range(TAG_BASE, TAG_BASE + TAG_SPAN))
