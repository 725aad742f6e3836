"""The ``wacoll`` command.

``wacoll plan`` builds a plan for an operation, one or more algorithm families and a
topology, proves it, and prints its metrics and simulated completion time;
``--export DIR`` writes its scripts, ``--export-goal FILE`` a GOAL schedule for
LogGOPSim (:mod:`wacoll.plans.goal`).

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

from wacoll import __version__
from wacoll.cli.args import parse_clusters, parse_duration, parse_option, parse_rate
from wacoll.errors import PlanError, WacollError
from wacoll.plans import FAMILIES, LEVELS, OPERATIONS, build
from wacoll.topology import Topology

__all__ = ["main", "join_units", "parse_clusters", "parse_option"]


def _topology(args) -> Topology:
    links = {}
    for name in ("intra_latency", "intra_bandwidth", "wan_latency", "wan_bandwidth"):
        value = getattr(args, name)
        if value is not None:
            links[name] = value
    if args.topology:
        if links:
            raise WacollError(
                "give link parameters in the topology file, not with --topology"
            )
        return Topology.from_file(args.topology)
    return Topology.from_sizes(args.clusters, **links)


def _fmt_time(seconds):
    if seconds >= 1:
        return f"{seconds:.3f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3f} ms"
    return f"{seconds * 1e6:.1f} us"


def _plan_rows(plan, topology, model_name):
    from wacoll.plans.bounds import physical_bound
    from wacoll.plans.sim import LinkModel, TsTrModel, simulate

    report = plan.prove()
    rows = [("family", plan.family), ("algorithm", plan.algorithm), ("checked", "ok")]
    for key, value in report.as_dict().items():
        if key != "wide_area_optimal":  # "optimality" says yes / near / no
            rows.append((key.replace("_", " "), value))
    if model_name == "link":
        rows.append(
            (
                "simulated completion",
                _fmt_time(simulate(plan, LinkModel(topology)).completion),
            )
        )
        if topology.nclusters > 1:
            rows.append(("physical bound", _fmt_time(physical_bound(plan, topology))))
    else:
        rows.append(
            (
                "simulated completion",
                f"{simulate(plan, TsTrModel(10.0, 1000.0)).completion:g}",
            )
        )
    return rows


#: Builder arguments the command sets itself; --option may not override them.
_RESERVED = ("root", "count", "counts", "segments", "level", "itemsize")


def _family_options(args):
    """``{family: {key: value}}`` from ``--tree`` and ``--option [family.]key=value``."""
    from wacoll.plans import builders, options

    per_family = {f: {} for f in args.family}
    plain = dict(args.option or [])
    if args.tree:
        plain["tree"] = args.tree
    for key, value in list(plain.items()):
        fam, dot, name = key.rpartition(".")
        if dot:
            del plain[key]
            if fam not in per_family:
                raise WacollError(
                    f"option {key!r} names family {fam!r}, which is not "
                    f"among --family {','.join(args.family)}"
                )
            per_family[fam][name] = value
    for key in list(plain) + [k for opts in per_family.values() for k in opts]:
        if key in _RESERVED:
            raise WacollError(
                f"option {key!r} is set by the command's own flags "
                f"(--{key.replace('_', '-')} ...)"
            )
    for key, value in plain.items():
        takers = [
            f
            for f in args.family
            if args.op in builders(f) and key in options(f, args.op)
        ]
        if not takers:
            raise WacollError(
                f"no family among {','.join(args.family)} takes option "
                f"{key!r} for {args.op}"
            )
        for f in takers:
            per_family[f].setdefault(key, value)
    return per_family


def _cmd_plan(args) -> int:
    topology = _topology(args)
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
            raise WacollError(
                f"--bytes {args.bytes} is not a multiple of --itemsize {args.itemsize}"
            )
        common["count"] = args.bytes // args.itemsize
    options = _family_options(args)
    table = []
    for family in args.family:
        try:
            plan = build(args.op, topology, family, **common, **options[family])
            table.append((family, plan, _plan_rows(plan, topology, args.model)))
        except PlanError as exc:
            hint = (
                _level_hint(args, topology, family, common, options[family])
                if spec.kind == "reduction"
                else ""
            )
            raise PlanError(f"{exc}{hint}") from None
    kinds = "contiguous" if topology.is_contiguous else "reordered"
    n = topology.nclusters
    head = (
        f"{args.op} on {topology.size} ranks in {n} cluster{'s' if n > 1 else ''} "
        f"{[len(c) for c in topology.clusters]} ({kinds})"
    )
    if spec.rooted:
        head += f", root {args.root}"
    if spec.kind == "reduction":
        head += f", level {args.level}"
    if spec.kind != "barrier":
        head += f", {args.bytes} bytes" + (
            " per rank" if spec.layout in ("per_rank", "pairs") else ""
        )
    print(head)
    print(
        f"links: intra {_fmt_time(topology.intra.latency)}, "
        f"{topology.intra.bandwidth:g} B/s; wide-area {_fmt_time(topology.wan.latency)}, "
        f"{topology.wan.bandwidth:g} B/s"
    )
    width = max(len(k) for _, _, rows in table for k, _ in rows) + 2
    for i, key in enumerate(k for k, _ in table[0][2]):
        values = [_cell(rows[i][1]) if i < len(rows) else "" for _, _, rows in table]
        print(key.ljust(width) + "  ".join(v.ljust(14) for v in values).rstrip())
    for family, plan, _ in table:
        if args.show:
            print(plan.describe())
        if args.export:
            _export(plan, Path(args.export) / family, args.format)
        if args.export_goal:
            _export_goal(
                plan,
                Path(args.export_goal),
                family if len(args.family) > 1 else None,
                args.goal_order,
            )
    return 0


def _export_goal(plan, path, family, order):
    from wacoll.plans.goal import save_goal

    if family is not None:
        path = path.with_name(f"{path.stem}-{family}{path.suffix}")
    path.parent.mkdir(parents=True, exist_ok=True)
    save_goal(plan, path, order=order)
    print(
        f"wrote {path} (GOAL; for LogGOPSim: txt2bin -i {path} -o "
        f"{path.with_suffix('.bin')}, then LogGOPSim -f {path.with_suffix('.bin')})"
    )


def _level_hint(args, topology, family, common, options) -> str:
    """For a reduction whose plan fails at ``--level``: the levels at which this family
    builds and proves it, as the command-line flag to add."""
    works = []
    for level in LEVELS:
        if level == args.level:
            continue
        try:
            build(
                args.op, topology, family, **{**common, "level": level}, **options
            ).prove()
        except WacollError:
            continue
        works.append(level)
    if not works:
        return ""
    flags = " or ".join(f"--level {level}" for level in works)
    return (
        f"\non the command line: add {flags} (the {family} {args.op} at level "
        f"{args.level!r} is not possible here)"
    )


def _cell(value):
    if value is True or value is False:
        return "yes" if value else "no"
    return str(value)


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
        prog="wacoll", description="Topology-aware collective communication plans."
    )
    parser.add_argument("--version", action="version", version=f"wacoll {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser(
        "plan",
        help="build, check and simulate a plan",
        description="Build a plan for an operation and topology, prove it, "
        "print its metrics and simulated completion time.",
    )
    p.add_argument(
        "op",
        nargs="?",
        default="allreduce",
        choices=sorted(OPERATIONS),
        help="the collective operation (default: allreduce)",
    )
    p.add_argument(
        "--family",
        type=lambda s: s.split(","),
        default=["magpie", "mpich"],
        help=f"one or more of {', '.join(FAMILIES)}, comma-separated "
        f"(default: magpie,mpich)",
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--clusters",
        type=parse_clusters,
        default=[8, 8, 8, 8],
        help="cluster sizes: 4x8 or 4,4,8 (default: 4x8)",
    )
    where.add_argument("--topology", help="a topology file (.toml or .json)")
    p.add_argument("--root", type=int, default=0, help="root of rooted operations")
    p.add_argument(
        "--bytes",
        type=int,
        default=8,
        help="vector size in bytes; per rank for scatter, gather, allgather, "
        "alltoall and reduce-scatter (default 8)",
    )
    p.add_argument(
        "--itemsize", type=int, default=1, help="bytes per element (default 1)"
    )
    p.add_argument(
        "--level",
        choices=LEVELS,
        default="strict",
        help="reduction level (default: strict, as in the library)",
    )
    p.add_argument(
        "--segments",
        type=int,
        default=1,
        help="pipeline segments of segmented operations (default 1)",
    )
    p.add_argument("--tree", help="tree name for the tree family (e.g. lam, fnf)")
    p.add_argument(
        "--option",
        type=parse_option,
        action="append",
        metavar="[FAMILY.]KEY=VALUE",
        help="a family option, e.g. n=4, algorithm=farfirst or gridmpi.n=4; a "
        "plain key goes to every family that takes it (repeatable)",
    )
    p.add_argument(
        "--intra-latency",
        type=parse_duration,
        metavar="DURATION",
        help="latency inside a cluster, e.g. 10us (a plain number: seconds)",
    )
    p.add_argument(
        "--intra-bandwidth",
        type=parse_rate,
        metavar="RATE",
        help="bandwidth inside a cluster, e.g. 1GB/s (a plain number: B/s)",
    )
    p.add_argument(
        "--wan-latency",
        type=parse_duration,
        metavar="DURATION",
        help="one-way wide-area latency, e.g. 10ms (a plain number: seconds)",
    )
    p.add_argument(
        "--wan-bandwidth",
        type=parse_rate,
        metavar="RATE",
        help="wide-area bandwidth, e.g. 1MB/s or 100Mbit/s (a plain number: B/s)",
    )
    p.add_argument(
        "--model",
        choices=["link", "tstr"],
        default="link",
        help="cost model for the simulated time (default: link)",
    )
    p.add_argument("--show", action="store_true", help="print every rank's program")
    p.add_argument("--export", metavar="DIR", help="write the plan's scripts under DIR")
    p.add_argument("--format", choices=["sexpr", "json", "both"], default="both")
    p.add_argument(
        "--export-goal",
        metavar="FILE",
        help="write the plan as a GOAL schedule for LogGOPSim (several "
        "families: FILE's name gets -FAMILY before its suffix)",
    )
    p.add_argument(
        "--goal-order",
        choices=["program", "data"],
        default="program",
        help="GOAL dependencies: program order, as wacoll's executor runs "
        "the plan (default), or the blocks' data flow only",
    )
    p.set_defaults(run=_cmd_plan)
    d = sub.add_parser(
        "demo",
        help="wacoll vs native MPI on an emulated grid",
        description="Build a 4x2 emulated wide-area testbed (10 ms, 1 MB/s), "
        "time Barrier, Bcast, Allgather, Reduce and Allreduce "
        "with the MPI library's own collectives, wacoll.Comm "
        "as the README writes it (default), and MagPIe's and "
        "MPICH 1.1's algorithms as wacoll plans, forced; "
        "print one table with a verdict per case and "
        "overall, and draw a picture.",
    )
    d.add_argument(
        "--out", default="wacoll-demo", help="output folder (default wacoll-demo)"
    )
    d.add_argument("--reps", type=int, default=5, help="runs per case (default 5)")
    d.add_argument(
        "--simulate-only",
        action="store_true",
        help="skip the testbed; show the simulator's table",
    )
    d.set_defaults(run=_run_demo)
    from wacoll.cli.testbed import add_testbed_parser

    add_testbed_parser(sub)
    from wacoll.cli.calibrate import add_calibrate_parser

    add_calibrate_parser(sub)
    from wacoll.cli.tune import add_tune_parser

    add_tune_parser(sub)
    return parser


def _run_demo(args):
    """``wacoll demo``: the demo of the README (imported when it runs: it loads MPI)."""
    from wacoll.tools.demo import run_demo

    return run_demo(args.out, reps=args.reps, simulate_only=args.simulate_only)


#: Options whose value is a duration or a rate, in every subcommand.
_UNIT_OPTIONS = (
    "--intra-latency",
    "--intra-bandwidth",
    "--wan-latency",
    "--wan-bandwidth",
    "--latency",
    "--bandwidth",
    "--node-bandwidth",
    "--time-limit",
    "--timeout",
)


def join_units(argv) -> list:
    """``--wan-latency 10 ms`` read as ``--wan-latency 10ms``: a number and a unit
    written as two words after an option that takes a duration or a rate (the
    command's own arguments only: nothing after ``--``).

    Examples
    --------
    >>> join_units(["plan", "--wan-latency", "10", "ms", "--wan-bandwidth", "1", "MB/s"])
    ['plan', '--wan-latency', '10ms', '--wan-bandwidth', '1MB/s']
    >>> join_units(["plan", "--wan-latency=10", "ms"])
    ['plan', '--wan-latency=10ms']
    >>> join_units(["testbed", "run", "--", "app", "--timeout", "5", "s"])
    ['testbed', 'run', '--', 'app', '--timeout', '5', 's']
    """
    from wacoll.emulate.units import DURATIONS, RATES

    units = set(DURATIONS) | set(RATES)
    number = re.compile(r"[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?|\.[0-9]+")
    out: list[str] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "--":
            return out + list(argv[i:])
        option, eq, value = word.partition("=")
        if option in _UNIT_OPTIONS:
            if (
                eq
                and number.fullmatch(value)
                and i + 1 < len(argv)
                and argv[i + 1] in units
            ):
                out.append(f"{word}{argv[i + 1]}")
                i += 2
                continue
            if (
                not eq
                and i + 2 < len(argv)
                and number.fullmatch(argv[i + 1])
                and argv[i + 2] in units
            ):
                out += [word, argv[i + 1] + argv[i + 2]]
                i += 3
                continue
        out.append(word)
        i += 1
    return out


def main(argv=None) -> int:
    """Run the ``wacoll`` command; return its exit status."""
    parser = _parser()
    args = parser.parse_args(join_units(sys.argv[1:] if argv is None else list(argv)))
    try:
        return args.run(args)
    except WacollError as exc:
        print(f"wacoll: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader went away (wacoll plan ... | head): stop quietly
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
