"""The hierarchical family (flat plans inside clusters and between coordinators)
against the MPI library.

Every operation runs on every layout through ``wacoll.Comm`` with
``family="hierarchical"`` and a few inner/outer pairs; each result is compared
with the same collective of ``MPI.COMM_WORLD`` (integer data, so any order of
combination gives the library's bits), and the plan that ran must be a
hierarchical one. Strict float sums are compared with the canonical expression
where the composition keeps level ``"strict"`` on the layout, and must raise the
same PlanError everywhere where it does not. Run at 3, 5, 6, 7 and 8 ranks, e.g.::

    mpiexec -n 6 python -m pytest --only-mpi -p no:cacheprovider -q \\
        tests/mpi/test_family_hierarchical.py
"""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from wacoll.errors import PlanError
from wacoll.plans.families.hierarchical import composes_canonically

P = MPI.COMM_WORLD.Get_size()
ME = MPI.COMM_WORLD.Get_rank()
W = MPI.COMM_WORLD

#: Elements: a few (segments of 0 and 1 element) and enough for segments.
COUNTS = (3, 70001)

#: Inner/outer pairs: MagPIe's trees inside and MPICH 4's choice between the
#: coordinators (the defaults), a k-nomial tree inside and recursive doubling (or a
#: binomial tree) between, and MPICH 1.1 inside with MagPIe's flat tree between.
PAIRS = {
    "default": {},
    "knomial+doubling": {
        "inner": "modern",
        "inner_algorithm": (("bcast", "knomial"), ("reduce", "binomial")),
        "inner_options": (("radix", 3),),
        "outer": "modern",
        "outer_algorithm": (("allreduce", "recursive_doubling"), ("bcast", "binomial"),
                            ("reduce", "binomial"), ("allgather", "recursive_doubling")),
    },
    "mpich+magpie": {"inner": "mpich", "outer": "magpie"},
}


def _options(op, pair):
    """The pair's options for ``op`` (a per-operation algorithm names its phases)."""
    from wacoll.plans.families.hierarchical import PHASES

    out = dict(PAIRS[pair])
    for key in ("inner_algorithm", "outer_algorithm"):
        if isinstance(out.get(key), tuple):
            ops = {o for o, level in PHASES[op] if level == key[:5]}
            out[key] = tuple(p for p in out[key] if p[0] in ops)
            if not out[key]:
                del out[key]
    if op == "allgather" and out.get("inner") == "modern":
        out = {k: v for k, v in out.items() if not k.startswith("inner")}
        out["inner"] = "magpie"  # (the modern family has no gather)
    return out


def _run(mpi, comm, what, call, got, want, problems):
    mpi.family_run(comm, what, call, got, want, problems, "hierarchical")


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_bcast(mpi, layout, pair):
    comm = mpi.comm(layout)
    options = _options("bcast", pair)
    problems = []
    for n in COUNTS:
        for root in sorted({0, P - 1, P // 2}):
            want = mpi.ints(n, seed=root, rank=root)
            buf = want.copy() if ME == root else np.full(n, -1, np.int64)
            _run(mpi, comm, f"Bcast n={n} root={root} {layout} {pair}",
                 lambda: comm.Bcast(buf, root=root, family="hierarchical", **options),
                 buf, want, problems)
    mpi.assert_all(not problems, "; ".join(problems[:3]))


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_allgather(mpi, layout, pair):
    comm = mpi.comm(layout)
    options = _options("allgather", pair)
    problems = []
    for n in (1, 5):
        send = mpi.ints(n, seed=n)
        want = np.empty(n * P, np.int64)
        W.Allgather(send, want)
        got = np.full(n * P, -1, np.int64)
        _run(mpi, comm, f"Allgather n={n} {layout} {pair}",
             lambda: comm.Allgather(send, got, family="hierarchical", **options),
             got, want, problems)
    mpi.assert_all(not problems, "; ".join(problems[:3]))


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_barrier(mpi, layout, pair):
    comm = mpi.comm(layout)
    options = _options("barrier", pair)
    problems = []
    _run(mpi, comm, f"Barrier {layout} {pair}",
         lambda: comm.Barrier(family="hierarchical", **options), None, None, problems)
    mpi.assert_all(not problems, "; ".join(problems[:3]))


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_allreduce(mpi, layout, pair):
    """Integer sums, max and a bitwise or at the commutative level: the library's
    bits, whatever the order."""
    comm = mpi.comm(layout, level="commutative")
    options = _options("allreduce", pair)
    problems = []
    for n in COUNTS:
        for op in (MPI.SUM, MPI.MAX, MPI.BOR):
            send = mpi.ints(n, seed=7)
            want = np.empty(n, np.int64)
            W.Allreduce(send, want, op=op)
            got = np.full(n, -1, np.int64)
            _run(mpi, comm, f"Allreduce n={n} {op} {layout} {pair}",
                 lambda: comm.Allreduce(send, got, op=op, family="hierarchical",
                                        **options), got, want, problems)
    mpi.assert_all(not problems, "; ".join(problems[:3]))


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_reduce(mpi, layout, pair):
    comm = mpi.comm(layout, level="commutative")
    options = _options("reduce", pair)
    problems = []
    for n in COUNTS:
        for root in sorted({0, P - 1, P // 2}):
            send = mpi.ints(n, seed=root)
            want = np.empty(n, np.int64) if ME == root else None
            W.Reduce(send, want, op=MPI.SUM, root=root)
            got = np.full(n, -1, np.int64) if ME == root else None
            _run(mpi, comm, f"Reduce n={n} root={root} {layout} {pair}",
                 lambda: comm.Reduce(send, got, op=MPI.SUM, root=root,
                                     family="hierarchical", **options),
                 got, want, problems)
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
    """Level strict on plain arithmetic, with parts that keep it at every size
    (MPICH 1.1's binomial trees): the canonical bits where the composition keeps
    them on this layout; one PlanError on every rank where it does not."""
    comm = mpi.comm(layout, level="strict", arithmetic="plain")
    topo = mpi.topology(layout)
    keeps = topo.nclusters == 1 or (topo.is_contiguous and composes_canonically(topo))
    n = 11
    every = [mpi.random(n, seed=3, rank=r) for r in range(P)]
    want = _canonical(every)
    problems = []
    root = P - 1
    options = {"inner": "mpich", "outer": "mpich"}
    for method in ("Allreduce", "Reduce"):
        kw = {"root": root} if method == "Reduce" else {}
        has_recv = method == "Allreduce" or ME == root
        got = np.full(n, np.nan) if has_recv else None
        call = lambda: getattr(comm, method)(every[ME], got, op=MPI.SUM,  # noqa: E731
                                             family="hierarchical", **options, **kw)
        if keeps:
            _run(mpi, comm, f"{method} strict {layout}", call, got,
                 want if has_recv else None, problems)
        else:
            mpi.same_error(call, PlanError, match="level")
    mpi.assert_all(not problems, "; ".join(problems[:3]))
