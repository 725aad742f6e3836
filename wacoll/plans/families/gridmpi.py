"""The **gridmpi** family: Matsuda et al.'s multi-sender wide-area bcast and allreduce,
pipelined, and an allgather after them.

Matsuda, Kudoh, Kodama, Takano and Ishikawa (Cluster 2006) modify van de Geijn's
broadcast (scatter + allgather) and Rabenseifner's allreduce (reduce-scatter +
allgather) for clusters joined by *long-and-fast* wide-area links, whose bandwidth
exceeds a node's: between the two stages, each block crosses the wide area from its
owner in one cluster to its owner in another, so many nodes share the wide-area link
(``counter_copy``, ``counter_reduce``). Only ``n`` *selected* ranks per cluster send
across the wide area; the others first forward their blocks to a selected rank of
their cluster (the paper's "simple forwarding"), which keeps ``n`` senders on the
link. A sender is forwarded only the blocks it lacks: in a broadcast's root cluster
the scatter tree already gave each sender its group's blocks when ``n`` and the
cluster size are powers of two, so nothing is forwarded there. The wide-area
messages and bytes do not depend on ``n`` between clusters of equal size (each
block crosses once, one message per sender, destination rank and pipeline
segment); ``n`` shows in
:func:`wide_area_senders` and in the forwarding inside the clusters.

Table 1's costs: ``L + M/nB + M/B + M/B`` for both, against
``L + M/B + (M/B + M/B)`` for *farfirst* broadcast and
``L + M/B + (M/B + M/B) + (M/B + M/B)`` for *two-tier* allreduce.

Algorithms
----------
bcast ``"vandegeijn"`` (default)
    Binomial scatter in the root's cluster, ``counter_copy`` from the root cluster to
    every other (Section 2.5: one-to-all), allgather in every cluster. With
    ``segments``, pipelined as the allreduce below.
bcast ``"farfirst"``
    The root first sends the whole message to each remote coordinator, then every
    cluster runs van de Geijn's broadcast from its coordinator.
bcast ``"flat-vandegeijn"``
    Van de Geijn's broadcast over all ranks as one group, blind to clusters.
allreduce ``"rabenseifner"`` (default)
    Reduce-scatter in every cluster, ``counter_reduce`` all-to-all between clusters
    (each owner combines the partials of all clusters in cluster order), allgather
    in every cluster. With ``segments`` the three stages run per segment, pipelined
    (wacoll's addition: the paper sends the vector as one): each rank
    reduce-scatters the next segment while the last one's partials cross the wide
    area, and allgathers the first segments while the later ones cross, so on a
    long-and-fast link the clusters' stages hide behind the wide-area transfer.
allreduce ``"two-tier"``
    Reduce to each cluster's coordinator (reduce-scatter + binomial gather), exchange
    between coordinators, then van de Geijn's broadcast in every cluster (on one
    cluster there is nothing to exchange, and it is Rabenseifner's allreduce).
allreduce ``"flat-rabenseifner"``
    Rabenseifner's allreduce over all ranks as one group.
allgather ``"multi-sender"`` (the only one; wacoll's, after ``counter_copy``)
    Every rank sends its block to one rank of every other cluster while each
    cluster allgathers its own; then each cluster allgathers what it received.

Blocks
------
(The allgather has one block per rank, as every family's.) A cluster of ``p`` ranks
cuts the vector into ``p`` contiguous ranges. The plan's
blocks are the common refinement of every cluster's cut (plus an even cut into
``segments``, which only makes blocks finer; the pipelined broadcast and allreduce
cut each segment by every cluster's split instead, with at least one element per
rank of the largest cluster in each segment), so each block has exactly one owner in
each cluster; this is how clusters of different sizes exchange blocks. The builders
make a :class:`~wacoll.plans.builder.PlanBuilder` for ``count`` elements and replace
its ``counts`` by the refinement's (a segmented operation only needs one block or
more, so any refinement is a valid layout). In the root's cluster, position ``j``
of the order starting at the root owns range ``j``; elsewhere the ``j``-th lowest
rank does, except after a power-of-two recursive halving, where it is the rank at
position ``bitreverse(j)``.

Reduction levels
----------------
Operands stay in rank order inside a cluster; the modified Rabenseifner and two-tier
algorithms combine whole cluster partials in cluster order (by lowest rank), so they
need ``"associative"`` when every cluster is a contiguous rank range and
``"commutative"`` otherwise. None of the three keeps the one canonical expression of
level ``"strict"`` on every topology, so ``"strict"`` is refused: use the magpie or
mpich allreduce for bit-reproducible results.

Examples
--------
>>> from wacoll import Topology
>>> from wacoll.plans.families import gridmpi
>>> topo = Topology.from_sizes([4, 4])
>>> plan = gridmpi.bcast(topo, count=1 << 20, n=2)
>>> report = plan.prove()
>>> report.wide_area_messages, report.wide_area_bytes
(4, 1048576)
>>> gridmpi.wide_area_senders(plan)
{0: (0, 2)}
"""

