"""Time the heterogeneous tree builders: ``fnf`` at scale and the exponential ``optimal``.

Run from the repository root::

    python benchmarks/bench_trees.py [--budget SECONDS] [--max-optimal N] [--seed S]

``fnf`` (and ``spoc``, for comparison) are timed on 1,000 / 10,000 / 100,000 ranks
with random costs, best of ``--repeats`` runs, the DiGraph construction included.
``optimal`` is timed on 8, 9, ... participants with random distinct costs until the
next size would likely overrun ``--budget`` seconds (its cost grows about 3x per
participant) or reaches ``--max-optimal``. Each ``optimal`` row also gives the FNF
latency on the same instance. Prints a table and writes the raw numbers to
``benchmarks/results/trees.csv``.
"""

from __future__ import annotations

import argparse
import platform
import random
import sys
import time
from pathlib import Path

from wacoll.trees import bcast_time, fnf, optimal, spoc
from wacoll.trees.optimal import MAX_PARTICIPANTS

from _harness import RESULTS, command_line, write_csv

FIELDS = [
    "algorithm",
    "participants",
    "seconds",
    "repeats",
    "latency",
    "fnf_latency",
    "command",
]


def _timed(build, costs, repeats):
    best, tree = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        tree = build(costs)
        best = min(best, time.perf_counter() - start)
    return best, tree


def bench_scale(sizes, repeats, seed):
    rows = []
    for n in sizes:
        rng = random.Random(seed + n)
        costs = [rng.uniform(1.0, 100.0) for _ in range(n)]
        for name, build in (("fnf", fnf), ("spoc", spoc)):
            seconds, tree = _timed(build, costs, repeats)
            rows.append(
                {
                    "algorithm": name,
                    "participants": n,
                    "seconds": seconds,
                    "repeats": repeats,
                    "latency": bcast_time(tree, costs),
                    "fnf_latency": "",
                }
            )
    return rows


def bench_optimal(first, last, budget, seed):
    rows, spent, previous = [], 0.0, None
    for n in range(first, last + 1):
        if previous is not None and spent + 3.5 * previous > budget:
            break
        rng = random.Random(seed + n)
        costs = rng.sample(range(100, 100 * n * n + 100), n)  # distinct
        seconds, tree = _timed(optimal, costs, 1)
        spent += seconds
        previous = seconds
        rows.append(
            {
                "algorithm": "optimal",
                "participants": n,
                "seconds": seconds,
                "repeats": 1,
                "latency": bcast_time(tree, costs),
                "fnf_latency": bcast_time(fnf(costs), costs),
            }
        )
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--budget",
        type=float,
        default=60.0,
        help="seconds to spend on optimal() (default 60)",
    )
    parser.add_argument(
        "--max-optimal",
        type=int,
        default=MAX_PARTICIPANTS,
        help=f"largest optimal() size (default {MAX_PARTICIPANTS})",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="runs per fnf/spoc size, best kept (default 3)",
    )
    parser.add_argument("--seed", type=int, default=1998)
    parser.add_argument("--output", type=Path, default=RESULTS / "trees.csv")
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)

    command = command_line(__file__, argv)
    rows = bench_scale([1_000, 10_000, 100_000], args.repeats, args.seed)
    rows += bench_optimal(8, args.max_optimal, args.budget, args.seed)

    print(f"# {command}")
    print(
        f"# Python {platform.python_version()} on {platform.machine()}, "
        f"{platform.processor() or platform.system()}"
    )
    print(
        f"{'algorithm':<10}{'participants':>13}{'seconds':>11}{'latency':>13}"
        f"{'fnf latency':>13}"
    )
    for r in rows:
        fnf_lat = f"{r['fnf_latency']:>13.0f}" if r["fnf_latency"] != "" else f"{'':>13}"
        print(
            f"{r['algorithm']:<10}{r['participants']:>13}{r['seconds']:>11.4f}"
            f"{r['latency']:>13.1f}{fnf_lat}"
        )

    args.output.parent.mkdir(parents=True, exist_ok=True)
    write_csv(args.output, FIELDS, ({**r, "command": command} for r in rows))
    print(f"# raw numbers: {args.output}")


if __name__ == "__main__":
    main()
