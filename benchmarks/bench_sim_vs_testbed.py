"""The plan simulator against the emulated testbed: predicted vs measured completion.

Run from the repository root, as root (the testbed needs network namespaces)::

    .venv/bin/python benchmarks/bench_sim_vs_testbed.py            # full run
    .venv/bin/python benchmarks/bench_sim_vs_testbed.py --quick    # smoke run

On MagPIe's setting (4 clusters x 2 ranks, 10 ms one-way and 1 MB/s between clusters:
``wacoll.tools.demo.default_topology()``) it times, side by side in one run (the protocol of
``wacoll.tools.measure``: implementations interleaved, a common start instant, completion =
the last rank done; wacoll with ``validate=False``; plus a *null* implementation that
does nothing, timing the protocol's own start skew), the magpie and mpich families on the demo's cases
(``wacoll.tools.demo.CASES``) and on bcast / allreduce / allgather of 1 B .. 256 KiB per
rank, and compares each median completion time with the simulator's prediction
(``wacoll.plans.sim`` under ``LinkModel``) for the very plan ``wacoll.Comm``
runs (:func:`wacoll.plans.select`: same family, level, segments and threshold).

Three models are compared (the calibration runs on the same testbed, just before
the measurement):

* **uncal**: ``LinkModel(topology)`` with the configured links only;
* **+ovh**: ``LinkModel(topology, overhead=o)``, ``o`` the per-message software cost
  from a 1 B ping-pong inside a cluster with the executor's calls (Irecv, Isend,
  Wait), *loaded*: all 8 ranks ping-pong in pairs at once, as all ranks are busy in a
  collective on this 2-core machine (the one-pair figures are printed too);
* **full**: the same ``o``, the wide-area latency from a loaded 1 B ping-pong across
  clusters (its one-way time minus ``o``), and the *start skew* of the common-start
  protocol (how late the last rank runs after the start instant with no operation,
  a cost of the measurement itself) added to every completion.

Data are float64 vectors holding small integers (``uint8`` for sizes that are not a
multiple of 8 bytes), reductions at level ``"associative"`` (``uint8`` sums are exact,
so wacoll runs them at ``"commutative"``, and so does the simulation here).

Writes ``benchmarks/results/sim_vs_testbed[_quick].csv|png|txt`` and the raw
``..._measured.json``. The error of a case is ``(predicted - measured) / measured``;
the goal is a median absolute error within 15 %. Where the testbed cannot run it says
why and prints the simulator's predictions only.
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
    goal_band,
    human,
    load_text,
    median,
    pyplot,
    report_check,
    save_figure,
    started_testbed,
    write_csv,
)

sys.path.append(str(Path(__file__).resolve().parent / "apps"))  # the workers' MPI side
from _rankside import import_wacoll, now, timed  # noqa: E402

TESTBED_NAME = "simtb"
FAMILIES = ("magpie", "mpich")
LEVEL = "associative"
GOAL = 0.15
KiB = 1 << 10
FULL_SIZES = (1, 1 * KiB, 16 * KiB, 256 * KiB)
QUICK_SIZES = (1, 16 * KiB)
PINGPONG_SIZES = (1, 1 * KiB, 16 * KiB, 64 * KiB)


# ------------------------------------------------------------------ cases and plans
def cases(sizes, quick):
    """(label, op, bytes per rank): the demo's cases, then the size sweep."""
    from wacoll.tools.demo import CASES

    out, seen = [], set()
    demo = CASES if not quick else [c for c in CASES if c[1] in ("barrier", "bcast")][:2]
    for label, op, nbytes in demo:
        out.append((label, op, nbytes))
        seen.add((op, nbytes))
    for op in ("bcast", "allreduce", "allgather"):
        for nbytes in sizes:
            if (op, nbytes) not in seen:
                out.append((f"{op.capitalize()} {human(nbytes)}", op, nbytes))
                seen.add((op, nbytes))
    return out


