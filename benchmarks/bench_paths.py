"""PATHS (Bjørndalen et al.), Figures 5-8: a 1-int Allreduce on SMP nodes over a LAN.

Run from the repository root, as root (the emulated testbed needs it)::

    .venv/bin/python benchmarks/bench_paths.py            # full: 1000 iterations x 7 runs
    .venv/bin/python benchmarks/bench_paths.py --quick    # smoke run

What it reproduces. The paper times its Figure 4 program (1000 Allreduces of one
``int`` with MPI_SUM, the result checked every iteration) on clusters of 2-, 4- and
8-way SMP nodes joined by 100 Mbit/s Ethernet, with LAM-MPI's own reduce and
broadcast trees against scripted trees: a hierarchical scheme (a local reduction per
node, one message per node to rank 0; 1.79x faster than LAM on the 4-way cluster)
and a grouped scheme (two groups per 8-way node reporting to rank 0; 1.98x), and it
scales the number of 2-way nodes (Figure 8).

Here, on one machine with wacoll's emulated testbed (testbed name ``paths``):

* **nodes = clusters**: each SMP node is one network namespace; its ranks talk over
  MPICH's shared memory; nodes are joined by an emulated LAN link per directed node
  pair at 12.5 MB/s (100 Mbit/s) with a configured one-way latency of 50 us (a
  switched Fast Ethernet hop). The userspace relay that emulates the links adds its
  own few tens of microseconds: the self-check's measured one-way latency is printed
  and is what a message really sees.
* **placement**: LAM spread processes evenly over the nodes: round-robin (rank ``r``
  on node ``r mod nodes``), which is what makes LAM's reduce tree cross nodes on
  almost every edge (the paper's Figure 3); ``--placement block`` puts consecutive
  ranks on a node instead.
* **configurations** (8 ranks, scaled to this 2-core machine): 4 nodes x 2 ranks
  (2-way SMP) and 2 nodes x 4 ranks (4-way SMP), and a sweep over the number of 2-way
  nodes (Figure 8: 1..6 nodes, 2..12 ranks; 200 Allreduces per run there, to keep
  the run to minutes).
* **implementations**: LAM's trees (``family="tree", tree="lam"``: LAM's reduce tree,
  then its broadcast tree), the linear scheme (``tree="flat"``), PATHS's hierarchical
  scheme (``tree="paths-hierarchical"``), the grouped scheme (``tree="paths-grouped",
  group_size=ppn/2``: two groups per node, the paper's best on 8-way nodes), and for
  reference MPICH's native MPI_Allreduce and wacoll's ``magpie`` family. Level
  ``commutative`` (integer sums are exact in any order); ``validate=False`` (native MPI
  trusts its arguments, so do the timed wacoll calls).

Timing: per implementation, ``iters`` Allreduces from a common start instant to the
moment the last rank has finished, divided by ``iters``; implementations interleaved
run by run (order rotating); the table gives the median over runs (and the min).
``speedup`` is LAM's median over the implementation's. The simulator's prediction
(``wacoll.plans.sim`` with a LinkModel over the same topology, wide-area latency
as measured by the self-check, a per-message software overhead ``--sim-overhead``) is
printed beside it. Where the testbed cannot run here (not root, no /dev/net/tun) the
script says why and prints the simulator's table only, labelled as such.

Writes ``benchmarks/results/paths_allreduce[-quick].csv|png|txt``.
"""

from __future__ import annotations

import argparse
import json
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
    failure,
    load1,
    load_text,
    median,
    pyplot,
    report_check,
    save_figure,
    write_csv,
)

APP = ROOT / "benchmarks" / "apps" / "paths_allreduce.py"
TESTBED = "paths"
LEVEL = "commutative"
FIELDS = [
    "config",
    "nodes",
    "ppn",
    "ranks",
    "placement",
    "impl",
    "plan",
    "median_us",
    "min_us",
    "runs",
    "valid_runs",
    "speedup_vs_lam",
    "simulated_us",
    "wide_area_msgs",
    "wrong_results",
    "measured_oneway_us",
    "load1",
    "command",
]


