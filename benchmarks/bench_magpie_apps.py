"""MagPIe's Table 2 scaled down: the ASP and QR application kernels on wacoll's
emulated wide-area testbed, magpie family vs mpich family vs the MPI library's own.

Run from the repository root, as root (the testbed needs network namespaces)::

    .venv/bin/python benchmarks/bench_magpie_apps.py            # 7 runs per kernel
    .venv/bin/python benchmarks/bench_magpie_apps.py --quick    # smoke run

Kielmann et al. (MagPIe, PPoPP 1999), Section 4, run ASP (Floyd-Warshall, 4000 x 4000,
4000 broadcasts of 16 KByte) and QR (8192 x 8192 with pivoting: 8192 broadcasts of
32 KByte on average and 8192 allreduces of 28 bytes) on 40 processors in 8 clusters,
10 ms / 1 MByte/s between clusters, and list in Table 2 the run times, wide-area
messages, data and latencies of MagPIe and MPICH. Here (2 cores) the kernels are
``benchmarks/apps/asp.py`` and ``benchmarks/apps/qr.py`` at a small size on 8 ranks in
4 clusters of 2 (``--sizes``), with the same wide-area links. Both programs run every
implementation interleaved from a common start instant and check every run's result
(ASP against a serial Floyd-Warshall; QR by bit-identical digests across
implementations plus a numerical check of ``R``).

The wide-area figures come from wacoll's plan prover: each program logs the
collectives it calls (operation, root, length), and the script sums, per family,
calls x the plan's wide-area messages, bytes and hops (a collective's wide-area
latencies: its plan's longest chain of wide-area messages). The native MPI library's
messages are not known to the prover. The same sums at the paper's own scale (40
ranks, 8 clusters, its problem sizes) are compared with Table 2; the paper counted
messages on the wire (fragments), so its message counts compare as ratios only.

Writes ``benchmarks/results/magpie_apps{-quick}.csv|.png|.txt|.json``. Where the
testbed cannot run, it says why and reports predicted communication times (calls x
the simulator's plan times), labelled as such.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
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
    save_figure,
    write_csv,
)

sys.path.insert(0, str(ROOT))

from wacoll import Topology  # noqa: E402
from wacoll.plans import Call, select  # noqa: E402
from wacoll.plans.sim import LinkModel, simulate  # noqa: E402

APPS_DIR = ROOT / "benchmarks" / "apps"
TESTBED = "magpie"
FAMILIES = ("magpie", "mpich")
IMPLS = ("native",) + FAMILIES
#: The paper counted wide-area messages on the wire: its Table 2 has 795-936 bytes
#: per message, so fragments of about 1 KByte. The packet estimate uses this size.
FRAGMENT = 1024

#: MagPIe's Table 2 (40 processors, 8 clusters): MagPIe, MPICH.
PAPER = {
    "asp": {
        "time": (151, 194),
        "msgs": (462114, 1359784),
        "data_mb": (432.49, 1272.74),
        "lat_total": (4000, 16000),
        "lat_avg": (1, 4),
    },
    "qr": {
        "time": (1799, 2776),
        "msgs": (2394161, 5993113),
        "data_mb": (1903.24, 5357.52),
        "lat_total": (16384, 98304),
        "lat_avg": (1, 6),
    },
}
PAPER_SIZES = [5] * 8
PAPER_ASP_N = 4000
PAPER_QR_N = 8192


# ------------------------------------------------------------------ arguments
def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--sizes",
        default="2,2,2,2",
        help="ranks per cluster, comma-separated (default 2,2,2,2)",
    )
    p.add_argument("--apps", default="asp,qr", help="asp and/or qr (default both)")
    p.add_argument("--asp-n", type=int, help="ASP vertices (default 1024; --quick 64)")
    p.add_argument("--qr-m", type=int, help="QR rows (default 2048; --quick 512)")
    p.add_argument("--qr-n", type=int, help="QR columns (default 96; --quick 16)")
    p.add_argument("--qr-steps", type=int, help="QR steps (default: all columns)")
    p.add_argument(
        "--reps", type=int, help="timed runs per implementation (default 7; --quick 2)"
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
        default=1200.0,
        help="seconds per application run (default 1200)",
    )
    p.add_argument(
        "--simulate-only",
        action="store_true",
        help="do not start a testbed; report predicted communication times",
    )
    p.add_argument(
        "--from-json",
        metavar="PATH",
        help="no testbed: re-analyse measurements this script saved (.json)",
    )
    p.add_argument("--quick", action="store_true", help="smoke run: small, 2 runs")
    p.add_argument("--no-write", action="store_true", help="write no result files")
    args = p.parse_args(argv)
    args.command = command_line(__file__, argv)
    args.sizes = [int(s) for s in args.sizes.split(",") if s]
    args.apps = [a for a in args.apps.split(",") if a]
    if any(a not in ("asp", "qr") for a in args.apps):
        p.error("--apps takes asp and/or qr")
    q = args.quick
    args.asp_n = args.asp_n or (64 if q else 1024)
    args.qr_m = args.qr_m or (512 if q else 2048)
    args.qr_n = args.qr_n or (16 if q else 96)
    args.qr_steps = args.qr_steps or args.qr_n
    args.reps = args.reps or (2 if q else 7)
    return args


# ------------------------------------------------------------------ output helpers
def ratio(a, b):
    return a / b if a is not None and b else None


def paper_value(v):
    return str(v) if isinstance(v, int) else f"{v:.2f}"


def fmt(value, spec):
    return "-" if value is None else format(value, spec)


# ------------------------------------------------------------------ prover metrics
def selection(family, op, root, count, itemsize, topology):
    """What ``wacoll.Comm(family=family)`` runs for a logged call: the selection
    policy's choice (:func:`wacoll.plans.select`), segments and all."""
    level = "commutative" if op == "allreduce" else None  # int32 MAX: exact in any order
    return select(
        Call(op, count=count, itemsize=itemsize, root=root, level=level),
        topology,
        family=family,
    )