def comm_plan(topology, op, nbytes, family, options=None):
    """The plan ``wacoll.Comm(..., family=family)`` runs for this case in the worker.

    The selection policy's choice (:func:`wacoll.plans.select`, Comm's default policy)
    for the call the worker makes: float64 data, or uint8 when the size is not a
    multiple of 8; reductions at ``LEVEL`` (an integer SUM is exact, so Comm runs a
    uint8 one at "commutative"); root 0. ``options`` are the family's options.
    """
    from wacoll.plans import Call, select

    if op == "barrier":
        call = Call(op)
    else:
        itemsize = 8 if nbytes % 8 == 0 else 1
        level = None
        if op in ("reduce", "allreduce"):
            level = "commutative" if itemsize == 1 else LEVEL
        call = Call(
            op,
            count=nbytes // itemsize,
            itemsize=itemsize,
            level=level,
            root=0 if op in ("bcast", "reduce") else None,
        )
    return select(call, topology, family=family, options=options).build(topology)


def models(topology, calibration):
    """name -> (LinkModel, seconds added to its completion)."""
    from wacoll import Topology
    from wacoll.plans.sim import LinkModel

    out = {"uncalibrated": (LinkModel(topology), 0.0)}
    if calibration:
        o = calibration["overhead"]
        out["overhead"] = (LinkModel(topology, overhead=o), 0.0)
        topo2 = Topology.from_clusters(
            topology.clusters,
            intra_latency=topology.intra.latency,
            intra_bandwidth=topology.intra.bandwidth,
            wan_latency=calibration["wan_latency"],
            wan_bandwidth=topology.wan.bandwidth,
        )
        out["full"] = (LinkModel(topo2, overhead=o), 0.0)  # + the case's start skew
    return out


def predictions(topology, case_list, calibration):
    from wacoll.plans.sim import simulate

    mods = models(topology, calibration)
    out = {}
    for label, op, nbytes in case_list:
        for family in FAMILIES:
            plan = comm_plan(topology, op, nbytes, family)
            report = plan.prove()
            out[label, family] = {
                "algorithm": plan.algorithm,
                "blocks": plan.nblocks,
                "messages": len(plan.messages()),
                "wide_area_messages": report.wide_area_messages,
                "wide_area_bytes": report.wide_area_bytes,
                **{
                    name: simulate(plan, m).completion + extra
                    for name, (m, extra) in mods.items()
                },
            }
    return out


# ------------------------------------------------------------------ ping-pong (worker)
#: Ping-pong pairs: one pair while the other ranks wait in a Barrier ("alone"), or
#: every rank in a pair at once ("loaded": all 8 ranks busy, as in a collective).
PAIRS = {
    ("intra", "alone"): [(0, 1)],
    ("wan", "alone"): [(0, 2)],
    ("intra", "loaded"): [(0, 1), (2, 3), (4, 5), (6, 7)],
    ("wan", "loaded"): [(0, 2), (1, 3), (4, 6), (5, 7)],
}


def _pingpong(w, pairs, nbytes, reps):
    """Median and min one-way time (half round trip) of rank 0's pair, or None."""
    import numpy as np

    rank = w.Get_rank()
    partner = {a: b for a, b in pairs} | {b: a for a, b in pairs}
    times = []
    if rank in partner:
        other = partner[rank]
        first = rank < other
        buf, got = np.ones(nbytes, np.uint8), np.empty(nbytes, np.uint8)
        for i in range(reps + 2):
            t0 = now()
            r = w.Irecv(got, source=other, tag=7)
            if first:
                w.Isend(buf, dest=other, tag=7).Wait()
                r.Wait()
            else:
                r.Wait()
                w.Isend(buf, dest=other, tag=7).Wait()
            if i >= 2:  # the first round trips set up connections
                times.append((now() - t0) / 2)
    w.Barrier()
    return (statistics.median(times), min(times)) if times else None


def pingpong_worker(out_path, reps):
    """Under mpiexec: ping-pongs with the executor's calls (Irecv, Isend, Wait) inside a
    cluster (rank 0 <-> 1) and across the wide area (0 <-> 2), alone and loaded. Rank 0
    writes them to ``out_path``."""
    from mpi4py import MPI

    w = MPI.COMM_WORLD
    results = {}
    for (what, mode), pairs in PAIRS.items():
        for nbytes in PINGPONG_SIZES:
            got = _pingpong(w, pairs, nbytes, reps)
            if w.Get_rank() == 0:
                results[f"{what} {mode} {nbytes}"] = {
                    "what": what,
                    "mode": mode,
                    "bytes": nbytes,
                    "half_rtt": got[0],
                    "min": got[1],
                }
    if w.Get_rank() == 0:
        Path(out_path).write_text(json.dumps(results, indent=1))


