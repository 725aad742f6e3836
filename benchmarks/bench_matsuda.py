"""Matsuda et al.'s Figure 6 on wacoll's emulated testbed: bcast and allreduce throughput.

Run from the repository root, as root (the testbed needs network namespaces)::

    .venv/bin/python benchmarks/bench_matsuda.py            # full run (a few minutes)
    .venv/bin/python benchmarks/bench_matsuda.py --quick    # smoke run

The setting is Matsuda's *long-and-fast* network, scaled to this machine: two clusters
of 4 ranks (8 ranks on 2 cores, instead of the paper's 2 x 8 nodes), each rank on its
own emulated link of 5 MB/s (``Testbed(per_node=True)`` with
``topology.node_bandwidth``), the clusters joined by a 20 MB/s wide-area link with a
10 ms one-way latency: the wide area is four times faster than one node, as the
paper's 10 Gbit/s link was faster than its 1 Gbit/s nodes.

For message sizes 64 KiB .. 2 MiB (``--sizes 64K,256K,1M,4M`` for more) it times, side by side in one run (interleaved,
from a common start instant; ``wacoll.tools.measure``):

* broadcast: gridmpi ``vandegeijn`` with n = 1 .. 4 wide-area senders (Matsuda's
  modified van de Geijn), ``farfirst`` and the unmodified ``flat-vandegeijn``;
* allreduce: gridmpi ``rabenseifner`` with n = 1 .. 4, ``two-tier`` and the unmodified
  ``flat-rabenseifner``, at level ``"associative"`` (the data are float64 holding
  small integers, so every summation order gives the same bits).

Throughput as the paper defines it: ``M * nprocs / T`` for bcast and
``M * nprocs^2 / T`` for allreduce (MB/s, M the message size in bytes, T the median
completion time). Next to every measured figure: the simulator's prediction
(``wacoll.plans.sim`` with ``LinkModel`` over the same topology and node rates).
wacoll runs with ``validate=False`` (arguments trusted, as MPI does).

Writes ``benchmarks/results/matsuda_fig6[_quick].csv|png|txt`` and the raw
``..._measured.json``. Where the testbed cannot run it says why and writes the
simulator's figures instead, labelled as such.
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
    human,
    load_text,
    median,
    parse_size,
    pyplot,
    report_check,
    save_figure,
    started_testbed,
    write_csv,
)

TESTBED_NAME = "matsuda"
KiB, MiB = 1 << 10, 1 << 20
FULL_SIZES = (64 * KiB, 256 * KiB, 1 * MiB, 2 * MiB)
QUICK_SIZES = (64 * KiB, 1 * MiB)
LEVEL = "associative"
ITEMSIZE = 8  # float64 with integer values: exact in every order
FIELDS = [
    "op",
    "bytes",
    "algorithm",
    "measured_s",
    "measured_min_s",
    "runs",
    "measured_MBps",
    "predicted_s",
    "predicted_MBps",
    "error",
    "error_min",
    "correct",
    "wide_area_messages",
    "wide_area_bytes",
    "setting",
]


def message_size(text):
    """A ``--sizes`` entry: a size (``64K``) that holds whole float64 elements."""
    value = parse_size(text)
    if value % ITEMSIZE:
        raise argparse.ArgumentTypeError(f"size must be a multiple of {ITEMSIZE} bytes")
    return value


# ------------------------------------------------------------------ the experiment
def topology(args):
    from wacoll import Topology

    size = 2 * args.per_cluster
    return Topology.from_sizes(
        [args.per_cluster] * 2,
        wan_latency=args.latency_ms * 1e-3,
        wan_bandwidth=args.wan_rate * 1e6,
        node_bandwidth=[args.node_rate * 1e6] * size,
    )


def algorithms(per_cluster):
    """(op, label, gridmpi options) of Figure 6's lines."""
    out = []
    # the paper's algorithms send the vector as one: wacoll's pipeline left out
    for n in range(1, per_cluster + 1):
        out.append(
            (
                "bcast",
                f"vandegeijn n={n}",
                {"algorithm": "vandegeijn", "n": n, "segments": 1},
            )
        )
    out.append(("bcast", "farfirst", {"algorithm": "farfirst"}))
    out.append(("bcast", "flat-vandegeijn", {"algorithm": "flat-vandegeijn"}))
    for n in range(1, per_cluster + 1):
        out.append(
            (
                "allreduce",
                f"rabenseifner n={n}",
                {"algorithm": "rabenseifner", "n": n, "segments": 1},
            )
        )
    out.append(("allreduce", "two-tier", {"algorithm": "two-tier"}))
    out.append(("allreduce", "flat-rabenseifner", {"algorithm": "flat-rabenseifner"}))
    return out


