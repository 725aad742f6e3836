"""Drawings of trees and plans for notebooks (matplotlib, imported lazily).

Examples
--------
>>> import matplotlib
>>> matplotlib.use("Agg")
>>> from wacoll import Topology, trees
>>> from wacoll.tools.viz import draw_tree, tree_positions
>>> tree_positions(trees.binomial(4))[0]
(0.5, 0)
>>> ax = draw_tree(trees.binomial(8), costs=[1] * 8)
>>> time_unit(0.004)
('ms', 1000.0)
"""

from __future__ import annotations

from wacoll.trees.basic import children, tree_root

__all__ = [
    "tree_positions",
    "draw_tree",
    "draw_plan",
    "draw_timeline",
    "draw_trace",
    "time_unit",
    "call_title",
    "hops",
]


def tree_positions(tree) -> dict:
    """Layered positions: depth downwards, leaves spread left to right in send order."""
    root = tree_root(tree)
    pos, next_x = {}, [0]

    def place(v, depth):
        kids = children(tree, v)
        if not kids:
            x = next_x[0]
            next_x[0] += 1
        else:
            xs = [place(c, depth + 1) for c in kids]
            x = (xs[0] + xs[-1]) / 2
        pos[v] = (x, -depth)
        return x

    stack_limit = tree.number_of_nodes()
    if stack_limit > 2000:  # deep recursion guard for chains
        raise ValueError("tree_positions draws trees of at most 2000 nodes")
    place(root, 0)
    width = max(next_x[0] - 1, 1)
    return {v: (x / width, y) for v, (x, y) in pos.items()}


def _cluster_color(c):
    import matplotlib.pyplot as plt

    return plt.get_cmap("tab10")(min(max(c, 0), 9) / 9)


def draw_tree(
    tree, ax=None, costs=None, clusters=None, title=None, *, names=None, legend=True
):
    """Draw ``tree`` top-down; edge labels give the send order, colours the clusters.

    Parameters
    ----------
    tree : networkx.DiGraph
    ax : matplotlib Axes, optional
    costs : sequence of float, optional
        Per-rank initiation costs, printed under each node.
    clusters : sequence of int, optional
        The cluster (or class) of each rank, for node colours.
    names : mapping, optional
        A legend name for each value of ``clusters`` (default ``"cluster N"``).
    legend : bool
        Explain the colours, the edge numbers and the numbers under the nodes in a
        legend below the tree.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from wacoll import trees
    >>> ax = draw_tree(trees.binomial(4), costs=[1, 3, 3, 1], clusters=[0, 1, 1, 0],
    ...                names={0: "fast", 1: "slow"})
    >>> [t.get_text() for t in ax.get_legend().get_texts()]  # doctest: +NORMALIZE_WHITESPACE
    ['fast', 'slow', 'edge number: the send order (0 first)',
     'number under a node: its t_ini']
    """
    import matplotlib.pyplot as plt
    import networkx as nx
    from matplotlib.lines import Line2D

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.8))
    pos = tree_positions(tree)
    colors = {}
    if clusters is not None:
        colors = dict(
            node_color=[clusters[v] for v in tree.nodes], cmap="tab10", vmin=0, vmax=9
        )
    nx.draw_networkx(tree, pos, ax=ax, node_size=380, font_size=8, arrows=True, **colors)
    nx.draw_networkx_edge_labels(
        tree,
        pos,
        ax=ax,
        font_size=7,
        edge_labels={(u, v): d["order"] for u, v, d in tree.edges(data=True)},
    )
    if costs is not None:
        for v, (x, y) in pos.items():
            ax.annotate(
                f"{costs[v]:g}",
                (x, y),
                xytext=(0, -19),
                textcoords="offset points",
                ha="center",
                fontsize=7,
            )
    ax.set_title(title or tree.graph.get("name", "tree"))
    ax.axis("off")
    if legend:
        handles = []
        if clusters is not None:
            for c in sorted({clusters[v] for v in tree.nodes}):
                label = (names or {}).get(c, f"cluster {c}")
                handles.append(
                    Line2D(
                        [],
                        [],
                        ls="none",
                        marker="o",
                        markersize=8,
                        color=_cluster_color(c),
                        label=label,
                    )
                )
        handles.append(
            Line2D(
                [],
                [],
                ls="none",
                marker="$0$",
                color="k",
                label="edge number: the send order (0 first)",
            )
        )
        if costs is not None:
            handles.append(
                Line2D(
                    [],
                    [],
                    ls="none",
                    marker="$1$",
                    color="k",
                    label="number under a node: its t_ini",
                )
            )
        ax.legend(
            handles=handles,
            loc="upper center",
            bbox_to_anchor=(0.5, -0.02),
            fontsize="x-small",
            frameon=False,
            ncol=2 if len(handles) > 3 else 1,
        )
    return ax