def calibrate(pingpong, topology):
    """Per-message overhead and wide-area latency from the 1 B ping-pongs of the loaded
    mode (every rank busy, as in a collective)."""
    intra = pingpong["intra loaded 1"]["half_rtt"]
    wan = pingpong["wan loaded 1"]["half_rtt"]
    modelled_intra = topology.intra.latency + 1 / topology.intra.bandwidth
    overhead = max(0.0, intra - modelled_intra)
    wan_latency = max(0.0, wan - overhead - 1 / topology.wan.bandwidth)
    return {
        "overhead": overhead,
        "wan_latency": wan_latency,
        "intra_half_rtt": intra,
        "wan_half_rtt": wan,
    }


# ------------------------------------------------------------------ measurement (worker)
def _case_buffers(op, nbytes, size, rank):
    """wacoll.tools.measure's data: integer values, float64 (or uint8 when nbytes % 8)."""
    import numpy as np

    dtype = np.float64 if nbytes % 8 == 0 else np.uint8
    n = nbytes // np.dtype(dtype).itemsize
    if op in ("bcast", "reduce", "allreduce"):
        return (np.arange(n) % 7 + rank).astype(dtype), np.zeros(n, dtype)
    if op == "allgather":
        return np.full(n, rank, dtype=dtype), np.zeros(n * size, dtype)
    return None, None


def _expected(op, nbytes, size, rank):
    """What this rank's receive buffer must hold afterwards (None: nothing to check)."""
    import numpy as np

    send, _ = _case_buffers(op, nbytes, size, rank)
    if op == "bcast":
        return _case_buffers(op, nbytes, size, 0)[0]
    if op == "allreduce" or (op == "reduce" and rank == 0):
        return sum(_case_buffers(op, nbytes, size, r)[0] for r in range(size)).astype(
            send.dtype
        )
    if op == "allgather":
        return np.concatenate(
            [_case_buffers(op, nbytes, size, r)[0] for r in range(size)]
        )
    return None


def _call(op, comm, send, recv, rank, level=LEVEL):
    """The timed call of ``op`` on ``comm`` (root 0, SUM at ``level``)."""
    from mpi4py import MPI

    if op == "barrier":
        return comm.Barrier
    if op == "bcast":
        buf = send if rank == 0 else recv
        return lambda: comm.Bcast(buf, root=0)
    if op == "reduce":
        return lambda: comm.Reduce(send, recv, op=MPI.SUM, root=0, level=level)
    if op == "allreduce":
        return lambda: comm.Allreduce(send, recv, op=MPI.SUM, level=level)
    return lambda: comm.Allgather(send, recv)


def time_case(w, comms, families, case, reps, margin, warmup=1, level=LEVEL):
    """Under mpiexec: time one case on every family's communicator.

    wacoll.tools.measure's protocol (interleaved implementations, common start
    instant, completion = last rank done), with one more implementation, "null" (no
    operation): the protocol's own start skew in the same conditions. Rank 0 prints
    the medians.

    Parameters
    ----------
    w : mpi4py.MPI.Comm
        The world.
    comms : dict
        ``{family: wacoll.Comm}``.
    families : sequence of str
        The families timed.
    case : dict
        ``{"op", "bytes", "label"}``.
    reps : int
        Timed repetitions of every implementation.
    margin : float
        Seconds from the agreement to the common start instant.
    warmup : int, optional
        Untimed rounds first (plans built, proved and compiled; connections made).
    level : str, optional
        The level of the reductions.

    Returns
    -------
    dict
        ``{"op", "bytes", "times": {impl: [s or None, ...]}, "correct": {family:
        bool}, "plan": {family: [algorithm, blocks]}}``.
    """
    import numpy as np
    from mpi4py import MPI

    rank, size = w.Get_rank(), w.Get_size()
    op, nbytes, label = case["op"], case["bytes"], case["label"]
    runs, checks = [("null", lambda: None)], {}
    for f in families:
        send, recv = _case_buffers(op, nbytes, size, rank)
        runs.append((f, _call(op, comms[f], send, recv, rank, level=level)))
        checks[f] = send if op == "bcast" and rank == 0 else recv
    for _ in range(warmup):
        for _, fn in runs:
            fn()
    want = _expected(op, nbytes, size, rank)
    correct = {
        f: bool(w.allreduce(want is None or np.array_equal(checks[f], want), op=MPI.LAND))
        for f in families
    }
    # (last_plan is this rank's part of the plan: its algorithm and blocks)
    plans = {
        f: [comms[f].last_plan.algorithm, comms[f].last_plan.nblocks] for f in families
    }
    times = {name: [] for name, _ in runs}
    for _ in range(reps):
        for name, fn in runs:
            times[name].append(timed(w, margin, fn))
    if rank == 0:
        print(
            f"  {label}: "
            + ", ".join(
                f"{n} {(median(ts) or 0) * 1e3:.2f} ms" for n, ts in times.items()
            ),
            flush=True,
        )
    return {"op": op, "bytes": nbytes, "times": times, "correct": correct, "plan": plans}


