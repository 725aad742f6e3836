"""The algorithms published since 2019 (the ``recent`` family: Swing, Bine, NCCL's
double binary tree, PAT) and the ``hierarchical`` family's pairs against the MPI
library's collectives and MagPIe's, measured side by side on the emulated testbed,
with the simulator's prediction beside each measurement.

The networks:

``cluster``   one cluster of 8 ranks (the testbed's namespace, no emulated link)
``grid``      MagPIe's grid: 4 x 2 ranks, 10 ms one-way and 1 MB/s between clusters
              (``wacoll.tools.demo.default_topology()``)
``longfast``  2 x 4 ranks, 5 ms and 100 MB/s (a long-and-fast link; only when
              ``--networks`` names it: not in the saved run)

For each network, Allreduce, Allgather and Bcast at 8 B, 64 KiB and 1 MiB (float64;
Allgather: the bytes are each rank's block; Allreduce: a SUM at level
``"commutative"``, MPI's own for a float SUM and the only one Swing, Bine and PAT
keep), timed by :mod:`wacoll.tools.measure` (every implementation interleaved per
repetition, from a common start instant to the last rank's finish; the median of
``--reps``). The implementations (:data:`IMPLS`):

- ``native``: the MPI library's collective;
- ``magpie``: MagPIe's plan (``family="magpie"``);
- the ``recent`` family with each of its algorithms for the operation forced
  (``family="recent", algorithm=...``);
- ``hierarchical`` pairs, inner family | outer family (``family="hierarchical",
  inner=..., outer=...``): MPICH 4's choice at both levels, and MagPIe's trees
  inside with Matsuda's multi-sender algorithms between (the two pairs the selection
  prices); for Allgather, whose inner phase is a gather the modern family does not
  build, MPICH 1.1's gather or MagPIe's inside and MPICH 4's allgather between. On
  one cluster a hierarchical plan is its inner family's plan alone, so the pairs
  run on the grid only.

Every wacoll implementation runs with ``validate=False`` (the MPI library trusts its
arguments too). ``predicted`` is the simulator's completion
(:class:`wacoll.plans.sim.LinkModel` on the testbed's configured topology) for the
very plan ``wacoll.Comm`` runs (:func:`wacoll.plans.select` with the same family and
options); for ``native`` it is the ``modern`` family's plan with
``algorithm="auto"``, which chooses as MPICH 4's selection file does (the library
here is MPICH). ``wan_msgs`` and ``wan_bytes`` are the prover's count of the plan's
wide-area messages and bytes (Bine's "global-link traffic").

Run (as root, where the testbed can be built)::

    .venv/bin/python benchmarks/bench_recent.py --reps 5
    .venv/bin/python benchmarks/bench_recent.py --networks grid --sizes 8,64K
    .venv/bin/python benchmarks/bench_recent.py --replot    # the .png from the .csv

Prints a table (median ms, predicted ms, ratio to native; the fastest measured per
case marked ``*``) and the cases where a new family is the fastest measured; writes
``benchmarks/results/recent.csv``, ``recent.txt`` and ``recent.png``. The machine
is shared: the report states the load average before and after, and the ratios
come from one run (interleaved), so load hits every implementation alike. On the
grid a 1 MiB call takes 1-12 s (5 repetitions and a warm-up of every implementation
at every size: about 12 minutes for the grid, half a minute for the cluster).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from _harness import (
    RESULTS,
    Report,
    command_line,
    human,
    load_text,
    median,
    parse_size,
    pyplot,
    save_figure,
    write_csv,
)

KIB, MIB = 1 << 10, 1 << 20
SIZES = (8, 64 * KIB, MIB)
OPS = ("allreduce", "allgather", "bcast")
#: name: (cluster sizes, one-way latency s, bandwidth B/s); None: one cluster.
NETWORKS = {
    "cluster": ((8,), None, None),
    "grid": ((2, 2, 2, 2), 10e-3, 1e6),
    "longfast": ((4, 4), 5e-3, 100e6),
}
#: The networks run unless ``--networks`` says otherwise.
DEFAULT_NETWORKS = ("cluster", "grid")
#: Per operation: (name, family, options) of every implementation timed.
IMPLS = {
    "allreduce": [
        ("native", "native", {}),
        ("magpie", "magpie", {}),
        ("swing", "recent", {"algorithm": "swing"}),
        ("swing_latency", "recent", {"algorithm": "swing_latency"}),
        ("bine", "recent", {"algorithm": "bine"}),
        ("double_binary_tree", "recent", {"algorithm": "double_binary_tree"}),
        ("hier modern|modern", "hierarchical", {"inner": "modern", "outer": "modern"}),
        ("hier magpie|gridmpi", "hierarchical", {"inner": "magpie", "outer": "gridmpi"}),
    ],
    "allgather": [
        ("native", "native", {}),
        ("magpie", "magpie", {}),
        ("swing", "recent", {"algorithm": "swing"}),
        ("bine", "recent", {"algorithm": "bine"}),
        ("pat", "recent", {"algorithm": "pat"}),
        ("hier mpich|modern", "hierarchical", {"inner": "mpich", "outer": "modern"}),
        ("hier magpie|modern", "hierarchical", {"inner": "magpie", "outer": "modern"}),
    ],
    "bcast": [
        ("native", "native", {}),
        ("magpie", "magpie", {}),
        ("bine", "recent", {"algorithm": "bine"}),
        ("hier modern|modern", "hierarchical", {"inner": "modern", "outer": "modern"}),
        ("hier magpie|gridmpi", "hierarchical", {"inner": "magpie", "outer": "gridmpi"}),
    ],
}
#: The families this benchmark is about.
NEW = ("recent", "hierarchical")
LEVEL = "commutative"
FIELDS = [
    "network",
    "op",
    "bytes",
    "impl",
    "family",
    "algorithm",
    "median_ms",
    "min_ms",
    "predicted_ms",
    "ratio_native",
    "wan_msgs",
    "wan_bytes",
    "fastest",
    "correct",
]


def topology_of(network):
    """The testbed's topology for ``network`` (a key of :data:`NETWORKS`)."""
    from wacoll import Topology
    from wacoll.tools.demo import default_topology

    sizes, latency, bandwidth = NETWORKS[network]
    if len(sizes) == 1:
        return Topology.single(sizes[0])
    if network == "grid":
        return default_topology()
    return Topology.from_sizes(list(sizes), wan_latency=latency, wan_bandwidth=bandwidth)


