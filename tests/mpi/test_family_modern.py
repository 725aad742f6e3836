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

import numpy as np
import pytest
from mpi4py import MPI

from wacoll.errors import PlanError
from wacoll.plans.families.modern import ALGORITHMS
from wacoll.plans.families.modern_parts import fold_is_canonical

P = MPI.COMM_WORLD.Get_size()
ME = MPI.COMM_WORLD.Get_rank()
W = MPI.COMM_WORLD

#: Elements: a few (chunks of 0 and 1 element at 5+ ranks) and enough for segments.
COUNTS = (3, 70001)


def _run(mpi, comm, what, call, got, want, name, problems):
    mpi.family_run(comm, what, call, got, want, problems, "modern", name)


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("name", ALGORITHMS["bcast"])
def test_bcast(mpi, layout, name):
    comm = mpi.comm(layout)
    problems = []
    for n in COUNTS:
        for root in sorted({0, P - 1, P // 2}):
            want = mpi.ints(n, seed=root, rank=root)
            buf = want.copy() if ME == root else np.full(n, -1, np.int64)
            _run(mpi, comm, f"Bcast n={n} root={root} {layout}",
                 lambda: comm.Bcast(buf, root=root, family="modern", algorithm=name),
                 buf, want, name, problems)
    mpi.assert_all(not problems, "; ".join(problems[:3]))


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("name", ALGORITHMS["allgather"])
def test_allgather(mpi, layout, name):
    comm = mpi.comm(layout)
    problems = []
    for n in (1, 5):
        send = mpi.ints(n, seed=n)
        want = np.empty(n * P, np.int64)
        W.Allgather(send, want)
        got = np.full(n * P, -1, np.int64)
        _run(mpi, comm, f"Allgather n={n} {layout}",
             lambda: comm.Allgather(send, got, family="modern", algorithm=name),
             got, want, name, problems)
    mpi.assert_all(not problems, "; ".join(problems[:3]))


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("name", ALGORITHMS["alltoall"])
def test_alltoall(mpi, layout, name):
    comm = mpi.comm(layout)
    problems = []
    for n in (1, 3):
        send = mpi.ints(n * P, seed=n)
        want = np.empty(n * P, np.int64)
        W.Alltoall(send, want)
        got = np.full(n * P, -1, np.int64)
        _run(mpi, comm, f"Alltoall n={n} {layout}",
             lambda: comm.Alltoall(send, got, family="modern", algorithm=name),
             got, want, name, problems)
    mpi.assert_all(not problems, "; ".join(problems[:3]))


@pytest.mark.mpi(min_size=1)
def test_barrier(mpi, layout):
    comm = mpi.comm(layout)
    problems = []
    _run(mpi, comm, f"Barrier {layout}",
         lambda: comm.Barrier(family="modern", algorithm="dissemination"), None, None,
         "dissemination", problems)
    mpi.assert_all(not problems, "; ".join(problems[:3]))


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("name", ALGORITHMS["allreduce"])
def test_allreduce(mpi, layout, name):
    """Integer sums, max and a bitwise or at the commutative level: the library's
    bits, whatever the order."""
    comm = mpi.comm(layout, level="commutative")
    problems = []
    for n in COUNTS:
        for op in (MPI.SUM, MPI.MAX, MPI.BOR):
            send = mpi.ints(n, seed=7)
            want = np.empty(n, np.int64)
            W.Allreduce(send, want, op=op)
            got = np.full(n, -1, np.int64)
            _run(mpi, comm, f"Allreduce n={n} {op} {layout}",
                 lambda: comm.Allreduce(send, got, op=op, family="modern",
                                        algorithm=name), got, want, name, problems)
    mpi.assert_all(not problems, "; ".join(problems[:3]))


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("name", ALGORITHMS["reduce"])
def test_reduce(mpi, layout, name):
    comm = mpi.comm(layout, level="commutative")
    problems = []
    for n in COUNTS:
        for root in sorted({0, P - 1, P // 2}):
            send = mpi.ints(n, seed=root)
            want = np.empty(n, np.int64) if ME == root else None
            W.Reduce(send, want, op=MPI.SUM, root=root)
            got = np.full(n, -1, np.int64) if ME == root else None
            _run(mpi, comm, f"Reduce n={n} root={root} {layout}",
                 lambda: comm.Reduce(send, got, op=MPI.SUM, root=root, family="modern",
                                     algorithm=name), got, want, name, problems)
    mpi.assert_all(not problems, "; ".join(problems[:3]))


def _canonical(values):
    """The binomial reduce tree at rank 0, operands in rank order."""
    acc = [v.copy() for v in values]
    mask = 1
    while mask < len(acc):
        for v in range(0, len(acc), 2 * mask):
            if v + mask < len(acc):
                acc[v] = acc[v] + acc[v + mask]
        mask *= 2
    return acc[0]


@pytest.mark.mpi(min_size=1)
def test_strict_float_sums(mpi, layout):
    """Level strict on plain arithmetic: the canonical bits where the algorithm
    keeps them on this many ranks (MPICH's fold: P = 2**a (2**b - 1)); one
    PlanError on every rank where it does not (and for the ring, everywhere)."""
    comm = mpi.comm(layout, level="strict", arithmetic="plain")
    n = 11
    every = [mpi.random(n, seed=3, rank=r) for r in range(P)]
    want = _canonical(every)
    problems = []
    root = P - 1
    for method, name in (("Allreduce", "recursive_doubling"),
                         ("Allreduce", "rabenseifner"), ("Allreduce", "ring"),
                         ("Reduce", "rabenseifner"), ("Reduce", "binomial")):
        keeps = name == "binomial" or (name != "ring" and fold_is_canonical(P))
        kw = {"root": root} if method == "Reduce" else {}
        has_recv = method == "Allreduce" or ME == root
        got = np.full(n, np.nan) if has_recv else None
        call = lambda: getattr(comm, method)(every[ME], got, op=MPI.SUM,  # noqa: E731
                                             family="modern", algorithm=name, **kw)
        if keeps:
            _run(mpi, comm, f"{method} {name} strict {layout}", call, got,
                 want if has_recv else None, name, problems)
        else:
            mpi.same_error(call, PlanError, match="level")
    mpi.assert_all(not problems, "; ".join(problems[:3]))