def measure_worker(spec_path, out_path):
    """Under mpiexec: every case timed by :func:`time_case` on every family. Rank 0
    writes ``{label: {"times": {impl: [s, ...]}, "correct": ..., "plan": {family:
    [algorithm, blocks]}}}``."""
    from mpi4py import MPI

    w = MPI.COMM_WORLD
    rank, size = w.Get_rank(), w.Get_size()
    wacoll = import_wacoll(w)
    spec = json.loads(Path(spec_path).read_text())
    reps, margin = int(spec["reps"]), float(spec["margin"])
    topology = wacoll.topology_from_comm(w)
    comms = {f: wacoll.Comm(w, topology, family=f, validate=False) for f in FAMILIES}
    results = {
        "_meta": {
            "size": size,
            "reps": reps,
            "clusters": [list(c) for c in topology.clusters],
        }
    }
    for case in spec["cases"]:
        results[case["label"]] = time_case(w, comms, FAMILIES, case, reps, margin)
    if rank == 0:
        Path(out_path).write_text(json.dumps(results, indent=1))


# ------------------------------------------------------------------ testbed
def run_testbed(topology, spec, out_dir, timeout, say, pp_reps):
    """Ping-pong, then the measurement; ``(pingpong, results, None)`` or ``(.., why)``."""
    from wacoll.emulate import TestbedError, unavailable_reason

    reason = unavailable_reason()
    if reason:
        return None, None, reason
    spec_path, result_path = out_dir / "cases.json", out_dir / "measured.json"
    pp_path = out_dir / "pingpong.json"
    spec_path.write_text(json.dumps(spec))
    try:
        with started_testbed(topology, name=TESTBED_NAME, time_limit=timeout + 900) as (
            tb,
            caught,
        ):
            say(
                f"testbed {tb.name}: backend {tb.backend}, MTU {tb.mtu}, transport "
                f"{tb.transport}"
            )
            report_check(say, tb.last_check, caught)
            run = tb.run(
                [
                    sys.executable,
                    str(Path(__file__).resolve()),
                    "--pingpong-worker",
                    str(pp_path),
                    "--pingpong-reps",
                    str(pp_reps),
                ],
                timeout=300,
                capture=False,
            )
            pingpong = json.loads(pp_path.read_text()) if run.ok else None
            if pingpong is None:
                say(f"ping-pong failed: {failure(run)}")
            run = tb.run(
                [
                    sys.executable,
                    str(Path(__file__).resolve()),
                    "--measure-worker",
                    str(spec_path),
                    str(result_path),
                ],
                timeout=timeout,
                capture=False,
            )
            if not run.ok:
                return pingpong, None, f"the measurement run failed ({failure(run)})"
            results = json.loads(result_path.read_text())
            results["_meta"]["transport"] = run.transport
            results["_meta"]["check"] = tb.last_check.as_dict()
            return pingpong, results, None
    except TestbedError as exc:
        return None, None, f"the testbed failed: {exc}"


