"""``wacoll demo``: wacoll vs the MPI library on an emulated wide-area grid.

The demo builds the default testbed (4 clusters of 2 ranks, 10 ms one-way and 1 MB/s
between clusters: MagPIe's setting), runs Barrier, Bcast (1 B and 64 KiB), Allgather,
Reduce and Allreduce with the MPI library's native collectives and with wacoll, and
prints one table: median completion time, speedup over the native collective,
wide-area messages and bytes (from the checker), the simulator's prediction and the
physical lower bound. It writes the raw numbers (CSV, JSON) and a plot. Where the
testbed cannot run (not root, no ``/dev/net/tun``), it says why and shows the
simulator's table instead.

wacoll runs in three configurations (:data:`IMPLS`), timed in this order:

- ``default``: what the README tells users to write, ``wacoll.Comm(MPI.COMM_WORLD)``
  with no options (arguments validated, MPI's own level, the selection policy's
  family: magpie on several clusters);
- ``magpie`` and ``mpich``: the family forced, ``validate=False`` (arguments trusted,
  as MPI does) and level ``"associative"`` (the data are integers, exact in any order).

Every plan (and so every checker metric and prediction) is the one
:func:`wacoll.plans.select` chooses for that configuration, as ``wacoll.Comm`` does.

Examples
--------
>>> rows = simulated_rows(default_topology(), CASES[:1])
>>> [(r["case"], r["impl"], r["wide_area_messages"]) for r in rows]
[('Barrier', 'default', 12), ('Barrier', 'magpie', 12), ('Barrier', 'mpich', 16)]
"""

from __future__ import annotations

import csv
import statistics
import sys
import tempfile
import time
from pathlib import Path

from wacoll.measure import run_on_testbed
from wacoll.plans import Call, select
from wacoll.plans.bounds import physical_bound
from wacoll.plans.sim import LinkModel, simulate
from wacoll.topology import Topology

__all__ = ["CASES", "FAMILIES", "IMPLS", "default_topology", "simulated_rows", "run_demo"]

#: (label, operation, bytes per rank) of the demo's cases.
CASES = [
    ("Barrier", "barrier", 0),
    ("Bcast 1 B", "bcast", 1),
    ("Bcast 64 KiB", "bcast", 65536),
    ("Allgather 1 KiB", "allgather", 1024),
    ("Reduce 1 KiB", "reduce", 1024),
    ("Allreduce 1 KiB", "allreduce", 1024),
]
FAMILIES = ("magpie", "mpich")
#: wacoll's configurations, the README's first: name -> (family forced, level).
IMPLS = {"default": (None, None), "magpie": ("magpie", "associative"),
         "mpich": ("mpich", "associative")}
LEVEL = "associative"  # the demo's data are integers: any order gives the same sums
#: The testbed run's name; wacoll.measure's raw results are ``<out>/demo-measured.json``.
RUN_NAME = "demo"
MEASURED_FILE = f"{RUN_NAME}-measured.json"


def default_topology(clusters=4, per_cluster=2, latency=0.010, bandwidth=1e6):
    """MagPIe's wide-area setting on ``clusters`` clusters of ``per_cluster`` ranks."""
    return Topology.from_sizes([per_cluster] * clusters, wan_latency=latency,
                               wan_bandwidth=bandwidth)


def _call(op, nbytes, level):
    """The call ``wacoll.measure`` makes for a case: float64 data (uint8 when the size
    is not a multiple of 8; an integer SUM is exact, so wacoll.Comm runs it at the
    commutative level), root 0."""
    if op == "barrier":
        return Call(op)
    itemsize = 8 if nbytes % 8 == 0 else 1
    if op in ("reduce", "allreduce"):
        # the default level is MPI's own: a float SUM commutes
        level = "commutative" if itemsize == 1 or level is None else level
    else:
        level = None
    return Call(op, count=nbytes // itemsize, itemsize=itemsize,
                root=0 if op in ("bcast", "reduce") else None, level=level)