# ------------------------------------------------------------------ arguments
def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: 150 iterations, 3 runs, sweep over 1,2,4 nodes",
    )
    p.add_argument("--iters", type=int, help="Allreduces per run (default 1000)")
    p.add_argument("--runs", type=int, help="runs per implementation (default 7)")
    p.add_argument(
        "--sweep-iters",
        type=int,
        help="Allreduces per run in the node sweep (default 200, --quick 100; "
        "fewer than the paper's 1000 to keep the run to minutes)",
    )
    p.add_argument(
        "--latency",
        type=float,
        default=50e-6,
        help="configured one-way latency between nodes, s (default 50e-6)",
    )
    p.add_argument(
        "--bandwidth",
        type=float,
        default=12.5e6,
        help="link rate between nodes, bytes/s (default 12.5e6 = 100 Mbit/s)",
    )
    p.add_argument(
        "--configs", default="4x2,2x4", help="NODESxPPN configurations (default 4x2,2x4)"
    )
    p.add_argument(
        "--sweep",
        help="numbers of 2-way nodes for the Figure 8 sweep "
        "(default 1,2,3,4,5,6; --quick 1,2,4; 'none' to skip)",
    )
    p.add_argument(
        "--placement",
        choices=("roundrobin", "block"),
        default="roundrobin",
        help="rank placement on nodes (default roundrobin, as LAM's)",
    )
    p.add_argument(
        "--sim-overhead",
        type=float,
        default=30e-6,
        help="per-message software overhead the simulator charges, s (default 30e-6)",
    )
    p.add_argument(
        "--simulate-only",
        action="store_true",
        help="no testbed: the simulator's table only",
    )
    p.add_argument("--no-write", action="store_true", help="write no result files")
    args = p.parse_args(argv)
    args.command = command_line(__file__, argv)
    args.iters = args.iters or (150 if args.quick else 1000)
    args.runs = args.runs or (3 if args.quick else 7)
    args.sweep_iters = args.sweep_iters or min(args.iters, 100 if args.quick else 200)
    sweep = args.sweep or ("1,2,4" if args.quick else "1,2,3,4,5,6")
    args.sweep = [] if sweep == "none" else [int(x) for x in sweep.split(",") if x]
    try:
        args.configs = [
            tuple(int(v) for v in c.lower().split("x"))
            for c in args.configs.split(",")
            if c
        ]
    except ValueError:
        p.error("--configs: give NODESxPPN, e.g. 4x2,2x4")
    if args.iters < 1 or args.runs < 1:
        p.error("--iters and --runs must be >= 1")
    for nodes, ppn in args.configs + [(n, 2) for n in args.sweep]:
        if nodes < 1 or ppn < 1 or nodes * ppn > 16:
            p.error(f"{nodes}x{ppn}: 1..16 ranks on this machine")
    return args


# ------------------------------------------------------------------ setup
def topology_for(nodes, ppn, placement, latency, bandwidth, intra_latency=2e-6):
    """SMP nodes as clusters; ranks placed round-robin (LAM) or in blocks."""
    from wacoll import Topology

    size = nodes * ppn
    if placement == "roundrobin":
        clusters = [[r for r in range(size) if r % nodes == c] for c in range(nodes)]
    else:
        clusters = [list(range(c * ppn, (c + 1) * ppn)) for c in range(nodes)]
    return Topology.from_clusters(
        clusters,
        wan_latency=latency,
        wan_bandwidth=bandwidth,
        intra_latency=intra_latency,
        intra_bandwidth=1e9,
    )


def impls_for(ppn, sweep=False):
    """The implementations timed on nodes of ``ppn`` ranks (name, family, options)."""
    out = [
        {"name": "native", "family": "native"},
        {"name": "lam", "family": "tree", "tree": "lam"},
    ]
    if not sweep:
        out.append({"name": "linear", "family": "tree", "tree": "flat"})
    out.append({"name": "hierarchical", "family": "tree", "tree": "paths-hierarchical"})
    if not sweep and ppn >= 4:
        out.append(
            {
                "name": f"grouped{ppn // 2}",
                "family": "tree",
                "tree": "paths-grouped",
                "group_size": ppn // 2,
            }
        )
    out.append({"name": "magpie", "family": "magpie"})
    return out


