"""The object collectives (``comm.bcast(obj)``, ``comm.allreduce(x, op)``, ...).

Each case runs a ``wacoll.Comm`` lower-case method and the same method of the plain
mpi4py ``COMM_WORLD`` (the MPI library's own collectives) on the same objects, on
every layout of the suite, and the ranks agree that the results are the same: same
type, same pickle. Objects: None, an int, a str, a dict, a numpy array, 1 MiB of
bytes, and a different type on each rank. Rooted calls run from every root (the
1 MiB objects from the first and last). Reductions run every predefined operator
mpi4py applies to objects, Python callables and ``MPI.Op.Create`` operators, at
every level the operator allows. A non-associative operator that shows its own
expression tree checks the order: at ``strict`` the canonical tree (mpi4py's own
for reduce and allreduce, the left fold for scan), at ``associative`` any grouping
but the operands in rank order.

Faults (a root out of range, a sequence of the wrong length, an object that cannot
be pickled, an operator that raises, on one rank) must raise the same exception on
every rank, and nobody may hang.
"""

from __future__ import annotations

import pickle
import threading

import numpy as np
import pytest
from mpi4py import MPI

import wacoll
import wacoll.errors
from wacoll.errors import PlanError, WacollError
from wacoll.mpi import objects, pickled

P = MPI.COMM_WORLD.Get_size()
ME = MPI.COMM_WORLD.Get_rank()
W = MPI.COMM_WORLD
LAST = P - 1
LEVELS = ("strict", "associative", "commutative")
KINDS = ("none", "int", "str", "dict", "array", "bytes", "mixed")


def obj(kind, rank, seed=0):
    """An object of ``kind`` that says which rank and seed it came from."""
    if kind == "none":
        return None
    if kind == "int":
        return rank * 7 - 3 + seed
    if kind == "str":
        return f"r{rank}s{seed}"
    if kind == "dict":
        return {"rank": rank, "seed": seed, "items": [rank, "x", (seed, None)]}
    if kind == "array":
        return np.arange(rank + 2, dtype=np.float64) * (rank + 1) + seed
    if kind == "bytes":
        return bytes([rank % 251, seed % 251, 7, 0]) * (1 << 18)  # 1 MiB
    mixed = [
        None,
        rank,
        f"s{rank}",
        {"r": rank},
        np.full(3, rank, np.int32),
        rank / 3,
        (rank, "t"),
        [seed],
    ]
    return mixed[(rank + seed) % len(mixed)]


def same(got, want):
    """``(ok, detail)``: same type and the same pickle (arrays: dtype, shape, bits)."""
    ok = type(got) is type(want) and pickle.dumps(got, 5) == pickle.dumps(want, 5)
    return ok, "" if ok else f"got {_short(got)}, want {_short(want)}"


def _short(x):
    text = repr(x)
    return text if len(text) < 120 else text[:117] + "..."


