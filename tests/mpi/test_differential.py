"""Random differential trials against the MPI library, and the faults they found.

:func:`test_differential_trials` runs a few hundred trials of
``tests/mpi/differential.py`` (random collective calls, each run on
``MPI.COMM_WORLD`` and on a ``wacoll.Comm`` with declared clusters, every buffer
compared byte for byte) and asserts that none mismatched and none was refused. The
larger runs are ``benchmarks/probe_differential.py``'s. The other tests pin what
the trials found, each against the library's own results:

* a persistent collective read a derived datatype's send data (packed as the call
  was read) and the in-place operand of ``Gatherv_init`` / ``Allgatherv_init`` once:
  a second ``Start`` after the application changed its buffers sent the old data;
* a strict ``Exscan`` on reproducible arithmetic converted rank 0's never-written
  accumulators into its receive buffer (MPI leaves that buffer alone), or raised
  ``AccumulatorOverflowError`` over what the scratch memory held;
* a communicator of family ``"han"`` raised ``AttributeError`` on every object
  call, and ``PlanError`` on reductions its library phases cannot combine (MINLOC
  pairs, a user operator on a derived type) where the library runs them;
* receive buffers of MPI's pair types (``DOUBLE_INT``: 12 data bytes in 16) got
  the senders' padding bytes, which MPI never writes.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from mpi4py import MPI

import wacoll
from wacoll import Topology

WORLD = MPI.COMM_WORLD
P = WORLD.Get_size()
ME = WORLD.Get_rank()


def _differential():
    name = "wacoll_tests_differential"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(
            name, Path(__file__).with_name("differential.py")
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return module


def _declared():
    """The declared clusters: ``WACOLL_CLUSTERS``'s, else two of consecutive ranks."""
    if os.environ.get("WACOLL_CLUSTERS"):
        return wacoll.topology_from_comm(WORLD)
    return Topology.from_sizes([P - P // 2, P // 2] if P > 1 else [1])


@pytest.mark.mpi(min_size=1)
def test_differential_trials():
    """A few hundred random calls: the library's bytes every time, no refusal
    (150 from 8 ranks up, where every rank shares a core with three others: the
    sizes below run 300 each)."""
    differential = _differential()
    trials = 300 if P < 8 else 150
    tally = differential.run_trials(trials, 2600 + P, _declared())
    report = "\n".join(tally.summary(10))
    assert tally.trials == trials
    assert tally.mismatches == 0 and tally.refusals == 0, report


# ---------------------------------------------------------------- persistent calls
def _persistent_cases():
    """``{name: (make, inputs)}``: ``make()`` gives fresh arrays and the ``_init``
    call's arguments; ``inputs`` names the arrays a second start reads anew."""
    vec = MPI.INT.Create_vector(2, 1, 2).Commit()  # ints 0 and 2 of 3
    counts = [r % 3 + 1 for r in range(P)]
    displs = [sum(counts[:r]) + r for r in range(P)]  # a gap after each block
    size = displs[-1] + counts[-1] + 1

    def allgather_derived():
        send, recv = np.arange(6, dtype="i") + 10 * ME, np.full(4 * P, -1, "i")
        return {"send": send, "recv": recv}, (
            "Allgather_init",
            ([send, 2, vec], [recv, MPI.INT]),
            {},
        )

    def bcast_derived():
        buf = np.arange(9, dtype="i") + (100 if ME == P - 1 else 0)
        return {"buf": buf}, ("Bcast_init", ([buf, 3, vec], P - 1), {})

    def gatherv_in_place():
        send = np.arange(counts[ME], dtype="d") + ME
        recv = np.full(size, -1.0)
        if ME == 0:
            recv[displs[0] : displs[0] + counts[0]] = send
        args = (
            MPI.IN_PLACE if ME == 0 else send,
            [recv, counts, displs, MPI.DOUBLE] if ME == 0 else None,
            0,
        )
        return {"send": send, "recv": recv}, ("Gatherv_init", args, {})

    def allgatherv_in_place():
        recv = np.full(size, -1.0)
        recv[displs[ME] : displs[ME] + counts[ME]] = np.arange(counts[ME]) + ME
        return {"recv": recv}, (
            "Allgatherv_init",
            (MPI.IN_PLACE, [recv, counts, displs, MPI.DOUBLE]),
            {},
        )

    cases = {
        "Allgather vector send": (allgather_derived, ("send",)),
        "Bcast vector": (bcast_derived, ("buf",)),
        "Gatherv in place": (gatherv_in_place, ("send", "recv")),
        "Allgatherv in place": (allgatherv_in_place, ("recv",)),
    }
    return cases, vec


def _start_twice(comm, make, inputs):
    """Start a persistent call, change its inputs in place, start it again: the
    arrays after each start."""
    arrays, (method, args, kwargs) = make()
    request = getattr(comm, method)(*args, **kwargs)
    seen = []
    for round_ in range(2):
        if round_:
            for name in inputs:
                arrays[name] += 1000
        request.Start()
        request.Wait()
        seen.append({k: a.copy() for k, a in arrays.items()})
    request.Free()
    return seen


@pytest.mark.mpi(min_size=2)
def test_persistent_calls_read_changed_inputs(mpi):
    """A second start sends the data the buffers hold then, as the library's does."""
    cases, vec = _persistent_cases()
    problems = []
    try:
        for layout in ["single"] + mpi.multi[:1]:
            comm = mpi.comm(layout)  # strict: plans run on one cluster too
            for name, (make, inputs) in cases.items():
                got, exc = mpi.outcome(lambda: _start_twice(comm, make, inputs))
                want = _start_twice(WORLD, make, inputs)
                if exc is not None:
                    problems.append(f"{name} on {layout}: raised {exc!r}")
                elif any(
                    g[k].tobytes() != w[k].tobytes() for g, w in zip(got, want) for k in w
                ):
                    problems.append(f"{name} on {layout}: got {got}, want {want}")
    finally:
        vec.Free()
    mpi.assert_all(not problems, "; ".join(problems[:3]))


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("form", ["blocking", "nonblocking", "persistent"])
def test_reproducible_exscan_leaves_rank0(mpi, form):
    """Rank 0 of an exscan receives nothing: its buffer keeps what it held, and a
    scratch area holding large accumulators from an earlier call raises nothing."""
    problems = []
    for layout in ["single"] + mpi.multi[:1]:
        comm = wacoll.Comm(
            WORLD, mpi.topology(layout), level="strict", arithmetic="reproducible"
        )
        try:
            # an earlier call leaves big accumulators in the scratch memory
            big = np.full(64, 1e300)
            comm.Allreduce(big, np.empty(64))
            send = np.arange(5.0) + ME
            recv = np.full(5, 7.0)
            if form == "blocking":
                call = lambda: comm.Exscan(send, recv)  # noqa: E731
            elif form == "nonblocking":
                call = lambda: comm.Iexscan(send, recv).Wait()  # noqa: E731
            else:

                def call():
                    request = comm.Exscan_init(send, recv)
                    request.Start()
                    request.Wait()
                    request.Free()

            _, exc = mpi.outcome(call)
            want = (
                np.full(5, 7.0) if ME == 0 else sum(np.arange(5.0) + r for r in range(ME))
            )
            if exc is not None:
                problems.append(f"{layout}: raised {exc!r}")
            elif not np.array_equal(recv, want):
                problems.append(f"{layout}: got {recv}, want {want}")
        finally:
            comm.Free()
    mpi.assert_all(not problems, "; ".join(problems[:3]))


# ---------------------------------------------------------------- family "han"
@pytest.mark.mpi(min_size=2)
def test_han_communicator_runs_what_its_library_phases_cannot(mpi):
    """A communicator of family ``"han"`` runs object calls and reductions the MPI
    library cannot combine (MINLOC pairs, a user operator on a derived type) on
    whole plans, with the library's results; forced per call, ``"han"`` refuses
    them alike on every rank."""
    from wacoll.errors import PlanError

    vec = MPI.INT.Create_vector(2, 1, 2).Commit()
    pair = np.dtype([("v", "f8"), ("i", "i4")], align=True)

    def last(a, b, t):  # b = the right operand where it is nonzero (not commutative)
        x = np.frombuffer(a, "i")
        y = np.frombuffer(b, "i")
        y[...] = np.where(y != 0, y, x)

    op = MPI.Op.Create(last, commute=False)

    def derived(comm, **kwargs):
        send = (np.arange(9, dtype="i") * (ME + 1)) % 3
        recv = np.full(9, -1, "i")
        comm.Allreduce([send, 3, vec], [recv, 3, vec], op=op, **kwargs)
        return recv.tolist()

    def pairs(comm, **kwargs):
        send = np.zeros(4, pair)
        send["v"], send["i"] = (np.arange(4) + ME) % 3, ME
        recv = np.zeros(4, pair)
        comm.Allreduce(
            [send, MPI.DOUBLE_INT], [recv, MPI.DOUBLE_INT], op=MPI.MAXLOC, **kwargs
        )
        return recv[["v", "i"]].tolist()

    def objects(comm, **kwargs):
        return comm.gather((ME, "x" * ME), root=P - 1, **kwargs), comm.allreduce(
            str(ME), op=MPI.SUM, **kwargs
        )

    problems = []
    try:
        for layout in ["single"] + mpi.multi[:1]:
            comm = mpi.comm(layout, family="han")
            for name, run in (
                ("derived", derived),
                ("pairs", pairs),
                ("objects", objects),
            ):
                got, exc = mpi.outcome(lambda: run(comm))
                want = run(WORLD)
                if exc is not None or got != want:
                    problems.append(
                        f"{name} on {layout}: got {got!r} ({exc!r}), want {want!r}"
                    )
                _, exc = mpi.outcome(lambda: run(comm, family="han"))
                if not isinstance(exc, PlanError):
                    problems.append(f"{name} on {layout} forced to han: raised {exc!r}")
    finally:
        op.Free()
        vec.Free()
    mpi.assert_all(not problems, "; ".join(problems[:3]))


# ---------------------------------------------------------------- pair padding
@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("form", ["blocking", "nonblocking", "persistent"])
def test_pair_padding_untouched(mpi, form):
    """MPI writes the data bytes of its pair types only (``DOUBLE_INT``: 12 of 16,
    ``SHORT_INT``: 6 of 8): the padding of a receive buffer keeps what it held, as
    with the library, data movement and MINLOC/MAXLOC alike."""

    def noise(n, dtype, seed):
        raw = np.random.default_rng([seed, ME]).integers(
            0, 256, n * dtype.itemsize, dtype=np.uint8
        )
        return raw.view(dtype)

    def values(n, dtype, seed):
        out = noise(n, dtype, seed)
        out["f0"] = (np.arange(n) + ME) % 3
        out["f1"] = ME
        return out

    def cases(name):
        datatype = getattr(MPI, name)
        value = {"DOUBLE_INT": "f8", "SHORT_INT": "i2", "LONG_INT": "i8"}[name]
        dtype = np.dtype([("f0", value), ("f1", "i4")], align=True)
        counts = [r % 2 + 1 for r in range(P)]
        displs = [3 * r for r in range(P)]
        return {
            "Allgather": lambda: (
                (values(2, dtype, 1), noise(2 * P, dtype, 2)),
                lambda s, r: ([s, datatype], [r, datatype]),
                {},
            ),
            "Gatherv": lambda: (
                (values(counts[ME], dtype, 3), noise(3 * P, dtype, 4)),
                lambda s, r: ([s, datatype], [r, counts, displs, datatype], 0),
                {},
            ),
            "Bcast": lambda: (
                (
                    noise(0, dtype, 5),
                    values(3, dtype, 6) if ME == 0 else noise(3, dtype, 6),
                ),
                lambda s, r: ([r, datatype], 0),
                {},
            ),
            "Allreduce": lambda: (
                (values(3, dtype, 7), noise(3, dtype, 8)),
                lambda s, r: ([s, datatype], [r, datatype]),
                {"op": MPI.MAXLOC},
            ),
            "Reduce_scatter_block": lambda: (
                (values(2 * P, dtype, 9), noise(2, dtype, 10)),
                lambda s, r: ([s, 2, datatype], [r, 2, datatype]),
                {"op": MPI.MINLOC},
            ),
        }

    def run(comm, method, make):
        (send, recv), spec, kwargs = make()
        args = spec(send, recv)
        if form == "blocking":
            getattr(comm, method)(*args, **kwargs)
            return [recv.view(np.uint8).copy()]
        if form == "nonblocking":
            getattr(comm, "I" + method[0].lower() + method[1:])(*args, **kwargs).Wait()
            return [recv.view(np.uint8).copy()]
        request = getattr(comm, method + "_init")(*args, **kwargs)
        seen = []
        for round_ in range(2):
            if round_:  # the application writes the whole buffer between starts
                recv.view(np.uint8)[...] = noise(recv.size, recv.dtype, 11).view(np.uint8)
            request.Start()
            request.Wait()
            seen.append(recv.view(np.uint8).copy())
        request.Free()
        return seen

    problems = []
    for layout in ["single"] + mpi.multi[:1]:
        comm = mpi.comm(layout)
        for name in ("DOUBLE_INT", "SHORT_INT", "LONG_INT"):
            for method, make in cases(name).items():
                got, exc = mpi.outcome(lambda: run(comm, method, make))
                want = run(WORLD, method, make)
                if exc is not None:
                    problems.append(f"{method} {name} on {layout}: raised {exc!r}")
                elif any(g.tobytes() != w.tobytes() for g, w in zip(got, want)):
                    problems.append(
                        f"{method} {name} on {layout}: the bytes differ "
                        f"from the library's"
                    )
    mpi.assert_all(not problems, "; ".join(problems[:3]))
