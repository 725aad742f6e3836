"""A loop over many counts: every call right, one plan per size class.

A call of a count whose size class has a plan already runs that plan with the
count's block sizes (:mod:`wacoll.plans.retarget`); these tests run loops that
cycle many counts (the class's first and last, odd ones, the next class), with the
default configuration (``level=None``, MPI's own promise: the selection's plans),
on every multi-cluster layout, compare each result with the MPI library's, and
check that a size class planned once: the calls of a class run the same
programs.
"""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

OPS = (
    "Bcast",
    "Reduce",
    "Allreduce",
    "Gather",
    "Scatter",
    "Allgather",
    "Alltoall",
    "Reduce_scatter_block",
    "Scan",
)
#: Counts cycled: classes of 8-byte elements (1024-2047: one class; 5-7 another;
#: 3 and 2 share one; 2048 starts the next).
COUNTS = (1024, 1500, 2047, 1031, 5, 7, 6, 3, 2, 2048, 3000, 1)


def _run(comm, op, n, rank, size):
    send = np.arange(n * size, dtype=np.float64) + 1000.0 * rank
    out = np.full(n * size, -1.0)
    if op == "Bcast":
        out[:n] = send[:n] if rank == 1 else -1.0
        comm.Bcast(out[:n], root=1)
        return out[:n]
    if op == "Reduce":
        comm.Reduce(send[:n], out[:n] if rank == 0 else None, op=MPI.SUM, root=0)
        return out[:n] if rank == 0 else None
    if op == "Allreduce":
        comm.Allreduce(send[:n], out[:n], op=MPI.SUM)
        return out[:n]
    if op == "Gather":
        comm.Gather(send[:n], out if rank == 0 else None, root=0)
        return out if rank == 0 else None
    if op == "Scatter":
        comm.Scatter(send if rank == 0 else None, out[:n], root=0)
        return out[:n]
    if op == "Allgather":
        comm.Allgather(send[:n], out)
        return out
    if op == "Alltoall":
        comm.Alltoall(send, out)
        return out
    if op == "Reduce_scatter_block":
        comm.Reduce_scatter_block(send, out[:n], op=MPI.SUM)
        return out[:n]
    comm.Scan(send[:n], out[:n], op=MPI.SUM)
    return out[:n]


def _program(comm):
    plan = comm.last_plan
    if plan is None:
        return None
    return getattr(plan, "program", None) or plan.programs[comm.Get_rank()]


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("op", OPS)
def test_loops_over_many_counts_match_the_library(mpi, op):
    rank, size = mpi.rank, mpi.size
    problems = []
    for layout in mpi.multi:
        comm = mpi.comm(layout, level=None)
        programs = {}  # (size class, family) -> the programs its calls ran
        for _ in range(2):
            for n in COUNTS:
                got = _run(comm, op, n, rank, size)
                want = _run(mpi.world, op, n, rank, size)
                if got is not None and not np.array_equal(got, want):
                    problems.append(f"{layout} {op} count {n}: {got[:4]} != {want[:4]}")
                if comm.last_route != "library":
                    key = ((n * 8).bit_length(), comm.last_family)
                    programs.setdefault(key, set()).add(repr(_program(comm)))
        for (size_class, family), ran in programs.items():
            if len(ran) > 1:
                problems.append(
                    f"{layout} {op}: the calls of size class {size_class} ran "
                    f"{len(ran)} different {family} programs"
                )
    mpi.assert_all(not problems, "; ".join(problems[:3]))
