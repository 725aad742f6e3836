"""Predictions from a calibrated topology against measured runs, on the testbed.

Run from the repository root, as root (the testbed needs network namespaces)::

    .venv/bin/python benchmarks/bench_calibrate.py           # full run
    .venv/bin/python benchmarks/bench_calibrate.py --quick   # smoke run

On an emulated grid of three clusters of uneven sizes (2, 1 and 3 ranks) whose
cluster pairs have different latencies and bandwidths, it runs ``wacoll calibrate``
(the configured topology is never shown to it), then times a few collectives with
the magpie and mpich families (``wacoll.tools.measure``'s protocol: a common start
instant, completion = the last rank done, median of the repetitions), and predicts
each with the simulator (``LinkModel``) twice: from the calibrated topology and
from the configured one. It prints, per case, the measured median, both predictions
and their ratios to the measurement, and writes
``benchmarks/results/calibrate[_quick].txt`` and ``.csv`` and the calibration's
latency heatmap ``calibrate_heatmap.png``. Where the testbed cannot run it says why.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from wacoll import Topology

from _harness import RESULTS, Report, failure, human, median, write_csv

PAIRS = {(0, 1): (0.004, 4e6), (0, 2): (0.008, 4e6), (1, 2): (0.016, 2e6)}
CASES = [
    ("barrier", 0),
    ("bcast", 8),
    ("bcast", 65536),
    ("allreduce", 8),
    ("allreduce", 16384),
    ("allgather", 4096),
]
FAMILIES = ("magpie", "mpich")
LEVEL = "associative"


def configured_topology() -> Topology:
    """The testbed's topology: clusters [0, 1], [2], [3, 4, 5]; per-pair links."""
    return Topology.from_clusters(
        [[0, 1], [2], [3, 4, 5]],
        wan_latency=0.01,
        wan_bandwidth=4e6,
        wan_pairs={**PAIRS, **{(b, a): v for (a, b), v in PAIRS.items()}},
    )


def predicted(topology, op, nbytes, family):
    """The simulator's completion time for the plan wacoll.Comm runs in the worker."""
    from wacoll.plans import Call, select
    from wacoll.plans.sim import LinkModel, simulate

    if op == "barrier":
        call = Call(op)
    else:
        itemsize = 8 if nbytes % 8 == 0 else 1
        level = LEVEL if op in ("reduce", "allreduce") else None
        call = Call(
            op,
            count=nbytes // itemsize,
            itemsize=itemsize,
            level=level,
            root=0 if op in ("bcast", "reduce") else None,
        )
    plan = select(call, topology, family=family).build(topology)
    return simulate(plan, LinkModel(topology)).completion


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args(argv)
    from wacoll.emulate import Testbed, TestbedError, unavailable_reason

    say = Report()
    suffix = "_quick" if args.quick else ""
    topo = configured_topology()
    reason = unavailable_reason()
    if reason:
        say(f"no testbed here ({reason}); nothing measured")
        return 0
    work = Path(tempfile.mkdtemp(prefix="bench-calibrate-"))
    given, found = work / "configured.toml", work / "calibrated.toml"
    topo.save(given)
    spec = {
        "reps": 3 if args.quick else 9,
        "cases": [
            {
                "label": f"{op} {human(n)}",
                "op": op,
                "bytes": n,
                "level": LEVEL,
                "impls": list(FAMILIES),
            }
            for op, n in CASES
        ],
    }
    (work / "cases.json").write_text(json.dumps(spec))
    try:
        with Testbed(topo, name="benchcal", netem="relay") as tb:
            run = tb.run(
                [
                    sys.executable,
                    "-m",
                    "wacoll.cli",
                    "calibrate",
                    "--out",
                    str(found),
                    "--compare",
                    str(given),
                    "--no-progress",
                    "--heatmap",
                    str(RESULTS / "calibrate_heatmap.png"),
                ],
                timeout=300,
                cwd=work,
            )
            if not run.ok:
                say(f"calibration failed ({failure(run)}):\n{run.stderr[-2000:]}")
                return 1
            say(
                "$ wacoll testbed run -- wacoll calibrate --out calibrated.toml "
                "--compare configured.toml"
            )
            say(run.stdout.rstrip())
            run = tb.run(
                [
                    sys.executable,
                    "-m",
                    "wacoll.tools.measure",
                    str(work / "cases.json"),
                    str(work / "measured.json"),
                ],
                timeout=900,
                cwd=work,
                env={"WACOLL_TOPOLOGY": str(found)},
            )
            if not run.ok:
                say(f"measurement failed ({failure(run)}):\n{run.stderr[-2000:]}")
                return 1
    except TestbedError as exc:
        say(f"the testbed failed: {exc}")
        return 1
    calibrated = Topology.from_file(found)
    measured = json.loads((work / "measured.json").read_text())
    rows = []
    say("")
    say(
        f"{'case':18s}{'family':8s}{'measured':>11s}{'calibrated':>12s}{'ratio':>7s}"
        f"{'configured':>12s}{'ratio':>7s}"
    )
    for op, n in CASES:
        label = f"{op} {human(n)}"
        for fam in FAMILIES:
            times = [t for t in measured[label]["times"][fam] if t is not None]
            m = median(times)
            pc, pg = predicted(calibrated, op, n, fam), predicted(topo, op, n, fam)
            rows.append(
                {
                    "case": label,
                    "family": fam,
                    "measured_s": m,
                    "calibrated_s": pc,
                    "ratio_calibrated": pc / m,
                    "configured_s": pg,
                    "ratio_configured": pg / m,
                }
            )
            say(
                f"{label:18s}{fam:8s}{m * 1e3:9.2f} ms{pc * 1e3:9.2f} ms{pc / m:7.2f}"
                f"{pg * 1e3:9.2f} ms{pg / m:7.2f}"
            )
    ratios = sorted(r["ratio_calibrated"] for r in rows)
    say(
        f"\nmedian ratio predicted/measured from the calibrated topology: "
        f"{ratios[len(ratios) // 2]:.2f} (range {ratios[0]:.2f}..{ratios[-1]:.2f})"
    )
    write_csv(RESULTS / f"calibrate{suffix}.csv", list(rows[0]), rows)
    say.write(RESULTS / f"calibrate{suffix}.txt")
    return 0


if __name__ == "__main__":
    sys.exit(main())
