"""PATHS's global reduction benchmark (Bjørndalen et al., Figure 4), under MPI.

Run by ``benchmarks/bench_paths.py`` on an emulated testbed (one namespace per SMP
node), or by hand::

    mpiexec -n 8 python benchmarks/apps/paths_allreduce.py spec.json out.json

The program of the paper's Figure 4, per implementation: one untimed Allreduce, then
``iters`` Allreduces of one ``int`` (MPI_SUM), iteration ``i`` contributing ``i`` on
every rank, the result checked against ``i * size`` after every call. The time of a
run is the average time per Allreduce. Unlike the paper (which timed on one rank),
every rank starts at a common instant (rank 0 broadcasts a start time a margin
ahead; all namespaces share the machine's monotonic clock) and the run ends when the
last rank has finished its loop: ``max over ranks (finish) - start``, over ``iters``.
Implementations are interleaved run by run, the order rotating, so load drift hits
them alike.

``spec.json``::

    {"iters": 1000, "runs": 7, "margin": 0.05,
     "impls": [{"name": "native", "family": "native"},
               {"name": "lam", "family": "tree", "tree": "lam"}, ...]}

Every wacoll communicator is ``wacoll.Comm(COMM_WORLD, family=..., validate=False,
level="commutative", **options)``: the topology is discovered from the testbed's
``WACOLL_CLUSTERS``; integer sums are exact in any order; and ``validate=False``
trusts the arguments as native MPI does (no agreement round per call).

Rank 0 writes ``out.json``: per implementation the seconds per Allreduce of every
run (``null`` for a run whose start instant a rank missed), the number of wrong
results, the plan wacoll ran; and a ping-pong (8 B, native MPI) between rank 0 and
a rank of another node and of its own node: half the round trip is the one-way
latency a message sees, MPI and the emulator included.
"""

from __future__ import annotations

import json
import sys

import numpy as np
from _rankside import common_start, impl_comm, now, round_trips, start_with_spec


def make_runner(impl, world):
    """A function ``(send, recv) -> None`` doing one Allreduce, and the comm it uses."""
    from mpi4py import MPI

    if impl["family"] == "native":
        comm = impl_comm(world, impl)
        return (lambda s, r: comm.Allreduce([s, MPI.INT], [r, MPI.INT], op=MPI.SUM)), comm
    comm = impl_comm(world, impl, level="commutative")
    return (lambda s, r: comm.Allreduce(s, r, op=MPI.SUM)), comm


def timed_loop(fn, iters, size):
    """The paper's Figure 4 loop; returns the number of wrong results."""
    send = np.zeros(1, dtype=np.int32)
    recv = np.zeros(1, dtype=np.int32)
    wrong = 0
    for i in range(iters):
        send[0] = i
        fn(send, recv)
        if recv[0] != i * size:
            wrong += 1
    return wrong


def main(argv):
    world, wacoll, spec = start_with_spec(argv[0])
    rank, size = world.rank, world.size
    iters, runs = int(spec["iters"]), int(spec["runs"])
    margin = float(spec.get("margin", 0.05))
    topology = wacoll.topology_from_comm(world)
    # ping-pong partners: the first rank of another node, and of rank 0's own node
    home = topology.cluster_of(0)
    remote = next((r for r in range(size) if topology.cluster_of(r) != home), None)
    local = next((r for r in range(1, size) if topology.cluster_of(r) == home), None)
    pings = {}
    for label, peer in (("remote", remote), ("local", local)):
        world.Barrier()
        # half the median round trip of 8 bytes, on rank 0
        times = round_trips(world, peer, np.zeros(1), 200) if peer is not None else []
        pings[label] = float(np.median(times)) / 2 if times else None
    impls = spec["impls"]
    runners = []
    for impl in impls:
        fn, comm = make_runner(impl, world)
        send = np.full(1, 1, dtype=np.int32)
        recv = np.zeros(1, dtype=np.int32)
        fn(send, recv)  # the untimed first call: plans are built and cached here
        plan = getattr(comm, "last_plan", None)
        ok = int(recv[0]) == size
        runners.append((impl["name"], fn, comm, plan, ok))
    results = {
        name: {
            "per_op": [],
            "wrong": 0,
            "first_ok": ok,
            "plan": None if plan is None else f"{plan.family}/{plan.algorithm}",
        }
        for name, _, _, plan, ok in runners
    }
    k = len(runners)
    for run in range(runs):
        for j in range(k):
            name, fn, _, _, _ = runners[(run + j) % k]
            start, late = common_start(world, margin)
            wrong = timed_loop(fn, iters, size)
            finish = now()
            everyone = world.allgather((finish - start, late, wrong))
            worst = max(e[0] for e in everyone)
            any_late = any(e[1] for e in everyone)
            wrong_total = sum(e[2] for e in everyone)
            results[name]["per_op"].append(None if any_late else worst / iters)
            results[name]["wrong"] += wrong_total
        if rank == 0 and spec.get("progress"):
            print(
                f"    run {run + 1}/{runs}: "
                + ", ".join(
                    f"{n} {results[n]['per_op'][-1] * 1e6:.0f} us"
                    if results[n]["per_op"][-1] is not None
                    else f"{n} late"
                    for n, *_ in runners
                ),
                flush=True,
            )
    for _, _, comm, _, _ in runners:
        comm.Free()
    if rank == 0:
        out = {
            "_meta": {
                "size": size,
                "clusters": [list(c) for c in topology.clusters],
                "iters": iters,
                "runs": runs,
                "ping_one_way": pings,
            },
            **results,
        }
        with open(argv[1], "w") as fh:
            json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
