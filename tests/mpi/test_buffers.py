"""Buffer arguments as mpi4py takes them: MPI.IN_PLACE, buffer specifications,
bytearrays. Each call is compared with the same mpi4py call on COMM_WORLD.

``MPI.IN_PLACE`` is tried everywhere MPI allows it: the root's recvbuf of Scatter(v),
the root's sendbuf of Gather(v) and Reduce, and every rank's sendbuf of Allgather(v),
Alltoall(v), Allreduce, Reduce_scatter(_block), Scan and Exscan.
"""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

P = MPI.COMM_WORLD.Get_size()
ME = MPI.COMM_WORLD.Get_rank()
W = MPI.COMM_WORLD
IP = MPI.IN_PLACE
N = 3


def _layouts(mpi):
    """A multi-cluster layout (magpie plans) and one cluster (mpich plans)."""
    return ([mpi.multi[0]] if mpi.multi else []) + ["single"]


def vcounts():
    return [(r + 1) % 3 for r in range(P)]


def vdispls(counts):
    """Reverse rank order with one-element gaps; (displs, size)."""
    displs, at = [0] * P, 1
    for r in reversed(range(P)):
        displs[r] = at
        at += counts[r] + 1
    return displs, at


# Each in-place case: fn(comm_like, root) -> this rank's result (or None). It runs on
# the wacoll Comm and on COMM_WORLD, so the two results can be compared.
def ip_scatter(c, root):
    send = np.arange(N * P, dtype=np.float64) + 100 * root if ME == root else None
    if ME == root:
        c.Scatter(send, IP, root=root)
        return send
    recv = np.full(N, -1.0)
    c.Scatter(None, recv, root=root)
    return recv


def ip_scatterv(c, root):
    counts = vcounts()
    displs, total = vdispls(counts)
    if ME == root:
        send = np.arange(total, dtype=np.float64)
        c.Scatterv([send, counts, displs, MPI.DOUBLE], IP, root=root)
        return send
    recv = np.full(counts[ME], -1.0)
    c.Scatterv(None, recv, root=root)
    return recv


def ip_gather(c, root):
    if ME == root:
        recv = np.full(N * P, -1.0)
        recv[ME * N : (ME + 1) * N] = ME + 0.5
        c.Gather(IP, recv, root=root)
        return recv
    c.Gather(np.full(N, ME + 0.5), None, root=root)
    return None


def ip_gatherv(c, root):
    counts = vcounts()
    displs, total = vdispls(counts)
    if ME == root:
        recv = np.full(total, -1.0)
        recv[displs[ME] : displs[ME] + counts[ME]] = ME + 0.25
        c.Gatherv(IP, [recv, counts, displs, MPI.DOUBLE], root=root)
        return recv
    c.Gatherv(np.full(counts[ME], ME + 0.25), None, root=root)
    return None


def ip_allgather(c, root):
    recv = np.full(N * P, -1.0)
    recv[ME * N : (ME + 1) * N] = ME + 0.5
    c.Allgather(IP, recv)
    return recv


def ip_allgatherv(c, root):
    counts = vcounts()
    displs, total = vdispls(counts)
    recv = np.full(total, -1.0)
    recv[displs[ME] : displs[ME] + counts[ME]] = ME + 0.75
    c.Allgatherv(IP, [recv, counts, displs, MPI.DOUBLE])
    return recv


def ip_alltoall(c, root):
    buf = np.arange(N * P, dtype=np.float64) + 1000 * ME
    c.Alltoall(IP, buf)
    return buf


def ip_alltoallv(c, root):
    counts = [(ME + j) % 3 for j in range(P)]  # symmetric, as IN_PLACE requires
    displs, total = vdispls(counts)
    buf = np.full(total, -1.0)
    for j in range(P):
        buf[displs[j] : displs[j] + counts[j]] = 1000 * ME + j
    c.Alltoallv(IP, [buf, counts, displs, MPI.DOUBLE])
    return buf


