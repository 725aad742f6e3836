"""Composed plans (family ``han``: the MPI library inside clusters, MagPIe's plan
between coordinators) against MagPIe's whole plans and the MPI library, side by side
on the emulated testbed.

Each grid runs Barrier, Bcast, Reduce and Allreduce at 8 B, 64 KiB and 1 MiB of
float64 (Barrier once), with the configurations, interleaved per repetition and
timed from a common start instant (:func:`wacoll.tools.measure.run_on_testbed`):

``native``
    ``MPI.COMM_WORLD``'s own collective.
``default``
    ``wacoll.Comm(MPI.COMM_WORLD)`` with no options, as the README says.
``magpie``, ``han``
    The family forced for the communicator; both check their arguments as the
    default does (``"validate": true``), so the comparison is of the plans alone.

Grids (``--grids``): ``2x4`` (2 clusters of 4 ranks, 10 ms, 1 MB/s, MagPIe's wide
area) and ``2x4-lan`` (the same ranks, 1 ms and 100 MB/s between clusters, where
the clusters' own phases weigh more). Needs root and ``/dev/net/tun`` (the demo's
testbed); 8 ranks share this machine's cores.

Run::

    .venv/bin/python benchmarks/bench_han.py                  # both grids, 5 reps
    .venv/bin/python benchmarks/bench_han.py --grids 2x4 --reps 3

Results: ``benchmarks/results/han.csv`` and ``han.txt`` (the report, with the
command and the machine's load).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _harness import RESULTS, Report, command_line, human, load_text, write_csv

#: name -> (cluster sizes, wide-area latency s, wide-area bandwidth B/s)
GRIDS = {"2x4": ([4, 4], 0.010, 1e6), "2x4-lan": ([4, 4], 0.001, 1e8)}
SIZES = (8, 65536, 1 << 20)
OPS = ("bcast", "reduce", "allreduce")
IMPLS = [
    "native",
    "default",
    {"family": "magpie", "validate": True, "name": "magpie"},
    {"family": "han", "validate": True, "name": "han"},
]


def cases():
    """The measured cases: (label, op, bytes)."""
    out = [("Barrier", "barrier", 0)]
    for op in OPS:
        for nbytes in SIZES:
            out.append((f"{op.capitalize()} {human(nbytes)}", op, nbytes))
    return out


def run_grid(name, reps, timeout, say):
    from wacoll import Topology
    from wacoll.tools.measure import run_on_testbed

    sizes, latency, bandwidth = GRIDS[name]
    topology = Topology.from_sizes(sizes, wan_latency=latency, wan_bandwidth=bandwidth)
    spec = {
        "reps": reps,
        "margin": 0.1,
        "progress": True,
        "level": None,
        "cases": [
            {"label": label, "op": op, "bytes": nbytes, "impls": IMPLS}
            for label, op, nbytes in cases()
        ],
    }
    with tempfile.TemporaryDirectory(prefix="wacoll-han-") as out:
        measured, reason = run_on_testbed(
            topology, spec, out, name="han", timeout=timeout
        )
    if measured is None:
        say(f"{name}: no measurements ({reason})")
        return []
    rows = []
    for label, op, nbytes in cases():
        entry = measured[label]
        for impl, times in entry["times"].items():
            valid = [t for t in times if t is not None]
            rows.append(
                {
                    "grid": name,
                    "case": label,
                    "op": op,
                    "bytes": nbytes,
                    "config": impl,
                    "seconds": statistics.median(valid) if valid else None,
                    "correct": entry.get("correct"),
                }
            )
    return rows


def report(rows, say):
    grids = dict.fromkeys(r["grid"] for r in rows)
    for grid in grids:
        sizes, latency, bandwidth = GRIDS[grid]
        say(
            f"\n{grid}: clusters {sizes}, wide area {latency * 1e3:g} ms, "
            f"{bandwidth / 1e6:g} MB/s; median ms (ratio to native)"
        )
        say(
            f"  {'case':16s} {'native':>9s} {'default':>16s} {'magpie':>16s} "
            f"{'han':>16s} {'han / magpie':>13s}"
        )
        for label, _, _ in cases():
            mine = {
                r["config"]: r for r in rows if r["grid"] == grid and r["case"] == label
            }
            native = mine["native"]["seconds"]
            cells = [f"{native * 1e3:9.2f}"]
            for config in ("default", "magpie", "han"):
                s = mine[config]["seconds"]
                mine[config]["ratio_to_native"] = s / native
                cells.append(f"{s * 1e3:8.2f} ({s / native:4.2f}x)")
            han_vs = mine["han"]["seconds"] / mine["magpie"]["seconds"]
            mine["han"]["ratio_to_magpie"] = han_vs
            ok = all(r.get("correct") for r in mine.values())
            say(
                f"  {label:16s} "
                + " ".join(cells)
                + f" {han_vs:13.2f}"
                + ("" if ok else "  RESULTS DIFFER")
            )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--grids", default=",".join(GRIDS))
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--out", default=str(RESULTS))
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    say = Report()
    say(
        "bench_han: composed plans (library in clusters, MagPIe between) vs MagPIe "
        "and the MPI library"
    )
    say(f"command: {command_line(__file__, argv)}")
    say(f"machine: {load_text()} (at start)")
    start = time.time()
    rows = []
    for grid in args.grids.split(","):
        if grid not in GRIDS:
            parser.error(f"unknown grid {grid!r}; known: {', '.join(GRIDS)}")
        rows += run_grid(grid, args.reps, args.timeout, say)
    if rows:
        report(rows, say)
    say(f"\nmachine: {load_text()} (at end); {time.time() - start:.0f} s")
    if rows:
        fields = [
            "grid",
            "case",
            "op",
            "bytes",
            "config",
            "seconds",
            "ratio_to_native",
            "ratio_to_magpie",
            "correct",
        ]
        write_csv(out / "han.csv", fields, rows)
    say.write(out / "han.txt")
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