def simulated_rows(topology, cases=CASES):
    """Checker metrics, predicted time and bound for every case and configuration."""
    rows = []
    for label, op, nbytes in cases:
        for impl, (family, level) in IMPLS.items():
            plan = select(_call(op, nbytes, level), topology, family=family).build(topology)
            report = plan.check()
            rows.append({
                "case": label, "op": op, "bytes": nbytes, "impl": impl,
                "algorithm": plan.algorithm,
                "wide_area_messages": report.wide_area_messages,
                "wide_area_bytes": report.wide_area_bytes,
                "hops": report.max_wide_area_hops,
                "predicted": simulate(plan, LinkModel(topology)).completion,
                "bound": physical_bound(plan, topology),
            })
    return rows


def _measure_spec(cases, reps, margin):
    # "default" is wacoll.measure's name for wacoll.Comm(MPI.COMM_WORLD), no options;
    # the forced families get the case's level and validate=False
    return {"reps": reps, "margin": margin, "progress": True, "cases": [
        {"label": label, "op": op, "bytes": nbytes, "level": LEVEL,
         "impls": ["native", *IMPLS]} for label, op, nbytes in cases]}


def _check_line(pairs):
    """Median measured one-way latency and bandwidth of the testbed's links."""
    lat = [p["latency"] for p in pairs or [] if p["latency"]]
    bw = [p["bandwidth"] for p in pairs or [] if p["bandwidth"]]
    if not lat or not bw:
        return "not measured"
    return (f"one-way latency {statistics.median(lat) * 1e3:.2f} ms, bandwidth "
            f"{statistics.median(bw) / 1e6:.3f} MB/s (median over links)")


def _say(text):
    print(text, flush=True)


def _fmt_ms(seconds):
    return "-" if seconds is None else f"{seconds * 1e3:8.2f}"


def run_demo(out="wacoll-demo", *, reps=5, simulate_only=False, timeout=240.0,
             topology=None) -> int:
    """Run the demo; print the table; write CSV, JSON and PNG under ``out``."""
    t0 = time.monotonic()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    topology = topology or default_topology()
    _say(f"wacoll demo: {topology}")
    _say("building and proving plans, simulating them ...")
    sim = simulated_rows(topology)
    measured, reason = (None, "--simulate-only was given") if simulate_only else (
        None, None)
    if not simulate_only:
        _say(f"measuring on an emulated testbed: {len(CASES)} cases x "
             f"{len(IMPLS) + 1} implementations x {reps} runs ...")
        measured, reason = run_on_testbed(topology, _measure_spec(CASES, reps, 0.1), out,
                                          name=RUN_NAME, timeout=timeout)
        if measured is not None:
            _say("testbed self-check: " + _check_line(measured["_meta"].get("check")))
    rows = _merge(sim, measured)
    if measured is None:
        _say(f"\nno measurements: {reason}; the table shows the simulator's "
             f"predictions.\n")
    else:
        meta = measured["_meta"]
        _say(f"\nmedian of {meta['reps']} runs, {topology.size} ranks, transport "
             f"{meta['transport']}")
    _say("default = wacoll.Comm(MPI.COMM_WORLD), no options (as the README: arguments "
         "validated, level MPI's own); magpie, mpich = family forced, validate=False, "
         f"level {LEVEL}\n")
    _print_table(rows, measured is not None)
    if measured is not None:
        _say("\nx native = the MPI library's median / this row's median: how many times "
             "faster than the\nlibrary's own collective (above 1: faster, below 1: "
             "slower); WAN msgs, bytes, hops:\nthe checker's wide-area traffic; predicted: "
             "the simulator (of the plan\nalone: the default row also runs "
             "the cross-rank argument check beside the call);\nbound: the physical "
             "lower bound")
    _write(out, rows, measured)
    _say(f"\nwrote {out / 'demo.csv'}, {out / 'demo.png'}"
         + (f", {out / MEASURED_FILE}" if measured else "")
         + f" in {time.monotonic() - t0:.0f} s")
    return 0


