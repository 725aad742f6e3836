"""ASP: all-pairs shortest paths by parallel Floyd-Warshall (MagPIe's Section 4 kernel).

An MPI program (run under ``mpiexec``, on a testbed or not)::

    mpiexec -n 8 python benchmarks/apps/asp.py --n 256 --reps 7 --out asp.json

The ``n x n`` distance matrix (int32, a random directed graph, fixed seed) has its
rows block-distributed over the ranks. Iteration ``k`` broadcasts row ``k`` from the
rank that owns it (``n * 4`` bytes; MagPIe's run had 4000 rows of 16 KByte) and every
rank relaxes its rows through vertex ``k``. Owners only send, so consecutive
broadcasts from one owner pipeline, as in the paper's ASP.

The kernel runs with every implementation named by ``--impls`` (``native``: the MPI
library's ``Bcast`` on a duplicate of ``COMM_WORLD``; otherwise a
``wacoll.Comm(family=...)`` with ``validate=False``), interleaved, ``--reps`` times,
each run from a common start instant (rank 0 broadcasts an instant shortly ahead on
the shared monotonic clock; a run's time is the latest finish minus that instant).
Every run's result is checked against a serial numpy Floyd-Warshall on rank 0, by a
digest of each rank's block. Rank 0 writes times, checks and the collective calls
made (operation, root, count, itemsize -> calls) to ``--out`` as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
from _rankside import digest, idle_barrier, run_meta, start_impls, timed_runs

INF = 1 << 28  # INF + INF still fits in int32


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=256, help="vertices (default 256)")
    p.add_argument("--reps", type=int, default=7, help="runs per implementation")
    p.add_argument(
        "--impls",
        default="native,magpie,mpich",
        help="comma-separated: native and/or wacoll plan families",
    )
    p.add_argument("--density", type=float, default=0.2, help="edge probability")
    p.add_argument("--seed", type=int, default=1999)
    p.add_argument(
        "--margin",
        type=float,
        default=0.2,
        help="seconds between announcing a start instant and it",
    )
    p.add_argument("--out", help="JSON file for the results (rank 0)")
    return p.parse_args(argv)


# ------------------------------------------------------------------ the kernel
def make_graph(n, density, seed):
    """The input distance matrix: random int32 weights 1..99, INF where no edge."""
    rng = np.random.default_rng(seed)
    d = rng.integers(1, 100, size=(n, n), dtype=np.int32)
    d[rng.random((n, n)) >= density] = INF
    np.fill_diagonal(d, 0)
    return d


def floyd_warshall(d):
    """Serial reference, in place."""
    for k in range(d.shape[0]):
        np.minimum(d, d[:, k, None] + d[k][None, :], out=d)
    return d


def row_range(n, size, rank):
    """Rows ``lo:hi`` of ``rank``: contiguous blocks, the first ``n % size`` one larger."""
    base, extra = divmod(n, size)
    lo = rank * base + min(rank, extra)
    return lo, lo + base + (1 if rank < extra else 0)


def owners(n, size):
    """The rank that owns each row."""
    out = np.empty(n, dtype=np.int64)
    for r in range(size):
        lo, hi = row_range(n, size, r)
        out[lo:hi] = r
    return out


def asp(comm, block, lo, owner, row):
    """Floyd-Warshall on this rank's ``block`` (rows ``lo:``), in place."""
    me = comm.Get_rank()
    for k in range(row.size):
        root = int(owner[k])
        if root == me:
            row[:] = block[k - lo]
        comm.Bcast(row, root=root)
        np.minimum(block, block[:, k, None] + row[None, :], out=block)


def calls(n, size):
    """The collectives one run makes: {"bcast:root:count:itemsize": calls}."""
    out = {}
    for root in owners(n, size):
        key = f"bcast:{int(root)}:{n}:4"
        out[key] = out.get(key, 0) + 1
    return out


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    world, impls, comms = start_impls(args.impls)
    me, size = world.Get_rank(), world.Get_size()
    n = args.n
    lo, hi = row_range(n, size, me)
    owner = owners(n, size)
    graph = make_graph(n, args.density, args.seed)  # every rank makes the same one
    mine = graph[lo:hi].copy()
    expected = None
    if me == 0:
        t = time.perf_counter()
        ref = floyd_warshall(graph.copy())
        expected = [digest(ref[slice(*row_range(n, size, r))]) for r in range(size)]
        print(
            f"asp: n={n}, {size} ranks, rows of {n * 4} B; serial reference in "
            f"{time.perf_counter() - t:.2f} s",
            flush=True,
        )
    idle_barrier(world)
    row = np.empty(n, dtype=np.int32)
    for impl in impls:  # warm up: connections, and one plan per root
        for root in sorted(set(owner.tolist())):
            comms[impl].Bcast(row, root=root)

    def prepare(impl):
        block = mine.copy()
        return lambda: asp(comms[impl], block, lo, owner, row), lambda: digest(block)

    times, correct = timed_runs(
        world, impls, args.reps, args.margin, prepare, expected, "asp"
    )
    if me == 0 and args.out:
        with open(args.out, "w") as fh:
            json.dump(
                {
                    "app": "asp",
                    "n": n,
                    "row_bytes": n * 4,
                    "reps": args.reps,
                    "times": times,
                    "correct": correct,
                    "calls": calls(n, size),
                    "meta": run_meta(world),
                },
                fh,
                indent=1,
            )
    idle_barrier(world)
    return 0


if __name__ == "__main__":
    sys.exit(main())
