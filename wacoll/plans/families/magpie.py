"""The **magpie** family: MagPIe's wide-area optimal collectives (Kielmann et al., 1999).

MagPIe joins the clusters by a one-level flat tree between *coordinators* and uses a
binary tree inside each cluster (Section 2). In rooted (asymmetrical) operations the
root coordinates its own cluster and every other cluster's lowest rank coordinates
it; in symmetrical operations every cluster's lowest rank does
(:meth:`wacoll.Topology.coordinators`). Each plan crosses the wide area at most once
on any path and sends no data item into a cluster twice, except where MagPIe itself
cannot (the non-associative reductions).

The algorithms, after MagPIe's Table 1 (``algorithm`` is the plan's name):

==============================  ===========  ==========================================
operation                       algorithm    what happens
==============================  ===========  ==========================================
barrier                         coordinator  empty messages up the local trees, all-to-all
                                             between coordinators, down the local trees
bcast                           coordinator  root -> remote coordinators (flat), then
                                             every coordinator down its local tree
scatter(v), gather(v),          flat         MPICH's algorithm, wide-area optimal as it
alltoall(v)                                  is: every rank talks to the root (to every
                                             rank) directly
allgather(v)                    coordinator  local gather up the trees, one message per
                                             ordered pair of coordinators, local spread
reductions                      (several)    see :mod:`wacoll.plans.families.magpie_reduce`
==============================  ===========  ==========================================

Every builder takes ``intra`` (``"binary"``, MagPIe's choice, or ``"binomial"``): the
shape of the trees inside clusters. Broadcasts, and the local gathers of barrier
and allgather, use :func:`wacoll.trees.two_level`'s local trees (coordinator first,
then the cluster's other ranks in heap order). Reductions use :func:`ordered_tree`
instead, whose subtrees are contiguous runs of the cluster's ranks, so that partial
results keep rank order. The flat algorithms (the flat patterns of
:mod:`wacoll.plans.patterns`) accept and check ``intra``, so that one set of family
options builds every operation, and ignore it. The trees come from
:mod:`wacoll.plans.families.magpie_trees` (re-exported here), which the reductions
of :mod:`wacoll.plans.families.magpie_reduce` share.

On a reordered communicator (clusters that are not contiguous rank ranges) the same
algorithms run: messages only ever go to clusters with ranks in the communicator,
because a :class:`~wacoll.Topology` only has such clusters (Section 3.5).

Examples
--------
>>> from wacoll import Topology
>>> plan = bcast(Topology.from_sizes([3, 3]), root=1)
>>> [str(s) for s in plan.programs[1]], [str(s) for s in plan.programs[3]]
(['send 3 [0]', 'send 0 [0]', 'send 2 [0]'], ['recv 1 [0]', 'send 4 [0]', 'send 5 [0]'])
>>> allgather(Topology.from_sizes([5] * 8)).prove().wide_area_messages
56
"""

from __future__ import annotations

from wacoll.plans.builder import PlanBuilder
from wacoll.plans.families import magpie_reduce
from wacoll.plans.families.magpie_reduce import (
    allreduce,
    exscan,
    reduce,
    reduce_scatter,
    reduce_scatter_block,
    scan,
)
from wacoll.plans.families.magpie_trees import (
    INTRA,
    cluster_trees,
    coordinator_tree,
    ordered_tree,
    validate_intra,
)
from wacoll.plans.patterns import (
    EACH,
    flat_alltoall,
    flat_gather,
    flat_scatter,
    subtree_ranks,
    tree_bcast,
)
from wacoll.trees.basic import children, parent

__all__ = [
    "INTRA",
    "FAMILY",
    "validate_intra",
    "ordered_tree",
    "cluster_trees",
    "coordinator_tree",
    "barrier",
    "bcast",
    "scatter",
    "scatterv",
    "gather",
    "gatherv",
    "allgather",
    "allgatherv",
    "alltoall",
    "alltoallv",
    "reduce",
    "allreduce",
    "reduce_scatter",
    "reduce_scatter_block",
    "scan",
    "exscan",
    "BUILDERS",
    "OPTIONS",
]

