"""``wacoll demo``: wacoll vs the MPI library on an emulated wide-area grid.

The demo builds the default testbed (4 clusters of 2 ranks, 10 ms one-way and 1 MB/s
between clusters: MagPIe's setting), runs Barrier, Bcast (1 B and 64 KiB), Allgather,
Reduce and Allreduce with the MPI library's native collectives and with wacoll, and
prints one table: median completion time (ms), speed-up over the library's own
collective, wide-area messages and bytes (from the prover), the simulator's
prediction and the physical lower bound (ms); then a one-line verdict per case and
one overall (:func:`case_verdict`, :func:`overall_verdict`). The native row names the
library and its version (``MPICH 5.0.2 (native)``); ``wacoll mpich-1.1`` is MPICH
1.1's algorithms of 1999 built as wacoll plans, MagPIe's baseline. It writes the
report (``demo.txt``), the rows (``demo.csv``), the raw times (JSON) and a picture
(``demo.png``: a panel per case, each with its own scale). Where the testbed cannot
run (not root, no ``/dev/net/tun``), it says why and shows the simulator's table.

wacoll runs in three configurations (:data:`IMPLS`), timed in this order:

- ``default``: what the README tells users to write, ``wacoll.Comm(MPI.COMM_WORLD)``
  with no options (arguments validated, MPI's own level, the selection policy's
  family: magpie on several clusters);
- ``magpie`` and ``mpich`` (shown as ``wacoll magpie`` and ``wacoll mpich-1.1``): the
  family forced, ``validate=False`` (arguments trusted, as MPI does) and level
  ``"associative"`` (the data are integers, exact in any order).

Every plan (and so every prover metric and prediction) is the one
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

from wacoll.plans import Call, select
from wacoll.plans.bounds import physical_bound
from wacoll.plans.select import NATIVE
from wacoll.plans.sim import LinkModel, simulate
from wacoll.tools.measure import run_on_testbed
from wacoll.topology import Topology

__all__ = [
    "CASES",
    "FAMILIES",
    "IMPLS",
    "LABELS",
    "default_topology",
    "simulated_rows",
    "run_demo",
    "merge_rows",
    "label",
    "case_verdict",
    "overall_verdict",
    "table_lines",
    "write_rows",
    "read_csv",
    "plot",
]

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
IMPLS = {
    "default": (None, None),
    "magpie": ("magpie", "associative"),
    "mpich": ("mpich", "associative"),
}
LEVEL = "associative"  # the demo's data are integers: any order gives the same sums
#: Untimed calls per case before the timed ones; the default communicator's are at
#: least its exploration (wacoll.tools.measure.exploration_calls: six calls of each
#: of its three candidates).
WARMUP = 10
#: The testbed run's name; wacoll.tools.measure's raw results are ``<out>/demo-measured.json``.
RUN_NAME = "demo"
MEASURED_FILE = f"{RUN_NAME}-measured.json"


def default_topology(clusters=4, per_cluster=2, latency=0.010, bandwidth=1e6):
    """MagPIe's wide-area setting on ``clusters`` clusters of ``per_cluster`` ranks."""
    return Topology.from_sizes(
        [per_cluster] * clusters, wan_latency=latency, wan_bandwidth=bandwidth
    )


def _call(op, nbytes, level):
    """The call ``wacoll.tools.measure`` makes for a case: float64 data (uint8 when the size
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
    return Call(
        op,
        count=nbytes // itemsize,
        itemsize=itemsize,
        root=0 if op in ("bcast", "reduce") else None,
        level=level,
    )


def simulated_rows(topology, cases=CASES):
    """Prover metrics, predicted time and bound for every case and configuration."""
    rows = []
    for label, op, nbytes in cases:
        for impl, (family, level) in IMPLS.items():
            plan = select(_call(op, nbytes, level), topology, family=family).build(
                topology
            )
            report = plan.prove()
            rows.append(
                {
                    "case": label,
                    "op": op,
                    "bytes": nbytes,
                    "impl": impl,
                    "algorithm": plan.algorithm,
                    "wide_area_messages": report.wide_area_messages,
                    "wide_area_bytes": report.wide_area_bytes,
                    "hops": report.max_wide_area_hops,
                    "predicted": simulate(plan, LinkModel(topology)).completion,
                    "bound": physical_bound(plan, topology),
                }
            )
    return rows


def _measure_spec(cases, reps, margin):
    # "default" is wacoll.tools.measure's name for wacoll.Comm(MPI.COMM_WORLD), no options;
    # the forced families get the case's level and validate=False
    # warm-up: the default communicator learns (wacoll.mpi.learning) in its first calls
    return {
        "reps": reps,
        "margin": margin,
        "progress": True,
        "warmup": WARMUP,
        "cases": [
            {
                "label": label,
                "op": op,
                "bytes": nbytes,
                "level": LEVEL,
                "impls": [NATIVE, *IMPLS],
            }
            for label, op, nbytes in cases
        ],
    }


def _check_line(pairs):
    """Median measured one-way latency and bandwidth of the testbed's links."""
    lat = [p["latency"] for p in pairs or [] if p["latency"]]
    bw = [p["bandwidth"] for p in pairs or [] if p["bandwidth"]]
    if not lat or not bw:
        return "not measured"
    return (
        f"one-way latency {statistics.median(lat) * 1e3:.2f} ms, bandwidth "
        f"{statistics.median(bw) / 1e6:.3f} MB/s (median over links)"
    )


