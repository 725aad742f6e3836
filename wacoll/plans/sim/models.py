"""Cost models of the plan simulator: :class:`TsTrModel`, :class:`TiniModel`, :class:`LinkModel`.

A model turns a plan's messages into per-message costs for the engine of
:mod:`wacoll.plans.sim.engine`: how long a send occupies its sender and when the
message arrives, or, for :class:`LinkModel`'s wide-area messages, a flow on a
shared link. Users import the models from :mod:`wacoll.plans.sim`.

The per-message formulas of :class:`TsTrModel` and :class:`TiniModel`, and the checks
of every model's parameters, are those of :mod:`wacoll.costs`, which the tree cost
functions of :mod:`wacoll.trees` use too.
"""

from __future__ import annotations

from dataclasses import dataclass

from wacoll.costs import (
    t_ini_message,
    ts_tr_message,
    validate_rate,
    validate_t_ini,
    validate_time,
    validate_time_or_function,
)
from wacoll.errors import PlanError, TopologyError
from wacoll.topology import Topology

__all__ = ["Model", "TsTrModel", "TiniModel", "LinkModel"]


def _seconds(name, value):
    """``value`` as a float, checked by :func:`wacoll.costs.validate_time`."""
    return float(validate_time(name, value))


def _time_or_function(name, value):
    """A float number of seconds, or a callable ``f(nbytes) -> seconds`` kept as is."""
    value = validate_time_or_function(name, value)
    return value if callable(value) else float(value)


class Model:
    """What every model shares: receive overhead and local compute rate.

    A model turns a plan's messages into, per message, the sender's occupancy
    (``busy``) and the delay from send start to arrival (``delay``); a message the
    model must simulate as a flow gets a link instead (see :class:`LinkModel`).
    The engine of :mod:`wacoll.plans.sim.engine` asks a model :meth:`prepare` and
    :meth:`local_costs`; :func:`wacoll.plans.sim.simulate` takes any model.
    """

    def local_costs(self):
        """``(recv_overhead, compute_rate)``: the time added to every receive, and the
        bytes per time unit of copy and combine work (None: free)."""
        return self.recv_overhead, self.compute_rate

    def _validate_local_costs(self):
        """Check and normalise ``recv_overhead`` and ``compute_rate`` (frozen fields)."""
        object.__setattr__(
            self, "recv_overhead", _seconds("recv_overhead", self.recv_overhead)
        )
        object.__setattr__(
            self, "compute_rate", validate_rate("compute_rate", self.compute_rate)
        )

    def prepare(self, plan, messages, columns):
        """``(busy, delay, flows)`` per message; ``flows`` is None for simple models.

        ``columns`` holds per-message lists (``src``, ``dst``, ``nbytes``, ``wide``;
        see :class:`wacoll.plans.sim.engine.Structure`).
        """
        busy, delay = self._costs(plan, messages)
        return busy, delay, None


@dataclass(frozen=True)
class TsTrModel(Model):
    """MagPIe / Bernaschi et al.'s model: send completion ``t_s``, receive ``t_r``.

    The k-th send of a rank starts when the rank is free, occupies it ``t_s``, and
    the receiver has the message ``t_r`` after the send started (MagPIe Section 2,
    Figure 1). Both may be numbers or functions of the message size in bytes.

    Parameters
    ----------
    t_s, t_r : float or callable
        Seconds (or any time unit), or ``f(nbytes) -> time``.
    wide_area : (t_s, t_r), optional
        Different values for messages that cross clusters.
    recv_overhead : float
        Added to every receive once its message is there.
    compute_rate : float, optional
        Bytes per time unit of copy and combine work (default: free).

    Examples
    --------
    >>> from wacoll import Topology
    >>> from wacoll.plans import build
    >>> from wacoll.plans.sim import simulate
    >>> plan = build("bcast", Topology.single(4), "tree", tree="flat")
    >>> simulate(plan, TsTrModel(t_s=1, t_r=5)).finish
    (3.0, 5.0, 6.0, 7.0)
    """

    t_s: object
    t_r: object
    wide_area: tuple | None = None
    recv_overhead: float = 0.0
    compute_rate: float | None = None

    def __post_init__(self):
        object.__setattr__(self, "t_s", _time_or_function("t_s", self.t_s))
        object.__setattr__(self, "t_r", _time_or_function("t_r", self.t_r))
        if self.wide_area is not None:
            try:
                ts, tr = self.wide_area
            except (TypeError, ValueError):
                raise TopologyError("wide_area must be a pair (t_s, t_r)") from None
            object.__setattr__(
                self,
                "wide_area",
                (
                    _time_or_function("wide-area t_s", ts),
                    _time_or_function("wide-area t_r", tr),
                ),
            )
        self._validate_local_costs()

    def _costs(self, plan, messages):
        local = (self.t_s, self.t_r)
        wide = self.wide_area or local
        if not (callable(local[0]) or callable(local[1]) or self.wide_area):
            return [local[0]] * len(messages), [local[1]] * len(messages)
        busy, delay = [], []
        for m in messages:
            ts, tr = ts_tr_message(*(wide if m.wide_area else local), m.nbytes)
            busy.append(float(ts))
            delay.append(float(tr))
        return busy, delay


