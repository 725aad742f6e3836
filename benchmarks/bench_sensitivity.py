"""Plaat et al.'s Figure 3 on wacoll's testbed: speedup relative to one cluster.

Run from the repository root, as root (the testbed needs network namespaces)::

    .venv/bin/python benchmarks/bench_sensitivity.py            # 3 x 3 grid, a few minutes
    .venv/bin/python benchmarks/bench_sensitivity.py --quick    # 2 x 2 grid, smoke run

A collective-heavy, ASP-like kernel (``benchmarks/apps/plaat_kernel.py``: per
iteration 50 ms of emulated computation, a 16 KiB row ``Bcast`` from a rotating root,
an 8 B ``Allreduce`` and a ``Barrier``) runs on 4 clusters of 2 ranks (8 ranks on this
2-core machine; the paper: 4 x 8 processors) over a sweep of wide-area one-way
latency and bandwidth, with the **magpie** (cluster-aware) and the **mpich** (flat,
cluster-unaware) plan families side by side (interleaved in one run per setting).

Speedup relative to one cluster, as Plaat's Figure 3: ``T_L / T_M``, with ``T_M``
the kernel's time on the multi-cluster testbed and ``T_L`` its time on a one-cluster
testbed (the same 8 ranks in one namespace, no emulated wide area) running the same
family's plans for the same 4 x 2 clusters (the same execution schedule, every link
fast), pooled over reference runs before the sweep and after every latency row (the
machine's load drifts). Times are medians of >= 7 repetitions (3 with ``--quick``). The simulator's
prediction (``LinkModel``; the kernel's time as ``iters x (compute + bcast + allreduce
+ barrier)``, each the plan's simulated completion) is given beside every figure.

Writes ``benchmarks/results/plaat_fig3[_quick].csv|png|txt`` and the raw
``..._measured.json``: the PNG has two
heatmaps (magpie, mpich) of the measured relative speedup (simulated in brackets).
Where the testbed cannot run it says why and shows the simulator's heatmaps instead.
"""

from __future__ import annotations

import argparse
import json
import os
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
    load_text,
    median,
    pyplot,
    save_figure,
    started_testbed,
    write_csv,
)

APP = ROOT / "benchmarks" / "apps" / "plaat_kernel.py"
TESTBED_NAME = "plaat"
FAMILIES = ("magpie", "mpich")
CLUSTERS = (2, 2, 2, 2)
FULL_LATENCIES = (1.0, 10.0, 30.0)  # ms, one way
FULL_BANDWIDTHS = (0.3, 1.0, 10.0)  # MB/s
QUICK_LATENCIES = (1.0, 30.0)
QUICK_BANDWIDTHS = (0.3, 10.0)
FIELDS = [
    "latency_ms",
    "bandwidth_MBps",
    "family",
    "T_multi_s",
    "T_single_s",
    "rel",
    "T_multi_min_s",
    "T_single_min_s",
    "rel_min",
    "sim_T_multi_s",
    "sim_T_single_s",
    "sim_rel",
    "runs",
    "correct",
    "check_ok",
    "magpie_over_mpich",
]


# ------------------------------------------------------------------ small helpers
def floats(text):
    return [float(x) for x in text.split(",") if x.strip()]


# ------------------------------------------------------------------ simulation
def comm_plan(topology, op, nbytes, family, root=0):
    """The plan ``wacoll.Comm(family=...)`` runs for the kernel's call: the selection
    policy's (:func:`wacoll.plans.select`) for float64 data, level "associative"."""
    from wacoll.plans import Call, select

    if op == "barrier":
        call = Call(op)
    else:
        call = Call(
            op,
            count=nbytes // 8,
            itemsize=8,
            level="associative" if op == "allreduce" else None,
            root=root if op == "bcast" else None,
        )
    return select(call, topology, family=family).build(topology)


