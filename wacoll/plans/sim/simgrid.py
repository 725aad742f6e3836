"""A second simulator: a plan's per-rank programs run as SimGrid actors.

SimGrid (https://simgrid.org) is the established simulator of MPI programs on
multi-cluster platforms; its flow model shares every link between the messages in
flight on it, max-min fairly. :func:`simulate_simgrid` builds a SimGrid platform from
a :class:`~wacoll.Topology` (:func:`platform_description`), runs each rank's program
of a plan as an actor (sends as eager mailbox puts, receives as gets, the
arrival-order groups of ``recv_combine`` steps as a ``wait_any`` loop) and returns
when each rank finished: a prediction made without any of
:mod:`wacoll.plans.sim`'s engine, to hold :class:`~wacoll.plans.sim.LinkModel`
against (``benchmarks/bench_simgrid.py``).

Install SimGrid's Python bindings with ``tools/install_simgrid.sh`` (Debian's
``python3-simgrid``, made importable from the project's environment, in seconds),
or elsewhere with ``pip install simgrid`` (built from source, in many minutes). This module imports without them; using
it without them raises :class:`~wacoll.errors.SimGridUnavailable`, which says how to
install them. A SimGrid engine runs once per process, so each simulation runs in a
child Python process (``sys.executable``), which gets the platform and the programs
as JSON on its standard input.

The platform mirrors :class:`~wacoll.plans.sim.LinkModel`'s assumptions:

* one host per rank, with its own outgoing link ``up<r>`` (latency 0, bandwidth the
  rank's node rate, :meth:`~wacoll.plans.sim.LinkModel.nodecheck_rate`), shared by
  the messages it has in flight;
* per cluster a LAN link ``lan<c>`` (the intra-cluster latency), the cluster's
  switch: non-blocking, as LinkModel takes it, so its bandwidth is the sum of
  every rate that can cross it (its ranks' node rates and the wide-area links into
  the cluster) and it is never the bottleneck; receivers are not one either.
  (SimGrid's *fat pipe* sharing would say the same, but its max-min weights flows
  by their routes' latencies: a short intra-cluster message crossing a fat pipe
  would all but stop the wide-area flows crossing it too);
* per directed cluster pair ``(a, b)`` a wide-area link ``wan<a>-<b>`` with the
  topology's bandwidth (:meth:`~wacoll.Topology.wan_link`), shared max-min fairly
  between the messages on it. Within a cluster a route is ``up<r>, lan<c>``; across
  clusters ``up<r>, wan<a>-<b>, lan<b>``. The topology's wide-area latency is the
  one-way latency between ranks of the two clusters, so the wide-area link gets it
  less the LAN's (never below 0): every route's latency is the topology's.

The network model is SimGrid's plain max-min ``CM02`` with its TCP corrections off
(no cross traffic, no window bound, weight-S 0): a message of ``b`` bytes alone on its
route takes ``latency + b / bandwidth``, as in the topology.

The actors follow :class:`~wacoll.plans.sim.LinkModel`'s rules for ranks: a rank runs
its steps in program order; a send costs the model's ``overhead``, then the message
is handed to the network at once (an eager put: it never waits for its receiver),
and the rank stays busy ``b / node_rate``; with ``buffered=False`` it waits for the
message to be delivered instead. A receive waits for its message, then costs
``recv_overhead`` (plus ``b / compute_rate`` to combine); copies and combines cost
``b / compute_rate``. The k-th send from ``a`` to ``b`` meets ``b``'s k-th receive
from ``a`` (a mailbox per ordered pair).

Where the two simulators differ by design (see ``docs/guide/simgrid.rst``):

* SimGrid spends a route's latency before the first byte moves, LinkModel after the
  last byte crossed: the same time for a message alone, but flows that overlap
  share a link during slightly different intervals;
* a wide-area message still crossing its link keeps a share of its sender's
  ``up`` link in SimGrid, so the sender's next messages leave slower; LinkModel
  takes the bytes as buffered beyond the sender (MagPIe's assumption);
* with ``buffered=False`` a SimGrid sender waits until its message is delivered
  (one latency later than LinkModel's, which waits for the last byte to cross).
* SimGrid's flows of one pair of ranks share their route like any others, as
  ``LinkModel(ordered=False)`` has them (LinkModel's default sends a pair's
  messages one after the other); LinkModel's ``window`` (bursts) and
  ``wan_capacity`` (the links' capacity together) have no counterpart here.

Examples
--------
>>> from wacoll import Topology
>>> from wacoll.plans import build
>>> from wacoll.plans.sim import LinkModel, simulate
>>> from wacoll.plans.sim.simgrid import simulate_simgrid
>>> topo = Topology.from_sizes([2, 2], wan_latency=0.01, wan_bandwidth=1e6)
>>> plan = build("bcast", topo, "magpie", count=65536)
>>> round(simulate(plan, LinkModel(topo)).completion, 6)
0.075612
>>> round(simulate_simgrid(plan, LinkModel(topo)).completion, 6)
0.075612
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass

from wacoll.errors import PlanError, SimGridUnavailable
from wacoll.plans.sim.models import LinkModel
from wacoll.topology import Topology

__all__ = [
    "simulate_simgrid",
    "platform_description",
    "routes",
    "simgrid_unavailable",
    "SimGridResult",
    "INSTALL_HINT",
]

#: How to install SimGrid's Python bindings for wacoll.
INSTALL_HINT = (
    "install SimGrid's Python bindings: tools/install_simgrid.sh (Debian's "
    "python3-simgrid, for Python 3.11, made importable from the project's "
    "environment; seconds), or elsewhere SimGrid's own pip install simgrid "
    "(built from source: cmake, a C++ compiler, Boost; many minutes)"
)

#: SimGrid's configuration: the plain max-min model, TCP corrections off, quiet.
CONFIG = (
    "network/model:CM02",
    "network/latency-factor:1",
    "network/bandwidth-factor:1",
    "network/crosstraffic:0",
    "network/TCP-gamma:0",
    "network/weight-S:0",
    "surf/precision:1e-11",
    "maxmin/precision:1e-8",
)


@dataclass(frozen=True)
class SimGridResult:
    """What :func:`simulate_simgrid` predicts.

    Attributes
    ----------
    completion : float
        When the last rank finished its program, in seconds.
    finish : tuple of float
        When each rank finished its program (a sender is done when its last message
        is handed over and its node rate has passed its bytes, as under
        :class:`~wacoll.plans.sim.LinkModel`).
    arrivals : tuple of float
        When each message (in :meth:`~wacoll.plans.Plan.messages` order) was
        delivered, as :attr:`wacoll.plans.sim.SimResult.arrivals`.
    messages : int
        Messages simulated.
    wall : float
        Seconds the child process took (build, run, report).
    version : str
        SimGrid's version.
    """

    completion: float
    finish: tuple
    arrivals: tuple
    messages: int
    wall: float
    version: str


@functools.cache
def simgrid_unavailable() -> str | None:
    """Why SimGrid's Python bindings cannot be used here, or None when they can.

    It imports ``simgrid`` in a child process (an import in this one would print
    SimGrid's start-up line and pin one engine to the process). The answer is cached;
    ``simgrid_unavailable.cache_clear()`` forgets it.

    Examples
    --------
    >>> reason = simgrid_unavailable()
    >>> reason is None or "install" in reason
    True
    """
    try:
        _child({"probe": True}, timeout=60)
    except SimGridUnavailable as exc:
        return str(exc) or None
    return None


def platform_description(topology: Topology, model: LinkModel | None = None) -> dict:
    """The SimGrid platform of ``topology``, as plain data (see the module notes).

    Returns
    -------
    dict
        ``clusters`` (the ranks of each), ``up`` (per rank: bandwidth), ``lan`` (per
        cluster: ``[latency, bandwidth]``; twice what can cross it), ``wan``
        (``[a, b, latency, bandwidth]`` per directed pair of clusters; the latency
        less the LAN's), all in seconds and bytes/s.

    Examples
    --------
    >>> from wacoll import Topology
    >>> p = platform_description(Topology.from_sizes([1, 2], wan_latency=0.01,
    ...                                              wan_bandwidth=1e6))
    >>> p["clusters"], p["up"], p["wan"][0]
    ([[0], [1, 2]], [1000000000.0, 1000000000.0, 1000000000.0], [0, 1, 0.00999, 1000000.0])
    >>> p["lan"]  # 2 x (node rates + wide-area links in): never the bottleneck
    [[1e-05, 2002000000.0], [1e-05, 4002000000.0]]
    """
    if not isinstance(topology, Topology):
        raise PlanError("platform_description needs a wacoll.Topology")
    model = model or LinkModel(topology)
    rates = [model.nodecheck_rate(r) for r in range(topology.size)]
    lat = topology.intra.latency
    m = topology.nclusters
    wan, into = [], [0.0] * m
    for a in range(m):
        for b in range(m):
            if a != b:
                link = topology.wan_link(a, b)
                wan.append([a, b, max(0.0, link.latency - lat), float(link.bandwidth)])
                into[b] += link.bandwidth
    lan = [
        [lat, 2.0 * (sum(rates[r] for r in members) + into[c])]
        for c, members in enumerate(topology.clusters)
    ]
    return {
        "clusters": [list(c) for c in topology.clusters],
        "up": rates,
        "lan": lan,
        "wan": wan,
    }


def _programs(plan, model):
    """Per rank, its steps as JSON-ready rows (see :func:`_actor`)."""
    messages = plan.messages()
    by_send, by_recv = {}, {}
    for k, m in enumerate(messages):
        by_send[m.src, m.send_step] = k, m
        by_recv[m.dst, m.recv_step] = m
    ro, rate = model.recv_overhead, model.compute_rate
    rates = [model.nodecheck_rate(r) for r in range(plan.size)]

    def work(nbytes):
        return nbytes / rate if rate else 0.0

    out = []
    for r, prog in enumerate(plan.programs):
        rows, i = [], 0
        while i < len(prog):
            s = prog[i]
            if s.kind == "send":
                k, m = by_send[r, i]
                rows.append(["s", s.peer, m.nbytes, m.nbytes / rates[r], k])
            elif s.kind in ("recv", "recv_combine"):
                j = i + 1
                if s.group:
                    while j < len(prog) and prog[j].group == s.group:
                        j += 1
                cost = [
                    ro
                    + (
                        work(by_recv[r, x].nbytes)
                        if prog[x].kind == "recv_combine"
                        else 0.0
                    )
                    for x in range(i, j)
                ]
                if j - i > 1:
                    rows.append(
                        ["g", [[prog[x].peer, c] for x, c in zip(range(i, j), cost)]]
                    )
                else:
                    rows.append(["r", s.peer, cost[0]])
                i = j
                continue
            else:
                rows.append(["l", work(plan.nbytes(s.blocks))])
            i += 1
        out.append(rows)
    return out, len(messages)


def simulate_simgrid(
    plan, model: LinkModel | None = None, *, timeout: float | None = 600
) -> SimGridResult:
    """Run ``plan``'s programs on SimGrid over ``model``'s topology.

    Parameters
    ----------
    plan : Plan
        Checked first (:meth:`~wacoll.plans.Plan.prove`).
    model : LinkModel, optional
        Its topology, ``overhead``, ``recv_overhead``, ``compute_rate`` and
        ``buffered`` are used; ``ordered``, ``window`` and ``wan_capacity`` are not
        (see the module notes). Default: ``LinkModel`` over
        the plan's clusters with :class:`~wacoll.Topology`'s default links, as
        :func:`~wacoll.plans.sim.simulate` does.
    timeout : float, optional
        Seconds the child process may take.

    Returns
    -------
    SimGridResult

    Raises
    ------
    SimGridUnavailable
        SimGrid's Python bindings are not installed (the message says how to), or
        the child process failed.

    Examples
    --------
    A 64 KiB message over MagPIe's wide area (10 ms, 1 MB/s), as
    :class:`~wacoll.plans.sim.LinkModel`'s example:

    >>> from wacoll import Topology
    >>> from wacoll.plans import build
    >>> from wacoll.plans.sim import LinkModel
    >>> topo = Topology.from_sizes([1, 1], wan_latency=0.01, wan_bandwidth=1e6)
    >>> plan = build("bcast", topo, "tree", tree="flat", count=65536)
    >>> round(simulate_simgrid(plan, LinkModel(topo)).completion, 6)  # doctest: +SKIP
    0.075536
    """
    from wacoll.plans.plan import Plan

    if not isinstance(plan, Plan):
        raise PlanError("simulate_simgrid needs a wacoll Plan")
    if model is None:
        members: dict[int, list[int]] = {}
        for r, c in enumerate(plan.clusters):
            members.setdefault(c, []).append(r)
        model = LinkModel(Topology.from_clusters([members[c] for c in sorted(members)]))
    elif not isinstance(model, LinkModel):
        raise PlanError(f"simulate_simgrid needs a LinkModel, got {type(model).__name__}")
    model.validate_plan(plan)
    plan.prove()
    programs, nmsg = _programs(plan, model)
    request = {
        "platform": platform_description(model.topology, model),
        "programs": programs,
        "overhead": model.overhead,
        "buffered": model.buffered,
    }
    t0 = time.monotonic()
    out = _child(request, timeout=timeout)
    finish = tuple(out["finish"])
    return SimGridResult(
        completion=max(finish),
        finish=finish,
        arrivals=tuple(out["arrivals"]),
        messages=nmsg,
        wall=time.monotonic() - t0,
        version=out["version"],
    )


def routes(topology: Topology, pairs) -> dict:
    """The SimGrid route of each ``(src, dst)`` rank pair on ``topology``'s platform.

    Returns ``{(src, dst): (links, latency, bandwidth)}``: the names of the links
    crossed, the route's latency (their sum) and its bandwidth (the smallest).

    Examples
    --------
    >>> from wacoll import Topology
    >>> r = routes(Topology.from_sizes([2, 2]), [(0, 1), (0, 2)])
    >>> r[0, 1][0], r[0, 2][0], r[0, 2][1:]
    (['up0', 'lan0'], ['up0', 'wan0-1', 'lan1'], (0.01, 1000000.0))
    """
    out = _child(
        {"platform": platform_description(topology), "routes": [list(p) for p in pairs]},
        timeout=120,
    )
    return {(a, b): (links, lat, bw) for a, b, links, lat, bw in out["routes"]}


# ------------------------------------------------------------------ the child process
def _child(request, timeout):
    """Run :func:`_child_main` in a child Python with ``request``; its JSON answer."""
    code = "from wacoll.plans.sim.simgrid import _child_main; _child_main()"
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code],
            input=json.dumps(request),
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )
    except subprocess.TimeoutExpired:
        raise SimGridUnavailable(
            f"the SimGrid simulation took longer than {timeout} s"
        ) from None
    if proc.returncode == 3:
        raise SimGridUnavailable(
            f"SimGrid's Python bindings are not importable from "
            f"{sys.executable} ({proc.stdout.strip()}); "
            f"{INSTALL_HINT}"
        )
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-8:])
        raise SimGridUnavailable(
            f"the SimGrid simulation failed (exit status {proc.returncode}): {tail}"
        )
    return json.loads(proc.stdout)


def _import_quietly():
    """``import simgrid`` with its start-up line (on file descriptor 2) discarded."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            import simgrid  # noqa: PLC0415 (optional dependency)
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    return simgrid


def _child_main():
    """The child process: read a request on stdin, answer JSON on stdout."""
    try:
        sg = _import_quietly()
    except ImportError as exc:
        print(f"{type(exc).__name__}: {exc}")
        sys.exit(3)
    request = json.loads(sys.stdin.read())
    version = (
        ".".join(map(str, sg.simgrid_version))
        if isinstance(sg.simgrid_version, (tuple, list))
        else str(sg.simgrid_version)
    )
    if request.get("probe"):
        print(json.dumps({"version": version}))
        return
    engine = sg.Engine(
        ["wacoll"] + [f"--cfg={c}" for c in CONFIG] + ["--log=root.thres:critical"]
    )
    hosts = _build_platform(sg, request["platform"])
    if "routes" in request:
        out = []
        for a, b in request["routes"]:
            links, latency = hosts[a].route_to(hosts[b])
            out.append(
                [a, b, [x.name for x in links], latency, min(x.bandwidth for x in links)]
            )
        print(json.dumps({"routes": out, "version": version}))
        return
    finish, arrivals = _run(sg, engine, hosts, request)
    print(json.dumps({"finish": finish, "arrivals": arrivals, "version": version}))


def _build_platform(sg, p):
    """Zones, hosts, links and routes of :func:`platform_description`'s ``p``."""
    root = sg.NetZone.create_full_zone("grid")
    zones, gateways, hosts = [], [], {}
    for c, members in enumerate(p["clusters"]):
        zone = sg.NetZone.create_star_zone(f"cluster{c}")
        zone.set_parent(root)
        lat, bw = p["lan"][c]
        lan = zone.create_link(f"lan{c}", bw).set_latency(lat)
        down = [sg.LinkInRoute(lan)]
        for r in members:
            host = zone.create_host(f"r{r}", 1e9)
            up = zone.create_link(f"up{r}", p["up"][r]).set_latency(0.0)
            zone.add_route(host.netpoint, None, None, None, [sg.LinkInRoute(up)], False)
            zone.add_route(None, host.netpoint, None, None, down, False)
            hosts[r] = host
        gw = zone.create_router(f"gw{c}")
        zone.add_route(gw, None, None, None, [], False)
        zone.add_route(None, gw, None, None, [], False)
        zone.seal()
        zones.append(zone)
        gateways.append(gw)
    for a, b, lat, bw in p["wan"]:
        link = root.create_link(f"wan{a}-{b}", bw).set_latency(lat)
        root.add_route(
            zones[a].netpoint,
            zones[b].netpoint,
            gateways[a],
            gateways[b],
            [sg.LinkInRoute(link)],
            False,
        )
    root.seal()
    return hosts


def _run(sg, engine, hosts, request):
    """Run every rank's program as an actor; each rank's finish time."""
    programs, overhead, buffered = (
        request["programs"],
        request["overhead"],
        request["buffered"],
    )
    finish = [0.0] * len(programs)
    arrivals = [None] * sum(row[0] == "s" for rows in programs for row in rows)
    boxes = {}

    def box(a, b):
        mb = boxes.get((a, b))
        if mb is None:
            mb = boxes[a, b] = sg.Mailbox.by_name(f"{a}>{b}")
        return mb

    def actor(rank, rows):
        sleep, pending = sg.this_actor.sleep_for, []
        for row in rows:
            kind = row[0]
            if kind == "s":
                _, peer, nbytes, busy, k = row
                if overhead:
                    sleep(overhead)
                comm = box(rank, peer).put_async(rank, nbytes)
                pending.append((k, comm))
                if buffered:
                    if busy:
                        sleep(busy)
                else:
                    comm.wait()
            elif kind == "r":
                box(row[1], rank).get()
                if row[2]:
                    sleep(row[2])
            elif kind == "g":  # served in arrival order
                comms, costs = [], []
                for peer, cost in row[1]:
                    comms.append(box(peer, rank).get_async()[0])
                    costs.append(cost)
                while comms:
                    k = sg.Comm.wait_any(comms)
                    comms.pop(k)
                    cost = costs.pop(k)
                    if cost:
                        sleep(cost)
            elif row[1]:
                sleep(row[1])
        finish[rank] = engine.clock
        for k, comm in pending:
            comm.wait()
            arrivals[k] = comm.finish_time

    actors = [
        sg.Actor.create(f"rank{r}", hosts[r], actor, r, rows)
        for r, rows in enumerate(programs)
    ]
    # eager delivery: a message flows as soon as it is sent, its receiver ready or not
    for r, rows in enumerate(programs):
        for row in rows:
            if row[0] == "s":
                box(r, row[1]).set_receiver(actors[row[1]])
    engine.run()
    return finish, arrivals
