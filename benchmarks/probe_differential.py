"""Random differential trials of wacoll.Comm against the MPI library.

Each trial draws one collective call (every method wacoll.Comm mirrors, buffer and
object ones; blocking, non-blocking and persistent forms; predefined and derived
datatypes; predefined and user-defined operators; ``MPI.IN_PLACE``; random counts,
roots and buffer forms), runs it with identical inputs on ``MPI.COMM_WORLD`` and on
a ``wacoll.Comm`` over it with declared clusters, and compares every buffer byte
for byte (see ``tests/mpi/differential.py`` for what is drawn and how it is
judged). It prints the tally per method, form, element type, operator and
configuration, and every failing trial with its seed and index::

    mpiexec -n 4 python benchmarks/probe_differential.py --trials 10000 --seed 1 \\
        --clusters 2

``--clusters K`` declares K clusters of consecutive ranks (as even as they go);
``--layout 0,0,1,1`` declares each rank's cluster; by default the clusters are
those of ``WACOLL_CLUSTERS`` (else one per node). ``--only 17,42`` reruns trials
(the communicators' cached plans and recorded calls then differ from the full
run's). The exit status is 1 when a trial mismatched or was refused.
"""

from __future__ import annotations

import argparse
import faulthandler
import sys
import time
from pathlib import Path

from mpi4py import MPI

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "mpi"))

from wacoll import Topology, topology_from_comm  # noqa: E402

import differential  # noqa: E402


def _topology(args, size):
    if args.layout:
        labels = [x.strip() for x in args.layout.split(",")]
        if len(labels) != size:
            raise SystemExit(f"--layout names {len(labels)} ranks; there are {size}")
        clusters = {}
        for rank, label in enumerate(labels):
            clusters.setdefault(label, []).append(rank)
        return Topology.from_clusters(list(clusters.values()))
    if args.clusters:
        k = min(args.clusters, size)
        sizes = [size // k + (i < size % k) for i in range(k)]
        return Topology.from_sizes(sizes)
    return topology_from_comm(MPI.COMM_WORLD)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--start", type=int, default=0, help="the first trial index")
    parser.add_argument(
        "--clusters",
        type=int,
        default=0,
        help="declare this many clusters of consecutive ranks",
    )
    parser.add_argument("--layout", default="", help="each rank's cluster label")
    parser.add_argument("--only", default="", help="comma-separated trial indices")
    parser.add_argument("--methods", default="", help="comma-separated method names")
    parser.add_argument("--forms", default="", help="comma-separated forms")
    parser.add_argument(
        "--configs",
        default="",
        help=f"comma-separated configuration names ({', '.join(differential.CONFIGS)})",
    )
    parser.add_argument(
        "--failures", type=int, default=40, help="failures to print in full"
    )
    parser.add_argument(
        "--trace", action="store_true", help="print each trial before it runs (rank 0)"
    )
    parser.add_argument(
        "--hang",
        type=float,
        default=600,
        help="seconds after which a silent run dumps its stacks and exits",
    )
    args = parser.parse_args(argv)
    world = MPI.COMM_WORLD
    size, rank = world.Get_size(), world.Get_rank()
    topology = _topology(args, size)
    configs = differential.CONFIGS
    if args.configs:  # the chosen ones, those of weight 0 too
        configs = {
            name: (max(configs[name][0], 1), configs[name][1])
            for name in args.configs.split(",")
        }
    only = [int(x) for x in args.only.split(",")] if args.only else None
    faulthandler.dump_traceback_later(args.hang, exit=True)
    started = time.perf_counter()

    def progress(done, tally):
        faulthandler.dump_traceback_later(args.hang, exit=True)
        if rank == 0:
            print(
                f"  {done} trials, {time.perf_counter() - started:.0f} s: "
                + ", ".join(f"{s} {n}" for s, n in sorted(tally.statuses.items())),
                flush=True,
            )

    if rank == 0:
        print(
            f"{size} ranks, clusters {[list(c) for c in topology.clusters]}, seed "
            f"{args.seed}, {args.trials if only is None else len(only)} trials; "
            f"command: mpiexec -n {size} python {' '.join(sys.argv)}",
            flush=True,
        )
    tally = differential.run_trials(
        args.trials,
        args.seed,
        topology,
        configs=configs,
        methods=tuple(args.methods.split(",")) if args.methods else None,
        forms=tuple(args.forms.split(",")) if args.forms else None,
        start=args.start,
        only=only,
        progress=progress,
        trace=(lambda case: print(case.describe(), flush=True))
        if args.trace and rank == 0
        else None,
    )
    faulthandler.cancel_dump_traceback_later()
    if rank == 0:
        print("\n".join(tally.summary(args.failures)))
        print(f"{time.perf_counter() - started:.1f} s")
    return 1 if tally.mismatches or tally.refusals else 0


if __name__ == "__main__":
    sys.exit(main())
