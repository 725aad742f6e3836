"""Fit what a call costs on this machine besides its messages
(:mod:`wacoll.plans.callcost`): the per-call and per-message costs of a plan's call
and of the MPI library's collective, as the selection policy adds them.

Two ranks declared as two clusters (``WACOLL_CLUSTERS=0,1``) on this machine: no
network to hide a call's own costs. The ranks time, interleaved, batches of calls
of a ``wacoll.Comm(MPI.COMM_WORLD)`` as the README says to write it (the default
check):

- **plans**: the mpich family's broadcast of 16 float64 cut into 1, 2, 4 and 8
  segments (that many messages on the critical path), and MagPIe's and the mpich
  family's allreduce, reduce, allgather and alltoall of 8 B;
- **the library's collective**: the same calls with ``family="native"`` (the
  library's call and wacoll's check).

Each sample is the median over batches of the slowest rank's time per call, beside
the messages on the critical path of the plan (:func:`~wacoll.plans.callcost.critical_messages`;
for the library, of the modern family's plan, the model of what it runs). A line per
kind is fitted (:func:`~wacoll.plans.callcost.fit_call_costs`).

Run::

    .venv/bin/python benchmarks/bench_callcost.py           # about a minute

Results: ``benchmarks/results/callcost.json`` (the fitted costs, which
:func:`wacoll.plans.callcost.read_call_costs` reads; :data:`~wacoll.plans.callcost.MEASURED`
holds this machine's) and ``callcost.csv`` (the samples).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _harness import mpiexec, worker_env, write_csv

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
#: The selection policy's segment sizes (bytes) that cut the timed broadcast of
#: 16 float64 into 1, 2, 4 and 8 segments.
SEGMENT_SIZES = (128, 64, 32, 16)
SHORT_OPS = ("Allreduce", "Reduce", "Allgather", "Alltoall")


def _cases(np, MPI, wacoll, world, comm):
    """``{name: (kind, call, (op, count, family, policy))}``: each timed call, and
    the plan whose critical path it is fitted against (for the library's
    collective, the modern family's: the model of what the library runs)."""
    from wacoll.plans import Policy

    rank, size = world.Get_rank(), world.Get_size()
    cases = {}
    long = np.zeros(16)
    for size_of in SEGMENT_SIZES:
        # the policy's tunable given to the communicator, as a user would (a call
        # that gives options is read afresh each time: not what the fit is for)
        cut = wacoll.Comm(world, family="mpich", segment_size=size_of)
        cases[f"mpich bcast, segments of {size_of} B"] = (
            "plan",
            lambda c=cut: c.Bcast(long, root=0),
            ("bcast", 16, "mpich", Policy(segment_size=size_of)),
        )
    send, out = np.full(1, rank + 1.0), np.zeros(1)
    every, blocks = np.zeros(size), np.ones(size)
    for op in SHORT_OPS:
        for family in ("magpie", "mpich", "native"):
            if op == "Allreduce":
                fn = lambda f=family: comm.Allreduce(send, out, op=MPI.SUM, family=f)
            elif op == "Reduce":
                fn = lambda f=family: comm.Reduce(send, out, op=MPI.SUM, root=0, family=f)
            elif op == "Allgather":
                fn = lambda f=family: comm.Allgather(send, every, family=f)
            else:
                fn = lambda f=family: comm.Alltoall(blocks, every, family=f)
            kind, modelled = (
                ("library", "modern") if family == "native" else ("plan", family)
            )
            cases[f"{family} {op.lower()} 8 B"] = (
                kind,
                fn,
                (op.lower(), 1, modelled, Policy()),
            )
    return cases


def _worker(repeats, seconds):
    import numpy as np
    from mpi4py import MPI

    import wacoll
    from wacoll.plans import Call, select
    from wacoll.plans.callcost import critical_messages

    world = MPI.COMM_WORLD
    rank = world.Get_rank()
    comm = wacoll.Comm(world)
    cases = _cases(np, MPI, wacoll, world, comm)
    messages = {}
    for name, (_kind, fn, (op, count, family, policy)) in cases.items():
        for _ in range(3):  # warm: plans built, proved, compiled, recorded
            fn()
        call = Call(
            op, count=count, itemsize=8, root=0 if op in ("bcast", "reduce") else None
        )
        plan = select(call, comm.network, family=family, policy=policy).build(
            comm.network
        )
        messages[name] = critical_messages(plan)
    world.Barrier()
    start = time.perf_counter()
    cases[next(iter(cases))][1]()
    batch = max(1, int(seconds / max(time.perf_counter() - start, 1e-7)))
    batch = world.allreduce(min(batch, 20000), op=MPI.MIN)
    names = list(cases)
    times = {name: [] for name in names}
    for r in range(repeats):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            fn = cases[name][1]
            world.Barrier()
            t0 = time.perf_counter()
            for _ in range(batch):
                fn()
            per_call = (time.perf_counter() - t0) / batch
            times[name].append(world.allreduce(per_call, op=MPI.MAX))
    rows = [
        {
            "case": name,
            "kind": cases[name][0],
            "messages": messages[name],
            "seconds": statistics.median(times[name]),
            "calls_per_batch": batch,
        }
        for name in names
    ]
    if rank == 0:
        print("RESULT " + json.dumps(rows))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument(
        "--seconds", type=float, default=0.03, help="target time of one batch of calls"
    )
    parser.add_argument("--out", default=str(RESULTS / "callcost.json"))
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        _worker(args.repeats, args.seconds)
        return 0
    from wacoll.plans.callcost import as_json, fit_call_costs

    cmd = [
        mpiexec(),
        "-n",
        "2",
        sys.executable,
        __file__,
        "--worker",
        "--repeats",
        str(args.repeats),
        "--seconds",
        str(args.seconds),
    ]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=worker_env(2, halves=True), timeout=1800
    )
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    if proc.returncode or line is None:
        print(proc.stdout[-3000:], proc.stderr[-3000:], file=sys.stderr)
        return 1
    rows = json.loads(line[len("RESULT ") :])
    costs = fit_call_costs((r["kind"], r["messages"], r["seconds"]) for r in rows)
    command = "python benchmarks/bench_callcost.py " + " ".join(
        argv if argv is not None else sys.argv[1:]
    )
    print(
        "Per-call time with no network, 2 ranks as 2 declared clusters, us "
        f"(median of {args.repeats} interleaved batches; slowest rank)"
    )
    print(f"command: {command}")
    print(f"{'case':34} {'kind':8} {'messages':>8} {'us':>8} {'fitted':>8}")
    for r in rows:
        fitted = (
            costs.plan(r["messages"])
            if r["kind"] == "plan"
            else costs.library(r["messages"])
        )
        print(
            f"{r['case']:34} {r['kind']:8} {r['messages']:8g} "
            f"{r['seconds'] * 1e6:8.2f} {fitted * 1e6:8.2f}"
        )
    print(
        f"fitted: plan {costs.plan_call * 1e6:.2f} us + {costs.plan_message * 1e6:.2f} "
        f"us per message; library {costs.library_call * 1e6:.2f} us + "
        f"{costs.library_message * 1e6:.2f} us per message"
    )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    import wacoll

    out.write_text(
        as_json(
            costs,
            command=command,
            ranks=2,
            library=_library_name(),
            wacoll=wacoll.__version__,
        )
    )
    write_csv(
        out.with_suffix(".csv"),
        ["case", "kind", "messages", "seconds", "calls_per_batch"],
        rows,
    )
    print(f"wrote {out} and {out.with_suffix('.csv')}")
    return 0


def _library_name():
    from mpi4py import MPI

    from wacoll.tools.measure import library_name

    return library_name(MPI.Get_library_version())


if __name__ == "__main__":
    sys.exit(main())
