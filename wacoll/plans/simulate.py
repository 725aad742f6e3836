"""Predict how long a plan takes: a discrete-event simulation under a cost model.

:func:`simulate` runs every rank's program in order on a simulated clock. A ``send``
occupies the sender for the model's send time and hands the message to the network;
the model says when it becomes available at the receiver. A ``recv`` or
``recv_combine`` completes at ``max(time the rank reaches it, arrival)`` plus the
model's receive overhead (default 0) plus the combine cost; ``copy`` and ``combine``
cost ``bytes / compute_rate`` (default: free). The k-th send from ``a`` to ``b``
meets ``b``'s k-th receive from ``a`` (:meth:`~wacoll.plans.Plan.messages`). Sends
never wait for their receiver (eager delivery, as the checker assumes). Consecutive
``recv_combine`` steps of one arrival-order ``group`` are served in the order their
messages arrive (ties: program order), which is what a PATHS-style runtime does.

Three models, from the papers wacoll follows:

:class:`TsTrModel`
    MagPIe / Bernaschi et al.: a send occupies the sender ``t_s``; the receiver has
    the message ``t_r`` after the send started.
:class:`TiniModel`
    Banikazemi et al.: a send from rank ``r`` occupies it ``t_ini[r]`` (plus
    ``nbytes / bandwidth`` if given); the receiver has the message at the end.
:class:`LinkModel`
    Two-level latency/bandwidth with contention on the wide area (Matsuda et al.):
    intra-cluster messages leave at the sender's node rate; wide-area messages share
    their directed cluster-pair link max-min fairly, each capped by its sender's
    rate (a fluid simulation).

``simulate(plan)`` without a model uses a :class:`LinkModel` over the plan's
clusters with :class:`~wacoll.Topology`'s default links. :attr:`SimResult.completion`
is when the last rank finishes its program, which includes a sender still busy with
its last send; :attr:`SimResult.arrivals` says when each message was delivered (for a
broadcast, ``max(arrivals)`` is when the last rank has the data, the quantity the
tree cost functions of :mod:`wacoll.trees` compute).

How it runs: the simple models have no shared resource, so times follow from the
message dependencies alone, and each rank runs ahead as far as its messages allow
(per-rank cursors over precompiled programs, cached on the plan). Under
:class:`LinkModel` the wide-area transfers, the only shared resource, are
additionally ordered in time on an event heap; each link keeps one completion entry,
lazily deleted through a version counter when its rates change.

Examples
--------
MagPIe's Figure 1: a flat and a binomial broadcast tree over 8 nodes, ``t_s = 10``.

>>> from wacoll import Topology
>>> from wacoll.plans import build
>>> from wacoll.plans.simulate import simulate, TsTrModel
>>> flat = build("bcast", Topology.single(8), "tree", tree="flat")
>>> binomial = build("bcast", Topology.single(8), "tree", tree="binomial")
>>> [simulate(p, TsTrModel(10, t_r)).completion
...  for t_r in (1000, 11) for p in (flat, binomial)]
[1060.0, 3000.0, 71.0, 33.0]
"""

from __future__ import annotations

import gc
import heapq
import math
import numbers
from dataclasses import dataclass, field

from wacoll.errors import PlanError, TopologyError
from wacoll.topology import Topology

__all__ = ["simulate", "TsTrModel", "TiniModel", "LinkModel", "SimResult", "Event"]

# Step codes of the precompiled programs.
_SEND, _RECV, _LOCAL, _GROUP = 0, 1, 2, 3
_KIND_CODE = {"send": _SEND, "recv": _RECV, "recv_combine": _RECV, "copy": _LOCAL,
              "combine": _LOCAL}
# Heap event kinds of the link model: a flow joins its link; a flow may be done.
_START, _DONE = 0, 1
_CACHE_KEY = "simulate.structure"


# ------------------------------------------------------------------ parameters
def _seconds(name, value):
    """``value`` as a float, finite and >= 0; TopologyError otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TopologyError(f"{name} must be a number of seconds >= 0, got {value!r}")
    value = float(value)
    if not math.isfinite(value) or value < 0:
        raise TopologyError(f"{name} must be finite and >= 0, got {value!r}")
    return value


def _rate(name, value, optional=True):
    """``value`` as a positive float (bytes/s), or None when optional."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TopologyError(f"{name} must be a number of bytes/s > 0, got {value!r}")
    value = float(value)
    if not value > 0 or math.isnan(value):
        raise TopologyError(f"{name} must be > 0 bytes/s, got {value!r}")
    return value


