"""Reductions: dtypes and operators, a non-commutative operator, strict reproducibility.

* Every element type MPI maps from numpy, with every predefined operator MPI defines
  for it, on Allreduce and Reduce, compared with mpi4py's native collectives (the data
  keeps every result exact); operators MPI does not define for a type raise one
  ``BufferMismatchError`` on every rank.
* A non-commutative user-defined operator (2x2 integer matrix product) on Reduce,
  Allreduce, Scan, Exscan and Reduce_scatter_block, at levels ``strict`` and
  ``associative``, compared with the product in rank order computed with numpy, on
  every layout: on a reordered layout the MagPIe builders must fall back to an
  algorithm that keeps rank order.
* ``strict`` floating-point sums on plain arithmetic: bit-identical to the canonical
  expression (binomial tree in rank order; left fold for scans) on every layout and
  family, so identical across topologies; with the default arithmetic, identical
  across topologies too.
"""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from wacoll.errors import BufferMismatchError, WacollError

P = MPI.COMM_WORLD.Get_size()
ME = MPI.COMM_WORLD.Get_rank()
W = MPI.COMM_WORLD

DTYPES = (
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float32",
    "float64",
    "complex64",
    "complex128",
)
OPS = ("SUM", "PROD", "MIN", "MAX", "LAND", "LOR", "LXOR", "BAND", "BOR", "BXOR")


def defined(op, dtype):
    """Whether MPI defines ``op`` on ``dtype`` (MPI 4.1, section 6.9.2)."""
    kind = np.dtype(dtype).kind
    if op in ("SUM", "PROD"):
        return kind in "iufc"
    if op in ("MIN", "MAX"):
        return kind in "iuf"
    if op in ("LAND", "LOR", "LXOR"):
        return kind in "iub"
    return kind in "iu"


def operands(op, dtype, n, rank=None):
    """Data for ``op`` on ``dtype`` whose reduction over all ranks is exact."""
    rank = ME if rank is None else rank
    dt = np.dtype(dtype)
    i = np.arange(n)
    if dt.kind == "b":
        return ((i * 3 + rank * 5) % 4 != 0).astype(dt)
    if op == "PROD":  # magnitudes stay tiny (unsigned ones may wrap: that is defined)
        vals = ((rank + i) % 3) - 1 + (2 * (i == rank))
        if dt.kind == "u":
            vals = (rank + i) % 2 + 1
    elif op in ("LAND", "LOR", "LXOR"):
        vals = (rank * (i + 1)) % 3
    elif op in ("BAND", "BOR", "BXOR"):
        mix = np.full(n, rank + 1, np.uint64) * np.uint64(0x9E3779B97F4A7C15) + i.astype(
            np.uint64
        ) * np.uint64(0xBF58476D1CE4E5B9)  # wraps: all bits
        return mix.astype(dt)
    else:
        vals = (((rank + 1) * (i + 2)) % 19) - (0 if dt.kind == "u" else 9)
    out = np.asarray(vals).astype(dt)
    if dt.kind == "c":
        out = out + 1j * np.asarray((((rank + 2) * (i + 1)) % 5) - 2).astype(dt)
    return out