class Metrics:
    """Per-plan wide-area metrics and simulated time, cached by call signature."""

    def __init__(self, topology):
        self.topology = topology
        self.model = LinkModel(topology)
        self.cache = {}

    def plan(self, family, op, root, count, itemsize):
        key = (family, op, root, count, itemsize)
        if key not in self.cache:
            plan = selection(family, op, root, count, itemsize, self.topology).build(
                self.topology
            )
            rep = plan.prove()
            packets = sum(
                max(1, math.ceil(m.nbytes / FRAGMENT))
                for m in plan.messages()
                if m.wide_area
            )
            self.cache[key] = {
                "msgs": rep.wide_area_messages,
                "packets": packets,
                "bytes": rep.wide_area_bytes,
                "hops": rep.max_wide_area_hops,
                "algorithm": plan.algorithm,
                "time": simulate(plan, self.model).completion,
            }
        return self.cache[key]

    def totals(self, family, calls):
        """Sums over a call log ``{"op:root:count:itemsize": n}``, in all and per op."""
        total = {"calls": 0, "msgs": 0, "packets": 0, "bytes": 0, "hops": 0, "time": 0.0}
        per_op = {}
        for key, n in calls.items():
            op, root, count, itemsize = key.split(":")
            m = self.plan(
                family, op, None if root == "-" else int(root), int(count), int(itemsize)
            )
            for bucket in (
                total,
                per_op.setdefault(
                    op,
                    {
                        "calls": 0,
                        "msgs": 0,
                        "packets": 0,
                        "bytes": 0,
                        "hops": 0,
                        "time": 0.0,
                        "algorithms": set(),
                    },
                ),
            ):
                bucket["calls"] += n
                bucket["msgs"] += n * m["msgs"]
                bucket["packets"] += n * m["packets"]
                bucket["bytes"] += n * m["bytes"]
                bucket["hops"] += n * m["hops"]
                bucket["time"] += n * m["time"]
            per_op[op]["algorithms"].add(m["algorithm"])
        return total, per_op