@dataclass(frozen=True)
class TiniModel(Model):
    """Banikazemi et al.'s model: a per-rank message initiation cost ``t_ini``.

    A rank ``r`` that has the message at ``R`` sends its k-th message (k from 0)
    during ``[R + k*t_ini[r], R + (k+1)*t_ini[r]]``; the receiver has it at the end.

    Parameters
    ----------
    t_ini : sequence of float, or Topology
        Per-rank cost, or a topology whose ``t_ini`` is set.
    bandwidth : float, optional
        If given, a message of ``b`` bytes also occupies its sender ``b / bandwidth``.
    recv_overhead : float
        Added to every receive once its message is there.
    compute_rate : float, optional
        Bytes per time unit of copy and combine work (default: free).

    Examples
    --------
    Banikazemi's Figure 1(c): rank 0 first serves the other fast rank, 5; then both
    serve three slow ranks each.

    >>> from wacoll import Topology, trees
    >>> from wacoll.plans import build
    >>> from wacoll.plans.sim import simulate
    >>> t_ini = [100, 300, 300, 300, 300, 100, 300, 300]
    >>> tree = trees.from_parents({0: [5, 1, 2, 3], 5: [4, 6, 7]}, 8, 0, "fig1c")
    >>> simulate(build("bcast", Topology.single(8), "tree", tree=tree),
    ...          TiniModel(t_ini)).completion
    400.0
    """

    t_ini: tuple
    bandwidth: float | None = None
    recv_overhead: float = 0.0
    compute_rate: float | None = None

    def __post_init__(self):
        t_ini = self.t_ini
        if isinstance(t_ini, Topology):
            if t_ini.t_ini is None:
                raise TopologyError(
                    "TiniModel needs a topology whose t_ini is set (Topology.with_t_ini)"
                )
            t_ini = t_ini.t_ini
        object.__setattr__(self, "t_ini", tuple(float(v) for v in validate_t_ini(t_ini)))
        object.__setattr__(self, "bandwidth", validate_rate("bandwidth", self.bandwidth))
        self._validate_local_costs()

    def _costs(self, plan, messages):
        if len(self.t_ini) != plan.size:
            raise PlanError(
                f"the TiniModel has t_ini for {len(self.t_ini)} ranks, "
                f"the plan has {plan.size}"
            )
        t_ini, bw = self.t_ini, self.bandwidth
        busy = [t_ini_message(t_ini[m.src], m.nbytes, bw)[0] for m in messages]
        return busy, busy


