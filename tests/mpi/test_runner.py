"""The compiled runner (:mod:`wacoll.mpi.runner`) against the Python executor.

Every family's plan of every operation, on every test layout, is run by both on the
same buffers; the results must be the same bytes. Integer sums and float maxima
are exact in any order, so the arrival-order groups the Python executor combines as
messages come cannot make the two differ. A runner is run three times (its work
area and request slots reused), and each run's results compared.
"""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

import wacoll.mpi._runner as _runner
from wacoll.errors import PlanError
from wacoll.mpi.executor import execute
from wacoll.mpi.runner import compile_program, handle
from wacoll.plans import FAMILIES, build, builders, lower

W = MPI.COMM_WORLD
P, ME = W.Get_size(), W.Get_rank()

CASES = [
    (family, op)
    for family in FAMILIES
    for op in sorted(builders(family))
    if not op.endswith("v") and op != "reduce_scatter"
]


def _build(op, topology, family, count):
    kwargs = {"count": count}
    if op in ("bcast", "scatter", "gather", "reduce"):
        kwargs["root"] = P - 1
    if op in ("reduce", "allreduce", "scan", "exscan", "reduce_scatter_block"):
        kwargs["level"] = "commutative"
    if op == "barrier":
        kwargs = {}
    return build(op, topology, family, **kwargs)


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("dtype,op", [("i8", MPI.SUM), ("f8", MPI.MAX)])
@pytest.mark.parametrize("family,operation", CASES)
def test_runner_matches_executor(mpi, layout, family, operation, dtype, op):
    topology = mpi.topology(layout)
    try:
        plan = _build(operation, topology, family, 5)
    except PlanError:
        return  # a family that does not plan this operation on this layout
    program = lower(plan, ME)
    compiled = compile_program(program, np.dtype(dtype), op)
    ok = W.allreduce(compiled is not None, op=MPI.LAND)  # every rank runs, or none
    if ok:
        comm = W.Dup()
        runner = compiled.runner(comm)
        rng = np.random.default_rng(ME)
        for round_ in range(3):
            inbuf = rng.integers(-50, 50, program.in_extent).astype(dtype)
            expected = np.full(program.out_extent, 7, dtype)
            got = expected.copy()
            execute(program, comm, inbuf, expected, op=op, tag=100)
            runner.run(inbuf.ctypes.data, got.ctypes.data, 200 + round_)
            ok = ok and expected.tobytes() == got.tobytes()
        comm.Free()
    mpi.assert_all(ok, f"{family} {operation} on {layout}")


@pytest.mark.mpi(min_size=1)
def test_runner_refuses_tables_that_leave_their_memory():
    """A runner follows its tables without checks: it refuses bad ones up front."""
    from wacoll import Topology

    plan = build("allgather", Topology.from_sizes([P]), "magpie", count=3)
    compiled = compile_program(lower(plan, ME), np.dtype("f8"))
    good = compiled.runner(MPI.COMM_SELF)  # the real tables are accepted
    assert good.work.size >= compiled.work_bytes
    bad = []
    runs = compiled.runs.copy()
    runs[0, 0] = 5  # no such buffer
    bad.append((compiled.steps, runs, compiled.work_bytes))
    runs = compiled.runs.copy()
    runs[:, 2] += 8  # runs longer than the bytes moved
    bad.append((compiled.steps, runs, compiled.work_bytes))
    steps = compiled.steps.copy()
    steps[0, 4] = len(compiled.runs)  # runs beyond the table
    bad.append((steps, compiled.runs, compiled.work_bytes))
    steps = compiled.steps.copy()
    steps[0, 0] = 9  # an unknown kind
    bad.append((steps, compiled.runs, compiled.work_bytes))
    for steps, runs, work in bad:
        with pytest.raises(ValueError):
            _runner.Runner(steps, runs, work, handle(MPI.COMM_SELF), -1, -1, 8)


def _uniform_call(op, count):
    from wacoll.plans import Call
    from wacoll.plans import operations as ops

    s = ops.spec(op)
    return Call(
        op,
        count=count,
        root=1 if s.rooted else None,
        itemsize=8,
        level="commutative" if s.kind == "reduction" else None,
    )


#: The families with plans whose blocks are segments of the vector (at 2 + 3
#: ranks: gridmpi's cut the vector at two splits at once, retargeted count by count).
SEGMENTED = ("magpie", "mpich", "tree", "modern", "hierarchical", "recent")


