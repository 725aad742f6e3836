"""Extra memory and time of one large Allreduce: wacoll against the MPI library's own.

Each configuration runs in a fresh ``mpiexec`` job (a process's peak resident size
only grows, so configurations must not share processes). Every rank allocates and
fills its send and receive buffers (64 MiB of float64 each by default), creates the
communicator, makes one small call (so that set-up is not counted), notes its
resident size, makes the large call, and reports its peak resident size minus the
size before the call: the memory the call itself needed, and the call's time (the
slowest rank's). The table gives the largest of the ranks' memory figures (MiB), the
time, and their ratios to the MPI library's:

``native``    ``MPI.COMM_WORLD.Allreduce`` (the MPI library)
``default``   ``wacoll.Comm(MPI.COMM_WORLD)`` with no options, as the README says
``strict``    ``wacoll.Comm(MPI.COMM_WORLD, level="strict")`` (labelled: not the
              default; bit-for-bit reproducible sums)

Run::

    .venv/bin/python benchmarks/bench_memory.py                 # 4 ranks, 64 MiB
    .venv/bin/python benchmarks/bench_memory.py --ranks 2 --mib 16
    .venv/bin/python benchmarks/bench_memory.py --ranks 2 --mib 2048 --clusters halves

``--clusters halves`` declares the first and second half of the ranks two clusters
(``WACOLL_CLUSTERS``), so wacoll runs a plan with no network to hide its costs.

Results: ``benchmarks/results/memory.csv`` and ``memory.txt``.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import _harness

CONFIGS = ("native", "default", "strict")


def _resident_kib():
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * (resource.getpagesize() // 1024)


def _worker(config, mib):
    import numpy as np
    from mpi4py import MPI

    import wacoll

    world = MPI.COMM_WORLD
    n = mib * (1 << 20) // 8
    send = np.full(n, 1.0 + world.Get_rank())
    recv = np.ones(n)
    comm = {
        "native": lambda: world,
        "default": lambda: wacoll.Comm(world),
        "strict": lambda: wacoll.Comm(world, level="strict"),
    }[config]()
    comm.Allreduce(send[:1], recv[:1], op=MPI.SUM)
    before = max(_resident_kib(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    world.Barrier()
    started = time.perf_counter()
    comm.Allreduce(send, recv, op=MPI.SUM)
    seconds = world.allreduce(time.perf_counter() - started, op=MPI.MAX)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    want = sum(1.0 + r for r in range(world.Get_size()))
    ok = bool(recv[0] == want and recv[-1] == want)
    extra = world.gather(max(0, peak - before) / 1024, root=0)
    oks = world.gather(ok, root=0)
    if world.Get_rank() == 0:
        print(
            json.dumps(
                {
                    "config": config,
                    "extra_mib": max(extra),
                    "per_rank": extra,
                    "seconds": seconds,
                    "correct": all(oks),
                    "family": getattr(comm, "last_family", "native"),
                }
            )
        )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--mib", type=int, default=64, help="MiB per buffer")
    parser.add_argument(
        "--clusters",
        choices=("one", "halves"),
        default="one",
        help="halves: the ranks declared as two clusters",
    )
    parser.add_argument("--worker", choices=CONFIGS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        _worker(args.worker, args.mib)
        return 0
    from wacoll.tools.launch import mpiexec_command

    say = _harness.Report()
    say(
        f"Extra memory and time of one {args.mib} MiB float64 Allreduce, {args.ranks} "
        f"ranks, {'two declared clusters' if args.clusters == 'halves' else 'one cluster'}"
        f" (peak resident size during the call minus before it; largest rank)"
    )
    say(f"command: {_harness.command_line(__file__, argv or sys.argv[1:])}")
    say(_harness.load_text())
    env = _harness.worker_env(args.ranks, halves=args.clusters == "halves")
    rows = []
    for config in CONFIGS:
        cmd = mpiexec_command(
            args.ranks,
            [sys.executable, __file__, "--worker", config, "--mib", str(args.mib)],
        )
        out = subprocess.run(
            cmd, capture_output=True, text=True, check=True, env=env
        ).stdout
        row = json.loads(out.strip().splitlines()[-1])
        rows.append(row)
    native, native_s = rows[0]["extra_mib"], rows[0]["seconds"]
    say(
        f"{'config':>8} | {'extra MiB':>9} | {'x native':>8} | {'seconds':>8} | "
        f"{'x native':>8} | family | correct"
    )
    for row in rows:
        ratio = row["extra_mib"] / native if native else float("nan")
        say(
            f"{row['config']:>8} | {row['extra_mib']:9.1f} | {ratio:8.2f} | "
            f"{row['seconds']:8.3f} | {row['seconds'] / native_s:8.2f} | "
            f"{row['family']} | {row['correct']}"
        )
    name = "memory" if args.clusters == "one" else f"memory-{args.clusters}-{args.mib}mib"
    _harness.write_csv(
        _harness.RESULTS / f"{name}.csv",
        [
            "ranks",
            "mib",
            "clusters",
            "config",
            "extra_mib",
            "seconds",
            "family",
            "correct",
        ],
        [
            {
                k: v
                for k, v in dict(
                    r, ranks=args.ranks, mib=args.mib, clusters=args.clusters
                ).items()
                if k != "per_rank"
            }
            for r in rows
        ],
    )
    say.write(_harness.RESULTS / f"{name}.txt")
    return 0


if __name__ == "__main__":
    sys.exit(main())