@dataclass(frozen=True)
class LinkModel(Model):
    """Two-level latency/bandwidth with wide-area contention (a fluid simulation).

    Each rank has one outgoing link of rate ``nodecheck_rate(r)``:
    ``topology.node_bandwidth[r]`` if set, else ``topology.intra.bandwidth``. It sends
    one message at a time, in program order, and is occupied until the message's last
    byte has left (plus ``overhead`` per message, spent before the first byte).

    * An intra-cluster message of ``b`` bytes leaves in ``b / node_rate`` and arrives
      ``intra.latency`` later. Cluster switches are taken as non-blocking.
    * A wide-area message from cluster A to B travels on the directed link
      ``topology.wan_link(A, B)``. The messages in flight on one link share its
      bandwidth max-min fairly (water-filling), each capped by its sender's node
      rate; rates are recomputed whenever a message joins or leaves that link. The
      message arrives ``latency`` after its last byte crossed the link.

    ``buffered`` says where a wide-area message's bytes wait when the link is
    slower than the sender:

    * ``True`` (default): in the network (socket buffers or a gateway with ample
      room, as MagPIe assumes: "a message send completes when the message has been
      injected into the network"). The sender is occupied ``b / node_rate`` only;
      the link drains the message on its own, at its fair, node-rate-capped share,
      so a flat tree over a slow wide area feeds all its links at once.
    * ``False``: at the sender (flow control with small buffers). The sender is
      occupied until the last byte has crossed the wide-area link, so the ``t_s``
      of a wide-area send is its whole transfer time and a flat tree over a slow
      wide area sends one message after the other.

    A message's arrival time is the same in both modes (given the same start); the
    modes differ in when its sender is free again. Where the node rate is the
    bottleneck (Matsuda et al.'s long-and-fast networks) they agree.

    Receivers are not modelled as a bottleneck: a rank may receive any number of
    messages at once, at full speed. Messages of 0 bytes take only the overhead and
    the latency.

    ``ordered`` says how the wide-area messages of one pair of ranks share a link:

    * ``True`` (default): one after the other, in the order sent. MPI keeps one
      connection per pair of ranks and its messages do not overtake each other, so
      the segments of a pipelined plan cross one by one and the first can be
      forwarded while the next crosses. Messages of different pairs share the link.
    * ``False``: like any others, at once (a short message may overtake a long one
      sent before it; the segments of a pipeline all finish together).

    ``window`` (bytes, default None: no bursts) makes the short wide-area messages
    bursts: a message of at most ``window`` bytes waits for the link's earlier
    bursts, from any pair of ranks, and then crosses alone, at the link's rate (or
    its fair share beside longer flows). TCP sends a message that fits in its
    congestion window (about a bandwidth-delay product, at least ten packets) at
    once, and a router's queue serves such bursts first come, first served: two
    8 KiB messages sent together over 1 MB/s arrive after 8 and 16 ms, not both
    after 16, so the first receiver goes on 8 ms earlier. Longer messages take
    turns window by window: they share the link fairly.

    Parameters
    ----------
    topology : Topology
        Must have the plan's size and clusters.
    overhead : float
        Fixed sender occupancy per message (software overhead), in seconds.
    recv_overhead : float
        Added to every receive once its message is there.
    compute_rate : float, optional
        Bytes per second of copy and combine work (default: free).
    buffered : bool
        Whether the network buffers wide-area messages (default) or the sender
        waits for them to cross (see above).
    ordered : bool
        Whether the wide-area messages of one pair of ranks cross in order, one at a
        time (default), or share their link at once (see above).
    window : float, optional
        Bytes up to which a wide-area message is a burst, served first come, first
        served on its link (see above); default None (every message shares).
    wan_capacity : float, optional
        Bytes per second that all wide-area links together carry (a shared gateway
        or backbone; on wacoll's emulated testbed, the relay that forwards every
        wide-area packet): the links that carry flows share it equally, each at
        most its own bandwidth; default None (the links are independent).

    Examples
    --------
    One 64 KiB message over MagPIe's wide area (10 ms, 1 MB/s):

    >>> from wacoll import Topology
    >>> from wacoll.plans import build
    >>> from wacoll.plans.sim import simulate
    >>> topo = Topology.from_sizes([1, 1], wan_latency=0.01, wan_bandwidth=1e6)
    >>> plan = build("bcast", topo, "tree", tree="flat", count=65536)
    >>> round(simulate(plan, LinkModel(topo)).completion, 6)
    0.075536

    A flat tree to three clusters: the three links work in parallel, unless the
    sender must wait for each message to cross:

    >>> topo = Topology.from_sizes([1, 1, 1, 1], wan_latency=0.01, wan_bandwidth=1e6)
    >>> plan = build("bcast", topo, "tree", tree="flat", count=65536)
    >>> [round(simulate(plan, LinkModel(topo, buffered=b)).completion, 6)
    ...  for b in (True, False)]
    [0.075667, 0.206608]
    """

    topology: Topology
    overhead: float = 0.0
    recv_overhead: float = 0.0
    compute_rate: float | None = None
    buffered: bool = True
    ordered: bool = True
    window: float | None = None
    wan_capacity: float | None = None

    def __post_init__(self):
        if not isinstance(self.topology, Topology):
            raise TopologyError("LinkModel needs a wacoll.Topology")
        for name in ("buffered", "ordered"):
            if not isinstance(getattr(self, name), bool):
                raise TopologyError(
                    f"{name} must be True or False, got {getattr(self, name)!r}"
                )
        object.__setattr__(self, "overhead", _seconds("overhead", self.overhead))
        if self.window is not None:
            w = self.window
            if (
                isinstance(w, bool)
                or not isinstance(w, (int, float))
                or not 0 < float(w) < float("inf")
            ):
                raise TopologyError(
                    f"window must be a number of bytes > 0 or None, got {w!r}"
                )
            object.__setattr__(self, "window", float(w))
        object.__setattr__(
            self, "wan_capacity", validate_rate("wan_capacity", self.wan_capacity)
        )
        self._validate_local_costs()

    def nodecheck_rate(self, rank: int) -> float:
        """The rate of ``rank``'s outgoing link in bytes/s.

        Examples
        --------
        >>> LinkModel(Topology.single(2, intra_bandwidth=5e8)).nodecheck_rate(1)
        500000000.0
        """
        topo = self.topology
        if topo.node_bandwidth is not None:
            return float(topo.node_bandwidth[rank])
        return float(topo.intra.bandwidth)

    def validate_plan(self, plan):
        """Raise PlanError unless the model's topology has the plan's ranks, grouped
        into the plan's clusters (:func:`~wacoll.plans.sim.simgrid.simulate_simgrid`
        checks its model with it too)."""
        topo = self.topology
        if topo.size != plan.size:
            raise PlanError(
                f"the LinkModel's topology has {topo.size} ranks, the plan "
                f"has {plan.size}"
            )
        if tuple(plan.clusters) != topo.cluster_ids:
            raise PlanError(
                "the LinkModel's topology groups the ranks into other "
                "clusters than the plan; build the plan on that topology"
            )

    def prepare(self, plan, messages, columns):
        """``(busy, delay, flows)``: per message the sender's occupancy and the delay
        from send start to arrival (for a wide-area message, the part its flow does
        not cover), and the wide-area flows as a :class:`_Flows`."""
        self.validate_plan(plan)
        ovh, lat = self.overhead, self.topology.intra.latency
        rates = [self.nodecheck_rate(r) for r in range(plan.size)]
        src, nbytes, wide = columns.src, columns.nbytes, columns.wide
        if True not in wide:
            busy = [ovh + b / rates[r] for r, b in zip(src, nbytes)]
            return busy, [x + lat for x in busy], None
        flows = _Flows(self, columns, rates)
        if self.buffered:
            busy = [ovh + b / rates[r] for r, b in zip(src, nbytes)]
        else:  # the sender is busy until its flow has crossed
            busy = [
                ovh if w else ovh + b / rates[r] for r, b, w in zip(src, nbytes, wide)
            ]
        m, cl, wan = columns.m, plan.clusters, flows.latency
        delay = [
            ovh + wan[cl[r] * m + cl[d]] if w else x + lat
            for r, d, w, x in zip(src, columns.dst, wide, busy)
        ]
        return busy, delay, flows