def _class_plans(family, op, base, topo):
    """The plans a size class of ``op`` at count ``base`` may run with
    ``family``: the selection's, and segmented ones where the operation cuts its
    vector (the builder's own choice of segments, then 3 and 5)."""
    from wacoll.plans import operations as ops
    from wacoll.plans import select

    call = _uniform_call(op, base)
    plans = []
    try:
        plans.append(select(call, topo, family=family).build(topo))
    except PlanError:
        pass
    if ops.spec(op).layout == "segments":
        for segments in (3, 5):
            try:
                plans.append(
                    build(
                        op,
                        topo,
                        family,
                        root=call.root,
                        count=base,
                        segments=segments,
                        level=call.level,
                    )
                )
            except (PlanError, TypeError):
                pass
    return plans


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("family", FAMILIES)
def test_a_runner_per_count_rewrites_its_tables_as_compiling_gives_them(mpi, family):
    """A runner made for every count of a size class (``Runner.per_count``, from
    :func:`~wacoll.mpi.runner.count_units`) rewrites its tables for another count
    exactly as compiling that count's program gives them: every step's bytes,
    staging area and runs, in a work area large enough; for a plan whose blocks
    hold the count (one part) and for one whose blocks are segments of the
    vector (read from two probe lowerings). The plan's ranks are shared among
    the processes."""
    from wacoll import Topology
    from wacoll.mpi.runner import count_units
    from wacoll.plans import operations as ops
    from wacoll.plans.retarget import count_parts, probe_lowered, retarget

    topo = Topology.from_sizes([2, 3])
    checked = {1: 0, "segments": 0}
    for op in sorted(builders(family)):
        if ops.spec(op).layout == "none" or op.endswith("v") or op == "reduce_scatter":
            continue
        for base in (8, 1024):
            for plan in _class_plans(family, op, base, topo):
                parts = count_parts(plan, base)
                if not parts:
                    continue
                for rank in range(ME, topo.size, P):

                    def compiled_for(counts):
                        return compile_program(
                            probe_lowered(plan, rank, counts), np.dtype("f8"), MPI.SUM
                        )

                    compiled = compile_program(lower(plan, rank), np.dtype("f8"), MPI.SUM)
                    if compiled is None:
                        continue
                    probes = None
                    if parts > 1:
                        probes = (
                            compiled_for((1,) * parts),
                            compiled_for(tuple(1 << i for i in range(parts))),
                        )
                    units = count_units(compiled, base, parts, probes)
                    assert units is not None, (op, base, rank, parts)
                    runner = compiled.runner(MPI.COMM_SELF)
                    runner.per_count(*units, base)
                    for count in (2 * base - 1, base + 3, base + parts - 1, base):
                        want = compile_program(
                            lower(retarget(plan, count), rank), np.dtype("f8"), MPI.SUM
                        )
                        assert runner.rescale(count)
                        steps, runs = runner.tables
                        assert np.array_equal(steps, want.steps), (op, count, rank)
                        assert np.array_equal(runs, want.runs), (op, count, rank)
                        assert runner.work.nbytes >= want.work_bytes
                        checked[1 if parts == 1 else "segments"] += 1
    assert W.allreduce(checked[1]) > 0, "no count-linear plan of this family"
    if family in SEGMENTED:
        assert W.allreduce(checked["segments"]) > 0, "no segmented plan checked"


@pytest.mark.mpi(min_size=2)
def test_a_verdict_stream_freed_unclosed_leaves_no_receive_posted(mpi):
    """A verdict stream freed without its ``close`` (a communicator the
    application never frees, at the end of the process) cancels the receives it
    has posted: a chunk a peer sends afterwards stays unmatched (found by a
    probe), where it was written into the stream's freed memory (during
    ``MPI_Finalize``, corrupting the heap: a crash at exit in some runs)."""
    import gc

    from wacoll.mpi.runner import handle, mpi_entry_points

    mpi_entry_points()
    comm = W.Dup()
    try:
        tag0 = 0
        stream = _runner.VerdictStream(comm, handle(comm), tag0)
        comm.Barrier()
        del stream
        gc.collect()
        comm.Barrier()  # every rank's stream is gone: its receives cancelled
        peer = (ME + 1) % P
        chunk = np.zeros(8, np.int64)
        request = comm.Isend(chunk, dest=peer, tag=tag0 + 1)
        status = MPI.Status()
        deadline = MPI.Wtime() + 10
        found = False
        while not found and MPI.Wtime() < deadline:
            found = comm.Iprobe(source=(ME - 1) % P, tag=tag0 + 1, status=status)
        if found:
            comm.Recv(np.zeros(8, np.int64), source=(ME - 1) % P, tag=tag0 + 1)
        request.Wait()
        mpi.assert_all(found, "the chunk was taken by a receive of the freed stream")
    finally:
        comm.Free()


@pytest.mark.mpi(min_size=1)
def test_a_per_count_runner_takes_counts_up_to_the_largest_message(mpi):
    """A segmented plan's runner takes a count whose every message fits in an
    MPI count (2**31 - 1 bytes), however close, and refuses the first that does
    not: a message of ``k`` segments holds ``k * q`` bytes and one more for each
    of them among the first ``r``, not ``k * (q + 1)``. Rank 1 of a 4-segment
    Reduce sends its segments (no work area to grow); its first send is made to
    carry all four."""
    from wacoll import Topology
    from wacoll.mpi.runner import count_units, mpi_entry_points
    from wacoll.plans.retarget import probe_lowered

    mpi_entry_points()
    plan = build(
        "reduce", Topology.from_sizes([2, 2]), "magpie", root=0, count=8,
        segments=4, level="commutative",
    )  # fmt: skip

    def compiled(counts):
        return compile_program(probe_lowered(plan, 1, counts), np.dtype("u1"), MPI.SUM)

    own = compiled((2,) * 4)
    tables = count_units(own, 8, 4, (compiled((1,) * 4), compiled((1, 2, 4, 8))))
    steps, runs = own.steps.copy(), own.runs.copy()
    first = int(steps[0, 4])  # (the first send's run)
    steps[0, 6] = runs[first, 2] = 8  # the whole vector of 8 bytes
    tables.steps[0, [0, 2]] = 4, 0b1111
    tables.runs[first, [1, 4]] = 4, 0b1111
    runner = _runner.Runner(steps, runs, 0, handle(MPI.COMM_SELF), -1, -1, 1)
    runner.per_count(*tables, 8)
    limit = 2**31 - 1
    assert runner.rescale(limit)  # q = 2**29 - 1, r = 3: 4q + 3 bytes
    assert runner.tables[0][0, 6] == limit
    assert not runner.rescale(limit + 1)
    assert runner.rescale(8) and runner.tables[0][0, 6] == 8
    with pytest.raises(ValueError):  # a runner takes its tables once
        runner.per_count(*tables, 8)
