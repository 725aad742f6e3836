"""A loop over many counts: every call right, one plan per size class.

A call of a count whose size class has a plan already runs that plan with the
count's block sizes (:mod:`wacoll.plans.retarget`); these tests run loops that
cycle many counts (the class's first and last, odd ones, the next class), with the
default configuration (``level=None``, MPI's own promise: the selection's plans),
on every multi-cluster layout, compare each result with the MPI library's, and
check that a size class planned once: the calls of a class run the same
programs.
"""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

OPS = (
    "Bcast",
    "Reduce",
    "Allreduce",
    "Gather",
    "Scatter",
    "Allgather",
    "Alltoall",
    "Reduce_scatter_block",
    "Scan",
)
#: Counts cycled: classes of 8-byte elements (1024-2047: one class; 5-7 another;
#: 3 and 2 share one; 2048 starts the next).
COUNTS = (1024, 1500, 2047, 1031, 5, 7, 6, 3, 2, 2048, 3000, 1)


def _run(comm, op, n, rank, size):
    send = np.arange(n * size, dtype=np.float64) + 1000.0 * rank
    out = np.full(n * size, -1.0)
    if op == "Bcast":
        out[:n] = send[:n] if rank == 1 else -1.0
        comm.Bcast(out[:n], root=1)
        return out[:n]
    if op == "Reduce":
        comm.Reduce(send[:n], out[:n] if rank == 0 else None, op=MPI.SUM, root=0)
        return out[:n] if rank == 0 else None
    if op == "Allreduce":
        comm.Allreduce(send[:n], out[:n], op=MPI.SUM)
        return out[:n]
    if op == "Gather":
        comm.Gather(send[:n], out if rank == 0 else None, root=0)
        return out if rank == 0 else None
    if op == "Scatter":
        comm.Scatter(send if rank == 0 else None, out[:n], root=0)
        return out[:n]
    if op == "Allgather":
        comm.Allgather(send[:n], out)
        return out
    if op == "Alltoall":
        comm.Alltoall(send, out)
        return out
    if op == "Reduce_scatter_block":
        comm.Reduce_scatter_block(send, out[:n], op=MPI.SUM)
        return out[:n]
    comm.Scan(send[:n], out[:n], op=MPI.SUM)
    return out[:n]


def _program(comm):
    plan = comm.last_plan
    if plan is None:
        return None
    return getattr(plan, "program", None) or plan.programs[comm.Get_rank()]


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("op", OPS)
def test_loops_over_many_counts_match_the_library(mpi, op):
    rank, size = mpi.rank, mpi.size
    problems = []
    for layout in mpi.multi:
        comm = mpi.comm(layout, level=None)
        programs = {}  # (size class, family) -> the programs its calls ran
        for _ in range(2):
            for n in COUNTS:
                got = _run(comm, op, n, rank, size)
                want = _run(mpi.world, op, n, rank, size)
                if got is not None and not np.array_equal(got, want):
                    problems.append(f"{layout} {op} count {n}: {got[:4]} != {want[:4]}")
                if comm.last_route != "library":
                    key = ((n * 8).bit_length(), comm.last_family)
                    programs.setdefault(key, set()).add(repr(_program(comm)))
        for (size_class, family), ran in programs.items():
            if len(ran) > 1:
                problems.append(
                    f"{layout} {op}: the calls of size class {size_class} ran "
                    f"{len(ran)} different {family} programs"
                )
    mpi.assert_all(not problems, "; ".join(problems[:3]))


def _recorded_for_classes(comm):
    """How many class keys the communicator's recordings hold (calls recorded for
    every count of a size class)."""
    from wacoll.mpi._fastcall import CountClasses

    return sum(type(v) is CountClasses for v in comm._route.recorded.values())


