"""User-defined operators on derived datatypes run on wacoll's plans.

A reduction whose operator is the application's own (``MPI.Op.Create``) may name a
derived datatype; its function then combines whole elements laid out as the
datatype says. wacoll runs such calls on its plans: the plan's unit is one whole
packed element, and each combine hands the operator both operands unpacked into
the datatype's layout (:mod:`wacoll.mpi.elementop`). Every case runs the same call
on ``MPI.COMM_WORLD`` (the MPI library's collective) and on a wacoll communicator,
with the plan families and levels forced, and compares the receive buffers byte for
byte, the bytes outside the type map included (they must stay as they were).

The operators: an affine composition over pairs of an element's values (does not
commute; operands must stay in rank order) and an element-wise sum (commutes), both
exact on the small integers the cases use.
"""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

WORLD = MPI.COMM_WORLD
P = WORLD.Get_size()
ME = WORLD.Get_rank()

#: The numpy layout of each test datatype's element (fields at their offsets,
#: itemsize the extent), by datatype handle: what the operators read.
_LAYOUTS = {}


def _types():
    """``{name: (datatype, layout)}``, committed; the caller frees them."""
    i4, i8, f8 = np.int32, np.int64, np.float64

    def layout(formats, offsets, extent):
        return np.dtype(
            {
                "names": [f"f{k}" for k in range(len(formats))],
                "formats": formats,
                "offsets": offsets,
                "itemsize": extent,
            }
        )

    made = {
        "contiguous": (
            MPI.INT64_T.Create_contiguous(4),
            layout([i8] * 4, [0, 8, 16, 24], 32),
        ),
        "vector": (
            MPI.INT64_T.Create_vector(2, 2, 3),
            layout([i8] * 4, [0, 8, 24, 32], 40),
        ),
        "indexed": (
            MPI.INT32_T.Create_indexed([1, 3], [0, 4]),
            layout([i4] * 4, [0, 16, 20, 24], 28),
        ),
        "struct": (
            MPI.Datatype.Create_struct([1, 1], [0, 8], [MPI.INT32_T, MPI.DOUBLE]),
            layout([i4, f8], [0, 8], 16),
        ),
        "resized": (
            MPI.INT64_T.Create_contiguous(2).Create_resized(0, 24),
            layout([i8] * 2, [0, 8], 24),
        ),
    }
    for dt, lay in made.values():
        dt.Commit()
        assert dt.Get_extent()[1] == lay.itemsize
        _LAYOUTS[dt.handle] = lay
    return made


def _operands(a, b, datatype):
    lay = _LAYOUTS[datatype.handle]
    return np.frombuffer(a, lay), np.frombuffer(b, lay), lay.names


def _affine(a, b, datatype):
    """``b = a (op) b``: the element's values in pairs ``(m, c)`` are the maps
    ``x -> m x + c``, composed left first (associative, not commutative)."""
    x, y, names = _operands(a, b, datatype)
    for m, c in zip(names[::2], names[1::2]):
        xm, xc, ym, yc = x[m].copy(), x[c].copy(), y[m].copy(), y[c].copy()
        y[m] = xm * ym
        y[c] = ym * xc + yc


def _sum(a, b, datatype):
    x, y, names = _operands(a, b, datatype)
    for n in names:
        y[n] = x[n] + y[n]


@pytest.fixture(scope="module")
def types():
    made = _types()
    yield made
    for dt, _ in made.values():
        dt.Free()


@pytest.fixture(scope="module")
def ops():
    made = {
        "affine": MPI.Op.Create(_affine, commute=False),
        "sum": MPI.Op.Create(_sum, commute=True),
    }
    yield made
    for op in made.values():
        op.Free()


def _filled(lay, n, seed, rank=ME):
    """Bytes of ``n`` elements: the type map holds small integers, the gaps a
    pattern (which must come through untouched)."""
    rng = np.random.default_rng([seed, rank])
    raw = rng.integers(0, 256, n * lay.itemsize + 8, dtype=np.uint8)
    view = np.frombuffer(raw.data, lay, count=n)
    for name in lay.names:
        view[name] = rng.integers(-2, 3, n)
    return raw


def _cases(lay, dt, n, in_place):
    """``{method: (make_args, extra kwargs)}``: ``make_args()`` gives fresh arguments
    and the receive buffer to compare."""

    def vec(seed):
        return _filled(lay, n, seed)

    def whole(seed, k):
        return _filled(lay, k, seed)

    def rooted(method):
        root = P - 1

        def make():
            recv = vec(9)
            if in_place and ME == root:
                send = MPI.IN_PLACE
                recv = vec(1)
            else:
                send = [vec(1), n, dt]
            return (send, [recv, n, dt]), recv, {"root": root}

        return make

    def unrooted():
        def make():
            recv = vec(9)
            if in_place:
                recv = vec(1)
                return (MPI.IN_PLACE, [recv, n, dt]), recv, {}
            return ([vec(1), n, dt], [recv, n, dt]), recv, {}

        return make

    # an in-place reduce-scatter's input beyond this rank's result is undefined after
    # the call (Open MPI works there): only the result is compared
    def rsb():
        if in_place:
            recv = whole(1, n * P)
            return (MPI.IN_PLACE, [recv, n, dt]), recv[: n * lay.itemsize], {}
        recv = vec(9)
        return ([whole(1, n * P), n, dt], [recv, n, dt]), recv, {}

    counts = [(n + r) % 3 for r in range(P)]

    def rs():
        total = sum(counts)
        if in_place:
            recv = whole(1, total)
            return (
                (MPI.IN_PLACE, [recv, total, dt], counts),
                recv[: counts[ME] * lay.itemsize],
                {},
            )
        recv = whole(9, counts[ME])
        return ([whole(1, total), total, dt], [recv, counts[ME], dt], counts), recv, {}

    rsb.datatype = dt  # (see _library_is_reference)
    return {
        "Reduce": rooted("Reduce"),
        "Allreduce": unrooted(),
        "Scan": unrooted(),
        "Exscan": unrooted(),
        "Reduce_scatter_block": rsb,
        "Reduce_scatter": rs,
    }