def paper_calls(app):
    """The paper's runs as call logs at its scale (40 ranks, 8 clusters).

    ASP: 4000 rows of 4000 int32 (16 KByte), block rows, 100 per rank. QR: step ``k``
    broadcasts ``8192 - k`` doubles (32 KByte on average) from the pivot column's
    owner, taken as ``k % 40`` (cyclic columns; the real pivots are data-dependent),
    plus a 28-byte allreduce.
    """
    size = sum(PAPER_SIZES)
    calls = {}
    if app == "asp":
        per = PAPER_ASP_N // size
        for k in range(PAPER_ASP_N):
            key = f"bcast:{k // per}:{PAPER_ASP_N}:4"
            calls[key] = calls.get(key, 0) + 1
    else:
        for k in range(PAPER_QR_N):
            key = f"bcast:{k % size}:{PAPER_QR_N - k}:8"
            calls[key] = calls.get(key, 0) + 1
        calls["allreduce:-:7:4"] = PAPER_QR_N
    return calls


class ScaledMetrics(Metrics):
    """Like :class:`Metrics`, for many broadcast lengths: an unsegmented broadcast's
    messages and hops do not depend on its length, and its bytes are messages x
    length (checked on the first plan of each root), so one plan per root serves
    every length the selection policy does not cut into segments."""

    def plan(self, family, op, root, count, itemsize):
        if (
            op != "bcast"
            or dict(
                selection(family, op, root, count, itemsize, self.topology).options
            ).get("segments", 1)
            > 1
        ):
            return super().plan(family, op, root, count, itemsize)
        unit = super().plan(family, op, root, 1, 1)
        if unit["bytes"] != unit["msgs"]:
            raise RuntimeError(
                "a broadcast plan's wide-area bytes are not messages x length"
            )
        nbytes = count * itemsize
        return {
            "msgs": unit["msgs"],
            "bytes": unit["msgs"] * nbytes,
            "packets": unit["msgs"] * max(1, math.ceil(nbytes / FRAGMENT)),
            "hops": unit["hops"],
            "algorithm": unit["algorithm"],
            "time": 0.0,
        }


# ------------------------------------------------------------------ running
def app_argv(app, args, out):
    if app == "asp":
        extra = ["--n", str(args.asp_n)]
    else:
        extra = [
            "--m",
            str(args.qr_m),
            "--n",
            str(args.qr_n),
            "--steps",
            str(args.qr_steps),
        ]
    return [
        sys.executable,
        str(APPS_DIR / f"{app}.py"),
        *extra,
        "--reps",
        str(args.reps),
        "--impls",
        ",".join(IMPLS),
        "--out",
        str(out),
    ]


def check_line(report):
    if report is None:
        return "not measured"
    lat = [p.latency for p in report.pairs if p.latency]
    bw = [p.bandwidth for p in report.pairs if p.bandwidth]
    if not lat or not bw:
        return "incomplete"
    return (
        f"{len(report.pairs)} links: one-way latency median "
        f"{statistics.median(lat) * 1e3:.2f} ms (range {min(lat) * 1e3:.2f}-"
        f"{max(lat) * 1e3:.2f}), bandwidth median {statistics.median(bw) / 1e6:.3f} "
        f"MB/s (range {min(bw) / 1e6:.3f}-{max(bw) / 1e6:.3f})"
        + ("" if report.ok else "; OFF BY MORE THAN 10 %")
    )


def run_apps(topo, args, say):
    """{app: result dict} measured on a testbed, or (None, reason)."""
    from wacoll.emulate import Testbed, TestbedError, unavailable_reason

    reason = unavailable_reason()
    if reason:
        return None, reason
    results = {}
    try:
        with (
            tempfile.TemporaryDirectory(prefix="magpie-apps-") as tmp,
            Testbed(topo, name=TESTBED) as tb,
        ):
            say(
                f"testbed {TESTBED!r} up: transport {tb.transport}, backend "
                f"{tb.backend}; self-check: {check_line(tb.last_check)}"
            )
            for app in args.apps:
                out = Path(tmp) / f"{app}.json"
                argv = app_argv(app, args, out)
                say(f"\nrunning {app}: {' '.join(shlex.quote(a) for a in argv[1:])}")
                t = time.monotonic()
                run = tb.run(argv, timeout=args.timeout, capture=False, cwd=str(ROOT))
                if not run.ok or not out.exists():
                    say(f"{app} failed ({failure(run)})")
                    continue
                results[app] = json.loads(out.read_text())
                results[app]["meta"]["transport"] = run.transport
                results[app]["wall"] = time.monotonic() - t
                results[app]["meta"].update(
                    command=args.command,
                    load=load_text(),
                    check=check_line(tb.last_check),
                )
                say(f"{app} took {results[app]['wall']:.0f} s; {load_text()}")
    except TestbedError as exc:
        return None, f"the testbed failed: {exc}"
    return results, None


