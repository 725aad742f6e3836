"""The **combining** family: Plaat's per-cluster message combining for all-to-all.

Plaat, Bal, Hofman and Kielmann (HPCA 1999) sped up Barnes-Hut and Awari on a
two-layer interconnect by combining messages per cluster: "cross-cluster messages
are first being assembled at a designated local processor, are then sent in batch
over the slow link, and are subsequently distributed by a designated processor at
the other cluster to the final destinations". For MPI's all-to-all this is:

1. every rank sends its coordinator (the lowest rank of its cluster) one message
   with all its blocks for other clusters;
2. each coordinator sends every other coordinator ONE wide-area message with all
   blocks from its cluster to that cluster, so ``C * (C - 1)`` wide-area messages
   cross instead of one per pair of ranks in different clusters;
3. each coordinator hands every rank of its cluster one message with all the blocks
   for it from other clusters.

Blocks between two ranks of the same cluster go directly. A rank's direct block for
its coordinator rides in its step-1 message, and the coordinator's direct block for
a rank in its step-3 message, so every ordered pair of ranks exchanges at most one
message. Each block crosses the wide area once, on one wide-area hop. With a single
cluster the plan is a plain pairwise exchange.

The coordinators stage blocks in the scratch buffer ``"tmp"``. Zero-count blocks of
``alltoallv`` travel with the others: the plan model delivers every block, so a
message is sent whenever it carries a block, even if all its blocks are empty.

Examples
--------
>>> from wacoll import Topology
>>> from wacoll.plans import build
>>> topo = Topology.from_sizes([4, 4, 4])
>>> combined = build("alltoall", topo, "combining").prove()
>>> flat = build("alltoall", topo, "mpich").prove()
>>> combined.wide_area_messages, flat.wide_area_messages
(6, 96)
>>> combined.wide_area_bytes == flat.wide_area_bytes, combined.optimality
(True, 'yes')
"""

from __future__ import annotations

import numpy as np

from wacoll.plans.blockruns import compact_blocks, outer_runs
from wacoll.plans.builder import PlanBuilder

__all__ = ["alltoall", "alltoallv", "BUILDERS", "OPTIONS"]

_FAMILY = "combining"
_ALGORITHM = "cluster-combining"


class _Layout:
    """Block ids and message contents of the combining all-to-all on one topology.

    The messages through a coordinator hold thousands of blocks on large
    topologies (a wide-area message carries a cluster's blocks for another
    cluster); they are made with numpy and held as
    :class:`~wacoll.plans.blockruns.BlockRuns` when they are regular.
    """

    def __init__(self, topology):
        self.size = topology.size
        self.clusters = topology.clusters
        self.cluster_of = topology.cluster_ids
        self.coordinator = tuple(members[0] for members in self.clusters)
        ids = np.asarray(self.cluster_of)
        self._members = [
            np.sort(np.asarray(members, dtype=np.int64)) for members in self.clusters
        ]
        # per cluster: the ranks of other clusters and its coordinator, ascending
        self._outside = [
            np.sort(np.append(np.flatnonzero(ids != ids[k]), k)) for k in self.coordinator
        ]

    def block(self, src, dst):
        return src * self.size + dst

    def others(self, c):
        """The clusters other than ``c``, starting after it (spreads the first sends)."""
        n = len(self.clusters)
        return [(c + k) % n for k in range(1, n)]

    def to_coordinator(self, r):
        """Rank ``r``'s step-1 message to its coordinator ``k``.

        It carries ``r``'s blocks for the other clusters and for ``k``.
        """
        return compact_blocks(r * self.size + self._outside[self.cluster_of[r]])

    def between(self, a, b):
        """The wide-area message from cluster ``a`` to cluster ``b``."""
        # (ascending: both member lists ascend and every id is below size)
        return outer_runs(self._members[a] * self.size, self._members[b])

    def from_coordinator(self, r):
        """Rank ``r``'s step-3 message from its coordinator ``k``.

        It carries the blocks for ``r`` from the other clusters and from ``k``.
        """
        return compact_blocks(self._outside[self.cluster_of[r]] * self.size + r)

    def row(self, k):
        """Rank ``k``'s blocks for every other rank."""
        return compact_blocks(k * self.size + np.delete(np.arange(self.size), k))

    def column(self, k):
        """Every other rank's blocks for rank ``k``."""
        return compact_blocks(np.delete(np.arange(self.size), k) * self.size + k)


