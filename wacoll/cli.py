"""The ``wacoll`` command.

``wacoll plan`` builds a plan for an operation, one or more algorithm families and a
topology, proves it, and prints its metrics and simulated completion time;
``--export DIR`` writes its scripts.

Examples
--------
>>> main(["plan", "bcast", "--clusters", "2x2", "--family", "magpie"])  # doctest: +ELLIPSIS
bcast on 4 ranks in 2 clusters [2, 2] (contiguous), root 0, 8 bytes
...
family ... magpie
algorithm ... coordinator
checked ... ok
messages ... 3
...
0
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from wacoll.errors import WacollError
from wacoll.plans import FAMILIES, LEVELS, OPERATIONS, build
from wacoll.topology import Topology

__all__ = ["main", "parse_clusters", "parse_option"]


def parse_clusters(text: str) -> list:
    """Cluster sizes from ``"4x8"`` (4 clusters of 8) or ``"4,4,8"``.

    Examples
    --------
    >>> parse_clusters("4x8"), parse_clusters("2,3")
    ([8, 8, 8, 8], [2, 3])
    """
    m = re.fullmatch(r"\s*(\d+)\s*x\s*(\d+)\s*", text)
    if m:
        return [int(m.group(2))] * int(m.group(1))
    if re.fullmatch(r"\s*\d+(\s*,\s*\d+)*\s*", text):
        return [int(x) for x in text.split(",")]
    raise argparse.ArgumentTypeError(
        f"cluster sizes look like 4x8 or 4,4,8; got {text!r}")


def parse_option(text: str):
    """A family option ``key=value``; the value is an int, a float, a bool or a string.

    Examples
    --------
    >>> parse_option("n=4"), parse_option("tree=lam"), parse_option("arrival=true")
    (('n', 4), ('tree', 'lam'), ('arrival', True))
    """
    key, sep, value = text.partition("=")
    if not sep or not re.fullmatch(r"[a-z_][a-z0-9_]*", key):
        raise argparse.ArgumentTypeError(f"options look like key=value; got {text!r}")
    if value.lower() in ("true", "false"):
        return key, value.lower() == "true"
    for kind in (int, float):
        try:
            return key, kind(value)
        except ValueError:
            pass
    return key, value


def _topology(args) -> Topology:
    links = {}
    for name in ("intra_latency", "intra_bandwidth", "wan_latency", "wan_bandwidth"):
        value = getattr(args, name)
        if value is not None:
            links[name] = value
    if args.topology:
        if links:
            raise WacollError("give link parameters in the topology file, not with --topology")
        return Topology.from_file(args.topology)
    return Topology.from_sizes(args.clusters, **links)


def _fmt_time(seconds):
    if seconds >= 1:
        return f"{seconds:.3f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3f} ms"
    return f"{seconds * 1e6:.1f} us"


def _physical_bound(plan, topology):
    """One wide-area latency plus the bytes a cluster must receive over the wide area."""
    if topology.nclusters < 2:
        return None
    nbytes = plan.total_bytes
    if plan.op in ("gather", "gatherv", "scatter", "scatterv", "alltoall", "alltoallv",
                   "reduce_scatter", "reduce_scatter_block"):
        nbytes = max(plan.nbytes([b]) for b in range(plan.nblocks)) if plan.nblocks else 0
    return topology.wan.latency + nbytes / topology.wan.bandwidth


def _plan_rows(plan, topology, model_name):
    report = plan.check()
    rows = [("family", plan.family), ("algorithm", plan.algorithm), ("checked", "ok")]
    for key, value in report.as_dict().items():
        rows.append((key.replace("_", " "), "yes" if value is True else
                     "no" if value is False else value))
    try:
        from wacoll.plans.simulate import LinkModel, TsTrModel, simulate
    except ImportError:  # the simulator is optional for the metrics
        return rows
    model = LinkModel(topology) if model_name == "link" else TsTrModel(10.0, 1000.0)
    result = simulate(plan, model)
    unit = _fmt_time(result.completion) if model_name == "link" else f"{result.completion:g}"
    rows.append(("simulated completion", unit))
    bound = _physical_bound(plan, topology)
    if bound is not None and model_name == "link":
        rows.append(("physical bound", _fmt_time(bound)))
    return rows


def _cmd_plan(args) -> int:
    topology = _topology(args)
    options = dict(args.option or [])
    if args.tree:
        options["tree"] = args.tree
    spec = OPERATIONS[args.op]
    common = {"itemsize": args.itemsize}
    if spec.rooted:
        common["root"] = args.root
    if spec.kind == "reduction":
        common["level"] = args.level
    if spec.layout == "segments":
        common["segments"] = args.segments
    if spec.kind != "barrier":
        if args.bytes % args.itemsize:
            raise WacollError(f"--bytes {args.bytes} is not a multiple of --itemsize "
                              f"{args.itemsize}")
        common["count"] = args.bytes // args.itemsize
    kinds = "contiguous" if topology.is_contiguous else "reordered"
    head = (f"{args.op} on {topology.size} ranks in {topology.nclusters} clusters "
            f"{[len(c) for c in topology.clusters]} ({kinds})")
    if spec.rooted:
        head += f", root {args.root}"
    if spec.kind == "reduction":
        head += f", level {args.level}"
    head += f", {args.bytes} bytes"
    print(head)
    print(f"links: intra {_fmt_time(topology.intra.latency)}, "
          f"{topology.intra.bandwidth:g} B/s; wide-area {_fmt_time(topology.wan.latency)}, "
          f"{topology.wan.bandwidth:g} B/s")
    table = []
    for family in args.family:
        plan = build(args.op, topology, family, **common, **options)
        table.append((family, plan, _plan_rows(plan, topology, args.model)))
        if args.show:
            print(plan.describe())
        if args.export:
            _export(plan, Path(args.export) / family, args.format)
    width = max(len(k) for _, _, rows in table for k, _ in rows) + 2
    for i, key in enumerate(k for k, _ in table[0][2]):
        values = [str(rows[i][1]) if i < len(rows) else "" for _, _, rows in table]
        print(key.ljust(width) + "  ".join(v.ljust(14) for v in values).rstrip())
    return 0


def _export(plan, directory, fmt):
    from wacoll.plans import scripts

    directory.mkdir(parents=True, exist_ok=True)
    written = []
    if fmt in ("sexpr", "both"):
        written += scripts.write_scripts(plan, directory)
    if fmt in ("json", "both"):
        path = directory / f"{plan.op}-{plan.size}.json"
        scripts.save(plan, path)
        written.append(path)
    print(f"wrote {len(written)} script files to {directory}")


def _parser():
    parser = argparse.ArgumentParser(
        prog="wacoll", description="Topology-aware collective communication plans.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("plan", help="build, check and simulate a plan",
                       description="Build a plan for an operation and topology, prove it, "
                                   "print its metrics and simulated completion time.")
    p.add_argument("op", nargs="?", default="allreduce", choices=sorted(OPERATIONS),
                   help="the collective operation (default: allreduce)")
    p.add_argument("--family", type=lambda s: s.split(","), default=["magpie", "mpich"],
                   help=f"one or more of {', '.join(FAMILIES)}, comma-separated "
                        f"(default: magpie,mpich)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--clusters", type=parse_clusters, default=[8, 8, 8, 8],
                       help="cluster sizes: 4x8 or 4,4,8 (default: 4x8)")
    where.add_argument("--topology", help="a topology file (.toml or .json)")
    p.add_argument("--root", type=int, default=0)
    p.add_argument("--bytes", type=int, default=8, help="vector size in bytes (default 8)")
    p.add_argument("--itemsize", type=int, default=1, help="bytes per element (default 1)")
    p.add_argument("--level", choices=LEVELS, default="associative",
                   help="reduction level (default: associative)")
    p.add_argument("--segments", type=int, default=1)
    p.add_argument("--tree", help="tree name for the tree family (e.g. lam, fnf)")
    p.add_argument("--option", type=parse_option, action="append", metavar="KEY=VALUE",
                   help="a family option, e.g. n=4 or algorithm=farfirst (repeatable)")
    p.add_argument("--intra-latency", type=float)
    p.add_argument("--intra-bandwidth", type=float)
    p.add_argument("--wan-latency", type=float)
    p.add_argument("--wan-bandwidth", type=float)
    p.add_argument("--model", choices=["link", "tstr"], default="link",
                   help="cost model for the simulated time (default: link)")
    p.add_argument("--show", action="store_true", help="print every rank's program")
    p.add_argument("--export", metavar="DIR", help="write the plan's scripts under DIR")
    p.add_argument("--format", choices=["sexpr", "json", "both"], default="both")
    p.set_defaults(run=_cmd_plan)
    return parser


def main(argv=None) -> int:
    """Run the ``wacoll`` command; return its exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except WacollError as exc:
        print(f"wacoll: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
