"""Time wacoll's collectives against mpi4py's native ones, side by side in one run.

Run from the repository root under MPI::

    .venv/bin/mpiexec -n 4 .venv/bin/python benchmarks/bench_collectives.py
    .venv/bin/mpiexec -n 4 .venv/bin/python benchmarks/bench_collectives.py --quick
    .venv/bin/mpiexec -n 4 .venv/bin/python benchmarks/bench_collectives.py \\
        --family magpie --clusters 2,2 --ops allreduce --sizes 8,64K,1M

For each operation (Bcast, Reduce, Allreduce, Allgather; root 0; float64 data with
small integer values, so every summation order gives the same bits) and each message
size, the native call (on a duplicate of ``COMM_WORLD``) and wacoll's alternate
repetition by repetition, the order rotating every repetition, each after a barrier.

wacoll is first what a user gets from the README, ``wacoll.Comm(MPI.COMM_WORLD)`` with
no options (topology discovered, arguments validated, MPI's own level, the selection
policy's plans): the configuration labelled ``default``. ``--family``, ``--clusters``,
``--segment-size`` and ``--level`` add a second configuration, labelled by its
options (e.g. ``family=magpie,clusters=2x2``), timed in the same interleaving; every
row of the table and the CSV names its configuration. A repetition's time is the maximum over ranks of the time from leaving the
barrier to returning; the table gives the median over repetitions. Before timing,
each size is run once with fresh buffers and wacoll's result compared bit for bit
with the native one. The message size is the bytes per rank of the send buffer
(Allgather receives ``P`` times that). Repetitions adapt to a time budget.

Then an analysis of where the time goes, on the public API only: for small messages,
native vs the configuration asked for (``default`` unless options are given) with
validation on (its default) and ``validate=False``, vs its plan's lowered program
(:func:`wacoll.plans.lower`) run by :func:`wacoll.mpi.executor.execute` alone, vs a
minimal mpi4py replay of the same plan; local timings of the plan-world steps
(:func:`wacoll.plans.select`, ``Selection.build``, ``lower``) and of the kernels; the
per-call phases (arguments, agreement, plan, lower, execute) from the ``phase``
events of a communicator created with ``trace=True`` for that run only; and a
cProfile of small Allreduce calls on rank 0. For large messages: the executor's
per-step times (the tracer's ``step`` events), each rank's per-call work from its
lowered program, the kernels and copies at that size, the point-to-point transfer
time, and the effect of ``segment_size``.

Prints a table and the command line; writes ``benchmarks/results/collectives-n{N}``
``.csv`` (raw numbers), ``.png`` (ratio vs size per operation) and ``.txt`` (the
printed report and the profile). ``--quick``, ``--family``, ``--clusters`` and
``--segment-size`` add a suffix to those names.

Busy-polling MPI ranks oversubscribed on few cores (``nproc`` < ranks) make the
numbers noisy, and so does any other job on the machine: a call then costs about one
scheduler time slice per dependent message round, whatever its size. The report
states the core count and the load average (also per row of the CSV), and
``--wait-idle SECONDS`` waits for an idle machine before starting.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import platform
import pstats
import sys
import time
from pathlib import Path

import numpy as np

from _harness import (
    RESULTS,
    ROOT,
    Report,
    command_line,
    human,
    load1,
    parse_size,
    pyplot,
    repo_path,
    save_figure,
    write_csv,
)

sys.path.append(str(Path(__file__).resolve().parent / "apps"))  # this program's MPI side
from _rankside import abort_on_error, idle_barrier, import_wacoll, round_trips  # noqa: E402

OPS = ("Bcast", "Reduce", "Allreduce", "Allgather")
DEFAULT_SIZES = (
    8,
    64,
    256,
    1 << 10,
    4 << 10,
    16 << 10,
    64 << 10,
    256 << 10,
    1 << 20,
    4 << 20,
    16 << 20,
    64 << 20,
)
QUICK_SIZES = (8, 64 << 10, 1 << 20)
SUMMARY_SIZES = (8, 64 << 10, 1 << 20, 64 << 20)
GOAL_FROM, GOAL_RATIO = 1 << 20, 1.5
ITEMSIZE = 8  # float64
MMAP_MAX = 32 << 20  # glibc maps arrays this big afresh on every allocation
FIELDS = [
    "op",
    "bytes",
    "count",
    "ranks",
    "config",
    "plan",
    "reps",
    "native_us",
    "wacoll_us",
    "ratio",
    "native_min_us",
    "wacoll_min_us",
    "native_p75_us",
    "wacoll_p75_us",
    "ok",
    "load1",
    "command",
]


# ------------------------------------------------------------------ arguments
def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--sizes",
        type=lambda s: [parse_size(x) for x in s.split(",") if x],
        help="comma-separated message sizes in bytes per rank (8,1K,4M,...); "
        "rounded down to whole float64 elements",
    )
    p.add_argument(
        "--ops",
        type=lambda s: [x for x in s.split(",") if x],
        help="comma-separated operations: " + ",".join(OPS),
    )
    p.add_argument(
        "--reps",
        type=int,
        default=200,
        help="most repetitions per size (fewer for large sizes; default 200)",
    )
    p.add_argument(
        "--min-reps",
        type=int,
        default=5,
        help="fewest repetitions per size, whatever the budget (default 5)",
    )
    p.add_argument(
        "--budget",
        type=float,
        default=150.0,
        help="seconds for the timed sweep, shared out over the sizes "
        "(default 150; the analysis adds ~20-40 s)",
    )
    p.add_argument("--family", help="wacoll plan family (default: wacoll's choice)")
    p.add_argument(
        "--clusters",
        type=lambda s: [int(x) for x in s.split(",")],
        help="explicit topology as cluster sizes, e.g. 2,2 (default: "
        "discovered, one cluster per node)",
    )
    p.add_argument(
        "--segment-size",
        type=lambda t: 0 if t.strip() == "0" else parse_size(t),
        help="wacoll.Comm(segment_size=...) for the sweep (0: never cut; "
        "default: wacoll's)",
    )
    p.add_argument(
        "--level",
        choices=("strict", "associative", "commutative"),
        help="wacoll.Comm(level=...) (default: wacoll's, strict); the data "
        "are small integers, exact at every level",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"smoke run: sizes {','.join(human(s) for s in QUICK_SIZES)}, "
        "few repetitions, short analysis",
    )
    p.add_argument(
        "--wait-idle",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="first wait up to SECONDS for the machine to be idle (other jobs "
        "using < 10%% of the CPUs for 3 s); default: do not wait",
    )
    p.add_argument("--no-analysis", action="store_true", help="skip the analysis")
    p.add_argument("--no-write", action="store_true", help="write no result files")
    args = p.parse_args(argv)
    if args.quick:
        args.sizes = args.sizes or list(QUICK_SIZES)
        args.reps = min(args.reps, 60)
        args.min_reps = min(args.min_reps, 3)
        args.budget = min(args.budget, 30.0)
    args.sizes = sorted(set(args.sizes or DEFAULT_SIZES))
    names = {op.lower(): op for op in OPS}
    try:
        args.ops = [names[o.lower()] for o in (args.ops or OPS)]
    except KeyError as exc:
        p.error(f"unknown operation {exc.args[0]!r}; choose from {', '.join(OPS)}")
    if args.reps < 1 or args.min_reps < 1:
        p.error("--reps and --min-reps must be >= 1")
    return args


def git_revision():
    """The checkout's commit, and whether the working tree differs (read-only git)."""
    import subprocess

    try:
        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            [
                "git",
                "-C",
                str(ROOT),
                "status",
                "--porcelain",
                "--untracked-files=no",
                "wacoll",
            ],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "(unknown revision)"
    return f"{head or '?'}{' + uncommitted changes' if dirty else ''}"


