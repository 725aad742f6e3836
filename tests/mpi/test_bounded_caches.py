"""A loop whose counts vary keeps a bounded number of plans, programs and compiled
runners (it once kept every one it met), and every call still gives the MPI
library's result."""

import numpy as np
import pytest

import wacoll
from wacoll import Topology
from wacoll.mpi.bounded import SHAPES
from wacoll.mpi.plancall import RUNNERS

from .conftest import SIZE, WORLD

pytestmark = pytest.mark.mpi(min_size=1)


def test_a_loop_over_more_shapes_than_kept(mpi):
    sizes = [SIZE // 2, SIZE - SIZE // 2] if SIZE > 1 else [1]
    comm = wacoll.Comm(WORLD, Topology.from_sizes(sizes))
    try:
        counts = list(range(1, SHAPES + 41))
        wrong = []
        for k in counts + counts[:5]:  # and back to the first, long forgotten
            send = mpi.ints(k, seed=k)
            got = np.empty(k, np.int64)
            want = np.empty(k, np.int64)
            comm.Allreduce(send, got)
            WORLD.Allreduce(send, want)
            if not np.array_equal(got, want):
                wrong.append(k)
        mpi.assert_all(not wrong, f"counts {wrong[:5]} gave other sums than the library")
        route = comm.route
        kept = (
            len(route.dispatcher.plans),
            len(route.dispatcher.programs),
            route.plan_calls.runners,
        )
        mpi.assert_all(
            kept[0] <= SHAPES and kept[1] <= SHAPES and kept[2] <= RUNNERS,
            f"kept (plans, programs, runners) = {kept}",
        )
    finally:
        comm.Free()