# ------------------------------------------------------------------ tables
MODEL_NAMES = ("uncalibrated", "overhead", "full")
FIELDS = [
    "case",
    "op",
    "bytes",
    "family",
    "algorithm",
    "messages",
    "wide_area_messages",
    "wide_area_bytes",
    "measured",
    "measured_min",
    "runs",
    "start_skew",
    "correct",
    "same_plan",
    "err_min_uncalibrated",
] + [f"{k}_{n}" for n in MODEL_NAMES for k in ("pred", "err")]


def build_rows(case_list, pred, measured):
    rows = []
    for label, op, nbytes in case_list:
        for family in FAMILIES:
            p = pred[label, family]
            row = {
                "case": label,
                "op": op,
                "bytes": nbytes,
                "family": family,
                "algorithm": p["algorithm"],
                "messages": p["messages"],
                "wide_area_messages": p["wide_area_messages"],
                "wide_area_bytes": p["wide_area_bytes"],
            }
            for name in MODEL_NAMES:
                if name in p:
                    row[f"pred_{name}"] = p[name]
            if measured is not None:
                m = measured[label]
                valid = [t for t in m["times"].get(family) or [] if t is not None]
                med = median(valid)
                skew = median(m["times"].get("null"))
                ran = m.get("plan", {}).get(family)
                row.update(
                    {
                        "measured": med,
                        "runs": len(valid),
                        "start_skew": skew,
                        "measured_min": min(valid) if valid else None,
                        "correct": m["correct"].get(family),
                        "same_plan": ran[:2] == [p["algorithm"], p["blocks"]]
                        if ran
                        else None,
                    }
                )
                if row.get("pred_full") is not None and skew is not None:
                    row["pred_full"] += skew
                for name in MODEL_NAMES:
                    if row.get(f"pred_{name}") is not None and med:
                        row[f"err_{name}"] = (row[f"pred_{name}"] - med) / med
                if valid:  # against the fastest run: the least disturbed by load
                    row["err_min_uncalibrated"] = (p["uncalibrated"] - min(valid)) / min(
                        valid
                    )
            rows.append(row)
    return rows


def fmt_ms(s):
    return "-" if s is None else f"{s * 1e3:.2f}"


def fmt_err(e):
    return "-" if e is None else f"{e:+.0%}"


def print_table(rows, measured, calibrated, say):
    names = [n for n in MODEL_NAMES if calibrated or n == "uncalibrated"]
    short = {"uncalibrated": "uncal", "overhead": "+ovh", "full": "full"}
    head = f"{'case':17s} {'family':6s} {'algorithm':14s}"
    if measured:
        head += f" {'measured':>9s} {'skew':>5s}"
    for n in names:
        head += f" {'pred ' + short[n]:>13s}"
        if measured:
            head += f" {'err':>6s}"
    say(head + ("  ok" if measured else ""))
    say("-" * (len(head) + (4 if measured else 0)))
    for r in rows:
        line = f"{r['case']:17s} {r['family']:6s} {r['algorithm'][:14]:14s}"
        if measured:
            skew = r.get("start_skew")
            line += (
                f" {fmt_ms(r.get('measured')):>9s} "
                f"{'-' if skew is None else f'{skew * 1e3:.1f}':>5s}"
            )
        for n in names:
            line += f" {fmt_ms(r.get('pred_' + n)):>13s}"
            if measured:
                line += f" {fmt_err(r.get('err_' + n)):>6s}"
        if measured:
            line += "  " + ("yes" if r.get("correct") else "NO")
            if r.get("same_plan") is False:
                line += " (ran another plan!)"
        say(line)
    say(
        "(times in ms; skew = median time of the 'null' operation: how late the last rank "
        "starts; err = (predicted - measured) / measured; ok = results correct)"
    )


