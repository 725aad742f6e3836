"""A collective-heavy, ASP-like kernel for Plaat et al.'s sensitivity sweep.

Run under ``mpiexec`` (on a wacoll testbed or not)::

    mpiexec -n 8 python benchmarks/apps/plaat_kernel.py CONFIG.json RESULTS.json

``CONFIG.json``::

    {"clusters": [2, 2, 2, 2], "families": ["magpie", "mpich"], "iters": 5,
     "reps": 7, "compute_ms": 50, "row_bytes": 16384, "compute": "sleep",
     "margin": 0.1}

One iteration, as in ASP (Plaat et al., Section 3): a computation phase of
``compute_ms`` on every rank, then the owner of row ``i`` broadcasts it (``Bcast`` of
``row_bytes``, root ``i mod P``), an ``Allreduce`` of one float64 (a convergence
flag: integer values, level ``"associative"``) and a ``Barrier``. A repetition runs
``iters`` iterations; its time is the moment the last rank has finished them,
measured from a common start instant (the protocol of ``wacoll.tools.measure``: rank 0
picks an instant a ``margin`` ahead, every rank waits for it; all processes of the
machine share its monotonic clock). The families alternate repetition by repetition.

The computation is emulated: with ``"compute": "sleep"`` (the default) each rank
sleeps ``compute_ms``, so eight ranks on a 2-core machine do not compete for the
cores while they "compute" (``"spin"`` burns the CPU instead). The plans are built
for the clusters of the config whatever the testbed, so a run on a one-cluster
testbed executes the same schedule with every link fast: Plaat's "all-Myrinet"
reference. wacoll runs with ``validate=False`` (arguments trusted, as MPI does).

Rank 0 writes ``{"times": {family: [s, ...]}, "correct": {family: bool},
"meta": {...}}`` to ``RESULTS.json``.
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np
from _rankside import abort_on_error, import_wacoll, now, timed

__all__ = ["main"]


def compute(seconds, mode):
    if seconds <= 0:
        return
    if mode == "spin":
        end = now() + seconds
        x = np.ones(1024)
        while now() < end:
            np.sqrt(x, out=x)
    else:
        time.sleep(seconds)


def row_of(root, n):
    """The row rank ``root`` owns: integer values, distinct per root."""
    return (np.arange(n) % 97 + root).astype(np.float64)


def iteration(comm, i, size, rank, row, flag, total, cfg):
    """One iteration; returns whether this rank's results were right."""
    compute(cfg["compute_ms"] * 1e-3, cfg.get("compute", "sleep"))
    root = i % size
    if rank == root:
        row[:] = row_of(root, row.size)
    comm.Bcast(row, root=root)
    ok = bool(np.array_equal(row, row_of(root, row.size)))
    comm.Allreduce(np.array([rank + 1.0]), flag, level="associative")
    ok = ok and flag[0] == total
    comm.Barrier()
    return ok


def main(argv=None):
    from mpi4py import MPI

    argv = sys.argv[1:] if argv is None else argv
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    wacoll = import_wacoll(world)
    with abort_on_error():
        with open(argv[0]) as fh:
            cfg = json.load(fh)
        topology = wacoll.Topology.from_sizes(cfg["clusters"])
        if topology.size != size:
            raise SystemExit(
                f"config clusters have {topology.size} ranks, run has {size}"
            )
        found = wacoll.topology_from_comm(world)
        if found.nclusters > 1 and found.clusters != topology.clusters:
            raise SystemExit(
                f"the testbed's clusters {found.clusters} differ from the "
                f"config's {topology.clusters}"
            )
        comms = {
            f: wacoll.Comm(world, topology, family=f, validate=False)
            for f in cfg["families"]
        }
    n = max(1, int(cfg["row_bytes"]) // 8)
    row, flag = np.zeros(n), np.zeros(1)
    total = size * (size + 1) / 2
    iters, reps = int(cfg["iters"]), int(cfg["reps"])
    margin = float(cfg.get("margin", 0.1))
    times = {f: [] for f in comms}
    good = {f: True for f in comms}
    for f, comm in comms.items():  # warm up: every root's plan, connections
        for i in range(size):
            good[f] &= iteration(
                comm, i, size, rank, row, flag, total, dict(cfg, compute_ms=0)
            )
    names = list(comms)
    for rep in range(reps):
        order = names if rep % 2 == 0 else names[::-1]
        for f in order:

            def run():
                for i in range(iters):
                    good[f] &= iteration(
                        comms[f], rep * iters + i, size, rank, row, flag, total, cfg
                    )

            times[f].append(timed(world, margin, run))
    correct = {f: bool(world.allreduce(good[f], op=MPI.LAND)) for f in comms}
    if rank == 0:
        meta = {
            "size": size,
            "clusters": [list(c) for c in topology.clusters],
            "testbed_clusters": [list(c) for c in found.clusters],
            "transport": os.environ.get("WACOLL_TRANSPORT", "default"),
            **cfg,
        }
        with open(argv[1], "w") as fh:
            json.dump({"times": times, "correct": correct, "meta": meta}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
