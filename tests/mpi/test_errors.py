"""Bad input: the same WacollError on every rank, no hang, user buffers untouched.

Most faults here are on ONE rank only (the hard case: the other ranks' arguments are
fine, and without an agreement they would wait for a message that never comes). Every
test runs in both check modes (``check="beside"``, the default, and ``"first"``) and
checks that every rank raised the same exception class with the same message
(:meth:`Mpi.same_error`); in ``"first"`` mode also that the receive buffers still
hold their sentinel (beside, a failed call may have written them, as MPI allows);
the last test checks that the communicator still works afterwards.
"""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

import wacoll
from wacoll.errors import (
    BufferMismatchError,
    OperatorError,
    PlanError,
    TopologyError,
    WacollError,
)

P = MPI.COMM_WORLD.Get_size()
ME = MPI.COMM_WORLD.Get_rank()
W = MPI.COMM_WORLD
LAST = P - 1
SENTINEL = -7


#: The check mode of the test running now (set by the ``check_mode`` fixture).
MODE = {"check": "beside"}


@pytest.fixture(autouse=True, params=["beside", "first"])
def check_mode(request, mpi):
    MODE["check"] = request.param
    mpi.default_check = request.param
    yield request.param
    mpi.default_check = None


def if_first(untouched_fn):
    """``untouched_fn`` where the mode promises untouched buffers, else None."""
    return untouched_fn if MODE["check"] == "first" else None


def _comm(mpi):
    return mpi.comm(mpi.multi[0] if mpi.multi else "single")


def untouched(*bufs):
    return all(b is None or (np.asarray(b) == SENTINEL).all() for b in bufs)


def full(n, dtype=np.float64):
    return np.full(n, SENTINEL, dtype)


def check_error(mpi, fn, bufs, exc_type=WacollError, match=None):
    """``fn`` raises one ``exc_type`` everywhere and leaves ``bufs`` alone."""
    return mpi.same_error(
        fn, exc_type, match, untouched=if_first(lambda: untouched(*bufs))
    )


# ---------------------------------------------------------------------- one rank off
@pytest.mark.mpi(min_size=2)
def test_size_mismatch_on_one_rank(mpi):
    comm = _comm(mpi)
    n = 4 + (ME == LAST)
    recv = full(n)
    check_error(
        mpi,
        lambda: comm.Allreduce(np.ones(n), recv, op=MPI.SUM),
        [recv],
        match="disagree",
    )
    buf = full(n) if ME else np.ones(n)
    before = buf.copy()
    mpi.same_error(
        lambda: comm.Bcast(buf, root=0),
        match="disagree",
        untouched=if_first(lambda: buf.tobytes() == before.tobytes()),
    )


@pytest.mark.mpi(min_size=2)
def test_disagreeing_roots(mpi):
    comm = _comm(mpi)
    root = 1 if ME == LAST else 0
    buf = full(3)
    check_error(
        mpi, lambda: comm.Bcast(buf, root=root), [buf if ME else None], match="disagree"
    )
    recv = full(3 * P)
    check_error(
        mpi, lambda: comm.Gather(np.ones(3), recv, root=root), [recv], match="disagree"
    )
    red = full(3)
    check_error(mpi, lambda: comm.Reduce(np.ones(3), red, op=MPI.SUM, root=root), [red])


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("bad", ["size", "negative", "float", "one-rank"])
def test_invalid_root(mpi, bad):
    comm = _comm(mpi)
    root = {"size": P, "negative": -1, "float": 0.0, "one-rank": P if ME == LAST else 0}[
        bad
    ]
    buf = full(3)
    check_error(mpi, lambda: comm.Bcast(buf, root=root), [buf], match="root")
    recv = full(3)
    check_error(
        mpi, lambda: comm.Scatter(full(3 * P), recv, root=root), [recv], match="root"
    )


@pytest.mark.mpi(min_size=2)
def test_operator_disagrees(mpi):
    comm = _comm(mpi)
    recv = full(3)
    op = MPI.MAX if ME == LAST else MPI.SUM
    check_error(
        mpi, lambda: comm.Allreduce(np.ones(3), recv, op=op), [recv], match="disagree"
    )