def summary(rows, calibrated, say):
    out = {}
    say("")
    for n in MODEL_NAMES:
        errs = [abs(r[f"err_{n}"]) for r in rows if r.get(f"err_{n}") is not None]
        if not errs:
            continue
        med = statistics.median(errs)
        out[n] = med
        within = sum(e <= GOAL for e in errs)
        say(
            f"model {n:17s}: median |error| {med:5.1%}, {within}/{len(errs)} cases within "
            f"{GOAL:.0%}, max {max(errs):.0%} -> goal (median within {GOAL:.0%}) "
            f"{'MET' if med <= GOAL else 'MISSED'}"
        )
    errs = [
        abs(r["err_min_uncalibrated"])
        for r in rows
        if r.get("err_min_uncalibrated") is not None
    ]
    if errs:
        say(
            f"(uncalibrated vs the FASTEST run of each case, the least disturbed by the "
            f"machine's load: median |error| {statistics.median(errs):.1%}, "
            f"{sum(e <= GOAL for e in errs)}/{len(errs)} within {GOAL:.0%})"
        )
    for n in MODEL_NAMES:
        by = {}
        for r in rows:
            if r.get(f"err_{n}") is not None:
                key = "small (<= 1 KiB)" if r["bytes"] <= KiB else "large (>= 16 KiB)"
                by.setdefault(key, []).append(r[f"err_{n}"])
        if by:
            say(
                f"  {n:17s} signed median error: "
                + "; ".join(
                    f"{k}: {statistics.median(v):+.0%} ({len(v)})"
                    for k, v in sorted(by.items())
                )
            )
    return out