def plan_for(topology, impl):
    """The plan wacoll.Comm builds for a 1-int Allreduce with this implementation: the
    selection policy's (:func:`wacoll.plans.select`) with the family forced."""
    from wacoll.plans import Call, select

    opts = {k: v for k, v in impl.items() if k not in ("name", "family")}
    call = Call("allreduce", count=1, itemsize=4, level=LEVEL)
    return select(call, topology, family=impl["family"], options=opts).build(topology)


def simulated(topology, impl, overhead):
    """(predicted seconds per Allreduce, wide-area messages) or (None, None) for native."""
    from wacoll.plans.sim import LinkModel, simulate

    if impl["family"] == "native":
        return None, None
    plan = plan_for(topology, impl)
    report = plan.prove()
    return (
        simulate(plan, LinkModel(topology, overhead=overhead)).completion,
        report.wide_area_messages,
    )


# ------------------------------------------------------------------ output
def fmt_us(seconds, width=8):
    return f"{'-':>{width}s}" if seconds is None else f"{seconds * 1e6:{width}.0f}"


def oneway_from_check(check):
    """Median measured one-way latency over the self-check's pairs (seconds)."""
    if check is None:
        return None
    lat = [p.latency for p in check.pairs if p.latency is not None]
    return statistics.median(lat) if lat else None


# ------------------------------------------------------------------ running
def run_config(args, label, nodes, ppn, impls, say, workdir):
    """Time one configuration on a fresh testbed; returns rows."""
    from wacoll.emulate import Testbed, TestbedError

    topo = topology_for(nodes, ppn, args.placement, args.latency, args.bandwidth)
    size = topo.size
    iters = args.sweep_iters if label.startswith("sw") else args.iters
    say(
        f"\n== {label}: {nodes} node(s) x {ppn} rank(s) = {size} ranks, nodes "
        f"{[list(c) for c in topo.clusters]}; {iters} Allreduces per run"
    )
    spec = {
        "iters": iters,
        "runs": args.runs,
        "margin": 0.05,
        "progress": True,
        "impls": impls,
    }
    spec_path = workdir / f"{label}-spec.json"
    out_path = workdir / f"{label}-out.json"
    spec_path.write_text(json.dumps(spec))
    measured, check, transport, reason = None, None, None, None
    timeout = 120 + iters * args.runs * len(impls) * 0.03
    try:
        with Testbed(topo, name=TESTBED) as tb:
            check = tb.last_check
            if check is not None and check.pairs:
                report_check(say, check)
            run = tb.run(
                [sys.executable, str(APP), str(spec_path), str(out_path)],
                timeout=timeout,
                capture=False,
                cwd=str(ROOT),
            )
            transport = run.transport
            if run.ok:
                measured = json.loads(out_path.read_text())
            else:
                reason = failure(run)
    except TestbedError as exc:
        reason = f"the testbed failed: {exc}"
    if reason:
        say(f"  no measurements for {label}: {reason}")
    oneway = oneway_from_check(check)
    sim_topo = topology_for(
        nodes,
        ppn,
        args.placement,
        oneway if oneway is not None else args.latency,
        args.bandwidth,
    )
    rows = []
    for impl in impls:
        name = impl["name"]
        sim, wan = simulated(sim_topo, impl, args.sim_overhead)
        row = {
            "config": label,
            "nodes": nodes,
            "ppn": ppn,
            "ranks": size,
            "placement": args.placement,
            "impl": name,
            "simulated_us": _us(sim),
            "wide_area_msgs": wan,
            "measured_oneway_us": _us(oneway),
            "load1": load1(),
            "command": args.command,
        }
        if measured is not None and name in measured:
            m = measured[name]
            per_op = m["per_op"]
            row.update(
                plan=m["plan"] or "MPI library",
                median_us=_us(median(per_op)),
                min_us=_us(min((v for v in per_op if v is not None), default=None)),
                runs=len(per_op),
                valid_runs=sum(v is not None for v in per_op),
                wrong_results=m["wrong"] + (0 if m["first_ok"] else 1),
            )
        else:
            row["plan"] = (
                "MPI library"
                if name == "native"
                else f"{impl['family']}/{plan_for(sim_topo, impl).algorithm}"
            )
        rows.append(row)
    lam = next((r for r in rows if r["impl"] == "lam"), None)
    key = "median_us" if measured is not None else "simulated_us"
    for r in rows:
        base, mine = (lam or {}).get(key), r.get(key)
        r["speedup_vs_lam"] = round(base / mine, 3) if base and mine else None
    if measured is not None:
        pings = measured["_meta"].get("ping_one_way") or {}
        say(
            f"  MPI ping-pong one-way (8 B, native): other node "
            f"{fmt_us(pings.get('remote'), 0).strip()} us, same node "
            f"{fmt_us(pings.get('local'), 0).strip()} us; transport {transport}"
        )
        for r in rows:
            r["ping_remote_us"] = _us(pings.get("remote"))
    return rows, measured is not None, transport


