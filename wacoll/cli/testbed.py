"""The ``wacoll testbed`` command: an emulated wide-area network on this machine.

::

    wacoll testbed up --clusters 4x2 --latency 10ms --bandwidth 1MB/s [--name N] [--detach]
    wacoll testbed run [--name N] [--timeout 10min] -- python script.py
    wacoll testbed check [--name N]
    wacoll testbed down [--name N]
    wacoll testbed list
    wacoll testbed clean

``up`` builds the testbed, prints its self-check and stays up until Ctrl-C; with
``--detach`` it leaves the testbed up and its state in ``/run/wacoll/NAME.json``.
Durations take a unit (``h``, ``min``, ``s``, ``ms``, ``us``), rates too (``B/s``,
``KB/s``, ``MB/s``, ``GB/s``, ``KiB/s``, ``bit/s``, ``Mbit/s``, ``Gbit/s``...).
Everything needs root; see :mod:`wacoll.emulate`.

Examples
--------
>>> import argparse
>>> parser = argparse.ArgumentParser(prog="wacoll")
>>> add_testbed_parser(parser.add_subparsers(dest="command"))
>>> args = parser.parse_args(["testbed", "up", "--clusters", "2x2", "--latency", "10ms",
...                           "--bandwidth", "1MB/s", "--pair", "0:1=20ms,500KB/s"])
>>> topo = topology_from_args(args)
>>> topo.wan.latency, topo.wan.bandwidth, topo.link(0, 2).latency, topo.link(2, 0).latency
(0.01, 1000000.0, 0.02, 0.01)
>>> command_of(parser.parse_args(["testbed", "run", "--", "python", "-c", "pass"]))
['python', '-c', 'pass']
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import sys
import threading

from wacoll.emulate.units import format_duration, format_rate, parse_duration, parse_rate
from wacoll.errors import TestbedError
from wacoll.topology import Topology

__all__ = [
    "add_testbed_parser",
    "topology_from_args",
    "parse_pair",
    "parse_size",
    "command_of",
]


def _arg(parse):
    """An argparse ``type`` that turns TestbedError into a usage error."""

    def convert(text):
        try:
            return parse(text)
        except TestbedError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = parse.__name__
    return convert


def parse_pair(text: str):
    """A directed cluster pair override ``A:B=LATENCY,RATE``.

    Examples
    --------
    >>> parse_pair("0:2=25ms,2Mbit/s")
    ((0, 2), (0.025, 250000.0))
    """
    m = re.fullmatch(r"\s*(\d+)\s*:\s*(\d+)\s*=\s*([^,]+),(.+)", text)
    if not m:
        raise TestbedError(f"a pair looks like 0:1=20ms,500KB/s; got {text!r}")
    return (
        (int(m.group(1)), int(m.group(2))),
        (parse_duration(m.group(3).strip()), parse_rate(m.group(4).strip())),
    )


def topology_from_args(args) -> Topology:
    """The topology that ``wacoll testbed up`` options describe."""
    if args.topology:
        if args.latency is not None or args.bandwidth is not None or args.pair:
            raise TestbedError(
                "give link parameters in the topology file, not with --topology"
            )
        topo = Topology.from_file(args.topology)
        if args.node_bandwidth is not None:
            data = topo.to_dict()
            data["node_bandwidth"] = [args.node_bandwidth] * topo.size
            topo = Topology.from_dict(data)
        return topo
    links = {}
    if args.latency is not None:
        links["wan_latency"] = args.latency
    if args.bandwidth is not None:
        links["wan_bandwidth"] = args.bandwidth
    if args.pair:
        links["wan_pairs"] = dict(args.pair)
    if args.node_bandwidth is not None:
        links["node_bandwidth"] = [args.node_bandwidth] * sum(args.clusters)
    if args.intra_latency is not None:
        links["intra_latency"] = args.intra_latency
    return Topology.from_sizes(args.clusters, **links)


def add_testbed_parser(subparsers) -> None:
    """Add ``testbed`` and its subcommands to the ``wacoll`` command's subparsers."""
    from wacoll.cli.args import parse_clusters

    p = subparsers.add_parser(
        "testbed",
        help="emulate a multi-cluster network on this machine (root)",
        description="Build an emulated wide-area testbed (one network namespace per "
        "cluster, links with one-way latency and rate), run MPI programs on "
        "it, check it, tear it down. Needs root and /dev/net/tun.",
    )
    sub = p.add_subparsers(dest="testbed_command", required=True)
    name_help = "testbed name (default: tb)"

    up = sub.add_parser(
        "up",
        help="build a testbed, check it, keep it up",
        description="Build a testbed, print its self-check, and keep it up "
        "until Ctrl-C (or leave it up with --detach).",
    )
    where = up.add_mutually_exclusive_group()
    where.add_argument(
        "--clusters",
        type=parse_clusters,
        default=[2, 2],
        help="cluster sizes: 4x2 or 2,3 (default: 2x2)",
    )
    where.add_argument("--topology", help="a topology file (.toml or .json)")
    up.add_argument(
        "--latency",
        type=_arg(parse_duration),
        help="one-way wide-area latency, e.g. 10ms (default: the topology's)",
    )
    up.add_argument(
        "--bandwidth",
        type=_arg(parse_rate),
        help="wide-area rate, e.g. 1MB/s or 100Mbit/s",
    )
    up.add_argument(
        "--pair",
        type=_arg(parse_pair),
        action="append",
        metavar="A:B=LAT,RATE",
        help="override one directed cluster pair, e.g. 0:1=20ms,500KB/s (repeatable)",
    )
    up.add_argument(
        "--uplink",
        action="store_true",
        help="one shared uplink queue per cluster instead of one per pair",
    )
    up.add_argument(
        "--node-bandwidth",
        type=_arg(parse_rate),
        metavar="RATE",
        help="per-node link rate: one namespace per rank",
    )
    up.add_argument(
        "--intra-latency",
        type=_arg(parse_duration),
        help="latency inside a cluster (per-node testbeds only)",
    )
    up.add_argument(
        "--netem",
        choices=["auto", "relay", "netem"],
        default="auto",
        help="link emulation: kernel netem, userspace relay, or auto",
    )
    up.add_argument(
        "--mtu",
        type=int,
        help="data MTU (default: about 1 ms of the slowest link, 1500..65000)",
    )
    up.add_argument(
        "--queue",
        type=_arg(parse_size),
        metavar="BYTES",
        help="queue limit per link, e.g. 256KiB (drop tail)",
    )
    up.add_argument(
        "--time-limit",
        type=_arg(parse_duration),
        default=24 * 3600.0,
        help="tear down after this long, e.g. 2h (default: 24h)",
    )
    up.add_argument(
        "--netmod",
        choices=["ucx", "ofi"],
        default="ucx",
        help="default MPICH transport for 'run' (default: ucx)",
    )
    up.add_argument(
        "--idle",
        choices=["auto", "yield", "poll"],
        default="auto",
        help="waiting ranks sleep between polls (yield) or spin (poll); "
        "auto: yield when ranks outnumber cores (default)",
    )
    up.add_argument("--name", default="tb", help=name_help)
    up.add_argument(
        "--detach",
        action="store_true",
        help="leave the testbed up and return (state in /run/wacoll/NAME.json)",
    )
    up.add_argument("--no-check", action="store_true", help="skip the self-check")
    up.set_defaults(run=_cmd_up)

    run = sub.add_parser(
        "run",
        help="run an MPI program on a testbed that is up",
        description="Run a program under mpiexec with each cluster's ranks "
        "in its namespace: wacoll testbed run -- python x.py",
    )
    run.add_argument("--name", default="tb", help=name_help)
    run.add_argument(
        "--timeout",
        type=_arg(parse_duration),
        default=600.0,
        help="stop the run after this long (default: 10min)",
    )
    run.add_argument(
        "--netmod",
        choices=["ucx", "ofi"],
        help="MPICH transport (default: the testbed's)",
    )
    run.add_argument(
        "command_argv",
        nargs=argparse.REMAINDER,
        metavar="-- COMMAND",
        help="the program and its arguments, after --",
    )
    run.set_defaults(run=_cmd_run)

    check = sub.add_parser("check", help="measure a testbed that is up")
    check.add_argument("--name", default="tb", help=name_help)
    check.add_argument("--json", action="store_true", help="print JSON")
    check.set_defaults(run=_cmd_check)

    down = sub.add_parser("down", help="tear a testbed down (harmless if it is gone)")
    down.add_argument("--name", default="tb", help=name_help)
    down.set_defaults(run=_cmd_down)

    lst = sub.add_parser("list", help="list the testbeds on this machine")
    lst.set_defaults(run=_cmd_list)

    clean = sub.add_parser(
        "clean",
        help="tear down every wacoll testbed on this "
        "machine, live or leftover: namespaces, "
        "watchdogs and state files",
    )
    clean.set_defaults(run=_cmd_clean)


