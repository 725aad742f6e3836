"""The modern family (MPICH 4's and Open MPI 5's algorithms) against the MPI library.

Every algorithm of every operation runs on every layout through ``wacoll.Comm``
with ``family="modern", algorithm=...``; each result is compared with the same
collective of ``MPI.COMM_WORLD`` (integer data, so any order of combination gives
the library's bits), and the plan that ran must be the one asked for. Strict float
sums are compared with the canonical expression where the algorithm keeps level
``"strict"`` on this many ranks, and must raise the same PlanError everywhere where
it does not. Run at 3, 5, 6, 7 and 8 ranks, e.g.::

    mpiexec -n 6 python -m pytest --only-mpi -p no:cacheprovider -q \\
        tests/mpi/test_family_modern.py
"""

from __future__ import annotations

import pytest
from mpi4py import MPI

from wacoll.plans.families.modern import ALGORITHMS
from wacoll.plans.families.modern_parts import fold_is_canonical

P = MPI.COMM_WORLD.Get_size()


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("name", ALGORITHMS["bcast"])
def test_bcast(mpi, layout, name):
    problems = []
    mpi.family_bcast(mpi.comm(layout), problems, layout, "modern", name)
    mpi.assert_all(not problems, "; ".join(problems[:3]))


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("name", ALGORITHMS["allgather"])
def test_allgather(mpi, layout, name):
    problems = []
    mpi.family_allgather(mpi.comm(layout), problems, layout, "modern", name)
    mpi.assert_all(not problems, "; ".join(problems[:3]))


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("name", ALGORITHMS["alltoall"])
def test_alltoall(mpi, layout, name):
    problems = []
    mpi.family_alltoall(mpi.comm(layout), problems, layout, "modern", name)
    mpi.assert_all(not problems, "; ".join(problems[:3]))


@pytest.mark.mpi(min_size=1)
def test_barrier(mpi, layout):
    problems = []
    mpi.family_barrier(mpi.comm(layout), problems, layout, "modern", "dissemination")
    mpi.assert_all(not problems, "; ".join(problems[:3]))


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("name", ALGORITHMS["allreduce"])
def test_allreduce(mpi, layout, name):
    """Integer sums, max and a bitwise or at the commutative level: the library's
    bits, whatever the order."""
    problems = []
    mpi.family_allreduce(
        mpi.comm(layout, level="commutative"), problems, layout, "modern", name
    )
    mpi.assert_all(not problems, "; ".join(problems[:3]))


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("name", ALGORITHMS["reduce"])
def test_reduce(mpi, layout, name):
    problems = []
    mpi.family_reduce(
        mpi.comm(layout, level="commutative"), problems, layout, "modern", name
    )
    mpi.assert_all(not problems, "; ".join(problems[:3]))


@pytest.mark.mpi(min_size=1)
def test_strict_float_sums(mpi, layout):
    """Level strict on plain arithmetic: the canonical bits where the algorithm
    keeps them on this many ranks (MPICH's fold: P = 2**a (2**b - 1)); one
    PlanError on every rank where it does not (and for the ring, everywhere)."""
    comm = mpi.comm(layout, level="strict", arithmetic="plain")
    every = [mpi.random(11, seed=3, rank=r) for r in range(P)]
    want = mpi.canonical_sum(every)
    problems = []
    for method, name in (
        ("Allreduce", "recursive_doubling"),
        ("Allreduce", "rabenseifner"),
        ("Allreduce", "ring"),
        ("Reduce", "rabenseifner"),
        ("Reduce", "binomial"),
    ):
        keeps = name == "binomial" or (name != "ring" and fold_is_canonical(P))
        mpi.family_float_sum(
            comm,
            problems,
            f"{method} {name} strict {layout}",
            method,
            every[mpi.rank],
            want,
            keeps,
            "modern",
            name,
        )
    mpi.assert_all(not problems, "; ".join(problems[:3]))