def predicted_kernel(topology, family, cfg):
    """Simulated kernel time: iters x (compute + bcast (mean over the roots) +
    allreduce + barrier), each the plan's simulated completion under LinkModel."""
    from wacoll.plans.sim import LinkModel, simulate

    model = LinkModel(topology)
    size = topology.size
    iters = cfg["iters"]
    bcast = iters * statistics.mean(  # the kernel's roots go round all ranks
        simulate(
            comm_plan(topology, "bcast", cfg["row_bytes"], family, root=r), model
        ).completion
        for r in range(size)
    )
    rest = (
        simulate(comm_plan(topology, "allreduce", 8, family), model).completion
        + simulate(comm_plan(topology, "barrier", 0, family), model).completion
    )
    return iters * (cfg["compute_ms"] * 1e-3 + rest) + bcast


def grid_topology(latency_ms, bandwidth_mbps):
    from wacoll import Topology

    return Topology.from_sizes(
        list(CLUSTERS), wan_latency=latency_ms * 1e-3, wan_bandwidth=bandwidth_mbps * 1e6
    )


def fast_topology():
    """The 4 x 2 clusters with every link as fast as the intra-cluster one."""
    from wacoll import Topology

    t = Topology.from_sizes(list(CLUSTERS))
    return Topology.from_sizes(
        list(CLUSTERS), wan_latency=t.intra.latency, wan_bandwidth=t.intra.bandwidth
    )


# ------------------------------------------------------------------ testbed runs
def check_summary(report):
    lat = [
        p.latency / p.latency_expected
        for p in report.pairs
        if p.latency is not None and p.latency_expected > 0
    ]
    bw = [
        p.bandwidth / p.bandwidth_expected
        for p in report.pairs
        if p.bandwidth is not None and p.bandwidth_expected
    ]
    if not report.pairs:
        return "no links to check (one cluster)"
    return (
        f"{'passed' if report.ok else 'FAILED'} on {len(report.pairs)} links: measured/"
        f"configured latency {min(lat, default=0):.3f}..{max(lat, default=0):.3f}, "
        f"rate {min(bw, default=0):.3f}..{max(bw, default=0):.3f}"
    )


def run_kernel(topology, cfg, out_dir, tag, timeout, say):
    """Run the kernel on a testbed for ``topology``; ``(results, None)`` or ``(None, why)``."""
    from wacoll.emulate import TestbedError

    cfg_path, res_path = out_dir / f"{tag}.json", out_dir / f"{tag}-out.json"
    cfg_path.write_text(json.dumps(cfg))
    try:
        with started_testbed(topology, name=TESTBED_NAME, time_limit=timeout + 600) as (
            tb,
            caught,
        ):
            say(
                f"  [{tag}] testbed {tb.backend}, MTU {tb.mtu}, self-check "
                + check_summary(tb.last_check)
                + "".join(f"; WARNING {w.message}" for w in caught)
            )
            t0 = time.monotonic()
            run = tb.run(
                [sys.executable, str(APP), str(cfg_path), str(res_path)],
                timeout=timeout,
                capture=True,
            )
            if not run.ok:
                tail = (run.stderr or "").strip().splitlines()[-3:]
                return None, f"the kernel run failed ({failure(run)}) " + " | ".join(tail)
            results = json.loads(res_path.read_text())
            results["meta"]["transport"] = run.transport
            results["meta"]["elapsed"] = time.monotonic() - t0
            results["meta"]["check"] = tb.last_check.as_dict()
            return results, None
    except TestbedError as exc:
        return None, f"the testbed failed: {exc}"


class _Reference:
    """The one-cluster reference runs (T_L); repeated during the sweep and pooled, as
    the machine's load drifts between settings."""

    def __init__(self, cfg, tmp, timeout, say):
        self.cfg, self.tmp, self.timeout, self.say = cfg, tmp, timeout, say
        self.results = []

    def run(self):
        """One more reference run; ``(True, None)`` or ``(False, why)``."""
        from wacoll import Topology

        tag = f"one-cluster-{len(self.results) + 1}"
        res, why = run_kernel(
            Topology.single(sum(CLUSTERS)),
            self.cfg,
            self.tmp,
            tag,
            self.timeout,
            self.say,
        )
        if res is None:
            self.say(f"  one cluster: FAILED: {why}")
            return False, why
        self.results.append(res)
        self.say(
            "  one cluster: "
            + ", ".join(f"{f} {median(res['times'][f]) * 1e3:.0f} ms" for f in FAMILIES)
            + f"; transport {res['meta']['transport']}"
        )
        return True, None

    def pooled(self):
        """Every reference repetition of every run together (empty without runs)."""
        if not self.results:
            return {}
        return {
            "times": {
                f: [t for r in self.results for t in r["times"][f]] for f in FAMILIES
            },
            "correct": {f: all(r["correct"][f] for r in self.results) for f in FAMILIES},
        }


