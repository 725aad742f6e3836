"""Per-call time of object collectives: ``wacoll.Comm``'s against mpi4py's own.

mpi4py's lower-case collectives pickle Python objects; so do ``wacoll.Comm``'s
(:mod:`wacoll.mpi.objects`; ``allgather`` and ``bcast`` as one buffer collective of
pickles in agreed blocks, :mod:`wacoll.mpi.pickled`). With ``--clusters halves``
(the default) the ranks are declared two clusters (``WACOLL_CLUSTERS``), so every
wacoll call is checked across ranks and runs a plan or the library's collective as
the selection chooses, with no network to hide its costs.

The ranks time batches of calls of each configuration, interleaved, from a common
start (a barrier), and report the median per call of the slowest rank (ms):

``mpi4py``   ``MPI.COMM_WORLD.allgather(obj)`` / ``.bcast(obj)``
``wacoll``   ``wacoll.Comm(MPI.COMM_WORLD)``'s, as the README says to write it

``obj`` is a small dict (a rank number, a 20-character string, a list of three).

Run::

    .venv/bin/python benchmarks/bench_objects.py                  # 4 ranks
    .venv/bin/python benchmarks/bench_objects.py --ranks 8 --clusters one

Results: ``benchmarks/results/objects.csv`` and ``objects.txt``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

import _harness

OPS = ("allgather", "bcast")
CONFIGS = ("mpi4py", "wacoll")


def _worker(repeats, calls):
    from mpi4py import MPI

    import wacoll

    world = MPI.COMM_WORLD
    comm = wacoll.Comm(world)
    obj = {"rank": world.Get_rank(), "name": "x" * 20, "values": [1, 2, 3]}
    rows = []
    for op in OPS:
        fns = {
            "mpi4py": (lambda c: lambda: c.allgather(obj))(world)
            if op == "allgather"
            else (lambda c: lambda: c.bcast(obj, root=0))(world),
            "wacoll": (lambda c: lambda: c.allgather(obj))(comm)
            if op == "allgather"
            else (lambda c: lambda: c.bcast(obj, root=0))(comm),
        }
        for fn in fns.values():  # warm: plans built and recorded
            for _ in range(20):
                fn()
        times = {name: [] for name in CONFIGS}
        for r in range(repeats):
            for name in CONFIGS if r % 2 == 0 else CONFIGS[::-1]:
                world.Barrier()
                started = time.perf_counter()
                for _ in range(calls):
                    fns[name]()
                elapsed = (time.perf_counter() - started) / calls
                times[name].append(world.allreduce(elapsed, op=MPI.MAX))
        for name in CONFIGS:
            rows.append(
                {
                    "op": op,
                    "config": name,
                    "ms": statistics.median(times[name]) * 1e3,
                    "family": comm.last_family if name == "wacoll" else "mpi4py",
                }
            )
    if world.Get_rank() == 0:
        print("RESULT " + json.dumps(rows))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--clusters", choices=("one", "halves"), default="halves")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--calls", type=int, default=200, help="calls per batch")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        _worker(args.repeats, args.calls)
        return 0
    from wacoll.tools.launch import mpiexec_command

    say = _harness.Report()
    layout = "two declared clusters" if args.clusters == "halves" else "one cluster"
    say(
        f"Object collectives per call, {args.ranks} ranks, {layout}: median of "
        f"{args.repeats} interleaved batches of {args.calls} calls, slowest rank (ms)"
    )
    say(f"command: {_harness.command_line(__file__, argv or sys.argv[1:])}")
    say(_harness.load_text())
    env = _harness.worker_env(args.ranks, halves=args.clusters == "halves")
    cmd = mpiexec_command(
        args.ranks,
        [
            sys.executable,
            __file__,
            "--worker",
            "--repeats",
            str(args.repeats),
            "--calls",
            str(args.calls),
        ],
    )
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env).stdout
    rows = json.loads(
        next(line for line in out.splitlines() if line.startswith("RESULT "))[
            len("RESULT ") :
        ]
    )
    keyed = {(r["op"], r["config"]): r for r in rows}
    say(f"{'op':>10} | {'mpi4py ms':>9} | {'wacoll ms':>9} | {'ratio':>5} | wacoll ran")
    for op in OPS:
        mine, theirs = keyed[op, "wacoll"], keyed[op, "mpi4py"]
        say(
            f"{op:>10} | {theirs['ms']:9.3f} | {mine['ms']:9.3f} | "
            f"{mine['ms'] / theirs['ms']:5.2f} | {mine['family']}"
        )
    name = "objects" if args.clusters == "halves" else f"objects-{args.clusters}"
    _harness.write_csv(
        _harness.RESULTS / f"{name}.csv",
        ["ranks", "clusters", "op", "config", "ms", "family"],
        [dict(r, ranks=args.ranks, clusters=args.clusters) for r in rows],
    )
    say.write(_harness.RESULTS / f"{name}.txt")
    return 0


if __name__ == "__main__":
    sys.exit(main())
