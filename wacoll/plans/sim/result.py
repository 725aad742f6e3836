"""What the plan simulator returns: :class:`SimResult` and its :class:`Event` timeline.

Users import both from :mod:`wacoll.plans.sim`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from wacoll.plans.sim.engine import structure_of

__all__ = ["SimResult", "Event"]


@dataclass(frozen=True, slots=True)
class Event:
    """One executed step on the simulated clock.

    ``start`` is when the rank reached the step (a receive may then wait), ``end``
    when it completed. ``arrival`` is when the step's message was available at its
    receiver (sends and receives), else None.

    Examples
    --------
    Rank 1 reaches its receive at 0 and has the message at ``t_r = 4``:

    >>> from wacoll import Topology
    >>> from wacoll.plans import build
    >>> from wacoll.plans.sim import simulate, TsTrModel
    >>> plan = build("bcast", Topology.single(2), "tree", tree="flat", count=8)
    >>> e = simulate(plan, TsTrModel(1, 4)).events[1]
    >>> e.rank, e.kind, e.peer, e.nbytes, e.start, e.end, e.arrival
    (1, 'recv', 0, 8, 0.0, 4.0, 4.0)
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
    """What :func:`~wacoll.plans.sim.simulate` predicts for a plan.

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

    Examples
    --------
    A flat broadcast from rank 0 to 1 and 2: a send occupies its sender ``t_s = 1``,
    the receiver has the message ``t_r = 4`` after the send started.

    >>> from wacoll import Topology
    >>> from wacoll.plans import build
    >>> from wacoll.plans.sim import simulate, TsTrModel
    >>> result = simulate(build("bcast", Topology.single(3), "tree", tree="flat"),
    ...                   TsTrModel(1, 4))
    >>> result
    SimResult(completion=5.0, finish=(2.0, 4.0, 5.0), arrivals=(4.0, 5.0))
    >>> result.completion == max(result.finish)
    True
    """

    completion: float
    finish: tuple
    arrivals: tuple
    plan: object = field(repr=False)
    model: object = field(repr=False)
    _starts: list = field(repr=False, default_factory=list)
    _ends: list = field(repr=False, default_factory=list)
    _cache: dict = field(repr=False, default_factory=dict)

    @classmethod
    def from_run(cls, plan, model, finish, arrivals, starts, ends) -> SimResult:
        """The result of one run of the engine (:class:`wacoll.plans.sim.engine.Engine`)
        of ``plan`` under ``model``: ``finish`` and ``arrivals`` as the attributes,
        ``starts`` and ``ends`` the times of every step (numbered across ranks), from
        which :attr:`events` is built."""
        return cls(
            completion=max(finish),
            finish=finish,
            arrivals=arrivals,
            plan=plan,
            model=model,
            _starts=starts,
            _ends=ends,
        )

    @property
    def events(self) -> list:
        """Every step as an :class:`Event`, by rank then step (built on first use).

        Examples
        --------
        >>> from wacoll import Topology
        >>> from wacoll.plans import build
        >>> from wacoll.plans.sim import simulate, TsTrModel
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
        mids = structure_of(plan, msgs).mids
        st, en, arr = self._starts, self._ends, self.arrivals
        out = []
        g = 0
        for r, prog in enumerate(plan.programs):
            mr = mids[r]
            for i, s in enumerate(prog):
                k = mr[i]
                if k < 0:
                    out.append(
                        Event(
                            r, i, s.kind, st[g], en[g], None, plan.nbytes(s.blocks), False
                        )
                    )
                else:
                    m = msgs[k]
                    out.append(
                        Event(
                            r,
                            i,
                            s.kind,
                            st[g],
                            en[g],
                            s.peer,
                            m.nbytes,
                            m.wide_area,
                            arr[k],
                        )
                    )
                g += 1
        return out

    def plot(self, ax=None, *, messages=None):
        """Draw the timeline: one row per rank, every step with its real duration.

        Each rank's row shows its steps (the upper bar): sending (the sender busy,
        blue), waiting for a message (light grey), receiving (green), receiving and
        combining (orange), local copies and combines (gold). Below them, in thin
        lanes, each message it sent is drawn in flight from the send's start to its
        arrival at the receiver: blue within a cluster, red across the wide area, so a
        sender that hands a long message to the network and is free at once still
        shows it. With ``messages`` (default: when there are at most 200) a line joins
        each send's start to its arrival on the receiver's row. A step too short to
        see at the drawing's scale is a tick at its start; the legend lists only what
        is drawn. Needs matplotlib.

        Returns
        -------
        matplotlib.axes.Axes

        Examples
        --------
        >>> import matplotlib
        >>> matplotlib.use("Agg")
        >>> from wacoll import Topology
        >>> from wacoll.plans import build
        >>> from wacoll.plans.sim import simulate, LinkModel
        >>> plan = build("bcast", Topology.from_sizes([2, 2]), "tree", tree="binomial")
        >>> ax = simulate(plan, LinkModel(Topology.from_sizes([2, 2]))).plot()
        >>> ax.get_ylabel(), ax.get_xlabel()
        ('rank', 'time (s)')
        >>> all(float(t).is_integer() for t in ax.get_yticks())
        True
        >>> [t.get_text() for t in ax.get_legend().get_texts()]  # doctest: +NORMALIZE_WHITESPACE
        ['sending (sender busy)', 'waiting for a message', 'receiving',
         'message in flight, in a cluster', 'message in flight, wide area',
         'a step too short to draw at this scale (tick)']
        """
        import matplotlib.pyplot as plt
        from matplotlib.collections import LineCollection
        from matplotlib.lines import Line2D
        from matplotlib.patches import Patch
        from matplotlib.ticker import MaxNLocator

        from wacoll.plans.sim.models import LinkModel

        if ax is None:
            _, ax = plt.subplots(
                figsize=(8, min(12.0, max(2.0, 0.4 * self.plan.size + 1)))
            )
        styles = {
            "send": ("tab:blue", "sending (sender busy)"),
            "wait": ("#dddddd", "waiting for a message"),
            "recv": ("tab:green", "receiving"),
            "recv_combine": ("tab:orange", "receiving and combining"),
            "local": ("gold", "copying / combining"),
            "flight": ("#9ecae1", "message in flight, in a cluster"),
            "flight_wide": ("tab:red", "message in flight, wide area"),
        }
        span = self.completion if self.completion > 0 else 1.0
        shortest = span * 0.004  # narrower than this is drawn as a tick
        bars = {k: ([], [], [], []) for k in styles}  # y, left, width, height
        ticks = {k: ([], []) for k in styles}
        step_y, step_h = -0.22, 0.4  # a rank's steps: the upper part of its row

        def add(cat, y, start, end, height):
            if end <= start and cat in ("wait", "flight", "flight_wide"):
                return
            if end - start < shortest and cat not in ("wait", "flight", "flight_wide"):
                ticks[cat][0].append(start)
                ticks[cat][1].append(y)
                return
            ys, left, width, heights = bars[cat]
            ys.append(y)
            left.append(start)
            width.append(end - start)
            heights.append(height)

        lines, wide_lines, flights = [], [], {}
        for e in self.events:
            if e.kind == "send":
                add("send", e.rank + step_y, e.start, e.end, step_h)
                flights.setdefault(e.rank, []).append((e.start, e.arrival, e.wide_area))
                (wide_lines if e.wide_area else lines).append(
                    ((e.start, e.rank), (e.arrival, e.peer))
                )
            elif e.kind in ("recv", "recv_combine"):
                ready = max(e.start, e.arrival)
                add("wait", e.rank + step_y, e.start, ready, step_h)
                add(e.kind, e.rank + step_y, ready, e.end, step_h)
            else:
                add("local", e.rank + step_y, e.start, e.end, step_h)
        # messages in flight: thin lanes below the steps, so overlapping ones all show
        for rank, spans in flights.items():
            lane_ends = []
            placed = []
            for start, arrival, wide in sorted(spans):
                lane = next((k for k, end in enumerate(lane_ends) if end <= start), None)
                if lane is None:
                    lane = len(lane_ends)
                    lane_ends.append(arrival)
                else:
                    lane_ends[lane] = arrival
                placed.append((lane, start, max(arrival, start + shortest), wide))
            height = 0.44 / max(1, len(lane_ends))  # the lower part of the row
            for lane, start, end, wide in placed:
                y = rank + 0.02 + height * (lane + 0.5)
                add("flight_wide" if wide else "flight", y, start, end, height * 0.8)
        handles = []
        for cat, (color, text) in styles.items():
            ys, left, width, heights = bars[cat]
            if ys:
                ax.barh(
                    ys, width, left=left, height=heights, color=color, edgecolor="none"
                )
            if ticks[cat][0]:
                ax.plot(
                    ticks[cat][0],
                    ticks[cat][1],
                    ls="none",
                    marker="|",
                    markersize=9,
                    markeredgewidth=1.6,
                    color=color,
                )
            if ys or ticks[cat][0]:
                handles.append(Patch(color=color, label=text))
        if any(ts for ts, _ in ticks.values()):
            handles.append(
                Line2D(
                    [],
                    [],
                    ls="none",
                    marker="|",
                    markersize=9,
                    markeredgewidth=1.6,
                    color="0.3",
                    label="a step too short to draw at this scale (tick)",
                )
            )
        if messages is None:
            messages = len(lines) + len(wide_lines) <= 200
        if messages:
            for group, color in ((lines, "0.45"), (wide_lines, "tab:red")):
                if group:
                    ax.add_collection(
                        LineCollection(group, colors=color, linewidths=0.6, alpha=0.5)
                    )
        ax.set_ylim(self.plan.size - 0.5, -0.5)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # no rank 2.5
        ax.set_xlim(0, self.completion * 1.02 if self.completion > 0 else 1)
        # a LinkModel works in seconds; the other models in their inputs' unit
        ax.set_xlabel(
            "time (s)"
            if isinstance(self.model, LinkModel)
            else "time (the cost model's unit)"
        )
        ax.set_ylabel("rank")
        plan = self.plan
        name = f"{plan.op} {plan.family}/{plan.algorithm}".strip()
        ax.set_title(f"{name}: {self.completion:.6g} ({type(self.model).__name__})")
        # outside the axes, so that it never covers a bar
        ax.legend(
            handles=handles,
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
            fontsize="small",
            frameon=False,
        )
        return ax
