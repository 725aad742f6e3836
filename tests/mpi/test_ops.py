"""Every collective, for every plan family that has it, on every layout.

Each case runs one ``wacoll.Comm`` method and the same mpi4py collective on
``COMM_WORLD`` with the same data, and the ranks agree that the results are the same
bytes. Data movement uses int64 data; reductions use integer-valued float64 data,
whose sums are exact in any order, so every reduction level must give MPI's result
exactly (the float dtype keeps the ``strict`` and ``associative`` plans in play:
integer sums would run at the commutative level). Receive buffers start filled with
-1, so a block written where it does not belong, or a gap of a v-variant written at
all, shows up as a difference. Rooted operations run from the first and the last
rank on every layout, and from every root on one multi-cluster layout.

A case whose plan has the same programs as a case already run (same method, root and
data) is skipped: it would send the same messages and combine the same values. The
mpich family, for one, builds the same plans on every layout.

Every call must run the plan that the requested family builds with the requested
options (``Comm.last_plan``), so a family or option that is silently ignored fails.
Families that cannot keep a level on some layout (``tree`` reduce away from rank 0,
``gridmpi`` allreduce at ``strict``, a forced MagPIe ``variant``) must then raise the
builder's ``PlanError`` on every rank with one message; otherwise ``magpie`` and
``mpich`` must always run.
"""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from wacoll.errors import PlanError
from wacoll.plans.families import builders

P = MPI.COMM_WORLD.Get_size()
ME = MPI.COMM_WORLD.Get_rank()
W = MPI.COMM_WORLD
N = 3  # elements per block
LEVELS = ("strict", "associative", "commutative")
REDUCTIONS = (
    "Reduce",
    "Allreduce",
    "Reduce_scatter",
    "Reduce_scatter_block",
    "Scan",
    "Exscan",
)
ROOTED = ("Bcast", "Scatter", "Scatterv", "Gather", "Gatherv", "Reduce")
ALL_OPS = (
    "Barrier",
    "Bcast",
    "Scatter",
    "Scatterv",
    "Gather",
    "Gatherv",
    "Allgather",
    "Allgatherv",
    "Alltoall",
    "Alltoallv",
) + REDUCTIONS

#: Each family's default algorithm -> the methods it has a plan for.
PRIMARY_FAMILIES = {
    "magpie": ALL_OPS,
    "mpich": ALL_OPS,
    "tree": ("Bcast", "Reduce", "Allreduce"),
    "gridmpi": ("Bcast", "Allreduce", "Allgather"),
    "combining": ("Alltoall", "Alltoallv"),
}
#: Other algorithms and options: (family, options) -> the methods they change.
VARIANT_FAMILIES = {
    ("magpie", (("intra", "binomial"),)): (
        "Bcast",
        "Gatherv",
        "Allgather",
        "Alltoall",
        "Reduce",
        "Allreduce",
        "Reduce_scatter",
        "Scan",
    ),
    ("magpie", (("variant", "associative"),)): REDUCTIONS,
    ("magpie", (("variant", "short"),)): REDUCTIONS,
    ("magpie", (("variant", "long"),)): REDUCTIONS,
    ("mpich", (("order", "rotated"),)): ("Alltoall", "Alltoallv"),
    ("tree", (("tree", "lam"),)): ("Bcast", "Reduce", "Allreduce"),
    ("tree", (("tree", "chain"),)): ("Bcast", "Reduce", "Allreduce"),
    ("tree", (("tree", "two-level"),)): ("Bcast", "Reduce", "Allreduce"),
    ("tree", (("arrival", True),)): ("Reduce", "Allreduce"),
    ("gridmpi", (("algorithm", "farfirst"),)): ("Bcast",),
    ("gridmpi", (("algorithm", "flat-vandegeijn"),)): ("Bcast",),
    ("gridmpi", (("n", 1),)): ("Bcast", "Allreduce"),
    ("gridmpi", (("algorithm", "two-tier"),)): ("Allreduce",),
    ("gridmpi", (("algorithm", "flat-rabenseifner"),)): ("Allreduce",),
    ("gridmpi", (("segments", 3),)): ("Bcast", "Allreduce"),
    ("gridmpi", (("segments", 3), ("n", 1))): ("Bcast", "Allreduce"),
}