def _us(seconds):
    return None if seconds is None else round(seconds * 1e6, 1)


def print_table(rows, say, measured):
    head = (
        f"{'config':7s} {'impl':13s} {'plan':28s} "
        + (f"{'median us':>9s} {'min us':>7s} {'x LAM':>6s} " if measured else "")
        + f"{'sim us':>7s} {'sim xLAM':>8s} {'WAN msgs':>8s} {'wrong':>5s}"
    )
    say(head)
    say("-" * len(head))
    lam_sim = {r["config"]: r["simulated_us"] for r in rows if r["impl"] == "lam"}
    for r in rows:
        sim, base = r.get("simulated_us"), lam_sim.get(r["config"])
        sim_x = f"{base / sim:8.2f}" if sim and base else f"{'-':>8s}"
        line = f"{r['config']:7s} {r['impl']:13s} {str(r.get('plan'))[:28]:28s} "
        if measured:
            sp = r.get("speedup_vs_lam")
            line += (
                f"{_f(r.get('median_us'), 9)} {_f(r.get('min_us'), 7)} "
                f"{'-' if sp is None else f'{sp:.2f}':>6s} "
            )
        line += (
            f"{_f(sim, 7)} {sim_x} {'-' if r['wide_area_msgs'] is None else r['wide_area_msgs']:>8} "
            f"{'-' if r.get('wrong_results') is None else r['wrong_results']:>5}"
        )
        say(line)


def _f(value, width):
    return f"{'-':>{width}s}" if value is None else f"{value:{width}.0f}"


