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

from wacoll.errors import PlanError
from wacoll.mpi.executor import execute
from wacoll.mpi.runner import compile_program
from wacoll.plans import FAMILIES, build, builders, lower

W = MPI.COMM_WORLD
P, ME = W.Get_size(), W.Get_rank()

CASES = [(family, op) for family in FAMILIES for op in sorted(builders(family))
         if not op.endswith("v") and op != "reduce_scatter"]


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
    ok = compiled is not None
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