def _param(op, fam, opts):
    return pytest.param(
        op, fam, dict(opts), id=f"{op}-{fam}" + "".join(f"-{k}={v}" for k, v in opts)
    )


PRIMARY = [_param(op, fam, ()) for fam, ops in PRIMARY_FAMILIES.items() for op in ops]
VARIANTS = [
    _param(op, fam, opts) for (fam, opts), ops in VARIANT_FAMILIES.items() for op in ops
]
#: The method -> the plan's operation name.
OP_NAMES = {name: name.lower() for name in ALL_OPS}


# ---------------------------------------------------------------------- v layouts
def vcounts(seed=0):
    """Uneven per-rank counts, with zeros when there are 2 ranks or more."""
    return [(3 * i + seed + 1) % 4 for i in range(P)]


def vdispls(counts):
    """Blocks in reverse rank order with one-element gaps; (displs, buffer size)."""
    displs, at = [0] * len(counts), 1
    for i in reversed(range(len(counts))):
        displs[i] = at
        at += counts[i] + 1
    return displs, at


def a2a_counts(i, j):
    """Elements rank ``i`` sends to rank ``j`` in Alltoallv (zeros included)."""
    return (i + 2 * j + 1) % 3


# ---------------------------------------------------------------------- cases
# Each case returns ``(got, want)`` on this rank (None, None when this rank has no
# defined result). ``call(method, *args, **kwargs)`` runs the wacoll method.
def case_barrier(mpi, call, root, level, ref):
    call("Barrier")
    return None, None


def case_bcast(mpi, call, root, level, ref):
    buf = mpi.ints(N * 2, 1) if ME == root else np.full(N * 2, -1, np.int64)
    want = buf.copy()
    ref(lambda: W.Bcast(want, root=root), want)
    call("Bcast", buf, root=root)
    return buf, want


def case_scatter(mpi, call, root, level, ref):
    send = mpi.ints(N * P, 2) if ME == root else None
    got, want = np.full(N, -1, np.int64), np.full(N, -1, np.int64)
    ref(lambda: W.Scatter(send, want, root=root), want)
    call("Scatter", send, got, root=root)
    return got, want


def case_scatterv(mpi, call, root, level, ref):
    counts = vcounts()
    displs, total = vdispls(counts)
    send = [mpi.ints(total, 3), counts, displs, MPI.INT64_T] if ME == root else None
    got = np.full(counts[ME], -1, np.int64)
    want = got.copy()
    ref(lambda: W.Scatterv(send, want, root=root), want)
    call("Scatterv", send, got, root=root)
    return got, want


def case_gather(mpi, call, root, level, ref):
    send = mpi.ints(N, 4)
    got = np.full(N * P, -1, np.int64) if ME == root else None
    want = np.full(N * P, -1, np.int64) if ME == root else None
    ref(lambda: W.Gather(send, want, root=root), want)
    call("Gather", send, got, root=root)
    return got, want


def case_gatherv(mpi, call, root, level, ref):
    counts = vcounts(1)
    displs, total = vdispls(counts)
    send = mpi.ints(counts[ME], 5)
    got = np.full(total, -1, np.int64)
    want = got.copy()
    ref(
        lambda: W.Gatherv(
            send, [want, counts, displs, MPI.INT64_T] if ME == root else None, root=root
        ),
        want,
    )
    call(
        "Gatherv",
        send,
        [got, counts, displs, MPI.INT64_T] if ME == root else None,
        root=root,
    )
    return got, want