@pytest.mark.mpi(min_size=1)
def test_unsupported_operator_on_one_rank(mpi):
    """MIN on complex on one rank (the others reduce floats)."""
    comm = _comm(mpi)
    dtype = np.complex128 if ME == LAST else np.float64
    recv = full(3, dtype)
    check_error(
        mpi,
        lambda: comm.Allreduce(np.ones(3, dtype), recv, op=MPI.MIN),
        [recv],
        BufferMismatchError,
        match="MIN",
    )
    recv = full(3, dtype)
    check_error(mpi, lambda: comm.Reduce(np.ones(3, dtype), recv, op=MPI.MAXLOC), [recv])


@pytest.mark.mpi(min_size=1)
def test_error_class_is_the_same_with_and_without_validation(mpi):
    """MAXLOC on floats is an OperatorError whether the ranks check together or
    each raises its own (the check carries the error's class and fields)."""
    for validate in (True, False):
        comm = mpi.comm(mpi.multi[0] if mpi.multi else "single", validate=validate)
        recv = full(3)
        check_error(
            mpi,
            lambda: comm.Allreduce(np.ones(3), recv, op=MPI.MAXLOC),
            [recv],
            OperatorError,
            match="MAXLOC",
        )


@pytest.mark.mpi(min_size=1)
def test_dtype_mismatch(mpi):
    comm = _comm(mpi)
    # sendbuf and recvbuf of different types, on one rank
    recv = full(3, np.int64 if ME == LAST else np.float64)
    check_error(
        mpi,
        lambda: comm.Allreduce(np.ones(3), recv, op=MPI.SUM),
        [recv],
        BufferMismatchError,
        match="float64",
    )
    recv = full(3 * P, np.int64 if ME == LAST else np.float64)
    check_error(
        mpi, lambda: comm.Allgather(np.ones(3), recv), [recv], BufferMismatchError
    )
    # a consistent rank whose type differs from the others'
    if P > 1:
        dtype = np.float32 if ME == LAST else np.float64
        recv = full(3, dtype)
        check_error(
            mpi,
            lambda: comm.Allreduce(np.ones(3, dtype), recv, op=MPI.SUM),
            [recv],
            match="disagree",
        )


@pytest.mark.mpi(min_size=1)
def test_read_only_recvbuf_on_one_rank(mpi):
    comm = _comm(mpi)
    recv = full(3)
    if ME == LAST:
        recv.setflags(write=False)
    check_error(
        mpi,
        lambda: comm.Allreduce(np.ones(3), recv, op=MPI.SUM),
        [recv],
        BufferMismatchError,
        match="read-only",
    )
    recv = full(3 * P)
    if ME == LAST:
        recv.setflags(write=False)
    check_error(
        mpi,
        lambda: comm.Allgather(np.ones(3), recv),
        [recv],
        BufferMismatchError,
        match="read-only",
    )
    # Bcast: a read-only buffer is fine at the root, not elsewhere
    buf = full(3)
    if ME == LAST:
        buf.setflags(write=False)
    root = 0
    if P > 1:
        check_error(
            mpi,
            lambda: comm.Bcast(buf, root=root),
            [buf if ME else None],
            BufferMismatchError,
            match="read-only",
        )
    ro = np.ones(3)
    ro.setflags(write=False)
    out = np.zeros(3)
    mpi.run(
        lambda: comm.Bcast(ro if ME == root else out, root=root),
        "Bcast from a read-only root buffer",
    )
    mpi.assert_all(ME == root or (out == 1).all(), "Bcast from read-only root")


@pytest.mark.mpi(min_size=1)
def test_bad_buffer_objects(mpi):
    comm = _comm(mpi)
    recv = full(6)
    bad = {
        "list": [1.0, 2.0, 3.0],
        "strided": np.ones(6)[::2],
        "count too large": [np.ones(3), 5, MPI.DOUBLE],
        "derived datatype": [np.ones(3), MPI.DOUBLE.Create_contiguous(1)],
    }
    for what, send in bad.items():
        sendbuf = send if ME == LAST else np.ones(3)
        out = recv[:3]
        check_error(
            mpi,
            lambda: comm.Allreduce(sendbuf, out, op=MPI.SUM),
            [out],
            BufferMismatchError,
        )
        if what == "derived datatype" and ME == LAST:
            send[1].Free()


@pytest.mark.mpi(min_size=2)
def test_scatter_sendbuf_too_small(mpi):
    comm = _comm(mpi)
    recv = full(2)
    send = np.ones(2 * P - 1) if ME == 0 else None
    check_error(
        mpi, lambda: comm.Scatter(send, recv, root=0), [recv], BufferMismatchError
    )