def _say(text):
    print(text, flush=True)


def _ms(seconds, width=0):
    return ("-" if seconds is None else f"{seconds * 1e3:.2f}").rjust(width)


#: How each configuration is named in the table and the picture (the native row
#: gets the library's name and version when it was measured).
LABELS = {
    NATIVE: "MPI library",
    "default": "wacoll default",
    "magpie": "wacoll magpie",
    "mpich": "wacoll mpich-1.1",
}
KEY = (
    "wacoll default = wacoll.Comm(MPI.COMM_WORLD), no options, as the README writes it "
    "(arguments checked\n  across ranks, MPI's own reduction level); wacoll magpie = "
    "MagPIe's algorithms forced; wacoll mpich-1.1 =\n  MPICH 1.1's algorithms of 1999 "
    "(MagPIe's baseline) built as wacoll plans, not the MPICH library;\n  both forced "
    f"with validate=False and level {LEVEL!r}."
)
#: Within this ratio of each other, two times are "on par".
PAR = 1.05


def label(impl, library=None):
    """The name a configuration has in the demo's table and picture.

    Examples
    --------
    >>> label("native", "MPICH 5.0.2"), label("mpich")
    ('MPICH 5.0.2 (native)', 'wacoll mpich-1.1')
    """
    if impl == NATIVE:
        return f"{library} (native)" if library else "MPI library (native)"
    return LABELS.get(impl, impl)


def case_verdict(rows, library=None) -> str:
    """One line on one case: how wacoll as the README writes it did against the MPI
    library (measured), or against the physical bound (predicted only).

    Examples
    --------
    >>> rows = [{"impl": "native", "median": 0.020}, {"impl": "default", "median": 0.010,
    ...         "predicted": 0.0101, "bound": 0.010, "correct": True}]
    >>> case_verdict(rows, "MPICH 5.0.2")
    "wacoll default 2.00x faster than MPICH 5.0.2's own (10.00 ms vs 20.00 ms)"
    >>> case_verdict([{"impl": "default", "predicted": 0.012, "bound": 0.010}])
    'wacoll default predicted 12.00 ms; 1.20x the physical lower bound (10.00 ms)'
    """
    by = {r["impl"]: r for r in rows}
    mine, native = by.get("default", {}), by.get(NATIVE)
    lib = library or "the MPI library"
    if mine.get("correct") is False:
        return "wacoll default gave a WRONG RESULT"
    if native is None or not native.get("median") or not mine.get("median"):
        pred, bound = mine.get("predicted"), mine.get("bound")
        if pred is None:
            return "no figures"
        old = by.get("mpich", {}).get("predicted")
        versus = (
            f", {old / pred:.2f}x faster than wacoll mpich-1.1 ({_ms(old)} ms)"
            if old and pred
            else ""
        )
        tail = (
            f"; {pred / bound:.2f}x the physical lower bound ({_ms(bound)} ms)"
            if bound
            else ""
        )
        return f"wacoll default predicted {_ms(pred)} ms{versus}{tail}"
    ratio = native["median"] / mine["median"]
    times = f"({_ms(mine['median'])} ms vs {_ms(native['median'])} ms)"
    if ratio >= PAR:
        return f"wacoll default {ratio:.2f}x faster than {lib}'s own {times}"
    if ratio <= 1 / PAR:
        return f"wacoll default {1 / ratio:.2f}x slower than {lib}'s own {times}"
    return f"wacoll default on par with {lib}'s own {times}"