def plot(path, rows, configs, sweep_labels, measured):
    plt = pyplot()
    key = "median_us" if measured else "simulated_us"
    what = "measured median" if measured else "SIMULATED (no testbed)"
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    ax = axes[0]
    main = list(configs)
    impls = []
    for r in rows:
        if r["config"] in main and r["impl"] not in impls:
            impls.append(r["impl"])
    order = ("native", "lam", "linear", "hierarchical", "grouped", "magpie")
    impls.sort(key=lambda i: next((k for k, o in enumerate(order) if i.startswith(o)), 9))
    width = 0.8 / max(1, len(impls))
    for k, impl in enumerate(impls):
        xs, ys = [], []
        for i, c in enumerate(main):
            row = next((r for r in rows if r["config"] == c and r["impl"] == impl), None)
            if row and row.get(key):
                xs.append(i + (k - (len(impls) - 1) / 2) * width)
                ys.append(row[key])
        ax.bar(xs, ys, width, label=impl)
    ax.set_xticks(range(len(main)), main)
    ax.set_ylabel("time per Allreduce (us)")
    ax.set_title(f"1-int Allreduce, {what} (cf. PATHS Fig. 5-7)")
    ax.legend(fontsize=8)
    ax = axes[1]
    sweep_rows = [r for r in rows if r["config"] in sweep_labels]
    for impl in dict.fromkeys(r["impl"] for r in sweep_rows):
        pts = sorted(
            (r["nodes"], r[key]) for r in sweep_rows if r["impl"] == impl and r.get(key)
        )
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=impl)
    ax.set_xlabel("2-way nodes (2 ranks each)")
    ax.set_ylabel("time per Allreduce (us)")
    ax.set_title(f"scaling the number of nodes, {what} (cf. PATHS Fig. 8)")
    if sweep_rows:
        ax.legend(fontsize=8)
    else:
        ax.text(
            0.5, 0.5, "no node sweep in this run", ha="center", transform=ax.transAxes
        )
    save_figure(fig, path, 110)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    say = Report()
    t0 = time.monotonic()
    from wacoll.emulate import unavailable_reason

    say(
        "PATHS (Bjørndalen et al.) Figures 5-8: 1-int MPI_SUM Allreduce on SMP nodes "
        "over an emulated LAN"
    )
    say(f"command: {args.command}")
    say(f"machine: shared; {load_text()}")
    say(
        f"LAN: {args.bandwidth / 1e6:g} MB/s per directed node pair, configured one-way "
        f"latency {args.latency * 1e6:g} us; placement {args.placement}; "
        f"{args.iters} Allreduces per run ({args.sweep_iters} in the node sweep), median "
        f"of {args.runs} runs; level {LEVEL}; "
        "wacoll with validate=False (arguments trusted, as native MPI does)"
    )
    say(
        "scaled to this machine: 8 ranks per configuration (the paper: up to 32), "
        f"sweep up to {max(args.sweep, default=0) * 2} ranks"
    )
    reason = "--simulate-only was given" if args.simulate_only else unavailable_reason()
    measured_any = False
    configs = [(f"{n}x{p}", n, p, impls_for(p)) for n, p in args.configs]
    sweep = [
        (f"sw{n}x2", n, 2, impls_for(2, sweep=True))
        for n in args.sweep
        if f"{n}x2" not in {c[0] for c in configs}
    ]
    sweep_labels = [c[0] for c in sweep] + [
        f"{n}x2" for n in args.sweep if f"{n}x2" in {c[0] for c in configs}
    ]
    rows = []
    transport = None
    if reason:
        say(
            f"\nNO MEASUREMENTS: {reason}. The tables show the simulator's predictions "
            "(wacoll.plans.sim, LinkModel), not measurements."
        )
        for label, n, p, impls in configs + sweep:
            topo = topology_for(n, p, args.placement, args.latency, args.bandwidth)
            for impl in impls:
                sim, wan = simulated(topo, impl, args.sim_overhead)
                rows.append(
                    {
                        "config": label,
                        "nodes": n,
                        "ppn": p,
                        "ranks": n * p,
                        "placement": args.placement,
                        "impl": impl["name"],
                        "simulated_us": _us(sim),
                        "wide_area_msgs": wan,
                        "plan": "MPI library"
                        if impl["family"] == "native"
                        else f"{impl['family']}/{plan_for(topo, impl).algorithm}",
                        "load1": load1(),
                        "command": args.command,
                    }
                )
            lam = next(r for r in rows if r["config"] == label and r["impl"] == "lam")
            for r in rows:
                if r["config"] == label and r.get("simulated_us"):
                    r["speedup_vs_lam"] = round(
                        lam["simulated_us"] / r["simulated_us"], 3
                    )
    else:
        with tempfile.TemporaryDirectory(prefix="bench-paths-") as tmp:
            for label, n, p, impls in configs + sweep:
                got, ok, tr = run_config(args, label, n, p, impls, say, Path(tmp))
                rows += got
                measured_any |= ok
                transport = transport or tr
    say(
        f"\nResults ({'measured: median over runs of the max-over-ranks time per Allreduce' if measured_any else 'SIMULATED'}; "
        f"x LAM = LAM's time / this time; sim = LinkModel with the measured one-way "
        f"latency and {args.sim_overhead * 1e6:g} us per message; transport "
        f"{transport or '-'}; load average now {load1()}):"
    )
    print_table(rows, say, measured_any)
    summary(rows, say, measured_any, configs, sweep_labels)
    rows += paper_scale(args, rows, say)
    say(f"\ntook {time.monotonic() - t0:.0f} s; {load_text()}")
    if not args.no_write:
        RESULTS.mkdir(exist_ok=True)
        stem = (
            "paths_allreduce"
            + ("-block" if args.placement == "block" else "")
            + (f"-lat{args.latency * 1e6:g}us" if args.latency != 50e-6 else "")
            + ("-quick" if args.quick else "")
            + ("-simulated" if not measured_any else "")
        )
        write_csv(RESULTS / f"{stem}.csv", FIELDS + ["ping_remote_us"], rows)
        plot(
            RESULTS / f"{stem}.png",
            rows,
            [c[0] for c in configs],
            sweep_labels,
            measured_any,
        )
        say(f"wrote benchmarks/results/{stem}.csv, .png, .txt")
        say.write(RESULTS / f"{stem}.txt")
    return 0