# ---------------------------------------------------------------------- v-variants
def _counts():
    return [r % 3 for r in range(P)]


@pytest.mark.mpi(min_size=2)
def test_gatherv_count_mismatch(mpi):
    comm = _comm(mpi)
    counts = _counts()
    mine = counts[ME] + (1 if ME == LAST else 0)
    recv = full(sum(counts))
    check_error(
        mpi,
        lambda: comm.Gatherv(np.ones(mine), [recv, counts] if ME == 0 else None, root=0),
        [recv],
        BufferMismatchError,
        match=f"rank {LAST}",
    )


@pytest.mark.mpi(min_size=2)
def test_scatterv_count_mismatch(mpi):
    comm = _comm(mpi)
    counts = _counts()
    recv = full(counts[ME] + (1 if ME == LAST else 0))
    check_error(
        mpi,
        lambda: comm.Scatterv(
            [np.ones(sum(counts)), counts] if ME == 0 else None, recv, root=0
        ),
        [recv],
        BufferMismatchError,
    )


@pytest.mark.mpi(min_size=2)
def test_allgatherv_counts_differ(mpi):
    comm = _comm(mpi)
    counts = _counts()
    if ME == LAST:
        counts = counts[::-1]
    recv = full(sum(counts))
    check_error(
        mpi,
        lambda: comm.Allgatherv(np.ones(counts[ME]), [recv, counts]),
        [recv],
        BufferMismatchError,
    )


@pytest.mark.mpi(min_size=2)
def test_alltoallv_count_mismatch(mpi):
    comm = _comm(mpi)
    scounts = [1] * P
    rcounts = [1] * P
    if ME == LAST:
        rcounts[0] = 2
    recv = full(sum(rcounts))
    check_error(
        mpi,
        lambda: comm.Alltoallv([np.ones(P), scounts], [recv, rcounts]),
        [recv],
        BufferMismatchError,
        match="expects",
    )


@pytest.mark.mpi(min_size=2)
def test_reduce_scatter_counts_differ(mpi):
    comm = _comm(mpi)
    counts = [1] * P
    if ME == LAST:
        counts = [2] + [1] * (P - 2) + [0]
    recv = full(counts[ME])
    check_error(
        mpi,
        lambda: comm.Reduce_scatter(np.ones(P), recv, counts, op=MPI.SUM),
        [recv],
        BufferMismatchError,
    )


# ---------------------------------------------------------------------- options
@pytest.mark.mpi(min_size=1)
def test_options_a_family_does_not_take(mpi):
    comm = _comm(mpi)
    buf = full(3)
    check_error(
        mpi,
        lambda: comm.Bcast(buf, family="mpich", tree="lam"),
        [buf],
        PlanError,
        match="tree",
    )
    recv = full(3)
    check_error(
        mpi,
        lambda: comm.Allreduce(np.ones(3), recv, op=MPI.SUM, family="tree", n=2),
        [recv],
        PlanError,
        match="'n'",
    )
    check_error(
        mpi,
        lambda: comm.Allreduce(
            np.ones(3), recv, op=MPI.SUM, family="gridmpi", algorithm="nonsense"
        ),
        [recv],
        PlanError,
        match="nonsense",
    )
    check_error(
        mpi,
        lambda: comm.Allreduce(np.ones(3), recv, op=MPI.SUM, family="no-such-family"),
        [recv],
        PlanError,
    )
    check_error(
        mpi,
        lambda: comm.Allreduce(np.ones(3), recv, op=MPI.SUM, level="loose"),
        [recv],
        WacollError,
        match="level",
    )
    scat = full(3)
    check_error(
        mpi,
        lambda: comm.Scatter(np.ones(3 * P), scat, family="combining"),
        [scat],
        PlanError,
        match="combining",
    )


@pytest.mark.mpi(min_size=2)
def test_option_on_one_rank(mpi):
    comm = _comm(mpi)
    recv = full(3)
    opts = {"intra": "binomial"} if ME == LAST else {}
    check_error(
        mpi,
        lambda: comm.Allreduce(np.ones(3), recv, op=MPI.SUM, family="magpie", **opts),
        [recv],
        match="disagree",
    )