def adopt_saved(args, measured, say):
    """Take the problem sizes of saved measurements, and say where they came from."""
    args.apps = [a for a in args.apps if a in measured]
    if "asp" in measured:
        args.asp_n = measured["asp"]["n"]
    if "qr" in measured:
        qr = measured["qr"]
        args.qr_m, args.qr_n, args.qr_steps = qr["m"], qr["n"], qr["steps"]
    for app in args.apps:
        meta = measured[app]["meta"]
        say(
            f"{app}: re-analysed from {args.from_json}, measured by: "
            f"{meta.get('command', '(command not recorded)')}; transport "
            f"{meta.get('transport')}; {meta.get('load', '')}"
        )
        if meta.get("check"):
            say(f"  testbed self-check then: {meta['check']}")


# ------------------------------------------------------------------ tables
def app_label(app, args, res=None):
    if app == "asp":
        return (
            f"ASP n={args.asp_n}: {args.asp_n} Bcasts of {args.asp_n * 4} B "
            f"(paper: 4000 x 4000, 4000 Bcasts of 16 KByte)"
        )
    lo, hi = (args.qr_m - args.qr_steps + 2) * 8, (args.qr_m + 1) * 8
    return (
        f"QR {args.qr_m} x {args.qr_n}, {args.qr_steps} steps: Bcasts of {lo}-{hi} B "
        f"+ Allreduces of 28 B (paper: 8192 x 8192, 8192 Bcasts of 32 KByte avg + "
        f"8192 Allreduces of 28 B)"
    )


def calls_for(app, args, size):
    """The call log of a run at this scale (used when nothing was measured)."""
    sys.path.insert(0, str(APPS_DIR))
    if app == "asp":
        import asp

        return asp.calls(args.asp_n, size)
    calls = {}
    for k in range(args.qr_steps):  # roots are data-dependent: cyclic as a stand-in
        key = f"bcast:{k % size}:{args.qr_m - k + 1}:8"
        calls[key] = calls.get(key, 0) + 1
    calls["allreduce:-:7:4"] = args.qr_steps
    return calls


def app_rows(app, args, topo, res, measured):
    """Rows for the CSV and figures for the table of one application."""
    calls = res["calls"] if res else calls_for(app, args, topo.size)
    metrics = Metrics(topo)
    paper_metrics = ScaledMetrics(Topology.from_sizes(PAPER_SIZES))
    pcalls = paper_calls(app)
    rows = {}
    for impl in IMPLS:
        row = {
            "app": app,
            "impl": impl,
            "ranks": topo.size,
            "clusters": "x".join(map(str, [len(c) for c in topo.clusters])),
        }
        if res:
            times = res["times"][impl]
            valid = [t for t in times if t is not None]
            row.update(
                median=median(times),
                min=min(valid) if valid else None,
                runs=len(valid),
                correct=res["correct"][impl],
                times=" ".join(f"{t:.3f}" for t in valid),
            )
        if impl != "native":
            total, per_op = metrics.totals(impl, calls)
            row.update(
                calls=total["calls"],
                wan_msgs=total["msgs"],
                wan_packets=total["packets"],
                wan_bytes=total["bytes"],
                wan_latencies=total["hops"],
                wan_latencies_avg=total["hops"] / total["calls"],
                predicted_comm=total["time"],
            )
            for op, m in per_op.items():
                row[f"{op}_calls"] = m["calls"]
                row[f"{op}_algorithm"] = "/".join(sorted(m["algorithms"]))
                row[f"{op}_msgs_per_call"] = m["msgs"] / m["calls"]
                row[f"{op}_bytes_per_call"] = m["bytes"] / m["calls"]
                row[f"{op}_hops_per_call"] = m["hops"] / m["calls"]
            ptotal, _ = paper_metrics.totals(impl, pcalls)
            row.update(
                paper_scale_msgs=ptotal["msgs"],
                paper_scale_bytes=ptotal["bytes"],
                paper_scale_packets=ptotal["packets"],
                paper_scale_latencies=ptotal["hops"],
                paper_scale_latencies_avg=ptotal["hops"] / ptotal["calls"],
            )
            k = FAMILIES.index(impl)
            for key, values in PAPER[app].items():
                row[f"paper_{key}"] = values[k]
        if not measured and impl != "native":
            row["median"] = row["predicted_comm"]
        rows[impl] = row
    return rows