#: Roots tried: the first, a middle and the last rank (every root costs a full
#: matrix; these three cover a root that coordinates, one inside and one at the end).
SOME_ROOTS = sorted({0, P // 2, LAST})


def roots(kind):
    return sorted({0, LAST}) if kind == "bytes" else SOME_ROOTS


# ------------------------------------------------------------------ data movement
@pytest.mark.matrix
@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("op", ["bcast", "gather", "scatter", "allgather", "alltoall"])
def test_movement(mpi, layout, op, kind):
    comm = mpi.comm(layout)
    problems = []

    def check(what, got, want, mine=None):
        ok, detail = same(got, want)
        if not ok:
            problems.append(f"{what}: {detail}")
        # a result is a new object, never the caller's (as mpi4py's)
        if mine is not None and got is mine:
            problems.append(f"{what}: the result is the caller's object")

    for root in roots(kind) if op in ("bcast", "gather", "scatter") else [None]:
        if op == "bcast":
            mine = obj(kind, ME, root) if ME == root else "ignored"
            got = comm.bcast(mine, root=root)
            check(
                f"root {root}",
                got,
                W.bcast(mine, root=root),
                mine if kind in ("dict", "array", "mixed") else None,
            )
        elif op == "gather":
            mine = obj(kind, ME, root)
            check(f"root {root}", comm.gather(mine, root), W.gather(mine, root))
        elif op == "scatter":
            seq = [obj(kind, j, root) for j in range(P)] if ME == root else None
            check(f"root {root}", comm.scatter(seq, root), W.scatter(seq, root))
        elif op == "allgather":
            mine = obj(kind, ME)
            check("allgather", comm.allgather(mine), W.allgather(mine))
        else:
            seq = tuple(obj(kind, ME * P + j) for j in range(P))
            check("alltoall", comm.alltoall(seq), W.alltoall(seq))
    if op != "bcast":
        # (an allgather runs the buffer Allgather of wacoll.mpi.pickled: a plan of
        # that operation, or the MPI library's own collective)
        ran = comm.last_family if comm.last_plan is None else comm.last_plan.op
        problems += (
            []
            if ran in (op, "native") and (ran == op or op == "allgather")
            else [f"ran {ran}"]
        )
    mpi.assert_all(not problems, f"{op} {kind} {layout}: " + "; ".join(problems[:3]))


@pytest.mark.mpi(min_size=1)
def test_none_sequences_and_generators(mpi):
    """mpi4py reads None as ``size`` Nones and takes any iterable of ``size`` items."""
    comm = mpi.comm(mpi.multi[0] if mpi.multi else "single")
    problems = []
    for root in range(P):
        if comm.scatter(None, root=root) is not None:
            problems.append(f"scatter(None) from {root}")
        seq = (f"g{j}" for j in range(P)) if ME == root else None
        if comm.scatter(seq, root=root) != f"g{ME}":
            problems.append(f"scatter(generator) from {root}")
    if comm.alltoall(None) != [None] * P:
        problems.append("alltoall(None)")
    if comm.alltoall(range(ME, ME + P)) != [j + ME for j in range(P)]:
        problems.append("alltoall(range)")
    mpi.assert_all(not problems, "; ".join(problems))


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize(
    "family,op",
    [
        ("mpich", "bcast"),
        ("mpich", "gather"),
        ("mpich", "scatter"),
        ("mpich", "allgather"),
        ("mpich", "alltoall"),
        ("tree", "bcast"),
        ("gridmpi", "bcast"),
        ("gridmpi", "allgather"),
        ("combining", "alltoall"),
        ("magpie", "bcast"),
        ("magpie", "alltoall"),
    ],
)
def test_forced_families(mpi, layout, family, op):
    comm = mpi.comm(layout)
    problems = []
    for root in SOME_ROOTS if op in ("bcast", "gather", "scatter") else [None]:
        kw = {} if root is None else {"root": root}
        if op == "bcast":
            mine = obj("mixed", ME, root)
            got, want = comm.bcast(mine, family=family, **kw), W.bcast(mine, **kw)
        elif op == "gather":
            mine = obj("mixed", ME, root)
            got, want = comm.gather(mine, family=family, **kw), W.gather(mine, **kw)
        elif op == "scatter":
            seq = [obj("mixed", j) for j in range(P)] if ME == root else None
            got, want = comm.scatter(seq, family=family, **kw), W.scatter(seq, **kw)
        elif op == "allgather":
            got, want = (
                comm.allgather(obj("dict", ME), family=family),
                W.allgather(obj("dict", ME)),
            )
        else:
            seq = [obj("mixed", ME * P + j) for j in range(P)]
            got, want = comm.alltoall(seq, family=family), W.alltoall(seq)
        ok, detail = same(got, want)
        if not ok:
            problems.append(f"root {root}: {detail}")
        if comm.last_plan.family != family:
            problems.append(f"ran the {comm.last_plan.family} family")
    mpi.assert_all(not problems, f"{family} {op}: " + "; ".join(problems[:3]))


# ------------------------------------------------------------------ reductions
def _expr(a, b):
    """Shows its expression tree: neither commutative nor associative."""
    return f"({a} {b})"


def _matmul(a, b, datatype=None):
    return a @ b


def _ints_add(a, b, datatype=None):
    return a + b


MATMUL = MPI.Op.Create(_matmul, commute=False)
ADD = MPI.Op.Create(_ints_add, commute=True)


def _matrix(rank):
    return np.array([[1, rank + 1], [rank % 3, 1]], dtype=np.int64)


#: name -> (operator, value of a rank, commutative and associative on these values,
#: associative on these values)
OPERATORS = {
    "SUM-int": (MPI.SUM, lambda r: 3 * r + 1, True, True),
    "SUM-str": (MPI.SUM, lambda r: f"<{r}>", False, True),
    "SUM-list": (MPI.SUM, lambda r: [r, None], False, True),
    "SUM-array": (MPI.SUM, lambda r: np.arange(4.0) * (r % 5 - 2), True, True),
    "PROD": (MPI.PROD, lambda r: r % 3 + 1, True, True),
    "MAX": (MPI.MAX, lambda r: (r * 5) % 7, True, True),
    "MIN-str": (MPI.MIN, lambda r: f"k{(r * 5) % 7}", True, True),
    "MAXLOC": (MPI.MAXLOC, lambda r: (r % 3, r), True, True),
    "MINLOC": (MPI.MINLOC, lambda r: (r % 3, r), True, True),
    "LAND": (MPI.LAND, lambda r: r % 5 != 4, True, True),
    "BXOR": (MPI.BXOR, lambda r: 1 << (r % 6), True, True),
    "REPLACE": (MPI.REPLACE, lambda r: obj("mixed", r), False, True),
    "NO_OP": (MPI.NO_OP, lambda r: obj("mixed", r), False, True),
    "callable": (lambda a, b: a + b, lambda r: (r,), False, True),
    "expression": (_expr, str, False, False),
    "Op.Create": (MATMUL, _matrix, False, True),
    "Op.Create-commute": (ADD, lambda r: r * r, True, True),
}


def _fold(op, values):
    acc = values[0]
    for v in values[1:]:
        acc = op(acc, v)
    return acc


def _flat(text):
    return text.replace("(", "").replace(")", "")


@pytest.mark.matrix
@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("name", list(OPERATORS))
@pytest.mark.parametrize("method", ["reduce", "allreduce", "scan", "exscan"])
def test_reductions(mpi, layout, method, name):
    op, value, commutes, associative = OPERATORS[name]
    comm = mpi.comm(layout)
    mine = value(ME)
    everyone = [value(r) for r in range(P)]
    problems = []
    levels = LEVELS if commutes else LEVELS[:2]
    for level in (None, *levels):  # None: a communicator left at its default level
        for root in SOME_ROOTS if method == "reduce" else [None]:
            kw = {} if root is None else {"root": root}
            if level is None:
                got = getattr(mpi.comm(layout, level=None), method)(mine, op, **kw)
            else:
                got = getattr(comm, method)(mine, op, level=level, **kw)
            if method in ("scan", "exscan"):
                upto = ME + 1 if method == "scan" else ME
                want = _fold(op, everyone[:upto]) if upto else None
                if associative:  # and the MPI library's own agrees
                    ok, detail = same(getattr(W, method)(mine, op), want)
                    if not ok:
                        problems.append(f"mpi4py {method}: {detail}")
            else:
                want = getattr(W, method)(mine, op, **kw)
            if name == "expression" and level != "strict" and want is not None:
                # any grouping, operands in rank order
                ok = isinstance(got, str) and _flat(got) == _flat(want)
                detail = f"got {got!r}, want {want!r} regrouped"
            else:
                ok, detail = same(got, want)
            if not ok:
                problems.append(f"{level} root {root}: {detail}")
    mpi.assert_all(not problems, f"{method} {name} {layout}: " + "; ".join(problems[:3]))


@pytest.mark.mpi(min_size=1)
def test_strict_expression_is_canonical_on_every_layout(mpi):
    """At strict, the same expression tree on every layout (mpi4py's for allreduce)."""
    problems = []
    want = W.allreduce(str(ME), _expr)
    for layout in mpi.layouts:
        comm = mpi.comm(layout)
        got = comm.allreduce(str(ME), _expr)
        if got != want:
            problems.append(f"{layout}: {got} != {want}")
    mpi.assert_all(not problems, "; ".join(problems[:3]))


@pytest.mark.mpi(min_size=1)
def test_communicator_level_and_arrival_order(mpi, layout):
    """The Comm's own level applies; the tree family's arrival-order groups combine."""
    comm = mpi.comm(layout, level="commutative")
    problems = []
    if comm.allreduce(ME + 1) != P * (P + 1) // 2:
        problems.append("allreduce at the communicator's level")
    if comm.last_plan.level != "commutative":
        problems.append(f"ran at {comm.last_plan.level}")
    for root in SOME_ROOTS:
        got = comm.reduce(ME * ME, ADD, root=root, family="tree", arrival=True)
        if got != (sum(r * r for r in range(P)) if ME == root else None):
            problems.append(f"tree reduce to {root}: {got}")
        got = comm.allreduce(ME, MPI.MAX, family="tree", arrival=True)
        if got != LAST:
            problems.append(f"tree allreduce with arrival order: {got}")
    mpi.assert_all(not problems, "; ".join(problems[:3]))


# ------------------------------------------------------------------ pickling
@pytest.mark.mpi(min_size=1)
def test_pickler_settings_apply_and_each_pickle_is_loaded_once(mpi):
    """``MPI.pickle.__init__`` applies; forwarders do not unpickle and repickle."""
    counts = {"dumps": 0, "loads": 0}

    def dumps(o, protocol=None):
        counts["dumps"] += 1
        return pickle.dumps(o, protocol)

    def loads(data):
        counts["loads"] += 1
        return pickle.loads(data)

    comm = mpi.comm(mpi.multi[0] if mpi.multi else "single")
    MPI.pickle.__init__(dumps, loads)
    try:
        got = comm.bcast(obj("dict", 0) if ME == 0 else None, root=0)
        seen = dict(counts)
    finally:
        MPI.pickle.__init__()
    ok = got == obj("dict", 0) and seen == {"dumps": int(ME == 0), "loads": 1}
    mpi.assert_all(ok, f"{seen}, {got!r}")


@pytest.mark.mpi(min_size=2)
def test_magpie_bcast_crosses_the_wide_area_once_per_cluster(mpi):
    """One frame per plan message: a 1 MiB object crosses once into each cluster."""
    problems = []
    for layout in mpi.multi:
        topo = mpi.topology(layout)
        comm = mpi.comm(layout, trace=True)
        big = obj("bytes", LAST)
        for root in sorted({0, LAST}):
            comm.tracer.records.clear()
            # (the plan over pickled frames: without a family, bcast runs
            # wacoll.mpi.pickled's buffer Bcast)
            got = comm.bcast(big if ME == root else None, root=root, family="magpie")
            if got != big:
                problems.append(f"{layout} root {root}: wrong object")
            steps = [r for r in comm.tracer.records if r["cat"] == "step"]
            sends = [r for r in steps if r["name"].startswith("send")]
            recvs = [r for r in steps if r["name"].startswith("recv")]
            wide = sum(
                topo.cluster_of(r["args"]["peer"]) != topo.cluster_of(ME) for r in sends
            )
            frame = len(MPI.pickle.dumps(big)) + 5 + 12
            mine = (len(sends), len(recvs), wide, [r["args"]["bytes"] for r in recvs])
            everyone = W.allgather(mine)
            total_wide = sum(e[2] for e in everyone)
            if ME == 0 and total_wide != topo.nclusters - 1:
                problems.append(
                    f"{layout} root {root}: {total_wide} wide-area messages "
                    f"for {topo.nclusters} clusters"
                )
            if ME == 0 and sum(e[0] for e in everyone) != P - 1:
                problems.append(
                    f"{layout} root {root}: {sum(e[0] for e in everyone)} messages"
                )
            if len(recvs) != (ME != root) or any(b != frame for b in mine[3]):
                problems.append(
                    f"{layout} root {root}: received {mine[3]}, want one "
                    f"frame of {frame} bytes"
                )
            if comm.last_plan.family != "magpie":
                problems.append(f"ran {comm.last_plan.family}")
    mpi.assert_all(not problems, "; ".join(problems[:3]))


# ------------------------------------------------------------------ faults
def _comm(mpi):
    return mpi.comm(mpi.multi[0] if mpi.multi else "single")


UNPICKLABLE = threading.Lock()


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("bad", [-1, "size"])
@pytest.mark.parametrize("method", ["bcast", "gather", "scatter", "reduce"])
def test_root_out_of_range(mpi, method, bad):
    """MPI.Exception (ERR_ROOT) on every rank, as the MPI library's own."""
    comm = _comm(mpi)
    root = P if bad == "size" else bad
    args = {"bcast": (1,), "gather": (1,), "scatter": (None,), "reduce": (1, MPI.SUM)}
    call = getattr(comm, method)
    mpi.same_error(lambda: call(*args[method], root=root), wacoll.errors.RootError)
    _, exc = mpi.outcome(lambda: call(*args[method], root=root))
    _, ref = mpi.outcome(lambda: getattr(W, method)(*args[method], root=root))
    ok = (
        isinstance(ref, MPI.Exception)
        and isinstance(exc, MPI.Exception)
        and exc.Get_error_class() == ref.Get_error_class() == MPI.ERR_ROOT
    )
    mpi.assert_all(ok, f"{exc!r} / MPI's {ref!r}")


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("method", ["bcast", "gather", "scatter", "reduce"])
def test_root_of_the_wrong_type(mpi, method):
    """A named wacoll error that is also mpi4py's TypeError, on every rank."""
    comm = _comm(mpi)
    args = {"bcast": (1,), "gather": (1,), "scatter": (None,), "reduce": (1, MPI.SUM)}
    call = getattr(comm, method)
    _, ref = mpi.outcome(lambda: getattr(MPI.COMM_SELF, method)(*args[method], root="0"))
    mpi.same_error(lambda: call(*args[method], root="0"), wacoll.errors.RootTypeError)
    _, exc = mpi.outcome(lambda: call(*args[method], root="0"))
    mpi.assert_all(
        isinstance(exc, type(ref)) and isinstance(ref, TypeError),
        f"{exc!r} / mpi4py's {ref!r}",
    )


@pytest.mark.mpi(min_size=1)
def test_an_operator_that_is_not_callable(mpi):
    """A named wacoll error that is also the TypeError mpi4py's object reduction
    meets when it applies the operator (at any size: wacoll checks it first)."""
    comm = _comm(mpi)
    mpi.same_error(lambda: comm.allreduce(1, op=5), wacoll.errors.OperatorTypeError)
    assert issubclass(wacoll.errors.OperatorTypeError, TypeError)


@pytest.mark.mpi(min_size=1)
def test_wrong_sequence_length_at_the_root(mpi):
    """mpi4py's ValueError (TypeError if not iterable), on every rank."""
    comm = _comm(mpi)
    _, ref = mpi.outcome(lambda: MPI.COMM_SELF.scatter([1, 2]))
    for root in sorted({0, LAST}):
        for seq, kind in (
            ([1] * (P + 1), ValueError),
            (list(range(P - 1)), ValueError),
            (5, TypeError),
        ):
            named = (
                wacoll.BufferMismatchError
                if kind is ValueError
                else wacoll.errors.BufferTypeError
            )
            msg = mpi.same_error(
                lambda: comm.scatter(seq if ME == root else None, root),
                named,
                match=f"rank {root}",
            )
            assert issubclass(named, kind)
            if kind is ValueError:
                assert type(ref) is ValueError and "items" in msg
    bad = [0] * (P + 1) if ME == LAST else [0] * P
    mpi.same_error(lambda: comm.alltoall(bad), ValueError, match=f"rank {LAST}")


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize(
    "method",
    [
        "bcast",
        "gather",
        "scatter",
        "allgather",
        "alltoall",
        "reduce",
        "allreduce",
        "scan",
        "exscan",
    ],
)
def test_unpicklable_object_on_one_rank(mpi, layout, method):
    """The pickler's TypeError, from the rank at fault, on every rank."""
    comm = mpi.comm(layout)
    for bad in sorted({0, LAST}):
        root = LAST - bad  # the faulty rank is the root, or is not, where P > 1
        mine = UNPICKLABLE if ME == bad else ME
        if method in ("bcast", "gather", "reduce"):
            call = (
                (lambda: getattr(comm, method)(mine, root=root))
                if method != "bcast"
                else (lambda: comm.bcast(mine, root=bad))
            )
        elif method == "scatter":
            seq = [0] * P
            seq[root if P > 1 else 0] = UNPICKLABLE
            call = lambda: comm.scatter(seq if ME == bad else None, root=bad)
        elif method == "alltoall":
            call = lambda: comm.alltoall([mine] * P)
        else:
            call = lambda: getattr(comm, method)(mine)
        mpi.same_error(call, TypeError, match=f"rank {bad}: cannot pickle")
    # and the communicator still works
    mpi.assert_equal(comm.allgather(ME), list(range(P)))


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("method", ["reduce", "allreduce", "scan", "exscan"])
def test_operator_errors(mpi, method):
    """An operator that raises, or mixed types it cannot combine: nobody hangs, every
    rank raises the operator's exception. Where a status round runs (reduce, scan,
    exscan) it is the same one everywhere; an allreduce whose every rank combines
    locally raises each rank's own."""
    comm = _comm(mpi)
    call = getattr(comm, method)
    combines = P > 2 if method == "exscan" else P > 1

    def boom(a, b):
        raise KeyError("boom")

    for op, mine, kind in (
        (MPI.SUM, "text" if ME == 0 else ME, TypeError),
        (boom, ME, KeyError),
    ):
        if not combines:
            mpi.assert_equal(mpi.outcome(lambda: call(mine, op))[1], None, "no error")
        elif method == "allreduce":
            _, exc = mpi.outcome(lambda: call(mine, op))
            mpi.assert_all(type(exc) is kind, f"raised {exc!r}")
        else:
            mpi.same_error(lambda: call(mine, op), kind)
    mpi.assert_equal(comm.allreduce(1), P)


@pytest.mark.mpi(min_size=1)
def test_level_faults(mpi):
    comm = _comm(mpi)
    mpi.same_error(
        lambda: comm.allreduce(str(ME), lambda a, b: a + b, level="commutative"),
        WacollError,
        match="commutative",
    )
    mpi.same_error(
        lambda: comm.allreduce(str(ME), MATMUL, level="commutative"),
        WacollError,
        match="commutative",
    )
    mpi.same_error(lambda: comm.reduce(ME, level="sloppy"), WacollError, match="level")
    mpi.same_error(lambda: comm.allreduce(ME, None), TypeError, match="op must be")
    # a plan the family cannot build: the builder's PlanError, everywhere
    if P > 1:
        mpi.same_error(lambda: comm.allreduce(ME, family="gridmpi"), PlanError)
    mpi.assert_equal(comm.scan(1, MPI.SUM, level="commutative"), ME + 1)


@pytest.mark.mpi(min_size=2)
def test_without_validation_no_status_round(mpi):
    """``validate=False``: gather skips the status round; the ranks the fault reaches
    raise it, the others return, and nobody waits."""
    comm = mpi.comm(mpi.multi[0] if mpi.multi else "single", validate=False)
    _, exc = mpi.outcome(lambda: comm.gather(UNPICKLABLE if ME == 1 else ME, root=0))
    raised = isinstance(exc, TypeError)
    # ranks 0 and 1 know; a rank the fault passed through may know too
    mpi.assert_all(raised if ME in (0, 1) else exc is None or raised, f"raised {exc!r}")
    mpi.assert_equal(comm.gather(ME, root=0), list(range(P)) if ME == 0 else None)


@pytest.mark.mpi(min_size=1)
def test_frame_limit(mpi, monkeypatch):
    """A frame over the limit is a named error on every rank, not a hang."""
    comm = _comm(mpi)
    monkeypatch.setattr(objects, "MAX_MESSAGE", 1000)
    if P > 1:
        # (frames are the plans' over pickled objects: a family asks for one)
        mpi.same_error(
            lambda: comm.bcast(b"x" * 2000 if ME == 0 else None, root=0, family="mpich"),
            WacollError,
            match="exceeds",
        )
    mpi.assert_equal(comm.bcast(b"y" * 100 if ME == 0 else None, root=0), b"y" * 100)


@pytest.mark.mpi(min_size=1)
def test_barrier_and_derived_communicators(mpi, layout):
    comm = mpi.comm(layout)
    comm.barrier()
    mpi.assert_all(comm.last_plan.op == "barrier", comm.last_plan.op)
    dup = comm.Dup()
    try:
        mpi.assert_equal(dup.allgather(str(ME)), [str(r) for r in range(P)])
        assert isinstance(dup, wacoll.Comm)
    finally:
        dup.Free()


@pytest.mark.mpi(min_size=1)
def test_a_later_communicator_runs_its_part_of_a_proved_plan(mpi):
    # the first communicator proves the plan and keeps its proof; the second finds
    # it and derives only this rank's program (a RankPlan), with the same results
    # (gather: allgather and bcast run wacoll.mpi.pickled's buffer collectives)
    data = {"rank": ME, "name": "x" * ME}
    want = W.gather(data, 0)
    first, second = wacoll.Comm(W), wacoll.Comm(W)
    try:
        mpi.assert_all(first.gather(data, 0) == want, "first")
        W.Barrier()  # every proof stored
        mpi.assert_all(second.gather(data, 0) == want, "second")
        kinds = {
            type(plan).__name__ for plan, _ in second.route.dispatcher.plans.values()
        }
        mpi.assert_all(kinds == {"RankPlan"}, f"the second ran {kinds}")
    finally:
        first.Free()
        second.Free()


@pytest.mark.mpi(min_size=1)
def test_pickled_blocks_follow_the_objects(mpi):
    """allgather and bcast without a family send pickles in agreed blocks
    (wacoll.mpi.pickled): results as mpi4py's through growing and shrinking
    pickles, uneven across ranks; the block grows to fit and shrinks back."""
    comm = _comm(mpi)
    for n in (10, 5000, 5000, 10, 100000, 3, 0):
        mine = "x" * (n * (ME + 1))
        mpi.assert_equal(comm.allgather(mine), W.allgather(mine))
        root_obj = {"n": n, "data": b"y" * n} if ME == P - 1 else None
        mpi.assert_equal(comm.bcast(root_obj, root=P - 1), W.bcast(root_obj, root=P - 1))
    mpi.assert_all(
        pickled.block_size(comm) == pickled.FIRST_BLOCK,
        f"block {pickled.block_size(comm)} after small objects",
    )
    # a fault travels as data: every rank raises the lowest rank's
    mpi.same_error(
        lambda: comm.allgather(UNPICKLABLE if ME == P - 1 else ME),
        TypeError,
        match=f"rank {P - 1}:",
    )
    mpi.assert_equal(comm.allgather(ME), list(range(P)))