from __future__ import annotations

from wacoll.errors import PlanError
from wacoll.plans.builder import PlanBuilder
from wacoll.plans.families.gridmpi_parts import (
    Layout,
    binomial_gather,
    binomial_scatter,
    reduce_scatter,
    wide_area_receives,
    wide_area_sends,
)
from wacoll.plans.families.gridmpi_parts import (
    allgather as cluster_allgather,
)
from wacoll.plans.operations import LEVELS

__all__ = [
    "bcast",
    "allreduce",
    "allgather",
    "wide_area_senders",
    "BCAST_ALGORITHMS",
    "ALLREDUCE_ALGORITHMS",
    "BUILDERS",
    "OPTIONS",
]

#: Broadcast algorithms, default first.
BCAST_ALGORITHMS = ("vandegeijn", "farfirst", "flat-vandegeijn")
#: Allreduce algorithms, default first.
ALLREDUCE_ALGORITHMS = ("rabenseifner", "two-tier", "flat-rabenseifner")
#: The algorithms that take ``n``: the modified ones, with wide-area senders.
_MULTI_SENDER = ("vandegeijn", "rabenseifner")


def _algorithm(op, algorithm, known):
    if algorithm not in known:
        raise PlanError(
            f"unknown gridmpi {op} algorithm {algorithm!r}; known: {', '.join(known)}"
        )
    return algorithm


def _senders(n, algorithm, topology):
    """Validate ``n``; the value recorded in the plan (largest cluster when None)."""
    if algorithm not in _MULTI_SENDER:
        if n is not None:
            raise PlanError(
                f"n (wide-area senders per cluster) applies to the "
                f"{' and '.join(_MULTI_SENDER)} algorithms, not {algorithm!r}"
            )
        return None
    if n is None:
        return max(len(c) for c in topology.clusters)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise PlanError(
            f"n (wide-area senders per cluster) must be an integer >= 1, got {n!r}"
        )
    return n


def _cluster_order(topology):
    """Cluster ids by lowest rank: the order cluster partials are combined in."""
    return sorted(range(topology.nclusters), key=lambda c: topology.clusters[c][0])


def _rotate(members, first):
    i = members.index(first)
    return tuple(members[i:]) + tuple(members[:i])


def _owner_map(owners, ranges):
    return {x: owners[j] for j, blocks in enumerate(ranges) for x in blocks}


def _layout(count, sizes, segments, pipelined):
    """The plan's blocks: per pipeline segment (:meth:`Layout.pipelined`), or the
    whole vector's refinement (:meth:`Layout.refine`)."""
    return (Layout.pipelined if pipelined else Layout.refine)(count, sizes, segments)


def _segments(layout):
    """The element bounds of each of ``layout``'s pipeline segments (None: the whole
    vector, for a layout without segments)."""
    return layout.segments or (None,)


def _built(b, algorithm, layout, segments, n):
    """The plan of ``b``, with its parameters: the segments in effect and ``n``."""
    params = {"segments": len(layout.segments) if layout.segments else segments}
    if n is not None:
        params["n"] = n
    return b.build(family="gridmpi", algorithm=algorithm, **params)


def _builder(op, topology, layout, **kwargs):
    b = PlanBuilder(op, topology, **kwargs)
    b.counts = layout.counts  # the refinement replaces PlanBuilder's even segments
    return b