# ---------------------------------------------------------------------- dtypes x ops
@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("dtype", DTYPES)
def test_dtypes_and_operators(mpi, dtype):
    """Allreduce and Reduce with every operator MPI defines for ``dtype``."""
    layout = mpi.multi[0] if mpi.multi else "single"
    comm = mpi.comm(layout)
    root = P - 1
    problems = []
    for name in OPS:
        op = getattr(MPI, name)
        if not defined(name, dtype):
            continue
        send = operands(name, dtype, 7)
        want = np.empty_like(send)
        W.Allreduce(send, want, op=op)
        got = np.zeros_like(send)
        _, exc = mpi.outcome(lambda: comm.Allreduce(send, got, op=op))
        if exc is not None or got.tobytes() != want.tobytes():
            problems.append(f"Allreduce {name} {dtype}: got {got} ({exc!r}), want {want}")
        red = np.zeros_like(send) if ME == root else None
        _, exc = mpi.outcome(lambda: comm.Reduce(send, red, op=op, root=root))
        if exc is not None or (ME == root and red.tobytes() != want.tobytes()):
            problems.append(f"Reduce {name} {dtype}: got {red} ({exc!r}), want {want}")
    mpi.assert_all(not problems, "; ".join(problems[:3]))


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("dtype", DTYPES)
def test_undefined_operator_raises_everywhere(mpi, dtype):
    """An operator MPI does not define for the type (e.g. MIN on complex) raises one
    BufferMismatchError on every rank and leaves recvbuf alone."""
    comm = mpi.comm(mpi.multi[0] if mpi.multi else "single")
    outcomes, problems = [], []
    for name in OPS:
        if defined(name, dtype):
            continue
        recv = np.zeros(3, dtype)
        _, exc = mpi.outcome(
            lambda: comm.Allreduce(np.ones(3, dtype), recv, op=getattr(MPI, name))
        )
        outcomes.append(repr(exc))
        if not isinstance(exc, BufferMismatchError) or name not in str(exc):
            problems.append(f"{name}: {exc!r}")
        elif recv.any():
            problems.append(f"{name}: recvbuf written")
    everyone = W.allgather(outcomes)
    if any(o != everyone[0] for o in everyone):
        problems.append(f"the ranks raised different errors: {everyone}")
    mpi.assert_all(not problems, "; ".join(problems[:3]))


def new_plan(mpi, data, layout, method, level, count, itemsize, family=None, **kwargs):
    """The predicted plan, or None when a call on this data already ran a plan with
    the same programs."""
    prediction = mpi.predict(
        layout,
        method.lower(),
        family,
        level=level,
        count=count,
        itemsize=itemsize,
        **kwargs,
    )
    if prediction[0] == "error" or mpi.first_time(
        (data, method, tuple(kwargs.items()), prediction[1])
    ):
        return prediction
    return None


# ---------------------------------------------------------------------- user operator
def _matmul(inbuf, inoutbuf, datatype):
    """inoutbuf = inbuf @ inoutbuf, for arrays of 2x2 int64 matrices."""
    a = np.frombuffer(inbuf, dtype=np.int64).reshape(-1, 2, 2)
    b = np.frombuffer(inoutbuf, dtype=np.int64).reshape(-1, 2, 2)
    b[...] = a @ b


@pytest.fixture(scope="module")
def matmul():
    op = MPI.Op.Create(_matmul, commute=False)
    yield op
    op.Free()


