"""How fast the plan simulator runs: simulated messages per second, per model.

Builds large plans (a segmented binomial allreduce and two segmented binomial
broadcasts over 4096 ranks, one with contiguous clusters and one with reordered
clusters, which puts most messages on contended wide-area links), proves each once
(not timed), then simulates each under the models of
:mod:`wacoll.plans.sim`. For each pair it reports a "cold" run, on a fresh copy of
the plan (``dataclasses.replace``, proved untimed), which also precompiles the plan's
programs, and the best of ``--repeat`` further
("warm") runs, as simulated messages per second of wall-clock and of CPU time
(on a loaded machine the CPU figures are the stable ones).

Run from the repository root::

    .venv/bin/python benchmarks/bench_simulate.py [--ranks 4096] [--repeat 3]

Prints a table and the command line, and writes benchmarks/results/simulate.csv.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

from wacoll import Topology
from wacoll.plans import build
from wacoll.plans.sim import LinkModel, TiniModel, TsTrModel, simulate

from _harness import RESULTS, command_line, write_csv

FIELDS = [
    "plan",
    "model",
    "ranks",
    "messages",
    "wide_area_messages",
    "completion_s",
    "cold_wall_s",
    "cold_cpu_s",
    "warm_wall_s",
    "warm_cpu_s",
    "cold_msgs_per_s",
    "warm_msgs_per_s",
    "cold_cpu_msgs_per_s",
    "warm_cpu_msgs_per_s",
]


def plans(ranks):
    """(name, plan, topology) of the benchmark plans."""
    per = max(1, ranks // 4)
    contiguous = Topology.from_sizes(
        [per] * (ranks // per) + ([ranks % per] if ranks % per else [])
    )
    reordered = Topology.from_clusters(
        [[r for r in range(ranks) if r % 4 == c] for c in range(min(4, ranks))]
    )
    yield (
        "allreduce-binomial-seg8",
        build(
            "allreduce",
            Topology.single(ranks),
            "tree",
            tree="binomial",
            level="commutative",
            count=1 << 20,
            itemsize=8,
            segments=8,
        ),
        Topology.single(ranks),
    )
    yield (
        "bcast-binomial-seg16-4clusters",
        build("bcast", contiguous, "tree", tree="binomial", count=1 << 23, segments=16),
        contiguous,
    )
    yield (
        "bcast-binomial-seg16-reordered",
        build("bcast", reordered, "tree", tree="binomial", count=1 << 23, segments=16),
        reordered,
    )


def models(topology):
    """(name, model): MagPIe's measured t_s/t_r, two-speed t_ini, the link model
    (the network buffers wide-area messages, or the sender waits for them)."""
    t_ini = [100e-6 if r % 4 == 0 else 300e-6 for r in range(topology.size)]
    yield "TsTr", TsTrModel(8e-6, 20e-6)
    yield "Tini", TiniModel(t_ini)
    yield "Link", LinkModel(topology)
    yield "Link-wait", LinkModel(topology, buffered=False)


def timed(plan, model):
    wall, cpu = time.perf_counter(), time.process_time()
    result = simulate(plan, model)
    return result, time.perf_counter() - wall, time.process_time() - cpu


def run(ranks, repeat):
    rows = []
    for name, plan, topo in plans(ranks):
        plan.prove()  # proved once; simulate() reuses the cached report
        nmsg = len(plan.messages())
        nwide = plan.prove().wide_area_messages
        for mname, model in models(topo):
            # cold: a fresh copy of the plan (nothing simulate() precompiled on it),
            # proved before timing as the plan itself was
            fresh = dataclasses.replace(plan)
            fresh.prove()
            result, cold_wall, cold_cpu = timed(fresh, model)
            warm = [timed(fresh, model) for _ in range(repeat)]
            warm_wall = min(w for _, w, _ in warm)
            warm_cpu = min(c for _, _, c in warm)
            rows.append(
                {
                    "plan": name,
                    "model": mname,
                    "ranks": plan.size,
                    "messages": nmsg,
                    "wide_area_messages": nwide,
                    "completion_s": f"{result.completion:.6g}",
                    "cold_wall_s": f"{cold_wall:.4f}",
                    "cold_cpu_s": f"{cold_cpu:.4f}",
                    "warm_wall_s": f"{warm_wall:.4f}",
                    "warm_cpu_s": f"{warm_cpu:.4f}",
                    "cold_msgs_per_s": round(nmsg / cold_wall),
                    "warm_msgs_per_s": round(nmsg / warm_wall),
                    "cold_cpu_msgs_per_s": round(nmsg / cold_cpu),
                    "warm_cpu_msgs_per_s": round(nmsg / warm_cpu),
                }
            )
            print(_line(rows[-1]), flush=True)
    return rows


def _line(row):
    return (
        f"{row['plan']:32} {row['model']:9} {row['messages']:>7} "
        f"{row['wide_area_messages']:>7} {row['completion_s']:>11} "
        f"{row['cold_msgs_per_s']:>10,} {row['warm_msgs_per_s']:>10,} "
        f"{row['cold_cpu_msgs_per_s']:>10,} {row['warm_cpu_msgs_per_s']:>10,}"
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=4096)
    parser.add_argument("--repeat", type=int, default=3, help="warm runs per pair")
    parser.add_argument("--out", type=Path, default=RESULTS / "simulate.csv")
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    print("command:", command_line(__file__, argv))
    print(
        f"{'plan':32} {'model':9} {'msgs':>7} {'wan':>7} {'completion':>11} "
        f"{'cold msg/s':>10} {'warm msg/s':>10} {'cold cpu':>10} {'warm cpu':>10}"
    )
    print(f"{'':70} {'(wall-clock)':>21} {'(CPU time)':>21}")
    rows = run(args.ranks, args.repeat)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_csv(args.out, FIELDS, rows)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