# ----------------------------------------------------------------------------- bcast
def bcast(
    topology, *, root=0, count=1, segments=1, itemsize=1, algorithm="vandegeijn", n=None
):
    """Broadcast from ``root`` by one of Matsuda et al.'s algorithms.

    Parameters
    ----------
    topology : Topology
    root : int
    count : int
        Elements of the message.
    segments : int
        ``"vandegeijn"`` on several clusters: pipeline segments (at most ``count``),
        each scattered, sent across the wide area and allgathered on its own. The
        other algorithms: also cut the blocks at an even split into ``segments``
        (finer block ids only).
    itemsize : int
        Bytes per element.
    algorithm : {"vandegeijn", "farfirst", "flat-vandegeijn"}
        See the module docstring.
    n : int, optional
        ``"vandegeijn"`` only: wide-area senders of the root's cluster (clamped to its
        size; default all its ranks).

    Examples
    --------
    >>> from wacoll import Topology
    >>> plan = bcast(Topology.from_sizes([2, 2]), count=4, algorithm="farfirst")
    >>> print(plan.describe())
    bcast on 4 ranks, root 0 (gridmpi/farfirst)
    rank 0: send 2 [0,1]; send 1 [1]; send 1 [0]
    rank 1: recv 0 [1]; recv 0 [0]
    rank 2: recv 0 [0,1]; send 3 [1]; send 3 [0]
    rank 3: recv 2 [1]; recv 2 [0]
    """
    _algorithm("bcast", algorithm, BCAST_ALGORITHMS)
    n_param = _senders(n, algorithm, topology)
    clusters = topology.clusters
    flat = algorithm == "flat-vandegeijn"
    sizes = [topology.size] if flat else [len(c) for c in clusters]
    layout = _layout(
        count, sizes, segments, pipelined=algorithm == "vandegeijn" and len(clusters) > 1
    )
    b = _builder("bcast", topology, layout, root=root, count=count, itemsize=itemsize)
    root = b.root
    if algorithm == "flat-vandegeijn":
        order = _rotate(tuple(range(topology.size)), root)
        ranges = layout.ranges(topology.size)
        held = binomial_scatter(b, order, ranges)
        cluster_allgather(b, order, ranges, held=held)
    elif algorithm == "farfirst":
        _farfirst(b, topology, layout, root)
    else:
        _vandegeijn(b, topology, layout, root, n_param)
    return _built(b, algorithm, layout, segments, n_param)


def _farfirst(b, topology, layout, root):
    home = topology.cluster_of(root)
    coords = topology.coordinators(root)
    for c in _cluster_order(topology):
        if c != home:
            b.transfer(root, coords[c], b.all_blocks)
    for c, members in enumerate(topology.clusters):
        order = _rotate(members, coords[c])
        ranges = layout.ranges(len(members))
        held = binomial_scatter(b, order, ranges)
        cluster_allgather(b, order, ranges, held=held)


def _vandegeijn(b, topology, layout, root, n):
    """The modified van de Geijn broadcast, one segment of ``layout`` after another.

    As :func:`_rabenseifner`: each rank's program first scatters every segment and
    sends it across the wide area, then receives and allgathers every segment.
    """
    home = topology.cluster_of(root)
    clusters = topology.clusters
    order = _rotate(clusters[home], root)
    stages = []
    for within in _segments(layout):
        ranges = {
            c: layout.ranges(len(members), within)
            for c, members in enumerate(clusters)
            if c != home
        }
        ranges[home] = layout.ranges(len(order), within)
        held = binomial_scatter(b, order, ranges[home])
        destinations = [
            (c, _owner_map(clusters[c], ranges[c]))
            for c in _cluster_order(topology)
            if c != home
        ]
        messages = wide_area_sends(
            b, home, order, ranges[home], held, min(n, len(order)), destinations
        )
        stages.append((ranges, held, messages))
    for ranges, held, messages in stages:
        wide_area_receives(b, messages, topology.cluster_ids, None)
        for c, members in enumerate(clusters):
            if c == home:
                cluster_allgather(b, order, ranges[c], held=held)
            else:
                cluster_allgather(b, members, ranges[c])


# ------------------------------------------------------------------------- allreduce
def _validate_level(level, algorithm, topology):
    if level is None:
        level = "strict"
    if level not in LEVELS:
        raise PlanError(f"unknown reduction level {level!r}; known: {', '.join(LEVELS)}")
    if level == "strict":
        raise PlanError(
            f"the gridmpi {algorithm!r} allreduce cannot keep level 'strict': its "
            f"reduce-scatter and its combining of cluster partials group the operands "
            f"by the topology, not by the one canonical expression; pass "
            f"level='associative' (or 'commutative'), or use the magpie or mpich "
            f"allreduce for strict results"
        )
    if level == "associative" and algorithm != "flat-rabenseifner":
        scattered = [
            c for c, m in enumerate(topology.clusters) if m[-1] - m[0] + 1 != len(m)
        ]
        if scattered:
            raise PlanError(
                f"the gridmpi {algorithm!r} allreduce combines whole cluster partials, "
                f"which keeps rank order only when every cluster is a contiguous rank "
                f"range; cluster {scattered[0]} {list(topology.clusters[scattered[0]])} "
                f"is not: use level='commutative' or the 'flat-rabenseifner' algorithm"
            )
    return level