def hops(n: int) -> str:
    """``"1 wide-area hop"``, ``"2 wide-area hops"``."""
    return f"{n} wide-area hop{'' if n == 1 else 's'}"


def draw_plan(plan, ax=None, title=None, *, legend=True):
    """Draw a plan's message graph: a column of ranks per cluster, an arrow per pair
    of ranks that exchange messages; wide-area arrows dashed red.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from wacoll import Topology
    >>> from wacoll.plans import build
    >>> ax = draw_plan(build("bcast", Topology.from_sizes([2, 2]), "magpie"))
    >>> [t.get_text() for t in ax.get_legend().get_texts()]  # doctest: +NORMALIZE_WHITESPACE
    ['cluster 0', 'cluster 1', 'message in a cluster', 'message across the wide area']
    """
    import matplotlib.pyplot as plt
    import networkx as nx
    from matplotlib.lines import Line2D

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    g = plan.message_graph()
    members = {}
    for r, c in enumerate(plan.clusters):
        members.setdefault(c, []).append(r)
    pos = {}
    for i, (_cluster, ranks) in enumerate(sorted(members.items())):
        for j, r in enumerate(ranks):
            pos[r] = (i, -j)
    simple = nx.DiGraph()
    simple.add_nodes_from(g.nodes)
    wan = set()
    for u, v, d in g.edges(data=True):
        simple.add_edge(u, v)
        if d["wide_area"]:
            wan.add((u, v))
    nx.draw_networkx_nodes(
        simple,
        pos,
        ax=ax,
        node_size=300,
        cmap="tab10",
        vmin=0,
        vmax=9,
        node_color=[plan.clusters[r] for r in simple.nodes],
    )
    nx.draw_networkx_labels(simple, pos, ax=ax, font_size=8)
    local = [e for e in simple.edges if e not in wan]
    nx.draw_networkx_edges(
        simple, pos, ax=ax, edgelist=local, arrows=True, connectionstyle="arc3,rad=0.2"
    )
    nx.draw_networkx_edges(
        simple,
        pos,
        ax=ax,
        edgelist=sorted(wan),
        style="dashed",
        edge_color="tab:red",
        arrows=True,
        connectionstyle="arc3,rad=0.1",
    )
    ax.set_title(title or f"{plan.op}: {plan.family}/{plan.algorithm}")
    ax.axis("off")
    if legend:
        handles = [
            Line2D(
                [],
                [],
                ls="none",
                marker="o",
                markersize=8,
                color=_cluster_color(c),
                label=f"cluster {c}",
            )
            for c in sorted(members)
        ]
        if local:
            handles.append(Line2D([], [], color="k", label="message in a cluster"))
        if wan:
            handles.append(
                Line2D(
                    [], [], color="tab:red", ls="--", label="message across the wide area"
                )
            )
        ax.legend(
            handles=handles,
            loc="upper center",
            bbox_to_anchor=(0.5, -0.01),
            fontsize="x-small",
            frameon=False,
            ncol=min(len(handles), 3),
        )
    return ax


def time_unit(seconds: float):
    """A readable unit for times up to ``seconds``: ``(name, factor)``.

    Examples
    --------
    >>> time_unit(2.5), time_unit(3e-6)
    (('s', 1.0), ('µs', 1000000.0))
    """
    if seconds >= 1:
        return "s", 1.0
    if seconds >= 1e-3:
        return "ms", 1e3
    return "µs", 1e6


def _integer_ranks(ax, size):
    from matplotlib.ticker import MaxNLocator

    if size <= 16:
        ax.set_yticks(range(size))
    else:
        ax.yaxis.set_major_locator(MaxNLocator(integer=True, nbins=16))
    ax.set_ylim(size - 0.5, -0.5)


def _legend_outside(ax, handles=None):
    legend = ax.get_legend()
    if handles is None and legend is not None:
        handles = legend.legend_handles
    if legend is not None:
        legend.remove()
    if handles:
        ax.legend(
            handles=handles,
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
            fontsize="small",
            frameon=False,
        )