def matrices(k, rank):
    """``k`` 2x2 int64 matrices (4k elements) of ``rank``; they do not commute."""
    i = np.arange(4 * k)
    return ((i * 5 + rank * 3 + (i // 4) * rank) % 4 - 1).astype(np.int64)


def products(k, ranks):
    """The product of ``ranks``' matrices, in rank order (4k elements)."""
    acc = np.broadcast_to(np.eye(2, dtype=np.int64), (k, 2, 2)).copy()
    for r in ranks:
        acc = acc @ matrices(k, r).reshape(k, 2, 2)
    return acc.reshape(-1)


#: k matrices per rank: below and above MagPIe's 512-byte threshold.
MATRIX_COUNTS = (2, 24)


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("level", ["strict", "associative"])
def test_noncommutative_matrix_product(mpi, matmul, layout, level):
    """The product in rank order, whatever the layout (reordered ones included)."""
    comm = mpi.comm(layout)
    problems = []
    # above the threshold on the two multi-cluster layouts only
    for k in MATRIX_COUNTS if layout in mpi.multi[:2] else MATRIX_COUNTS[:1]:
        mine = matrices(k, ME)
        total = products(k, range(P))
        root = P - 1
        cases = {
            "Allreduce": (mine, np.zeros(4 * k, np.int64), total),
            "Scan": (mine, np.zeros(4 * k, np.int64), products(k, range(ME + 1))),
            "Exscan": (
                mine,
                np.zeros(4 * k, np.int64),
                products(k, range(ME)) if ME else None,
            ),
            "Reduce": (
                mine,
                np.zeros(4 * k, np.int64) if ME == root else None,
                total if ME == root else None,
            ),
        }
        for method, (send, recv, want) in cases.items():
            kwargs = {"root": root} if method == "Reduce" else {}
            predicted = new_plan(
                mpi,
                ("matmul", k),
                layout,
                method,
                level,
                4 * k,
                8,
                user_op=True,
                **kwargs,
            )
            if predicted is None:
                continue
            _, exc = mpi.outcome(
                lambda: getattr(comm, method)(
                    send, recv, op=matmul, level=level, **kwargs
                )
            )
            if exc is None and not mpi.ran_as_predicted(comm, predicted):
                problems.append(f"{method} k={k} ran {comm.last_plan.algorithm}")
            if exc is not None or (want is not None and recv.tobytes() != want.tobytes()):
                problems.append(f"{method} k={k}: got {recv} ({exc!r}), want {want}")
        # Reduce_scatter_block: rank j gets the product of everyone's j-th block
        send = np.concatenate([matrices(k, ME * P + j) for j in range(P)])
        recv = np.zeros(4 * k, np.int64)
        want = products(k, [r * P + ME for r in range(P)])
        predicted = new_plan(
            mpi,
            ("matmul", k),
            layout,
            "Reduce_scatter_block",
            level,
            4 * k,
            8,
            user_op=True,
        )
        if predicted is None:
            continue
        _, exc = mpi.outcome(
            lambda: comm.Reduce_scatter_block(send, recv, op=matmul, level=level)
        )
        if exc is not None or recv.tobytes() != want.tobytes():
            problems.append(f"Reduce_scatter_block k={k}: got {recv} ({exc!r})")
        elif not mpi.ran_as_predicted(comm, predicted):
            problems.append(f"Reduce_scatter_block k={k} ran {comm.last_plan.algorithm}")
    mpi.assert_all(not problems, f"{layout} {level}: " + "; ".join(problems[:3]))


@pytest.mark.mpi(min_size=1)
def test_noncommutative_with_mpich_family(mpi, matmul):
    comm = mpi.comm("single")
    problems = []
    for k in MATRIX_COUNTS:
        for level in ("strict", "associative"):
            recv = np.zeros(4 * k, np.int64)
            _, exc = mpi.outcome(
                lambda: comm.Allreduce(
                    matrices(k, ME), recv, op=matmul, level=level, family="mpich"
                )
            )
            if exc is not None or recv.tobytes() != products(k, range(P)).tobytes():
                problems.append(f"Allreduce k={k} {level}: {exc!r}")
            recv = np.zeros(4 * k, np.int64)
            _, exc = mpi.outcome(
                lambda: comm.Scan(
                    matrices(k, ME), recv, op=matmul, level=level, family="mpich"
                )
            )
            if exc is not None or recv.tobytes() != products(k, range(ME + 1)).tobytes():
                problems.append(f"Scan k={k} {level}: {exc!r}")
    mpi.assert_all(not problems, "; ".join(problems[:3]))


@pytest.mark.mpi(min_size=1)
def test_commutative_level_refused_for_noncommutative_op(mpi, matmul):
    comm = mpi.comm(mpi.multi[0] if mpi.multi else "single")
    recv = np.full(4, -7, np.int64)
    mpi.same_error(
        lambda: comm.Allreduce(matrices(1, ME), recv, op=matmul, level="commutative"),
        WacollError,
        match="commutative",
        untouched=lambda: (recv == -7).all(),
    )


# ---------------------------------------------------------------------- strict floats
def canonical_tree(values, add=np.add):
    """The binomial reduce tree at rank 0 with operands in rank order."""
    acc = [v.copy() for v in values]
    mask = 1
    while mask < len(acc):
        for v in range(0, len(acc), 2 * mask):
            if v + mask < len(acc):
                acc[v] = add(acc[v], acc[v + mask])
        mask *= 2
    return acc[0]


def left_fold(values):
    acc = values[0].copy()
    for v in values[1:]:
        acc = acc + v
    return acc


#: Elements per rank: below and above MagPIe's 512-byte threshold (float64).
FLOAT_COUNTS = (5, 100)


def strict_cases(n, dtype):
    """(method, kwargs, sendbuf, has_recvbuf, expected) of the strict reductions."""
    every = [mpi_random(n, r, dtype) for r in range(P)]
    mine = every[ME]
    tree = canonical_tree(every)
    root = P - 1
    out = [
        ("Allreduce", {}, mine, True, tree),
        ("Reduce", {"root": root}, mine, ME == root, tree if ME == root else None),
        ("Scan", {}, mine, True, left_fold(every[: ME + 1])),
    ]
    blocks = [mpi_random(n * P, 100 + r, dtype) for r in range(P)]
    out.append(
        (
            "Reduce_scatter_block",
            {},
            blocks[ME],
            True,
            canonical_tree([b[ME * n : (ME + 1) * n] for b in blocks]),
        )
    )
    return out


def mpi_random(n, seed, dtype):
    rng = np.random.default_rng([n, seed])
    return (rng.standard_normal(n) * 10.0 ** rng.integers(-6, 7, n)).astype(dtype)


#: (family, options) and the methods it runs at the strict level everywhere.
STRICT_FAMILIES = (
    ("magpie", {}, None),
    ("mpich", {}, None),
    ("mpich", {"algorithm": "halving"}, ("Allreduce", "Reduce")),
    ("tree", {}, ("Allreduce",)),
)


#: Methods run per dtype (float32: fewer, to keep the suite quick).
STRICT_METHODS = {"float64": None, "float32": ("Allreduce",)}


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("dtype", list(STRICT_METHODS))
def test_strict_sums_are_the_canonical_expression(mpi, dtype):
    """On every layout and family, strict float sums on plain arithmetic are
    bit-identical to the canonical expression, hence to each other (the reproducible
    arithmetic has tests of its own, in test_reproducible.py)."""
    problems, first = [], {}
    cases = {n: strict_cases(n, dtype) for n in FLOAT_COUNTS}
    for layout in mpi.layouts:
        comm = mpi.comm(layout, arithmetic="plain")
        # above the threshold: single, contiguous and reordered layouts only
        for n in (
            FLOAT_COUNTS if layout in ["single"] + mpi.multi[:2] else FLOAT_COUNTS[:1]
        ):
            for family, options, only in STRICT_FAMILIES:
                for i, (method, kw, send, has_recv, want) in enumerate(cases[n]):
                    if (
                        only
                        and method not in only
                        or (STRICT_METHODS[dtype] and method not in STRICT_METHODS[dtype])
                    ):
                        continue
                    predicted = new_plan(
                        mpi,
                        ("strict", dtype, n),
                        layout,
                        method,
                        "strict",
                        n,
                        np.dtype(dtype).itemsize,
                        family,
                        **options,
                        **kw,
                    )
                    if predicted is None:
                        continue
                    recv = np.full(n, np.nan, dtype) if has_recv else None
                    _, exc = mpi.outcome(
                        lambda: getattr(comm, method)(
                            send, recv, op=MPI.SUM, family=family, **options, **kw
                        )
                    )
                    where = f"{method}{kw} n={n} {layout} {family}{options or ''}"
                    if exc is not None:
                        problems.append(f"{where} raised {exc!r}")
                    elif not mpi.ran_as_predicted(comm, predicted):
                        problems.append(f"{where} ran {comm.last_plan.algorithm}")
                    elif want is not None:
                        if recv.tobytes() != want.tobytes():
                            problems.append(f"{where}: not the canonical bits")
                        if first.setdefault((n, i), recv.tobytes()) != recv.tobytes():
                            problems.append(f"{where}: differs from the first topology")
    mpi.assert_all(not problems, "; ".join(problems[:3]))


@pytest.mark.mpi(min_size=1)
def test_strict_results_identical_on_every_rank_and_topology(mpi):
    """Rank 0 gathers every rank's strict Allreduce result on every layout: all
    identical bytes (the cross-topology check of the issue)."""
    n = 64
    results = []
    for layout in mpi.layouts:
        recv = np.zeros(n)
        mpi.run(
            lambda: mpi.comm(layout).Allreduce(mpi.random(n, 5), recv, op=MPI.SUM),
            f"Allreduce on {layout}",
        )
        results.append(recv.tobytes())
    gathered = W.gather(results, root=0)
    ok = True
    if ME == 0:
        flat = [r for per_rank in gathered for r in per_rank]
        ok = all(r == flat[0] for r in flat)
    mpi.assert_all(ok, "strict Allreduce results differ between ranks or topologies")
    approx = np.zeros(n)
    W.Allreduce(mpi.random(n, 5), approx, op=MPI.SUM)
    got = np.frombuffer(results[0])
    mpi.assert_all(
        np.allclose(got, approx, rtol=1e-9, atol=1e-3 * np.abs(approx).max()),
        "strict result far from MPI's sum",
    )
