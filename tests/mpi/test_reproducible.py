"""Strict float sums on reproducible arithmetic (exact accumulators).

* With the arithmetic forced to ``"reproducible"``, Allreduce, Reduce (every root),
  Scan and Reduce_scatter_block of float64, float32, complex128 and complex64 sums
  give exactly the bits of :func:`wacoll._kernels.repro.reproducible_sum` of every
  rank's contribution, on every layout (single, contiguous, reordered, uneven, one
  per rank) and every family that has the operation: data of wildly different
  magnitudes (1e-300 to 1e300, values that cancel to a subnormal, sums that would
  overflow in some orders), negative zeros and subnormals.
* Infinities and NaNs: the same bits on every layout and family; ``inf - inf`` and
  NaN give the one quiet NaN (sign clear), infinities of one sign that sign.
* The default arithmetic (``"auto"``) takes the accumulators for a small strict sum
  on every layout, so results agree across topologies, and keeps the canonical
  order for a large one.
"""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from wacoll._kernels.repro import reproducible_sum
from wacoll.errors import PlanError
from wacoll.plans import FAMILIES, Call, Policy, builders, select

P = MPI.COMM_WORLD.Get_size()
ME = MPI.COMM_WORLD.Get_rank()
W = MPI.COMM_WORLD

REPRO = Policy(arithmetic="reproducible")
FLOATS = ("float64", "float32", "complex128", "complex64")


def wild(n, seed, rank, dtype):
    """Values of wildly different magnitudes, with negative zeros, subnormals and
    terms that cancel across ranks (a plain sum's bits depend on the order)."""
    dt = np.dtype(dtype)
    real = np.dtype(np.float32 if dt in (np.float32, np.complex64) else np.float64)
    info = np.finfo(real)
    span = 300 if real == np.float64 else 36
    rng = np.random.default_rng([n, seed, rank, dt.num])

    def part():
        x = rng.standard_normal(n) * 10.0 ** rng.integers(-span, span + 1, n)
        x = x.astype(real)
        x[0::7] = -0.0  # only negative zeros on this element
        x[1::7] = info.smallest_subnormal * rng.integers(-50, 50, x[1::7].size)
        big = info.max / 2 * (1 if rank % 2 else -1)
        x[2::7] = big if rank < P - (P % 2) else info.max / 4  # cancels, or not
        x[3::7] = (
            (1.0 + rank) * 2.0**-1060
            if real == np.float64
            else np.float32((1.0 + rank) * 2.0**-140)
        )  # subnormal results
        for k in (5, 6):  # 16 orders of magnitude: a plain sum's bits depend on order
            m = x[k::7].size
            x[k::7] = rng.standard_normal(m) * 10.0 ** rng.integers(-8, 9, m)
        return x

    if dt.kind == "c":
        return (part() + 1j * part()).astype(dt)
    return part()


def expected(parts):
    return reproducible_sum([np.ascontiguousarray(p) for p in parts])


def plan_exists(mpi, layout, op, family, n, itemsize, root=None):
    """Whether ``family`` builds a plan for ``op`` (the same answer on every rank)."""
    topo = mpi.topology(layout)
    call = Call(
        op,
        count=n,
        root=root,
        itemsize=itemsize,
        level="strict",
        accumulator_itemsize=4 * itemsize,
    )
    try:
        select(call, topo, family=family, policy=REPRO).build(topo)
    except PlanError:
        return False
    return True


def cases(n, dtype, seed=0):
    """(method, kwargs, sendbuf, recvbuf or None, expected or None)."""
    every = [wild(n, seed, r, dtype) for r in range(P)]
    whole = expected(every)
    out = [("Allreduce", {}, every[ME], np.full(n, np.nan, dtype), whole)]
    for root in range(P):
        mine = ME == root
        out.append(
            (
                "Reduce",
                {"root": root},
                every[ME],
                np.full(n, np.nan, dtype) if mine else None,
                whole if mine else None,
            )
        )
    out.append(
        ("Scan", {}, every[ME], np.full(n, np.nan, dtype), expected(every[: ME + 1]))
    )
    blocks = [wild(n * P, seed + 1, r, dtype) for r in range(P)]
    out.append(
        (
            "Reduce_scatter_block",
            {},
            blocks[ME],
            np.full(n, np.nan, dtype),
            expected([b[ME * n : (ME + 1) * n] for b in blocks]),
        )
    )
    return out


@pytest.mark.matrix
@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("dtype", FLOATS)
def test_reproducible_bits_on_every_layout_family_and_root(mpi, dtype):
    n = 23 if dtype == "float64" else 9
    problems = []
    all_cases = cases(n, dtype)
    if P >= 3 and dtype == "float64":  # the data tell the arithmetics apart
        every = [wild(n, 0, r, dtype) for r in range(P)]
        fold = every[0].copy()
        with np.errstate(all="ignore"):
            for part in every[1:]:
                fold += part
        assert fold.tobytes() != expected(every).tobytes()
    itemsize = np.dtype(dtype).itemsize
    for layout in mpi.layouts:
        comm = mpi.comm(layout, arithmetic="reproducible")
        for family in FAMILIES:
            for method, kw, send, recv, want in all_cases:
                op = method.lower()
                if op not in builders(family) or not plan_exists(
                    mpi, layout, op, family, n, itemsize, kw.get("root")
                ):
                    continue
                if recv is not None:
                    recv[:] = np.nan
                _, exc = mpi.outcome(
                    lambda: getattr(comm, method)(
                        send, recv, op=MPI.SUM, family=family, **kw
                    )
                )
                where = f"{method}{kw} {dtype} {layout} {family}"
                if exc is not None:
                    problems.append(f"{where} raised {exc!r}")
                elif (
                    comm.last_plan.arithmetic != "reproducible"
                    or comm.last_plan.family != family
                ):
                    problems.append(
                        f"{where} ran {comm.last_plan.family} on "
                        f"{comm.last_plan.arithmetic} arithmetic"
                    )
                elif want is not None and recv.tobytes() != want.tobytes():
                    bad = np.flatnonzero(recv.view(np.uint8) != want.view(np.uint8))
                    problems.append(
                        f"{where}: bits differ from the reproducible sum "
                        f"(first byte {bad[0]})"
                    )
    mpi.assert_all(not problems, "; ".join(problems[:3]))