#: New counts of the class of 1024-2047 float64, each met once.
NEW_COUNTS = tuple(range(1026, 1046)) + (2047, 1777)


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("op", OPS)
def test_every_new_count_of_a_recorded_class_replays(mpi, op):
    """Once a call of a size class is recorded for every count of the class, each
    new count of the class replays it (route ``replayed``: no reading afresh,
    planning or lowering) with results equal to the library's. A class is
    recorded so where its work follows from the count: the library's
    collective, a plan whose blocks all hold the count, or one whose blocks are
    the vector's segments."""
    rank, size = mpi.rank, mpi.size
    problems, replayed = [], {}
    for layout in mpi.layouts:
        comm = mpi.comm(layout, level=None)
        for n in (1024, 1024, 1025, 1025, 1024):  # recorded (a loop, not one call)
            _run(comm, op, n, rank, size)
        routes = []
        for n in NEW_COUNTS:
            got = _run(comm, op, n, rank, size)
            routes.append(comm.last_route)
            want = _run(mpi.world, op, n, rank, size)
            if got is not None and not np.array_equal(got, want):
                problems.append(f"{layout} {op} count {n}: {got[:4]} != {want[:4]}")
        classes = _recorded_for_classes(comm)
        replayed[layout] = routes.count("replayed")
        if classes and replayed[layout] != len(NEW_COUNTS):
            problems.append(f"{layout} {op}: recorded for the class, yet ran {routes}")
    mpi.assert_all(not problems, "; ".join(problems[:3]))
    if op in ("Bcast", "Allreduce", "Allgather"):  # these replay on every layout
        mpi.assert_all(
            all(replayed.values()), f"{op}: new counts not replayed: {replayed}"
        )


@pytest.mark.mpi(min_size=2)
def test_a_replayed_class_call_whose_count_differs_raises_everywhere(mpi):
    """A call replayed for a new count of its class on every rank, one rank's
    count differing from the others' (same class): every rank raises the same
    error, at the call or at the next Barrier; no rank's buffer receives data
    that is not its own call's."""
    for layout in mpi.layouts:
        comm = wacoll_comm(mpi, layout)
        out = np.zeros(2047)
        for n in (1024, 1024, 1025, 1025):
            comm.Bcast(out[:n], root=0)
        comm.Bcast(out[:1030], root=0)
        assert comm.last_route == "replayed"
        n = 1100 + (mpi.rank == 1)
        out[:] = -1.0 if mpi.rank else 7.0

        def differ_then_barrier():
            comm.Bcast(out[:n], root=0)
            comm.Barrier()

        mpi.same_error(differ_then_barrier, match="disagree")
        # nothing of rank 0's call landed where its own count differs
        mpi.assert_all(
            mpi.rank != 1 or (out == -1.0).all(), "the disagreeing rank's buffer"
        )
        comm.Free()


def wacoll_comm(mpi, layout):
    import wacoll

    return wacoll.Comm(mpi.world, mpi.topology(layout))


#: Families whose Allreduce plans on two clusters cut the vector into segments.
SEGMENTED = ("modern", "hierarchical", "recent")


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("family", SEGMENTED)
def test_a_learned_segmented_plan_replays_every_new_count(
    mpi, family, monkeypatch, tmp_path_factory
):
    """A plan whose blocks are segments of the vector (learning's choice, read
    from a tuning file: not a family forced, which plans each count exactly)
    runs every new count of its size class replayed, its sizes computed from the
    count by the compiled runner (:func:`wacoll.mpi.runner.count_units`), with
    results equal to the library's."""
    import json

    import wacoll

    rank, size = mpi.rank, mpi.size
    where = tmp_path_factory.mktemp("tuning") if rank == 0 else None
    path = mpi.world.bcast(None if where is None else str(where / "tuning.json"))
    if rank == 0:
        choice = {
            "op": "allreduce", "size_class": (1024 * 8).bit_length(), "dtype": "<f8",
            "operator": "SUM", "level": "commutative", "root": None, "family": family,
        }  # fmt: skip
        with open(path, "w") as fh:
            json.dump({"format": 1, "choices": [choice]}, fh)
    mpi.world.Barrier()
    monkeypatch.setenv("WACOLL_TUNING", path)
    comm = wacoll.Comm(mpi.world, mpi.topology(mpi.multi[0]), learn="on")
    try:
        problems, routes, segments = [], [], set()
        for n in (1024, 1024, 1025, 1025, 1024) + NEW_COUNTS:
            got = _run(comm, "Allreduce", n, rank, size)
            routes.append(comm.last_route)
            segments.add(len(comm.last_plan.counts))
            want = _run(mpi.world, "Allreduce", n, rank, size)
            if not np.array_equal(got, want):
                problems.append(f"count {n}: {got[:4]} != {want[:4]}")
        mpi.assert_all(not problems, "; ".join(problems[:3]))
        mpi.assert_all(comm.last_family == family, f"ran {comm.last_family}")
        mpi.assert_all(min(segments) > 1, f"blocks per call: {segments}")
        new = routes[-len(NEW_COUNTS) :]
        mpi.assert_all(new.count("replayed") == len(new), f"routes: {new}")
    finally:
        comm.Free()
