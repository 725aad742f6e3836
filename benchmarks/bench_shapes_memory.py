"""Memory of a loop whose counts vary: wacoll against the MPI library's own calls.

A communicator keeps what it derived for each call shape (plan, lowered program,
compiled runner) for its :data:`~wacoll.mpi.bounded.SHAPES` most recent shapes.
Each configuration runs in a fresh ``mpiexec`` job on two declared clusters
(``WACOLL_CLUSTERS``). Every rank makes one Allreduce and one Bcast of float64 per
count, the counts being a shuffle of ``1..N`` (the same on every rank, so that the
buffers' average size does not grow along the loop), and notes its resident size
after every tenth of the loop. The table gives the largest rank's resident size
(MiB) at each point, for

``native``    ``MPI.COMM_WORLD`` (the MPI library)
``default``   ``wacoll.Comm(MPI.COMM_WORLD)`` with no options, as the README says

and the growth from the first tenth to the end: with bounded caches it stops once
the loop has met more shapes than are kept.

Run::

    .venv/bin/python benchmarks/bench_shapes_memory.py               # 4 ranks, 5000
    .venv/bin/python benchmarks/bench_shapes_memory.py --ranks 2 --counts 1000

Results: ``benchmarks/results/shapes_memory.csv`` and ``shapes_memory.txt``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import _harness

CONFIGS = ("native", "default")
POINTS = 10


def _resident_mib():
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def _worker(config, counts):
    import numpy as np
    from mpi4py import MPI

    import wacoll

    world = MPI.COMM_WORLD
    comm = world if config == "native" else wacoll.Comm(world)
    order = np.random.default_rng(7).permutation(np.arange(1, counts + 1))
    send = np.full(counts, 1.0 + world.Get_rank())
    recv = np.empty(counts)
    want = sum(1.0 + r for r in range(world.Get_size()))
    ok = True
    marks = []
    for i, k in enumerate(order, 1):
        comm.Allreduce(send[:k], recv[:k])
        ok &= bool(recv[0] == want and recv[k - 1] == want)
        comm.Bcast(recv[:k], root=0)
        if i % max(1, counts // POINTS) == 0:
            marks.append((i, _resident_mib()))
    everyone = world.gather(marks, root=0)
    oks = world.gather(ok, root=0)
    if world.Get_rank() == 0:
        points = [
            (marks[j][0], max(m[j][1] for m in everyone)) for j in range(len(marks))
        ]
        print(json.dumps({"config": config, "points": points, "correct": all(oks)}))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument(
        "--counts",
        type=int,
        default=5000,
        help="distinct counts (calls of each operation)",
    )
    parser.add_argument("--worker", choices=CONFIGS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        _worker(args.worker, args.counts)
        return 0
    from wacoll.mpi.bounded import SHAPES
    from wacoll.tools.launch import mpiexec_command

    say = _harness.Report()
    say(
        f"Resident MiB (largest rank) along a loop of Allreduce + Bcast over "
        f"{args.counts} distinct counts, {args.ranks} ranks on 2 clusters; "
        f"a communicator keeps {SHAPES} shapes"
    )
    say(f"command: {_harness.command_line(__file__, argv or sys.argv[1:])}")
    say(_harness.load_text())
    env = dict(
        os.environ,
        WACOLL_CLUSTERS=",".join(
            "0" if r < args.ranks // 2 else "1" for r in range(args.ranks)
        ),
    )
    rows = []
    for config in CONFIGS:
        cmd = mpiexec_command(
            args.ranks,
            [sys.executable, __file__, "--worker", config, "--counts", str(args.counts)],
        )
        out = subprocess.run(
            cmd, capture_output=True, text=True, check=True, env=env
        ).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
    calls = [i for i, _ in rows[0]["points"]]
    say(
        f"{'config':>8} | " + " | ".join(f"{i:>6}" for i in calls) + " | growth | correct"
    )
    table = []
    for row in rows:
        values = [v for _, v in row["points"]]
        growth = values[-1] - values[0]
        say(
            f"{row['config']:>8} | "
            + " | ".join(f"{v:6.1f}" for v in values)
            + f" | {growth:+6.1f} | {row['correct']}"
        )
        table += [
            {
                "ranks": args.ranks,
                "counts": args.counts,
                "config": row["config"],
                "calls": i,
                "resident_mib": round(v, 2),
                "correct": row["correct"],
            }
            for i, v in row["points"]
        ]
    _harness.write_csv(
        _harness.RESULTS / "shapes_memory.csv",
        ["ranks", "counts", "config", "calls", "resident_mib", "correct"],
        table,
    )
    say.write(_harness.RESULTS / "shapes_memory.txt")
    return 0


if __name__ == "__main__":
    sys.exit(main())