class _Flows:
    """The wide-area flows of a plan under a :class:`LinkModel`.

    A flow is a wide-area message of more than 0 bytes (zero-byte messages take
    latency only); the plan's precompiled columns say which messages are flows and
    number their directed cluster pairs ``a * m + b``. ``links`` and ``latency`` map
    each pair in use to its :class:`~wacoll.topology.LinkParams` and its latency;
    ``rates`` is each rank's node rate, the cap of its flows; ``wait``: the sender
    waits for its flow to cross (``buffered=False``); ``ordered``: a pair's flows
    cross one at a time; ``window``: the bytes up to which a flow is a burst;
    ``wan_capacity``: what all links together carry (None: no limit).
    """

    __slots__ = (
        "links",
        "latency",
        "rates",
        "wait",
        "overhead",
        "ordered",
        "window",
        "wan_capacity",
    )

    def __init__(self, model, columns, rates):
        topo, m = model.topology, columns.m
        self.links = {j: topo.wan_link(j // m, j % m) for j in columns.pairs}
        self.latency = {j: link.latency for j, link in self.links.items()}
        self.rates = rates
        self.wait = not model.buffered
        self.overhead = model.overhead
        self.ordered = model.ordered
        self.window = model.window
        self.wan_capacity = model.wan_capacity