def mpi_command_line(size, argv):
    """The command that produced this run (mpiexec reconstructed)."""
    mpiexec = Path(sys.executable).parent / "mpiexec"
    launcher = repo_path(mpiexec) if mpiexec.exists() else "mpiexec"
    return command_line(__file__, argv, launcher=(launcher, "-n", str(size)))


def result_stem(args, size):
    stem = f"collectives-n{size}"
    if args.family:
        stem += f"-{args.family}"
    if args.clusters:
        stem += "-c" + "x".join(map(str, args.clusters))
    if args.segment_size is not None:
        stem += f"-seg{args.segment_size}"
    if args.level:
        stem += f"-{args.level}"
    if args.quick:
        stem += "-quick"
    return stem


# ------------------------------------------------------------------ MPI helpers
def idle_until(world, rank0_work):
    """Run ``rank0_work()`` on rank 0 while the other ranks sleep, not busy-poll."""
    result = None
    if world.rank == 0:
        result = rank0_work()
    idle_barrier(world, poll=0.0005)
    return result


def comm_options(args, **override):
    """The wacoll.Comm keyword arguments this run asks for (an override of None
    drops that option: wacoll's default)."""
    opts = {}
    if args.family:
        opts["family"] = args.family
    if args.level:
        opts["level"] = args.level
    if args.segment_size is not None:
        opts["segment_size"] = args.segment_size
    opts.update(override)
    return {k: v for k, v in opts.items() if v is not None}


def config_label(args, **override):
    """The name of a configuration: ``default`` for the README's
    ``wacoll.Comm(MPI.COMM_WORLD)``, else its options."""
    parts = [f"{k}={v}" for k, v in comm_options(args, **override).items()]
    if args.clusters:
        parts.insert(0, "clusters=" + "x".join(map(str, args.clusters)))
    return ",".join(parts) or "default"


def constructor(args):
    """The configuration's ``wacoll.Comm(...)`` line, for the report."""
    topo = f", Topology.from_sizes({args.clusters})" if args.clusters else ""
    opts = "".join(f", {k}={v!r}" for k, v in comm_options(args).items())
    return f"wacoll.Comm(MPI.COMM_WORLD{topo}{opts})"


def make_comm(wacoll, world, topology, args, **override):
    """The configuration's communicator: ``wacoll.Comm(world)`` exactly as the README
    writes it when no option is asked for."""
    opts = comm_options(args, **override)
    if topology is None and not opts:
        return wacoll.Comm(world)
    return wacoll.Comm(world, topology, **opts)


def configurations(args):
    """``(label, override)`` of the configurations the sweep times: ``default`` first,
    then the one the options ask for (if any)."""
    out = [("default", None)]
    if config_label(args) != "default":
        out.append((config_label(args), {}))
    return out


def used_plan(wc, op):
    """The plan ``wc``'s latest call of ``op`` ran (``wacoll.Comm.last_plan``)."""
    plan = wc.last_plan
    return plan if plan is not None and plan.op == op else None


def plan_label(plan):
    if plan is None:
        return "native (MPI library)"
    seg = (
        f" ({plan.nblocks} blocks)"
        if plan.op in ("bcast", "reduce", "allreduce") and plan.nblocks > 1
        else ""
    )
    return f"{plan.family}/{plan.algorithm}{seg}"


