"""Every count at the price of one: per-call cost against the number of distinct
counts a loop cycles, wacoll's default beside the MPI library, in one run.

Real loops do not repeat one count. For each layout (``one`` cluster, the ranks as
wacoll finds them on this machine; ``two`` declared clusters, ``WACOLL_CLUSTERS``
halves, where every call runs a plan and its wide-area check) and rank count, the
ranks warm each operation up until its shape is decided (learning's exploration
over), then time loops that cycle K distinct counts: K = 1, 16, 64 and 1,000 counts
of one size octave (1,024 to 2,047 elements; 1,000 is nearly every count of it), and
10,000 counts from 1,024 up (four octaves). Each loop runs ``--passes`` times (a
pass makes at least 256 calls, cycling its counts as often as needed), a pass of
wacoll's default and one of the library's (the same loop over ``MPI.COMM_WORLD``)
in turn, and the loops of every K in turn within each round of passes (a mood of
the machine that lasts a while slows every K alike); a call is timed on each
rank, and the figure is the median call of every pass but the first (the one
that meets each count first), of the slowest rank.
A new count of a known structure is read from that first pass of the widest
one-octave loop (K = 1,000: nearly all its counts are met there for the first
time): its median call against the repeated call's.

K = 1's one count sits in the middle of the octave, and a call's cost is not
linear in its size (a message that passes the MPI library's eager limit costs
more): a loop over the octave pays its sizes as well as its new counts. So the
widest one-octave loop is also timed over its own counts, each called 4 times in a
row (the first of each run not timed): the same sizes, every timed call a repeated
count. The loop against that baseline is what cycling counts itself costs.

Then a mixed workload: ``--mixed`` calls (20,000 by default) of six operations with
counts drawn from every size class (1 element to 128 Ki elements, log-uniform; the
same draws on every rank), over a fresh proof cache, each side calling the draws in
stretches of 250 of its own, the sides in turn (called one by one in turn, a call
that waits for every rank, as wacoll's check does on one cluster, would absorb the
skew the library's previous call left). Reported: the median call after each size
class's first 20 calls, beside the library's median over the same calls, and the
proof cache's files at the end.

``default`` is ``wacoll.Comm(MPI.COMM_WORLD)`` with no options, as the README says
to write it.

Run::

    .venv/bin/python benchmarks/bench_counts.py                 # 4 and 8 ranks, both layouts
    .venv/bin/python benchmarks/bench_counts.py --quick         # 4 ranks, two layouts, K <= 1000
    .venv/bin/python benchmarks/bench_counts.py --ranks 4 --layouts two --ks 1,64,1000

Results: ``counts.csv`` (``counts-quick.csv``), its plot ``counts.png`` and
``counts-mixed.csv`` in ``benchmarks/results`` (or ``--out``). Recorded there:
``counts.*`` (4 and 8 ranks, one and two clusters, K up to 10,000, 20,000 mixed
calls), with its command in ``counts.txt``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _harness import (
    RESULTS,
    collective_caller,
    command_line,
    mpiexec,
    pyplot,
    save_figure,
    worker_env,
    write_csv,
)

OPS = ("Allreduce", "Bcast", "Allgather", "Reduce", "Gather", "Scatter", "Alltoall")
MIXED_OPS = ("Allreduce", "Bcast", "Allgather", "Reduce", "Gather", "Alltoall")
KS = (1, 16, 64, 1000, 10000)
LAYOUTS = ("one", "two")
#: Each layout as the output names it: ``two-messages`` (not run unless asked) is
#: ``two`` with its checks sent as messages, as across nodes
#: (``WACOLL_NODE_CHECK=off``; on one node they travel in its shared memory).
LABELS = {
    "one": "one cluster(s)",
    "two": "two cluster(s)",
    "two-messages": "two cluster(s), checks as messages (WACOLL_NODE_CHECK=off)",
}
#: The fewest calls of a pass (its K counts cycled as often as needed).
PASS_CALLS = 256
#: Calls of each count in a row in the repeated-counts baseline (the first of each
#: run is not timed).
REPEATS = 4
#: What the CSV's ``config`` adds for the repeated-counts baseline's rows.
REPEATED = ", each count repeated"
#: Calls of a shape before its loops are timed (learning explores 18).
WARM = 24
#: Draws of the mixed workload each side calls in a stretch of its own.
MIXED_STRETCH = 250


def counts_cycled(k):
    """The ``k`` distinct counts a loop cycles: one octave (1024-2047 elements) up
    to its 1024 counts, then the octaves above it.

    Examples
    --------
    >>> counts_cycled(1), counts_cycled(4)
    ([1536], [1024, 1365, 1706, 2047])
    >>> len(set(counts_cycled(10000))), max(counts_cycled(10000))
    (10000, 11023)
    """
    if k == 1:
        return [1536]
    if k <= 1024:
        return [1024 + (1023 * i) // (k - 1) for i in range(k)]
    return list(range(1024, 1024 + k))


def _timed(call, counts, world):
    """Each call's seconds over ``counts`` (after a barrier)."""
    world.Barrier()
    times = []
    for n in counts:
        t = time.perf_counter()
        call(n)
        times.append(time.perf_counter() - t)
    return times


