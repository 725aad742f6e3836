"""Message sizes around MagPIe's 512-byte threshold and of several MiB; segmenting.

Bcast, Allreduce, Allgather and Reduce move 0, 1, 511, 512, 513 bytes and 4 MiB of
``uint8`` data (Allgather: 4 MiB in all) on a contiguous and a reordered layout (a
single cluster when the communicator is too small for those). Reductions run with
``MPI.SUM`` (exact on integers, so the commutative algorithms run) compared with
mpi4py and, up to 513 bytes, with a non-commutative user-defined operator ("the last
non-zero operand", which is associative) at the strict level, compared with numpy in
rank order: below the threshold MagPIe gathers and combines, above it it reduces
along a binomial tree.

``segment_size`` cuts broadcast and reduction vectors into pipelined segments: the
results must be the same bytes as with ``segment_size=0`` (never cut).
"""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from wacoll.plans.select import DEFAULT_POLICY

MAX_SEGMENTS = DEFAULT_POLICY.max_segments

P = MPI.COMM_WORLD.Get_size()
ME = MPI.COMM_WORLD.Get_rank()
W = MPI.COMM_WORLD
MIB4 = 4 * 1024 * 1024
SIZES = (0, 1, 511, 512, 513, MIB4)
IDS = ["0B", "1B", "511B", "512B", "513B", "4MiB"]


def layouts(mpi):
    """A contiguous and a reordered layout, when the size allows them."""
    names = [n for n in ("contiguous", "reordered") if n in mpi.layouts]
    return names or ["single"]


_PATTERNS = {}


def payload(nbytes, rank, seed=0):
    """Bytes of ``rank``: about one in five is zero (cheap to make at 4 MiB)."""
    if nbytes not in _PATTERNS:
        i = np.arange(nbytes, dtype=np.uint32)
        _PATTERNS[nbytes] = (
            ((i * 2654435761) >> 13).astype(np.uint8),
            (i % 5).astype(np.uint8),
        )
    base, mod5 = _PATTERNS[nbytes]
    out = base ^ np.uint8(((rank + 1) * (seed + 97)) & 0xFF)
    out[mod5 == (-3 * rank) % 5] = 0
    return out


def _last_nonzero(inbuf, inoutbuf, datatype):
    """inoutbuf = inbuf (op) inoutbuf: the right operand unless it is zero."""
    a = np.frombuffer(inbuf, dtype=np.uint8)
    b = np.frombuffer(inoutbuf, dtype=np.uint8)
    np.copyto(b, a, where=(b == 0))


def last_nonzero_reference(nbytes, seed):
    """The reduction of every rank's payload in rank order, computed here."""
    out = np.zeros(nbytes, np.uint8)
    for r in range(P):
        x = payload(nbytes, r, seed)
        np.copyto(out, x, where=(x != 0))
    return out


