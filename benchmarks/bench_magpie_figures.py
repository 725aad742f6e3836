"""MagPIe's Figures 3-6 on wacoll's emulated wide-area testbed: Barrier, Bcast,
Allgather and Reduce, magpie family vs mpich family vs the MPI library's own.

Run from the repository root, as root (the testbed needs network namespaces)::

    .venv/bin/python benchmarks/bench_magpie_figures.py            # 7 runs per case
    .venv/bin/python benchmarks/bench_magpie_figures.py --quick    # smoke run, 3 runs

Kielmann et al. (MagPIe, PPoPP 1999), Section 3, time each collective at 1 byte and
64 KByte on 2, 4 and 8 clusters, 16-40 processes in all, with 10 ms one-way latency
and 1 MByte/s between clusters. This machine has 2 cores, so the default scale is 8
ranks in all: 2 clusters x 4 ranks, 4 x 2 and 8 x 1 (``--ranks 16`` doubles it). For
each cluster count the script starts a testbed (named ``magpie``), runs every case
with native MPI, ``wacoll.Comm(family="magpie")`` and ``family="mpich"`` interleaved
from a common start instant (:mod:`wacoll.tools.measure`), tears it down, and prints one
table per figure: medians, the speedups magpie/mpich and magpie/native, the prover's
wide-area messages, bytes and hops of both plans, the simulator's prediction, the
physical lower bound (:func:`wacoll.plans.bounds.physical_bound`) and the simpler
"one wide-area latency + bytes / bandwidth". It also simulates the paper's own scale
(40 ranks), where MPICH's algorithms do worse than on 8 ranks.

Reduce uses ``level="associative"`` (MagPIe's coordinator algorithm): the data are
integer-valued, so every order gives the same result. wacoll runs with
``validate=False`` (arguments trusted, as MPI trusts them).

Writes ``benchmarks/results/magpie_figures{-quick}.csv|.png|.txt|.json``. Where the
testbed cannot run (not root, no ``/dev/net/tun``), it says why and reports the
simulator's figures instead, labelled as such.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _harness import (
    RESULTS,
    ROOT,
    Report,
    command_line,
    load1,
    load_text,
    median,
    pyplot,
    save_figure,
    write_csv,
)

sys.path.insert(0, str(ROOT))

from wacoll import Topology  # noqa: E402
from wacoll.plans import Call, select  # noqa: E402
from wacoll.plans.bounds import physical_bound  # noqa: E402
from wacoll.plans.sim import LinkModel, simulate  # noqa: E402

TESTBED = "magpie"
FAMILIES = ("magpie", "mpich")
IMPLS = ("native",) + FAMILIES
LEVEL = "associative"
PAPER_RANKS = 40

#: (figure, label, op, bytes per rank)
CASES = [
    ("Figure 3: MPI_Barrier", "Barrier", "barrier", 0),
    ("Figure 4: MPI_Bcast", "Bcast 1 B", "bcast", 1),
    ("Figure 4: MPI_Bcast", "Bcast 64 KiB", "bcast", 65536),
    ("Figure 5: MPI_Allgather", "Allgather 1 B", "allgather", 1),
    ("Figure 5: MPI_Allgather", "Allgather 64 KiB", "allgather", 65536),
    ("Figure 6: MPI_Reduce", "Reduce 1 B", "reduce", 1),
    ("Figure 6: MPI_Reduce", "Reduce 64 KiB", "reduce", 65536),
]
FIGURES = list(dict.fromkeys(c[0] for c in CASES))

#: What the paper's text states about magpie vs MPICH 1.1 (the figures themselves
#: are plots whose values the text does not give).
PAPER = {
    "abstract": "MagPIe executes operations up to 10 times faster than MPICH",
    "intro": "speedups of a factor of 3 or 4 are typical; with 8 clusters MagPIe's "
    "AllGather runs 8 times faster than MPICH's",
    "conclusion": "improvements over MPICH vary between a factor of 2 and 8",
    "barrier": "MPICH's hypercube takes up to floor(log2 P)+2 wide-area latencies, "
    "MagPIe's barrier one",
}
PAPER_TARGETS = {  # (op, clusters) -> speedup magpie/mpich the paper states
    ("allgather", 8): 8.0,
}
PAPER_MAX = 10.0
BOUND_GOAL = 1.2


# ------------------------------------------------------------------ arguments
def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--ranks",
        type=int,
        default=8,
        help="ranks in all, split evenly over the clusters (default 8)",
    )
    p.add_argument(
        "--clusters",
        default="2,4,8",
        help="cluster counts, comma-separated (default 2,4,8)",
    )
    p.add_argument(
        "--reps", type=int, help="runs per case and implementation (default 7; --quick 3)"
    )
    p.add_argument(
        "--latency",
        type=float,
        default=0.010,
        help="one-way wide-area latency in seconds (default 0.010)",
    )
    p.add_argument(
        "--bandwidth",
        type=float,
        default=1e6,
        help="wide-area bandwidth in bytes/s (default 1e6)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        help="seconds per testbed run (default 600)",
    )
    p.add_argument(
        "--simulate-only",
        action="store_true",
        help="do not start a testbed; report the simulator's figures",
    )
    p.add_argument(
        "--from-json",
        metavar="PATH",
        help="no testbed: re-analyse measurements this script saved (.json)",
    )
    p.add_argument("--quick", action="store_true", help="smoke run: 3 runs per case")
    p.add_argument("--no-write", action="store_true", help="write no result files")
    args = p.parse_args(argv)
    args.command = command_line(__file__, argv)
    args.clusters = [int(c) for c in args.clusters.split(",") if c]
    bad = [c for c in args.clusters if c < 1 or args.ranks % c]
    if bad:
        p.error(f"--ranks {args.ranks} does not split evenly over {bad[0]} clusters")
    args.reps = args.reps or (3 if args.quick else 7)
    if args.reps < 1:
        p.error("--reps must be >= 1")
    return args


# ------------------------------------------------------------------ output
def fmt(value, spec=".2f", scale=1.0):
    """``value * scale`` formatted with ``spec``; "-" (same width) when unknown."""
    if value is None:
        width = re.match(r"[<>]?(\d*)", spec).group(1)
        return format("-", f">{width}") if width else "-"
    return format(value * scale, spec)


# ------------------------------------------------------------------ the model side
def topology(ranks, clusters, args):
    return Topology.from_sizes(
        [ranks // clusters] * clusters,
        wan_latency=args.latency,
        wan_bandwidth=args.bandwidth,
    )


def plan_for(topo, op, nbytes, family):
    """The plan ``wacoll.Comm(family=family)`` runs for this case in ``wacoll.tools.measure``:
    the selection policy's (:func:`wacoll.plans.select`) for its call (float64 data,
    uint8 when the size is not a multiple of 8; root 0)."""
    if op == "barrier":
        call = Call(op)
    else:
        itemsize = 8 if nbytes % 8 == 0 else 1
        level = None
        if op == "reduce":
            # Comm upgrades an exact integer SUM to "commutative"; either level picks
            # the coordinator algorithm on contiguous clusters.
            level = LEVEL if itemsize == 8 else "commutative"
        call = Call(
            op,
            count=nbytes // itemsize,
            itemsize=itemsize,
            level=level,
            root=0 if op in ("bcast", "reduce") else None,
        )
    return select(call, topo, family=family).build(topo)


def model_rows(topo, clusters):
    """Prover metrics, prediction and bounds per case and family."""
    rows = {}
    paper_topo = (
        Topology.from_sizes(
            [PAPER_RANKS // clusters] * clusters,
            wan_latency=topo.wan.latency,
            wan_bandwidth=topo.wan.bandwidth,
        )
        if PAPER_RANKS % clusters == 0
        else None
    )
    for _, label, op, nbytes in CASES:
        for fam in FAMILIES:
            plan = plan_for(topo, op, nbytes, fam)
            rep = plan.prove()
            paper_pred = None
            if paper_topo is not None:
                paper_pred = simulate(
                    plan_for(paper_topo, op, nbytes, fam), LinkModel(paper_topo)
                ).completion
            rows[label, fam] = {
                "algorithm": plan.algorithm,
                "wan_msgs": rep.wide_area_messages,
                "wan_bytes": rep.wide_area_bytes,
                "hops": rep.max_wide_area_hops,
                "predicted": simulate(plan, LinkModel(topo)).completion,
                "paper_predicted": paper_pred,
                "bound": physical_bound(plan, topo),
                "simple": simple_bound(op, nbytes, topo),
            }
    return rows


def simple_bound(op, nbytes, topo):
    """One wide-area latency + the vector's bytes over one link (None for allgather,
    where a cluster receives several vectors)."""
    if topo.nclusters < 2:
        return 0.0
    if op == "allgather":
        return None
    return topo.wan.latency + nbytes / topo.wan.bandwidth


# ------------------------------------------------------------------ the testbed side
def measure_spec(reps):
    cases = []
    for _, label, op, nbytes in CASES:
        case = {"label": label, "op": op, "bytes": nbytes, "impls": list(IMPLS)}
        if op == "reduce":
            case["level"] = LEVEL
        cases.append(case)
    return {"reps": reps, "margin": 0.1, "progress": True, "cases": cases}


def run_testbed(topo, args):
    """Measured results for one topology, or (None, reason)."""
    from wacoll.tools.measure import run_on_testbed

    with tempfile.TemporaryDirectory(prefix="magpie-") as tmp:
        return run_on_testbed(
            topo, measure_spec(args.reps), tmp, name=TESTBED, timeout=args.timeout
        )


def check_line(check):
    if not check:
        return "not measured"
    lat = [p["latency"] for p in check if p["latency"]]
    bw = [p["bandwidth"] for p in check if p["bandwidth"]]
    if not lat or not bw:
        return "incomplete"
    return (
        f"{len(check)} links: one-way latency median {statistics.median(lat) * 1e3:.2f}"
        f" ms (range {min(lat) * 1e3:.2f}-{max(lat) * 1e3:.2f}), bandwidth median "
        f"{statistics.median(bw) / 1e6:.3f} MB/s (range {min(bw) / 1e6:.3f}-"
        f"{max(bw) / 1e6:.3f})"
    )


# ------------------------------------------------------------------ assembling
def assemble(clusters, per, topo, model, measured):
    """One row per case for this cluster count."""
    rows = []
    for figure, label, op, nbytes in CASES:
        row = {
            "figure": figure,
            "case": label,
            "op": op,
            "bytes": nbytes,
            "clusters": clusters,
            "per_cluster": per,
            "ranks": topo.size,
        }
        for fam in FAMILIES:
            m = model[label, fam]
            for key in (
                "algorithm",
                "wan_msgs",
                "wan_bytes",
                "hops",
                "predicted",
                "paper_predicted",
            ):
                row[f"{fam}_{key}"] = m[key]
        row["bound"] = model[label, "magpie"]["bound"]
        row["simple"] = model[label, "magpie"]["simple"]
        if measured is not None:
            result = measured[label]
            for impl in IMPLS:
                times = result["times"].get(impl) or []
                row[f"{impl}_median"] = median(times)
                valid = [t for t in times if t is not None]
                row[f"{impl}_min"] = min(valid) if valid else None
                row[f"{impl}_runs"] = len(valid)
                row[f"{impl}_correct"] = result["correct"].get(impl)
                row[f"{impl}_times"] = " ".join(f"{t:.6f}" for t in valid)
        else:
            for fam in FAMILIES:
                row[f"{fam}_median"] = row[f"{fam}_predicted"]
        mg, mp, nat = (
            row.get("magpie_median"),
            row.get("mpich_median"),
            row.get("native_median"),
        )
        row["x_mpich"] = mp / mg if mg and mp else None
        row["x_native"] = nat / mg if mg and nat else None
        row["x_bound"] = mg / row["bound"] if mg and row["bound"] else None
        row["x_simple"] = mg / row["simple"] if mg and row["simple"] else None
        best = row.get("magpie_min")
        row["min_x_bound"] = best / row["bound"] if best and row["bound"] else None
        row["min_x_simple"] = best / row["simple"] if best and row["simple"] else None
        pm, pp = row["magpie_paper_predicted"], row["mpich_paper_predicted"]
        row["paper_scale_x_mpich"] = pp / pm if pm and pp else None
        rows.append(row)
    return rows


def print_tables(rows, measured, say, ranks):
    source = "measured medians" if measured else "SIMULATED (LinkModel), not measured"
    for figure in FIGURES:
        fig_rows = [r for r in rows if r["figure"] == figure]
        say(f"\n{figure}  ({source}; times in ms; {ranks} ranks, the paper used 16-40)")
        head = (
            f"{'case':17s} {'clust':>5s} {'native':>8s} {'magpie':>8s} {'mpich':>8s}"
            f" {'x mpich':>7s} {'x nat':>6s} {'WAN msgs':>9s} {'WAN bytes':>17s}"
            f" {'hops':>5s} {'pred mg/mp':>13s} {'bound':>6s} {'simple':>6s}"
            f" {'mg/bnd':>6s} {'mg/smp':>6s} {'x@40':>5s}"
        )
        say(head)
        say("-" * len(head))
        for r in fig_rows:
            ok = all(r.get(f"{i}_correct", True) is not False for i in IMPLS)
            say(
                f"{r['case']:17s} {r['clusters']:>2d}x{r['per_cluster']:<2d}"
                f" {fmt(r.get('native_median'), '8.1f', 1e3)}"
                f" {fmt(r.get('magpie_median'), '8.1f', 1e3)}"
                f" {fmt(r.get('mpich_median'), '8.1f', 1e3)}"
                f" {fmt(r['x_mpich'], '7.2f')} {fmt(r['x_native'], '6.2f')}"
                f" {r['magpie_wan_msgs']:>4d}/{r['mpich_wan_msgs']:<4d}"
                f" {r['magpie_wan_bytes']:>8d}/{r['mpich_wan_bytes']:<8d}"
                f" {r['magpie_hops']:>2d}/{r['mpich_hops']:<2d}"
                f" {fmt(r['magpie_predicted'], '6.1f', 1e3)}/"
                f"{fmt(r['mpich_predicted'], '<6.1f', 1e3)}"
                f" {fmt(r['bound'], '6.1f', 1e3)} {fmt(r['simple'], '6.1f', 1e3):>6s}"
                f" {fmt(r['x_bound'], '6.2f')} {fmt(r['x_simple'], '6.2f'):>6s}"
                f" {fmt(r['paper_scale_x_mpich'], '5.1f'):>5s}"
                + ("" if ok else "  RESULT MISMATCH")
            )
    say(
        "\ncolumns: x mpich = mpich median / magpie median (magpie's speedup); x nat = "
        "native / magpie; WAN msgs, bytes, hops = prover metrics magpie/mpich (native "
        "MPI: unknown); pred = simulator (LinkModel); bound = physical lower bound; "
        "simple = one wide-area latency + bytes / bandwidth; mg/bnd, mg/smp = magpie "
        "median over them; x@40 = simulated magpie speedup over mpich at the paper's "
        f"scale ({PAPER_RANKS} ranks over the same cluster count)"
    )


def goals(rows, measured, say, ranks):
    say(
        "\nGoals (ratios from this one run"
        + ("" if measured else "; SIMULATED, no measurements")
        + ")"
    )
    say(
        f"1. MagPIe's Barrier and Bcast within {BOUND_GOAL}x of the physical bound "
        "(and of latency + bytes/bandwidth):"
    )
    for r in rows:
        if r["op"] not in ("barrier", "bcast"):
            continue
        xb, xs = r["x_bound"], r["x_simple"]
        verdict = "-" if xb is None else ("yes" if xb <= BOUND_GOAL else "NO")
        verdict_s = "-" if xs is None else ("yes" if xs <= BOUND_GOAL else "NO")
        say(
            f"   {r['case']:14s} {r['clusters']} clusters: median {fmt(xb)}x bound "
            f"({fmt(r['bound'], '.1f', 1e3)} ms) -> {verdict}; {fmt(xs)}x simple "
            f"({fmt(r['simple'], '.1f', 1e3)} ms) -> {verdict_s}; best run "
            f"{fmt(r.get('min_x_bound'))}x / {fmt(r.get('min_x_simple'))}x"
        )
    say(
        "   (the physical bound lets a cluster receive over all its incoming links at "
        "once; a flat tree\n    sends the whole vector over one link per cluster, so "
        "for 64 KiB on >2 clusters it is ~(C-1)x off\n    by construction; the simple "
        "figure is what a one-hop algorithm can reach)"
    )
    say("2. magpie's speedup over mpich vs the paper's statements:")
    say(
        f"   paper: {PAPER['abstract']}; {PAPER['intro']}; {PAPER['conclusion']}; "
        f"{PAPER['barrier']}."
    )
    for (op, c), target in PAPER_TARGETS.items():
        cand = [r for r in rows if r["op"] == op and r["clusters"] == c]
        if not cand:
            continue
        best = max(cand, key=lambda r: r["x_mpich"] or 0)
        sim40 = max((r["paper_scale_x_mpich"] or 0) for r in cand)
        verdict = "yes" if (best["x_mpich"] or 0) >= target else "NO"
        say(
            f"   {op} on {c} clusters: paper {target:.0f}x; here {fmt(best['x_mpich'])}x "
            f"({best['case']}) -> {verdict}; simulator at {PAPER_RANKS} ranks "
            f"{sim40:.1f}x, at {ranks} ranks "
            f"{max(_sim_x(r) for r in cand):.1f}x"
        )
    best = max(rows, key=lambda r: r["x_mpich"] or 0)
    say(
        f"   largest speedup here: {fmt(best['x_mpich'])}x ({best['case']}, "
        f"{best['clusters']} clusters); paper: up to {PAPER_MAX:.0f}x; simulator at "
        f"{PAPER_RANKS} ranks: up to {max(r['paper_scale_x_mpich'] or 0 for r in rows):.1f}x"
    )
    for c in sorted({r["clusters"] for r in rows}):
        xs = [r["x_mpich"] for r in rows if r["clusters"] == c and r["x_mpich"]]
        if xs:
            say(
                f"   {c} clusters: speedup over mpich {min(xs):.2f}x-{max(xs):.2f}x "
                f"(median {statistics.median(xs):.2f}x) over the 7 cases"
            )
    say(
        f"   barrier: floor(log2 P)+2 = {_barrier_cap(ranks)} latencies at P={ranks} "
        f"(paper's P=40: {_barrier_cap(40)}); the prover's mpich hops per cluster "
        "count: "
        + ", ".join(
            f"{r['clusters']}c {r['mpich_hops']}" for r in rows if r["op"] == "barrier"
        )
    )


def _sim_x(r):
    return (r["mpich_predicted"] / r["magpie_predicted"]) if r["magpie_predicted"] else 0


def _barrier_cap(p):
    return p.bit_length() - 1 + 2


# ------------------------------------------------------------------ files
FIELDS = [
    "figure",
    "case",
    "op",
    "bytes",
    "clusters",
    "per_cluster",
    "ranks",
    "native_median",
    "magpie_median",
    "mpich_median",
    "native_min",
    "magpie_min",
    "mpich_min",
    "x_mpich",
    "x_native",
    "magpie_algorithm",
    "mpich_algorithm",
    "magpie_wan_msgs",
    "mpich_wan_msgs",
    "magpie_wan_bytes",
    "mpich_wan_bytes",
    "magpie_hops",
    "mpich_hops",
    "magpie_predicted",
    "mpich_predicted",
    "bound",
    "simple",
    "x_bound",
    "x_simple",
    "min_x_bound",
    "min_x_simple",
    "magpie_paper_predicted",
    "mpich_paper_predicted",
    "paper_scale_x_mpich",
    "native_runs",
    "magpie_runs",
    "mpich_runs",
    "native_correct",
    "magpie_correct",
    "mpich_correct",
    "native_times",
    "magpie_times",
    "mpich_times",
    "source",
    "load1",
    "command",
]


def plot(path, rows, measured, ranks, args):
    from matplotlib.ticker import ScalarFormatter

    plt = pyplot()

    impls = IMPLS if measured else FAMILIES
    colours = {"native": "tab:grey", "magpie": "black", "mpich": "tab:orange"}
    fig, axes = plt.subplots(2, 2, figsize=(13, 8.5))
    for ax, figure in zip(axes.flat, FIGURES):
        fig_rows = [r for r in rows if r["figure"] == figure]
        groups = [
            (r["case"].split(" ", 1)[1] if " " in r["case"] else "", r["clusters"])
            for r in fig_rows
        ]
        width = 0.8 / len(impls)
        for k, impl in enumerate(impls):
            xs = [i + (k - (len(impls) - 1) / 2) * width for i in range(len(fig_rows))]
            ys = [(r.get(f"{impl}_median") or 0) * 1e3 for r in fig_rows]
            ax.bar(
                xs,
                ys,
                width,
                color=colours[impl],
                label=impl + ("" if measured else " (simulated)"),
            )
        ax.plot(
            range(len(fig_rows)),
            [r["bound"] * 1e3 for r in fig_rows],
            "r_",
            markersize=18,
            mew=2,
            label="physical bound",
        )
        simple = [(i, r["simple"] * 1e3) for i, r in enumerate(fig_rows) if r["simple"]]
        if simple:
            ax.plot(*zip(*simple), "b.", label="latency + bytes/bw")
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.yaxis.set_minor_formatter(ScalarFormatter())
        ax.tick_params(axis="y", which="minor", labelsize=7)
        ax.set_xticks(
            range(len(fig_rows)),
            [f"{c} clusters\n{size}".strip() for size, c in groups],
            fontsize=8,
        )
        ax.set_ylabel("completion time (ms)")
        ax.set_title(figure)
        ax.grid(axis="y", alpha=0.3)
    axes.flat[0].legend(fontsize=8)
    fig.suptitle(
        f"MagPIe Figures 3-6 on wacoll's testbed: {ranks} ranks, "
        f"{args.latency * 1e3:g} ms / {args.bandwidth / 1e6:g} MB/s wide area"
        + (f", median of {args.reps}" if measured else " (SIMULATED)")
    )
    save_figure(fig, path, 100)


# ------------------------------------------------------------------ main
def main(argv=None):
    from wacoll.emulate import unavailable_reason

    args = parse_args(sys.argv[1:] if argv is None else argv)
    say = Report()
    t0 = time.monotonic()
    say("MagPIe Figures 3-6 (Kielmann et al. 1999) on wacoll's emulated wide area")
    say(f"command: {args.command}")
    say(
        f"scale: {args.ranks} ranks in all over {args.clusters} clusters (2-core machine; "
        f"the paper used 16-40 processes); wide area {args.latency * 1e3:g} ms one-way, "
        f"{args.bandwidth / 1e6:g} MB/s per directed cluster pair"
    )
    say(f"machine: {load_text()}")
    saved = json.loads(Path(args.from_json).read_text()) if args.from_json else None
    reason = (
        "--simulate-only was given"
        if args.simulate_only
        else (None if saved else unavailable_reason())
    )
    rows, meta, any_measured = [], {}, False
    for c in args.clusters:
        per = args.ranks // c
        topo = topology(args.ranks, c, args)
        say(f"\n== {c} clusters x {per} ranks ==")
        model = model_rows(topo, c)
        measured = None
        if saved is not None:
            measured = saved.get(str(c))
            if measured is None:
                say(f"{args.from_json} has no measurements on {c} clusters")
            else:
                m = measured["_meta"]
                args.reps = m["reps"]
                say(
                    f"re-analysed from {args.from_json}, measured by: "
                    f"{m.get('command', '(command not recorded)')}"
                    + (f" ({m['load']})" if m.get("load") else "")
                )
                say(
                    f"transport {m['transport']}; "
                    f"self-check: {check_line(m.get('check'))}"
                )
                meta[str(c)] = measured
                any_measured = True
        elif reason is None:
            say(
                f"testbed {TESTBED!r}: {len(CASES)} cases x {len(IMPLS)} implementations "
                f"x {args.reps} runs ..."
            )
            measured, why = run_testbed(topo, args)
            if measured is None:
                say(
                    f"no measurements on {c} clusters: {why}; simulator's figures instead"
                )
            else:
                m = measured["_meta"]
                say(
                    f"transport {m['transport']}; self-check: {check_line(m.get('check'))}"
                )
                say(
                    f"wacoll validate={m['validate']} (arguments trusted, as MPI does); "
                    f"{m['reps']} runs per case; {load_text()}"
                )
                m["command"] = args.command
                m["load"] = load_text()
                meta[str(c)] = measured
                any_measured = True
        part = assemble(c, per, topo, model, measured)
        for r in part:
            r["source"] = "measured" if measured else "simulated"
            r["load1"] = load1()
            r["command"] = args.command
        rows.extend(part)
    if reason is not None:
        say(
            f"\nNO MEASUREMENTS: {reason}. The tables show the simulator's predictions "
            "(LinkModel), not measurements."
        )
    print_tables(rows, any_measured, say, args.ranks)
    goals(rows, any_measured, say, args.ranks)
    say(f"\n{load_text()}; took {time.monotonic() - t0:.0f} s")
    if not args.no_write:
        RESULTS.mkdir(parents=True, exist_ok=True)
        stem = (
            "magpie_figures"
            + (f"-n{args.ranks}" if args.ranks != 8 else "")
            + ("-quick" if args.quick else "")
        )
        write_csv(RESULTS / f"{stem}.csv", FIELDS, rows)
        plot(RESULTS / f"{stem}.png", rows, any_measured, args.ranks, args)
        if meta:
            (RESULTS / f"{stem}.json").write_text(json.dumps(meta, indent=1))
        say(
            f"wrote {RESULTS.relative_to(ROOT)}/{stem}.csv, .png"
            + (", .json" if meta else "")
            + ", .txt"
        )
        say.write(RESULTS / f"{stem}.txt")
    return 0


if __name__ == "__main__":
    sys.exit(main())