def command_of(args) -> list:
    """The program of ``wacoll testbed run``, without the ``--`` before it."""
    argv = list(args.command_argv or [])
    return argv[1:] if argv[:1] == ["--"] else argv


def parse_size(text: str) -> int:
    """Bytes from ``"256KiB"``, ``"1MB"``, ``"65536B"``.

    Examples
    --------
    >>> parse_size("256KiB"), parse_size("2MB")
    (262144, 2000000)
    """
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*(B|KB|MB|GB|KiB|MiB|GiB)\s*", text)
    if not m:
        raise TestbedError(f"a size looks like 256KiB or 2MB; got {text!r}")
    scale = {
        "B": 1,
        "KB": 1e3,
        "MB": 1e6,
        "GB": 1e9,
        "KiB": 1024,
        "MiB": 1024**2,
        "GiB": 1024**3,
    }[m.group(2)]
    return int(float(m.group(1)) * scale)


def _describe(tb) -> str:
    topo = tb.topology
    sizes = [len(c) for c in topo.clusters]
    pairs = "per directed pair" if not tb.uplink else "one shared uplink per cluster"
    lines = [
        f"testbed {tb.name}: {topo.nclusters} clusters {sizes}, backend {tb.backend}, "
        f"MTU {tb.mtu}, queues {pairs}"
        + (", one namespace per node" if tb.per_node else ""),
        f"wide area: {format_duration(topo.wan.latency)} one-way, "
        f"{format_rate(topo.wan.bandwidth)}"
        + (f" ({len(topo.wan_pairs)} pair overrides)" if topo.wan_pairs else ""),
        f"transport: {tb.transport}; relay real-time priority: "
        f"{'yes' if tb.realtime_granted else 'no'}",
    ]
    return "\n".join(lines)


