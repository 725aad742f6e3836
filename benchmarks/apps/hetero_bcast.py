"""Broadcast latency on ranks of unequal speed (Banikazemi et al., Section 7.1), under MPI.

Run by ``benchmarks/bench_hetero.py`` on an emulated testbed where every rank has its
own namespace and its own outgoing link rate, or by hand::

    mpiexec -n 8 python benchmarks/apps/hetero_bcast.py spec.json out.json

For every message size of the spec and every implementation (interleaved repetition
by repetition, the order rotating), rank 0 broadcasts ``size`` bytes with
``Bcast``. The broadcast latency of a repetition is Banikazemi's: from the moment the
root initiates it until the last recipient has the message. Every rank starts at a
common instant (rank 0 broadcasts a start time a margin ahead; every namespace shares
the machine's monotonic clock), so the latency is read directly as
``max over the non-root ranks (their Bcast returned) - start``, without the paper's
acknowledgement round trips. Receivers clear their buffer before each repetition and
check the data after it.

wacoll's communicators are ``wacoll.Comm(COMM_WORLD, topology, family="tree",
tree=NAME, validate=False)`` with the topology given explicitly: it carries the
per-rank message initiation costs ``t_ini`` from which the ``spoc``, ``fnf`` and
``optimal`` trees are built (the same on every rank: it comes from the spec). One
topology (and communicator) per message size, since ``t_ini`` of a rank is the
message's bytes over its link rate plus the link latency. ``validate=False``: native
MPI trusts its arguments, so do the timed wacoll calls.

Before the broadcasts, for each size, the one-way time of a single message from a
fast and from a slow rank (and to either kind) is measured the same way (common start
instant, receiver's finish; the fastest of a few): the *measured* ``t_ini`` of each
class. Every pair's connection is opened first (an untimed alltoall).

``spec.json``::

    {"reps": 11, "margin": 0.05, "root": 0, "fast": [0, 3],
     "topologies": {"8192": {...Topology.to_dict() with t_ini...}, ...},
     "impls": [{"name": "binomial", "family": "tree", "tree": "binomial"},
               {"name": "native", "family": "native"}, ...]}

Rank 0 writes ``out.json``: per size and implementation the latencies in seconds
(``null`` when a rank missed the start instant), whether every check passed, the
tree the plan used; per size the measured one-way times.
"""

from __future__ import annotations

import json
import sys

import numpy as np
from _rankside import common_start, impl_comm, now, start_with_spec


def one_way(world, src, dst, nbytes, reps, margin):
    """Fastest time (of ``reps``) from a common start until ``dst`` has ``nbytes`` from
    ``src``: the link's per-message cost with the least scheduling noise."""
    from mpi4py import MPI

    buf = np.zeros(max(1, nbytes), dtype=np.uint8)
    times = []
    for _ in range(reps):
        start, late = common_start(world, margin)
        if world.rank == src:
            world.Send([buf, nbytes, MPI.BYTE], dest=dst, tag=11)
        elif world.rank == dst:
            world.Recv([buf, nbytes, MPI.BYTE], source=src, tag=11)
        t = now() - start
        got = world.bcast(t if world.rank == dst else None, root=dst)
        anylate = world.allreduce(late, op=MPI.LOR)
        if not anylate:
            times.append(got)
    return float(np.min(times)) if times else None


def pattern(nbytes, salt):
    return ((np.arange(nbytes, dtype=np.int64) * 7 + salt) % 251 + 1).astype(np.uint8)


def main(argv):
    from mpi4py import MPI

    world, wacoll, spec = start_with_spec(argv[0])
    rank, size = world.rank, world.size
    reps, margin, root = (
        int(spec["reps"]),
        float(spec.get("margin", 0.05)),
        int(spec.get("root", 0)),
    )
    fast = set(spec["fast"])
    slow = [r for r in range(size) if r not in fast]
    sizes = sorted(int(s) for s in spec["topologies"])
    impls = spec["impls"]
    probe_reps = int(spec.get("probe_reps", 5))
    out = {"_meta": {"size": size, "reps": reps, "root": root, "fast": sorted(fast)}}
    for _ in range(2):  # open every pair's connection (UCX wires up lazily), untimed
        world.alltoall([b"x" * 64] * size)
    for nbytes in sizes:
        topo = wacoll.Topology.from_dict(spec["topologies"][str(nbytes)])
        # measured per-message cost of each sender class (one message, nothing else)
        pairs = {}
        f_other = next((r for r in sorted(fast) if r != root), None)
        candidates = {
            "fast->slow": (root, slow[0] if slow else None),
            "slow->fast": (slow[0] if slow else None, root),
            "fast->fast": (root, f_other),
            "slow->slow": (slow[0] if slow else None, slow[1] if len(slow) > 1 else None),
        }
        for label, (a, b) in candidates.items():
            if a is not None and b is not None:
                pairs[label] = one_way(world, a, b, nbytes, probe_reps, margin)
        runners = []
        for k, impl in enumerate(impls):
            comm = impl_comm(world, impl, topo)
            buf = np.zeros(nbytes, dtype=np.uint8)
            if rank == root:
                buf[:] = pattern(nbytes, k)
            comm.Bcast([buf, MPI.BYTE], root=root)  # warm-up; wacoll builds its plan here
            ok = bool(np.array_equal(buf, pattern(nbytes, k)))
            plan = getattr(comm, "last_plan", None)
            runners.append((impl["name"], comm, buf, ok, plan))
        res = {
            name: {
                "latency": [],
                "ok": ok,
                "plan": None if plan is None else f"{plan.family}/{plan.algorithm}",
            }
            for name, _, _, ok, plan in runners
        }
        n = len(runners)
        for rep in range(reps):
            for j in range(n):
                idx = (rep + j) % n
                name, comm, buf, _, _ = runners[idx]
                salt = 1000 + rep * n + idx
                if rank == root:
                    buf[:] = pattern(nbytes, salt)
                else:
                    buf[:] = 0
                start, late = common_start(world, margin)
                comm.Bcast([buf, MPI.BYTE], root=root)
                done = now() - start
                ok = rank == root or bool(np.array_equal(buf, pattern(nbytes, salt)))
                everyone = world.gather((done, late, ok), root=0)
                if rank == 0:
                    lat = max(e[0] for r, e in enumerate(everyone) if r != root)
                    anylate = any(e[1] for e in everyone)
                    res[name]["latency"].append(None if anylate else lat)
                    res[name]["ok"] = res[name]["ok"] and all(e[2] for e in everyone)
        for _, comm, _, _, _ in runners:
            comm.Free()
        if rank == 0:
            out[str(nbytes)] = {"impls": res, "one_way": pairs}
            if spec.get("progress"):
                med = {
                    nm: np.median([v for v in r["latency"] if v is not None] or [np.nan])
                    for nm, r in res.items()
                }
                print(
                    f"    {nbytes} B: "
                    + ", ".join(f"{nm} {v * 1e3:.2f} ms" for nm, v in med.items()),
                    flush=True,
                )
    if rank == 0:
        with open(argv[1], "w") as fh:
            json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