def case_allgather(mpi, call, root, level, ref):
    send = mpi.ints(N, 6)
    got, want = np.full(N * P, -1, np.int64), np.full(N * P, -1, np.int64)
    ref(lambda: W.Allgather(send, want), want)
    call("Allgather", send, got)
    return got, want


def case_allgatherv(mpi, call, root, level, ref):
    counts = vcounts(2)
    displs, total = vdispls(counts)
    send = mpi.ints(counts[ME], 7)
    got, want = np.full(total, -1, np.int64), np.full(total, -1, np.int64)
    ref(lambda: W.Allgatherv(send, [want, counts, displs, MPI.INT64_T]), want)
    call("Allgatherv", send, [got, counts, displs, MPI.INT64_T])
    return got, want


def case_alltoall(mpi, call, root, level, ref):
    send = mpi.ints(N * P, 8)
    got, want = np.full(N * P, -1, np.int64), np.full(N * P, -1, np.int64)
    ref(lambda: W.Alltoall(send, want), want)
    call("Alltoall", send, got)
    return got, want


def case_alltoallv(mpi, call, root, level, ref):
    scounts = [a2a_counts(ME, j) for j in range(P)]
    rcounts = [a2a_counts(j, ME) for j in range(P)]
    sdispls, stotal = vdispls(scounts)
    rdispls, rtotal = vdispls(rcounts)
    send = mpi.ints(stotal, 9)
    got, want = np.full(rtotal, -1, np.int64), np.full(rtotal, -1, np.int64)
    ref(
        lambda: W.Alltoallv(
            [send, scounts, sdispls, MPI.INT64_T], [want, rcounts, rdispls, MPI.INT64_T]
        ),
        want,
    )
    call(
        "Alltoallv",
        [send, scounts, sdispls, MPI.INT64_T],
        [got, rcounts, rdispls, MPI.INT64_T],
    )
    return got, want


def case_reduce(mpi, call, root, level, ref):
    send = mpi.exact(N * 2, 10)
    got = np.full(N * 2, -1.0) if ME == root else None
    want = np.full(N * 2, -1.0) if ME == root else None
    ref(lambda: W.Reduce(send, want, op=MPI.SUM, root=root), want)
    call("Reduce", send, got, op=MPI.SUM, root=root, level=level)
    return got, want


def case_allreduce(mpi, call, root, level, ref):
    send = mpi.exact(N * 2, 11)
    got, want = np.full(N * 2, -1.0), np.full(N * 2, -1.0)
    ref(lambda: W.Allreduce(send, want, op=MPI.SUM), want)
    call("Allreduce", send, got, op=MPI.SUM, level=level)
    return got, want


def case_reduce_scatter_block(mpi, call, root, level, ref):
    send = mpi.exact(N * P, 12)
    got, want = np.full(N, -1.0), np.full(N, -1.0)
    ref(lambda: W.Reduce_scatter_block(send, want, op=MPI.SUM), want)
    call("Reduce_scatter_block", send, got, op=MPI.SUM, level=level)
    return got, want


def case_reduce_scatter(mpi, call, root, level, ref):
    counts = vcounts(3)
    send = mpi.exact(sum(counts), 13)
    got, want = np.full(counts[ME], -1.0), np.full(counts[ME], -1.0)
    ref(lambda: W.Reduce_scatter(send, want, counts, op=MPI.SUM), want)
    call("Reduce_scatter", send, got, counts, op=MPI.SUM, level=level)
    return got, want


def case_scan(mpi, call, root, level, ref):
    send = mpi.exact(N * 2, 14)
    got, want = np.full(N * 2, -1.0), np.full(N * 2, -1.0)
    ref(lambda: W.Scan(send, want, op=MPI.SUM), want)
    call("Scan", send, got, op=MPI.SUM, level=level)
    return got, want


