"""What a user gets on four networks: ``wacoll.Comm(MPI.COMM_WORLD)`` with no options
against the MPI library's own collectives, side by side on the emulated testbed.

The networks (cluster sizes, one-way latency and bandwidth between clusters):

``lan``         4 x 2, 100 us, 12.5 MB/s (SMP nodes on a LAN, PATHS's setting)
``metro``       4 x 2, 500 us, 100 MB/s
``wan``         4 x 2, 10 ms, 1 MB/s (MagPIe's grid)
``longfast``    2 x 4, 5 ms, 100 MB/s (Matsuda's long-and-fast link)

For each network, Barrier, Bcast, Reduce, Allreduce, Allgather and Alltoall (float64;
Allgather and Alltoall: the bytes are per rank's block) at the network's sizes (8 B,
64 KiB, 1 MiB; the WAN leaves out 1 MiB, minutes per call at 1 MB/s; the long-and-fast
link adds 16 MiB for Bcast and Allreduce), timed by :mod:`wacoll.tools.measure`: from a
common start instant to the last rank's finish, the two implementations interleaved,
the median of ``--reps`` repetitions (at least ``--short-reps`` of the 8-byte cases,
whose calls vary as much as their implementations differ). ``native`` is the MPI
library's collective;
``default`` is ``wacoll.Comm(MPI.COMM_WORLD)`` with no options (every rank told the
testbed's topology, its clusters and configured links, by ``WACOLL_TOPOLOGY``, as the
testbed does), after :data:`WARMUP` untimed calls, in which it learns the fastest of
its candidates (:mod:`wacoll.mpi.learning`).

Run (as root, where the testbed can be built)::

    .venv/bin/python benchmarks/bench_networks.py                 # all four
    .venv/bin/python benchmarks/bench_networks.py --networks lan,metro --reps 5

Prints a table of times and ratios (default / native: below 1, wacoll is faster) and
the geometric mean per network; writes ``benchmarks/results/networks.csv`` and
``networks.png`` (the ratios per network). Each case also gives its physical bound
(:func:`wacoll.plans.bounds.physical_bound`: one wide-area latency plus the bytes a
cluster must receive over its incoming links, whatever the algorithm), and each network
the geometric mean of bound / library: the lowest mean any algorithm could reach there.
``--report CSV`` prints the table of an earlier run's CSV again (bounds included)
without running anything. ``--families magpie,mpich,...`` times each
family forced too, as a user gets it (``wacoll.Comm(MPI.COMM_WORLD,
family=...)``: its calls checked across ranks, as the default's are), and gives the
default against the best of them and the library::

    .venv/bin/python benchmarks/bench_networks.py --reps 5 --out \
        benchmarks/results/networks-families.csv \
        --families magpie,mpich,modern,gridmpi,recent,hierarchical
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"

KIB, MIB = 1024, 1024 * 1024
OPS = ("barrier", "bcast", "reduce", "allreduce", "allgather", "alltoall")
#: name: (cluster sizes, latency s, bandwidth B/s, sizes, extra sizes for bcast and
#: allreduce)
NETWORKS = {
    "lan": ((2, 2, 2, 2), 100e-6, 12.5e6, (8, 64 * KIB, MIB), ()),
    "metro": ((2, 2, 2, 2), 500e-6, 100e6, (8, 64 * KIB, MIB), ()),
    "wan": ((2, 2, 2, 2), 10e-3, 1e6, (8, 64 * KIB), ()),
    "longfast": ((4, 4), 5e-3, 100e6, (8, 64 * KIB, MIB), (16 * MIB,)),
}
IMPLS = ("native", "default")
#: Untimed calls of each implementation per case before the timed ones (the default
#: communicator explores 6 calls of each of its 3 candidates:
#: wacoll.mpi.learning.exploration_calls), so the timed calls are those of call 25 on
#: (the issue's goal: from call 20 on).
WARMUP = 24
#: A case's first calls of each implementation timed one by one, from a common
#: start as the timed calls are: their sum is the cold column (what a short job,
#: or a loop's first shape, pays: the default's plans built, proved and compiled,
#: its candidates explored).
COLD = 20
#: Repetitions of the 8-byte cases at least (``--short-reps``): calls of a
#: millisecond or less vary by a tenth of a millisecond with four ranks per core,
#: as much as their implementations differ, and cost little to repeat.
SHORT_REPS = 15


def _cases(sizes, extra, reps, families=(), short_reps=SHORT_REPS):
    from wacoll.plans import builders

    cases = []
    for op in OPS:
        for nbytes in (
            (8,)
            if op == "barrier"
            else sizes + (extra if op in ("bcast", "allreduce") else ())
        ):
            forced = [f for f in families if op in builders(f)]
            cases.append(
                {
                    "label": f"{op} {nbytes}",
                    "op": op,
                    "bytes": nbytes,
                    "impls": list(IMPLS) + forced,
                    "reps": max(reps, short_reps) if nbytes <= 8 else reps,
                }
            )
    # a user's loop: the communicator has explored its candidates (wacoll.mpi.learning)
    # before the timed calls; a family forced is timed as a user gets it, its calls
    # checked across ranks as the default's are (unchecked, a forced family saved
    # the check's own small collective, about 0.2 ms of an 8-byte call on the LAN,
    # and the default was held against what no user of it runs)
    # the start margin as short as the network allows (tools.measure.start_margin):
    # a call timed after 50 ms of idling runs cold, unlike the calls of a loop
    return {
        "reps": reps,
        "cases": cases,
        "progress": True,
        "warmup": WARMUP,
        "cold": COLD,
        "validate": True,
        "margin": "auto",
    }


def _learned(row):
    """A tuning row of the default, as read: each candidate's measured time, the
    choice marked."""
    times = ", ".join(
        f"{'*' if c == row['chosen'] else ''}{c} {s * 1e3:.3g}"
        for c, s in zip(row["candidates"], row["seconds"])
    )
    return f"{times} ms"


def _size(nbytes):
    return (
        f"{nbytes // MIB} MiB"
        if nbytes >= MIB
        else (f"{nbytes // KIB} KiB" if nbytes >= KIB else f"{nbytes} B")
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--networks", default=",".join(NETWORKS))
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument(
        "--short-reps",
        type=int,
        default=SHORT_REPS,
        help=f"repetitions of the 8-byte cases at least (default {SHORT_REPS})",
    )
    parser.add_argument("--out", default=str(RESULTS / "networks.csv"))
    parser.add_argument(
        "--report",
        metavar="CSV",
        help="print the table of an earlier run's CSV (with the bounds) and run nothing",
    )
    parser.add_argument(
        "--families",
        default="",
        help="plan families to time forced too, comma-separated (e.g. "
        "magpie,mpich,modern,gridmpi,recent,hierarchical): the "
        "table then gives the default against the best of them "
        "and the library",
    )
    args = parser.parse_args(argv)
    families = [f for f in args.families.split(",") if f]
    if args.report:
        try:
            rows = _read_rows(Path(args.report))
        except (OSError, KeyError, ValueError) as exc:
            parser.error(
                f"--report {args.report}: not a CSV this benchmark wrote "
                f"({type(exc).__name__}: {exc})"
            )
        if not rows:
            parser.error(f"--report {args.report}: no rows")
        names = list(dict.fromkeys(r["network"] for r in rows))
        print(f"reprinted from {args.report} (an earlier run; nothing was timed now)")
        _report(
            rows,
            names,
            "best" in rows[0],
            None,
            None,
            {r["network"]: r.get("margin_s") for r in rows},
        )
        return 0
    names = [n for n in args.networks.split(",") if n]
    unknown = set(names) - set(NETWORKS)
    if unknown:
        parser.error(f"unknown network(s) {sorted(unknown)}; known: {list(NETWORKS)}")

    from wacoll import Topology
    from wacoll.tools.measure import run_on_testbed

    rows, margins = [], {}
    for name in names:
        sizes, latency, bandwidth, main_sizes, extra = NETWORKS[name]
        topology = Topology.from_sizes(
            list(sizes), wan_latency=latency, wan_bandwidth=bandwidth
        )
        print(
            f"# {name}: {'x'.join(map(str, sizes))}, {latency * 1e3:g} ms, "
            f"{bandwidth / 1e6:g} MB/s",
            file=sys.stderr,
            flush=True,
        )
        with tempfile.TemporaryDirectory() as tmp:
            results, reason = run_on_testbed(
                topology,
                _cases(main_sizes, extra, args.reps, families, args.short_reps),
                tmp,
                name=f"net{name}",
                timeout=3600,
            )
        if results is None:
            print(f"bench_networks: {name}: {reason}", file=sys.stderr)
            return 1
        margins[name] = results["_meta"].get("margin")
        for label, case in results.items():
            if label.startswith("_"):
                continue
            if not all(case["correct"].values()):
                print(
                    f"bench_networks: {name} {label}: wacoll's result differs from "
                    f"the library's",
                    file=sys.stderr,
                )
                return 1
            med = {
                impl: statistics.median(times) for impl, times in case["times"].items()
            }
            row = {
                "network": name,
                "op": case["op"],
                "bytes": case["bytes"],
                "native_s": med["native"],
                "default_s": med["default"],
                "ratio": med["default"] / med["native"],
                "margin_s": margins[name],
                "bound_s": case_bound(case["op"], case["bytes"], topology),
            }
            first = case.get("first") or {}
            if first.get("native") and first.get("default"):
                row.update(
                    native_cold_s=sum(first["native"]),
                    default_cold_s=sum(first["default"]),
                    cold_ratio=sum(first["default"]) / sum(first["native"]),
                    default_first_ms=" ".join(f"{t * 1e3:.3g}" for t in first["default"]),
                    native_first_ms=" ".join(f"{t * 1e3:.3g}" for t in first["native"]),
                )
            if families:
                best = min((impl for impl in med if impl != "default"), key=med.get)
                ran = case.get("default_ran")
                row.update(
                    best=best,
                    best_s=med[best],
                    vs_best=med["default"] / med[best],
                    spread=_spread(case["times"]["default"]),
                    ran=ran,
                    vs_same=med["default"] / med[ran] if ran in med else "",
                )
            row["learned"] = "; ".join(_learned(r) for r in case.get("learned", ()))
            rows.append(row)

    _report(
        rows,
        names,
        bool(families),
        f"{args.reps} ({args.short_reps} for 8 B)"
        if args.short_reps > args.reps
        else f"{args.reps}",
        argv if argv is not None else sys.argv[1:],
        margins,
    )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    _plot(rows, names, out.with_suffix(".png"))
    print(f"wrote {out} and {out.with_suffix('.png')}")
    return 0


def case_bound(op, nbytes, topology):
    """The physical bound of one case, in seconds: no algorithm finishes sooner
    (:func:`wacoll.plans.bounds.physical_bound`; float64 elements, Allgather's and
    Alltoall's ``nbytes`` per block, root 0).

    Examples
    --------
    >>> from wacoll import Topology
    >>> round(case_bound("allreduce", 16 * MIB, Topology.from_sizes(
    ...     [4, 4], wan_latency=5e-3, wan_bandwidth=100e6)), 4)
    0.1728
    """
    from wacoll.plans import build
    from wacoll.plans.bounds import physical_bound

    options = {} if op == "barrier" else {"count": max(1, nbytes // 8), "itemsize": 8}
    return physical_bound(build(op, topology, "magpie", **options), topology)


def _read_rows(path):
    """The rows of an earlier run's CSV, numbers as numbers (the bound computed
    where the run predates it)."""
    from wacoll import Topology

    rows = []
    with open(path, newline="") as f:
        for raw in csv.DictReader(f):
            row = dict(raw)
            row["bytes"] = int(row["bytes"])
            for key in (
                "native_s",
                "default_s",
                "ratio",
                "best_s",
                "vs_best",
                "bound_s",
                "spread",
                "vs_same",
                "margin_s",
                "native_cold_s",
                "default_cold_s",
                "cold_ratio",
            ):
                if row.get(key) not in (None, ""):
                    row[key] = float(row[key])
            if "bound_s" not in row or row["bound_s"] in (None, ""):
                sizes, latency, bandwidth, _, _ = NETWORKS[row["network"]]
                row["bound_s"] = case_bound(
                    row["op"],
                    row["bytes"],
                    Topology.from_sizes(
                        list(sizes), wan_latency=latency, wan_bandwidth=bandwidth
                    ),
                )
            rows.append(row)
    return rows


def _spread(times):
    """The half-width of the middle half of ``times``, relative to their median:
    how far one repetition's time strays from the median.

    Examples
    --------
    >>> round(_spread([1.0, 1.1, 0.9, 1.0, 1.2]), 3), _spread([1.0])
    (0.05, 0.0)
    """
    if len(times) < 2:
        return 0.0
    q1, _, q3 = statistics.quantiles(times, n=4, method="inclusive")
    return (q3 - q1) / 2 / statistics.median(times)


def _report(rows, names, families, reps, argv, margins=None):
    """Print the table of times and ratios, then each network's summary (and the
    start margin of each network's calls, where ``margins`` gives it)."""
    runs = reps or "the run's"
    print(
        "default = wacoll.Comm(MPI.COMM_WORLD), no options; native = the MPI "
        f"library; median of {runs} repetitions; ratio = default / native (below 1: "
        "wacoll faster); bound = the physical bound (no algorithm is faster)"
    )
    if argv is not None:
        print("command: python benchmarks/bench_networks.py " + " ".join(argv))
    print(
        f"{'network':9} {'op':10} {'size':>7} {'native ms':>10} {'default ms':>11} "
        f"{'ratio':>6} {'bound ms':>9} {'bound/native':>12}"
    )
    for r in rows:
        best = (
            f"  best forced {r['best']} {r['best_s'] * 1e3:.3f} ms, default/best "
            f"{r['vs_best']:.2f}"
            if families
            else ""
        )
        if families and r.get("vs_same") not in (None, ""):
            best += (
                f"; ran {r['ran']}, /{r['ran']} forced {r['vs_same']:.2f}, "
                f"spread {100 * r['spread']:.0f}%"
            )
        print(
            f"{r['network']:9} {r['op']:10} {_size(r['bytes']):>7} "
            f"{r['native_s'] * 1e3:10.3f} {r['default_s'] * 1e3:11.3f} "
            f"{r['ratio']:6.2f} {r['bound_s'] * 1e3:9.3f} "
            f"{r['bound_s'] / r['native_s']:12.2f}{best}"
        )
        if r.get("cold_ratio") not in (None, ""):
            print(
                f"{'':28}cold: first {COLD} calls {r['default_cold_s'] * 1e3:.1f} ms "
                f"against the library's {r['native_cold_s'] * 1e3:.1f}: "
                f"{r['cold_ratio']:.2f}"
            )
        if r.get("learned"):
            print(f"{'':28}learned: {r['learned']}")
    for name in names:
        mine = [r for r in rows if r["network"] == name]
        if (margins or {}).get(name):
            print(
                f"{name}: each call started {margins[name] * 1e3:.2f} ms after its "
                f"start instant was sent (tools.measure.start_margin)"
            )
        worst = max(mine, key=lambda r: r["ratio"])
        print(
            f"{name}: geometric mean {statistics.geometric_mean(r['ratio'] for r in mine):.2f}, worst "
            f"{worst['ratio']:.2f} ({worst['op']} {_size(worst['bytes'])}); "
            f"physical bound / library: geometric mean "
            f"{statistics.geometric_mean(r['bound_s'] / r['native_s'] for r in mine):.2f}"
        )
        cold = [r for r in mine if r.get("cold_ratio") not in (None, "")]
        if cold:
            coldest = max(cold, key=lambda r: r["cold_ratio"])
            print(
                f"{name}: cold (a fresh shape's first {COLD} calls, summed, against "
                f"the library's): geometric mean "
                f"{statistics.geometric_mean(r['cold_ratio'] for r in cold):.2f}, "
                f"worst {coldest['cold_ratio']:.2f} ({coldest['op']} "
                f"{_size(coldest['bytes'])})"
            )
        if families:
            within = sum(r["vs_best"] <= 1.1 for r in mine)
            print(
                f"{name}: default within 1.1x of the best of the library and the "
                f"forced families in {within} of {len(mine)} cases"
            )
            same = [r["vs_same"] for r in mine if r.get("vs_same") not in (None, "")]
            if same:
                print(
                    f"{name}: default against the family it ran, forced: geometric "
                    f"mean {statistics.geometric_mean(same):.2f}, {sum(v <= 1.1 for v in same)} of "
                    f"{len(same)} within 1.1x"
                )


def _plot(rows, names, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(
        1, len(names), figsize=(4.2 * len(names), 4), sharey=True, squeeze=False
    )
    for ax, name in zip(axes[0], names):
        mine = [r for r in rows if r["network"] == name]
        labels = [f"{r['op']}\n{_size(r['bytes'])}" for r in mine]
        colours = ["tab:green" if r["ratio"] <= 1 else "tab:red" for r in mine]
        ax.bar(range(len(mine)), [r["ratio"] for r in mine], color=colours)
        ax.axhline(1.0, color="black", lw=0.8)
        ax.set_xticks(range(len(mine)), labels, rotation=90, fontsize=7)
        ax.set_yscale("log")
        ax.set_title(name)
    axes[0][0].set_ylabel("default / MPI library (lower is better)")
    fig.suptitle("wacoll.Comm(MPI.COMM_WORLD) against the MPI library's collectives")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