def impls_for(op, topology):
    """The implementations timed for ``op`` on ``topology`` (no pairs on one cluster)."""
    return [
        (name, fam, opts)
        for name, fam, opts in IMPLS[op]
        if topology.nclusters > 1 or fam != "hierarchical"
    ]


def spec(topology, sizes, reps):
    """The cases for :func:`wacoll.tools.measure.measure`."""
    cases = []
    for op in OPS:
        for nbytes in sizes:
            impls = [
                {"family": fam, "name": name, **opts}
                for name, fam, opts in impls_for(op, topology)
            ]
            case = {"label": f"{op} {nbytes}", "op": op, "bytes": nbytes, "impls": impls}
            if op == "allreduce":
                case["level"] = LEVEL
            cases.append(case)
    return {"reps": reps, "cases": cases, "progress": True}


def _call(op, nbytes):
    """The call :mod:`wacoll.tools.measure` makes: float64, root 0, SUM at :data:`LEVEL`."""
    from wacoll.plans import Call

    return Call(
        op,
        count=nbytes // 8,
        itemsize=8,
        level=LEVEL if op == "allreduce" else None,
        root=0 if op == "bcast" else None,
    )


def predicted(topology, op, nbytes, family, options):
    """(algorithm, predicted seconds, wide-area messages, wide-area bytes) of the plan
    ``wacoll.Comm(world, topology, family=family, **options)`` runs for the case;
    ``native`` is predicted as the modern family's MPICH 4 choice."""
    from wacoll.plans import select
    from wacoll.plans.sim import LinkModel, simulate

    if family == "native":
        family, options = "modern", {"algorithm": "auto"}
    plan = select(
        _call(op, nbytes), topology, comm_family=family, comm_options=options
    ).build(topology)
    report = plan.prove()
    return (
        plan.algorithm,
        simulate(plan, LinkModel(topology)).completion,
        report.wide_area_messages,
        report.wide_area_bytes,
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--networks",
        default=",".join(DEFAULT_NETWORKS),
        help=f"comma-separated, of {', '.join(NETWORKS)}",
    )
    parser.add_argument(
        "--sizes",
        default=",".join(map(str, SIZES)),
        help="message sizes, comma-separated (8,64K,1M)",
    )
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--out", default=str(RESULTS / "recent.csv"))
    parser.add_argument(
        "--replot",
        action="store_true",
        help="redraw the .png from the saved .csv; run nothing",
    )
    args = parser.parse_args(argv)
    if args.replot:
        return _replot(Path(args.out))
    argv = sys.argv[1:] if argv is None else argv
    names = [n for n in args.networks.split(",") if n]
    unknown = set(names) - set(NETWORKS)
    if unknown:
        parser.error(f"unknown network(s) {sorted(unknown)}; known: {list(NETWORKS)}")
    sizes = tuple(parse_size(s) for s in args.sizes.split(",") if s)
    if any(s % 8 for s in sizes):
        parser.error("sizes must be multiples of 8 bytes (float64 vectors)")

    from wacoll.tools.measure import run_on_testbed

    say = Report()
    say(f"command: {command_line(__file__, argv)}")
    say(f"before: {load_text()}")
    rows, library = [], "the MPI library"
    for network in names:
        topology = topology_of(network)
        print(
            f"# {network}: {topology.nclusters} cluster(s), {topology.size} ranks",
            file=sys.stderr,
            flush=True,
        )
        with tempfile.TemporaryDirectory() as tmp:
            results, reason = run_on_testbed(
                topology,
                spec(topology, sizes, args.reps),
                tmp,
                name=f"rec_{network}",
                timeout=7200,
            )
        if results is None:
            say(f"bench_recent: {network}: {reason}")
            return 1
        library = results["_meta"].get("library", library)
        for op in OPS:
            for nbytes in sizes:
                case = results[f"{op} {nbytes}"]
                native = median(case["times"]["native"])
                for name, family, options in impls_for(op, topology):
                    algorithm, seconds, wan_msgs, wan_bytes = predicted(
                        topology, op, nbytes, family, options
                    )
                    times = [t for t in case["times"][name] if t is not None]
                    rows.append(
                        {
                            "network": network,
                            "op": op,
                            "bytes": nbytes,
                            "impl": name,
                            "family": family,
                            "algorithm": algorithm,
                            "median_ms": median(times) * 1e3 if times else None,
                            "min_ms": min(times) * 1e3 if times else None,
                            "predicted_ms": seconds * 1e3,
                            "ratio_native": median(times) / native
                            if times and native
                            else None,
                            "wan_msgs": wan_msgs,
                            "wan_bytes": wan_bytes,
                            "fastest": False,
                            "correct": case["correct"][name],
                        }
                    )
                mine = [
                    r
                    for r in rows
                    if (r["network"], r["op"], r["bytes"]) == (network, op, nbytes)
                    and r["median_ms"] is not None
                ]
                if mine:
                    min(mine, key=lambda r: r["median_ms"])["fastest"] = True
    say(f"after: {load_text()}")
    _report(say, rows, names, sizes, args.reps, library)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_csv(out, FIELDS, rows)
    _plot(rows, names, sizes, out.with_suffix(".png"), library)
    say.write(out.with_suffix(".txt"))
    print(f"wrote {out} and its .txt and .png", file=sys.stderr)
    return 0 if all(r["correct"] for r in rows) else 1