def _cmd_up(args) -> int:
    from wacoll.emulate import Testbed

    topo = topology_from_args(args)
    tb = Testbed(
        topo,
        name=args.name,
        netem=args.netem,
        uplink=args.uplink,
        mtu=args.mtu or "auto",
        queue_bytes=args.queue,
        time_limit=args.time_limit,
        netmod=args.netmod,
        idle=args.idle,
    )
    tb.start(check=False, detach=args.detach)
    try:
        print(_describe(tb))
        if not args.no_check:
            report = tb.check()
            if not report.ok:
                report = tb.check()
            print(report.table())
        if args.detach:
            print(
                f"left up; state in {tb.state_file}; "
                f"'wacoll testbed run --name {tb.name} -- python script.py', "
                f"'wacoll testbed down --name {tb.name}'"
            )
            return 0
        print(
            f"up; 'wacoll testbed run --name {tb.name} -- ...' in another shell; "
            f"Ctrl-C takes it down",
            flush=True,
        )
        _wait_for_interrupt()
    finally:
        if not args.detach:
            tb.stop()
            print(f"testbed {tb.name} down")
    return 0


def _wait_for_interrupt() -> None:
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *a: stop.set())
    try:
        while not stop.wait(3600):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)


def _cmd_run(args) -> int:
    from wacoll.emulate import Testbed

    argv = command_of(args)
    if not argv:
        raise TestbedError(
            "give the program to run after --, e.g. "
            "wacoll testbed run -- python script.py"
        )
    tb = Testbed.attach(args.name)
    result = tb.run(argv, timeout=args.timeout, netmod=args.netmod, capture=False)
    print(
        f"wacoll testbed {tb.name}: transport {result.transport}, "
        f"{result.elapsed:.2f} s"
        + (
            ", TIME LIMIT REACHED"
            if result.timed_out
            else f", exit status {result.returncode}"
        ),
        file=sys.stderr,
    )
    return 124 if result.timed_out else result.returncode


def _cmd_check(args) -> int:
    from wacoll.emulate import Testbed

    tb = Testbed.attach(args.name)
    report = tb.check()
    if args.json:
        print(json.dumps(report.as_dict(), indent=1))
    else:
        print(report.table())
    return 0 if report.ok else 1


def _cmd_down(args) -> int:
    from wacoll.emulate import teardown
    from wacoll.emulate.netns import valid_name

    removed = teardown(valid_name(args.name))
    print(
        f"testbed {args.name}: removed {len(removed)} items"
        if removed
        else f"testbed {args.name}: nothing to remove"
    )
    return 0


def _cmd_list(args) -> int:
    from wacoll.emulate import list_testbeds

    names = list_testbeds()
    for name in names:
        print(name)
    if not names:
        print(
            "no wacoll testbed on this machine; 'wacoll testbed up --clusters 2x2 "
            "--latency 10ms --bandwidth 1MB/s --detach' starts one"
        )
    return 0


def _cmd_clean(args) -> int:
    from wacoll.emulate import clean

    removed = clean()
    for item in removed:
        print(f"removed {item}")
    if not removed:
        print("nothing to remove")
    return 0