def case_label(op, nbytes):
    return f"{op} {human(nbytes)}"


def throughput(op, nbytes, nprocs, seconds):
    """Figure 6's y axis in MB/s: M*nprocs/T (bcast), M*nprocs^2/T (allreduce)."""
    if not seconds:
        return None
    factor = nprocs if op == "bcast" else nprocs * nprocs
    return nbytes * factor / seconds / 1e6


def simulate_all(topo, sizes, per_cluster):
    """Predicted completion (s) per (op, label, bytes), and each plan's wide-area bytes."""
    from wacoll.plans import build
    from wacoll.plans.sim import LinkModel, simulate

    model = LinkModel(topo)
    out = {}
    for nbytes in sizes:
        for op, label, opts in algorithms(per_cluster):
            kwargs = dict(opts, count=nbytes // ITEMSIZE, itemsize=ITEMSIZE)
            if op == "allreduce":
                kwargs["level"] = LEVEL
            plan = build(op, topo, "gridmpi", **kwargs)
            report = plan.prove()
            out[op, label, nbytes] = {
                "predicted": simulate(plan, model).completion,
                "wide_area_bytes": report.wide_area_bytes,
                "wide_area_messages": report.wide_area_messages,
            }
    return out


def measure_spec(sizes, per_cluster, reps):
    cases = []
    for op in ("bcast", "allreduce"):
        for nbytes in sizes:
            impls = [
                dict(opts, family="gridmpi", name=label)
                for o, label, opts in algorithms(per_cluster)
                if o == op
            ]
            cases.append(
                {
                    "label": case_label(op, nbytes),
                    "op": op,
                    "bytes": nbytes,
                    "level": LEVEL,
                    "impls": impls,
                }
            )
    return {"reps": reps, "margin": 0.2, "progress": True, "cases": cases}


def run_testbed(topo, spec, out_dir, timeout, mtu, say):
    """Measure ``spec`` on a per-node testbed; ``(results, None)`` or ``(None, why)``."""
    from wacoll.emulate import TestbedError, unavailable_reason

    reason = unavailable_reason()
    if reason:
        return None, reason
    spec_path = out_dir / "cases.json"
    result_path = out_dir / "measured.json"
    spec_path.write_text(json.dumps(spec))
    try:
        with started_testbed(
            topo, name=TESTBED_NAME, per_node=True, mtu=mtu, time_limit=timeout + 600
        ) as (tb, caught):
            say(
                f"testbed {tb.name}: backend {tb.backend}, MTU {tb.mtu}, per-node queues, "
                f"transport {tb.transport}"
            )
            report_check(say, tb.last_check, caught)
            run = tb.run(
                [
                    sys.executable,
                    "-m",
                    "wacoll.tools.measure",
                    str(spec_path),
                    str(result_path),
                ],
                timeout=timeout,
                capture=False,
                cwd=out_dir,
            )  # not a source checkout: see wacoll.tools.measure
            if not run.ok:
                return None, f"the measurement run failed ({failure(run)})"
            results = json.loads(result_path.read_text())
            results["_meta"]["transport"] = run.transport
            results["_meta"]["check_ok"] = tb.last_check.ok
            results["_meta"]["check"] = tb.last_check.as_dict()
            return results, None
    except TestbedError as exc:
        return None, f"the testbed failed: {exc}"


# ------------------------------------------------------------------ tables
def build_rows(sim, measured, sizes, nprocs, per_cluster):
    rows = []
    for op in ("bcast", "allreduce"):
        for nbytes in sizes:
            label = case_label(op, nbytes)
            for o, name, _opts in algorithms(per_cluster):
                if o != op:
                    continue
                s = sim[op, name, nbytes]
                row = {
                    "op": op,
                    "bytes": nbytes,
                    "algorithm": name,
                    "predicted_s": s["predicted"],
                    "predicted_MBps": throughput(op, nbytes, nprocs, s["predicted"]),
                    "wide_area_messages": s["wide_area_messages"],
                    "wide_area_bytes": s["wide_area_bytes"],
                }
                if measured is not None:
                    times = measured[label]["times"].get(name) or []
                    valid = [t for t in times if t is not None]
                    med = median(valid)
                    row.update(
                        {
                            "measured_s": med,
                            "measured_min_s": min(valid) if valid else None,
                            "runs": len(valid),
                            "measured_MBps": throughput(op, nbytes, nprocs, med),
                            "error": (s["predicted"] - med) / med if med else None,
                            "error_min": (s["predicted"] - min(valid)) / min(valid)
                            if valid
                            else None,
                            "correct": measured[label]["correct"].get(name),
                        }
                    )
                rows.append(row)
    return rows


def print_table(rows, measured, say):
    head = f"{'op':9s} {'size':>7s} {'algorithm':18s}"
    if measured:
        head += f" {'measured ms':>11s} {'MB/s':>7s}"
    head += f" {'simulated ms':>12s} {'MB/s':>7s}"
    if measured:
        head += f" {'sim err':>7s} {'ok':>3s}"
    say(head)
    say("-" * len(head))
    last = None
    for r in rows:
        if last is not None and (r["op"], r["bytes"]) != last:
            say("")
        last = (r["op"], r["bytes"])
        line = f"{r['op']:9s} {human(r['bytes']):>7s} {r['algorithm']:18s}"
        if measured:
            line += (
                f" {fmt_ms(r.get('measured_s')):>11s} {fmt(r.get('measured_MBps')):>7s}"
            )
        line += f" {fmt_ms(r['predicted_s']):>12s} {fmt(r['predicted_MBps']):>7s}"
        if measured:
            err = r.get("error")
            line += f" {'-' if err is None else f'{err:+.0%}':>7s}"
            line += f" {'yes' if r.get('correct') else 'NO':>3s}"
        say(line)


def fmt_ms(seconds):
    return "-" if seconds is None else f"{seconds * 1e3:.1f}"


def fmt(value):
    return "-" if value is None else f"{value:.2f}"


def time_of(rows, op, nbytes, algorithm, key):
    for r in rows:
        if (r["op"], r["bytes"], r["algorithm"]) == (op, nbytes, algorithm):
            return r.get(key)
    return None


def verdicts(rows, sizes, per_cluster, measured, say):
    """The paper's claims and the brief's goal, measured and simulated."""
    big = max(sizes)
    keys = [("measured", "measured_s"), ("fastest", "measured_min_s")] if measured else []
    keys.append(("simulated", "predicted_s"))
    results = {}
    say(f"\nAt the largest size ({human(big)}):")
    for what, key in keys:
        two = time_of(rows, "allreduce", big, "two-tier", key)
        rab = {
            n: time_of(rows, "allreduce", big, f"rabenseifner n={n}", key)
            for n in range(1, per_cluster + 1)
        }
        best_n = min((n for n in rab if rab[n]), key=lambda n: rab[n], default=None)
        ff = time_of(rows, "bcast", big, "farfirst", key)
        vdg = {
            n: time_of(rows, "bcast", big, f"vandegeijn n={n}", key)
            for n in range(1, per_cluster + 1)
        }
        best_b = min((n for n in vdg if vdg[n]), key=lambda n: vdg[n], default=None)
        if not (two and best_n and ff and best_b):
            say(f"  {what}: incomplete")
            continue
        ratio = two / rab[best_n]
        results[what] = ratio
        say(
            f"  {what:9s} allreduce: rabenseifner n={best_n} is {ratio:.2f}x faster than "
            f"two-tier (n=1: {two / rab[1]:.2f}x); goal >= 2x: "
            f"{'MET' if ratio >= 2 else 'not met'}"
        )
        say(
            f"  {what:9s} bcast:     vandegeijn n={best_b} is {ff / vdg[best_b]:.2f}x faster "
            f"than farfirst; n=1 vs farfirst {ff / vdg[1]:.2f}x (paper: about equal)"
        )
        mono = all(
            vdg[n + 1] <= vdg[n] * 1.05 for n in range(1, per_cluster) if vdg[n + 1]
        )
        say(
            f"  {what:9s} bcast improves with n (within 5 %): {'yes' if mono else 'no'}; "
            f"times " + ", ".join(f"n={n} {vdg[n] * 1e3:.0f} ms" for n in vdg)
        )
    if measured:
        say(
            "  ('fastest': from the fastest of the runs of each case, the least disturbed "
            "by the machine's load)"
        )
        for what, key in (("median", "error"), ("fastest run", "error_min")):
            errs = [abs(r[key]) for r in rows if r.get(key) is not None]
            if errs:
                say(
                    f"  simulator vs testbed ({what}): median |error| "
                    f"{statistics.median(errs):.0%} over {len(errs)} cases "
                    f"(max {max(errs):.0%})"
                )
    return results


# ------------------------------------------------------------------ plot
def plot(path, rows, sizes, per_cluster, measured, title):
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, op in zip(axes, ("bcast", "allreduce")):
        names = [name for o, name, _ in algorithms(per_cluster) if o == op]
        for k, name in enumerate(names):
            c = colors[k % len(colors)]
            pred = [time_of(rows, op, s, name, "predicted_MBps") for s in sizes]
            if measured:
                meas = [time_of(rows, op, s, name, "measured_MBps") for s in sizes]
                ax.plot(
                    sizes,
                    [m or float("nan") for m in meas],
                    "o-",
                    color=c,
                    label=f"{name}",
                )
                ax.plot(sizes, pred, "--", color=c, alpha=0.6)
            else:
                ax.plot(sizes, pred, "o--", color=c, label=f"{name} (simulated)")
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes, [human(s) for s in sizes])
        ax.set_xlabel("message size")
        unit = "M*nprocs/T" if op == "bcast" else "M*nprocs^2/T"
        ax.set_ylabel(f"throughput, {unit} (MB/s)")
        ax.set_title(
            op
            + (
                " (solid: measured, dashed: simulated)"
                if measured
                else " (SIMULATED ONLY)"
            )
        )
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    save_figure(fig, path, 110)