@pytest.mark.mpi(min_size=2)
def test_barrier_arguments_are_agreed(mpi):
    """Barrier must agree on its arguments like every other collective.

    Here one rank passes an option the others do not (the default value, so that the
    plans are the same and an unchecked call cannot hang); Bcast with the same
    mismatch raises on every rank. Different families on different ranks
    (``Barrier(family="magpie")`` on rank 0, ``"mpich"`` elsewhere) deadlock at 5
    and 8 ranks when Barrier does not agree.
    """
    layout = mpi.multi[0] if mpi.multi else "single"
    comm = mpi.comm(layout)
    opts = {"intra": "binary"} if ME == LAST else {}
    buf = full(3)
    mpi.same_error(lambda: comm.Bcast(buf, family="magpie", **opts), match="disagree")
    mpi.same_error(lambda: comm.Barrier(family="magpie", **opts), match="disagree")


# ---------------------------------------------------------------------- Comm()
@pytest.mark.mpi(min_size=1)
def test_topology_of_the_wrong_size(mpi):
    mpi.same_error(
        lambda: wacoll.Comm(W, wacoll.Topology.single(P + 1)),
        TopologyError,
        match="ranks",
    )
    sizes = [P + 1] if ME == LAST else [P]
    mpi.same_error(
        lambda: wacoll.Comm(W, wacoll.Topology.single(sizes[0])), TopologyError
    )


@pytest.mark.mpi(min_size=2)
def test_topologies_that_differ_between_ranks(mpi):
    topo = (
        wacoll.Topology.from_sizes([1] * P) if ME == LAST else wacoll.Topology.single(P)
    )
    mpi.same_error(lambda: wacoll.Comm(W, topo))


@pytest.mark.mpi(min_size=1)
def test_bad_constructor_arguments(mpi):
    mpi.same_error(
        lambda: wacoll.Comm(W, mpi.topology("single"), level="loose"), match="level"
    )
    mpi.same_error(
        lambda: wacoll.Comm(W, mpi.topology("single"), family="nope"), PlanError
    )
    mpi.same_error(lambda: wacoll.Comm("not a communicator"))
    mpi.same_error(lambda: wacoll.Comm(MPI.COMM_NULL))
    mpi.same_error(lambda: wacoll.Comm(W, topology=[[0]]), TopologyError)
    mpi.same_error(
        lambda: wacoll.Comm(W, mpi.topology("single"), check="later"),
        match="check must be one of",
    )
    if P > 1:  # a check mode on one rank only would pair different collectives
        mode = "first" if ME == LAST else "beside"
        mpi.same_error(
            lambda: wacoll.Comm(W, mpi.topology("single"), check=mode), match="check"
        )


@pytest.mark.mpi(min_size=2)
def test_constructor_arguments_that_differ_between_ranks(mpi):
    """Comm() must agree on everything that chooses plans or messages, not only on
    the topology: a Comm built with ``family="magpie"`` on rank 0 and ``"mpich"``
    elsewhere hung in its first Allreduce instead of raising."""
    layout = mpi.multi[0] if mpi.multi else "single"
    variants = {
        "family": {"family": "magpie" if ME == 0 else "mpich"},
        "level": {"level": "associative" if ME == 0 else "strict"},
        "threshold": {"threshold": 1 if ME == 0 else 512},
        "segment_size": {"segment_size": 8 if ME == 0 else 0},
        "options": {"intra": "binomial"} if ME == 0 else {},
        # accumulators on some ranks and plain values on others hung in a strict sum
        "arithmetic": {"arithmetic": "plain" if ME == 0 else "reproducible"},
    }  # validate on some ranks only can hang: tests/test_mpi_suite.py probes it
    problems = []
    for what, kwargs in variants.items():
        made, exc = mpi.outcome(lambda: wacoll.Comm(W, mpi.topology(layout), **kwargs))
        if made is not None:
            made.Free()
        everyone = W.allgather(None if exc is None else str(exc))
        if not (isinstance(exc, WacollError) and len(set(everyone)) == 1):
            problems.append(f"{what}: {everyone[0]!r}")
    mpi.assert_all(not problems, "constructed without agreeing on " + ", ".join(problems))