# ------------------------------------------------------------------ output
def plot(path, rows, latencies, bandwidths, measured, title):
    import numpy as np

    plt = pyplot()

    fig, axes = plt.subplots(1, 2, figsize=(12, 5), constrained_layout=True)
    key = "rel" if measured else "sim_rel"
    image = None
    for ax, family in zip(axes, FAMILIES):
        grid = np.full((len(latencies), len(bandwidths)), np.nan)
        for r in rows:
            if r["family"] != family:
                continue
            i, j = latencies.index(r["latency_ms"]), bandwidths.index(r["bandwidth_MBps"])
            if r.get(key) is not None:
                grid[i, j] = 100 * r[key]
            text = "-" if r.get(key) is None else f"{100 * r[key]:.0f}%"
            if measured and r.get("sim_rel") is not None:
                text += f"\n(sim {100 * r['sim_rel']:.0f}%)"
            ax.text(
                j,
                i,
                text,
                ha="center",
                va="center",
                fontsize=9,
                color="white" if (r.get(key) or 0) < 0.45 else "black",
            )
        image = ax.imshow(
            grid, origin="lower", cmap="viridis", vmin=0, vmax=100, aspect="auto"
        )
        ax.set_xticks(range(len(bandwidths)), [f"{b:g}" for b in bandwidths])
        ax.set_yticks(range(len(latencies)), [f"{x:g}" for x in latencies])
        ax.set_xlabel("wide-area bandwidth (MB/s)")
        ax.set_ylabel("wide-area one-way latency (ms)")
        ax.set_title(f"{family}" + ("" if measured else " (SIMULATED ONLY)"))
    fig.colorbar(image, ax=axes, label="speedup relative to one cluster, T_L / T_M (%)")
    fig.suptitle(title)
    save_figure(fig, path, 110)


def print_grids(rows, latencies, bandwidths, measured, say, key="rel", what=""):
    for family in FAMILIES:
        say(
            f"\n{family}: speedup relative to one cluster, T_L/T_M "
            + (f"measured{what} (simulated)" if measured else "SIMULATED")
        )
        say("latency \\ bandwidth " + "".join(f"{b:>14g}" for b in bandwidths) + "  MB/s")
        for lat in latencies:
            cells = []
            for bw in bandwidths:
                r = next(
                    x
                    for x in rows
                    if x["family"] == family
                    and x["latency_ms"] == lat
                    and x["bandwidth_MBps"] == bw
                )
                if measured:
                    m = "-" if r.get(key) is None else f"{100 * r[key]:.0f}%"
                    cells.append(f"{m} ({100 * r['sim_rel']:.0f}%)")
                else:
                    cells.append(f"{100 * r['sim_rel']:.0f}%")
            say(f"{lat:>9g} ms        " + "".join(f"{c:>14s}" for c in cells))