def case_exscan(mpi, call, root, level, ref):
    send = mpi.exact(N * 2, 15)
    got, want = np.full(N * 2, -1.0), np.full(N * 2, -1.0)
    ref(lambda: W.Exscan(send, want, op=MPI.SUM), want)
    call("Exscan", send, got, op=MPI.SUM, level=level)
    if ME == 0:  # MPI leaves rank 0's result undefined
        return None, None
    return got, want


CASE = {name: globals()[f"case_{name.lower()}"] for name in ALL_OPS}


# ---------------------------------------------------------------------- runner
_NATIVE = {}  # (method, root) -> this rank's result of the mpi4py collective


def _ref(key):
    """``ref(native, want)``: fill ``want`` with MPI's result for ``key``.

    The data of a case depends only on its method and root, so the mpi4py collective
    runs once per key (on every rank alike) and later cases reuse its result.
    """

    def ref(native, want):
        if key not in _NATIVE:
            native()
            _NATIVE[key] = None if want is None else want.copy()
        elif want is not None:
            want[...] = _NATIVE[key]

    return ref


def _builder_kwargs(method, root, level, options):
    """The builder arguments ``wacoll.Comm`` passes for this module's cases."""
    kwargs = dict(options, itemsize=8)
    vc = vcounts()
    counts = {
        "Scatterv": {"counts": tuple(vc)},
        "Gatherv": {"counts": tuple(vcounts(1))},
        "Allgatherv": {"counts": tuple(vcounts(2))},
        "Alltoallv": {
            "counts": tuple(tuple(a2a_counts(i, j) for j in range(P)) for i in range(P))
        },
        "Reduce_scatter": {"counts": tuple(vcounts(3))},
        "Reduce_scatter_block": {"count": N},
        "Scatter": {"count": N},
        "Gather": {"count": N},
        "Allgather": {"count": N},
        "Alltoall": {"count": N},
        "Barrier": {},
    }
    kwargs.update(counts.get(method, {"count": 2 * N}))
    if method in REDUCTIONS:
        kwargs["level"] = level
    if method in ROOTED:
        kwargs["root"] = root
    return kwargs


SKIPPED = "skipped"  # run_case's answer for a case it did not run


def run_case(
    mpi, comm, layout, method, family, options, root=0, level=None, skip_seen=True
):
    """Run one case on this rank; return a description of what went wrong, or None.

    The case must match MPI's result, or raise the PlanError that the family's plan
    raises when it cannot keep the level. With ``skip_seen``, a case whose plan runs
    the same programs as an earlier case (same method and root, so the same data) is
    skipped, identically on every rank.
    """

    def call(name, *args, **kwargs):
        return getattr(comm, name)(*args, family=family, **options, **kwargs)

    prediction = mpi.predict(
        layout, OP_NAMES[method], family, **_builder_kwargs(method, root, level, options)
    )
    kind, detail = prediction
    if kind == "plan" and skip_seen and not mpi.first_time(("ops", method, root, detail)):
        return SKIPPED
    if kind == "error" and family not in ("tree", "gridmpi") and "variant" not in options:
        return f"{method} {family}: the builder fails: {detail}"  # must always build
    if (
        kind == "error"
        and skip_seen
        and not mpi.first_time(
            ("ops-error", method, family, tuple(sorted(options.items())), level)
        )
    ):
        return SKIPPED  # the same refusal was checked on another layout or root
    result, exc = mpi.outcome(
        lambda: CASE[method](mpi, call, root, level, _ref((method, root)))
    )
    what = f"{method} family={family} {options} layout={layout} root={root} level={level}"
    if kind == "error":
        if isinstance(exc, PlanError) and detail in str(exc):
            return None
        return f"{what}: expected PlanError {detail!r}, got {exc!r}"
    if exc is not None:
        return f"{what} raised {type(exc).__name__}: {exc}"
    if not mpi.ran_as_predicted(comm, prediction):
        plan = comm.last_plan
        return f"{what} ran another plan: {plan.family}/{plan.algorithm}"
    got, want = result
    if want is None:
        return None if got is None else f"{what}: unexpected result {got!r}"
    if isinstance(got, np.ndarray) and got.tobytes() == want.tobytes():
        return None
    return f"{what}: got {got}, want {want}"