def print_app(app, args, rows, measured, say, topo):
    mg, mp, nat = rows["magpie"], rows["mpich"], rows["native"]
    pm, pp = PAPER[app]["time"]
    say(f"\nTable 2 (scaled): {app_label(app, args)}")
    say(
        f"{topo.size} ranks in {topo.nclusters} clusters of "
        f"{'/'.join(str(len(c)) for c in topo.clusters)} (paper: 40 in 8 of 5); "
        + (
            f"median of {mg.get('runs')} runs"
            if measured
            else "NOT MEASURED: predicted communication time (calls x simulated plan time)"
        )
    )
    head = (
        f"{'':32s} {'native':>10s} {'magpie':>10s} {'mpich':>10s} "
        f"{'mpich/magpie':>12s} | {'paper MagPIe':>12s} {'paper MPICH':>11s} "
        f"{'paper ratio':>11s}"
    )
    say(head)
    say("-" * len(head))

    def line(name, key, spec, paper_key=None, scale=1.0, native=True):
        def scaled(value):
            return value if value is None or scale == 1.0 else value * scale

        a, b = scaled(mg.get(key)), scaled(mp.get(key))
        n = scaled(nat.get(key)) if native else None
        text = (
            f"{name:32s} {fmt(n, spec):>10s} {fmt(a, spec):>10s} {fmt(b, spec):>10s}"
            f" {fmt(ratio(b, a), '.2f'):>12s}"
        )
        if paper_key:
            x, y = PAPER[app][paper_key]
            text += f" | {paper_value(x):>12s} {paper_value(y):>11s} {y / x:>11.2f}"
        say(text)

    line("run time (s)", "median", ".2f", "time")
    line("wide area msgs (prover)", "wan_msgs", "d", "msgs", native=False)
    line(
        f"  as {FRAGMENT} B packets (estimate)", "wan_packets", "d", "msgs", native=False
    )
    line("wide area data (MB)", "wan_bytes", ".3f", "data_mb", 1e-6, native=False)
    line("# wide area latencies (total)", "wan_latencies", "d", "lat_total", native=False)
    line(
        "# wide area latencies (avg)", "wan_latencies_avg", ".2f", "lat_avg", native=False
    )
    ops = sorted({k.split("_")[0] for k in mg if k.endswith("_msgs_per_call")})
    for op in ops:
        say(
            f"  per {op} ({mg[f'{op}_calls']} calls; magpie {mg[f'{op}_algorithm']}, "
            f"mpich {mp[f'{op}_algorithm']}):"
        )
        line("    WAN msgs / call", f"{op}_msgs_per_call", ".2f", native=False)
        line("    WAN bytes / call", f"{op}_bytes_per_call", ".0f", native=False)
        line("    WAN latencies / call", f"{op}_hops_per_call", ".2f", native=False)
    line("sum of simulated plan times (s)", "predicted_comm", ".2f", native=False)
    say(
        "  same prover sums at the paper's scale (40 ranks, 8 clusters, its problem size):"
    )
    line("    wide area msgs", "paper_scale_msgs", "d", "msgs", native=False)
    line(
        f"    as {FRAGMENT} B packets (estimate)",
        "paper_scale_packets",
        "d",
        "msgs",
        native=False,
    )
    line(
        "    wide area data (MB)",
        "paper_scale_bytes",
        ".1f",
        "data_mb",
        1e-6,
        native=False,
    )
    line(
        "    # wide area latencies (avg)",
        "paper_scale_latencies_avg",
        ".2f",
        "lat_avg",
        native=False,
    )
    if measured:
        say(
            "  results correct: "
            + ", ".join(f"{i} {'yes' if rows[i].get('correct') else 'NO'}" for i in IMPLS)
            + "; run times (s): "
            + "; ".join(f"{i} {rows[i].get('times', '-')}" for i in IMPLS)
        )
        x = ratio(mp.get("median"), mg.get("median"))
        verdict = "-" if x is None else ("yes" if x >= pp / pm else "no")
        say(
            f"  run-time ratio mpich/magpie {fmt(x, '.2f')} vs the paper's "
            f"{pp / pm:.2f}: at least the paper's? {verdict}; magpie vs native "
            f"{fmt(ratio(nat.get('median'), mg.get('median')), '.2f')}x"
        )