SPECIALS = {
    # element: what each rank contributes (rank r: entry r % len)
    "nan": [np.nan, 1.0],
    "inf": [np.inf, 1.0],
    "-inf": [-np.inf, -0.0],
    "inf-inf": [np.inf, -np.inf],
    "-0": [-0.0],
}


def special_values(rank):
    return np.array([v[rank % len(v)] for v in SPECIALS.values()])


@pytest.mark.mpi(min_size=1)
def test_infinities_and_nans_same_bits_everywhere(mpi):
    """Every layout and family gives the same bits; NaN is the one quiet NaN."""
    every = [special_values(r) for r in range(P)]
    want = expected(every)
    got = {}
    for layout in mpi.layouts:
        comm = mpi.comm(layout, arithmetic="reproducible")
        for family in ("magpie", "mpich"):
            recv = np.zeros(len(SPECIALS))
            mpi.run(
                lambda: comm.Allreduce(
                    special_values(ME), recv, op=MPI.SUM, family=family
                ),
                f"{layout} {family}",
            )
            got[(layout, family)] = recv.tobytes()
    mpi.assert_all(
        all(g == want.tobytes() for g in got.values()),
        f"special values differ: {sorted(got)}",
    )
    qnan = np.array([np.nan]).view(np.uint64)[0]
    names = list(SPECIALS)
    checks = [
        want.view(np.uint64)[names.index("nan")] == qnan,
        np.signbit(want[names.index("-0")]) and want[names.index("-0")] == 0,
        want[names.index("inf")] == (np.inf if P > 0 else 0),
    ]
    if P > 1:
        checks.append(want.view(np.uint64)[names.index("inf-inf")] == qnan)
        checks.append(want[names.index("-inf")] == -np.inf)
    mpi.assert_all(all(checks), f"unexpected special results {want.tolist()}")


@pytest.mark.mpi(min_size=1)
def test_default_arithmetic_small_sums_agree_across_topologies(mpi):
    """``wacoll.Comm(level="strict")`` runs a small float sum on accumulators on every
    layout (so the bits agree), and a large one in the canonical order."""
    n = 100
    mine = wild(n, 3, ME, "float64")
    want = expected([wild(n, 3, r, "float64") for r in range(P)])
    problems = []
    for layout in mpi.layouts:
        comm = mpi.comm(layout, arithmetic="auto")
        recv = np.empty(n)
        mpi.run(lambda: comm.Allreduce(mine, recv, op=MPI.SUM), layout)
        if (
            comm.last_plan.arithmetic != "reproducible"
            or recv.tobytes() != want.tobytes()
        ):
            problems.append(f"{layout}: {comm.last_plan.arithmetic}")
        big = np.ones(1024)
        out = np.empty(1024)
        mpi.run(lambda: comm.Allreduce(big, out, op=MPI.SUM), layout)
        if comm.last_plan.arithmetic != "plain" or not (out == P).all():
            problems.append(f"{layout} 8 KiB: {comm.last_plan.arithmetic}")
    mpi.assert_all(not problems, "; ".join(problems[:3]))


@pytest.mark.mpi(min_size=1)
def test_in_place_and_repeated_calls_reuse_scratch(mpi):
    """MPI.IN_PLACE, and repeated calls of different lengths on one communicator."""
    comm = mpi.comm("single", arithmetic="reproducible")
    ok = True
    for n in (40, 7, 40):
        buf = wild(n, n, ME, "float64")
        want = expected([wild(n, n, r, "float64") for r in range(P)])
        mpi.run(lambda: comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM), f"n={n}")
        ok = ok and buf.tobytes() == want.tobytes()
    mpi.assert_all(ok, "in-place reproducible Allreduce gave other bits")


@pytest.mark.mpi(min_size=1)
def test_nonblocking_and_persistent_calls(mpi):
    """Iallreduce, Ireduce and Allreduce_init on accumulators: the same bits."""
    comm = mpi.comm(mpi.multi[0] if mpi.multi else "single", arithmetic="reproducible")
    n = 31
    mine = wild(n, 9, ME, "float64")
    want = expected([wild(n, 9, r, "float64") for r in range(P)])
    got = {}
    a, b = np.empty(n), np.empty(n)
    mpi.run(
        lambda: MPI.Request.Waitall(
            [
                comm.Iallreduce(mine, a, op=MPI.SUM),
                comm.Ireduce(mine, b, op=MPI.SUM, root=0),
            ]
        ),
        "non-blocking",
    )
    got["Iallreduce"] = a.tobytes() == want.tobytes()
    got["Ireduce"] = ME != 0 or b.tobytes() == want.tobytes()
    c = np.empty(n)
    req = mpi.run(lambda: comm.Allreduce_init(mine, c, op=MPI.SUM), "Allreduce_init")
    for k in range(2):
        c[:] = np.nan
        mpi.run(lambda: (req.Start(), req.Wait()), f"start {k}")
        got[f"persistent {k}"] = c.tobytes() == want.tobytes()
    req.Free()
    mpi.assert_all(all(got.values()), f"{got}")