FAMILY = "magpie"


def _exchange(b, coords, blocks, src="out", dst="out"):
    """The flat all-to-all between coordinators: one message per ordered pair.

    Coordinator ``c`` sends ``blocks(c, d)`` of ``src`` to coordinator ``d`` for
    ``d = c+1, c+2, ...`` (wrapping), so that no coordinator is every sender's first
    target, then receives into ``dst`` in the order the messages were sent to it.
    """
    n = len(coords)
    for c in range(n):
        for i in range(1, n):
            d = (c + i) % n
            b.send(coords[c], coords[d], blocks(c, d), src)
    for c in range(n):
        for i in range(1, n):
            d = (c - i) % n
            b.recv(coords[c], coords[d], blocks(d, c), dst)


def _build(b, algorithm, **params):
    return b.build(family=FAMILY, algorithm=algorithm, **params)


# ------------------------------------------------------------------------ barrier
def barrier(topology, *, itemsize=1, intra="binary"):
    """MagPIe's barrier (Section 3.1): gather, coordinator all-to-all, broadcast.

    Empty messages travel up each cluster's tree to its coordinator, the
    coordinators exchange empty messages all-to-all (``C (C-1)`` wide-area
    messages), and the release travels down the local trees.

    Examples
    --------
    >>> from wacoll import Topology
    >>> report = barrier(Topology.from_sizes([5] * 8)).prove()
    >>> report.wide_area_messages, report.max_wide_area_hops, report.optimality
    (56, 1, 'yes')
    """
    validate_intra(intra)
    b = PlanBuilder("barrier", topology, itemsize=itemsize)
    trees = cluster_trees(topology, None, intra)
    for tree in trees:
        for v in tree.nodes:
            if not b.keeps(v):
                continue
            for c in children(tree, v):
                b.recv(v, c, ())
            up = parent(tree, v)
            if up is not None:
                b.send(v, up, ())
    _exchange(b, topology.coordinators(), lambda c, d: ())
    for tree in trees:
        tree_bcast(b, tree, ())
    return _build(b, "coordinator", intra=intra)


# -------------------------------------------------------------------------- bcast
def bcast(topology, *, root=0, count=1, segments=1, itemsize=1, intra="binary"):
    """MagPIe's broadcast (Section 3.2): root -> coordinators -> their clusters.

    The root first sends to the other clusters' coordinators (one wide-area message
    each, so the slow links start first), then down its own cluster's tree; each
    coordinator forwards down its tree. ``segments`` pipeline one block per message.

    Examples
    --------
    >>> from wacoll import Topology
    >>> report = bcast(Topology.from_sizes([5] * 8), root=7).prove()
    >>> report.wide_area_messages, report.optimality
    (7, 'yes')
    """
    b = PlanBuilder(
        "bcast", topology, root=root, count=count, segments=segments, itemsize=itemsize
    )
    tree = coordinator_tree(topology, b.root, intra)
    tree_bcast(b, tree, b.all_blocks, segments=EACH)
    return _build(b, "coordinator", intra=intra, segments=segments)


# --------------------------------------------------- scatter, gather, alltoall
def _flat(op, topology, pattern, intra, *, root=None, count=1, counts=None, itemsize=1):
    """A plan of one flat pattern of :mod:`wacoll.plans.patterns`, named ``flat``.

    ``intra`` is checked and recorded in the plan's parameters, so that one set of
    family options builds every operation, but a flat plan has no use for it.
    """
    validate_intra(intra)
    b = PlanBuilder(
        op, topology, root=root, count=count, counts=counts, itemsize=itemsize
    )
    pattern(b)
    return _build(b, "flat", intra=intra)


