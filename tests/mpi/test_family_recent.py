"""The recent family (Swing, Bine trees, NCCL's double binary tree, PAT) against the
MPI library.

Every algorithm of every operation runs on every layout through ``wacoll.Comm``
with ``family="recent", algorithm=...``; each result is compared with the same
collective of ``MPI.COMM_WORLD`` (integer data at level ``"commutative"``, so any
order of combination gives the library's bits), and the plan that ran must be the
one asked for. Levels the algorithms do not keep raise the same PlanError on every
rank. Run at 3, 5, 6, 7 and 8 ranks, e.g.::

    mpiexec -n 6 python -m pytest --only-mpi -p no:cacheprovider -q \\
        tests/mpi/test_family_recent.py
"""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from wacoll.plans.families.recent import ALGORITHMS, keeps

P = MPI.COMM_WORLD.Get_size()
ME = MPI.COMM_WORLD.Get_rank()
W = MPI.COMM_WORLD


def _run(mpi, comm, what, call, got, want, name, problems):
    mpi.family_run(comm, what, call, got, want, problems, "recent", name)


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("name", ALGORITHMS["bcast"])
def test_bcast(mpi, layout, name):
    problems = []
    mpi.family_bcast(mpi.comm(layout), problems, layout, "recent", name, segments=3)
    mpi.assert_all(not problems, "; ".join(problems[:3]))


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("name", ALGORITHMS["allgather"])
def test_allgather(mpi, layout, name):
    problems = []
    mpi.family_allgather(mpi.comm(layout), problems, layout, "recent", name)
    mpi.assert_all(not problems, "; ".join(problems[:3]))


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("name", ALGORITHMS["allreduce"])
def test_allreduce(mpi, layout, name):
    problems = []
    mpi.family_allreduce(
        mpi.comm(layout, level="commutative"), problems, layout, "recent", name
    )
    mpi.assert_all(not problems, "; ".join(problems[:3]))


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("name", ALGORITHMS["reduce"])
def test_reduce(mpi, layout, name):
    problems = []
    mpi.family_reduce(
        mpi.comm(layout, level="commutative"), problems, layout, "recent", name
    )
    mpi.assert_all(not problems, "; ".join(problems[:3]))


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("name", ALGORITHMS["reduce_scatter_block"])
def test_reduce_scatter(mpi, layout, name):
    """Reduce_scatter_block and Reduce_scatter (uneven counts, some empty)."""
    comm = mpi.comm(layout, level="commutative")
    problems = []
    for n in (1, 4):
        send = mpi.ints(n * P, seed=n)
        want = np.empty(n, np.int64)
        W.Reduce_scatter_block(send, want, op=MPI.SUM)
        got = np.full(n, -1, np.int64)
        _run(
            mpi,
            comm,
            f"Reduce_scatter_block n={n} {layout}",
            lambda: comm.Reduce_scatter_block(
                send, got, op=MPI.SUM, family="recent", algorithm=name
            ),
            got,
            want,
            name,
            problems,
        )
    counts = [(r * 5) % 3 for r in range(P)]
    send = mpi.ints(sum(counts), seed=11)
    want = np.empty(counts[ME], np.int64)
    W.Reduce_scatter(send, want, counts, op=MPI.SUM)
    got = np.full(counts[ME], -1, np.int64)
    _run(
        mpi,
        comm,
        f"Reduce_scatter counts={counts} {layout}",
        lambda: comm.Reduce_scatter(
            send, got, counts, op=MPI.SUM, family="recent", algorithm=name
        ),
        got,
        want,
        name,
        problems,
    )
    mpi.assert_all(not problems, "; ".join(problems[:3]))


@pytest.mark.mpi(min_size=1)
def test_levels_not_kept_raise_everywhere(mpi, layout):
    """A strict or associative float sum (plain arithmetic: the order matters) with
    an algorithm that does not keep the level: one PlanError on every rank; where it
    keeps it (the double binary tree, 'associative' on an even number of ranks) the
    plan runs."""
    problems = []
    send = mpi.random(11, seed=3)
    for level in ("strict", "associative"):
        comm = mpi.comm(layout, level=level)
        for name in ALGORITHMS["allreduce"]:
            mpi.family_float_sum(
                comm,
                problems,
                f"Allreduce {name} {level} {layout}",
                "Allreduce",
                send,
                None,
                keeps("allreduce", name, P, level),
                "recent",
                name,
            )
    mpi.assert_all(not problems, "; ".join(problems[:3]))
