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
"""

from __future__ import annotations

from wacoll.trees.basic import children, tree_root

__all__ = ["tree_positions", "draw_tree", "draw_plan"]


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
            ax.annotate(f"{costs[v]:g}", (x, y), xytext=(0, -14),
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
