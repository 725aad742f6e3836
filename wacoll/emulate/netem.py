"""The kernel backend: links emulated by the ``netem`` qdisc in a router namespace.

Where the kernel has netem, the cluster namespaces are joined by a router namespace
(``wacoll-NAME-wan``) instead of the userspace relay. Each cluster namespace has a
veth ``wcwan`` carrying its data address, with the data network routed to the
router (``169.254.77.1``, the address of every router port). On the router, the port
towards cluster ``b`` has an HTB root with one class per source cluster ``a``
(matched on the source subnet ``10.77.a.0/24``) whose leaf is
``netem delay LAT(a,b) rate RATE(a,b) OVERHEAD limit N``: one FIFO queue per directed
pair. The negative per-packet overhead makes the rate count TCP payload (or, with
``charge="packet"``, IP packets), as the relay does.

With a shared uplink, each cluster's own ``wcwan`` egress carries
``netem rate UPLINK`` (the shared queue) and the router's per-pair leaves only the
delay. Per-node rates are left to the relay.

Examples
--------
>>> from wacoll import Topology
>>> from wacoll.emulate.layout import Layout
>>> lay = Layout.build(Topology.from_sizes([1, 1], wan_latency=0.01, wan_bandwidth=1e6), "x")
>>> print("\\n".join(tc_commands(lay, 1500)["router"][:4]))
qdisc add dev wr0 root handle 1: htb default 1
class add dev wr0 parent 1: classid 1:1 htb rate 100gbit
class add dev wr0 parent 1: classid 1:12 htb rate 100gbit
qdisc add dev wr0 parent 1:12 handle 12: netem delay 10000us rate 8000000bit -66 limit 1000
"""

from __future__ import annotations

from wacoll.emulate.netns import (
    TestbedError,
    disable_ipv6,
    entered,
    ip,
    ip_batch,
    run,
    wan_netns_name,
)

__all__ = ["ROUTER_ADDR", "WAN_IFACE", "tc_commands", "build"]

ROUTER_ADDR = "169.254.77.1"
WAN_IFACE = "wcwan"
FAST = "100gbit"


#: netem's per-packet overhead: it sees Ethernet frames; "payload" charges TCP data
#: (headers of 14 + 20 + 32 bytes: Ethernet, IP, TCP with timestamps) only.
OVERHEAD = {"payload": -66, "packet": -14}


def _leaf(delay: float, rate: float | None, limit: int, charge: str = "payload") -> str:
    rate_part = f" rate {int(rate * 8)}bit {OVERHEAD[charge]}" if rate else ""
    return f"netem delay {int(round(delay * 1e6))}us{rate_part} limit {limit}"


def tc_commands(layout, mtu: int, charge: str = "payload") -> dict:
    """The ``tc -batch`` lines per namespace: ``"router"`` and each cluster namespace."""
    if layout.per_node:
        raise TestbedError(
            "the netem backend emulates per-cluster links only; "
            "per-node rates need the relay"
        )
    out: dict[str, list[str]] = {"router": []}
    eps = layout.endpoints
    for d in eps:
        port = f"wr{d.index}"
        lines = [
            f"qdisc add dev {port} root handle 1: htb default 1",
            f"class add dev {port} parent 1: classid 1:1 htb rate {FAST}",
        ]
        for s in eps:
            if s.index == d.index:
                continue
            ((q, lat),) = layout.paths[s.index, d.index]
            queue = layout.queues[q]
            limit = max(1000, queue.limit // mtu + 1)
            cls = 10 + s.index + 1
            rate = None if layout.uplink else queue.rate
            lines += [
                f"class add dev {port} parent 1: classid 1:{cls} htb rate {FAST}",
                f"qdisc add dev {port} parent 1:{cls} handle {cls}: "
                + _leaf(lat, rate, limit, charge),
                f"filter add dev {port} parent 1: protocol ip prio 1 u32 "
                f"match ip src 10.77.{s.cluster}.0/24 flowid 1:{cls}",
            ]
        out["router"] += lines
    if layout.uplink:
        for s in eps:
            ((q, _),) = next(p for (a, _), p in layout.paths.items() if a == s.index)
            queue = layout.queues[q]
            out[s.ns] = [
                f"qdisc add dev {WAN_IFACE} root "
                + _leaf(0.0, queue.rate, max(1000, queue.limit // mtu + 1), charge)
            ]
    return out


def build(layout, mtu: int, charge: str = "payload", *, leaf=None) -> None:
    """Create the router namespace, the veths and the qdiscs of ``layout``.

    ``leaf`` rewrites each netem leaf (a testing hook for kernels without netem).
    """
    router = wan_netns_name(layout.name)
    ip("netns", "add", router)
    disable_ipv6(router)
    with entered(router):
        with open("/proc/sys/net/ipv4/ip_forward", "w") as f:
            f.write("1")
    ip_batch(router, ["link set lo up"])
    for e in layout.endpoints:
        port = f"wr{e.index}"
        ip_batch(
            router,
            [
                f"link add {port} mtu {mtu} type veth peer name {WAN_IFACE} netns {e.ns}",
                f"addr add {ROUTER_ADDR}/32 dev {port}",
                f"link set {port} up",
                f"route add {e.data_addr}/32 dev {port}",
            ],
        )
        ip_batch(
            e.ns,
            [
                f"link set {WAN_IFACE} mtu {mtu} up",
                f"addr add {e.data_addr}/32 dev {WAN_IFACE}",
                f"route add {ROUTER_ADDR}/32 dev {WAN_IFACE}",
                f"route add 10.77.0.0/16 via {ROUTER_ADDR} dev {WAN_IFACE} onlink",
            ],
        )
    for ns, lines in tc_commands(layout, mtu, charge).items():
        target = router if ns == "router" else ns
        if leaf is not None:
            lines = [leaf(line) for line in lines]
        run(
            ["ip", "netns", "exec", target, "tc", "-batch", "-"],
            input="\n".join(lines) + "\n",
        )