def busy_neighbours():
    """Other processes using CPU now (not this job's ranks), as 'pid:name %cpu'."""
    import subprocess

    try:
        ps = subprocess.run(
            ["ps", "-eo", "pid,ppid,pcpu,comm", "--sort=-pcpu"],
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    mine = {os.getpid(), os.getppid()}
    busy = []
    for line in ps.splitlines()[1:]:
        pid, ppid, cpu, comm = line.split(None, 3)
        if float(cpu) >= 10 and int(pid) not in mine and int(ppid) not in mine:
            busy.append(f"{comm}:{pid} {cpu}%")
    return ", ".join(busy[:6]) or "none"


def cpu_idle_fraction(interval=1.0):
    """Fraction of CPU time idle over ``interval`` seconds (Linux /proc/stat)."""

    def sample():
        with open("/proc/stat") as fh:
            fields = [int(x) for x in fh.readline().split()[1:]]
        return fields[3] + fields[4], sum(fields)  # idle + iowait, total

    idle0, total0 = sample()
    time.sleep(interval)
    idle1, total1 = sample()
    return (idle1 - idle0) / max(total1 - total0, 1)


def wait_idle(world, seconds):
    """Rank 0 waits up to ``seconds`` for 3 idle seconds in a row; the others sleep."""

    def rank0():
        end = time.perf_counter() + seconds
        streak = 0
        while time.perf_counter() < end:
            try:
                idle = cpu_idle_fraction()
            except OSError:
                return None
            streak = streak + 1 if idle >= 0.9 else 0
            if streak >= 3:
                return True
        return False

    return idle_until(world, rank0)


def best_per_call(fn, seconds=0.2, min_calls=20):
    """Smallest mean time per call of ``fn`` over batches (local, no communication)."""
    calls = 1
    while True:
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        elapsed = time.perf_counter() - t
        if elapsed > 0.02 or calls >= 1 << 20:
            break
        calls *= 4
    best = elapsed / calls
    end = time.perf_counter() + seconds
    n = 0
    while time.perf_counter() < end or n < 3:
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t) / calls)
        n += 1
    return best


def interleaved(world, calls, reps):
    """Time ``calls`` (list of callables) interleaved, rotating the order each rep.

    Returns an array (reps, len(calls)) of max-over-ranks seconds.
    """
    from mpi4py import MPI

    k = len(calls)
    local = np.empty((reps, k))
    for r in range(reps):
        for j in range(k):
            which = (r + j) % k
            world.Barrier()
            t = time.perf_counter()
            calls[which]()
            local[r, which] = time.perf_counter() - t
    worst = np.empty_like(local)
    world.Allreduce(local, worst, op=MPI.MAX)
    return worst


# ------------------------------------------------------------------ operations
def values(count, rank, salt=0):
    """float64 small integers: every summation order gives the same bits."""
    return ((np.arange(count, dtype=np.int64) * 7 + rank * 13 + salt) % 1021).astype(
        np.float64
    )


class Case:
    """Buffers and calls of one operation at one size, native and one per wacoll
    communicator (``wcs``)."""

    def __init__(self, opname, count, world, native, wcs):
        from mpi4py import MPI

        self.opname, self.count = opname, count
        P, me = world.size, world.rank
        self.root = 0
        self.defined = True  # does this rank have an output to compare?
        self.fresh = True  # is the output written by the call (not input too)?
        k = len(wcs)
        if opname == "Bcast":
            fill = values(count, 0)
            self.outputs = [fill.copy() for _ in range(k + 1)]
            calls = [lambda c, o: c.Bcast(o, root=0)]
            self.expected = fill
            self.fresh = me != 0
        elif opname in ("Reduce", "Allreduce"):
            self.send = values(count, me)
            self.outputs = [np.zeros(count) for _ in range(k + 1)]
            if opname == "Reduce":
                calls = [lambda c, o: c.Reduce(self.send, o, op=MPI.SUM, root=0)]
                self.defined = me == 0
            else:
                calls = [lambda c, o: c.Allreduce(self.send, o, op=MPI.SUM)]
            self.expected = sum(values(count, r) for r in range(P))
        elif opname == "Allgather":
            self.send = values(count, me)
            self.outputs = [np.zeros(count * P) for _ in range(k + 1)]
            calls = [lambda c, o: c.Allgather(self.send, o)]
            self.expected = np.concatenate([values(count, r) for r in range(P)])
        else:
            raise ValueError(opname)
        call = calls[0]
        self.native = lambda: call(native, self.outputs[0])
        self.wacolls = [
            (lambda c=c, o=o: call(c, o)) for c, o in zip(wcs, self.outputs[1:])
        ]

    def check(self, world):
        """Run each once on fresh outputs; per wacoll communicator, True on every rank
        if its result equals the native one (and the expected values)."""
        from mpi4py import MPI

        if self.fresh:
            for buf in self.outputs:
                buf.fill(np.nan)
        self.native()
        for fn in self.wacolls:
            fn()
        ok = np.ones(len(self.wacolls), np.int32)
        if self.defined:
            n = self.outputs[0]
            for i, w in enumerate(self.outputs[1:]):
                ok[i] = np.array_equal(n, w) and np.array_equal(w, self.expected)
        everywhere = np.empty_like(ok)
        world.Allreduce(ok, everywhere, op=MPI.MIN)
        return [bool(x) for x in everywhere]