def _earlier_log(json_path):
    """The measuring part of the .txt beside an earlier run's _measured.json."""
    txt = Path(str(json_path).replace("_measured.json", ".txt"))
    if not txt.exists():
        return ["(no log found)"]
    lines = []
    for line in txt.read_text().splitlines():
        if line.startswith("op ") or line.startswith("RE-RENDERED"):
            break
        lines.append(line)
    return lines


# ------------------------------------------------------------------ main
def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--quick", action="store_true", help="smoke run: 64 KiB and 1 MiB, 3 runs"
    )
    p.add_argument(
        "--sizes",
        type=lambda s: [message_size(x) for x in s.split(",") if x],
        help="message sizes (default 64K,256K,1M,2M)",
    )
    p.add_argument("--reps", type=int, help="runs per case (default 7, --quick 3)")
    p.add_argument("--per-cluster", type=int, default=4, help="ranks per cluster (4)")
    p.add_argument("--node-rate", type=float, default=5.0, help="node link, MB/s (5)")
    p.add_argument("--wan-rate", type=float, default=20.0, help="wide area, MB/s (20)")
    p.add_argument(
        "--latency-ms", type=float, default=10.0, help="wide area one-way (10)"
    )
    p.add_argument(
        "--mtu",
        type=int,
        help="data MTU of the testbed (default: about 1 ms "
        "of a node link; larger ones cost the relay "
        "fewer packets)",
    )
    p.add_argument("--simulate-only", action="store_true", help="no testbed")
    p.add_argument(
        "--from-json",
        type=Path,
        metavar="MEASURED_JSON",
        help="re-render tables and plot from an earlier run's _measured.json "
        "(same --sizes / settings), measuring nothing",
    )
    args = p.parse_args(argv)
    args.sizes = sorted(set(args.sizes or (QUICK_SIZES if args.quick else FULL_SIZES)))
    args.reps = args.reps or (3 if args.quick else 7)
    if args.reps < 1 or args.per_cluster < 1:
        p.error("--reps and --per-cluster must be >= 1")
    return args


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    say = Report()
    t0 = time.monotonic()
    topo = topology(args)
    nprocs = topo.size
    setting = (
        f"2 clusters x {args.per_cluster} ranks, node links {args.node_rate:g} MB/s, "
        f"wide area {args.wan_rate:g} MB/s, {args.latency_ms:g} ms one-way"
    )
    say("Matsuda et al. Figure 6 (bcast / allreduce throughput) on wacoll's testbed")
    say(f"command: {command_line(__file__, argv)}")
    say(
        f"setting: {setting}; {nprocs} ranks on this {os.cpu_count()}-core machine "
        f"(the paper: 2 x 8 nodes, 1 Gbit/s nodes, 10 Gbit/s wide area, 10 ms)"
    )
    say(
        f"data: float64 vectors holding small integers, level {LEVEL!r} (exact in any "
        f"order); wacoll with validate=False (arguments trusted, as MPI does)"
    )
    say(f"at start: {load_text()}" + (" (now, re-rendering)" if args.from_json else ""))
    sim = simulate_all(topo, args.sizes, args.per_cluster)
    measured, reason = None, "--simulate-only was given"
    if args.from_json:
        measured = json.loads(args.from_json.read_text())
        say(f"\nRE-RENDERED from {args.from_json}, measured earlier by this log:")
        for line in measured["_meta"].get("log") or _earlier_log(args.from_json):
            say("| " + line)
    elif not args.simulate_only:
        spec = measure_spec(args.sizes, args.per_cluster, args.reps)
        budget = sum(v["predicted"] for v in sim.values()) * (args.reps + 1)
        timeout = 180 + 4 * budget
        say(
            f"measuring: {len(spec['cases'])} cases x 6 algorithms x {args.reps} runs "
            f"(simulator's estimate {budget:.0f} s of collectives; time limit "
            f"{timeout:.0f} s)"
        )
        with tempfile.TemporaryDirectory(prefix="matsuda-") as tmp:
            measured, reason = run_testbed(
                topo, spec, Path(tmp), timeout, args.mtu or "auto", say
            )
    if measured is None:
        say(
            f"\nNO MEASUREMENTS: {reason}. The tables and plot show the SIMULATOR's "
            f"predictions only (LinkModel over the same topology and node rates)."
        )
    else:
        meta = measured["_meta"]
        say(
            f"\nmedian of {meta['reps']} runs per case (completion: last rank done, from a "
            f"common start instant); transport {meta['transport']}"
        )
    if not args.from_json:
        say(f"at end: {load_text()}")
    rows = build_rows(sim, measured, args.sizes, nprocs, args.per_cluster)
    say("")
    print_table(rows, measured is not None, say)
    verdicts(rows, args.sizes, args.per_cluster, measured is not None, say)
    stem = "matsuda_fig6"
    for name, default in (
        ("node_rate", 5.0),
        ("wan_rate", 20.0),
        ("latency_ms", 10.0),
        ("per_cluster", 4),
        ("mtu", None),
    ):
        if getattr(args, name) != default:  # non-default settings get their own files
            stem += f"_{name.split('_')[0]}{getattr(args, name):g}"
    if tuple(args.sizes) != (QUICK_SIZES if args.quick else FULL_SIZES):
        stem += "_" + "-".join(
            human(x).replace(" KiB", "K").replace(" MiB", "M") for x in args.sizes
        )
    stem += ("_quick" if args.quick else "") + (
        "" if measured is not None else "_simulated"
    )
    if args.from_json and args.from_json.name.endswith("_measured.json"):
        stem = args.from_json.name[: -len("_measured.json")]  # re-render in place
    RESULTS.mkdir(parents=True, exist_ok=True)
    write_csv(RESULTS / f"{stem}.csv", FIELDS, (dict(r, setting=setting) for r in rows))
    title = f"Matsuda Fig. 6 on wacoll's testbed: {setting}" + (
        "" if measured else " - SIMULATED ONLY"
    )
    plot(
        RESULTS / f"{stem}.png",
        rows,
        args.sizes,
        args.per_cluster,
        measured is not None,
        title,
    )
    if measured is not None and not args.from_json:
        measured["_meta"]["log"] = list(say.lines)
        (RESULTS / f"{stem}_measured.json").write_text(json.dumps(measured, indent=1))
    say(
        f"\nwrote {RESULTS.relative_to(ROOT)}/{stem}.csv, .png, .txt"
        + (", _measured.json" if measured else "")
        + f" in {time.monotonic() - t0:.0f} s"
    )
    say.write(RESULTS / f"{stem}.txt")
    return 0


if __name__ == "__main__":
    sys.exit(main())
