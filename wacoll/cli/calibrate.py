"""``wacoll calibrate``: measure the network under ``mpiexec`` and write a topology.

::

    mpiexec -n 8 wacoll calibrate --out topo.toml --heatmap latency.png
    WACOLL_TOPOLOGY=topo.toml mpiexec -n 8 python app.py

Every rank runs the measurement (:func:`wacoll.mpi.allpairs.measure`); rank 0
writes the topology file (read back by :meth:`wacoll.Topology.from_file` and
``WACOLL_TOPOLOGY``), optionally the report (JSON) and the latency heatmap (PNG),
and prints a table; ``--compare FILE`` puts a configured topology beside it.
"""

from __future__ import annotations

__all__ = ["add_calibrate_parser", "run_calibrate"]


def add_calibrate_parser(sub):
    """Add the ``calibrate`` subcommand to an ``argparse`` subparsers object."""
    p = sub.add_parser(
        "calibrate",
        help="measure latency, bandwidth and t_ini; write a topology",
        description="Run under mpiexec. Ping-pong every pair of ranks (sampled pairs "
        "beyond --all-pairs ranks), find the clusters from the gap between "
        "fast and slow links, measure bandwidth per cluster pair and each "
        "rank's message initiation cost, and write a topology file.",
    )
    p.add_argument(
        "--out",
        default="topology.toml",
        help="topology file to write, .toml or .json (default topology.toml)",
    )
    p.add_argument("--report", metavar="JSON", help="also write the measurements as JSON")
    p.add_argument("--heatmap", metavar="PNG", help="also draw the latency matrix")
    p.add_argument(
        "--compare",
        metavar="FILE",
        help="a configured topology file to print beside the measured one",
    )
    p.add_argument(
        "--reps", type=int, default=20, help="round trips per pair (default 20)"
    )
    p.add_argument(
        "--small", type=int, default=8, help="bytes of the latency messages (default 8)"
    )
    p.add_argument(
        "--large",
        type=int,
        default=1 << 16,
        help="bytes of the bandwidth messages (default 65536)",
    )
    p.add_argument(
        "--window", type=int, default=4, help="bandwidth messages per burst (default 4)"
    )
    p.add_argument(
        "--bandwidth-pairs",
        type=int,
        default=1,
        help="rank pairs timed per directed cluster pair (default 1; 0: none)",
    )
    p.add_argument(
        "--all-pairs",
        type=int,
        default=32,
        help="time every pair up to this many ranks, sampled pairs beyond (default 32)",
    )
    p.add_argument(
        "--min-gap",
        type=float,
        default=3.0,
        help="least ratio between slow and fast links for a split (default 3)",
    )
    progress = p.add_mutually_exclusive_group()
    progress.add_argument(
        "--progress",
        dest="progress",
        action="store_true",
        default=None,
        help="show progress (default: when stderr is a terminal)",
    )
    progress.add_argument("--no-progress", dest="progress", action="store_false")
    p.set_defaults(run=run_calibrate)
    return p


def run_calibrate(args) -> int:
    """Measure ``MPI.COMM_WORLD`` with ``args``' settings; rank 0 writes and prints."""
    from mpi4py import MPI

    from wacoll.mpi.allpairs import measure
    from wacoll.topology import Topology

    comm = MPI.COMM_WORLD
    configured = Topology.from_file(args.compare) if args.compare else None
    report = measure(
        comm,
        reps=args.reps,
        small=args.small,
        large=args.large,
        window=args.window,
        bandwidth_pairs=args.bandwidth_pairs,
        all_pairs=args.all_pairs,
        min_gap=args.min_gap,
        progress=args.progress,
    )
    if comm.Get_rank() != 0:
        return 0
    report.topology.save(args.out)
    if args.report:
        report.save(args.report)
    if args.heatmap:
        import matplotlib

        matplotlib.use("Agg")
        report.heatmap(args.heatmap)
    print(report.table(configured))
    print(
        f"measured in {report.elapsed:.1f} s; wrote {args.out}"
        + (f", {args.report}" if args.report else "")
        + (f", {args.heatmap}" if args.heatmap else "")
    )
    return 0
