"""Strict float sums: what level ``strict`` costs against the MPI library's own sum,
side by side in one run, with the selection policy choosing the arithmetic.

Two parts, each reported as ratios to the MPI library (``native``):

(a) **one cluster**, ``--ranks`` ranks (4) under ``mpiexec`` on this machine:
    Allreduce of 1 MiB and 16 MiB of float64, median per call (slowest rank) of
    ``native`` (``MPI.COMM_WORLD.Allreduce``), ``strict`` (``wacoll.Comm(MPI.COMM_WORLD,
    level="strict")``: the policy's default arithmetic, which keeps the canonical
    order for these sizes), and ``strict, reproducible`` (arithmetic forced to the
    exact accumulators: labelled, not the default); and the peak extra memory of
    one 64 MiB call (``tracemalloc``, which numpy's allocations report to; the MPI
    library's own buffers are not seen) on its first call, scratch included.
(b) **the emulated grid** (4 clusters x 2 ranks, 10 ms, 1 MB/s; needs root and
    ``/dev/net/tun``): Allreduce and Reduce of 1 KiB and Allreduce of 64 KiB of
    float64, via :func:`wacoll.tools.measure.run_on_testbed` as ``wacoll demo`` does:
    ``native``, ``strict`` (``wacoll.Comm(MPI.COMM_WORLD, level="strict")``, the
    default arithmetic), ``strict, plain`` (arithmetic forced to the canonical
    order: what strict cost before the reproducible arithmetic), ``strict, no
    check`` (the default arithmetic without the cross-rank argument check, whose
    all-reduce over the grid bounds a small call from below) and ``commutative``
    (level ``commutative``, MPI's own promise, for reference).

Run::

    .venv/bin/python benchmarks/bench_strict.py                 # both parts
    .venv/bin/python benchmarks/bench_strict.py --skip-grid     # one cluster only
    .venv/bin/python benchmarks/bench_strict.py --skip-cluster --reps 3

Results: ``benchmarks/results/strict.csv`` and ``strict.txt`` (the report, with the
command and the machine's load).
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
    RESULTS,
    Report,
    command_line,
    human,
    load_text,
    mpiexec,
    worker_env,
    write_csv,
)

#: One-cluster sizes (bytes of float64) and the memory probe's size.
CLUSTER_SIZES = (1 << 20, 16 << 20)
MEMORY_SIZE = 64 << 20
#: One-cluster configurations: name -> wacoll.Comm keyword arguments (None: native).
CLUSTER_CONFIGS = {
    "native": None,
    "strict": {"level": "strict"},
    "strict, reproducible": {"level": "strict", "arithmetic": "reproducible"},
}
#: Grid cases: (label, op, bytes).
GRID_CASES = (
    ("Allreduce 1 KiB", "allreduce", 1024),
    ("Reduce 1 KiB", "reduce", 1024),
    ("Allreduce 64 KiB", "allreduce", 65536),
)
GRID_IMPLS = [
    "native",
    {"family": "default", "level": "strict", "name": "strict"},
    {
        "family": "default",
        "level": "strict",
        "arithmetic": "plain",
        "name": "strict, plain",
    },
    {
        "family": "default",
        "level": "strict",
        "validate": False,
        "name": "strict, no check",
    },
    {"family": "default", "level": "commutative", "name": "commutative"},
]


# ------------------------------------------------------------------ (a) rank side
def _worker(reps):
    """Under mpiexec: time the one-cluster configurations; rank 0 prints RESULT."""
    import tracemalloc

    import numpy as np
    from mpi4py import MPI

    import wacoll

    world = MPI.COMM_WORLD
    rank = world.Get_rank()
    comms = {
        name: (world if kw is None else wacoll.Comm(world, **kw))
        for name, kw in CLUSTER_CONFIGS.items()
    }
    rows = []
    for nbytes in CLUSTER_SIZES:
        n = nbytes // 8
        rng = np.random.default_rng(rank)
        send = rng.standard_normal(n) * 10.0 ** rng.integers(-8, 9, n)
        recv = np.empty(n)
        times = {name: [] for name in comms}
        for comm in comms.values():  # warm up: plans built, scratch allocated
            comm.Allreduce(send, recv, op=MPI.SUM)
        arith = {name: getattr(comm, "last_plan", None) for name, comm in comms.items()}
        for i in range(reps):
            order = list(comms)[i % len(comms) :] + list(comms)[: i % len(comms)]
            for name in order:
                world.Barrier()
                t0 = MPI.Wtime()
                comms[name].Allreduce(send, recv, op=MPI.SUM)
                dt = world.allreduce(MPI.Wtime() - t0, op=MPI.MAX)
                times[name].append(dt)
        for name in comms:
            plan = arith[name]
            rows.append(
                {
                    "part": "cluster",
                    "case": f"Allreduce {human(nbytes)}",
                    "bytes": nbytes,
                    "config": name,
                    "seconds": statistics.median(times[name]),
                    "plan": "native"
                    if plan is None
                    else f"{plan.family}/{plan.algorithm}, {plan.arithmetic}",
                }
            )
    n = MEMORY_SIZE // 8
    send = np.ones(n)
    recv = np.empty(n)
    fresh = {
        name: (world if kw is None else wacoll.Comm(world, **kw))
        for name, kw in CLUSTER_CONFIGS.items()
    }
    for name, comm in fresh.items():
        world.Barrier()
        tracemalloc.start()
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        comm.Allreduce(send, recv, op=MPI.SUM)
        peak = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.stop()
        peak = world.allreduce(peak, op=MPI.MAX)
        rows.append(
            {
                "part": "cluster",
                "case": f"peak memory, {human(MEMORY_SIZE)}",
                "bytes": MEMORY_SIZE,
                "config": name,
                "peak_bytes": peak,
            }
        )
    if rank == 0:
        print("RESULT " + json.dumps(rows), flush=True)


def run_cluster(ranks, reps, say):
    cmd = [
        mpiexec(),
        "-n",
        str(ranks),
        sys.executable,
        __file__,
        "--worker",
        "--reps",
        str(reps),
    ]
    env = worker_env()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    if proc.returncode or line is None:
        say(f"one-cluster run failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
        return []
    return json.loads(line[len("RESULT ") :])


# ------------------------------------------------------------------ (b) the grid
def run_grid(reps, timeout, say):
    from wacoll.tools.demo import default_topology
    from wacoll.tools.measure import run_on_testbed

    topology = default_topology()
    spec = {
        "reps": reps,
        "margin": 0.1,
        "progress": True,
        "cases": [
            {"label": label, "op": op, "bytes": nbytes, "impls": GRID_IMPLS}
            for label, op, nbytes in GRID_CASES
        ],
    }
    with tempfile.TemporaryDirectory(prefix="wacoll-strict-") as out:
        measured, reason = run_on_testbed(
            topology, spec, out, name="strict", timeout=timeout
        )
    if measured is None:
        say(f"grid: no measurements ({reason})")
        return [], None
    rows = []
    for label, _op, nbytes in GRID_CASES:
        entry = measured[label]
        for name, times in entry["times"].items():
            valid = [t for t in times if t is not None]
            rows.append(
                {
                    "part": "grid",
                    "case": label,
                    "bytes": nbytes,
                    "config": name,
                    "seconds": statistics.median(valid) if valid else None,
                    "correct": entry.get("correct"),
                }
            )
    return rows, measured["_meta"]


# ------------------------------------------------------------------ report
def _ratios(rows, say, goals):
    cases = dict.fromkeys(r["case"] for r in rows if "seconds" in r)
    for case in cases:
        mine = {r["config"]: r for r in rows if r["case"] == case}
        native = mine["native"]["seconds"]
        cells = []
        for name, r in mine.items():
            s = r["seconds"]
            ratio = None if s is None or not native else s / native
            r["ratio_to_native"] = ratio
            cells.append(
                f"{name} {s * 1e3:.2f} ms"
                + ("" if name == "native" else f" ({ratio:.2f}x)")
                if s is not None
                else f"{name} -"
            )
        goal = goals.get(case)
        strict = mine.get("strict", {}).get("ratio_to_native")
        verdict = (
            ""
            if goal is None or strict is None
            else (f"  [goal strict <= {goal}x: {'met' if strict <= goal else 'NOT met'}]")
        )
        plan = mine.get("strict", {}).get("plan")
        say(
            f"  {case:18s} "
            + "; ".join(cells)
            + verdict
            + (f"  (strict ran {plan})" if plan else "")
        )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--skip-grid", action="store_true")
    parser.add_argument("--skip-cluster", action="store_true")
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        _worker(args.reps)
        return 0
    argv = sys.argv[1:] if argv is None else argv
    say = Report()
    t0 = time.monotonic()
    say("bench_strict: strict float64 sums against the MPI library's own")
    say(f"command: {command_line(__file__, argv)}")
    say(f"machine: {load_text()} (at start)")
    rows = []
    if not args.skip_cluster:
        say(
            f"\n(a) one cluster, {args.ranks} ranks under mpiexec, median of "
            f"{args.reps} interleaved calls (slowest rank):"
        )
        cluster = run_cluster(args.ranks, args.reps, say)
        _ratios(cluster, say, {f"Allreduce {human(n)}": 1.3 for n in CLUSTER_SIZES})
        for r in cluster:
            if "peak_bytes" in r:
                say(
                    f"  {r['case']}: {r['config']} +{r['peak_bytes'] / 2**20:.1f} MiB "
                    f"({r['peak_bytes'] / MEMORY_SIZE:.2f}x the vector)"
                )
        rows += cluster
    if not args.skip_grid:
        say(
            f"\n(b) emulated grid, 4 clusters x 2 ranks, 10 ms, 1 MB/s, median of "
            f"{args.reps} runs from a common start:"
        )
        grid, meta = run_grid(args.reps, args.timeout, say)
        _ratios(
            grid,
            say,
            {"Allreduce 1 KiB": 0.7, "Reduce 1 KiB": 0.7, "Allreduce 64 KiB": 1.0},
        )
        if meta:
            say(
                f"  transport {meta.get('transport')}; results agree with native: "
                f"{all(r.get('correct') is not False for r in grid)}"
            )
        rows += grid
    say(f"\nmachine: {load_text()} (at end); {time.monotonic() - t0:.0f} s")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    fields = [
        "part",
        "case",
        "bytes",
        "config",
        "seconds",
        "ratio_to_native",
        "peak_bytes",
        "plan",
        "correct",
    ]
    write_csv(out / "strict.csv", fields, [{k: r.get(k) for k in fields} for r in rows])
    say.write(out / "strict.txt")
    print(f"wrote {out / 'strict.csv'}, {out / 'strict.txt'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
