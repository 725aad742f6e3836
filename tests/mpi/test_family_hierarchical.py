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

import pytest
from mpi4py import MPI

from wacoll.plans.families.hierarchical import composes_canonically

P = MPI.COMM_WORLD.Get_size()

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
        "outer_algorithm": (
            ("allreduce", "recursive_doubling"),
            ("bcast", "binomial"),
            ("reduce", "binomial"),
            ("allgather", "recursive_doubling"),
        ),
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


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_bcast(mpi, layout, pair):
    problems = []
    mpi.family_bcast(
        mpi.comm(layout),
        problems,
        f"{layout} {pair}",
        "hierarchical",
        **_options("bcast", pair),
    )
    mpi.assert_all(not problems, "; ".join(problems[:3]))


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_allgather(mpi, layout, pair):
    problems = []
    mpi.family_allgather(
        mpi.comm(layout),
        problems,
        f"{layout} {pair}",
        "hierarchical",
        **_options("allgather", pair),
    )
    mpi.assert_all(not problems, "; ".join(problems[:3]))


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_barrier(mpi, layout, pair):
    problems = []
    mpi.family_barrier(
        mpi.comm(layout),
        problems,
        f"{layout} {pair}",
        "hierarchical",
        **_options("barrier", pair),
    )
    mpi.assert_all(not problems, "; ".join(problems[:3]))


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_allreduce(mpi, layout, pair):
    """Integer sums, max and a bitwise or at the commutative level: the library's
    bits, whatever the order."""
    problems = []
    mpi.family_allreduce(
        mpi.comm(layout, level="commutative"),
        problems,
        f"{layout} {pair}",
        "hierarchical",
        **_options("allreduce", pair),
    )
    mpi.assert_all(not problems, "; ".join(problems[:3]))


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_reduce(mpi, layout, pair):
    problems = []
    mpi.family_reduce(
        mpi.comm(layout, level="commutative"),
        problems,
        f"{layout} {pair}",
        "hierarchical",
        **_options("reduce", pair),
    )
    mpi.assert_all(not problems, "; ".join(problems[:3]))


@pytest.mark.mpi(min_size=1)
def test_strict_float_sums(mpi, layout):
    """Level strict on plain arithmetic, with parts that keep it at every size
    (MPICH 1.1's binomial trees): the canonical bits where the composition keeps
    them on this layout; one PlanError on every rank where it does not."""
    comm = mpi.comm(layout, level="strict", arithmetic="plain")
    topo = mpi.topology(layout)
    keeps = topo.nclusters == 1 or (topo.is_contiguous and composes_canonically(topo))
    every = [mpi.random(11, seed=3, rank=r) for r in range(P)]
    want = mpi.canonical_sum(every)
    problems = []
    for method in ("Allreduce", "Reduce"):
        mpi.family_float_sum(
            comm,
            problems,
            f"{method} strict {layout}",
            method,
            every[mpi.rank],
            want,
            keeps,
            "hierarchical",
            inner="mpich",
            outer="mpich",
        )
    mpi.assert_all(not problems, "; ".join(problems[:3]))
