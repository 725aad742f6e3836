"""How much of a non-blocking collective hides behind the application's computation.

Each rank times, in one run and interleaved, three things for an Iallreduce of
``--bytes`` (default 1 MiB of float64) at a given configuration:

``comm``     ``req = comm.Iallreduce(...); req.Wait()`` (the collective alone)
``compute``  a numpy computation of about the same duration (the work alone)
``both``     ``req = comm.Iallreduce(...)``; the computation; ``req.Wait()``

(the computation's length is matched to each configuration's collective alone), and
reports the *overlap*: ``(comm + compute - both) / min(comm, compute)``, 1 when the
collective is completely hidden, 0 when the two simply add up (medians of the slowest
rank). Configurations: ``native`` (the MPI library's own ``Iallreduce`` on
``MPI.COMM_WORLD``), ``default`` (``wacoll.Comm(MPI.COMM_WORLD)``, which on one node
hands the call to the MPI library after its check) and ``plan`` (``family="mpich"``:
a wacoll plan advanced by wacoll's progress thread). On two cores, ranks and progress
threads share the processors, which limits what any configuration can overlap.

Run::

    .venv/bin/python benchmarks/bench_overlap.py              # 2 ranks, 1 MiB
    .venv/bin/python benchmarks/bench_overlap.py --ranks 2 --bytes 64K --repeats 5

Prints a table; writes ``benchmarks/results/overlap.csv``.
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

import _harness

CONFIGS = ("native", "default", "plan")


def _worker(nbytes, repeats):
    import numpy as np
    from mpi4py import MPI

    import wacoll

    world = MPI.COMM_WORLD
    comms = {
        "native": world,
        "default": wacoll.Comm(world),
        "plan": wacoll.Comm(world, family="mpich"),
    }
    n = max(1, nbytes // 8)
    send, recv = np.ones(n), np.zeros(n)
    work = np.random.default_rng(world.Get_rank()).random(1 << 12)

    def collective(comm):
        comm.Iallreduce(send, recv, op=MPI.SUM).Wait()

    def compute(rounds):
        for _ in range(rounds):
            np.sort(work)

    def both(comm, rounds):
        req = comm.Iallreduce(send, recv, op=MPI.SUM)
        compute(rounds)
        req.Wait()

    def timed(fn):
        world.Barrier()
        t = time.perf_counter()
        fn()
        return world.allreduce(time.perf_counter() - t, op=MPI.MAX)

    for comm in comms.values():  # warm: plans built, proved and lowered
        collective(comm)
    one = statistics.median(timed(lambda: compute(1)) for _ in range(5))
    rows = []
    for name, comm in comms.items():
        # a computation about as long as this configuration's collective
        alone = statistics.median(timed(lambda: collective(comm)) for _ in range(5))
        rounds = max(1, round(alone / max(one, 1e-9)))
        samples = {"comm": [], "compute": [], "both": []}
        for _ in range(repeats):
            samples["comm"].append(timed(lambda: collective(comm)))
            samples["compute"].append(timed(lambda: compute(rounds)))
            samples["both"].append(timed(lambda: both(comm, rounds)))
        med = {k: statistics.median(v) for k, v in samples.items()}
        hidden = med["comm"] + med["compute"] - med["both"]
        rows.append(
            {
                "config": name,
                **{k: v * 1e3 for k, v in med.items()},
                "overlap": hidden / min(med["comm"], med["compute"]),
            }
        )
    if world.Get_rank() == 0:
        print("RESULT " + json.dumps(rows), flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--bytes", type=_harness.parse_size, default=1 << 20)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        _worker(args.bytes, args.repeats)
        return 0
    from wacoll.tools.launch import mpiexec_command

    cmd = mpiexec_command(
        args.ranks,
        [
            sys.executable,
            __file__,
            "--worker",
            "--bytes",
            str(args.bytes),
            "--repeats",
            str(args.repeats),
        ],
    )
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    if proc.returncode or line is None:
        print(proc.stdout[-3000:], proc.stderr[-3000:], file=sys.stderr)
        return 1
    rows = json.loads(line[len("RESULT ") :])
    print(
        f"Iallreduce of {_harness.human(args.bytes)} at {args.ranks} ranks, ms (median "
        f"of {args.repeats}, slowest rank); load {_harness.load1():.1f}"
    )
    print(
        "command: "
        + _harness.command_line(__file__, argv if argv is not None else sys.argv[1:])
    )
    print(f"{'config':>8} {'comm':>9} {'compute':>9} {'both':>9} {'overlap':>8}")
    for r in rows:
        print(
            f"{r['config']:>8} {r['comm']:9.2f} {r['compute']:9.2f} {r['both']:9.2f} "
            f"{r['overlap']:8.2f}"
        )
    _harness.RESULTS.mkdir(exist_ok=True)
    path = _harness.RESULTS / "overlap.csv"
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(
            f,
            fieldnames=["ranks", "bytes", "config", "comm", "compute", "both", "overlap"],
        )
        writer.writeheader()
        writer.writerows(dict(r, ranks=args.ranks, bytes=args.bytes) for r in rows)
    print(f"wrote {path.relative_to(Path(_harness.ROOT))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
