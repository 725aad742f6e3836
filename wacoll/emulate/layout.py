"""Where each rank runs and which queues a packet crosses: a testbed's plan.

A :class:`Layout` turns a :class:`wacoll.Topology` into *endpoints* (one network
namespace each: a whole cluster, or a single rank when per-node link rates are
emulated) and *paths*: for every ordered pair of endpoints, the queues a packet
crosses, each with a rate (bytes/s, FIFO) and the one-way latency after it.

* Per directed cluster pair (the default), each pair ``(a, b)`` of clusters has its own
  queue at ``topology.link`` rate, followed by its latency.
* With ``uplink=True`` each cluster has one shared egress queue (the uplink), at the
  slowest of its outgoing wide-area rates; each pair keeps its own latency.
* Per node, each rank has an egress and an ingress queue at its
  ``topology.node_bandwidth`` (or the intra-cluster bandwidth); traffic inside a cluster
  crosses them and the intra-cluster latency, traffic between clusters crosses the
  sender's egress, the wide-area queue and the receiver's ingress.

Per cluster (no per-node rates), traffic inside a cluster never leaves its namespace:
MPI keeps its shared-memory path and ``topology.intra`` is not emulated.

Examples
--------
>>> from wacoll import Topology
>>> lay = Layout.build(Topology.from_sizes([2, 2], wan_latency=0.01, wan_bandwidth=1e6), "tb")
>>> [(e.ns, e.data_addr, e.ranks) for e in lay.endpoints]
[('wacoll-tb-c0', '10.77.0.1', (0, 1)), ('wacoll-tb-c1', '10.77.1.1', (2, 3))]
>>> lay.paths[(0, 1)], lay.queues[0].rate
([(0, 0.01)], 1000000.0)
>>> lay.expected(0, 1, 1500)
(0.0115, 1000000.0)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from wacoll.emulate.netns import control_address, data_address, netns_name
from wacoll.errors import TestbedError
from wacoll.topology import Topology

__all__ = ["Endpoint", "QueueSpec", "Layout", "auto_mtu", "MIN_QUEUE_BYTES"]

#: A queue holds at least this much backlog, and at least ``QUEUE_SECONDS`` of traffic.
MIN_QUEUE_BYTES = 256 * 1024
QUEUE_SECONDS = 0.2


@dataclass(frozen=True)
class Endpoint:
    """One namespace: a cluster (``node`` None) or one rank of it."""

    index: int
    cluster: int
    node: int | None
    ns: str
    data_addr: str
    ctl_addr: str
    ranks: tuple


@dataclass(frozen=True)
class QueueSpec:
    """A FIFO queue: ``rate`` bytes/s, drop tail beyond ``limit`` bytes of backlog."""

    rate: float
    limit: int
    label: str


def auto_mtu(min_rate: float) -> int:
    """An MTU whose serialisation takes about 1 ms on the slowest link (1500..65000).

    Small on slow links, so a short message never waits long behind a full packet;
    large on fast ones, so the relay handles fewer packets.

    Examples
    --------
    >>> auto_mtu(1e6), auto_mtu(1e8), auto_mtu(1e10)
    (1500, 65000, 65000)
    """
    return int(min(65000, max(1500, min_rate * 1e-3)))


def _queue_limit(rate, queue_bytes):
    if queue_bytes is not None:
        return int(queue_bytes)
    return int(max(MIN_QUEUE_BYTES, rate * QUEUE_SECONDS))


@dataclass
class Layout:
    """Endpoints, queues and paths of a testbed (see the module docstring)."""

    name: str
    topology: Topology
    per_node: bool
    uplink: bool
    endpoints: list
    queues: list
    paths: dict = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        topology: Topology,
        name: str,
        *,
        per_node: bool = False,
        uplink: bool = False,
        queue_bytes: int | None = None,
    ) -> Layout:
        """Plan a testbed for ``topology`` (see the module docstring)."""
        if not isinstance(topology, Topology):
            raise TestbedError("a testbed needs a wacoll.Topology")
        if topology.nclusters > 256:
            raise TestbedError(
                f"at most 256 clusters; the topology has {topology.nclusters}"
            )
        endpoints: list[Endpoint] = []
        for c, ranks in enumerate(topology.clusters):
            if per_node:
                if len(ranks) > 254:
                    raise TestbedError(
                        f"cluster {c} has {len(ranks)} ranks; at most 254 "
                        f"per cluster with per-node rates"
                    )
                for n, r in enumerate(ranks):
                    endpoints.append(
                        Endpoint(
                            len(endpoints),
                            c,
                            n,
                            netns_name(name, c, n),
                            data_address(c, n),
                            control_address(len(endpoints)),
                            (r,),
                        )
                    )
            else:
                endpoints.append(
                    Endpoint(
                        c,
                        c,
                        None,
                        netns_name(name, c),
                        data_address(c),
                        control_address(c),
                        tuple(ranks),
                    )
                )
        layout = cls(name, topology, per_node, uplink, endpoints, [])
        layout._plan_paths(queue_bytes)
        return layout

    def _add_queue(self, rate, label, queue_bytes):
        self.queues.append(QueueSpec(float(rate), _queue_limit(rate, queue_bytes), label))
        return len(self.queues) - 1

    def _plan_paths(self, queue_bytes):
        topo = self.topology
        k = topo.nclusters
        wan = {}
        if self.uplink:
            for a in range(k):
                rates = [self._pair(a, b).bandwidth for b in range(k) if b != a]
                if rates:
                    q = self._add_queue(min(rates), f"uplink c{a}", queue_bytes)
                    for b in range(k):
                        if b != a:
                            wan[a, b] = q
        else:
            for a in range(k):
                for b in range(k):
                    if a != b:
                        wan[a, b] = self._add_queue(
                            self._pair(a, b).bandwidth, f"c{a}->c{b}", queue_bytes
                        )
        egress, ingress = {}, {}
        if self.per_node:
            for e in self.endpoints:
                rate = (
                    topo.node_bandwidth[e.ranks[0]]
                    if topo.node_bandwidth is not None
                    else topo.intra.bandwidth
                )
                egress[e.index] = self._add_queue(rate, f"{e.ns} out", queue_bytes)
                ingress[e.index] = self._add_queue(rate, f"{e.ns} in", queue_bytes)
        for s in self.endpoints:
            for d in self.endpoints:
                if s.index == d.index:
                    continue
                path = []
                if s.cluster == d.cluster:
                    path = [
                        (egress[s.index], 0.0),
                        (ingress[d.index], topo.intra.latency),
                    ]
                else:
                    lat = self._pair(s.cluster, d.cluster).latency
                    if self.per_node:
                        path.append((egress[s.index], 0.0))
                    path.append((wan[s.cluster, d.cluster], lat))
                    if self.per_node:
                        path.append((ingress[d.index], 0.0))
                self.paths[s.index, d.index] = path

    def _pair(self, a, b):
        return self.topology.link(
            self.topology.clusters[a][0], self.topology.clusters[b][0]
        )

    # ----------------------------------------------------------------- queries
    @property
    def namespaces(self) -> list:
        """Every endpoint namespace, in endpoint order."""
        return [e.ns for e in self.endpoints]

    @property
    def min_rate(self) -> float:
        """The slowest queue's rate (bytes/s)."""
        return min((q.rate for q in self.queues), default=float("inf"))

    def endpoint_of_rank(self) -> list:
        """The endpoint index of each rank."""
        where = [0] * self.topology.size
        for e in self.endpoints:
            for r in e.ranks:
                where[r] = e.index
        return where

    def expected(self, src: int, dst: int, nbytes: int):
        """Configured one-way time of an ``nbytes`` IP packet, and path rate (bytes/s)."""
        path = self.paths[src, dst]
        latency = sum(lat + nbytes / self.queues[q].rate for q, lat in path)
        return latency, min(self.queues[q].rate for q, _ in path)

    def probe_pairs(self) -> list:
        """Endpoint pairs the self-check measures: every directed cluster pair (first
        endpoint of each cluster) and, per node, one pair inside each cluster."""
        first: dict[int, Endpoint] = {}
        for e in self.endpoints:
            first.setdefault(e.cluster, e)
        pairs = [(first[a].index, first[b].index) for a in first for b in first if a != b]
        if self.per_node:
            for c, e in first.items():
                second = next(
                    (x for x in self.endpoints if x.cluster == c and x is not e), None
                )
                if second is not None:
                    pairs.append((e.index, second.index))
        return pairs

    def relay_config(self) -> dict:
        """The part of the relay's JSON configuration that describes the network."""
        from wacoll.emulate.netns import TUN_NAME

        return {
            "endpoints": [
                {"ns": e.ns, "tun": TUN_NAME, "addr": e.data_addr} for e in self.endpoints
            ],
            "queues": [{"rate": q.rate, "limit": q.limit} for q in self.queues],
            "paths": [
                [s, d, [[q, lat] for q, lat in path]]
                for (s, d), path in sorted(self.paths.items())
            ],
        }