def overall_verdict(rows, library=None) -> str:
    """One line on every case together.

    Examples
    --------
    >>> rows = [{"case": "A", "impl": "native", "median": 0.02},
    ...         {"case": "A", "impl": "default", "median": 0.01, "predicted": 0.01},
    ...         {"case": "B", "impl": "native", "median": 0.01},
    ...         {"case": "B", "impl": "default", "median": 0.02, "predicted": 0.02}]
    >>> overall_verdict(rows, "MPICH 5.0.2")
    'overall: wacoll default faster than MPICH 5.0.2 in 1 of 2 cases, slower in 1; geometric mean speed-up 1.00x'
    """
    cases = list(dict.fromkeys(r["case"] for r in rows))
    ratios, wrong = [], 0
    for case in cases:
        by = {r["impl"]: r for r in rows if r["case"] == case}
        mine, native = by.get("default", {}), by.get(NATIVE, {})
        wrong += mine.get("correct") is False
        if native.get("median") and mine.get("median"):
            ratios.append(native["median"] / mine["median"])
    lib = library or "the MPI library"
    if not ratios:
        slack = [
            r["predicted"] / r["bound"]
            for r in rows
            if r["impl"] == "default" and r.get("predicted") and r.get("bound")
        ]
        if not slack:
            return "overall: no figures"
        return (
            f"overall (predicted, nothing measured): wacoll default within "
            f"{max(slack):.2f}x of the physical lower bound in every case"
        )
    faster = sum(r >= PAR for r in ratios)
    slower = sum(r <= 1 / PAR for r in ratios)
    par = len(ratios) - faster - slower
    gmean = statistics.geometric_mean(ratios)
    line = (
        f"overall: wacoll default faster than {lib} in {faster} of {len(ratios)} "
        f"cases"
        + (f", on par in {par}" if par else "")
        + (f", slower in {slower}" if slower else "")
        + f"; geometric mean speed-up {gmean:.2f}x"
    )
    return line + (f"; {wrong} WRONG RESULT(S)" if wrong else "")


def run_demo(
    out="wacoll-demo", *, reps=5, simulate_only=False, timeout=240.0, topology=None
) -> int:
    """Run the demo; print the table; write CSV, JSON, PNG and the text under ``out``."""
    t0 = time.monotonic()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    topology = topology or default_topology()
    _say(f"wacoll demo: {topology}")
    _say("building and proving plans, simulating them ...")
    sim = simulated_rows(topology)
    measured, reason = (
        (None, "--simulate-only was given") if simulate_only else (None, None)
    )
    report = []
    if not simulate_only:
        _say(
            f"measuring on an emulated testbed: {len(CASES)} cases x "
            f"{len(IMPLS) + 1} configurations x {reps} runs ..."
        )
        measured, reason = run_on_testbed(
            topology, _measure_spec(CASES, reps, 0.1), out, name=RUN_NAME, timeout=timeout
        )
        if measured is not None:
            report.append(
                "testbed self-check: " + _check_line(measured["_meta"].get("check"))
            )
    rows = merge_rows(sim, measured)
    library = measured["_meta"].get("library") if measured else None
    report.append(f"{_title(topology)}; {_load()}")
    if Path(sys.argv[0]).name == "wacoll" and sys.argv[1:2] == ["demo"]:
        report.append("command: wacoll " + " ".join(sys.argv[1:]))
    if measured is None:
        report.append(
            f"no measurements ({reason}): the table shows the simulator's predictions"
        )
    else:
        meta = measured["_meta"]
        report.append(
            f"measured: median of {meta['reps']} runs from a common start, "
            f"{library or 'the MPI library'}, transport {meta['transport']}"
        )
    report += [
        "",
        *table_lines(rows, measured is not None, library),
        "",
        overall_verdict(rows, library),
        "",
        KEY,
    ]
    if measured is not None:
        report.append(
            "speed-up = the MPI library's median / this row's (above 1: "
            "faster than the library); WAN msgs,\n  bytes, hops: the "
            "prover's wide-area traffic; predicted: the simulator, of the "
            "plan alone\n  (the default row also runs the cross-rank argument "
            "check beside the call); bound: the\n  physical lower bound. "
            "Lower times are better."
        )
    else:
        report.append(
            "WAN msgs, bytes, hops: the prover's wide-area traffic; "
            "predicted: the simulator; bound: the\n  physical lower bound. "
            "Lower times are better."
        )
    _say("\n" + "\n".join(report))
    (out / "demo.txt").write_text("\n".join(report) + "\n")
    write_rows(out, rows, measured, library, title=_title(topology))
    _say(
        f"\nwrote {out / 'demo.txt'}, {out / 'demo.csv'}, {out / 'demo.png'}"
        + (f", {out / MEASURED_FILE}" if measured else "")
        + f" in {time.monotonic() - t0:.0f} s"
    )
    return 0