FIELDS = [
    "app",
    "impl",
    "ranks",
    "clusters",
    "median",
    "min",
    "runs",
    "correct",
    "calls",
    "wan_msgs",
    "wan_packets",
    "wan_bytes",
    "wan_latencies",
    "wan_latencies_avg",
    "predicted_comm",
    "bcast_calls",
    "bcast_algorithm",
    "bcast_msgs_per_call",
    "bcast_bytes_per_call",
    "bcast_hops_per_call",
    "allreduce_calls",
    "allreduce_algorithm",
    "allreduce_msgs_per_call",
    "allreduce_bytes_per_call",
    "allreduce_hops_per_call",
    "paper_scale_msgs",
    "paper_scale_packets",
    "paper_scale_bytes",
    "paper_scale_latencies",
    "paper_scale_latencies_avg",
    "paper_time",
    "paper_msgs",
    "paper_data_mb",
    "paper_lat_total",
    "paper_lat_avg",
    "times",
    "problem",
    "source",
    "load1",
    "command",
]


def plot(path, all_rows, measured, args):
    plt = pyplot()
    apps = list(all_rows)
    fig, (ax1, ax2) = plt.subplots(
        1, 2, figsize=(14, 4.8), gridspec_kw={"width_ratios": [1, 2.2]}
    )
    impls = IMPLS if measured else FAMILIES
    colours = {"native": "tab:grey", "magpie": "black", "mpich": "tab:orange"}
    width = 0.8 / len(impls)
    for k, impl in enumerate(impls):
        xs = [i + (k - (len(impls) - 1) / 2) * width for i in range(len(apps))]
        ax1.bar(
            xs,
            [all_rows[a][impl].get("median") or 0 for a in apps],
            width,
            color=colours[impl],
            label=impl,
        )
    ax1.set_xticks(range(len(apps)), [a.upper() for a in apps])
    ax1.set_ylabel("run time (s)" if measured else "predicted comm time (s)")
    ax1.set_title("run time" + ("" if measured else " (SIMULATED)"))
    ax1.legend()
    metrics = [
        ("time", "median", "time"),
        ("WAN msgs", "wan_msgs", "msgs"),
        ("WAN pkts\n(est.)", "wan_packets", "msgs"),
        ("WAN data", "wan_bytes", "data_mb"),
        ("WAN latencies", "wan_latencies", "lat_total"),
    ]
    labels, ours, papers, paper_scale = [], [], [], []
    for a in apps:
        mg, mp = all_rows[a]["magpie"], all_rows[a]["mpich"]
        for name, key, pkey in metrics:
            labels.append(f"{a.upper()}\n{name}")
            ours.append(ratio(mp.get(key), mg.get(key)) or 0)
            x, y = PAPER[a][pkey]
            papers.append(y / x)
            skey = {
                "wan_msgs": "paper_scale_msgs",
                "wan_bytes": "paper_scale_bytes",
                "wan_packets": "paper_scale_packets",
                "wan_latencies": "paper_scale_latencies",
            }.get(key)
            paper_scale.append(ratio(mp.get(skey), mg.get(skey)) or 0 if skey else 0)
    xs = range(len(labels))
    ax2.bar(
        [x - 0.27 for x in xs],
        ours,
        0.27,
        color="tab:blue",
        label=f"here ({'measured' if measured else 'simulated'} / prover)",
    )
    ax2.bar(
        list(xs),
        paper_scale,
        0.27,
        color="tab:green",
        label="prover at the paper's scale",
    )
    ax2.bar([x + 0.27 for x in xs], papers, 0.27, color="tab:red", label="paper Table 2")
    ax2.axhline(1, color="k", lw=0.8)
    ax2.set_xticks(list(xs), labels, fontsize=6)
    ax2.set_ylabel("mpich / magpie")
    ax2.set_title("MPICH over MagPIe")
    ax2.legend(fontsize=8)
    fig.suptitle(
        f"MagPIe Table 2 scaled: {args.sizes} ranks per cluster, "
        f"{args.latency * 1e3:g} ms / {args.bandwidth / 1e6:g} MB/s wide area"
    )
    save_figure(fig, path, 100)