def scatter(topology, *, root=0, count=1, itemsize=1, intra="binary"):
    """Flat scatter (Section 3.3): the root sends piece ``i`` to rank ``i``, in rank order.

    MPICH's algorithm, which MagPIe keeps: every piece crosses the wide area at
    most once, straight to its rank. ``intra`` is accepted (and checked) like every
    MagPIe builder's, but has no effect: there are no trees inside clusters.

    Examples
    --------
    >>> from wacoll import Topology
    >>> scatter(Topology.from_sizes([2, 2]), root=1).prove().wide_area_messages
    2
    """
    return _flat(
        "scatter",
        topology,
        flat_scatter,
        intra,
        root=root,
        count=count,
        itemsize=itemsize,
    )


def scatterv(topology, *, root=0, counts=None, count=1, itemsize=1, intra="binary"):
    """Flat scatterv: :func:`scatter` with a count per rank.

    Examples
    --------
    >>> from wacoll import Topology
    >>> scatterv(Topology.from_sizes([2, 2]), counts=[1, 0, 2, 3]).prove().wide_area_bytes
    5
    """
    return _flat(
        "scatterv",
        topology,
        flat_scatter,
        intra,
        root=root,
        count=count,
        counts=counts,
        itemsize=itemsize,
    )


def gather(topology, *, root=0, count=1, itemsize=1, intra="binary"):
    """Flat gather: the root receives piece ``i`` from rank ``i``, in rank order.

    ``intra`` is accepted (and checked) but has no effect, as for :func:`scatter`.

    Examples
    --------
    >>> from wacoll import Topology
    >>> gather(Topology.from_sizes([2, 2])).prove().optimality
    'yes'
    """
    return _flat(
        "gather", topology, flat_gather, intra, root=root, count=count, itemsize=itemsize
    )


def gatherv(topology, *, root=0, counts=None, count=1, itemsize=1, intra="binary"):
    """Flat gatherv: :func:`gather` with a count per rank.

    Examples
    --------
    >>> from wacoll import Topology
    >>> gatherv(Topology.from_sizes([2, 2]), counts=[1, 0, 2, 3]).prove().bytes
    5
    """
    return _flat(
        "gatherv",
        topology,
        flat_gather,
        intra,
        root=root,
        count=count,
        counts=counts,
        itemsize=itemsize,
    )


def alltoall(topology, *, count=1, itemsize=1, intra="binary"):
    """Flat all-to-all: rank ``i`` sends block ``i*P+j`` straight to rank ``j``.

    Rank ``i`` sends to ``i+1, i+2, ...`` (wrapping) and receives in the matching
    order, as MPICH does; every block crosses the wide area at most once. ``intra``
    is accepted (and checked) but has no effect, as for :func:`scatter`.

    Examples
    --------
    >>> from wacoll import Topology
    >>> report = alltoall(Topology.from_sizes([2, 2])).prove()
    >>> report.messages, report.wide_area_messages, report.optimality
    (12, 8, 'yes')
    """
    return _flat(
        "alltoall", topology, flat_alltoall, intra, count=count, itemsize=itemsize
    )


def alltoallv(topology, *, counts=None, count=1, itemsize=1, intra="binary"):
    """Flat all-to-all-v: :func:`alltoall` with a (sender, receiver) count matrix.

    Examples
    --------
    >>> from wacoll import Topology
    >>> alltoallv(Topology.single(2), counts=[[1, 2], [3, 4]]).prove().bytes
    5
    """
    return _flat(
        "alltoallv",
        topology,
        flat_alltoall,
        intra,
        count=count,
        counts=counts,
        itemsize=itemsize,
    )