def merge_rows(sim, measured):
    """The demo's rows: per case, the MPI library's own (when measured), then the
    simulator's rows ``sim`` (:func:`simulated_rows`) with the measured median,
    speed-up over the library and correctness of each (``measured``: the testbed's
    ``{case: {"times": ..., "correct": ...}}``, or None: the predictions alone)."""
    rows = []
    for label_, _op, _nbytes in CASES:
        native = None
        if measured is not None:
            times = measured[label_]["times"]
            native = _median(times.get(NATIVE))
            rows.append(
                {
                    "case": label_,
                    "impl": NATIVE,
                    "algorithm": "library's own",
                    "median": native,
                    "speedup": 1.0 if native else None,
                    "correct": True,
                }
            )
        for row in (r for r in sim if r["case"] == label_):
            row = dict(row)
            if measured is not None:
                row["median"] = _median(measured[label_]["times"].get(row["impl"]))
                row["correct"] = measured[label_]["correct"].get(row["impl"])
                row["speedup"] = (
                    (native / row["median"]) if native and row["median"] else None
                )
            rows.append(row)
    return rows


def _median(values):
    values = [v for v in values or [] if v is not None]
    return statistics.median(values) if values else None


def table_lines(rows, measured, library=None) -> list:
    """The demo's table: a block of rows per case, then that case's verdict."""
    names = {impl: label(impl, library) for impl in [NATIVE, *IMPLS]}
    wide = max(len(n) for n in names.values())
    head = f"{'case':16s} {'configuration':{wide}s} {'algorithm':18s}"
    if measured:
        head += f" {'median ms':>9s} {'speed-up':>8s}"
    head += (
        f" {'WAN msgs':>8s} {'WAN bytes':>9s} {'hops':>4s} {'predicted ms':>12s} "
        f"{'bound ms':>8s}"
    )
    lines = [head, "-" * len(head)]
    for case, _, _ in CASES:
        block = [r for r in rows if r["case"] == case]
        for k, r in enumerate(block):
            line = (
                f"{case if k == 0 else '':16s} {names[r['impl']]:{wide}s} "
                f"{r.get('algorithm', ''):18s}"
            )
            if measured:
                sp = r.get("speedup")
                line += f" {_ms(r.get('median'), 9)} {'-' if sp is None else f'{sp:.2f}x':>8s}"
            if r["impl"] == NATIVE:
                line += f" {'-':>8s} {'-':>9s} {'-':>4s} {'-':>12s} {'-':>8s}"
            else:
                line += (
                    f" {r['wide_area_messages']:8d} {r['wide_area_bytes']:9d} "
                    f"{r['hops']:4d} {_ms(r['predicted'], 12)} {_ms(r['bound'], 8)}"
                )
            if r.get("correct") is False:
                line += "  WRONG RESULT"
            lines.append(line)
        lines.append(f"{'':16s} verdict: {case_verdict(block, library)}")
    return lines


FIELDS = [
    "case",
    "impl",
    "label",
    "algorithm",
    "median",
    "speedup",
    "correct",
    "wide_area_messages",
    "wide_area_bytes",
    "hops",
    "predicted",
    "bound",
]


def _title(topology):
    sizes = sorted({len(c) for c in topology.clusters})
    shape = (
        f"{topology.nclusters} clusters x {sizes[0]} ranks"
        if len(sizes) == 1
        else f"{topology.size} ranks in {topology.nclusters} clusters"
    )
    return (
        f"wacoll demo: {shape}, {topology.wan.latency * 1e3:g} ms one-way and "
        f"{topology.wan.bandwidth / 1e6:g} MB/s between clusters"
    )


def _load():
    import os

    try:
        load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return f"{os.cpu_count()} cores"
    return f"load average {load} (1, 5, 15 min) on {os.cpu_count()} cores"