@pytest.fixture(scope="module")
def last_nonzero():
    op = MPI.Op.Create(_last_nonzero, commute=False)
    yield op
    op.Free()


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("nbytes", SIZES, ids=IDS)
def test_sizes(mpi, nbytes, last_nonzero):
    problems = []
    root = P - 1
    ref = last_nonzero_reference(nbytes, 7) if nbytes < MIB4 else None
    gather_bytes = nbytes if nbytes < MIB4 else nbytes // P
    for layout in layouts(mpi):
        # 4 MiB go in 1 MiB segments (the default 256 KiB would mean 16 pipeline
        # stages, slow on an oversubscribed machine; segmenting has its own test)
        comm = (
            mpi.comm(layout) if nbytes < MIB4 else mpi.comm(layout, segment_size=1 << 20)
        )
        cases = []
        # Bcast from the last rank
        buf = payload(nbytes, ME, 1) if ME == root else np.zeros(nbytes, np.uint8)
        want = buf.copy()
        W.Bcast(want, root=root)
        cases.append(("Bcast", lambda: comm.Bcast(buf, root=root), buf, want))
        # Allgather
        send = payload(gather_bytes, ME, 2)
        got_ag = np.zeros(gather_bytes * P, np.uint8)
        want_ag = np.empty_like(got_ag)
        W.Allgather(send, want_ag)
        cases.append(("Allgather", lambda: comm.Allgather(send, got_ag), got_ag, want_ag))
        # Allreduce and Reduce with SUM: compared with MPI
        mine = payload(nbytes, ME, 3)
        want_sum = np.empty_like(mine)
        W.Allreduce(mine, want_sum, op=MPI.SUM)
        got_sum = np.zeros_like(mine)
        cases.append(
            (
                "Allreduce SUM",
                lambda: comm.Allreduce(mine, got_sum, op=MPI.SUM),
                got_sum,
                want_sum,
            )
        )
        got_red = np.zeros_like(mine) if ME == root else None
        cases.append(
            (
                "Reduce SUM",
                lambda: comm.Reduce(mine, got_red, op=MPI.SUM, root=root),
                got_red,
                want_sum if ME == root else None,
            )
        )
        # non-commutative user operator at the strict level: compared with numpy
        if nbytes < MIB4:
            own = payload(nbytes, ME, 7)
            got_nc = np.zeros_like(own)
            cases.append(
                (
                    "Allreduce last-nonzero",
                    lambda: comm.Allreduce(own, got_nc, op=last_nonzero, level="strict"),
                    got_nc,
                    ref,
                )
            )
            got_nr = np.zeros_like(own) if ME == 0 else None
            cases.append(
                (
                    "Reduce last-nonzero",
                    lambda: comm.Reduce(
                        own, got_nr, op=last_nonzero, root=0, level="strict"
                    ),
                    got_nr,
                    ref if ME == 0 else None,
                )
            )
        for what, run, got, want in cases:
            _, exc = mpi.outcome(run)
            if exc is not None:
                problems.append(f"{what} on {layout} raised {exc!r}")
            elif want is not None and got.tobytes() != want.tobytes():
                bad = np.flatnonzero(got != want)
                problems.append(
                    f"{what} on {layout}: {bad.size} bytes differ, first at {bad[0]}"
                )
    mpi.assert_all(not problems, "; ".join(problems[:3]))


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize(
    ("segment_size", "nbytes"),
    [(64, 513), (1 << 16, 1 << 18)],
    ids=["64B-of-513B", "64KiB-of-256KiB"],
)
def test_segment_size_gives_the_same_results(mpi, segment_size, nbytes, last_nonzero):
    """Pipelined segments: same bytes as MPI (exact data) and as the unsegmented
    strict plans (floating point)."""
    layout = layouts(mpi)[-1]
    plain = mpi.comm(layout, segment_size=0)  # never cut
    seg = mpi.comm(layout, segment_size=segment_size)
    n = nbytes // 8
    root = P - 1
    x = mpi.random(n, 11)
    problems = []
    for method, kwargs in (
        ("Allreduce", {}),
        ("Reduce", {"root": root}),
        ("Scan", {}),
        ("Exscan", {}),
    ):
        outs = []
        for comm in (plain, seg):
            recv = np.zeros(n) if method != "Reduce" or ME == root else None
            _, exc = mpi.outcome(
                lambda: getattr(comm, method)(x, recv, op=MPI.SUM, **kwargs)
            )
            if exc is not None:
                problems.append(f"{method} segment_size={comm.segment_size}: {exc!r}")
            outs.append(recv)
        defined = recv is not None and not (method == "Exscan" and ME == 0)
        if defined and outs[0].tobytes() != outs[1].tobytes():
            problems.append(f"strict {method} differs with segment_size={segment_size}")
    buf = payload(nbytes, ME, 5) if ME == root else np.zeros(nbytes, np.uint8)
    want = payload(nbytes, root, 5)
    _, exc = mpi.outcome(lambda: seg.Bcast(buf, root=root))
    if exc is not None or buf.tobytes() != want.tobytes():
        problems.append(f"segmented Bcast: {exc!r}")
    own = payload(nbytes, ME, 7)
    got = np.zeros(nbytes, np.uint8)
    _, exc = mpi.outcome(lambda: seg.Allreduce(own, got, op=last_nonzero))
    if exc is not None or got.tobytes() != last_nonzero_reference(nbytes, 7).tobytes():
        problems.append(f"segmented non-commutative Allreduce: {exc!r}")
    # the last call: the non-commutative Allreduce (a halving plan rounds its blocks
    # up to a multiple of its owners; its parameters keep the policy's segments)
    segments = dict(seg.last_plan.params).get("segments", seg.last_plan.nblocks)
    if segments != min(-(-nbytes // segment_size), MAX_SEGMENTS):
        problems.append(
            f"segment_size={segment_size} cut {nbytes} bytes into {segments} segment(s)"
        )
    mpi.assert_all(not problems, "; ".join(problems[:3]))


@pytest.mark.mpi(min_size=1)
def test_one_cluster_default_is_the_mpi_library(mpi):
    """On one cluster, wacoll's default hands every call the MPI library can make
    (data movement, reductions at MPI's own level, exact ones at any level) to the
    library's own collective; a strict float reduction runs the mpich family."""
    comm = mpi.comm("single", level=None)
    problems = []
    for n in (8, 1 << 18):
        buf = payload(n, ME, 4) if ME == 0 else np.zeros(n, np.uint8)
        mpi.run(lambda: comm.Bcast(buf, root=0), f"Bcast of {n} bytes")
        if buf.tobytes() != payload(n, 0, 4).tobytes():
            problems.append(f"Bcast of {n} bytes: wrong data")
        if comm.last_family != "native" or comm.last_plan is not None:
            problems.append(f"Bcast of {n} bytes ran {comm.last_family}")
        got, want = np.zeros(n, np.uint8), np.zeros(n, np.uint8)
        W.Allreduce(payload(n, ME, 5), want, op=MPI.SUM)
        mpi.run(
            lambda: comm.Allreduce(payload(n, ME, 5), got, op=MPI.SUM),
            f"Allreduce of {n} bytes",
        )
        if got.tobytes() != want.tobytes() or comm.last_family != "native":
            problems.append(
                f"Allreduce of {n} bytes: {comm.last_family}, {(got == want).all()}"
            )
    strict = np.zeros(1000)
    mpi.run(
        lambda: comm.Allreduce(mpi.random(1000, 3), strict, op=MPI.SUM, level="strict"),
        "strict Allreduce",
    )
    if comm.last_family != "mpich":
        problems.append(f"strict Allreduce ran {comm.last_family}")
    mpi.assert_all(not problems, "; ".join(problems[:3]))


@pytest.mark.mpi(min_size=1)
def test_zero_elements_everywhere(mpi):
    """Every collective with empty buffers (and all-zero v-counts) runs and agrees
    with MPI, with both default families (magpie on clusters, mpich on one)."""
    e = np.empty(0)
    zeros = [0] * P

    def calls(c):
        c.Bcast(np.empty(0), root=P - 1)
        c.Scatter(e, np.empty(0), root=0)
        c.Scatterv([e, zeros], np.empty(0), root=0)
        c.Gather(e, np.empty(0), root=P - 1)
        c.Gatherv(e, [np.empty(0), zeros], root=0)
        c.Allgather(e, np.empty(0))
        c.Allgatherv(e, [np.empty(0), zeros])
        c.Alltoall(e, np.empty(0))
        c.Alltoallv([e, zeros], [np.empty(0), zeros])
        c.Reduce(e, np.empty(0), op=MPI.SUM, root=0)
        c.Allreduce(e, np.empty(0), op=MPI.SUM)
        c.Reduce_scatter_block(e, np.empty(0), op=MPI.SUM)
        c.Reduce_scatter(e, np.empty(0), zeros, op=MPI.SUM)
        c.Scan(e, np.empty(0), op=MPI.SUM)
        c.Exscan(e, np.empty(0), op=MPI.SUM)

    calls(W)
    problems = []
    for layout in mpi.multi[:1] + ["single"]:
        _, exc = mpi.outcome(lambda: calls(mpi.comm(layout)))
        if exc is not None:
            problems.append(f"{layout}: {exc!r}")
    mpi.assert_all(not problems, "; ".join(problems[:3]))