def draw_timeline(result, ax=None, *, title=None, unit=None):
    """A simulated timeline (:meth:`wacoll.plans.sim.SimResult.plot`), made readable.

    Times in ``unit`` (default: chosen from the completion time) with the unit on the
    axis, one integer tick per rank, the legend outside the plot so it hides no bar,
    and a title that names the plan and its predicted completion.

    Parameters
    ----------
    result : wacoll.plans.sim.SimResult
    ax : matplotlib Axes, optional
    title : str, optional
    unit : {"s", "ms", "µs"}, optional

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> from wacoll import Topology
    >>> from wacoll.plans import build
    >>> from wacoll.plans.sim import simulate, LinkModel
    >>> topo = Topology.from_sizes([2, 2])
    >>> ax = draw_timeline(simulate(build("bcast", topo, "magpie"), LinkModel(topo)))
    >>> ax.get_xlabel(), [int(t) for t in ax.get_yticks()]
    ('time (ms)', [0, 1, 2, 3])
    """
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    if ax is None:
        size = result.plan.size
        _, ax = plt.subplots(figsize=(9, min(12.0, max(2.2, 0.35 * size + 1.2))))
    result.plot(ax=ax)
    names = {"s": 1.0, "ms": 1e3, "µs": 1e6, "us": 1e6}
    if unit is None:
        unit, factor = time_unit(max(result.completion, 1e-9))
    else:
        factor = names[unit]
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x * factor:g}"))
    ax.set_xlabel(f"time ({unit})")
    _integer_ranks(ax, result.plan.size)
    _legend_outside(ax)
    ax.set_title(
        title
        or f"{call_title(result.plan)}: "
        f"{result.completion * factor:.4g} {unit} predicted",
        fontsize="medium",
    )
    return ax


