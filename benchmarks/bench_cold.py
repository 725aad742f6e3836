"""What a short job pays: a fresh process's communicator and a shape's first calls,
wacoll's default beside the MPI library, on one machine, in one run.

Each case is a fresh ``mpiexec`` (a new process: nothing imported, learned or
compiled yet). In it every rank imports wacoll, then times:

- ``Dup``: the library's ``MPI.COMM_WORLD.Dup()`` (what a communicator must cost
  at least);
- ``Comm()``: ``wacoll.Comm(MPI.COMM_WORLD)`` with no options, as the README says to
  write it (``import wacoll`` and the lazy import of :mod:`wacoll.mpi` are timed
  apart, as ``import``);
- calls 1 to ``--calls`` of one shape through it, and the same calls through the
  library's ``Dup``, each call from a barrier to its own end, the slowest rank's.

Reported per case: the first call, the sum of the first 20 calls against the
library's 20 (learning's exploration included: on several clusters a shape's first
18 calls try its candidates), the median of calls 21-28 against the library's, and
each call, call by call, in the CSV. ``one``: the ranks as wacoll finds them on
this machine (one cluster); ``two``: two declared clusters (``WACOLL_CLUSTERS``
halves), where every call explores, runs a plan and its wide-area check. No network
is emulated here: the figures are wacoll's own costs (Python, proofs, compiling,
the check's messages) on top of the library's shared-memory calls. A second run
over the same proof cache (``warm``) shows what a proof kept on disk by an earlier
run saves.

Run::

    .venv/bin/python benchmarks/bench_cold.py                   # 2 and 8 ranks
    .venv/bin/python benchmarks/bench_cold.py --ranks 2 --ops Allreduce,Bcast

Results: ``cold.csv`` (one row per call) and ``cold.txt`` in
``benchmarks/results`` (or ``--out``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _harness import (
    CALLED_OPS,
    RESULTS,
    collective_caller,
    command_line,
    mpiexec,
    worker_env,
    write_csv,
)

OPS = ("Allreduce", "Bcast", "Reduce", "Allgather", "Alltoall")
LAYOUTS = ("one", "two")
#: The calls whose sum the goal compares (a shape's first twenty).
FIRST = 20


def _worker(op, nbytes, calls):
    started = time.perf_counter()
    import numpy as np
    from mpi4py import MPI

    import wacoll

    make = wacoll.Comm  # (the lazy import of wacoll.mpi, timed as the import)
    imported = time.perf_counter() - started
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    world.Barrier()
    t = time.perf_counter()
    library = world.Dup()
    dup = time.perf_counter() - t
    world.Barrier()
    t = time.perf_counter()
    comm = make(world)
    made = time.perf_counter() - t
    n = max(1, nbytes // 8)
    ours_call = collective_caller(comm, op, rank, size, np, MPI)
    library_call = collective_caller(library, op, rank, size, np, MPI)

    def series(call):
        times = []
        for _ in range(calls):
            world.Barrier()
            t = time.perf_counter()
            call(n)
            times.append(time.perf_counter() - t)
        return times

    ours, theirs = series(ours_call), series(library_call)
    every = world.gather((imported, dup, made, ours, theirs), root=0)
    if rank == 0:
        slowest = {
            "import": max(e[0] for e in every),
            "dup": max(e[1] for e in every),
            "comm": max(e[2] for e in every),
            "default": [max(e[3][k] for e in every) for k in range(calls)],
            "library": [max(e[4][k] for e in every) for k in range(calls)],
        }
        print("RESULT " + json.dumps(slowest))
    comm.Free()
    library.Free()


def _run(p, layout, op, nbytes, calls, cache):
    env = worker_env(p, halves=layout == "two")
    env["WACOLL_PROOF_CACHE"] = cache
    cmd = [
        mpiexec(), "-n", str(p), sys.executable, "-m", "mpi4py", __file__, "--worker",
        "--ops", op, "--bytes", str(nbytes), "--calls", str(calls),
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    if proc.returncode or line is None:
        print(proc.stdout[-3000:], proc.stderr[-3000:], file=sys.stderr)
        raise SystemExit(1)
    return json.loads(line[len("RESULT ") :])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", default="2,8")
    parser.add_argument("--layouts", default=",".join(LAYOUTS))
    parser.add_argument("--ops", default=",".join(OPS))
    parser.add_argument("--bytes", type=int, default=8, help="bytes per rank's block")
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument(
        "--out", default=str(RESULTS), help="the folder of the result files"
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.calls < FIRST + 8:
        parser.error(f"--calls must be at least {FIRST + 8}")
    if args.worker:
        _worker(args.ops, args.bytes, args.calls)
        return 0
    unknown = sorted(set(args.ops.split(",")) - set(CALLED_OPS))
    if unknown:
        parser.error(
            f"--ops: unknown {', '.join(unknown)}; known: {', '.join(CALLED_OPS)}"
        )
    ranks = [int(x) for x in args.ranks.split(",")]
    layouts = [x for x in args.layouts.split(",") if x]
    if not set(layouts) <= set(LAYOUTS):
        parser.error(f"--layouts takes {', '.join(LAYOUTS)}")
    lines = [command_line(__file__, argv if argv is not None else sys.argv[1:])]
    lines.append(
        f"{args.bytes} B a rank; ms, the slowest rank's; first {FIRST}: the sum of "
        f"calls 1-{FIRST}; steady: the median of calls {FIRST + 1}-{FIRST + 8}"
    )
    lines.append(
        "layout | ranks | proofs | op | import | Dup | Comm() | call 1 (library) | "
        f"first {FIRST} (library) | ratio | steady (library)"
    )
    rows = []
    for layout in layouts:
        for p in ranks:
            for op in args.ops.split(","):
                with tempfile.TemporaryDirectory() as cache:
                    for proofs in ("cold", "warm"):
                        got = _run(p, layout, op, args.bytes, args.calls, cache)
                        ours, theirs = got["default"], got["library"]
                        first, lib = sum(ours[:FIRST]), sum(theirs[:FIRST])
                        steady = statistics.median(ours[FIRST : FIRST + 8])
                        steady_lib = statistics.median(theirs[FIRST : FIRST + 8])
                        lines.append(
                            f"{layout} | {p} | {proofs} | {op} | "
                            f"{1e3 * got['import']:.0f} | {1e3 * got['dup']:.2f} | "
                            f"{1e3 * got['comm']:.1f} | {1e3 * ours[0]:.2f} "
                            f"({1e3 * theirs[0]:.2f}) | {1e3 * first:.1f} "
                            f"({1e3 * lib:.2f}) | {first / lib:.0f}x | "
                            f"{1e3 * steady:.3f} ({1e3 * steady_lib:.3f})"
                        )
                        print(lines[-1], flush=True)
                        for k, (a, b) in enumerate(zip(ours, theirs), 1):
                            rows.append(
                                {
                                    "layout": layout,
                                    "ranks": p,
                                    "proofs": proofs,
                                    "op": op,
                                    "call": k,
                                    "default_ms": round(1e3 * a, 4),
                                    "library_ms": round(1e3 * b, 4),
                                    "import_ms": round(1e3 * got["import"], 2),
                                    "dup_ms": round(1e3 * got["dup"], 3),
                                    "comm_ms": round(1e3 * got["comm"], 2),
                                }
                            )
    out = Path(args.out)
    out.mkdir(exist_ok=True)
    fields = list(rows[0]) if rows else []
    write_csv(out / "cold.csv", fields, rows)
    (out / "cold.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:3]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