PAPER_SCALE = ((16, 2), (8, 4), (4, 8))  # the paper's 2-, 4- and 8-way clusters, 32 ranks


def paper_scale(args, rows, say):
    """Simulated only: the paper's 32-rank clusters, with this testbed's link figures."""
    lat = [r["measured_oneway_us"] for r in rows if r.get("measured_oneway_us")]
    latency = statistics.median(lat) * 1e-6 if lat else args.latency
    say(
        f"\nSIMULATED ONLY, at the paper's scale (32 ranks; LinkModel, one-way latency "
        f"{latency * 1e6:.0f} us{' as measured' if lat else ' configured'}, "
        f"{args.sim_overhead * 1e6:g} us per message; placement {args.placement}):"
    )
    out = []
    for nodes, ppn in PAPER_SCALE:
        topo = topology_for(nodes, ppn, args.placement, latency, args.bandwidth)
        label = f"sim{nodes}x{ppn}"
        got = []
        for impl in impls_for(ppn):
            if impl["family"] == "native":
                continue
            sim, wan = simulated(topo, impl, args.sim_overhead)
            got.append(
                {
                    "config": label,
                    "nodes": nodes,
                    "ppn": ppn,
                    "ranks": nodes * ppn,
                    "placement": args.placement,
                    "impl": impl["name"],
                    "plan": f"{impl['family']}/{plan_for(topo, impl).algorithm}",
                    "simulated_us": _us(sim),
                    "wide_area_msgs": wan,
                    "load1": load1(),
                    "command": args.command,
                }
            )
        lam = next(r for r in got if r["impl"] == "lam")["simulated_us"]
        for r in got:
            r["speedup_vs_lam"] = round(lam / r["simulated_us"], 3)
        say(
            f"  {nodes:2d} x {ppn}-way: "
            + ", ".join(
                f"{r['impl']} {r['simulated_us']:.0f} us ({r['speedup_vs_lam']:.2f}x)"
                for r in got
            )
        )
        out += got
    return out


def summary(rows, say, measured, configs, sweep_labels):
    """The paper's headline: the best scheme's speedup over LAM's trees."""
    key = "median_us" if measured else "simulated_us"
    say(
        "\nBest wacoll tree scheme vs LAM's trees (the paper: 1.79x hierarchical on 4-way "
        "nodes, 1.98x grouped on 8-way, 1.52x on 2-way):"
    )
    for label in [c[0] for c in configs] + [
        s for s in sweep_labels if s not in {c[0] for c in configs}
    ]:
        cand = [
            r
            for r in rows
            if r["config"] == label
            and r.get(key)
            and r["impl"] not in ("native", "lam", "magpie")
        ]
        lam = next((r for r in rows if r["config"] == label and r["impl"] == "lam"), None)
        if not cand or lam is None or not lam.get(key):
            continue
        best = min(cand, key=lambda r: r[key])
        native = next(
            (
                r
                for r in rows
                if r["config"] == label and r["impl"] == "native" and r.get(key)
            ),
            None,
        )
        extra = f"; native MPI {native[key]:.0f} us" if native else ""
        say(
            f"  {label:7s} LAM {lam[key]:7.0f} us, best {best['impl']:13s} "
            f"{best[key]:7.0f} us: {lam[key] / best[key]:.2f}x{extra}"
        )


if __name__ == "__main__":
    sys.exit(main())