# --------------------------------------------------------------------- allgather
def _allgather(op, topology, count, counts, itemsize, intra):
    b = PlanBuilder(op, topology, count=count, counts=counts, itemsize=itemsize)
    coords = topology.coordinators()
    trees = cluster_trees(topology, None, intra)
    everything = set(b.all_blocks)
    below = [subtree_ranks(t, {v: (v,) for v in t.nodes}) for t in trees]
    # 1. each node gathers its subtree's blocks into "out" and passes them up
    for tree, sub in zip(trees, below):
        for v in tree.nodes:
            if not b.keeps(v):
                continue
            b.copy(v, (v,), "in", "out")
            for c in children(tree, v):
                b.recv(v, c, tuple(sorted(sub[c])))
            up = parent(tree, v)
            if up is not None:
                b.send(v, up, tuple(sorted(sub[v])))
    # 2. coordinators exchange their clusters' sub-vectors
    _exchange(b, coords, lambda c, d: topology.clusters[c])
    # 3. each node passes down what its child's subtree lacks
    for tree, sub in zip(trees, below):
        for v in tree.nodes:
            if not b.keeps(v):
                continue
            up = parent(tree, v)
            if up is not None:
                b.recv(v, up, tuple(sorted(everything - sub[v])))
            for c in children(tree, v):
                b.send(v, c, tuple(sorted(everything - sub[c])))
    return _build(b, "coordinator", intra=intra)


def allgather(topology, *, count=1, itemsize=1, intra="binary"):
    """MagPIe's allgather (Section 3.3): gather locally, exchange, broadcast locally.

    Each coordinator collects its cluster's blocks up its local tree, sends that
    sub-vector to every other coordinator (one wide-area message per ordered pair,
    ``C (C-1)`` in all) and passes the whole vector down its tree. The local
    broadcast sends each child only the blocks its subtree does not already hold.

    Examples
    --------
    >>> from wacoll import Topology
    >>> plan = allgather(Topology.from_sizes([2, 2]))
    >>> [str(s) for s in plan.programs[0]]
    ['copy [0] in -> out', 'recv 1 [1]', 'send 2 [0,1]', 'recv 2 [2,3]', 'send 1 [0,2,3]']
    """
    return _allgather("allgather", topology, count, None, itemsize, intra)


def allgatherv(topology, *, counts=None, count=1, itemsize=1, intra="binary"):
    """MagPIe's allgatherv: :func:`allgather` with a count per rank.

    Examples
    --------
    >>> from wacoll import Topology
    >>> allgatherv(Topology.from_sizes([1, 2]), counts=[3, 0, 1]).prove().wide_area_bytes
    4
    """
    return _allgather("allgatherv", topology, count, counts, itemsize, intra)


BUILDERS = {
    "barrier": barrier,
    "bcast": bcast,
    "scatter": scatter,
    "scatterv": scatterv,
    "gather": gather,
    "gatherv": gatherv,
    "allgather": allgather,
    "allgatherv": allgatherv,
    "alltoall": alltoall,
    "alltoallv": alltoallv,
    "reduce": reduce,
    "allreduce": allreduce,
    "reduce_scatter": reduce_scatter,
    "reduce_scatter_block": reduce_scatter_block,
    "scan": scan,
    "exscan": exscan,
}

#: The keyword options each builder takes, in its signature's order: what
#: :func:`wacoll.plans.families.options` reports and :func:`wacoll.plans.build` accepts.
OPTIONS = {
    "barrier": ("itemsize", "intra"),
    "bcast": ("root", "count", "segments", "itemsize", "intra"),
    "scatter": ("root", "count", "itemsize", "intra"),
    "scatterv": ("root", "counts", "count", "itemsize", "intra"),
    "gather": ("root", "count", "itemsize", "intra"),
    "gatherv": ("root", "counts", "count", "itemsize", "intra"),
    "allgather": ("count", "itemsize", "intra"),
    "allgatherv": ("counts", "count", "itemsize", "intra"),
    "alltoall": ("count", "itemsize", "intra"),
    "alltoallv": ("counts", "count", "itemsize", "intra"),
    **magpie_reduce.OPTIONS,
}