# ------------------------------------------------------------------ main
def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="2 x 2 grid, 3 repetitions")
    p.add_argument("--latencies", type=floats, help="one-way ms, e.g. 1,10,30")
    p.add_argument("--bandwidths", type=floats, help="MB/s, e.g. 0.3,1,10")
    p.add_argument("--reps", type=int, help="repetitions per setting (7; --quick 3)")
    p.add_argument(
        "--iters", type=int, default=3, help="kernel iterations per repetition (3)"
    )
    p.add_argument(
        "--compute-ms",
        type=float,
        default=50.0,
        help="emulated computation per iteration (50 ms)",
    )
    p.add_argument("--row-bytes", type=int, default=16384, help="Bcast size (16 KiB)")
    p.add_argument(
        "--compute",
        choices=("sleep", "spin"),
        default="sleep",
        help="emulate computation by sleeping (default) or spinning",
    )
    p.add_argument("--simulate-only", action="store_true", help="no testbed")
    args = p.parse_args(argv)
    args.latencies = sorted(
        args.latencies or (QUICK_LATENCIES if args.quick else FULL_LATENCIES)
    )
    args.bandwidths = sorted(
        args.bandwidths or (QUICK_BANDWIDTHS if args.quick else FULL_BANDWIDTHS)
    )
    args.reps = args.reps or (3 if args.quick else 7)
    if args.reps < 1 or args.iters < 1 or args.row_bytes < 8:
        p.error("--reps and --iters must be >= 1, --row-bytes >= 8")
    return args


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    say = Report()
    t0 = time.monotonic()
    cfg = {
        "clusters": list(CLUSTERS),
        "families": list(FAMILIES),
        "iters": args.iters,
        "reps": args.reps,
        "compute_ms": args.compute_ms,
        "row_bytes": args.row_bytes,
        "compute": args.compute,
        "margin": 0.1,
    }
    say("Plaat et al. Figure 3 (speedup relative to one cluster) on wacoll's testbed")
    say(f"command: {command_line(__file__, argv)}")
    say(
        f"kernel ({APP.relative_to(ROOT)}): per iteration {args.compute_ms:g} ms emulated "
        f"computation ({args.compute}), Bcast {args.row_bytes} B from root i mod 8, "
        f"Allreduce 8 B (float64, integer values, level 'associative'), Barrier; "
        f"{args.iters} iterations per repetition, median of {args.reps} repetitions"
    )
    say(
        f"clusters {'x'.join(map(str, CLUSTERS))} = 8 ranks on this {os.cpu_count()}-core "
        f"machine (the paper: 4 x 8 processors); families {', '.join(FAMILIES)} "
        f"interleaved; wacoll with validate=False (arguments trusted, as MPI does)"
    )
    say(
        f"grid: latency {args.latencies} ms x bandwidth {args.bandwidths} MB/s, one "
        f"testbed per setting (links per directed cluster pair, fully connected as the "
        f"DAS); reference: one cluster of 8 (same plans, no wide area)"
    )
    say(f"at start: {load_text()}")
    from wacoll.emulate import unavailable_reason

    sim_single = {f: predicted_kernel(fast_topology(), f, cfg) for f in FAMILIES}
    reason = "--simulate-only was given" if args.simulate_only else unavailable_reason()
    measured = reason is None
    single = {}
    runs = {}
    with tempfile.TemporaryDirectory(prefix="plaat-") as tmp:
        tmp = Path(tmp)
        reference = _Reference(
            cfg, tmp, 120 + 6 * (args.reps + 1) * sum(sim_single.values()), say
        )
        if measured:
            measured, reason = reference.run()
        for lat in args.latencies:
            for bw in args.bandwidths:
                topo = grid_topology(lat, bw)
                sim = {f: predicted_kernel(topo, f, cfg) for f in FAMILIES}
                runs[lat, bw] = {"sim": sim, "res": None}
                if not measured:
                    continue
                timeout = 120 + 6 * (args.reps + 1) * sum(sim.values())
                res, why = run_kernel(
                    topo, cfg, tmp, f"{lat:g}ms-{bw:g}MBps", timeout, say
                )
                runs[lat, bw]["res"] = res
                if res is None:
                    say(f"  {lat:g} ms, {bw:g} MB/s: FAILED: {why}")
                else:
                    say(
                        f"  {lat:g} ms, {bw:g} MB/s: "
                        + ", ".join(
                            f"{f} {median(res['times'][f]) * 1e3:.0f} ms "
                            f"(sim {sim[f] * 1e3:.0f})"
                            for f in FAMILIES
                        )
                        + f" [{res['meta']['elapsed']:.0f} s]"
                    )
            if measured:  # the reference again after every latency row: the load drifts
                reference.run()
        single = reference.pooled()
        reference_results = reference.results
        if single:
            say(
                "  one-cluster reference T_L, pooled over "
                f"{len(reference.results)} runs: "
                + ", ".join(
                    f"{f} {median(single['times'][f]) * 1e3:.0f} ms (run medians "
                    + "/".join(
                        f"{median(r['times'][f]) * 1e3:.0f}" for r in reference.results
                    )
                    + ")"
                    for f in FAMILIES
                )
            )
    if not measured:
        say(
            f"\nNO MEASUREMENTS: {reason}. The heatmaps show the SIMULATOR's predictions "
            f"only (LinkModel)."
        )
    say(f"at end: {load_text()}")
    rows = []
    for (lat, bw), run in runs.items():
        res = run["res"]
        for f in FAMILIES:
            row = {
                "latency_ms": lat,
                "bandwidth_MBps": bw,
                "family": f,
                "sim_T_multi_s": run["sim"][f],
                "sim_T_single_s": sim_single[f],
                "sim_rel": sim_single[f] / run["sim"][f],
            }
            if res is not None and single:
                tm, tl = median(res["times"][f]), median(single["times"][f])
                tm_min = min((t for t in res["times"][f] if t is not None), default=None)
                tl_min = min(
                    (t for t in single["times"][f] if t is not None), default=None
                )
                row.update(
                    {
                        "T_multi_s": tm,
                        "T_single_s": tl,
                        "rel": tl / tm if tm and tl else None,
                        "T_multi_min_s": tm_min,
                        "T_single_min_s": tl_min,
                        "rel_min": tl_min / tm_min if tm_min and tl_min else None,
                        "runs": len([t for t in res["times"][f] if t is not None]),
                        "correct": res["correct"][f] and single["correct"][f],
                        "check_ok": res["meta"]["check"]["ok"],
                    }
                )
            rows.append(row)
        for row in rows[-len(FAMILIES) :]:
            a = next(r for r in rows[-len(FAMILIES) :] if r["family"] == "magpie")
            b = next(r for r in rows[-len(FAMILIES) :] if r["family"] == "mpich")
            if a.get("T_multi_s") and b.get("T_multi_s"):
                row["magpie_over_mpich"] = b["T_multi_s"] / a["T_multi_s"]
    print_grids(rows, args.latencies, args.bandwidths, measured, say)
    if measured:
        say(
            "\nThe same from the FASTEST repetition of each run (T_L and T_M minima: the "
            "least disturbed by the machine's load; the PNG shows the medians):"
        )
        print_grids(
            rows,
            args.latencies,
            args.bandwidths,
            measured,
            say,
            key="rel_min",
            what=" from minima",
        )
    if measured:
        ok = all(r.get("correct") for r in rows)
        say(
            f"\nresults correct in every run: {'yes' if ok else 'NO'}; self-checks passed: "
            f"{'yes' if all(r.get('check_ok') for r in rows) else 'NO (see above)'}"
        )
        say(
            "magpie's speedup over mpich per setting (T_mpich / T_magpie): "
            + ", ".join(
                f"{r['latency_ms']:g} ms/{r['bandwidth_MBps']:g} MB/s {r['magpie_over_mpich']:.2f}x"
                for r in rows
                if r["family"] == "magpie" and r.get("magpie_over_mpich")
            )
        )
        errs = [abs(r["sim_rel"] - r["rel"]) for r in rows if r.get("rel") is not None]
        if errs:
            say(
                f"simulated vs measured relative speedup: median |difference| "
                f"{100 * statistics.median(errs):.0f} points"
            )
    stem = (
        "plaat_fig3"
        + ("_quick" if args.quick else "")
        + ("" if measured else "_simulated")
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    write_csv(RESULTS / f"{stem}.csv", FIELDS, rows)
    if measured:
        raw = {
            "reference": reference_results,
            "settings": [
                {"latency_ms": lat, "bandwidth_MBps": bw, **run["res"]}
                for (lat, bw), run in runs.items()
                if run["res"] is not None
            ],
        }
        (RESULTS / f"{stem}_measured.json").write_text(json.dumps(raw, indent=1))
    plot(
        RESULTS / f"{stem}.png",
        rows,
        args.latencies,
        args.bandwidths,
        measured,
        "Plaat Fig. 3 on wacoll's testbed: ASP-like kernel on 4 x 2 ranks"
        + ("" if measured else " - SIMULATED ONLY"),
    )
    say(
        f"\nwrote {RESULTS.relative_to(ROOT)}/{stem}.csv, .png, .txt"
        + (", _measured.json" if measured else "")
        + " in "
        f"{time.monotonic() - t0:.0f} s"
    )
    say.write(RESULTS / f"{stem}.txt")
    return 0


if __name__ == "__main__":
    sys.exit(main())
