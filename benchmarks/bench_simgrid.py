"""SimGrid against wacoll's simulator, and both against the testbed's measurements.

Run from the repository root (SimGrid's Python bindings first:
``tools/install_simgrid.sh``)::

    .venv/bin/python benchmarks/bench_simgrid.py            # full run
    .venv/bin/python benchmarks/bench_simgrid.py --quick    # two grids, one size

For each grid, family (magpie, mpich, gridmpi, combining, modern, tree: whichever
has a plan for the operation) and operation (bcast, reduce, allreduce, allgather,
alltoall) at several sizes per rank, it predicts the completion time of the plan
``wacoll.Comm(..., family=...)`` would run (:func:`wacoll.plans.select`) twice: with
wacoll's simulator (``wacoll.plans.sim.simulate`` under ``LinkModel``) and with
SimGrid (:func:`wacoll.plans.sim.simgrid.simulate_simgrid`, the same plan on a
platform made from the same topology), and reports their relative difference
``(simgrid - wacoll) / wacoll``.

The grids are the papers': MagPIe's wide area (4 clusters x 2 ranks, 10 ms one-way,
1 MB/s: ``wacoll.tools.demo.default_topology()``, and 4 x 16 = 64 ranks as in its
figures), Matsuda's long-and-fast network (2 clusters, 5 ms, 100 MB/s; and the 10
ms / 20 MB/s / 5 MB/s-node scale model of ``bench_matsuda.py``), a LAN of SMP nodes
(clusters of 2 ranks, 100 us, 12.5 MB/s between them), and the same links at 64,
256 and 1024 ranks. Plans of more than ``--max-messages`` messages are left out
(SimGrid runs each message through Python actors).

The testbed is not run again: its measured medians are read from
``benchmarks/results/sim_vs_testbed_measured.json`` (magpie and mpich on MagPIe's
grid) and ``matsuda_fig6_measured.json`` (gridmpi on Matsuda's scale model), and both
simulators predict the plans those runs used, with the configured links
(``uncal``) and with the per-message overhead calibrated there (``+ovh``).

Writes ``benchmarks/results/simgrid[_quick].csv`` and ``.txt``: every case, the
median absolute difference per family and grid, and the goal (median within 10 %).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from bench_sim_vs_testbed import comm_plan as testbed_plan

from _harness import (
    RESULTS,
    ROOT,
    Report,
    command_line,
    human,
    load_text,
    median,
    write_csv,
)

GOAL = 0.10
KiB, MiB = 1 << 10, 1 << 20
OPS = ("bcast", "reduce", "allreduce", "allgather", "alltoall")
FAMILIES = ("magpie", "mpich", "gridmpi", "combining", "modern", "tree")
LEVEL = "associative"


def grids(quick):
    """(name, topology, sizes per rank) of each grid."""
    from wacoll import Topology
    from wacoll.tools.demo import default_topology

    def wan(sizes):
        return Topology.from_sizes(sizes, wan_latency=0.010, wan_bandwidth=1e6)

    def longfast(sizes):
        return Topology.from_sizes(sizes, wan_latency=0.005, wan_bandwidth=100e6)

    def matsuda(sizes):
        return Topology.from_sizes(
            sizes,
            wan_latency=0.010,
            wan_bandwidth=20e6,
            node_bandwidth=[5e6] * sum(sizes),
        )

    def lan(sizes):
        return Topology.from_sizes(sizes, wan_latency=100e-6, wan_bandwidth=12.5e6)

    small, large = (KiB, 64 * KiB), (KiB, 64 * KiB, MiB)
    if quick:
        return [
            ("magpie 4x2", default_topology(), (64 * KiB,)),
            ("longfast 2x4", longfast([4, 4]), (MiB,)),
        ]
    return [
        ("magpie 4x2", default_topology(), small),
        ("magpie 4x16", wan([16] * 4), small),
        ("longfast 2x4", longfast([4, 4]), large),
        ("matsuda 2x4", matsuda([4, 4]), large),
        ("lan-smp 4x2", lan([2] * 4), large),
        ("magpie 8x8", wan([8] * 8), small),
        ("magpie 8x32", wan([32] * 8), small),
        ("magpie 8x128", wan([128] * 8), (KiB,)),
        ("longfast 2x32", longfast([32, 32]), large),
        ("longfast 2x512", longfast([512, 512]), (64 * KiB,)),
        ("lan-smp 16x4", lan([4] * 16), large),
        ("lan-smp 64x4", lan([4] * 64), small),
        ("lan-smp 128x8", lan([8] * 128), (KiB,)),
    ]


def comm_plan(topology, op, nbytes, family, options=None):
    """The plan ``wacoll.Comm(..., family=family)`` runs, as in the testbed runs of
    ``bench_sim_vs_testbed.py`` (:func:`bench_sim_vs_testbed.comm_plan`: float64
    data, uint8 when the size is not a multiple of 8, reductions at its ``LEVEL``,
    root 0); None when the family has no plan for it."""
    from wacoll.errors import PlanError

    try:
        return testbed_plan(topology, op, nbytes, family, options)
    except PlanError:
        return None


def compare(plan, model, max_messages):
    """(wacoll's prediction, SimGrid's result or None when too many messages)."""
    from wacoll.plans.sim import simulate
    from wacoll.plans.sim.simgrid import simulate_simgrid

    ours = simulate(plan, model).completion
    if len(plan.messages()) > max_messages:
        return ours, None
    return ours, simulate_simgrid(plan, model, timeout=1800)


def diff(a, b):
    return None if a is None or b is None or not b else (a - b) / b


# ------------------------------------------------------------------ simulator vs simulator
def grid_rows(grid_list, max_messages, say):
    from wacoll.plans.sim import LinkModel

    rows = []
    for name, topo, sizes in grid_list:
        model = LinkModel(topo)
        t0 = time.monotonic()
        for op in OPS:
            for nbytes in sizes:
                for family in FAMILIES:
                    plan = comm_plan(topo, op, nbytes, family)
                    if plan is None or plan.family != family:
                        continue
                    ours, sg = compare(plan, model, max_messages)
                    row = {
                        "section": "grid",
                        "grid": name,
                        "ranks": topo.size,
                        "op": op,
                        "bytes": nbytes,
                        "family": family,
                        "algorithm": plan.algorithm,
                        "messages": len(plan.messages()),
                        "wacoll_s": ours,
                        "simgrid_s": sg and sg.completion,
                        "simgrid_wall_s": sg and sg.wall,
                        "diff": diff(sg and sg.completion, ours),
                    }
                    rows.append(row)
        done = [r for r in rows if r["grid"] == name]
        ds = [abs(r["diff"]) for r in done if r["diff"] is not None]
        say(
            f"  {name:15s} {topo.size:5d} ranks: {len(ds)} cases on SimGrid "
            f"({len(done) - len(ds)} over {max_messages} messages left out), median "
            f"|difference| {statistics.median(ds) if ds else float('nan'):.2%} "
            f"[{time.monotonic() - t0:.0f} s]"
        )
    return rows


# ------------------------------------------------------------------ the testbed's runs
def testbed_rows(max_messages, say):
    """Both simulators on the plans of the stored testbed runs."""
    from wacoll import Topology
    from wacoll.plans import build
    from wacoll.plans.sim import LinkModel
    from wacoll.tools.demo import default_topology

    rows = []
    path = RESULTS / "sim_vs_testbed_measured.json"
    if path.exists():
        data = json.loads(path.read_text())
        topo = default_topology()
        o = data["_meta"].get("calibration", {}).get("overhead", 0.0)
        models = {"uncal": LinkModel(topo), "+ovh": LinkModel(topo, overhead=o)}
        for label, case in data.items():
            if label.startswith("_"):
                continue
            for family in ("magpie", "mpich"):
                plan = (
                    comm_plan(topo, case["op"], case["bytes"], family)
                    if case["op"] != "barrier"
                    else None
                )
                measured = median(case["times"].get(family))
                if plan is None or measured is None:
                    continue
                for mname, model in models.items():
                    ours, sg = compare(plan, model, max_messages)
                    rows.append(
                        _testbed_row(
                            "sim_vs_testbed 4x2",
                            topo,
                            case["op"],
                            case["bytes"],
                            family,
                            plan,
                            mname,
                            ours,
                            sg,
                            measured,
                        )
                    )
        say(f"  {path.relative_to(ROOT)}: {len(rows)} cases (o = {o * 1e6:.0f} us)")
    path = RESULTS / "matsuda_fig6_measured.json"
    if path.exists():
        before = len(rows)
        data = json.loads(path.read_text())
        clusters = data["_meta"]["clusters"]
        per = len(clusters[0])
        topo = Topology.from_clusters(
            clusters,
            wan_latency=0.010,
            wan_bandwidth=20e6,
            node_bandwidth=[5e6] * sum(map(len, clusters)),
        )
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from bench_matsuda import ITEMSIZE, algorithms

        opts = {label: (op, o) for op, label, o in algorithms(per)}
        model = LinkModel(topo)
        for label, case in data.items():
            if label.startswith("_"):
                continue
            for impl, times in case["times"].items():
                if impl not in opts:
                    continue
                op, o = opts[impl]
                kwargs = dict(o, count=case["bytes"] // ITEMSIZE, itemsize=ITEMSIZE)
                if op == "allreduce":
                    kwargs["level"] = LEVEL
                plan = build(op, topo, "gridmpi", **kwargs)
                ours, sg = compare(plan, model, max_messages)
                rows.append(
                    _testbed_row(
                        "matsuda_fig6 2x4",
                        topo,
                        op,
                        case["bytes"],
                        "gridmpi",
                        plan,
                        "uncal",
                        ours,
                        sg,
                        median(times),
                        impl,
                    )
                )
        say(f"  {path.relative_to(ROOT)}: {len(rows) - before} cases")
    return rows


def _testbed_row(
    grid, topo, op, nbytes, family, plan, mname, ours, sg, measured, algorithm=None
):
    sgt = sg and sg.completion
    return {
        "section": "testbed",
        "grid": grid,
        "ranks": topo.size,
        "op": op,
        "bytes": nbytes,
        "family": family,
        "algorithm": algorithm or plan.algorithm,
        "model": mname,
        "messages": len(plan.messages()),
        "wacoll_s": ours,
        "simgrid_s": sgt,
        "simgrid_wall_s": sg and sg.wall,
        "diff": diff(sgt, ours),
        "measured_s": measured,
        "err_wacoll": diff(ours, measured),
        "err_simgrid": diff(sgt, measured),
    }


# ------------------------------------------------------------------ report
FIELDS = [
    "section",
    "grid",
    "ranks",
    "op",
    "bytes",
    "family",
    "algorithm",
    "model",
    "messages",
    "wacoll_s",
    "simgrid_s",
    "diff",
    "measured_s",
    "err_wacoll",
    "err_simgrid",
    "simgrid_wall_s",
]


def _med(values):
    values = [abs(v) for v in values if v is not None]
    return statistics.median(values) if values else None


def _pct(v):
    return "-" if v is None else f"{v:.1%}"


def report(rows, say):
    grid = [r for r in rows if r["section"] == "grid"]
    names = list(dict.fromkeys(r["grid"] for r in grid))
    fams = [f for f in FAMILIES if any(r["family"] == f for r in grid)]
    say("\nmedian |SimGrid - wacoll| / wacoll per family and grid (cases on SimGrid):")
    width = max(map(len, names)) if names else 10
    say(f"{'grid':{width}s} " + " ".join(f"{f:>10s}" for f in fams) + f" {'all':>10s}")
    for name in names:
        cells = []
        for f in fams:
            ds = [r["diff"] for r in grid if r["grid"] == name and r["family"] == f]
            n = sum(d is not None for d in ds)
            cells.append(f"{_pct(_med(ds))} ({n})" if n else "-")
        alls = [r["diff"] for r in grid if r["grid"] == name]
        say(
            f"{name:{width}s} "
            + " ".join(f"{c:>10s}" for c in cells)
            + f" {_pct(_med(alls)):>10s}"
        )
    per_family = {f: _med([r["diff"] for r in grid if r["family"] == f]) for f in fams}
    say(
        f"{'all grids':{width}s} "
        + " ".join(f"{_pct(per_family[f]):>10s}" for f in fams)
        + f" {_pct(_med([r['diff'] for r in grid])):>10s}"
    )
    # the goal: the median over families and sizes, per grid of the papers
    cells = [
        _med(
            [
                r["diff"]
                for r in grid
                if r["grid"] == n and r["family"] == f and r["bytes"] == b
            ]
        )
        for n in names
        for f in fams
        for b in {r["bytes"] for r in grid}
    ]
    cells = [c for c in cells if c is not None]
    overall = statistics.median(cells) if cells else None
    say(
        f"\nmedian over (grid, family, size) cells of the median |difference|: "
        f"{_pct(overall)} over {len(cells)} cells -> goal (within {GOAL:.0%}) "
        f"{'MET' if overall is not None and overall <= GOAL else 'MISSED'}"
    )
    far = [r for r in grid if r["diff"] is not None and abs(r["diff"]) > GOAL]
    say(
        f"cases over {GOAL:.0%}: {len(far)} of {sum(r['diff'] is not None for r in grid)}"
    )
    for r in sorted(far, key=lambda r: -abs(r["diff"]))[:25]:
        say(
            f"  {r['grid']:15s} {r['family']:9s} {r['op']:9s} {human(r['bytes']):>7s} "
            f"{r['algorithm'][:22]:22s} wacoll {r['wacoll_s'] * 1e3:9.3f} ms  SimGrid "
            f"{r['simgrid_s'] * 1e3:9.3f} ms  {r['diff']:+.1%}"
        )
    tb = [r for r in rows if r["section"] == "testbed"]
    if tb:
        say(
            "\nagainst the testbed's stored medians: median |predicted - measured| / "
            "measured"
        )
        say(
            f"{'runs':18s} {'family':8s} {'model':6s} {'cases':>5s} {'wacoll':>8s} "
            f"{'SimGrid':>8s} {'SG vs wacoll':>12s}"
        )
        keys = list(dict.fromkeys((r["grid"], r["family"], r["model"]) for r in tb))
        for g, f, m in keys:
            sel = [r for r in tb if (r["grid"], r["family"], r["model"]) == (g, f, m)]
            say(
                f"{g:18s} {f:8s} {m:6s} {len(sel):5d} "
                f"{_pct(_med([r['err_wacoll'] for r in sel])):>8s} "
                f"{_pct(_med([r['err_simgrid'] for r in sel])):>8s} "
                f"{_pct(_med([r['diff'] for r in sel])):>12s}"
            )
    return overall


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="two grids, one size")
    p.add_argument(
        "--max-messages",
        type=int,
        default=40_000,
        help="plans with more messages are not run on SimGrid (40000)",
    )
    p.add_argument(
        "--no-testbed",
        action="store_true",
        help="leave out the stored testbed measurements",
    )
    return p.parse_args(argv)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    from wacoll.plans.sim.simgrid import simgrid_unavailable

    reason = simgrid_unavailable()
    if reason:
        print(f"bench_simgrid: {reason}", file=sys.stderr)
        return 1
    say = Report()
    t0 = time.monotonic()
    say("SimGrid against wacoll's simulator (LinkModel), and both against the testbed")
    say(f"command: {command_line(__file__, argv)}")
    say(f"at start: {load_text()}")
    say(
        "grids (the plan wacoll.Comm(..., family=f) runs; LinkModel(topology) and the "
        "same topology's SimGrid platform):"
    )
    rows = grid_rows(grids(args.quick), args.max_messages, say)
    if not args.no_testbed and not args.quick:
        say("stored testbed runs:")
        rows += testbed_rows(args.max_messages, say)
    report(rows, say)
    stem = "simgrid" + ("_quick" if args.quick else "")
    RESULTS.mkdir(parents=True, exist_ok=True)
    write_csv(RESULTS / f"{stem}.csv", FIELDS, rows)
    say(f"\nat end: {load_text()}")
    say(
        f"wrote {RESULTS.relative_to(ROOT)}/{stem}.csv, .txt in "
        f"{time.monotonic() - t0:.0f} s"
    )
    say.write(RESULTS / f"{stem}.txt")
    return 0


if __name__ == "__main__":
    sys.exit(main())
