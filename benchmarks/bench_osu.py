"""OSU-style loops of back-to-back collective calls: wacoll's default against the MPI
library, side by side in one run.

The OSU micro-benchmarks time a collective the way most users meet it: a loop of
calls, one after another, the time per call read at the root. MPI does not make a
collective synchronizing (a broadcast's root returns once its buffer may be reused),
so the library's loop pipelines; a call that waits for every rank does not. This
benchmark runs such loops for Bcast, Scatter, Gather, Reduce, Allgather, Alltoall,
Allreduce and Barrier, from 0 B to 1 MiB (per rank, as OSU counts), with

``native``     a duplicate of ``MPI.COMM_WORLD`` (the MPI library)
``default``    ``wacoll.Comm(MPI.COMM_WORLD)`` with no options, as the README says
``unchecked``  with ``--unchecked`` only, labelled: ``wacoll.Comm(MPI.COMM_WORLD,
               check="off")``, the same plans without the cross-rank argument
               check (what the check costs a loop is the difference)

For each case both are warmed up past learning's exploration, then timed in
interleaved repetitions: a barrier, ``N`` back-to-back calls (``N`` from a time
budget, at most 1000), each rank's elapsed time over ``N``. The table gives, per
implementation, the median per-call time at the root (rank 0, the root of the rooted
operations) and of the slowest rank, and the ratio default / native at the root.

Where it runs (``--where``, several separated by commas):

``local``             this machine, no network: 2 and 8 ranks (``--ranks``), as one
                      cluster and as two declared clusters (``WACOLL_CLUSTERS``)
``lan``, ``metro``,   the emulated testbed of ``bench_networks.py`` (root and
``wan``, ``longfast`` ``/dev/net/tun``): 4x2 at 100 us and 12.5 MB/s, 4x2 at 500 us
                      and 100 MB/s, 4x2 at 10 ms and 1 MB/s (to 64 KiB), 2x4 at
                      5 ms and 100 MB/s

Run::

    .venv/bin/python benchmarks/bench_osu.py --where local            # minutes
    .venv/bin/python benchmarks/bench_osu.py --where local --quick    # 2 ranks
    .venv/bin/python benchmarks/bench_osu.py --where metro,lan        # the testbed

Results: ``benchmarks/results/osu-<where>.csv``, ``.txt`` and ``.png`` (the per-size
ratios, one panel per operation).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _harness import mpiexec, pyplot, save_figure, worker_env, write_csv

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
OPS = (
    "Bcast",
    "Scatter",
    "Gather",
    "Reduce",
    "Allgather",
    "Alltoall",
    "Allreduce",
    "Barrier",
)
SIZES = (0, 1, 4, 64, 1024, 4096, 65536, 1 << 20)
#: The testbed networks: clusters, wide-area latency (s) and rate (B/s), largest size.
NETWORKS = {
    "lan": ((2, 2, 2, 2), 100e-6, 12.5e6, 1 << 20),
    "metro": ((2, 2, 2, 2), 500e-6, 100e6, 1 << 20),
    "wan": ((2, 2, 2, 2), 10e-3, 1e6, 65536),
    "longfast": ((4, 4), 5e-3, 100e6, 1 << 20),
}
#: Untimed calls of each case first: past learning's exploration of a new shape.
WARMUP = 30
FIELDS = [
    "where",
    "layout",
    "ranks",
    "op",
    "bytes",
    "calls",
    "native_root_us",
    "default_root_us",
    "native_max_us",
    "default_max_us",
    "ratio_root",
    "ratio_max",
    "unchecked_root_us",
    "unchecked_max_us",
    "ratio_unchecked_root",
    "default_family",
    "unchecked_family",
    # the verdict stream, per timed call of the default, the most of any rank
    # (diagnostic)
    "stream_chunks",
    "stream_hurries",
    "stream_stalls",
    "stream_stalled",
]


# ---------------------------------------------------------------------- the ranks
def _buffers(op, nbytes, size, rank, np):
    """The arguments of one call of ``op`` moving ``nbytes`` (per rank), or None
    when the operation cannot move that many bytes (a reduction of 1 byte)."""
    if op == "Barrier":
        return ()
    if op in ("Reduce", "Allreduce"):
        if nbytes % 4:
            return None
        n = nbytes // 4
        return (np.full(n, rank + 1, "f4"), np.zeros(n, "f4"))
    if op == "Bcast":
        return (np.full(nbytes, rank % 251, "u1"),)
    send_n = nbytes * size if op in ("Scatter", "Alltoall") else nbytes
    recv_n = nbytes * size if op in ("Gather", "Allgather", "Alltoall") else nbytes
    return (np.full(send_n, rank % 251, "u1"), np.zeros(recv_n, "u1"))


def _call(comm, op, args):
    method = getattr(comm, op)
    if op in ("Bcast", "Scatter", "Gather", "Reduce"):
        return lambda: method(*args, root=0)
    return lambda: method(*args)


def _loop_seconds(world, fn, calls):
    """Each rank's seconds per call over ``calls`` back-to-back calls, from a
    barrier: (this rank's, the root's, the slowest rank's)."""
    world.Barrier()
    begin = time.perf_counter()
    for _ in range(calls):
        fn()
    mine = (time.perf_counter() - begin) / calls
    every = world.allgather(mine)
    return mine, every[0], max(every)


def _stream_counters(comm):
    """The verdict stream's counters of a wacoll communicator (zeros where its
    checks do not travel as a stream)."""
    stream = getattr(comm.route.argcheck, "verdicts", None)
    names = ("chunks", "hurries", "stalls", "stalled")
    return {k: getattr(stream, k, 0) for k in names}


def _worker(ops, sizes, reps, budget, max_calls, unchecked=False):
    import numpy as np
    from mpi4py import MPI

    import wacoll

    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    comms = {"native": world.Dup(), "default": wacoll.Comm(world)}
    if unchecked:
        comms["unchecked"] = wacoll.Comm(world, check="off")
    impls = tuple(comms)
    rows = []
    for op in ops:
        for nbytes in sizes if op != "Barrier" else (0,):
            args = _buffers(op, nbytes, size, rank, np)
            if args is None:
                continue
            calls = {impl: _call(comm, op, args) for impl, comm in comms.items()}
            for fn in calls.values():
                for _ in range(WARMUP):
                    fn()
            # as many calls as the budget allows, the same on every rank
            _mine, _root, slowest = _loop_seconds(world, calls["native"], 3)
            n = int(max(5, min(max_calls, budget / max(slowest, 1e-7))))
            times = {impl: ([], []) for impl in impls}
            before = _stream_counters(comms["default"])
            for k in range(reps):  # interleaved, the order turning each repetition
                turn = k % len(impls)
                for impl in impls[turn:] + impls[:turn]:
                    _mine, root, slowest = _loop_seconds(world, calls[impl], n)
                    times[impl][0].append(root)
                    times[impl][1].append(slowest)
            med = {
                impl: (statistics.median(r), statistics.median(m))
                for impl, (r, m) in times.items()
            }
            rows.append(
                {
                    "op": op,
                    "bytes": nbytes,
                    "calls": n,
                    "native_root_us": med["native"][0] * 1e6,
                    "default_root_us": med["default"][0] * 1e6,
                    "native_max_us": med["native"][1] * 1e6,
                    "default_max_us": med["default"][1] * 1e6,
                    "ratio_root": med["default"][0] / med["native"][0],
                    "ratio_max": med["default"][1] / med["native"][1],
                    # what the loop ran (the same on every rank): a plan's family
                    # or the library's ("native")
                    "default_family": comms["default"].last_family,
                }
            )
            after = _stream_counters(comms["default"])
            # what the verdict stream did (diagnostic): per call timed, the most of
            # any rank (a gather's senders wait for the root, the root for no one)
            timed = reps * n
            rows[-1].update(
                {
                    f"stream_{k}": world.allreduce(
                        (after[k] - before[k]) / timed, op=MPI.MAX
                    )
                    for k in after
                }
            )
            if unchecked:
                rows[-1].update(
                    unchecked_root_us=med["unchecked"][0] * 1e6,
                    unchecked_max_us=med["unchecked"][1] * 1e6,
                    ratio_unchecked_root=med["unchecked"][0] / med["native"][0],
                    unchecked_family=comms["unchecked"].last_family,
                )
            if rank == 0:
                print(
                    f"# {op} {nbytes} B: {rows[-1]['ratio_root']:.2f}",
                    file=sys.stderr,
                    flush=True,
                )
    for comm in comms.values():
        comm.Free()
    if rank == 0:
        print("RESULT " + json.dumps(rows), flush=True)


# ---------------------------------------------------------------------- the driver
def _worker_argv(args, sizes):
    return [
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        "--ops",
        ",".join(args.ops),
        "--sizes",
        ",".join(map(str, sizes)),
        "--reps",
        str(args.reps),
        "--budget",
        str(args.budget),
        "--max-calls",
        str(args.max_calls),
        *(["--unchecked"] if args.unchecked else []),
    ]


def _rows_of(stdout):
    line = next((x for x in stdout.splitlines() if x.startswith("RESULT ")), None)
    return None if line is None else json.loads(line[len("RESULT ") :])


def _local(args):
    rows = []
    for layout in args.layouts:
        for p in args.ranks:
            env = worker_env(p, halves=layout == "two")
            cmd = [mpiexec(), "-n", str(p), *_worker_argv(args, args.sizes)]
            print(f"# local, {layout} cluster(s), {p} ranks", file=sys.stderr, flush=True)
            proc = subprocess.run(
                cmd, capture_output=True, text=True, env=env, timeout=3600
            )
            found = _rows_of(proc.stdout)
            if proc.returncode or found is None:
                print(proc.stdout[-3000:], proc.stderr[-3000:], file=sys.stderr)
                raise SystemExit(1)
            rows += [dict(r, where="local", layout=layout, ranks=p) for r in found]
    return rows


def _testbed(name, args):
    from wacoll import Topology
    from wacoll.emulate import Testbed, unavailable_reason

    reason = unavailable_reason()
    if reason:
        raise SystemExit(f"bench_osu: {name}: the testbed cannot run here: {reason}")
    sizes_, latency, rate, largest = NETWORKS[name]
    topology = Topology.from_sizes(list(sizes_), wan_latency=latency, wan_bandwidth=rate)
    sizes = [s for s in args.sizes if s <= largest]
    print(
        f"# {name}: {'x'.join(map(str, sizes_))}, {latency * 1e3:g} ms, "
        f"{rate / 1e6:g} MB/s",
        file=sys.stderr,
        flush=True,
    )
    with tempfile.TemporaryDirectory() as tmp, Testbed(topology, name=f"osu{name}") as tb:
        # from a folder of its own: a source checkout in the working directory would
        # shadow the installed (compiled) wacoll
        run = tb.run(_worker_argv(args, sizes), timeout=7200, cwd=tmp)
    found = _rows_of(run.stdout or "")
    if not run.ok or found is None:
        print((run.stdout or "")[-3000:], (run.stderr or "")[-3000:], file=sys.stderr)
        raise SystemExit(f"bench_osu: {name}: the run failed")
    return [
        dict(r, where=name, layout=f"{len(sizes_)} clusters", ranks=topology.size)
        for r in found
    ]


def report(rows, say=print):
    """The table, and per group and operation the geometric mean of the ratios at
    the root and the worst size."""
    groups = sorted({(r["where"], r["layout"], r["ranks"]) for r in rows}, key=str)
    for where, layout, ranks in groups:
        mine = [
            r
            for r in rows
            if (r["where"], r["layout"], r["ranks"]) == (where, layout, ranks)
        ]
        say(f"\n{where}: {layout}, {ranks} ranks (us per call; ratio = default / native)")
        say(
            f"{'op':<10} {'bytes':>8} {'native@root':>12} {'default@root':>13} "
            f"{'ratio':>6} {'native max':>11} {'default max':>12} {'ratio':>6}"
            + (
                f" {'unchecked@root':>11} {'ratio':>6}"
                if any(r.get("unchecked_root_us") is not None for r in mine)
                else ""
            )
            + "  ran"
        )
        for r in mine:
            unchecked = (
                f" {r['unchecked_root_us']:>11.1f} {r['ratio_unchecked_root']:>6.2f}"
                if r.get("unchecked_root_us") is not None
                else ""
            )
            ran = "/".join(
                str(r[k]) for k in ("default_family", "unchecked_family") if r.get(k)
            )
            say(
                f"{r['op']:<10} {r['bytes']:>8} {r['native_root_us']:>12.1f} "
                f"{r['default_root_us']:>13.1f} {r['ratio_root']:>6.2f} "
                f"{r['native_max_us']:>11.1f} {r['default_max_us']:>12.1f} "
                f"{r['ratio_max']:>6.2f}{unchecked}  {ran}"
            )
        say("per operation, at the root: geometric mean of the ratios, worst size")
        for op in OPS:
            ratios = [(r["ratio_root"], r["bytes"]) for r in mine if r["op"] == op]
            if ratios:
                gm = math.exp(statistics.fmean(math.log(x) for x, _ in ratios))
                worst = max(ratios)
                say(f"  {op:<10} {gm:6.2f}   worst {worst[0]:.2f} at {worst[1]} B")


def plot(rows, path):
    plt = pyplot()
    fig, axes = plt.subplots(2, 4, figsize=(16, 7), sharey=True)
    groups = sorted({(r["where"], r["layout"], r["ranks"]) for r in rows}, key=str)
    for ax, op in zip(axes.flat, OPS):
        for group in groups:
            mine = [
                r
                for r in rows
                if r["op"] == op and (r["where"], r["layout"], r["ranks"]) == group
            ]
            if mine:
                ax.plot(
                    [max(r["bytes"], 0.5) for r in mine],
                    [r["ratio_root"] for r in mine],
                    "o-",
                    label=f"{group[0]} {group[1]} {group[2]}r",
                )
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(op)
        ax.set_xlabel("bytes (per rank; 0 B drawn at 0.5)")
    axes[0, 0].set_ylabel("default / native, time per call at the root")
    axes[0, 0].legend(fontsize=7)
    fig.suptitle("OSU-style loops: wacoll's default against the MPI library")
    save_figure(fig, path, 110)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--where",
        default="local",
        help="local and/or testbed networks: " + ", ".join(NETWORKS),
    )
    parser.add_argument("--ranks", default="2,8", help="local: rank counts")
    parser.add_argument("--layouts", default="one,two", help="local: one and/or two")
    parser.add_argument("--ops", default=",".join(OPS))
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument(
        "--budget", type=float, default=0.1, help="seconds one timed loop aims at"
    )
    parser.add_argument("--max-calls", type=int, default=1000)
    parser.add_argument("--quick", action="store_true", help="local, 2 ranks, 3 reps")
    parser.add_argument("--out", help="the CSV to write (default results/osu-<where>)")
    parser.add_argument(
        "--unchecked",
        action="store_true",
        help='also time wacoll.Comm(..., check="off") (labelled "unchecked")',
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.ops = [o for o in args.ops.split(",") if o]
    args.sizes = [int(s) for s in args.sizes.split(",") if s]
    if not set(args.ops) <= set(OPS):
        parser.error(f"--ops takes {', '.join(OPS)}")
    if args.worker:
        _worker(
            args.ops, args.sizes, args.reps, args.budget, args.max_calls, args.unchecked
        )
        return 0
    args.ranks = [2] if args.quick else [int(x) for x in args.ranks.split(",")]
    args.layouts = [x for x in args.layouts.split(",") if x]
    if args.quick:
        args.reps = 3
    where = [w for w in args.where.split(",") if w]
    unknown = set(where) - {"local", *NETWORKS}
    if unknown:
        parser.error(f"unknown --where {sorted(unknown)}")
    rows = []
    for name in where:
        rows += _local(args) if name == "local" else _testbed(name, args)
    out = Path(args.out) if args.out else RESULTS / f"osu-{'-'.join(where)}.csv"
    write_csv(out, FIELDS, rows)
    lines = [f"command: {' '.join([Path(sys.argv[0]).name, *(argv or sys.argv[1:])])}"]
    report(rows, lines.append)
    text = "\n".join(lines) + "\n"
    out.with_suffix(".txt").write_text(text)
    print(text)
    plot(rows, out.with_suffix(".png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
