"""Drawings of trees and plans for notebooks (matplotlib, imported lazily).

Examples
--------
>>> import matplotlib
>>> matplotlib.use("Agg")
>>> from wacoll import Topology, trees
>>> from wacoll.viz import draw_tree, tree_positions
>>> tree_positions(trees.binomial(4))[0]
(0.5, 0)
>>> ax = draw_tree(trees.binomial(8), costs=[1] * 8)
>>> time_unit(0.004)
('ms', 1000.0)
"""

from __future__ import annotations

from wacoll.trees.basic import children, tree_root

__all__ = ["tree_positions", "draw_tree", "draw_plan", "draw_timeline", "draw_trace",
           "time_unit"]


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


def draw_tree(tree, ax=None, costs=None, clusters=None, title=None):
    """Draw ``tree`` top-down; edge labels give the send order, colours the clusters.

    Parameters
    ----------
    tree : networkx.DiGraph
    ax : matplotlib Axes, optional
    costs : sequence of float, optional
        Per-rank initiation costs, printed under each node.
    clusters : sequence of int, optional
        The cluster of each rank, for node colours.
    """
    import matplotlib.pyplot as plt
    import networkx as nx

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    pos = tree_positions(tree)
    colors = {}
    if clusters is not None:
        colors = dict(node_color=[clusters[v] for v in tree.nodes], cmap="tab10", vmin=0,
                      vmax=9)
    nx.draw_networkx(tree, pos, ax=ax, node_size=380, font_size=8, arrows=True, **colors)
    nx.draw_networkx_edge_labels(tree, pos, ax=ax, font_size=7,
                                 edge_labels={(u, v): d["order"]
                                              for u, v, d in tree.edges(data=True)})
    if costs is not None:
        for v, (x, y) in pos.items():
            ax.annotate(f"{costs[v]:g}", (x, y), xytext=(0, -19),
                        textcoords="offset points", ha="center", fontsize=7)
    ax.set_title(title or tree.graph.get("name", "tree"))
    ax.axis("off")
    return ax


def draw_plan(plan, ax=None, title=None):
    """Draw a plan's message graph: ranks grouped by cluster, wide-area edges dashed."""
    import matplotlib.pyplot as plt
    import networkx as nx

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    g = plan.message_graph()
    members = {}
    for r, c in enumerate(plan.clusters):
        members.setdefault(c, []).append(r)
    pos = {}
    for i, (c, ranks) in enumerate(sorted(members.items())):
        for j, r in enumerate(ranks):
            pos[r] = (i, -j)
    simple = nx.DiGraph()
    simple.add_nodes_from(g.nodes)
    wan = set()
    for u, v, d in g.edges(data=True):
        simple.add_edge(u, v)
        if d["wide_area"]:
            wan.add((u, v))
    nx.draw_networkx_nodes(simple, pos, ax=ax, node_size=300, cmap="tab10", vmin=0,
                           vmax=9, node_color=[plan.clusters[r] for r in simple.nodes])
    nx.draw_networkx_labels(simple, pos, ax=ax, font_size=8)
    local = [e for e in simple.edges if e not in wan]
    nx.draw_networkx_edges(simple, pos, ax=ax, edgelist=local, arrows=True,
                           connectionstyle="arc3,rad=0.2")
    nx.draw_networkx_edges(simple, pos, ax=ax, edgelist=sorted(wan), style="dashed",
                           edge_color="tab:red", arrows=True, connectionstyle="arc3,rad=0.1")
    ax.set_title(title or f"{plan.op}: {plan.family}/{plan.algorithm}")
    ax.axis("off")
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
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                  fontsize="small", frameon=False)


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
    plan = result.plan
    ax.set_title(title or f"{plan.op} {plan.family}/{plan.algorithm}: "
                          f"{result.completion * factor:.4g} {unit} predicted",
                 fontsize="medium")
    return ax


def draw_trace(trace, ax=None, *, title=None, clusters=None):
    """Draw a Chrome trace written by ``wacoll.Comm.write_trace`` as a timeline.

    One row per rank (integer ticks), a bar per traced step, coloured by kind
    (sends, receives, local work), the collective operations as thin outlines; time in
    milliseconds from the first event.

    Parameters
    ----------
    trace : str, Path or dict
        The trace file, or its loaded JSON.
    ax : matplotlib Axes, optional
    title : str, optional
    clusters : sequence of int, optional
        The cluster of each rank, written beside its tick.

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> events = [{"ph": "X", "tid": 0, "ts": 0.0, "dur": 1500.0, "cat": "operation",
    ...            "name": "bcast"}, {"ph": "X", "tid": 1, "ts": 100.0, "dur": 900.0,
    ...            "cat": "step", "name": "recv 0 [0]"}]
    >>> ax = draw_trace({"traceEvents": events})
    >>> ax.get_xlabel()
    'time (ms)'
    """
    import json
    from pathlib import Path

    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    if not isinstance(trace, dict):
        trace = json.loads(Path(trace).read_text())
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    size = 1 + max((e["tid"] for e in events), default=0)
    if ax is None:
        _, ax = plt.subplots(figsize=(9, min(12.0, max(2.2, 0.4 * size + 1.2))))
    kinds = {"send": ("tab:blue", "send"), "recv": ("tab:green", "receive"),
             "local": ("tab:orange", "copy/combine")}
    for e in events:
        start, width = e["ts"] / 1e3, e["dur"] / 1e3
        if e.get("cat") == "operation":
            ax.barh(e["tid"], width, left=start, height=0.9, fill=False,
                    edgecolor="0.3", linewidth=0.8)
            continue
        word = e["name"].split()[0]
        kind = "send" if word == "send" else "recv" if word.startswith("recv") \
            else "local"
        ax.barh(e["tid"], width, left=start, height=0.6, color=kinds[kind][0])
    ax.set_xlabel("time (ms)")
    ax.set_ylabel("rank")
    _integer_ranks(ax, size)
    if clusters is not None:
        ax.set_yticks(range(size))
        ax.set_yticklabels([f"{r} (c{clusters[r]})" for r in range(size)])
    handles = [Patch(color=c, label=label) for c, label in kinds.values()]
    handles.append(Patch(fill=False, edgecolor="0.3", label="collective call"))
    _legend_outside(ax, handles)
    ax.set_title(title or "traced run", fontsize="medium")
    ax.set_xlim(left=0)
    return ax