def _report(say, rows, names, sizes, reps, library):
    say(
        f"native = {library}'s collective (predicted as the modern family's MPICH 4 "
        f"choice); median of {reps} interleaved repetitions, from a common start to the "
        f"last rank's finish; ratio = median / native's (below 1: faster than the "
        f"library); * = fastest measured of the case; wan = the plan's wide-area "
        f"messages and bytes"
    )
    say(
        f"{'network':8} {'op':9} {'size':>7} {'impl':21} {'algorithm':28} "
        f"{'ms':>9} {'pred ms':>9} {'ratio':>6} {'wan':>4} {'wan bytes':>9}"
    )
    for r in rows:
        ms = "-" if r["median_ms"] is None else f"{r['median_ms']:9.2f}"
        ratio = "-" if r["ratio_native"] is None else f"{r['ratio_native']:6.2f}"
        say(
            f"{r['network']:8} {r['op']:9} {human(r['bytes']):>7} {r['impl']:21} "
            f"{_short(r['algorithm']):28} {ms:>9} {r['predicted_ms']:9.2f} {ratio:>6} "
            f"{r['wan_msgs']:4d} {r['wan_bytes']:9d}{' *' if r['fastest'] else ''}"
            f"{'' if r['correct'] else '  RESULT DIFFERS'}"
        )
    say("")
    say("where a new family (recent or hierarchical) is the fastest measured:")
    won = [r for r in rows if r["fastest"] and r["family"] in NEW]
    for r in won:
        case = [
            x
            for x in rows
            if (x["network"], x["op"], x["bytes"]) == (r["network"], r["op"], r["bytes"])
        ]
        runner = sorted(
            (x for x in case if x is not r and x["median_ms"] is not None),
            key=lambda x: x["median_ms"],
        )
        nxt = (
            f"; next {runner[0]['impl']} {runner[0]['median_ms']:.2f} ms"
            if runner
            else ""
        )
        nat = [x for x in case if x["impl"] == "native"][0]
        say(
            f"  {r['network']} {r['op']} {human(r['bytes'])}: {r['impl']} "
            f"{r['median_ms']:.2f} ms (native {nat['median_ms']:.2f} ms{nxt})"
        )
    if not won:
        say("  nowhere")