def allreduce(
    topology,
    *,
    count=1,
    segments=1,
    level=None,
    itemsize=1,
    algorithm="rabenseifner",
    n=None,
):
    """Allreduce by one of Matsuda et al.'s algorithms.

    Parameters
    ----------
    topology : Topology
    count : int
        Elements of the vector.
    segments : int
        ``"rabenseifner"`` on several clusters: pipeline segments (at most ``count``),
        each reduce-scattered, sent across the wide area and allgathered on its own,
        so the clusters' stages overlap the wide-area transfer of other segments.
        The other algorithms: also cut the blocks at an even split into
        ``segments`` (finer block ids only).
    level : {"associative", "commutative"}
        ``"strict"`` (the default of wacoll's reductions) is refused, see the module
        docstring; ``"associative"`` needs contiguous clusters except for
        ``"flat-rabenseifner"``.
    itemsize : int
        Bytes per element.
    algorithm : {"rabenseifner", "two-tier", "flat-rabenseifner"}
    n : int, optional
        ``"rabenseifner"`` only: wide-area senders per cluster (clamped to each
        cluster's size; default all ranks).

    Examples
    --------
    >>> from wacoll import Topology
    >>> topo = Topology.from_sizes([4, 4])
    >>> allreduce(topo, count=8, level="associative", n=1).prove().wide_area_messages
    8
    >>> allreduce(topo, count=8)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    wacoll.errors.PlanError: the gridmpi 'rabenseifner' allreduce cannot keep level ...
    """
    _algorithm("allreduce", algorithm, ALLREDUCE_ALGORITHMS)
    n_param = _senders(n, algorithm, topology)
    level = _validate_level(level, algorithm, topology)
    clusters = topology.clusters
    flat = algorithm == "flat-rabenseifner"
    sizes = [topology.size] if flat else [len(c) for c in clusters]
    layout = _layout(
        count,
        sizes,
        segments,
        pipelined=algorithm == "rabenseifner" and len(clusters) > 1,
    )
    b = _builder(
        "allreduce", topology, layout, count=count, level=level, itemsize=itemsize
    )
    if flat:
        ranges = layout.ranges(topology.size)
        owners = reduce_scatter(b, tuple(range(topology.size)), ranges)
        cluster_allgather(b, owners, ranges)
    elif algorithm == "two-tier":
        _two_tier(b, topology, layout)
    else:
        _rabenseifner(b, topology, layout, n_param)
    return _built(b, algorithm, layout, segments, n_param)


def _rabenseifner(b, topology, layout, n):
    """The modified Rabenseifner allreduce, one segment of ``layout`` after another.

    Each rank's program first reduce-scatters every segment and sends its partials
    across the wide area, then receives and allgathers every segment: a rank starts
    the next segment's reduce-scatter while the last one's partials cross, and the
    first segment's allgather runs while the later ones cross.
    """
    clusters = topology.clusters
    order = _cluster_order(topology)
    position = {c: i for i, c in enumerate(order)}
    stages = []
    for within in _segments(layout):
        owners, ranges = {}, {}
        for c, members in enumerate(clusters):
            ranges[c] = layout.ranges(len(members), within)
            owners[c] = reduce_scatter(b, members, ranges[c])
        messages = []
        for c in order:
            held = {owners[c][j]: set(blocks) for j, blocks in enumerate(ranges[c])}
            destinations = [
                (d, _owner_map(owners[d], ranges[d])) for d in order if d != c
            ]
            messages += wide_area_sends(
                b, c, owners[c], ranges[c], held, min(n, len(clusters[c])), destinations
            )
        stages.append((owners, ranges, messages))
    for owners, ranges, messages in stages:
        wide_area_receives(b, messages, topology.cluster_ids, position, combine=True)
        for c in range(len(clusters)):
            cluster_allgather(b, owners[c], ranges[c])