def _worker(ops, ks, passes, mixed, seed):
    import numpy as np
    from mpi4py import MPI

    import wacoll

    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    comm = wacoll.Comm(world)
    rows = []
    for op in ops:
        mine = collective_caller(comm, op, rank, size, np, MPI)
        library = collective_caller(world, op, rank, size, np, MPI)
        for _ in range(WARM):  # the shape's exploration over, its choice made
            mine(1536)
            library(1536)
        loops = {}
        for k in ks:
            counts = counts_cycled(k)
            # a pass: PASS_CALLS calls or more
            loops[k] = counts * -(-PASS_CALLS // len(counts))
        # the widest one-octave loop's counts, each called REPEATS times in a row:
        # the same sizes as that loop, but every timed call repeats the count
        # before it (what the loop would cost if a new count cost nothing)
        widest = max((k for k in ks if 1 < k <= 1024), default=None)
        repeated = (
            [n for n in counts_cycled(widest) for _ in range(REPEATS)] if widest else []
        )
        times = {(k, who): [] for k in ks for who in ("default", "library")}
        if widest:
            times.update({(widest, who + REPEATED): [] for who in ("default", "library")})
        first = {}  # a loop's first pass: the calls that meet each count first
        # the loops in turn, each pass of every K and of both beside each other: a
        # mood of the machine that lasts slows them alike
        for index in range(passes):
            for k, counts in loops.items():
                for who, call in (("default", mine), ("library", library)):
                    timed = _timed(call, counts, world)
                    if index == 0:
                        first[(k, who)] = timed[: len(set(counts))]
                    if index or passes == 1:
                        times[(k, who)].extend(timed)
            if widest and (index or passes == 1):
                for who, call in (("default", mine), ("library", library)):
                    timed = _timed(call, repeated, world)
                    times[(widest, who + REPEATED)].extend(
                        t for i, t in enumerate(timed) if i % REPEATS
                    )
        if widest:
            first.update({(widest, who + REPEATED): [] for who in ("default", "library")})
        for (k, who), timed in times.items():
            rows.append(
                {
                    "op": op,
                    "K": k,
                    "config": who,
                    "ms": world.allreduce(statistics.median(timed), op=MPI.MAX) * 1e3,
                    "first_ms": world.allreduce(
                        statistics.median(first[(k, who)]), op=MPI.MAX
                    )
                    * 1e3
                    if first[(k, who)]
                    else None,
                }
            )
    mixed_rows = []
    if mixed:
        rng = np.random.default_rng(seed)
        draws = [
            (MIXED_OPS[int(i)], int(n))
            for i, n in zip(
                rng.integers(len(MIXED_OPS), size=mixed),
                np.exp(rng.uniform(0, np.log(1 << 17), size=mixed)).astype(int),
            )
        ]
        callers = {
            op: (
                collective_caller(comm, op, rank, size, np, MPI),
                collective_caller(world, op, rank, size, np, MPI),
            )
            for op in MIXED_OPS
        }
        # each side's calls in stretches of their own (MIXED_STRETCH draws, the
        # sides in turn, which first alternating): interleaved call by call, a
        # call that waits for every rank (the argument check) would absorb the
        # skew the other side's previous call left behind
        shapes = [(op, (n * 8).bit_length()) for op, n in draws]
        later = {"default": [], "library": []}
        calls_of = {}
        for start in range(0, mixed, MIXED_STRETCH):
            stretch = range(start, min(start + MIXED_STRETCH, mixed))
            sides = ("default", "library")
            if (start // MIXED_STRETCH) % 2:
                sides = sides[::-1]
            for who in sides:
                side = 0 if who == "default" else 1
                world.Barrier()
                for i in stretch:
                    op, n = draws[i]
                    t = time.perf_counter()
                    callers[op][side](n)
                    dt = time.perf_counter() - t
                    key = (who, shapes[i])
                    calls_of[key] = calls_of.get(key, 0) + 1
                    if calls_of[key] > 20:
                        later[who].append(dt)
        for who, times in later.items():
            mixed_rows.append(
                {
                    "config": who,
                    "calls": mixed,
                    "counted": len(times),
                    "ms": world.allreduce(statistics.median(times), op=MPI.MAX) * 1e3
                    if times
                    else None,
                    "classes": len(set(shapes)),
                }
            )
    if rank == 0:
        print("RESULT " + json.dumps({"loops": rows, "mixed": mixed_rows}))


def _run(p, layout, args, cache):
    env = worker_env(p, halves=layout != "one")
    env["WACOLL_PROOF_CACHE"] = cache
    if layout == "two-messages":
        env["WACOLL_NODE_CHECK"] = "off"
    cmd = [
        mpiexec(), "-n", str(p), sys.executable, "-m", "mpi4py", __file__, "--worker",
        "--ops", args.ops, "--ks", args.ks, "--passes", str(args.passes),
        "--mixed", str(args.mixed), "--seed", str(args.seed),
    ]  # fmt: skip
    print(f"# {LABELS[layout]}, {p} ranks", file=sys.stderr, flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=7200)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    if proc.returncode or line is None:
        print(proc.stdout[-3000:], proc.stderr[-3000:], file=sys.stderr)
        raise SystemExit(1)
    return json.loads(line[len("RESULT ") :])


def _files(folder):
    return sum(len(files) for _, _, files in os.walk(folder))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", default="4,8")
    parser.add_argument("--layouts", default=",".join(LAYOUTS))
    parser.add_argument("--ops", default=",".join(OPS))
    parser.add_argument("--ks", default=",".join(map(str, KS)))
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--mixed", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--out", default=str(RESULTS), help="the folder of the result files"
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        _worker(
            args.ops.split(","),
            [int(k) for k in args.ks.split(",")],
            args.passes,
            args.mixed,
            args.seed,
        )
        return 0
    if args.quick:
        args.ranks, args.ks, args.mixed = "4", "1,16,64,1000", 2000
    ranks = [int(x) for x in args.ranks.split(",")]
    layouts = [x for x in args.layouts.split(",") if x]
    if not set(layouts) <= set(LABELS):
        parser.error(f"--layouts takes {', '.join(LABELS)}")
    loops, mixed = [], []
    for layout in layouts:
        for p in ranks:
            with tempfile.TemporaryDirectory() as cache:
                got = _run(p, layout, args, cache)
                files = _files(cache)
            for row in got["loops"]:
                loops.append(dict(row, ranks=p, layout=layout))
            for row in got["mixed"]:
                mixed.append(dict(row, ranks=p, layout=layout, proof_files=files))
    print(command_line(__file__, argv if argv is not None else sys.argv[1:]))
    print(
        "Median call of every pass but the first, slowest rank, ms; "
        "ratio to the same op's K=1; the widest one-octave loop against its own "
        "counts each called several times in a row (the same sizes, every timed "
        "call a repeated count: what the loop costs beyond its sizes); a new "
        "count's median call (the first pass of that loop) against the repeated call"
    )
    ks = [int(k) for k in args.ks.split(",")]
    keyed = {
        (r["layout"], r["ranks"], r["op"], r["K"], r["config"]): r["ms"] for r in loops
    }
    firsts = {
        (r["layout"], r["ranks"], r["op"], r["K"], r["config"]): r["first_ms"]
        for r in loops
    }
    # a new count of a known structure: the first pass of the widest one-octave
    # loop meets (nearly) every one of its counts for the first time
    newest = max((k for k in ks if 1 < k <= 1024), default=None)
    for layout in layouts:
        for p in ranks:
            print(f"\n{LABELS[layout]}, {p} ranks")
            # the goal's ratio: loops within one octave (K up to 1,024), whose
            # calls move as much as K=1's on average; K=10,000 spans four octaves
            print(
                " | ".join(
                    ["op"]
                    + [f"K={k}" for k in ks]
                    + ["library K=1", "worst of K<=1000 / K=1"]
                    + (
                        [
                            f"K={newest}, each count {REPEATS}x in a row",
                            f"K={newest} / that (library's)",
                            f"new count - repeated, us (K={newest})",
                            "library's",
                        ]
                        if newest
                        else []
                    )
                )
            )
            for op in args.ops.split(","):
                mine = [keyed[(layout, p, op, k, "default")] for k in ks]
                cells = [op] + [f"{m:.3f}" for m in mine]
                cells.append(f"{keyed[(layout, p, op, ks[0], 'library')]:.3f}")
                octave = [m for k, m in zip(ks, mine) if k <= 1024]
                cells.append(f"{max(octave) / mine[0]:.2f}x")
                if newest:  # the same sizes, each count repeated
                    again = keyed[(layout, p, op, newest, "default" + REPEATED)]
                    lib_again = keyed[(layout, p, op, newest, "library" + REPEATED)]
                    lib_cycled = keyed[(layout, p, op, newest, "library")]
                    cells.append(f"{again:.3f}")
                    cells.append(
                        f"{keyed[(layout, p, op, newest, 'default')] / again:.2f}x "
                        f"({lib_cycled / lib_again:.2f}x)"
                    )
                    # (the library's first pass: what the machine adds)
                    for who in ("default", "library"):
                        first = firsts[(layout, p, op, newest, who)]
                        repeated = keyed[(layout, p, op, newest, who)]
                        cells.append(f"{(first - repeated) * 1e3:+.0f}")
                print(" | ".join(cells))
    if mixed:
        print(f"\nMixed workload ({args.mixed} calls, after each class's first 20):")
        for layout in layouts:
            for p in ranks:
                got = {
                    r["config"]: r
                    for r in mixed
                    if (r["layout"], r["ranks"]) == (layout, p)
                }
                d, lib = got["default"], got["library"]
                medians = (
                    "no shape called more than 20 times"
                    if d["ms"] is None
                    else f"default {d['ms']:.3f} ms, library {lib['ms']:.3f} ms "
                    f"({d['ms'] / lib['ms']:.2f}x)"
                )
                print(
                    f"{LABELS[layout]}, {p} ranks: {medians}, {d['classes']} "
                    f"shapes, proof cache {d['proof_files']} files"
                )
    out = Path(args.out)
    out.mkdir(exist_ok=True)
    stem = "counts-quick" if args.quick else "counts"
    write_csv(
        out / f"{stem}.csv",
        ["layout", "ranks", "op", "K", "config", "ms", "first_ms"],
        loops,
    )
    if mixed:
        write_csv(
            out / f"{stem}-mixed.csv",
            [
                "layout",
                "ranks",
                "config",
                "calls",
                "counted",
                "ms",
                "classes",
                "proof_files",
            ],
            mixed,
        )
    plt = pyplot()
    fig, axes = plt.subplots(
        1, len(layouts), figsize=(6 * len(layouts), 4), squeeze=False
    )
    for ax, layout in zip(axes[0], layouts):
        for p in ranks:
            for op in args.ops.split(","):
                ax.plot(
                    ks,
                    [keyed[(layout, p, op, k, "default")] for k in ks],
                    marker="o",
                    label=f"{op}, {p} ranks",
                )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("distinct counts cycled (K)")
        ax.set_ylabel("median call, ms")
        ax.set_title(LABELS[layout])
        ax.legend(fontsize=6)
    save_figure(fig, out / f"{stem}.png", 120)
    return 0


if __name__ == "__main__":
    sys.exit(main())
