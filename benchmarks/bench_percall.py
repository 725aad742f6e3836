"""Per-call cost with no network: wacoll's blocking, non-blocking and persistent
calls against the MPI library's own, side by side in one run.

Two layouts of the same ranks on this machine: ``one`` cluster (the layout wacoll
discovers on one node: the library's collectives after wacoll's check) and ``two``
declared clusters (``WACOLL_CLUSTERS`` splits the ranks in halves, so every call runs
a plan and its wide-area check, with no network to hide their costs).

For each rank count (2 and 4 by default), operation (Allreduce, Bcast) and size
(8 B and 1 MiB), the ranks time batches of calls of each configuration, interleaved
(the order rotates each repeat), from a common start (a barrier), and report the
median per call of the slowest rank, in microseconds:

``native``            ``MPI.COMM_WORLD.Allreduce`` (the MPI library)
``native persistent`` ``MPI.COMM_WORLD.Allreduce_init`` + ``Start``/``Wait``
``default``           ``wacoll.Comm(MPI.COMM_WORLD)`` with no options, as the README
                      says to write it (on one node: the library's collective after
                      wacoll's argument check, a repeated call replayed)
``no check``          ``wacoll.Comm(MPI.COMM_WORLD, validate=False)``
``persistent``        ``wacoll.Comm(...).Allreduce_init`` + ``Start``/``Wait``
``plan persistent``   the same with ``family="mpich"``: a wacoll plan bound once
``plan``              a blocking call with ``family="mpich"``
``library, checked``  a blocking call with ``family="native"``: the MPI library's
                      collective with wacoll's check (on two clusters: the library's
                      non-blocking call and the compiled wide-area check, together)
``non-blocking``      ``Iallreduce`` + ``Wait`` (on one node the library's own
                      request, checked in the node's ring; on several clusters a
                      generalized request the progress engine completes)
``native non-blocking`` the library's ``Iallreduce`` + ``Wait``
``native, new array`` ``native`` with a new receive buffer (``np.empty``) each call
``default, new array`` ``default`` with a new receive buffer each call (a call that
                      looks like the last one is replayed, whichever arrays it brings)

Run::

    .venv/bin/python benchmarks/bench_percall.py            # 2 and 8 ranks, both layouts
    .venv/bin/python benchmarks/bench_percall.py --quick    # 2 ranks, fewer repeats
    .venv/bin/python benchmarks/bench_percall.py --layouts two --ranks 2,8

Results: ``benchmarks/results/percall.csv`` (``percall-quick.csv`` with --quick).
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _harness import mpiexec, worker_env

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
SIZES = (8, 1 << 20)
LAYOUTS = ("one", "two")
#: Ratios printed beside the times: (name, numerator, denominator).
RATIOS = (
    ("default/native", "default", "native"),
    ("no check/native", "no check", "native"),
    ("library, checked/native", "library, checked", "native"),
    ("plan persistent/native persistent", "plan persistent", "native persistent"),
    ("non-blocking/native non-blocking", "non-blocking", "native non-blocking"),
)
OPS = ("Allreduce", "Bcast")
CONFIGS = (
    "native",
    "native persistent",
    "default",
    "no check",
    "persistent",
    "plan persistent",
    "plan",
    "library, checked",
    "non-blocking",
    "native non-blocking",
    "native, new array",
    "default, new array",
)


def _worker(repeats, seconds):
    import numpy as np
    from mpi4py import MPI

    import wacoll

    world = MPI.COMM_WORLD
    rank = world.Get_rank()
    comms = {
        "default": wacoll.Comm(world),
        "no check": wacoll.Comm(world, validate=False),
    }
    rows = []
    for op in OPS:
        for nbytes in SIZES:
            n = max(1, nbytes // 8)
            send = np.full(n, rank + 1.0)
            out = np.zeros(n)

            def blocking(c, **kw):
                if op == "Allreduce":
                    return lambda: c.Allreduce(send, out, op=MPI.SUM, **kw)
                return lambda: c.Bcast(out, root=0, **kw)

            def bound(c, **kw):
                if op == "Allreduce":
                    return c.Allreduce_init(send, out, op=MPI.SUM, **kw)
                return c.Bcast_init(out, root=0, **kw)

            def started(req):
                def call():
                    req.Start()
                    req.Wait()

                return call

            def fresh(c):  # a new receive buffer every call, as np.empty gives it
                if op == "Allreduce":
                    return lambda: c.Allreduce(send, np.empty(n), op=MPI.SUM)
                return lambda: c.Bcast(np.empty(n), root=0)

            def nonblocking(c):
                if op == "Allreduce":
                    return lambda: c.Iallreduce(send, out, op=MPI.SUM).Wait()
                return lambda: c.Ibcast(out, root=0).Wait()

            calls = {
                "native": blocking(world),
                "native persistent": started(bound(world)),
                "default": blocking(comms["default"]),
                "no check": blocking(comms["no check"]),
                "persistent": started(bound(comms["default"])),
                "plan persistent": started(bound(comms["default"], family="mpich")),
                "plan": blocking(comms["default"], family="mpich"),
                "library, checked": blocking(comms["default"], family="native"),
                "non-blocking": nonblocking(comms["default"]),
                "native non-blocking": nonblocking(world),
                "native, new array": fresh(world),
                "default, new array": fresh(comms["default"]),
            }
            for fn in calls.values():  # warm: plans built, programs lowered
                for _ in range(3):
                    fn()
            # calls per batch: enough for ``seconds`` of the slowest, agreed
            world.Barrier()
            t = time.perf_counter()
            calls["plan"]()
            batch = max(1, int(seconds / max(time.perf_counter() - t, 1e-7)))
            batch = world.allreduce(min(batch, 20000), op=MPI.MIN)
            times = {name: [] for name in calls}
            names = list(calls)
            for r in range(repeats):
                order = names[r % len(names) :] + names[: r % len(names)]
                for name in order:
                    fn = calls[name]
                    world.Barrier()
                    t0 = time.perf_counter()
                    for _ in range(batch):
                        fn()
                    dt = (time.perf_counter() - t0) / batch
                    times[name].append(world.allreduce(dt, op=MPI.MAX))
            for name in names:
                rows.append(
                    {
                        "op": op,
                        "bytes": nbytes,
                        "config": name,
                        "us": statistics.median(times[name]) * 1e6,
                        "calls_per_batch": batch,
                    }
                )
    if rank == 0:
        print("RESULT " + json.dumps(rows))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", default="2,8")
    parser.add_argument(
        "--layouts",
        default=",".join(LAYOUTS),
        help="one (one cluster) and/or two (two declared clusters)",
    )
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument(
        "--seconds", type=float, default=0.05, help="target time of one batch of calls"
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        _worker(args.repeats, args.seconds)
        return 0
    ranks = [2] if args.quick else [int(x) for x in args.ranks.split(",")]
    layouts = [x for x in args.layouts.split(",") if x]
    if not set(layouts) <= set(LAYOUTS):
        parser.error(f"--layouts takes {', '.join(LAYOUTS)}")
    repeats = 3 if args.quick else args.repeats
    out_rows = []
    for layout in layouts:
        for p in ranks:
            env = worker_env(p, halves=layout == "two")
            cmd = [
                mpiexec(),
                "-n",
                str(p),
                sys.executable,
                __file__,
                "--worker",
                "--repeats",
                str(repeats),
                "--seconds",
                str(args.seconds),
            ]
            print(
                f"# {layout} cluster(s), {p} ranks: {' '.join(cmd[:3])} ...",
                file=sys.stderr,
                flush=True,
            )
            proc = subprocess.run(
                cmd, capture_output=True, text=True, env=env, timeout=1800
            )
            line = next(
                (x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None
            )
            if proc.returncode or line is None:
                print(proc.stdout[-3000:], proc.stderr[-3000:], file=sys.stderr)
                return 1
            for row in json.loads(line[len("RESULT ") :]):
                out_rows.append(dict(row, ranks=p, layout=layout))
    print(f"Per-call time, us (median of {repeats} interleaved batches; slowest rank):")
    print(
        f"command: {Path(sys.executable).name} benchmarks/bench_percall.py "
        + " ".join(a for a in (argv or sys.argv[1:]))
    )
    keyed = {
        (r["layout"], r["ranks"], r["op"], r["bytes"], r["config"]): r["us"]
        for r in out_rows
    }
    for layout in layouts:
        print(
            f"\n{layout} cluster(s):"
            if layout == "one"
            else f"\n{layout} declared clusters (every call runs a plan):"
        )
        header = ["ranks", "op", "bytes"] + list(CONFIGS) + [r[0] for r in RATIOS]
        print(" | ".join(header))
        for p in ranks:
            for op in OPS:
                for nbytes in SIZES:
                    got = {c: keyed[(layout, p, op, nbytes, c)] for c in CONFIGS}
                    cells = [str(p), op, str(nbytes)]
                    cells += [f"{got[c]:.2f}" for c in CONFIGS]
                    cells += [f"{got[a] / got[b]:.2f}x" for _, a, b in RATIOS]
                    print(" | ".join(cells))
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / ("percall-quick.csv" if args.quick else "percall.csv")
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(
            f,
            fieldnames=[
                "layout",
                "ranks",
                "op",
                "bytes",
                "config",
                "us",
                "calls_per_batch",
            ],
        )
        writer.writeheader()
        writer.writerows(out_rows)
    print(f"wrote {path.relative_to(HERE.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