def run_cases(mpi, layouts, method, family, options, roots, levels, validate=True):
    """Run a case per layout, root and level; one agreement for all of them."""
    problems = [
        run_case(
            mpi,
            mpi.comm(layout, validate=validate),
            layout,
            method,
            family,
            options,
            root,
            level,
        )
        for layout in layouts
        for root in roots
        for level in levels
    ]
    if all(p is SKIPPED for p in problems):
        return  # every rank skipped every case: nothing to agree on
    problems = [p for p in problems if p and p is not SKIPPED]
    mpi.assert_all(not problems, "; ".join(problems[:2]))


def _roots(method):
    return sorted({0, P - 1}) if method in ROOTED else [0]


def _levels(method):
    return LEVELS if method in REDUCTIONS else [None]


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize(("method", "family", "options"), PRIMARY)
def test_every_op_family_layout(mpi, method, family, options):
    """Each family's own algorithm for each operation, on every layout, from the
    first and the last rank, at every level."""
    run_cases(
        mpi, list(mpi.layouts), method, family, options, _roots(method), _levels(method)
    )


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize(("method", "family", "options"), VARIANTS)
def test_family_options(mpi, method, family, options):
    """The families' other algorithms and options, on two multi-cluster layouts, by
    a Comm that does not validate arguments (valid ones must work the same). The
    commutative level is left to the families' own algorithms above."""
    levels = LEVELS[:2] if method in REDUCTIONS else [None]
    run_cases(
        mpi,
        mpi.multi[:2],
        method,
        family,
        options,
        _roots(method),
        levels,
        validate=False,
    )


ROOTED_CASES = [
    _param(op, fam, ())
    for fam, ops in PRIMARY_FAMILIES.items()
    for op in ops
    if op in ROOTED
]


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize(("method", "family", "options"), ROOTED_CASES)
def test_every_root(mpi, method, family, options):
    """Rooted operations from every root, on a multi-cluster layout (by a Comm that
    does not validate arguments)."""
    levels = ("strict", "commutative") if method in REDUCTIONS else [None]
    run_cases(
        mpi, mpi.multi[:1], method, family, options, range(P), levels, validate=False
    )


@pytest.mark.mpi(min_size=1)
def test_default_family(mpi, layout):
    """Without ``family=``: magpie on several clusters, mpich on one."""
    comm = mpi.comm(layout)
    want = "magpie" if len(mpi.layouts[layout]) > 1 else "mpich"
    problems = [
        run_case(
            mpi,
            comm,
            layout,
            method,
            None,
            {},
            P - 1,
            "strict" if method in REDUCTIONS else None,
            skip_seen=False,
        )
        for method in ("Bcast", "Gatherv", "Alltoall", "Allreduce")
    ]
    if comm.last_plan.family != want:
        problems.append(f"default family {comm.last_plan.family}, want {want}")
    problems = [p for p in problems if p]
    mpi.assert_all(not problems, "; ".join(problems[:2]))


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("family", ["tree", "gridmpi", "combining"])
def test_family_fallback(mpi, family):
    """A Comm whose family lacks an operation runs it with the default family."""
    layout = mpi.multi[0] if mpi.multi else "single"
    comm = mpi.comm(layout, family=family)
    lacking = [
        method
        for method in ("Scatter", "Gather", "Allgather", "Reduce_scatter_block", "Scan")
        if OP_NAMES[method] not in builders(family)
    ]
    assert lacking
    problems = [
        run_case(
            mpi,
            comm,
            layout,
            method,
            None,
            {},
            0,
            "strict" if method in REDUCTIONS else None,
            skip_seen=False,
        )
        for method in lacking
    ]
    problems = [p for p in problems if p]
    mpi.assert_all(not problems, "; ".join(problems[:2]))