def write_rows(out, rows, measured, library=None, title=None):
    """Write ``rows`` (:func:`merge_rows`) to ``out/demo.csv``, which :func:`read_csv`
    reads back, and draw them to ``out/demo.png`` (:func:`plot`; ``measured``: the
    testbed's measurements, or None)."""
    with open(out / "demo.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, FIELDS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows({**r, "label": label(r["impl"], library)} for r in rows)
    plot(rows, out / "demo.png", measured is not None, library, title=title)


def read_csv(path) -> tuple:
    """``(rows, measured, library)`` from a ``demo.csv`` the demo wrote, to draw again.

    Examples
    --------
    >>> import tempfile
    >>> out = Path(tempfile.mkdtemp())
    >>> _ = run_demo(out, simulate_only=True)  # doctest: +ELLIPSIS
    wacoll demo: ...
    >>> rows, measured, library = read_csv(out / "demo.csv")
    >>> len(rows), measured, library
    (18, False, None)
    """
    rows = []
    with open(path, newline="") as fh:
        for raw in csv.DictReader(fh):
            row = {
                "case": raw["case"],
                "impl": raw["impl"],
                "algorithm": raw.get("algorithm", ""),
            }
            for key in ("median", "speedup", "predicted", "bound"):
                row[key] = float(raw[key]) if raw.get(key) else None
            for key in ("wide_area_messages", "wide_area_bytes", "hops"):
                row[key] = int(raw[key]) if raw.get(key) else None
            row["correct"] = {"True": True, "False": False}.get(raw.get("correct", ""))
            if row["impl"] == NATIVE:
                text = raw.get("label", "")
                row["library"] = (
                    text[: -len(" (native)")]
                    if text.endswith(" (native)") and text != "MPI library (native)"
                    else None
                )
            rows.append(row)
    measured = any(r["median"] is not None for r in rows)
    library = next((r.get("library") for r in rows if r.get("library")), None)
    return rows, measured, library


def plot(rows, path, measured, library=None, *, title=None):
    """The demo's picture: one panel per case, each with its own scale in ms.

    A bar per configuration (the measured median, or the simulator's prediction when
    nothing was measured), a black diamond for the simulator's prediction of each
    wacoll configuration, a red dashed line for the physical lower bound, and above the
    default bar its speed-up over the MPI library. Lower is better.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    impls = [NATIVE, *IMPLS] if measured else list(IMPLS)
    colors = {
        NATIVE: "0.55",
        "default": "tab:green",
        "magpie": "tab:blue",
        "mpich": "tab:orange",
    }
    fig, axes = plt.subplots(2, 3, figsize=(12, 6.8), layout="constrained")
    for ax, (case, _, _) in zip(axes.flat, CASES):
        block = {r["impl"]: r for r in rows if r["case"] == case}
        xs = range(len(impls))
        for x, impl in zip(xs, impls):
            r = block.get(impl, {})
            value = r.get("median") if measured else r.get("predicted")
            ax.bar(
                x,
                (value or 0) * 1e3,
                0.7,
                color=colors[impl],
                hatch=None if measured else "//",
                edgecolor="white",
            )
            if measured and impl != NATIVE and r.get("predicted") is not None:
                ax.plot(x, r["predicted"] * 1e3, "kD", markersize=6)
            if measured and impl == "default" and r.get("speedup"):
                ax.annotate(
                    f"{r['speedup']:.2f}x",
                    (x, (value or 0) * 1e3),
                    xytext=(0, 3),
                    textcoords="offset points",
                    ha="center",
                    fontsize=8,
                    fontweight="bold",
                )
        bound = next((r["bound"] for r in block.values() if r.get("bound")), None)
        if bound:
            ax.axhline(bound * 1e3, color="tab:red", ls="--", lw=1.2)
        ax.set_title(case, fontsize="medium")
        ax.set_xticks([])
        ax.set_ylabel("ms")
        ax.set_ylim(bottom=0, top=ax.get_ylim()[1] * 1.12)
        ax.grid(axis="y", alpha=0.3)
    what = "measured median" if measured else "predicted (nothing measured)"
    handles = [
        Patch(
            facecolor=colors[i],
            edgecolor="white",
            hatch=None if measured else "//",
            label=f"{label(i, library)}: {what}",
        )
        for i in impls
    ]
    if measured:
        handles.append(
            Line2D(
                [],
                [],
                color="k",
                marker="D",
                ls="none",
                label="the simulator's prediction",
            )
        )
    handles.append(Line2D([], [], color="tab:red", ls="--", label="physical lower bound"))
    fig.legend(
        handles=handles,
        loc="outside lower center",
        ncol=3,
        fontsize="small",
        frameon=False,
    )
    fig.suptitle(
        (
            title
            or "wacoll demo: 4 clusters x 2 ranks, 10 ms one-way and 1 MB/s "
            "between clusters"
        )
        + "\ncompletion time per collective, each panel "
        "its own scale: lower is better"
        + (
            "; in bold, wacoll default's speed-up over the MPI library"
            if measured
            else ""
        ),
        fontsize="medium",
    )
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(run_demo(tempfile.mkdtemp()))