def _run(comm, method, make, op, kwargs, form="blocking"):
    args, recv, extra = make()
    kwargs = dict(kwargs, **extra)
    if form == "blocking":
        getattr(comm, method)(*args, op=op, **kwargs)
    elif form == "nonblocking":
        getattr(comm, "I" + method[0].lower() + method[1:])(*args, op=op, **kwargs).Wait()
    else:
        request = getattr(comm, method + "_init")(*args, op=op, **kwargs)
        request.Start()
        request.Wait()
        request.Free()
    return recv


def _library_is_reference(make, op):
    """Whether the MPI library's result can be trusted for this call. MPICH 5.0's
    Reduce_scatter_block with a non-commutative operator on a datatype whose extent
    exceeds its true extent (a resized type, a struct padded to its alignment)
    returns wrong blocks on a power of two of ranks and corrupts its heap (the
    process aborts), so such calls are not compared (as in tests/mpi/differential.py)."""
    dt = getattr(make, "datatype", None)
    if dt is None or op.Is_commutative() or P & (P - 1):
        return True
    lb, extent = dt.Get_extent()
    true_lb, true_extent = dt.Get_true_extent()
    return lb + extent <= true_lb + true_extent


def _check(mpi, comm, method, make, op, kwargs, what, form="blocking", plan=True):
    """Run on both communicators; ``problems`` for this rank (empty: agreed)."""
    if not _library_is_reference(make, op):
        return []
    want = _run(WORLD, method, make, op, {k: v for k, v in kwargs.items() if k == "root"})
    got, exc = mpi.outcome(lambda: _run(comm, method, make, op, kwargs, form))
    if exc is not None:
        return [f"{what}: wacoll raised {type(exc).__name__}: {exc}"]
    if method == "Exscan" and ME == 0:  # rank 0's result is undefined
        return []
    if got.tobytes() != want.tobytes():
        bad = np.flatnonzero(got != want)
        return [
            f"{what}: {bad.size} bytes differ from the library's, first at byte {bad[0]}"
        ]
    if plan and form == "blocking" and comm.last_family == "native":
        return [f"{what}: ran the library's collective, not a plan"]
    return []


@pytest.mark.matrix
@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("kind", ["contiguous", "vector", "indexed", "struct", "resized"])
def test_user_op_on_derived_type(mpi, types, ops, layout, kind):
    """Every reduction, in place and not, with each family and level: the library's
    bytes."""
    three = [name for name, clusters in mpi.layouts.items() if len(clusters) >= 3]
    if layout != "single" and layout not in mpi.multi[:2] + three[:1]:
        pytest.skip(
            "one cluster, two multi-cluster layouts and one of three or more "
            "clusters suffice"
        )
    dt, lay = types[kind]
    comm = mpi.comm(layout)
    problems = []
    for opname, op in ops.items():
        levels = ("strict", "associative") if opname == "affine" else ("commutative",)
        for n in (0, 3) if kind == "contiguous" else (3,):
            for in_place in (False, True):
                for method, make in _cases(lay, dt, n, in_place).items():
                    for family in (None, "magpie", "mpich"):
                        for level in levels:
                            kwargs = {"level": level}
                            if family:
                                kwargs["family"] = family
                            what = (
                                f"{method} {kind} {opname} n={n} family={family} "
                                f"level={level} in_place={in_place}"
                            )
                            # on one cluster the library runs MPI-level calls
                            plan = (
                                bool(family) or level == "strict" or layout in mpi.multi
                            )
                            problems += _check(
                                mpi, comm, method, make, op, kwargs, what, plan=plan
                            )
    mpi.assert_all(not problems, "; ".join(problems[:3]))


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("form", ["nonblocking", "persistent"])
def test_user_op_on_derived_type_requests(mpi, types, ops, form):
    """The non-blocking and persistent forms give the library's bytes too."""
    problems = []
    for layout in mpi.layouts:
        comm = mpi.comm(layout)
        for kind in ("vector", "struct"):
            dt, lay = types[kind]
            for method, make in _cases(lay, dt, 3, False).items():
                problems += _check(
                    mpi,
                    comm,
                    method,
                    make,
                    ops["affine"],
                    {"level": "associative"},
                    f"{form} {method} {kind} on {layout}",
                    form=form,
                )
    mpi.assert_all(not problems, "; ".join(problems[:3]))


@pytest.mark.mpi(min_size=2)
def test_whole_elements_across_segments(mpi, types, ops):
    """Segments and blocks never cut an element: vectors long enough to be cut into
    segments (a small segment size) combine whole elements."""
    import wacoll

    problems = []
    for layout in mpi.layouts:
        comm = wacoll.Comm(
            WORLD,
            mpi.topology(layout),
            level="associative",
            segment_size=100,
            threshold=64,
        )
        try:
            for kind in ("vector", "struct"):
                dt, lay = types[kind]
                for method, make in _cases(lay, dt, 17, False).items():
                    problems += _check(
                        mpi,
                        comm,
                        method,
                        make,
                        ops["affine"],
                        {},
                        f"{method} {kind} on {layout}",
                        plan=False,
                    )
        finally:
            comm.Free()
    mpi.assert_all(not problems, "; ".join(problems[:3]))