def _time_or_function(name, value):
    """A number of seconds, or a callable ``f(nbytes) -> seconds`` kept as is."""
    if callable(value):
        return value
    return _seconds(name, value)


class _Model:
    """What every model shares: receive overhead and local compute rate.

    A model turns a plan's messages into, per message, the sender's occupancy
    (``busy``) and the delay from send start to arrival (``delay``); a message the
    model must simulate as a flow gets a link instead (see :class:`LinkModel`).
    """

    def _local_costs(self):
        return self.recv_overhead, self.compute_rate

    def _flows(self, plan, messages):
        """Messages to simulate as wide-area flows (None: every message is simple)."""
        return None


@dataclass(frozen=True)
class TsTrModel(_Model):
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
            object.__setattr__(self, "wide_area", (_time_or_function("wide-area t_s", ts),
                                                   _time_or_function("wide-area t_r", tr)))
        object.__setattr__(self, "recv_overhead", _seconds("recv_overhead",
                                                           self.recv_overhead))
        object.__setattr__(self, "compute_rate", _rate("compute_rate", self.compute_rate))

    def _costs(self, plan, messages):
        local = (self.t_s, self.t_r)
        wide = self.wide_area or local
        if not (callable(local[0]) or callable(local[1]) or self.wide_area):
            return [local[0]] * len(messages), [local[1]] * len(messages)
        busy, delay = [], []
        for m in messages:
            ts, tr = wide if m.wide_area else local
            busy.append(_seconds("t_s(nbytes)", ts(m.nbytes)) if callable(ts) else ts)
            delay.append(_seconds("t_r(nbytes)", tr(m.nbytes)) if callable(tr) else tr)
        return busy, delay


@dataclass(frozen=True)
class TiniModel(_Model):
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
                raise TopologyError("TiniModel needs a topology whose t_ini is set "
                                    "(Topology.with_t_ini)")
            t_ini = t_ini.t_ini
        if isinstance(t_ini, (str, bytes)) or not hasattr(t_ini, "__len__"):
            raise TopologyError(f"t_ini must be a sequence of seconds per rank, got {t_ini!r}")
        values = tuple(_seconds(f"t_ini[{r}]", v) for r, v in enumerate(t_ini))
        if not values:
            raise TopologyError("t_ini is empty")
        object.__setattr__(self, "t_ini", values)
        object.__setattr__(self, "bandwidth", _rate("bandwidth", self.bandwidth))
        object.__setattr__(self, "recv_overhead", _seconds("recv_overhead",
                                                           self.recv_overhead))
        object.__setattr__(self, "compute_rate", _rate("compute_rate", self.compute_rate))

    def _costs(self, plan, messages):
        if len(self.t_ini) != plan.size:
            raise PlanError(f"the TiniModel has t_ini for {len(self.t_ini)} ranks, "
                            f"the plan has {plan.size}")
        t_ini, bw = self.t_ini, self.bandwidth
        if bw is None:
            busy = [t_ini[m.src] for m in messages]
        else:
            busy = [t_ini[m.src] + m.nbytes / bw for m in messages]
        return busy, busy