def plot(path, rows, measured, title):
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.5))
    ax = axes[0]
    labels = [f"{r['case']}\n{r['family']}" for r in rows]
    x = range(len(rows))
    if measured:
        ax.scatter(
            x,
            [(r.get("measured") or float("nan")) * 1e3 for r in rows],
            marker="o",
            color="k",
            label="measured (median)",
            zorder=3,
        )
    markers = {"uncalibrated": "v", "overhead": "^", "full": "s"}
    for n, m in markers.items():
        ys = [r.get("pred_" + n) for r in rows]
        if any(y is not None for y in ys):
            ax.scatter(
                x,
                [(y or float("nan")) * 1e3 for y in ys],
                marker=m,
                label=f"predicted, {n}",
                alpha=0.7,
            )
    ax.set_yscale("log")
    ax.set_xticks(list(x), labels, rotation=90, fontsize=6)
    ax.set_ylabel("completion time (ms)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    ax.set_title("per case")
    ax = axes[1]
    if measured:
        for n, m in markers.items():
            pts = [
                (r["measured"] * 1e3, r["pred_" + n] * 1e3)
                for r in rows
                if r.get("measured") and r.get("pred_" + n)
            ]
            if pts:
                ax.scatter(*zip(*pts), marker=m, label=n, alpha=0.7)
        lo = (
            min(
                min(r.get("measured") or 1 for r in rows),
                min(r.get("pred_uncalibrated") or 1 for r in rows),
            )
            * 1e3
            * 0.8
        )
        hi = max(r.get("measured") or 0 for r in rows) * 1e3 * 1.25
        goal_band(ax, lo, hi, GOAL)
        ax.set_xlabel("measured (ms)")
        ax.set_ylabel("predicted (ms)")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
        ax.set_title("predicted vs measured")
    else:
        ax.text(0.5, 0.5, "SIMULATED ONLY: no testbed", ha="center", va="center")
        ax.set_axis_off()
    fig.suptitle(title)
    save_figure(fig, path, 110)


# ------------------------------------------------------------------ main
def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="smoke run: few cases, 3 runs")
    p.add_argument("--reps", type=int, help="runs per case (default 7, --quick 3)")
    p.add_argument("--simulate-only", action="store_true", help="no testbed")
    p.add_argument("--pingpong-worker", metavar="OUT", help=argparse.SUPPRESS)
    p.add_argument(
        "--measure-worker", nargs=2, metavar=("SPEC", "OUT"), help=argparse.SUPPRESS
    )
    p.add_argument("--pingpong-reps", type=int, default=30, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.reps = args.reps or (3 if args.quick else 7)
    if args.reps < 1:
        p.error("--reps must be >= 1")
    return args


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.pingpong_worker:
        pingpong_worker(args.pingpong_worker, args.pingpong_reps)
        return 0
    if args.measure_worker:
        measure_worker(*args.measure_worker)
        return 0
    from wacoll.tools.demo import default_topology

    say = Report()
    t0 = time.monotonic()
    topo = default_topology()
    sizes = QUICK_SIZES if args.quick else FULL_SIZES
    case_list = cases(sizes, args.quick)
    say("wacoll's simulator (LinkModel) against the emulated testbed")
    say(f"command: {command_line(__file__, argv)}")
    say(
        f"setting: 4 clusters x 2 ranks, 10 ms one-way / 1 MB/s between clusters (MagPIe's), "
        f"{topo.size} ranks on this {os.cpu_count()}-core machine; families "
        f"{', '.join(FAMILIES)}; wacoll with validate=False (arguments trusted, as MPI "
        f"does)"
    )
    say(f"at start: {load_text()}")
    pingpong = measured = calibration = None
    reason = "--simulate-only was given"
    if not args.simulate_only:
        spec = {
            "reps": args.reps,
            "margin": 0.1,
            "progress": True,
            "cases": [
                {
                    "label": label,
                    "op": op,
                    "bytes": nbytes,
                    "level": LEVEL,
                    "impls": list(FAMILIES),
                }
                for label, op, nbytes in case_list
            ],
        }
        rough = predictions(topo, case_list, None)
        budget = sum(v["uncalibrated"] for v in rough.values()) * (args.reps + 1)
        timeout = 240 + 5 * budget
        say(
            f"measuring: {len(case_list)} cases x {len(FAMILIES)} families x {args.reps} "
            f"runs, after a ping-pong (time limit {timeout:.0f} s)"
        )
        with tempfile.TemporaryDirectory(prefix="simtb-") as tmp:
            pingpong, measured, reason = run_testbed(
                topo, spec, Path(tmp), timeout, say, 10 if args.quick else 30
            )
    if pingpong:
        calibration = calibrate(pingpong, topo)
        say(
            "\nping-pong (median one-way = half round trip, Irecv/Isend/Wait as the "
            "executor does; 'alone': one pair, the other ranks in a Barrier; 'loaded': "
            "all 8 ranks in pairs at once):"
        )
        for _key, v in pingpong.items():
            if isinstance(v, dict):
                say(
                    f"  {v['what']:5s} {v['mode']:6s} {human(v['bytes']):>7s}: "
                    f"{v['half_rtt'] * 1e3:8.3f} ms (min {v['min'] * 1e3:.3f})"
                )
        c = calibration
        say(
            f"calibration (loaded, 1 B): per-message overhead o = {c['overhead'] * 1e6:.0f} us "
            f"(intra one-way {c['intra_half_rtt'] * 1e6:.0f} us vs "
            f"{(topo.intra.latency + 1 / topo.intra.bandwidth) * 1e6:.0f} us configured); "
            f"wide-area latency {c['wan_latency'] * 1e3:.3f} ms (configured "
            f"{topo.wan.latency * 1e3:.1f} ms)"
        )
        say(
            "models: 'uncal' = LinkModel(topology); '+ovh' = LinkModel(topology, "
            "overhead=o); 'full' = overhead o, the measured wide-area latency, plus the "
            "start skew (median completion of the 'null' operation, no operation timed "
            "interleaved with the case) added"
        )
    if measured is None:
        say(f"\nNO MEASUREMENTS: {reason}. Only the SIMULATOR's predictions are shown.")
    else:
        say(
            f"\nmedian of {measured['_meta']['reps']} runs per case; transport "
            f"{measured['_meta']['transport']}"
        )
    say(f"at end: {load_text()}\n")
    pred = predictions(topo, case_list, calibration)
    rows = build_rows(case_list, pred, measured)
    print_table(rows, measured is not None, calibration is not None, say)
    if measured is not None:
        summary(rows, calibration is not None, say)
    stem = (
        "sim_vs_testbed"
        + ("_quick" if args.quick else "")
        + ("" if measured is not None else "_simulated")
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    write_csv(RESULTS / f"{stem}.csv", FIELDS, rows)
    plot(
        RESULTS / f"{stem}.png",
        rows,
        measured is not None,
        "wacoll simulator vs testbed: 4 x 2 ranks, 10 ms / 1 MB/s"
        + ("" if measured else " - SIMULATED ONLY"),
    )
    if measured is not None:
        measured["_meta"]["pingpong"] = pingpong
        measured["_meta"]["calibration"] = calibration
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
