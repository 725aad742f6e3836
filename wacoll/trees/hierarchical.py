"""Two-level trees built from a :class:`~wacoll.Topology`.

- :func:`two_level`: MagPIe's shape: a flat tree between cluster coordinators (the
  root coordinates its own cluster), a binary (or binomial, ...) tree inside each.
- :func:`paths_hierarchical`: PATHS's hierarchical scheme: the ranks on the root's
  node talk to the root directly; every other node reduces locally to its lowest rank,
  which talks to the root.
- :func:`paths_grouped`: PATHS's grouped scheme: each node's ranks form groups of
  ``group_size`` whose leaders talk straight to the root.

Examples
--------
>>> from wacoll import Topology
>>> from wacoll.trees import two_level, children
>>> t = two_level(Topology.from_sizes([3, 3]), root=1)
>>> children(t, 1), children(t, 3)
([3, 0, 2], [4, 5])
"""

from __future__ import annotations

import networkx as nx

from wacoll.errors import PlanError
from wacoll.topology import Topology
from wacoll.trees import basic

__all__ = ["two_level", "paths_hierarchical", "paths_grouped", "INTRA_SHAPES"]

#: Intra-cluster shapes a two-level tree may use.
INTRA_SHAPES = {
    "flat": basic.flat,
    "chain": basic.chain,
    "binary": basic.binary,
    "binomial": basic.binomial,
}


def _topology(topology, root):
    if not isinstance(topology, Topology):
        raise PlanError("two-level trees need a wacoll.Topology")
    topology.coordinators(root)  # validates root


def _local_tree(members, coordinator, shape):
    """``shape`` over a cluster's ranks, the coordinator first and the rest in rank order."""
    try:
        make = INTRA_SHAPES[shape]
    except KeyError:
        raise PlanError(
            f"unknown intra-cluster shape {shape!r}; known: {', '.join(INTRA_SHAPES)}"
        ) from None
    members = [coordinator] + [r for r in members if r != coordinator]
    local = make(len(members), 0)
    return {
        members[p]: [members[c] for c in basic.children(local, p)]
        for p in range(len(members))
    }


def two_level(
    topology: Topology, root: int = 0, intra: str = "binary", wan_first: bool = True
) -> nx.DiGraph:
    """MagPIe's broadcast shape: flat between coordinators, ``intra`` inside clusters.

    Parameters
    ----------
    topology : Topology
    root : int
        The root; it coordinates its own cluster.
    intra : {"binary", "binomial", "flat", "chain"}
        The tree inside each cluster (MagPIe used binary trees).
    wan_first : bool
        Whether the root serves the other coordinators before its own cluster
        (right for a broadcast, where wide-area messages take longest).

    Examples
    --------
    >>> from wacoll import Topology
    >>> from wacoll.trees import children
    >>> children(two_level(Topology.from_sizes([2, 2, 2]), wan_first=False), 0)
    [1, 2, 4]
    """
    _topology(topology, root)
    coords = topology.coordinators(root)
    home = topology.cluster_of(root)
    kids = {}
    for c, members in enumerate(topology.clusters):
        kids.update(_local_tree(members, coords[c], intra))
    remote = [coords[c] for c in range(topology.nclusters) if c != home]
    local = kids.get(root, [])
    kids[root] = remote + local if wan_first else local + remote
    tree = basic.from_parents(kids, topology.size, root, f"two-level-{intra}")
    return tree


def paths_hierarchical(
    topology: Topology, root: int = 0, remote_first: bool = False
) -> nx.DiGraph:
    """PATHS's hierarchical scheme (one cluster per SMP node).

    The other ranks of the root's node are the root's children; every other node's
    lowest rank gathers its node's ranks (flat) and is a child of the root.

    Examples
    --------
    >>> from wacoll import Topology
    >>> from wacoll.trees import children
    >>> t = paths_hierarchical(Topology.from_sizes([2, 2, 2]))
    >>> children(t, 0), children(t, 2)
    ([1, 2, 4], [3])
    """
    _topology(topology, root)
    coords = topology.coordinators(root)
    home = topology.cluster_of(root)
    kids = {}
    for c, members in enumerate(topology.clusters):
        kids.update(_local_tree(members, coords[c], "flat"))
    remote = [coords[c] for c in range(topology.nclusters) if c != home]
    local = kids.get(root, [])
    kids[root] = remote + local if remote_first else local + remote
    return basic.from_parents(kids, topology.size, root, "paths-hierarchical")


def paths_grouped(topology: Topology, group_size: int = 4, root: int = 0) -> nx.DiGraph:
    """PATHS's grouped scheme: groups of ``group_size`` ranks per node report to the root.

    Each node's ranks (in rank order) are cut into consecutive groups; a group's first
    rank (the root, in the root's group) gathers the group and talks to the root.

    Examples
    --------
    >>> from wacoll import Topology
    >>> from wacoll.trees import children
    >>> t = paths_grouped(Topology.from_sizes([4, 4]), group_size=2)
    >>> children(t, 0), children(t, 2), children(t, 6)
    ([1, 2, 4, 6], [3], [7])
    """
    _topology(topology, root)
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
        raise PlanError(f"group_size must be a positive integer, got {group_size!r}")
    kids: dict[int, list[int]] = {root: []}
    leaders = []
    for members in topology.clusters:
        members = list(members)
        for start in range(0, len(members), group_size):
            group = members[start : start + group_size]
            leader = root if root in group else group[0]
            kids.setdefault(leader, [])
            kids[leader].extend(r for r in group if r != leader)
            if leader != root:
                leaders.append(leader)
    kids[root] = kids[root] + leaders
    return basic.from_parents(kids, topology.size, root, f"paths-grouped{group_size}")