def _replot(out):
    """Redraw ``out``'s picture from its rows (the library's name from its .txt)."""
    import csv

    with open(out) as fh:
        rows = list(csv.DictReader(fh))
    for r in rows:
        r["bytes"] = int(r["bytes"])
        r["fastest"] = r["fastest"] == "True"
        for key in ("median_ms", "predicted_ms"):
            r[key] = float(r[key]) if r[key] else None
    names = list(dict.fromkeys(r["network"] for r in rows))
    sizes = tuple(dict.fromkeys(r["bytes"] for r in rows))
    text = out.with_suffix(".txt").read_text() if out.with_suffix(".txt").exists() else ""
    library = (
        text.split("native = ", 1)[-1].split("'s collective", 1)[0]
        if "'s collective" in text
        else "the MPI library"
    )
    _plot(rows, names, sizes, out.with_suffix(".png"), library)
    print(f"redrew {out.with_suffix('.png')}", file=sys.stderr)
    return 0


def _short(algorithm):
    """A hierarchical plan's algorithm as its phases' algorithms, ``a|b|c``.

    >>> _short("inner:magpie/coordinator+outer:gridmpi/vandegeijn")
    'coordinator|vandegeijn'
    """
    return "|".join(part.rpartition("/")[2] for part in algorithm.split("+"))[:28]


def _plot(rows, names, sizes, path, library):
    plt = pyplot()
    fig, axes = plt.subplots(
        len(names),
        len(OPS),
        figsize=(5.2 * len(OPS), 3.8 * len(names)),
        squeeze=False,
        layout="constrained",
    )
    # tab10 without its grey (the library's), then tab20's light shades
    palette = [c for i, c in enumerate(plt.get_cmap("tab10").colors) if i != 7] + list(
        plt.get_cmap("tab20").colors[1::2]
    )
    others = [
        n
        for n in dict.fromkeys(name for op in OPS for name, _, _ in IMPLS[op])
        if n != "native"
    ]
    colours = {name: palette[k % len(palette)] for k, name in enumerate(others)}
    colours["native"] = "dimgray"
    for i, network in enumerate(names):
        for j, op in enumerate(OPS):
            ax = axes[i][j]
            impls = [
                name
                for name, fam, _ in IMPLS[op]
                if any(
                    r["impl"] == name and r["network"] == network and r["op"] == op
                    for r in rows
                )
            ]
            width = 0.8 / max(len(impls), 1)
            for k, name in enumerate(impls):
                colour = colours[name]
                for s, nbytes in enumerate(sizes):
                    r = [
                        x
                        for x in rows
                        if (x["network"], x["op"], x["bytes"], x["impl"])
                        == (network, op, nbytes, name)
                    ]
                    if not r or r[0]["median_ms"] is None:
                        continue
                    x = s + (k - (len(impls) - 1) / 2) * width
                    ax.bar(
                        x,
                        r[0]["median_ms"],
                        width,
                        color=colour,
                        label=name if s == 0 else None,
                        edgecolor="black" if r[0]["fastest"] else "none",
                        linewidth=1.5,
                    )
                    ax.plot(x, r[0]["predicted_ms"], "D", color="black", ms=3)
            ax.set_yscale("log")
            ax.set_xticks(range(len(sizes)), [human(n) for n in sizes])
            ax.set_title(f"{network}: {op}")
            ax.grid(axis="y", alpha=0.3, which="both")
            if j == 0:
                ax.set_ylabel("median completion (ms)")
            ax.legend(fontsize=6, loc="upper left")
    fig.suptitle(
        f"recent and hierarchical families against {library} and MagPIe "
        "(bars measured, outlined: fastest; diamonds: simulator)"
    )
    save_figure(fig, path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