# ------------------------------------------------------------------ main
def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    say = Report()
    t0 = time.monotonic()
    topo = Topology.from_sizes(
        args.sizes, wan_latency=args.latency, wan_bandwidth=args.bandwidth
    )
    say(
        "MagPIe Table 2 (Kielmann et al. 1999), scaled down, on wacoll's emulated wide area"
    )
    say(f"command: {args.command}")
    say(
        f"scale: {topo.size} ranks in clusters of {args.sizes} (2-core machine; the paper "
        f"used 40 processors in 8 clusters); wide area {args.latency * 1e3:g} ms one-way, "
        f"{args.bandwidth / 1e6:g} MB/s per directed cluster pair; wacoll validate=False "
        f"(arguments trusted, as MPI does)"
    )
    say(f"machine: {load_text()}")
    if args.simulate_only:
        measured, reason = None, "--simulate-only was given"
    elif args.from_json:
        measured, reason = json.loads(Path(args.from_json).read_text()), None
        adopt_saved(args, measured, say)
    else:
        measured, reason = run_apps(topo, args, say)
    stem = (
        "magpie_apps"
        + ("-" + "x".join(map(str, args.sizes)) if args.sizes != [2, 2, 2, 2] else "")
        + ("-quick" if args.quick else "")
    )
    if measured and not args.no_write and not args.from_json:  # raw numbers first
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / f"{stem}.json").write_text(json.dumps(measured, indent=1))
    if measured is None:
        say(
            f"\nNO MEASUREMENTS: {reason}. Run times below are predicted communication "
            "times (calls x simulated plan time), not measurements."
        )
    all_rows = {}
    for app in args.apps:
        res = (measured or {}).get(app)
        if measured is not None and res is None:
            say(f"\n{app}: no results (the run failed)")
            continue
        rows = app_rows(app, args, topo, res, res is not None)
        for row in rows.values():
            row.update(
                problem=app_label(app, args),
                source="measured" if res else "simulated",
                load1=load1(),
                command=args.command,
            )
        all_rows[app] = rows
        print_app(app, args, rows, res is not None, say, topo)
    say(
        "\nnotes: wide-area figures are wacoll's prover sums (calls x plan metrics); "
        "'latencies' is a collective's longest chain of wide-area messages. The paper "
        "counted messages on the wire (fragments), so compare its message counts as "
        "ratios. QR's roots at the paper's scale are taken as cyclic (its pivots are "
        "data-dependent). magpie's allreduce is its coordinator algorithm (int32 MAX "
        "is exact in any order, so wacoll asserts commutativity)."
    )
    say(f"{load_text()}; took {time.monotonic() - t0:.0f} s")
    if not args.no_write and all_rows:
        RESULTS.mkdir(parents=True, exist_ok=True)
        write_csv(
            RESULTS / f"{stem}.csv",
            FIELDS,
            [row for rows in all_rows.values() for row in rows.values()],
        )
        plot(RESULTS / f"{stem}.png", all_rows, measured is not None, args)
        say(
            f"wrote {RESULTS.relative_to(ROOT)}/{stem}.csv, .png"
            + (", .json" if measured else "")
            + ", .txt"
        )
        say.write(RESULTS / f"{stem}.txt")
    return 0


if __name__ == "__main__":
    sys.exit(main())