def ip_reduce(c, root):
    mine = np.arange(N, dtype=np.float64) * (ME + 1)
    if ME == root:
        c.Reduce(IP, mine, op=MPI.SUM, root=root)
        return mine
    c.Reduce(mine, None, op=MPI.SUM, root=root)
    return None


def ip_allreduce(c, root):
    buf = np.arange(N, dtype=np.float64) * (ME + 1)
    c.Allreduce(IP, buf, op=MPI.SUM)
    return buf


def ip_reduce_scatter_block(c, root):
    buf = np.arange(N * P, dtype=np.float64) * (ME + 1)
    c.Reduce_scatter_block(IP, buf, op=MPI.SUM)
    return buf[:N]  # MPI defines the first block only


def ip_reduce_scatter(c, root):
    counts = vcounts()
    buf = np.arange(sum(counts), dtype=np.float64) * (ME + 2)
    c.Reduce_scatter(IP, buf, counts, op=MPI.SUM)
    return buf[: counts[ME]]


def ip_scan(c, root):
    buf = np.arange(N, dtype=np.float64) + ME
    c.Scan(IP, buf, op=MPI.SUM)
    return buf


def ip_exscan(c, root):
    buf = np.arange(N, dtype=np.float64) + ME
    c.Exscan(IP, buf, op=MPI.SUM)
    return buf if ME else None  # undefined on rank 0


IN_PLACE_CASES = [f for name, f in sorted(globals().items()) if name.startswith("ip_")]
ROOTED = {ip_scatter, ip_scatterv, ip_gather, ip_gatherv, ip_reduce}


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("case", IN_PLACE_CASES, ids=lambda f: f.__name__[3:])
def test_in_place(mpi, case):
    problems = []
    for root in sorted({0, P - 1}) if case in ROOTED else [0]:
        want = case(W, root)
        for layout in _layouts(mpi):
            got, exc = mpi.outcome(lambda: case(mpi.comm(layout), root))
            if exc is not None:
                problems.append(f"{layout} root {root}: {exc!r}")
            elif want is not None and got.tobytes() != want.tobytes():
                problems.append(f"{layout} root {root}: got {got}, want {want}")
    mpi.assert_all(not problems, "; ".join(problems[:3]))