def _two_tier(b, topology, layout):
    clusters = topology.clusters
    order = _cluster_order(topology)
    coords = topology.coordinators()
    if len(clusters) == 1:  # nothing to exchange: the owners already hold the result
        ranges = layout.ranges(topology.size)
        cluster_allgather(b, reduce_scatter(b, clusters[0], ranges), ranges)
        return
    for members in clusters:
        ranges = layout.ranges(len(members))
        owners = reduce_scatter(b, members, ranges)
        binomial_gather(
            b, owners, ranges
        )  # owners[0] is the lowest rank: the coordinator
    for c in order:
        for d in order:
            if d != c:
                b.send(coords[c], coords[d], b.all_blocks, "out")
    for i, c in enumerate(order):
        for d in order[i + 1 :]:
            b.recv_combine(coords[c], coords[d], b.all_blocks, "out", "right")
        for d in reversed(order[:i]):
            b.recv_combine(coords[c], coords[d], b.all_blocks, "out", "left")
    for members in clusters:
        ranges = layout.ranges(len(members))
        held = binomial_scatter(b, members, ranges)
        cluster_allgather(b, members, ranges, held=held)


# ------------------------------------------------------------------------- allgather
def allgather(topology, *, count=1, itemsize=1):
    """Allgather with every rank a wide-area sender: Matsuda's ``counter_copy``
    applied to the allgather (wacoll's addition; the paper has bcast and allreduce).

    Each rank sends its block straight to one rank of every other cluster (position
    ``i`` of a cluster to position ``i`` modulo the other's size), so all of a
    cluster's ranks share the wide-area link, as in the modified van de Geijn
    broadcast; meanwhile every cluster allgathers its own blocks; then every
    cluster allgathers the blocks its ranks received. Each block crosses to each
    other cluster once, as in MagPIe's allgather, but no coordinator funnels a
    cluster's blocks: on a long-and-fast link the wide-area transfer, not one
    rank's link, sets the time.

    Examples
    --------
    >>> from wacoll import Topology
    >>> plan = allgather(Topology.from_sizes([2, 2]))
    >>> [str(s) for s in plan.programs[0]]
    ['copy [0] in -> out', 'send 2 [0]', 'send 1 [0]', 'recv 1 [1]', 'recv 2 [2]', \
'send 1 [2]', 'recv 1 [3]']
    >>> report = plan.prove()
    >>> report.wide_area_messages, sorted(wide_area_senders(plan)[0])
    (4, [0, 1])
    """
    b = PlanBuilder("allgather", topology, count=count, itemsize=itemsize)
    clusters = topology.clusters
    order = _cluster_order(topology)
    received = {r: [] for r in range(topology.size)}
    for r in range(topology.size):
        b.copy(r, (r,), "in", "out")
    for c in order:
        for d in order:
            if d != c:
                there = clusters[d]
                for i, r in enumerate(clusters[c]):
                    b.send(r, there[i % len(there)], (r,))
                    received[there[i % len(there)]].append(r)
    for members in clusters:
        cluster_allgather(b, members, tuple((r,) for r in members))
    for members in clusters:
        for r in members:
            for src in received[r]:
                b.recv(r, src, (src,))
        cluster_allgather(b, members, tuple(tuple(sorted(received[r])) for r in members))
    return b.build(family="gridmpi", algorithm="multi-sender")


# -------------------------------------------------------------------------- analysis
def wide_area_senders(plan) -> dict:
    """The ranks of each cluster that send across the wide area, by cluster id.

    The ``n`` of the modified algorithms shows here: at most ``n`` ranks per cluster
    send wide-area messages (the wide-area messages and bytes themselves do not
    depend on ``n`` when the clusters have the same size).

    Examples
    --------
    >>> from wacoll import Topology
    >>> topo = Topology.from_sizes([4, 4])
    >>> wide_area_senders(allreduce(topo, count=8, level="associative", n=1))
    {0: (0,), 1: (4,)}
    """
    out: dict[int, set[int]] = {}
    for m in plan.messages():
        if m.wide_area:
            out.setdefault(plan.clusters[m.src], set()).add(m.src)
    return {c: tuple(sorted(s)) for c, s in sorted(out.items())}


BUILDERS = {"bcast": bcast, "allreduce": allreduce, "allgather": allgather}

#: The keyword options each builder takes, in its signature's order: what
#: :func:`wacoll.plans.families.options` reports and :func:`wacoll.plans.build` accepts.
OPTIONS = {
    "bcast": ("root", "count", "segments", "itemsize", "algorithm", "n"),
    "allreduce": ("count", "segments", "level", "itemsize", "algorithm", "n"),
    "allgather": ("count", "itemsize"),
}