def _merge(sim, measured):
    rows = []
    for label, op, nbytes in CASES:
        native = None
        if measured is not None:
            times = measured[label]["times"]
            native = _median(times.get("native"))
            rows.append({"case": label, "impl": "native", "median": native,
                         "speedup": 1.0 if native else None})
        for row in (r for r in sim if r["case"] == label):
            row = dict(row)
            if measured is not None:
                row["median"] = _median(measured[label]["times"].get(row["impl"]))
                row["correct"] = measured[label]["correct"].get(row["impl"])
                row["speedup"] = (native / row["median"]) if native and row["median"] \
                    else None
            rows.append(row)
    return rows


def _median(values):
    values = [v for v in values or [] if v is not None]
    return statistics.median(values) if values else None


def _print_table(rows, measured):
    head = f"{'case':16s} {'impl':7s} {'algorithm':18s}"
    if measured:
        head += f" {'median ms':>9s} {'x native':>8s}"
    head += f" {'WAN msgs':>8s} {'WAN bytes':>9s} {'hops':>4s} {'predicted':>9s} " \
            f"{'bound':>8s}"
    _say(head)
    _say("-" * len(head))
    for r in rows:
        line = f"{r['case']:16s} {r['impl']:7s} {r.get('algorithm', 'MPI library'):18s}"
        if measured:
            sp = r.get("speedup")
            line += f" {_fmt_ms(r.get('median')):>9s} {'-' if sp is None else f'{sp:.2f}':>8s}"
        if r["impl"] == "native":
            line += f" {'-':>8s} {'-':>9s} {'-':>4s} {'-':>9s} {'-':>8s}"
        else:
            line += (f" {r['wide_area_messages']:8d} {r['wide_area_bytes']:9d} "
                     f"{r['hops']:4d} {_fmt_ms(r['predicted']):>9s} "
                     f"{_fmt_ms(r['bound']):>8s}")
        _say(line)


def _write(out, rows, measured):
    fields = ["case", "impl", "algorithm", "median", "speedup", "correct",
              "wide_area_messages", "wide_area_bytes", "hops", "predicted", "bound"]
    with open(out / "demo.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    _plot(out / "demo.png", rows, measured is not None)


def _plot(path, rows, measured):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    impls = ["native", *IMPLS] if measured else list(IMPLS)
    fig, ax = plt.subplots(figsize=(10, 4.5))
    width = 0.8 / len(impls)
    for k, impl in enumerate(impls):
        xs, ys, preds = [], [], []
        for i, (label, _, _) in enumerate(CASES):
            row = next((r for r in rows if r["case"] == label and r["impl"] == impl), None)
            if row is None:
                continue
            value = row.get("median") if measured else row.get("predicted")
            xs.append(i + (k - (len(impls) - 1) / 2) * width)
            ys.append((value or 0) * 1e3)
            preds.append((row.get("predicted") or 0) * 1e3)
        ax.bar(xs, ys, width, label=impl + (" (measured)" if measured else " (predicted)"))
        if measured and impl != "native":
            ax.plot(xs, preds, "k_", markersize=12)
    bounds = [next(r["bound"] for r in rows if r["case"] == label and r["impl"] != "native")
              * 1e3 for label, _, _ in CASES]
    ax.plot(range(len(CASES)), bounds, "r.", label="physical bound")
    ax.set_xticks(range(len(CASES)), [c[0] for c in CASES], rotation=15)
    ax.set_ylabel("completion time (ms)")
    ax.set_title("wacoll demo: 4 clusters x 2 ranks, 10 ms / 1 MB/s wide-area links"
                 + ("  (black: simulator)" if measured else ""))
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(run_demo(tempfile.mkdtemp()))