# ---------------------------------------------------------------------- specs
def spec_cases():
    """(name, fn(comm_like) -> result) pairs for buffer specifications."""

    def typed(c):  # [arr, MPI.DOUBLE]
        out = np.zeros(4)
        c.Allreduce([np.arange(4.0) + ME, MPI.DOUBLE], [out, MPI.DOUBLE], op=MPI.SUM)
        return out

    def counted(c):  # [arr, count, MPI.INT]: the rest of the array is not touched
        buf = np.full(6, -1, np.intc)
        if ME == 0:
            buf[:] = np.arange(6)
        c.Bcast([buf, 4, MPI.INT], root=0)
        return buf

    def displaced(c):  # [arr, (count, displ), MPI.INT]
        buf = np.full(6, -1, np.intc)
        if ME == P - 1:
            buf[:] = np.arange(10, 16)
        c.Bcast([buf, (3, 2), MPI.INT], root=P - 1)
        return buf

    def reinterpreted(c):  # float64 storage read as MPI.INT
        send = (np.arange(4, dtype=np.intc) + ME).view(np.float64)
        out = np.zeros(2)
        c.Allreduce([send, MPI.INT], [out, MPI.INT], op=MPI.SUM)
        return out.view(np.intc).copy()

    def vector_pair(c):  # [arr, (counts, displs), MPI.INT]
        counts = vcounts()
        displs, total = vdispls(counts)
        out = np.full(total, -1, np.intc)
        c.Allgatherv(np.full(counts[ME], ME, np.intc), [out, (counts, displs), MPI.INT])
        return out

    def vector_counts_only(c):  # [arr, counts]
        counts = vcounts()
        out = np.full(sum(counts), -1, np.float64)
        c.Gatherv(
            np.full(counts[ME], ME + 0.5), [out, counts] if ME == 0 else None, root=0
        )
        return out if ME == 0 else None

    def two_d(c):  # C-contiguous 2-D arrays
        out = np.zeros((2, 3))
        c.Allreduce(np.arange(6.0).reshape(2, 3) * ME, out, op=MPI.MAX)
        return out

    def bytes_bcast(c):
        buf = bytearray(b"wacoll-bytes" if ME == 0 else bytes(12))
        c.Bcast(buf, root=0)
        return np.frombuffer(bytes(buf), np.uint8)

    def bytes_allgather(c):
        out = bytearray(5 * P)
        c.Allgather(bytearray(bytes([ME + 1]) * 5), out)
        return np.frombuffer(bytes(out), np.uint8)

    def bytes_bxor(c):
        out = bytearray(7)
        c.Allreduce(bytearray(bytes(range(ME, ME + 7))), out, op=MPI.BXOR)
        return np.frombuffer(bytes(out), np.uint8)

    def bytes_as_int(c):  # [bytearray, MPI.INT]
        buf = bytearray(np.arange(3, dtype=np.intc).tobytes() if ME == 0 else bytes(12))
        c.Bcast([buf, MPI.INT], root=0)
        out = bytearray(12)
        c.Allreduce(
            [bytearray((np.arange(3, dtype=np.intc) + ME).tobytes()), MPI.INT],
            [out, MPI.INT],
            op=MPI.SUM,
        )
        return np.frombuffer(bytes(buf + out), np.intc)

    def ignored_off_root(c):  # buffers MPI ignores away from the root stay as they are
        root = P - 1
        junk = np.full(5, -3, np.int8)  # wrong size and type: must not be read
        red = np.full(4, -1.0)
        c.Reduce(np.arange(4.0) + ME, red, op=MPI.SUM, root=root)
        gat = np.full(2 * P, -1.0)
        c.Gather(np.full(2, ME + 0.5), gat, root=root)
        sca = np.full(2, -1.0)
        c.Scatter(np.arange(2.0 * P) if ME == root else junk, sca, root=root)
        gv = np.full(P, -1.0)
        c.Gatherv(np.full(1, ME + 0.25), [gv, [1] * P] if ME == root else junk, root=root)
        return np.concatenate([red, gat, sca, gv])

    return [
        typed,
        counted,
        displaced,
        reinterpreted,
        vector_pair,
        vector_counts_only,
        two_d,
        bytes_bcast,
        bytes_allgather,
        bytes_bxor,
        bytes_as_int,
        ignored_off_root,
    ]


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("case", spec_cases(), ids=lambda f: f.__name__)
def test_buffer_specifications(mpi, case):
    want = case(W)
    problems = []
    for layout in _layouts(mpi):
        got, exc = mpi.outcome(lambda: case(mpi.comm(layout)))
        if exc is not None:
            problems.append(f"{layout}: {exc!r}")
        elif want is not None and (
            got.dtype != want.dtype or got.tobytes() != want.tobytes()
        ):
            problems.append(f"{layout}: got {got!r}, want {want!r}")
    mpi.assert_all(not problems, "; ".join(problems[:3]))


@pytest.mark.mpi(min_size=1)
def test_numpy_integer_root(mpi):
    """mpi4py takes a NumPy integer as the root; so must wacoll (on every rank)."""
    root = np.int64(P - 1)
    comm = mpi.comm(mpi.multi[0] if mpi.multi else "single")
    problems = []
    buf = np.arange(3.0) + 10 if ME == P - 1 else np.zeros(3)
    _, exc = mpi.outcome(lambda: comm.Bcast(buf, root=root))
    if exc is not None or (buf != np.arange(3.0) + 10).any():
        problems.append(f"Bcast: {exc!r}")
    out = np.zeros(3) if ME == P - 1 else None
    _, exc = mpi.outcome(lambda: comm.Reduce(np.ones(3), out, op=MPI.SUM, root=root))
    if exc is not None or (ME == P - 1 and (out != P).any()):
        problems.append(f"Reduce: {exc!r}")
    mpi.assert_all(not problems, "; ".join(problems))