# ------------------------------------------------------------------ the sweep
def sweep(args, world, native, comms, out):
    """Time native and every configuration (``comms``: ``[(label, wacoll.Comm)]``,
    ``default`` first), interleaved; one row per operation, size and configuration."""
    from mpi4py import MPI

    P = world.size
    wcs = [wc for _, wc in comms]
    # size-major, so that a budget squeezed by load shortens the largest sizes of
    # every operation alike
    points = [(op, s) for s in args.sizes for op in args.ops]
    rows = []
    # warm up the code paths, the MPI connections and the CPU clock before timing
    warm = [Case(op, 1, world, native, wcs) for op in args.ops]
    interleaved(
        world,
        [c for case in warm for c in (case.native, *case.wacolls)],
        20 if args.quick else 100,
    )
    del warm
    start = time.perf_counter()
    for i, (opname, nbytes) in enumerate(points):
        count = max(1, nbytes // ITEMSIZE)
        case = Case(opname, count, world, native, wcs)
        oks = case.check(world)  # also the first warm-up (wacoll builds its plans)
        labels = [plan_label(used_plan(wc, opname.lower())) for wc in wcs]
        calls = [case.native, *case.wacolls]
        world.Barrier()
        t = time.perf_counter()
        for fn in calls:
            fn()
        t = world.allreduce(time.perf_counter() - t, op=MPI.MAX)
        spent = world.allreduce(time.perf_counter() - start, op=MPI.MAX)
        left = max(args.budget - spent, 0.0)
        per_point = left / (len(points) - i)
        reps = int(per_point / max(t, 1e-9))
        reps = max(args.min_reps, min(args.reps, reps))
        worst = interleaved(world, calls, reps) * 1e6
        nat = worst[:, 0]
        for j, (config, _) in enumerate(comms):
            wac = worst[:, j + 1]
            row = {
                "op": opname,
                "bytes": count * ITEMSIZE,
                "count": count,
                "ranks": P,
                "config": config,
                "plan": labels[j],
                "reps": reps,
                "native_us": float(np.median(nat)),
                "wacoll_us": float(np.median(wac)),
                "native_min_us": float(nat.min()),
                "wacoll_min_us": float(wac.min()),
                "native_p75_us": float(np.percentile(nat, 75)),
                "wacoll_p75_us": float(np.percentile(wac, 75)),
                "ok": oks[j],
                "load1": load1(),
                "command": args.command,
            }
            row["ratio"] = row["wacoll_us"] / row["native_us"]
            rows.append(row)
            if world.rank == 0:
                print(
                    f"  {opname:<10}{human(count * ITEMSIZE):>9}  native "
                    f"{row['native_us']:>11.1f} us  {config} {row['wacoll_us']:>11.1f} us"
                    f"  x{row['ratio']:.2f}  reps {reps}"
                    f"{'' if oks[j] else '  RESULT MISMATCH'}",
                    file=sys.stderr,
                    flush=True,
                )
        del case
    order = {op: i for i, op in enumerate(args.ops)}
    configs = {c: i for i, (c, _) in enumerate(comms)}
    return sorted(rows, key=lambda r: (configs[r["config"]], order[r["op"]], r["bytes"]))


def table(rows, out):
    for config in dict.fromkeys(r["config"] for r in rows):
        out(
            f"wacoll configuration: {config}"
            + (
                "  (wacoll.Comm(MPI.COMM_WORLD), no options, as the README)"
                if config == "default"
                else ""
            )
        )
        table_of([r for r in rows if r["config"] == config], out)
        out()
    out(
        "(times: median over repetitions of the max over ranks; 'min ratio': ratio of "
        "the fastest repetitions, less sensitive to load)"
    )


def table_of(rows, out):
    out(
        f"{'op':<10} {'bytes':>9} {'native us':>11} {'wacoll us':>11} {'ratio':>7} "
        f"{'min ratio':>9} {'reps':>5}  ok   wacoll plan"
    )
    for r in rows:
        out(
            f"{r['op']:<10} {human(r['bytes']):>9} {r['native_us']:>11.1f} "
            f"{r['wacoll_us']:>11.1f} {r['ratio']:>7.2f} "
            f"{r['wacoll_min_us'] / r['native_min_us']:>9.2f} {r['reps']:>5}  "
            f"{'yes' if r['ok'] else 'NO ':<4} {r['plan']}"
        )


def summary(rows, out):
    for config in dict.fromkeys(r["config"] for r in rows):
        summary_of([r for r in rows if r["config"] == config], config, out)


def summary_of(rows, config, out):
    by = {(r["op"], r["bytes"]): r for r in rows}
    ops = list(dict.fromkeys(r["op"] for r in rows))
    sizes = [s for s in SUMMARY_SIZES if any((op, s) in by for op in ops)]
    out(f"ratio wacoll/native at selected sizes, configuration {config}:")
    out(
        f"{'op':<10}"
        + "".join(f"{human(s):>10}" for s in sizes)
        + f"{'8 B overhead':>16}   goal (<= {GOAL_RATIO}x from {human(GOAL_FROM)})"
    )
    for op in ops:
        cells = "".join(
            f"{by[(op, s)]['ratio']:>10.2f}" if (op, s) in by else f"{'-':>10}"
            for s in sizes
        )
        small = min((r for r in rows if r["op"] == op), key=lambda r: r["bytes"])
        over = small["wacoll_us"] - small["native_us"]
        big = [r for r in rows if r["op"] == op and r["bytes"] >= GOAL_FROM]
        if big:
            worst = max(big, key=lambda r: r["ratio"])
            goal = (
                "met"
                if worst["ratio"] <= GOAL_RATIO
                else f"missed (worst x{worst['ratio']:.2f} at {human(worst['bytes'])})"
            )
        else:
            goal = "n/a"
        out(f"{op:<10}{cells}{over:>13.1f} us   {goal}")
    out(
        f"(8 B overhead = wacoll - native median at {human(min(r['bytes'] for r in rows))})"
    )


def plot(rows, path, title):
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    configs = list(dict.fromkeys(r["config"] for r in rows))
    styles = ("-", "--", ":", "-.")
    for op in dict.fromkeys(r["op"] for r in rows):
        colour = None
        for k, config in enumerate(configs):
            pts = [
                (r["bytes"], r["ratio"])
                for r in rows
                if r["op"] == op and r["config"] == config
            ]
            (line,) = ax.plot(
                *zip(*pts),
                marker="o",
                ls=styles[k % len(styles)],
                color=colour,
                label=op if len(configs) == 1 else f"{op} ({config})",
            )
            colour = line.get_color()
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.axhline(GOAL_RATIO, color="red", lw=0.8, ls="--", label=f"goal {GOAL_RATIO}x")
    ax.axvline(GOAL_FROM, color="red", lw=0.8, ls=":")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    sizes = sorted({r["bytes"] for r in rows})
    ax.set_xticks(sizes)
    ax.set_xticklabels(
        [human(s).replace(" ", "") for s in sizes], rotation=45, fontsize=8
    )
    ax.set_xlabel("message size per rank")
    ax.set_ylabel("wacoll time / native time (median)")
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    save_figure(fig, path, 120)


# ------------------------------------------------------------------ analysis
def replay(plan, comm, inbuf, outbuf):
    """The same plan as a minimal mpi4py program: one block, SUM, no checks.

    A floor for any Python executor of this plan over mpi4py point-to-point.
    """
    from mpi4py import MPI

    bufs = {"in": inbuf, "out": outbuf}
    sends = []
    for step in plan.programs[comm.rank]:
        kind = step.kind
        if kind == "send":
            sends.append(comm.Isend(bufs[step.src], dest=step.peer, tag=1))
        elif kind == "recv":
            comm.Recv(
                bufs.setdefault(step.dst, np.empty_like(outbuf)), source=step.peer, tag=1
            )
        elif kind == "recv_combine":
            tmp = np.empty_like(outbuf)
            comm.Recv(tmp, source=step.peer, tag=1)
            dst = bufs.setdefault(step.dst, np.empty_like(outbuf))
            np.add(dst, tmp, out=dst)
        elif kind == "copy":
            bufs.setdefault(step.dst, np.empty_like(outbuf))[:] = bufs[step.src]
        else:
            dst = bufs.setdefault(step.dst, np.empty_like(outbuf))
            np.add(dst, bufs[step.src], out=dst)
    MPI.Request.Waitall(sends)


def small_analysis(args, world, native, wacoll, topology, out):
    """Where the time of an 8-byte Allreduce goes (public API only); whether the
    configuration's call ran as the MPI library's own collective."""
    from mpi4py import MPI

    from wacoll.mpi.executor import execute
    from wacoll.plans import Call, lower, select

    P, me = world.size, world.rank
    config = config_label(args)
    wv = make_comm(wacoll, world, topology, args)
    wn = make_comm(wacoll, world, topology, args, validate=False)
    send, nout = np.array([1.0 + me]), np.zeros(1)
    wout, vout, eout, rout = np.zeros(1), np.zeros(1), np.zeros(1), np.zeros(1)
    wv.Allreduce(send, wout, op=MPI.SUM)
    wn.Allreduce(send, vout, op=MPI.SUM)
    plan = used_plan(wv, "allreduce")
    ran_natively = plan is None  # one cluster: the MPI library ran the call
    if ran_natively:  # the executor rows then time the plan a forced family runs
        plan = select(
            Call("allreduce", count=1, itemsize=8, level="commutative"),
            wv.network,
            family="mpich",
        ).build(wv.network)
    program = lower(plan, me)
    ecomm, rcomm = world.Dup(), world.Dup()
    scratch = {}
    calls = [
        lambda: native.Allreduce(send, nout, op=MPI.SUM),
        lambda: wv.Allreduce(send, wout, op=MPI.SUM),
        lambda: wn.Allreduce(send, vout, op=MPI.SUM),
        lambda: execute(program, ecomm, send, eout, op=MPI.SUM, scratch=scratch),
        lambda: replay(plan, rcomm, send, rout),
    ]
    for c in calls:
        c()
    ok = world.allreduce(
        bool(nout[0] == wout[0] == vout[0] == eout[0] == rout[0]), op=MPI.LAND
    )
    flags = np.zeros(3, np.int64)
    agree_only = lambda: wn.mpi_comm.Allreduce(MPI.IN_PLACE, flags, op=MPI.MAX)  # noqa
    calls.append(agree_only)
    reps = 60 if args.quick else 400
    worst = interleaved(world, calls, reps)
    med = np.median(worst, axis=0) * 1e6
    t_nat, t_val, t_noval, t_exec, t_replay, t_agree = med
    out(
        f"Small messages: Allreduce of 8 B on {P} ranks, configuration {config}, "
        + (
            "the MPI library's own collective (the executor and replay rows: the mpich "
            "family's "
            if ran_natively
            else "plan "
        )
        + f"{plan.family}/{plan.algorithm} ({plan.prove().messages} messages"
        + ("))" if ran_natively else ")")
        + f", median of {reps} interleaved reps, max over ranks"
        + ("" if ok else "  (RESULT MISMATCH)")
        + ":"
    )
    width = max(48, len(config) + 36)
    for name, value, note in (
        ("native MPI Allreduce", t_nat, ""),
        (
            "minimal mpi4py replay of the same plan",
            t_replay,
            f"algorithm + mpi4py p2p floor: +{t_replay - t_nat:.1f} us over native",
        ),
        (
            "executor alone: execute(lower(plan, rank))",
            t_exec,
            f"+{t_exec - t_replay:.1f} us over the replay: the executor",
        ),
        (
            f"wacoll.Comm [{config}], validate=False",
            t_noval,
            f"+{t_noval - t_exec:.1f} us over the executor alone: arguments, plan "
            f"and program lookup",
        ),
        (
            f"wacoll.Comm [{config}], validation on",
            t_val,
            f"+{t_val - t_noval:.1f} us: the argument agreement",
        ),
        ("agreement-sized collective alone (3 x int64)", t_agree, ""),
    ):
        out(f"  {name:<{width}}{value:9.1f} us" + (f"   ({note})" if note else ""))

    # local steps on rank 0 (others sleep, so rank 0 has a core)
    def local():
        res = {}
        call = Call("allreduce", count=1, itemsize=8, level=wv.level)

        def choose():
            return select(
                call,
                wv.network,
                comm_family=wv.family,
                comm_options=wv.options,
                policy=wv.policy,
            )

        res["select (the selection policy's choice)"] = best_per_call(choose)
        chosen = choose()
        if not chosen.native:  # else the MPI library runs it: nothing to build
            res["Selection.build (build + prove, uncached)"] = best_per_call(
                lambda: chosen.build(wv.network), min_calls=3
            )
        res["plan.prove() (cached)"] = best_per_call(plan.prove)
        res["lower(plan, rank) (uncached)"] = best_per_call(lambda: lower(plan, me))
        a, b = np.ones(1), np.ones(1)
        from wacoll._kernels import reduce_into

        res["kernel reduce_into (1 element)"] = best_per_call(
            lambda: reduce_into(MPI.SUM, a, b)
        )
        res["numpy np.add(out=) (1 element)"] = best_per_call(lambda: np.add(a, b, out=b))
        res["MPI.Op.Reduce_local (1 element)"] = best_per_call(
            lambda: MPI.SUM.Reduce_local(a, b)
        )
        sc = MPI.COMM_SELF
        buf = np.zeros(1)

        def selfmsg():
            r = sc.Irecv(buf, source=0, tag=3)
            s = sc.Isend(a, dest=0, tag=3)
            MPI.Request.Waitall([r, s])

        res["mpi4py Irecv+Isend+Waitall to self"] = best_per_call(selfmsg)
        return res

    res = idle_until(world, local)
    if me == 0:
        out(
            "  local costs on rank 0 (no communication, best of batches; wacoll.Comm "
            "caches the plan and the lowered program, so a repeated call pays neither "
            "build nor lower):"
        )
        for name, sec in res.items():
            out(f"    {name:<46}{sec * 1e6:9.2f} us")
    phases_small(args, world, wacoll, topology, send, out)
    profile_small(args, world, wv, send, wout, out)
    for c in (wv, wn):
        c.Free()
    ecomm.Free()
    rcomm.Free()
    return ran_natively


PHASES = ("arguments", "agreement", "plan", "lower", "execute")


def phase_times(records):
    """Per-call seconds of each phase and of the whole call, from a tracer's records
    (``phase`` and ``operation`` events of ``wacoll.Comm(..., trace=True)``)."""
    acc = dict.fromkeys(PHASES, 0.0)
    total, calls = 0.0, 0
    for rec in records:
        if rec["cat"] == "phase" and rec["name"] in acc:
            acc[rec["name"]] += rec["end"] - rec["start"]
        elif rec["cat"] == "operation":
            total += rec["end"] - rec["start"]
            calls += 1
    calls = max(calls, 1)
    return [total / calls] + [acc[name] / calls for name in PHASES], calls


def phases_small(args, world, wacoll, topology, send, out):
    """Per-phase wall time of small Allreduce calls, every rank, from the tracer."""
    from mpi4py import MPI

    n = 200 if args.quick else 1000
    config = config_label(args)
    wt = make_comm(wacoll, world, topology, args, trace=True)
    outbuf = np.zeros(1)
    wt.Allreduce(send, outbuf, op=MPI.SUM)  # plan and program built, cached
    wt.tracer.records.clear()
    world.Barrier()
    t = time.perf_counter()
    for _ in range(n):
        wt.Allreduce(send, outbuf, op=MPI.SUM)
    t = time.perf_counter() - t
    mine, calls = phase_times(wt.tracer.records)
    mine = np.array([t / n] + mine) * 1e6
    wt.Free()
    allr = np.array(world.gather(mine, root=0) or [])
    if world.rank == 0:
        out(
            f"  wall time per phase, {n} back-to-back Allreduce calls of 8 B on a "
            f"communicator of configuration {config} created with trace=True for this "
            f"run only (its 'phase' events; tracing adds a little per call and step), "
            f"us per call:"
        )
        out("    rank   per call   traced call" + "".join(f"{p:>11}" for p in PHASES))
        for r, row in enumerate(allr):
            out(
                f"    {r:>4} {row[0]:>10.1f} {row[1]:>13.1f}"
                + "".join(f"{v:>11.1f}" for v in row[2:])
            )
        m = allr.mean(axis=0)
        out(
            f"    mean {m[0]:>10.1f} {m[1]:>13.1f}"
            + "".join(f"{v:>11.1f}" for v in m[2:])
        )


def profile_small(args, world, wc, send, outbuf, out):
    from mpi4py import MPI

    n = 200 if args.quick else 1000
    prof = cProfile.Profile() if world.rank == 0 else None
    world.Barrier()
    if prof:
        prof.enable()
    t = time.perf_counter()
    for _ in range(n):
        wc.Allreduce(send, outbuf, op=MPI.SUM)
    t = time.perf_counter() - t
    if prof:
        prof.disable()
        stream = io.StringIO()
        stats = pstats.Stats(prof, stream=stream)
        out(
            f"  cProfile, rank 0 only, {n} Allreduce calls of 8 B: {t / n * 1e6:.1f} us "
            f"per call under the profiler. mpi4py's Cython methods are invisible to "
            f"cProfile: their time (MPI calls and waiting) counts as the own time of the "
            f"wacoll function calling them. Cumulative time per call:"
        )
        wanted = {
            ("comm.py", "Allreduce"): "Comm.Allreduce (whole call)",
            ("agreement.py", "agree"): "  agree (argument agreement)",
            ("executor.py", "execute"): "  execute (executor)",
        }
        for (file, func), label in wanted.items():
            for k, v in stats.stats.items():
                if k[0].endswith(file) and k[2] == func:
                    out(
                        f"    {label:<44}{v[3] / n * 1e6:8.1f} us  (own {v[2] / n * 1e6:6.1f})"
                    )
                    break
        stats.sort_stats("tottime").print_stats(14)
        lines = [ln for ln in stream.getvalue().splitlines() if ln.strip()]
        start = next(i for i, ln in enumerate(lines) if "ncalls" in ln)
        out("  top functions by own time:")
        for ln in lines[start:]:
            out("    " + ln.replace(str(Path.cwd()) + "/", "")[:150])


def plan_work(plan, rank):
    """Per-call work of ``rank``'s lowered program (:func:`wacoll.plans.lower`).

    Returns elements freshly allocated (scratch buffers and receive temporaries; a
    ``wacoll.Comm`` reuses its scratch buffers from call to call), copied by copy
    steps, packed (sends/copies of non-contiguous blocks), and combined by kernels.
    """
    from wacoll.plans import lower

    program = lower(plan, rank)
    sizes = list(program.scratch_sizes.values())
    work = {"copy": 0, "pack": 0, "combine": 0}
    for step in program.steps:
        n = step.elements
        if step.kind in ("recv", "recv_combine") and not step.direct:
            sizes.append(n)
        if step.kind == "copy":
            work["copy"] += n
        if step.kind in ("send", "copy", "combine") and step.src and len(step.src[1]) > 1:
            work["pack"] += n
        if step.kind in ("recv_combine", "combine"):
            work["combine"] += n
    work["alloc"], work["allocs"] = sum(sizes), len(sizes)
    work["big"] = sum(n for n in sizes if n * ITEMSIZE >= MMAP_MAX)
    return work


def step_times(records):
    """Per-call seconds by step kind, plus 'rest' and 'total', from tracer records:
    ``step`` events inside the ``execute`` phase events ('total': the execute phase;
    'rest': what of it no step covers)."""
    agg, total, calls = {}, 0.0, 0
    for rec in records:
        dur = rec["end"] - rec["start"]
        if rec["cat"] == "operation":
            calls += 1
        elif rec["cat"] == "phase" and rec["name"] == "execute":
            total += dur
        elif rec["cat"] == "step":
            kind = rec["name"].split()[0]
            agg[kind] = agg.get(kind, 0.0) + dur
    calls = max(calls, 1)
    per = {k: v / calls for k, v in agg.items()}
    per["rest"] = (total - sum(agg.values())) / calls
    per["total"] = total / calls
    return per, calls


def large_analysis(args, world, native, wacoll, topology, nbytes, out):
    """Where the time of a large Allreduce / Bcast goes: copies, kernels, transfer."""
    from mpi4py import MPI

    from wacoll._kernels import copy_into, reduce_into
    from wacoll.mpi.trace import Tracer

    P, me = world.size, world.rank
    count = nbytes // ITEMSIZE
    out(f"Large messages: {human(nbytes)} per rank on {P} ranks")

    # local kernels and copies on rank 0 alone
    def local():
        a, b = values(count, 1), values(count, 2)
        reps = 3

        def best(fn):
            ts = []
            for _ in range(reps):
                t = time.perf_counter()
                fn()
                ts.append(time.perf_counter() - t)
            return min(ts)

        return {
            "kernel reduce_into(SUM) (wacoll._kernels)": best(
                lambda: reduce_into(MPI.SUM, a, b)
            ),
            "numpy np.add(b, a, out=b)": best(lambda: np.add(b, a, out=b)),
            "MPI.SUM.Reduce_local": best(lambda: MPI.SUM.Reduce_local(a, b)),
            "copy: wacoll._kernels.copy_into": best(lambda: copy_into(a, b)),
            "copy: np.copyto": best(lambda: np.copyto(b, a)),
            "fresh buffer: np.empty + first touch": best(lambda: np.empty(count).fill(0)),
            "reused buffer: fill": best(lambda: b.fill(0)),
        }

    res = idle_until(world, local)
    if me == 0:
        out("  local on rank 0 (others asleep), best of 3:")
        for name, sec in res.items():
            out(f"    {name:<44}{sec * 1e3:9.2f} ms  ({nbytes / sec / 1e9:5.2f} GB/s)")

    # point-to-point transfer 0 <-> 1, other ranks asleep
    buf = np.zeros(count)
    ppcomm = world.Dup()
    if P >= 2:
        trips = round_trips(ppcomm, 1, buf, 3)
        idle_barrier(world, poll=0.0005)
        if me == 0:
            one_way = min(trips) / 2
            out(
                f"    one message rank 0 -> 1 (ping-pong / 2)     {one_way * 1e3:9.2f} ms  "
                f"({nbytes / one_way / 1e9:5.2f} GB/s)"
            )
    ppcomm.Free()
    del buf

    # executor step times from wacoll's tracer
    config = config_label(args)
    wd = make_comm(wacoll, world, topology, args)
    if args.segment_size == 0:
        wv = make_comm(wacoll, world, topology, args, segment_size=None)
        wv_label = config_label(args, segment_size=None)
    else:
        wv = make_comm(wacoll, world, topology, args, segment_size=0)
        wv_label = config_label(args, segment_size=0) + " (unsegmented)"
    wt = make_comm(wacoll, world, topology, args, trace=True)
    wcpu = make_comm(wacoll, world, topology, args, trace=True)
    wcpu.tracer = Tracer(clock=time.process_time)  # CPU time instead of wall time
    send = values(count, me)
    nout, wout = np.zeros(count), np.zeros(count)
    for opname, call in (
        ("Allreduce", lambda c, o: c.Allreduce(send, o, op=MPI.SUM)),
        ("Bcast", lambda c, o: c.Bcast(o, root=0)),
    ):
        calls = [
            lambda: call(native, nout),
            lambda: call(wd, wout),
            lambda: call(wv, wout),
        ]
        for c in calls[1:]:
            c()
        reps = 3 if args.quick else 5
        worst = interleaved(world, calls, reps)
        med = np.median(worst, axis=0) * 1e3
        plan = used_plan(wd, opname.lower())
        vplan = used_plan(wv, opname.lower())
        traced = {}
        for name, tc in (("wall", wt), ("cpu", wcpu)):
            call(tc, wout)
            tc.tracer.records.clear()
            for _ in range(2 if args.quick else 3):
                world.Barrier()
                call(tc, wout)
            traced[name] = step_times(tc.tracer.records)
        everyone = world.gather(traced, root=0)
        work = world.gather(plan_work(plan, me), root=0)
        if me == 0:
            out(
                f"  {opname} {human(nbytes)}: native {med[0]:.2f} ms; wacoll {config} "
                f"{plan_label(plan)} {med[1]:.2f} ms (x{med[1] / med[0]:.2f}); "
                f"{wv_label}: {plan_label(vplan)} {med[2]:.2f} ms "
                f"(x{med[2] / med[0]:.2f}); medians of {reps} interleaved"
            )
            out(
                f"    {plan_label(plan)}, per rank and call, by step kind, wall ms / CPU ms "
                "(the tracer's step events, on communicators created with trace=True "
                "for this only; 'recv*' includes waiting for the data and busy-polling, 'send' "
                "only posting it, 'total' = the execute phase, 'rest' = final Waitall of "
                "sends + setup; wall time includes being descheduled):"
            )
            kinds = sorted(
                {k for t in everyone for k in t["wall"][0]} - {"rest", "total"}
            )
            out("      rank " + "".join(f"{k:>18}" for k in kinds + ["rest", "total"]))
            for r, t in enumerate(everyone):
                cells = []
                for k in kinds + ["rest", "total"]:
                    wall, cpu = t["wall"][0].get(k, 0.0), t["cpu"][0].get(k, 0.0)
                    cells.append(f"{wall * 1e3:>9.1f} /{cpu * 1e3:>7.1f}")
                out(f"      {r:>4} " + "".join(cells))
            if work:
                mib = ITEMSIZE / (1 << 20)
                out(
                    "    per-call work of each rank's lowered program (MiB): allocations "
                    f"(scratch + receive temporaries; 'fresh' = arrays >= {human(MMAP_MAX)}, "
                    "which glibc maps afresh when allocated; wacoll.Comm reuses its "
                    "scratch), copy steps, packing, kernel input"
                )
                for r, w in enumerate(work):
                    out(
                        f"      {r:>4}  alloc {w['alloc'] * mib:7.1f} in {w['allocs']:>4} "
                        f"arrays, fresh {w['big'] * mib:6.1f}   copy {w['copy'] * mib:6.1f}"
                        f"   pack {w['pack'] * mib:6.1f}   combine {w['combine'] * mib:6.1f}"
                    )
                if res and any(w["big"] or w["copy"] for w in work):
                    fault = (
                        max(
                            res["fresh buffer: np.empty + first touch"]
                            - res["reused buffer: fill"],
                            0.0,
                        )
                        / nbytes
                    )
                    big = max(w["big"] for w in work) * ITEMSIZE
                    copy = max(w["copy"] for w in work) * ITEMSIZE
                    out(
                        f"    fresh pages cost {fault * (1 << 20) * 1e3:.3f} ms/MiB more than "
                        f"reused ones: ~{big * fault * 1e3:.1f} ms per call on the rank with "
                        f"most fresh arrays; its copy steps ~"
                        f"{copy / nbytes * res['copy: np.copyto'] * 1e3:.1f} ms"
                    )
    for c in (wd, wv, wt, wcpu):
        c.Free()


# ------------------------------------------------------------------ main
def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    wacoll = import_wacoll(world)
    P, me = world.size, world.rank
    args.command = mpi_command_line(P, argv)
    out = Report() if me == 0 else lambda text="": None

    topology = wacoll.Topology.from_sizes(args.clusters) if args.clusters else None
    # the README's communicator first, then the configuration asked for (if any)
    comms = [
        (
            label,
            wacoll.Comm(world)
            if override is None
            else make_comm(wacoll, world, topology, args),
        )
        for label, override in configurations(args)
    ]
    native = world.Dup()
    cores = os.cpu_count() or 1
    idle = wait_idle(world, args.wait_idle) if args.wait_idle > 0 else None
    out(
        f"wacoll collectives vs native MPI on {P} ranks, {cores} cores"
        f"{' (OVERSUBSCRIBED: busy-polling ranks share cores, expect noise)' if P > cores else ''}"
    )
    out(
        f"MPI: {MPI.Get_library_version().splitlines()[0].strip()}; mpi4py "
        f"{__import__('mpi4py').__version__}; numpy {np.__version__}; Python "
        f"{platform.python_version()}"
    )
    out(f"wacoll {git_revision()}")
    for label, wc in comms:
        out(
            f"  configuration {label}"
            + (
                " = wacoll.Comm(MPI.COMM_WORLD), no options (as the README)"
                if label == "default"
                else f" = {constructor(args)}"
            )
            + f": family {wc.family or 'the selection policy'}, topology {wc.network}, "
            f"level {wc.level}, validate {wc.validate}, segment_size "
            f"{wc.policy.segment_size}"
        )
    if me == 0:
        neighbours = busy_neighbours()
    out(
        f"load average at start {load1()}; other busy processes: "
        f"{neighbours if me == 0 else ''}"
        + (
            ""
            if idle is None
            else "; waited for an idle machine: "
            + ("found" if idle else f"NOT found within {args.wait_idle:.0f} s")
        )
    )
    out(
        f"float64 data; size = bytes per rank (Allgather receives {P}x); median over "
        f"repetitions of the max over ranks; native and wacoll interleaved"
    )
    out()
    t0 = time.perf_counter()
    rows = sweep(args, world, native, comms, out)
    sweep_s = time.perf_counter() - t0
    table(rows, out)
    out()
    summary(rows, out)
    if not all(r["ok"] for r in rows):
        bad = ", ".join(
            f"{r['op']} {human(r['bytes'])} ({r['config']})" for r in rows if not r["ok"]
        )
        out(f"RESULT MISMATCH (wacoll != native): {bad}")
    out(
        f"sweep took {sweep_s:.0f} s; load average during the sweep "
        f"{min(r['load1'] for r in rows)}..{max(r['load1'] for r in rows)}"
    )
    out(f"command: {args.command}")
    for _, wc in comms:
        wc.Free()
    if not args.no_analysis:
        out()
        out("Where the time goes")
        out("-------------------")
        ran_natively = small_analysis(args, world, native, wacoll, topology, out)
        out()
        big = max(args.sizes)
        if ran_natively:
            out(
                "Large messages: the MPI library ran the configuration's calls (one "
                "cluster): no plan steps to analyse"
            )
        else:
            large_analysis(
                args, world, native, wacoll, topology, max(big, 8 * ITEMSIZE), out
            )
    total = time.perf_counter() - t0
    out()
    out(f"total {total:.0f} s")
    native.Free()
    if me == 0 and not args.no_write:
        RESULTS.mkdir(parents=True, exist_ok=True)
        stem = result_stem(args, P)
        write_csv(
            RESULTS / f"{stem}.csv",
            FIELDS,
            (
                {k: f"{v:.3f}" if isinstance(v, float) else v for k, v in r.items()}
                for r in rows
            ),
        )
        loads = [r["load1"] for r in rows]
        plot(
            rows,
            RESULTS / f"{stem}.png",
            f"wacoll / native MPI, {P} ranks on {cores} cores, load average "
            f"{min(loads)}..{max(loads)}\n{args.command}",
        )
        out.write(RESULTS / f"{stem}.txt")
        print(f"wrote {RESULTS / stem}.csv, .png, .txt", file=sys.stderr)


if __name__ == "__main__":
    with abort_on_error():
        main()