def _size(nbytes: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale and nbytes % (scale // 8 or 1) == 0:
            return f"{nbytes / scale:g} {unit}"
    return f"{nbytes} B"


def call_title(plan) -> str:
    """The call a plan runs, in words: operation, size, algorithm and level.

    Examples
    --------
    >>> from wacoll import Topology
    >>> from wacoll.plans import build
    >>> topo = Topology.from_sizes([2, 2])
    >>> call_title(build("bcast", topo, "magpie", count=65536))
    'bcast of 64 KiB, magpie/coordinator'
    >>> call_title(build("allreduce", topo, "magpie", count=8192, itemsize=8,
    ...                  level="commutative"))
    'allreduce of 64 KiB, magpie/coordinator, level commutative'
    >>> call_title(build("allgather", topo, "mpich", count=16))
    'allgather of 16 B per rank, mpich/ring'
    """
    from wacoll.plans import OPERATIONS

    spec = OPERATIONS[plan.op]
    text = plan.op
    if spec.kind != "barrier":
        per = {"per_rank": plan.size, "pairs": plan.size * plan.size}.get(spec.layout)
        nbytes = plan.total_bytes // per if per else plan.total_bytes
        text += f" of {_size(nbytes)}" + (" per rank" if per else "")
    text += f", {plan.family}/{plan.algorithm}"
    if spec.kind == "reduction" and plan.level:
        text += f", level {plan.level}"
    if plan.arithmetic != "plain":
        text += f", {plan.arithmetic} arithmetic"
    return text


def draw_trace(trace, ax=None, *, title=None, clusters=None, call=None):
    """Draw a Chrome trace written by ``wacoll.Comm.write_trace`` as a timeline.

    One row per rank (integer ticks). Each collective call is a thin outline; inside
    it, the time reading the arguments and planning is a light purple band, the
    time executing the plan a light grey band (a rank waits for messages there),
    and each traced step a bar of its kind: sending (blue), receiving (green),
    receiving and combining (orange), copying or combining (gold). A step too short
    to see at the drawing's scale is a tick. A line joins each send to the end of its
    receive on the receiver's row, red where it crosses clusters. Time in
    milliseconds from the first event drawn; the legend lists only what is drawn.

    Parameters
    ----------
    trace : str, Path or dict
        The trace file, or its loaded JSON.
    ax : matplotlib Axes, optional
    title : str, optional
    clusters : sequence of int, optional
        The cluster of each rank, written beside its tick and used to colour the
        messages that cross the wide area.
    call : int, optional
        Draw only this call of each rank (0 the first, -1 the last); default: all.

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> events = [{"ph": "X", "tid": 0, "ts": 0.0, "dur": 1500.0, "cat": "operation",
    ...            "name": "bcast"}, {"ph": "X", "tid": 0, "ts": 10.0, "dur": 5.0,
    ...            "cat": "step", "name": "send 1 [0]", "args": {"peer": 1}},
    ...           {"ph": "X", "tid": 1, "ts": 900.0, "dur": 100.0, "cat": "step",
    ...            "name": "recv 0 [0]", "args": {"peer": 0}}]
    >>> ax = draw_trace({"traceEvents": events}, clusters=[0, 1])
    >>> ax.get_xlabel()
    'time (ms)'
    >>> [t.get_text() for t in ax.get_legend().get_texts()]  # doctest: +NORMALIZE_WHITESPACE
    ['sending', 'receiving', 'a collective call', 'a step too short to draw at this
     scale (tick)', 'message, wide area (send to received)']
    """
    import json
    from pathlib import Path

    import matplotlib.pyplot as plt
    from matplotlib.collections import LineCollection
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    if not isinstance(trace, dict):
        trace = json.loads(Path(trace).read_text())
    events = sorted(
        (e for e in trace["traceEvents"] if e.get("ph") == "X"),
        key=lambda e: (e["ts"], e["tid"]),
    )
    if call is not None:
        events = _one_call(events, call)
    size = 1 + max((e["tid"] for e in events), default=0)
    if ax is None:
        _, ax = plt.subplots(figsize=(9, min(12.0, max(2.2, 0.45 * size + 1.2))))
    zero = min((e["ts"] for e in events), default=0.0)
    end = max((e["ts"] + e["dur"] for e in events), default=1.0)
    shortest = (end - zero) / 1e3 * 0.004
    kinds = {
        "send": ("tab:blue", "sending"),
        "recv": ("tab:green", "receiving"),
        "recv_combine": ("tab:orange", "receiving and combining"),
        "local": ("gold", "copying / combining"),
        "planning": ("#d9c8ec", "reading arguments, planning"),
        "execute": ("#e3e3e3", "executing the plan (waiting for messages)"),
    }
    drawn, ticked = set(), False
    sends, recvs = {}, {}
    for e in events:
        start, width = (e["ts"] - zero) / 1e3, e["dur"] / 1e3
        cat = e.get("cat")
        if cat == "operation":
            ax.barh(
                e["tid"],
                width,
                left=start,
                height=0.9,
                fill=False,
                edgecolor="0.3",
                linewidth=0.8,
            )
            drawn.add("operation")
            continue
        if cat == "phase":
            kind = "execute" if e["name"] == "execute" else "planning"
            ax.barh(
                e["tid"],
                width,
                left=start,
                height=0.7,
                color=kinds[kind][0],
                edgecolor="none",
            )
            drawn.add(kind)
            continue
        word = e["name"].split()[0]
        kind = {
            "send": "send",
            "recv": "recv",
            "recv-combine": "recv_combine",
            "recv_combine": "recv_combine",
        }.get(word, "local")
        peer = (e.get("args") or {}).get("peer")
        if kind == "send" and peer is not None:
            sends.setdefault((e["tid"], peer), []).append(start)
        elif kind in ("recv", "recv_combine") and peer is not None:
            recvs.setdefault((peer, e["tid"]), []).append(start + width)
        if width < shortest:
            ax.plot(
                [start],
                [e["tid"]],
                ls="none",
                marker="|",
                markersize=10,
                markeredgewidth=1.8,
                color=kinds[kind][0],
            )
            ticked = True
        else:
            ax.barh(e["tid"], width, left=start, height=0.45, color=kinds[kind][0])
        drawn.add(kind)
    local, wide = [], []
    for (src, dst), starts in sends.items():
        for t0, t1 in zip(starts, recvs.get((src, dst), [])):
            crosses = clusters is not None and clusters[src] != clusters[dst]
            (wide if crosses else local).append(((t0, src), (t1, dst)))
    for group, color in ((local, "0.45"), (wide, "tab:red")):
        if group:
            ax.add_collection(
                LineCollection(group, colors=color, linewidths=0.8, alpha=0.7)
            )
    ax.set_xlabel("time (ms)")
    ax.set_ylabel("rank")
    _integer_ranks(ax, size)
    if clusters is not None:
        ax.set_yticks(range(size))
        ax.set_yticklabels([f"{r} (cluster {clusters[r]})" for r in range(size)])
    handles = [
        Patch(color=c, label=label) for k, (c, label) in kinds.items() if k in drawn
    ]
    if "operation" in drawn:
        handles.append(Patch(fill=False, edgecolor="0.3", label="a collective call"))
    if ticked:
        handles.append(
            Line2D(
                [],
                [],
                ls="none",
                marker="|",
                markersize=10,
                markeredgewidth=1.8,
                color="0.3",
                label="a step too short to draw at this scale (tick)",
            )
        )
    if local:
        handles.append(Line2D([], [], color="0.45", label="message (send to received)"))
    if wide:
        handles.append(
            Line2D([], [], color="tab:red", label="message, wide area (send to received)")
        )
    _legend_outside(ax, handles)
    ax.set_title(title or "traced run", fontsize="medium")
    ax.set_xlim(left=0, right=(end - zero) / 1e3 * 1.02 or 1)
    return ax


def _one_call(events, call):
    """The events of each rank's ``call``-th collective call (by its outline)."""
    ops = {}
    for e in events:
        if e.get("cat") == "operation":
            ops.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e["dur"]))
    keep = []
    for e in events:
        spans = ops.get(e["tid"], [])
        try:
            lo, hi = spans[call]
        except IndexError:
            continue
        if lo <= e["ts"] <= hi:
            keep.append(e)
    return keep