@dataclass(frozen=True)
class LinkModel(_Model):
    """Two-level latency/bandwidth with wide-area contention (a fluid simulation).

    Each rank has one outgoing link of rate ``node_rate(r)``:
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
    the latency. Messages of one sender on one link share it like any others, so a
    short message may overtake a long one sent before it.

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

    Examples
    --------
    One 64 KiB message over MagPIe's wide area (10 ms, 1 MB/s):

    >>> from wacoll import Topology
    >>> from wacoll.plans import build
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

    def __post_init__(self):
        if not isinstance(self.topology, Topology):
            raise TopologyError("LinkModel needs a wacoll.Topology")
        if not isinstance(self.buffered, bool):
            raise TopologyError(f"buffered must be True or False, got {self.buffered!r}")
        object.__setattr__(self, "overhead", _seconds("overhead", self.overhead))
        object.__setattr__(self, "recv_overhead", _seconds("recv_overhead",
                                                           self.recv_overhead))
        object.__setattr__(self, "compute_rate", _rate("compute_rate", self.compute_rate))

    def node_rate(self, rank: int) -> float:
        """The rate of ``rank``'s outgoing link in bytes/s.

        Examples
        --------
        >>> LinkModel(Topology.single(2, intra_bandwidth=5e8)).node_rate(1)
        500000000.0
        """
        topo = self.topology
        if topo.node_bandwidth is not None:
            return float(topo.node_bandwidth[rank])
        return float(topo.intra.bandwidth)

    def _check(self, plan):
        topo = self.topology
        if topo.size != plan.size:
            raise PlanError(f"the LinkModel's topology has {topo.size} ranks, the plan "
                            f"has {plan.size}")
        if tuple(plan.clusters) != topo.cluster_ids:
            raise PlanError("the LinkModel's topology groups the ranks into other "
                            "clusters than the plan; build the plan on that topology")

    def _costs(self, plan, messages):
        self._check(plan)
        topo, ovh, cl = self.topology, self.overhead, plan.clusters
        rates = [self.node_rate(r) for r in range(plan.size)]
        lat = topo.intra.latency
        wan = {}
        busy, delay = [], []
        for m in messages:
            if m.wide_area:
                # Flows are simulated (delay unused); zero-byte ones need no bandwidth.
                key = (cl[m.src], cl[m.dst])
                wl = wan.get(key)
                if wl is None:
                    wl = wan[key] = topo.wan_link(*key).latency
                b = ovh + (m.nbytes / rates[m.src] if self.buffered else 0.0)
                d = ovh + wl
            else:
                b = ovh + m.nbytes / rates[m.src]
                d = b + lat
            busy.append(b)
            delay.append(d)
        return busy, delay

    def _flows(self, plan, messages):
        """Per message: None, or (link key, nbytes, cap) for a wide-area flow."""
        topo, cl = self.topology, plan.clusters
        rates = [self.node_rate(r) for r in range(plan.size)]
        out = [None] * len(messages)
        for k, m in enumerate(messages):
            if m.wide_area and m.nbytes > 0:
                out[k] = ((cl[m.src], cl[m.dst]), m.nbytes, rates[m.src])
        return out


# ------------------------------------------------------------------- results
@dataclass(frozen=True, slots=True)
class Event:
    """One executed step on the simulated clock.

    ``start`` is when the rank reached the step (a receive may then wait), ``end``
    when it completed. ``arrival`` is when the step's message was available at its
    receiver (sends and receives), else None.
    """

    rank: int
    step: int
    kind: str
    start: float
    end: float
    peer: int | None
    nbytes: int
    wide_area: bool
    arrival: float | None = None


@dataclass(frozen=True, eq=False)
class SimResult:
    """What :func:`simulate` predicts for a plan.

    Attributes
    ----------
    completion : float
        When the last rank finishes its program.
    finish : tuple of float
        Per rank, when its last step completes (0 for an empty program).
    arrivals : tuple of float
        Per message of ``plan.messages()``, when it is available at its receiver.
    plan, model
        What was simulated.
    """

    completion: float
    finish: tuple
    arrivals: tuple
    plan: object = field(repr=False)
    model: object = field(repr=False)
    _starts: list = field(repr=False, default_factory=list)
    _ends: list = field(repr=False, default_factory=list)
    _cache: dict = field(repr=False, default_factory=dict)

    @property
    def events(self) -> list:
        """Every step as an :class:`Event`, by rank then step (built on first use).

        Examples
        --------
        >>> from wacoll import Topology
        >>> from wacoll.plans import build
        >>> plan = build("bcast", Topology.single(3), "tree", tree="flat")
        >>> for e in simulate(plan, TsTrModel(1, 4)).events:
        ...     print(e.rank, e.kind, e.peer, e.start, e.end)
        0 send 1 0.0 1.0
        0 send 2 1.0 2.0
        1 recv 0 0.0 4.0
        2 recv 0 0.0 5.0
        """
        events = self._cache.get("events")
        if events is None:
            events = self._cache["events"] = self._build_events()
        return events

    def _build_events(self):
        plan = self.plan
        msgs = plan.messages()
        mids = _structure(plan, msgs)[3]
        st, en, arr = self._starts, self._ends, self.arrivals
        out = []
        g = 0
        for r, prog in enumerate(plan.programs):
            mr = mids[r]
            for i, s in enumerate(prog):
                k = mr[i]
                if k < 0:
                    out.append(Event(r, i, s.kind, st[g], en[g], None,
                                     plan.nbytes(s.blocks), False))
                else:
                    m = msgs[k]
                    out.append(Event(r, i, s.kind, st[g], en[g], s.peer, m.nbytes,
                                     m.wide_area, arr[k]))
                g += 1
        return out

    def plot(self, ax=None, *, messages=None):
        """Draw the timeline: one row per rank, a bar per step.

        Sends within a cluster are blue, wide-area sends red, receive processing
        green (the wait before a message arrives is light grey), local copy and
        combine steps orange. With ``messages`` (default: when there are at most 200)
        a line joins each send's start to its arrival. Needs matplotlib.

        Returns
        -------
        matplotlib.axes.Axes

        Examples
        --------
        >>> import matplotlib
        >>> matplotlib.use("Agg")
        >>> from wacoll import Topology
        >>> from wacoll.plans import build
        >>> plan = build("bcast", Topology.from_sizes([2, 2]), "tree", tree="binomial")
        >>> ax = simulate(plan, LinkModel(Topology.from_sizes([2, 2]))).plot()
        >>> ax.get_ylabel()
        'rank'
        """
        import matplotlib.pyplot as plt
        from matplotlib.collections import LineCollection
        from matplotlib.patches import Patch

        if ax is None:
            _, ax = plt.subplots(figsize=(8, min(12.0, max(2.0, 0.3 * self.plan.size + 1))))
        styles = {
            "wait": ("#dddddd", "waiting"),
            "send": ("tab:blue", "send"),
            "wide": ("tab:red", "wide-area send"),
            "recv": ("tab:green", "receive"),
            "local": ("tab:orange", "copy/combine"),
        }
        bars = {k: ([], [], []) for k in styles}

        def add(cat, rank, start, end):
            if end > start:
                y, left, width = bars[cat]
                y.append(rank)
                left.append(start)
                width.append(end - start)

        lines = []
        for e in self.events:
            if e.kind == "send":
                add("wide" if e.wide_area else "send", e.rank, e.start, e.end)
                lines.append(((e.start, e.rank), (e.arrival, e.peer)))
            elif e.kind in ("recv", "recv_combine"):
                ready = max(e.start, e.arrival)
                add("wait", e.rank, e.start, ready)
                add("recv", e.rank, ready, e.end)
            else:
                add("local", e.rank, e.start, e.end)
        for cat, (y, left, width) in bars.items():
            if y:
                ax.barh(y, width, left=left, height=0.7, color=styles[cat][0],
                        edgecolor="none")
        if messages is None:
            messages = len(lines) <= 200
        if messages and lines:
            ax.add_collection(LineCollection(lines, colors="0.4", linewidths=0.6,
                                             alpha=0.6))
        ax.set_ylim(self.plan.size - 0.5, -0.5)
        ax.set_xlim(0, self.completion * 1.02 if self.completion > 0 else 1)
        ax.set_xlabel("time")
        ax.set_ylabel("rank")
        plan = self.plan
        name = f"{plan.op} {plan.family}/{plan.algorithm}".strip()
        ax.set_title(f"{name}: {self.completion:.6g} ({type(self.model).__name__})")
        ax.legend(handles=[Patch(color=c, label=label) for c, label in styles.values()],
                  loc="lower right", fontsize="small")
        return ax


# ---------------------------------------------------------------- simulation
def _structure(plan, messages):
    """Model-independent precompiled programs, cached on the plan.

    Per rank a list of ``(code, arg, 0.0)`` rows, one per step: ``arg`` is the index
    of the step's message (sends and receives), and for the first step of an
    arrival-order group the tuple of its members' ``(message, step, 0.0)``; the
    other members' rows are ``(_GROUP, None, 0.0)`` and are skipped. The last field
    is the step's local cost, filled in by :func:`_programs` when the model has one.
    Also returns each rank's offset in the flat per-step arrays, their length, and
    per rank the message index of each step (-1 for local steps).
    """
    cached = plan._cache.get(_CACHE_KEY)
    if cached is not None:
        return cached
    programs = plan.programs
    mids = [[-1] * len(prog) for prog in programs]
    for k, m in enumerate(messages):
        mids[m.src][m.send_step] = k
        mids[m.dst][m.recv_step] = k
    code_of = _KIND_CODE
    rows = [[(code_of[s.kind], k, 0.0) for s, k in zip(prog, mr)]
            for prog, mr in zip(programs, mids)]
    for r, prog in enumerate(programs):
        if any(s.group for s in prog):
            _mark_groups(prog, rows[r])
    bases, g = [], 0
    for prog in programs:
        bases.append(g)
        g += len(prog)
    cached = (rows, bases, g, mids)
    plan._cache[_CACHE_KEY] = cached
    return cached


def _mark_groups(prog, row):
    """Turn runs of >= 2 consecutive recv_combine steps of one group into a group row."""
    i, n = 0, len(prog)
    while i < n:
        group = prog[i].group
        j = i + 1
        if group:
            while j < n and prog[j].group == group:
                j += 1
        if j - i > 1:
            row[i] = (_GROUP, tuple((row[x][1], x, 0.0) for x in range(i, j)), 0.0)
            for x in range(i + 1, j):
                row[x] = (_GROUP, None, 0.0)
        i = j


def _programs(plan, messages, rows, model):
    """Per rank the list of ``(code, arg, cost)`` the engine executes."""
    ro, rate = model._local_costs()
    if ro == 0.0 and rate is None:
        return rows

    def work(nbytes):
        return nbytes / rate if rate else 0.0

    progs = []
    for prog, row in zip(plan.programs, rows):
        out = []
        for s, (code, arg, _) in zip(prog, row):
            if code == _LOCAL:
                cost = work(plan.nbytes(s.blocks))
            elif code == _RECV:
                cost = ro + (work(messages[arg].nbytes) if s.kind == "recv_combine" else 0.0)
            elif code == _GROUP and arg is not None:  # per member (message, step, cost)
                arg = tuple((k, x, ro + work(messages[k].nbytes)) for k, x, _ in arg)
                cost = 0.0
            else:
                cost = 0.0
            out.append((code, arg, cost))
        progs.append(out)
    return progs


class _Link:
    """One directed wide-area link: its flows and their max-min fair rates.

    Flows with the same cap (their sender's node rate) always get the same rate, so
    they are kept in one class with a *virtual clock*: the bytes each of its flows
    has sent since the class's clock started. A flow that joins when the clock reads
    ``v`` finishes when it reads ``v + nbytes``; a start or finish only changes the
    classes' rates (water-filling over the few distinct caps), never per-flow state.
    The link has one pending completion entry on the event heap, invalidated by
    ``version`` whenever its rates change.
    """

    __slots__ = ("capacity", "latency", "classes", "last", "version")

    def __init__(self, capacity, latency):
        self.capacity = capacity
        self.latency = latency
        self.classes = {}  # cap -> [rate, virtual clock, heap of (finish, seq, message)]
        self.last = 0.0
        self.version = 0

    def advance(self, now):
        dt = now - self.last
        if dt > 0:
            for c in self.classes.values():
                c[1] += c[0] * dt
        self.last = now

    def add(self, mid, nbytes, cap, seq):
        c = self.classes.get(cap)
        if c is None:
            c = self.classes[cap] = [0.0, 0.0, []]
        heapq.heappush(c[2], (c[1] + nbytes, seq, mid))

    def rebalance(self):
        """Water-filling: the lowest caps are served in full, the rest share equally."""
        classes = self.classes
        for cap in [cap for cap, c in classes.items() if not c[2]]:
            del classes[cap]
        if len(classes) == 1:
            for cap, c in classes.items():
                share = self.capacity / len(c[2])
                c[0] = cap if cap <= share else share
            return
        left = self.capacity
        k = sum(len(c[2]) for c in classes.values())
        for cap in sorted(classes):
            c = classes[cap]
            n = len(c[2])
            share = left / k
            c[0] = cap if cap <= share else share
            left -= c[0] * n
            k -= n

    def next_finish(self):
        """(time, cap) of the flow that finishes first, or None without flows."""
        best = None
        for cap, c in self.classes.items():
            left = c[2][0][0] - c[1]
            t = self.last + (left if left > 0 else 0.0) / c[0]
            if best is None or t < best[0]:
                best = (t, cap)
        return best

    def pop(self, cap):
        """Remove and return the message of class ``cap`` that finishes first."""
        return heapq.heappop(self.classes[cap][2])[2]


def simulate(plan, model=None) -> SimResult:
    """Simulate ``plan`` under ``model`` and predict when each rank finishes.

    Parameters
    ----------
    plan : Plan
        Checked first (:meth:`~wacoll.plans.Plan.check`, cached); a plan that fails
        its check raises :class:`~wacoll.errors.PlanError` and is not simulated.
    model : TsTrModel, TiniModel or LinkModel, optional
        Default: ``LinkModel`` over a topology with the plan's clusters and the
        default link parameters of :class:`~wacoll.Topology` (10 us, 1 GB/s inside
        a cluster; MagPIe's 10 ms, 1 MB/s across).

    Returns
    -------
    SimResult

    Examples
    --------
    Rank 0 sends 1000 bytes to each rank of another cluster over a 10 ms, 1 MB/s
    link, waiting for each message to cross before it sends the next:

    >>> from wacoll import Topology
    >>> from wacoll.plans import build
    >>> topo = Topology.from_sizes([1, 2], wan_latency=0.01, wan_bandwidth=1e6)
    >>> plan = build("bcast", topo, "tree", tree="flat", count=1000)
    >>> result = simulate(plan, LinkModel(topo, buffered=False))
    >>> [round(t, 6) for t in result.arrivals], round(result.completion, 6)
    ([0.011, 0.012], 0.012)
    >>> result.finish[0]  # rank 0 was busy until its last byte crossed
    0.002
    """
    from wacoll.plans.plan import Plan

    if not isinstance(plan, Plan):
        raise PlanError("simulate needs a wacoll Plan")
    if model is None:
        model = LinkModel(_default_topology(plan))
    elif not isinstance(model, _Model):
        raise PlanError(f"simulate needs a TsTrModel, TiniModel or LinkModel, "
                        f"got {type(model).__name__}")
    plan.check()
    messages = plan.messages()
    # The simulation allocates many small acyclic objects; collecting cycles in the
    # middle of it only costs time.
    collecting = gc.isenabled()
    gc.disable()
    try:
        rows, bases, nsteps, _ = _structure(plan, messages)
        busy, delay = model._costs(plan, messages)
        progs = _programs(plan, messages, rows, model)
        flows = model._flows(plan, messages)
        engine = _Engine(plan, model, messages, progs, bases, nsteps, busy, delay, flows)
        return engine.run()
    finally:
        if collecting:
            gc.enable()


def _default_topology(plan):
    members = {}
    for r, c in enumerate(plan.clusters):
        members.setdefault(c, []).append(r)
    return Topology.from_clusters([members[c] for c in sorted(members)])


class _Engine:
    """The simulation state of one :func:`simulate` call."""

    def __init__(self, plan, model, messages, progs, bases, nsteps, busy, delay, flows):
        self.plan, self.model, self.messages = plan, model, messages
        self.progs, self.bases = progs, bases
        self.busy, self.delay = busy, delay
        size, nmsg = plan.size, len(messages)
        self.time = [0.0] * size
        self.pc = [0] * size
        self.arrival = [None] * nmsg
        self.blocked = [False] * nmsg
        self.dst = [m.dst for m in messages]
        self.starts = [0.0] * nsteps
        self.ends = [0.0] * nsteps
        self.flows = flows
        # 0: the model gives the arrival; 1: a flow the sender waits for; 2: a flow
        # the network buffers (the sender goes on after its busy time)
        flow_kind = 2 if getattr(model, "buffered", False) else 1
        self.is_flow = [0 if f is None else flow_kind for f in flows] \
            if flows is not None else [0] * nmsg
        self.pending = []  # (rank, message, time) of flows to start

    def run(self) -> SimResult:
        self.advance(list(range(self.plan.size - 1, -1, -1)))
        if self.pending:
            self.run_links()
        pc, progs = self.pc, self.progs
        stuck = [r for r in range(self.plan.size) if pc[r] < len(progs[r])]
        if stuck:  # the checker rules this out; kept as a guard
            r = stuck[0]
            raise PlanError(f"simulation stalled: rank {r} waits at step {pc[r]}",
                            rank=r, step=pc[r])
        finish = tuple(self.time)
        return SimResult(completion=max(finish), finish=finish,
                         arrivals=tuple(self.arrival), plan=self.plan, model=self.model,
                         _starts=self.starts, _ends=self.ends)

    def advance(self, work):
        """Run each rank of ``work`` (and every rank it wakes) until it blocks."""
        progs, bases, pcs, times = self.progs, self.bases, self.pc, self.time
        arrival, blocked, dst = self.arrival, self.blocked, self.dst
        busy, delay, is_flow = self.busy, self.delay, self.is_flow
        st, en, pending = self.starts, self.ends, self.pending
        pop, push = work.pop, work.append
        while work:
            r = pop()
            prog = progs[r]
            i, n, t, g = pcs[r], len(prog), times[r], bases[r]
            while i < n:
                code, a, c = prog[i]
                if code == _RECV:
                    x = arrival[a]
                    if x is None:
                        blocked[a] = True
                        break
                    st[g + i] = t
                    if x > t:
                        t = x
                    t += c
                    en[g + i] = t
                elif code == _SEND:
                    st[g + i] = t
                    f = is_flow[a]
                    if f:
                        pending.append((r, a, t))
                        if f == 1:
                            break  # finish_flow frees the sender
                        t += busy[a]
                        en[g + i] = t
                        i += 1
                        continue
                    arrival[a] = t + delay[a]
                    t += busy[a]
                    en[g + i] = t
                    if blocked[a]:
                        blocked[a] = False
                        push(dst[a])
                elif code == _LOCAL:
                    st[g + i] = t
                    t += c
                    en[g + i] = t
                else:  # arrival-order group
                    t, done = self.group(a, t, g, arrival, blocked, st, en)
                    if not done:
                        break
                    i += len(a) - 1
                i += 1
            pcs[r] = i
            times[r] = t

    @staticmethod
    def group(members, t, g, arrival, blocked, st, en):
        """Serve a group of receive-and-combines in arrival order, once all are known.

        ``members`` holds ``(message, step, cost)`` in program order.
        """
        for m in members:
            if arrival[m[0]] is None:
                blocked[m[0]] = True
                return t, False
        order = sorted(members, key=lambda m: (arrival[m[0]], m[1]))
        for m in order:
            st[g + m[1]] = t
            x = arrival[m[0]]
            if x > t:
                t = x
            t += m[2]
            en[g + m[1]] = t
        return t, True

    def run_links(self):
        """Event loop of the link model: flows start, share links and finish in time."""
        flows, pending = self.flows, self.pending
        topo, overhead = self.model.topology, self.model.overhead
        links = {}
        heap, seq = [], 0
        push, pop = heapq.heappush, heapq.heappop

        while True:
            for r, mid, t in pending:
                seq += 1
                push(heap, (t + overhead, seq, _START, mid, None))
            pending.clear()
            if not heap:
                return
            # _START carries the message; _DONE the link and its version then
            now, _, kind, x, link = pop(heap)
            if kind == _START:
                key, nbytes, cap = flows[x]
                link = links.get(key)
                if link is None:
                    wl = topo.wan_link(*key)
                    link = links[key] = _Link(wl.bandwidth, wl.latency)
                link.advance(now)
                seq += 1
                link.add(x, float(nbytes), cap, seq)
            else:
                if x != link.version:
                    continue  # the link's rates changed since this entry was made
                link.advance(now)
                done = link.pop(link.next_finish()[1])
                self.finish_flow(done, now, now + link.latency)
            link.rebalance()
            link.version += 1
            nxt = link.next_finish()
            if nxt is not None:
                seq += 1
                push(heap, (max(nxt[0], now), seq, _DONE, link.version, link))

    def finish_flow(self, mid, now, arrival):
        """The last byte of ``mid`` crossed its link at ``now``: deliver it, and free
        its sender unless the network buffered the message."""
        self.arrival[mid] = arrival
        wake = []
        if self.is_flow[mid] == 1:
            m = self.messages[mid]
            r = m.src
            self.ends[self.bases[r] + m.send_step] = now
            self.time[r] = now
            self.pc[r] = m.send_step + 1
            wake.append(r)
        if self.blocked[mid]:
            self.blocked[mid] = False
            wake.append(self.dst[mid])
        self.advance(wake)
