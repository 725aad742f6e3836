"""An mpi4py application whose collectives run on wacoll plans.

The loop is PATHS's global reduction benchmark (their Figure 4): ITERS Allreduce calls
of one integer, the result checked on every iteration. One line changes to use wacoll:
``comm = wacoll.Comm(MPI.COMM_WORLD)``.

    mpiexec -n 4 python examples/allreduce_app.py
    WACOLL_CLUSTERS=0,0,1,1 mpiexec -n 4 python examples/allreduce_app.py   # two clusters
"""

import sys

import numpy as np
from mpi4py import MPI

import wacoll

ITERS = int(sys.argv[1]) if len(sys.argv) > 1 else 1000

comm = wacoll.Comm(MPI.COMM_WORLD)  # the one changed line
size, rank = comm.Get_size(), comm.Get_rank()

value = np.zeros(1, dtype=np.int32)
total = np.zeros(1, dtype=np.int32)
comm.Barrier()
t1 = MPI.Wtime()
for i in range(ITERS):
    value[0] = i
    comm.Allreduce(value, total, op=MPI.SUM)
    if total[0] != i * size:
        print(f"oops at {i}. {total[0]} != {i * size}", file=sys.stderr)
        MPI.COMM_WORLD.Abort(1)
t2 = MPI.Wtime()

data = np.arange(8, dtype=np.float64) if rank == 0 else np.empty(8)
comm.Bcast(data, root=0)
assert np.array_equal(data, np.arange(8.0))

if rank == 0:
    n = comm.network.nclusters
    print(
        f"{size} ranks in {n} {'cluster' if n == 1 else 'clusters'} "
        f"({comm.last_family} family): {ITERS} checked Allreduce calls, "
        f"{(t2 - t1) / ITERS * 1e6:.1f} us each"
    )