@pytest.mark.mpi(min_size=2)
def test_inter_communicator_refused(mpi):
    half = P // 2
    color = int(ME >= half)
    local = W.Split(color, ME)
    inter = local.Create_intercomm(0, W, half if color == 0 else 0, tag=77)
    try:
        mpi.same_error(lambda: wacoll.Comm(inter), match="inter")
    finally:
        inter.Free()
        local.Free()


# ---------------------------------------------------------------------- afterwards
@pytest.mark.mpi(min_size=1)
def test_comm_still_works_after_errors(mpi):
    comm = _comm(mpi)
    recv = np.zeros(5)
    want = np.zeros(5)
    W.Allreduce(mpi.exact(5), want, op=MPI.SUM)
    mpi.run(lambda: comm.Allreduce(mpi.exact(5), recv, op=MPI.SUM), "Allreduce")
    mpi.assert_equal(recv, want)
    got = np.zeros(3 * P, np.int64)
    mpi.run(lambda: comm.Allgather(mpi.ints(3), got), "Allgather")
    ref = np.zeros(3 * P, np.int64)
    W.Allgather(mpi.ints(3), ref)
    mpi.assert_equal(got, ref)


@pytest.mark.mpi(min_size=2)
def test_infinite_count_at_the_root_raises_everywhere(mpi):
    """An infinite Gatherv count on the root raises on every rank (it used to escape
    as OverflowError on the root alone and leave the others waiting)."""
    comm = _comm(mpi)
    recv = full(2 * P)
    counts = [2] * P
    counts[0] = float("inf")
    spec = [recv, (counts, None), MPI.DOUBLE] if ME == 0 else None
    check_error(
        mpi,
        lambda: comm.Gatherv(np.ones(2), spec, root=0),
        [recv],
        BufferMismatchError,
        match="must be an integer",
    )


@pytest.mark.mpi(min_size=2)
def test_overlapping_receive_blocks_are_refused(mpi):
    """Receive blocks that write one location twice (MPI: erroneous; the result would
    depend on arrival order) raise on every rank and leave the buffers untouched."""
    comm = _comm(mpi)
    recv = full(2 * P)
    displs = [2 * r for r in range(P)]
    displs[LAST] = displs[LAST - 1] + 1  # overlaps the previous block by one element
    spec = [recv, ([2] * P, displs), MPI.DOUBLE] if ME == 0 else None
    check_error(
        mpi,
        lambda: comm.Gatherv(np.ones(2), spec, root=0),
        [recv],
        BufferMismatchError,
        match="overlap",
    )
    recv = full(2 * P)
    check_error(
        mpi,
        lambda: comm.Alltoallv(np.ones(2 * P), [recv, ([2] * P, displs)]),
        [recv],
        BufferMismatchError,
        match="overlap",
    )
    recv = full(2 * P)
    check_error(
        mpi,
        lambda: comm.Allgatherv(np.ones(2), [recv, ([2] * P, displs)]),
        [recv],
        BufferMismatchError,
        match="overlap",
    )


@pytest.mark.mpi(min_size=1)
def test_operator_by_name_on_the_default_path(mpi):
    """An operator given by name ("sum") reaches the MPI library as its MPI.Op (it
    used to raise TypeError on one rank inside the native call, leaving the others
    waiting there)."""
    comm = mpi.comm("single", level=None)
    got = np.zeros(3)
    comm.Allreduce(np.arange(3.0) + ME, got, "sum")
    want = np.zeros(3)
    W.Allreduce(np.arange(3.0) + ME, want, MPI.SUM)
    mpi.assert_equal(got, want)


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize(
    "bad",
    [
        {"level": "bogus"},
        {"topology": "0,0,1,1"},
        {"scripts": "/missing.scm"},
        {"family": "nosuch"},
    ],
)
def test_bad_constructor_argument_on_one_rank_with_discovery(mpi, bad):
    """One rank's bad argument while the others discover the topology (collective):
    the bad rank used to skip the discovery and leave the others waiting in it."""
    kwargs = bad if ME == LAST else {}
    made, exc = mpi.outcome(lambda: wacoll.Comm(W, **kwargs))
    if made is not None:
        made.Free()
    everyone = W.allgather(None if exc is None else (type(exc).__name__, str(exc)))
    mpi.assert_all(
        isinstance(exc, WacollError) and len(set(everyone)) == 1, f"{bad}: {everyone}"
    )
    mpi.assert_all(f"rank {LAST}" in str(exc), f"the error names rank {LAST}: {exc}")