def _direct(b, lay, r, peers):
    """Pairwise exchange of direct blocks between ``r`` and ``peers`` (its cluster)."""
    members = list(peers)
    if not members:
        return
    # start after r, so that r's cluster mates do not all send to the same rank first
    start = next((k for k, p in enumerate(members) if p > r), 0)
    order = members[start:] + members[:start]
    for p in order:
        b.send(r, p, (lay.block(r, p),), "in")
    for p in reversed(order):
        b.recv(r, p, (lay.block(p, r),), "out")


def _member(b, lay, r):
    c = lay.cluster_of[r]
    k = lay.coordinator[c]
    b.copy(r, (lay.block(r, r),), "in", "out")
    b.send(r, k, lay.to_coordinator(r), "in")
    _direct(b, lay, r, [p for p in lay.clusters[c] if p not in (r, k)])
    b.recv(r, k, lay.from_coordinator(r), "out")


def _coordinator(b, lay, k):
    c = lay.cluster_of[k]
    members = [p for p in lay.clusters[c] if p != k]
    remote = lay.others(c)
    b.copy(k, (lay.block(k, k),), "in", "out")
    # stage everything k sends on others' behalf: its blocks for other clusters and
    # its direct blocks for its members, which ride in their step-3 messages
    b.copy(k, lay.row(k), "in", "tmp")
    for m in members:
        b.recv(k, m, lay.to_coordinator(m), "tmp")
    for d in remote:
        b.send(k, lay.coordinator[d], lay.between(c, d), "tmp")
    for d in reversed(remote):
        b.recv(k, lay.coordinator[d], lay.between(d, c), "tmp")
    b.copy(k, lay.column(k), "tmp", "out")
    for m in members:
        b.send(k, m, lay.from_coordinator(m), "tmp")


def _build(op, topology, count, counts, itemsize):
    b = PlanBuilder(op, topology, count=count, counts=counts, itemsize=itemsize)
    lay = _Layout(topology)
    if len(lay.clusters) == 1:
        for r in range(lay.size):
            if not b.keeps(r):
                continue
            b.copy(r, (lay.block(r, r),), "in", "out")
            _direct(b, lay, r, [p for p in range(lay.size) if p != r])
        return b.build(family=_FAMILY, algorithm=_ALGORITHM)
    coordinators = set(lay.coordinator)
    for r in range(lay.size):
        if not b.keeps(r):  # a focused build makes only its rank's messages
            continue
        if r in coordinators:
            _coordinator(b, lay, r)
        else:
            _member(b, lay, r)
    return b.build(family=_FAMILY, algorithm=_ALGORITHM)


def alltoall(topology, *, count=1, itemsize=1):
    """All-to-all with one combined wide-area message per ordered pair of clusters.

    Examples
    --------
    Ranks 0 and 1 form one cluster, rank 2 the other; block ``3*i + j`` goes from
    ``i`` to ``j``. Rank 0 coordinates the first cluster:

    >>> from wacoll import Topology
    >>> plan = alltoall(Topology.from_sizes([2, 1]))
    >>> for step in plan.programs[0]:
    ...     print(step)
    copy [0] in -> out
    copy [1,2] in -> tmp
    recv 1 [3,5] into tmp
    send 2 [2,5] from tmp
    recv 2 [6,7] into tmp
    copy [3,6] tmp -> out
    send 1 [1,7] from tmp
    >>> [str(step) for step in plan.programs[1]]
    ['copy [4] in -> out', 'send 0 [3,5] from in', 'recv 0 [1,7]']
    >>> plan.prove().wide_area_messages
    2
    """
    return _build("alltoall", topology, count, None, itemsize)


def alltoallv(topology, *, counts=None, count=1, itemsize=1):
    """:func:`alltoall` with a (sender, receiver) matrix of counts.

    Examples
    --------
    >>> from wacoll import Topology
    >>> counts = [[1, 0, 2], [3, 0, 0], [0, 0, 5]]
    >>> report = alltoallv(Topology.from_sizes([2, 1]), counts=counts).prove()
    >>> report.wide_area_messages, report.wide_area_bytes
    (2, 2)
    """
    return _build("alltoallv", topology, count, counts, itemsize)


BUILDERS = {"alltoall": alltoall, "alltoallv": alltoallv}

#: The keyword options each builder takes, in its signature's order: what
#: :func:`wacoll.plans.families.options` reports and :func:`wacoll.plans.build` accepts.
OPTIONS = {
    "alltoall": ("count", "itemsize"),
    "alltoallv": ("counts", "count", "itemsize"),
}
