"""The magpie family's reductions: MagPIe's three algorithms per operation (Section 3.4).

MagPIe picks one of three algorithms for reduce, allreduce, reduce-scatter and scan
(and wacoll's exscan, built like scan):

``"associative"``
    Used when the user asserts associativity (level ``"associative"`` or
    ``"commutative"``). Clusters reduce locally to their coordinators up binary trees
    that keep rank order (:func:`~wacoll.plans.families.magpie_trees.ordered_tree`) and the
    coordinators combine the cluster partials in cluster order: wide-area optimal.
    On a *reordered* communicator (clusters that are not contiguous rank ranges)
    cluster order is not rank order, so the algorithm needs level ``"commutative"``;
    scan and exscan never use it there (Section 3.5).
``"short"``
    Otherwise, for vectors of fewer than ``threshold`` bytes (MagPIe: 512): every
    vector goes to where it is needed, MPI_Gather to the root for reduce, MagPIe's
    coordinator allgather for the others, and every rank combines locally in the
    prescribed order: the canonical expression (the binomial tree over ranks
    ``0..P-1``, or the left fold for scan and exscan), so results are the same on
    every topology. One wide-area latency, but each cluster sends its vectors: "near"
    optimal.
``"long"``
    Otherwise MPICH's algorithms: the binomial reduce to rank 0 in rank order (then
    to the root), followed by MagPIe's broadcast (allreduce) or a flat scatterv
    (reduce-scatter); the chain for scan and exscan. Not wide-area optimal.

:func:`choose_variant` states the rule; ``variant=`` forces one (the associative
algorithm only where its level allows it). The plan records ``variant``,
``threshold`` and ``intra`` in its params, and an algorithm name:

==================  ===========  ==========  =================
operation           associative  short       long
==================  ===========  ==========  =================
reduce              coordinator  gather      binomial
allreduce           coordinator  allgather   binomial+bcast
reduce_scatter(_b)  coordinator  allgather   binomial+scatterv
scan, exscan        coordinator  allgather   chain
==================  ===========  ==========  =================

Examples
--------
>>> from wacoll import Topology
>>> topo = Topology.from_sizes([4, 4])
>>> [reduce(topo, level=lv, count=n).algorithm
...  for lv, n in (("associative", 1), ("strict", 1), ("strict", 512))]
['coordinator', 'gather', 'binomial']
"""

from __future__ import annotations

from wacoll.errors import PlanError
from wacoll.plans.builder import PlanBuilder
from wacoll.plans.families.magpie_trees import (
    cluster_trees,
    coordinator_tree,
    ordered_tree,
    validate_intra,
)
from wacoll.plans.operations import LEVELS
from wacoll.plans.patterns import (
    EACH,
    chain_scan,
    segment_blocks,
    subtree_ranks,
    tree_bcast,
    tree_reduce,
)
from wacoll.trees.basic import binomial, children, from_parents, parent, reduce_order

__all__ = [
    "THRESHOLD",
    "VARIANTS",
    "associative_allowed",
    "choose_variant",
    "reduce",
    "allreduce",
    "reduce_scatter",
    "reduce_scatter_block",
    "scan",
    "exscan",
    "OPTIONS",
]

#: MagPIe's fixed switch between the short- and long-message algorithms, in bytes.
THRESHOLD = 512
VARIANTS = ("associative", "short", "long")

_SCANS = ("scan", "exscan")
_ALGORITHMS = {
    "reduce": ("coordinator", "gather", "binomial"),
    "allreduce": ("coordinator", "allgather", "binomial+bcast"),
    "reduce_scatter": ("coordinator", "allgather", "binomial+scatterv"),
    "reduce_scatter_block": ("coordinator", "allgather", "binomial+scatterv"),
    "scan": ("coordinator", "allgather", "chain"),
    "exscan": ("coordinator", "allgather", "chain"),
}


# ------------------------------------------------------------------ the choice
def associative_allowed(op, topology, level) -> bool:
    """Whether MagPIe's coordinator algorithm may compute ``op`` at ``level``.

    It needs associativity; on a reordered communicator also commutativity, and for
    scan and exscan a communicator that is not reordered.

    Examples
    --------
    >>> from wacoll import Topology
    >>> reordered = Topology.from_clusters([[0, 2], [1, 3]])
    >>> [associative_allowed("allreduce", reordered, level)
    ...  for level in ("associative", "commutative")]
    [False, True]
    >>> associative_allowed("scan", reordered, "commutative")
    False
    """
    if level not in ("associative", "commutative"):
        return False
    if topology.is_contiguous:
        return True
    return level == "commutative" and op not in _SCANS


def choose_variant(op, topology, level=None, nbytes=1, threshold=THRESHOLD) -> str:
    """MagPIe's run-time choice: ``"associative"``, ``"short"`` or ``"long"``.

    Parameters
    ----------
    op : str
        A reduction operation.
    topology : Topology
    level : str, optional
        The reduction level (default ``"strict"``).
    nbytes : int
        Bytes of the whole vector (every block).
    threshold : int
        Vectors of at least this many bytes take the long-message algorithm.

    Examples
    --------
    >>> from wacoll import Topology
    >>> topo = Topology.from_sizes([2, 2])
    >>> [choose_variant("reduce", topo, "strict", n) for n in (511, 512)]
    ['short', 'long']
    >>> choose_variant("reduce", topo, "associative", 10**6)
    'associative'
    """
    if associative_allowed(op, topology, level or "strict"):
        return "associative"
    return "short" if nbytes < threshold else "long"


def _start(op, topology, level, threshold, variant, intra, **layout):
    """A builder for ``op`` and the variant to build, after checking the options."""
    if level is not None and level not in LEVELS:
        raise PlanError(
            f"level must be one of {', '.join(map(repr, LEVELS))}, got {level!r}"
        )
    if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 0:
        raise PlanError(
            f"threshold must be an integer number of bytes >= 0, got {threshold!r}"
        )
    if variant is not None and variant not in VARIANTS:
        raise PlanError(
            f"variant must be one of {', '.join(map(repr, VARIANTS))}, got {variant!r}"
        )
    validate_intra(intra)
    b = PlanBuilder(op, topology, level=level, **layout)
    if variant is None:
        variant = choose_variant(
            op, topology, b.level, sum(b.counts) * b.itemsize, threshold
        )
    elif variant == "associative" and not associative_allowed(op, topology, b.level):
        need = (
            "a communicator whose clusters are contiguous rank ranges and level "
            "'associative' or 'commutative'"
            if op in _SCANS
            else "level 'associative' (or 'commutative' on a reordered communicator)"
        )
        where = "" if topology.is_contiguous else " on a reordered communicator"
        raise PlanError(
            f"MagPIe's coordinator {op} needs {need}; got level {b.level!r}{where}"
        )
    return b, variant


def _finish(b, variant, threshold, intra, **params):
    algorithm = _ALGORITHMS[b.op][VARIANTS.index(variant)]
    return b.build(
        family="magpie",
        algorithm=algorithm,
        variant=variant,
        threshold=threshold,
        intra=intra,
        **params,
    )


# ------------------------------------------------- short: every vector everywhere
def _vec(rank, r):
    """Where ``rank`` holds rank ``r``'s whole vector in the short algorithms."""
    return "in" if rank == r else f"g{r}"


def _gather_vectors(b, root):
    """MPI_Gather of whole vectors, flat: rank ``r``'s vector into ``g<r>`` at the root."""
    for r in range(b.size):
        if r != root:
            b.transfer(r, root, b.all_blocks, src="in", dst=f"g{r}")


def _allgather_vectors(b, intra):
    """MagPIe's allgather of whole vectors: every rank ends with ``g<r>`` for all ``r``.

    Each coordinator gathers its cluster's vectors (flat: a vector is one message,
    forwarding it through a tree would only add hops), sends them to every other
    coordinator, and the vectors travel down the local broadcast tree, every node
    forwarding each one to every child but its owner.
    """
    topology, blocks = b.topology, b.all_blocks
    coords, clusters = topology.coordinators(), topology.clusters
    n = len(coords)
    for c, members in enumerate(clusters):
        for r in members:
            if r != coords[c]:
                b.transfer(r, coords[c], blocks, src="in", dst=f"g{r}")
    for c in range(n):
        for i in range(1, n):
            d = (c + i) % n
            for r in clusters[c]:
                b.send(coords[c], coords[d], blocks, _vec(coords[c], r))
    for c in range(n):
        for i in range(1, n):
            d = (c - i) % n
            for r in clusters[d]:
                b.recv(coords[c], coords[d], blocks, f"g{r}")
    for tree in cluster_trees(topology, None, intra):
        for v in tree.nodes:
            if not b.keeps(v):
                continue
            up, kids = parent(tree, v), children(tree, v)
            for r in range(b.size):
                if up is not None and r != v:
                    b.recv(v, up, blocks, f"g{r}")
                for k in kids:
                    if k != r:
                        b.send(v, k, blocks, _vec(v, r))


def _evaluate(b, rank, blocks, n, form, result):
    """Local combines at ``rank`` computing the canonical ``form`` over ranks ``0..n-1``.

    ``"tree"``: the binomial reduce tree at rank 0, operands in rank order; partial
    results live in ``w<v>`` (``result`` for rank 0's). ``"fold"``: the left fold.
    """
    if not b.keeps(rank):
        return
    src = [_vec(rank, r) for r in range(n)]
    if form == "fold" or n == 1:
        b.copy(rank, blocks, src[0], result)
        for r in range(1, n):
            b.combine(rank, blocks, src[r], result, side="right")
        return
    work = {}
    mask = 1
    while mask < n:
        for v in range(0, n - mask, 2 * mask):
            if v not in work:
                work[v] = result if v == 0 else f"w{v}"
                b.copy(rank, blocks, src[v], work[v])
            b.combine(
                rank, blocks, work.get(v + mask, src[v + mask]), work[v], side="right"
            )
        mask *= 2


# ------------------------------------------------------- long: MPICH's algorithms
def _binomial_to_zero(b, blocks, result_buf):
    """MPICH's binomial reduce to rank 0, smallest subtree first: the canonical tree."""
    tree_reduce(b, reduce_order(binomial(b.size)), blocks, result_buf=result_buf)


# --------------------------------------------- associative: cluster coordinators
def _local_partial(b, tree, blocks, result):
    """Reduce ``blocks`` up one cluster's ordered tree; the buffer holding the partial."""
    if tree.number_of_nodes() == 1:
        return "in"
    tree_reduce(b, tree, blocks, result_buf=result)
    return result


def _ordered_trees(topology, coords, intra):
    return [
        ordered_tree(members, coords[c], intra)
        for c, members in enumerate(topology.clusters)
    ]


def _side(c, d):
    """Cluster ``d``'s partial joins cluster ``c``'s on this side (cluster order)."""
    return "left" if d < c else "right"


def _exchange_combine(b, coords, blocks_of, partial, dst):
    """Coordinators send ``blocks_of(d)`` of their partial to every other coordinator
    ``d`` (``c+1, c+2, ...``, wrapping), then each starts ``dst`` from its own partial
    and combines the others' in cluster order: ``c-1, ..., 0`` on the left, then
    ``c+1, ...`` on the right."""
    n = len(coords)
    for c in range(n):
        for i in range(1, n):
            d = (c + i) % n
            b.send(coords[c], coords[d], blocks_of(d), partial[c])
    for c in range(n):
        b.copy(coords[c], blocks_of(c), partial[c], dst)
        for d in list(range(c - 1, -1, -1)) + list(range(c + 1, n)):
            b.recv_combine(coords[c], coords[d], blocks_of(c), dst, _side(c, d))


def _reduce_tree(topology, root, intra):
    """The ordered local trees joined at the root: remote coordinators are the root's
    last children, clusters before the root's in descending order, then the rest."""
    coords = topology.coordinators(root)
    home = topology.cluster_of(root)
    kids = {}
    for tree in _ordered_trees(topology, coords, intra):
        kids.update({v: children(tree, v) for v in tree.nodes})
    order = list(range(home - 1, -1, -1)) + list(range(home + 1, topology.nclusters))
    kids[root] = kids[root] + [coords[c] for c in order]
    return from_parents(kids, topology.size, root, f"magpie-reduce-{intra}")


def _scan_coordinator(b, intra, exclusive):
    """MagPIe's associative scan on contiguous clusters (see :func:`scan`)."""
    topology = b.topology
    coords = topology.coordinators()
    n = len(coords)
    trees = _ordered_trees(topology, coords, intra)
    for seg in segment_blocks(b.all_blocks, EACH):
        total = {}
        for c, tree in enumerate(trees):  # up-sweep
            for v in tree.nodes:
                up, kids = parent(tree, v), children(tree, v)
                for k in kids:
                    b.recv(v, k, seg, f"s{k}")
                if up is None and c == n - 1:
                    continue  # the last cluster's total is nobody's prefix
                tot = "in"
                if kids:
                    tot = "acc"
                    b.copy(v, seg, "in", tot)
                    for k in kids:
                        b.combine(v, seg, f"s{k}", tot)
                if up is None:
                    total[c] = tot
                else:
                    b.send(v, up, seg, tot)
        for c in range(n):  # cluster totals to every later cluster
            for d in range(c + 1, n):
                b.send(coords[c], coords[d], seg, total[c])
        for c in range(1, n):
            b.recv(coords[c], coords[c - 1], seg, "out")
            for d in range(c - 2, -1, -1):
                b.recv_combine(coords[c], coords[d], seg, "out", side="left")
        for c, tree in enumerate(trees):  # down-sweep
            for v in tree.nodes:
                up, kids = parent(tree, v), children(tree, v)
                has_prefix = up is not None or c > 0
                if up is not None:
                    b.recv(v, up, seg, "out")
                if not exclusive:
                    if has_prefix:
                        b.combine(v, seg, "in", "out")
                    else:
                        b.copy(v, seg, "in", "out")
                    cur = "out"
                elif not kids:
                    continue
                elif has_prefix:
                    cur = "pre"
                    b.copy(v, seg, "out", cur)
                    b.combine(v, seg, "in", cur)
                else:
                    cur = "in"
                for i, k in enumerate(kids):
                    if i:
                        nxt = f"q{k}"
                        b.copy(v, seg, cur, nxt)
                        b.combine(v, seg, f"s{kids[i - 1]}", nxt)
                        cur = nxt
                    b.send(v, k, seg, cur)


# -------------------------------------------------------------------- builders
def reduce(
    topology,
    *,
    root=0,
    count=1,
    segments=1,
    level=None,
    itemsize=1,
    intra="binary",
    threshold=THRESHOLD,
    variant=None,
):
    """MagPIe's reduce to ``root``.

    associative
        Each cluster reduces up its ordered tree to its coordinator (the root in its
        own cluster); coordinators send their partials to the root, which combines
        them in cluster order after its own cluster's: ``C - 1`` wide-area messages.
    short
        Flat MPI_Gather of every vector into ``g<r>`` at the root, which evaluates the
        canonical expression locally.
    long
        MPICH's binomial reduce to rank 0, which sends the result to the root.

    ``segments`` pipeline the associative and long algorithms one block per message.

    Examples
    --------
    >>> from wacoll import Topology
    >>> topo = Topology.from_sizes([5] * 8)
    >>> [reduce(topo, root=7, level=lv, count=n).prove().optimality
    ...  for lv, n in (("associative", 1), ("strict", 1), ("strict", 4096))]
    ['yes', 'near', 'no']
    """
    b, variant = _start(
        "reduce",
        topology,
        level,
        threshold,
        variant,
        intra,
        root=root,
        count=count,
        segments=segments,
        itemsize=itemsize,
    )
    segs = segment_blocks(b.all_blocks, EACH)
    if variant == "associative":
        tree = _reduce_tree(topology, b.root, intra)
        tree_reduce(b, tree, b.all_blocks, result_buf="out", segments=segs)
    elif variant == "short":
        _gather_vectors(b, b.root)
        _evaluate(b, b.root, b.all_blocks, b.size, "tree", "out")
    else:
        for seg in segs:
            _binomial_to_zero(b, seg, "out" if b.root == 0 else "acc")
            if b.root != 0:
                b.transfer(0, b.root, seg, src="acc", dst="out")
    return _finish(b, variant, threshold, intra, segments=segments)


def allreduce(
    topology,
    *,
    count=1,
    segments=1,
    level=None,
    itemsize=1,
    intra="binary",
    threshold=THRESHOLD,
    variant=None,
):
    """MagPIe's allreduce.

    associative
        Local reduce to the coordinators, every coordinator sends its cluster's
        partial to every other (``C (C-1)`` wide-area messages) and combines all of
        them in cluster order, then broadcasts down its local tree.
    short
        MagPIe's allgather of whole vectors; every rank evaluates the canonical
        expression.
    long
        MPICH's binomial reduce to rank 0, then MagPIe's broadcast from rank 0.

    Examples
    --------
    >>> from wacoll import Topology
    >>> plan = allreduce(Topology.from_sizes([2, 2]), level="associative")
    >>> for step in plan.programs[2]:
    ...     print(step)
    copy [0] in -> acc
    recv-combine 3 [0] into acc
    send 0 [0] from acc
    copy [0] acc -> out
    recv-combine 0 [0] into out left
    send 3 [0]
    """
    b, variant = _start(
        "allreduce",
        topology,
        level,
        threshold,
        variant,
        intra,
        count=count,
        segments=segments,
        itemsize=itemsize,
    )
    if variant == "associative":
        coords = topology.coordinators()
        trees = _ordered_trees(topology, coords, intra)
        down = cluster_trees(topology, None, intra)
        for seg in segment_blocks(b.all_blocks, EACH):
            if len(coords) == 1:
                tree_reduce(b, trees[0], seg, result_buf="out")
            else:
                partial = [_local_partial(b, t, seg, "acc") for t in trees]
                _exchange_combine(b, coords, lambda d: seg, partial, "out")
            for tree in down:
                tree_bcast(b, tree, seg)
    elif variant == "short":
        _allgather_vectors(b, intra)
        for r in range(b.size):
            _evaluate(b, r, b.all_blocks, b.size, "tree", "out")
    else:
        tree = coordinator_tree(topology, 0, intra)
        for seg in segment_blocks(b.all_blocks, EACH):
            _binomial_to_zero(b, seg, "out")
            tree_bcast(b, tree, seg)
    return _finish(b, variant, threshold, intra, segments=segments)


def _reduce_scatter(
    op, topology, count, counts, level, itemsize, intra, threshold, variant
):
    b, variant = _start(
        op,
        topology,
        level,
        threshold,
        variant,
        intra,
        count=count,
        counts=counts,
        itemsize=itemsize,
    )
    if variant == "associative":
        coords = topology.coordinators()
        clusters = topology.clusters
        trees = _ordered_trees(topology, coords, intra)
        partial = [_local_partial(b, t, b.all_blocks, "acc") for t in trees]
        if len(coords) == 1:
            res = partial[0]
        else:
            res = "res"
            _exchange_combine(b, coords, lambda d: clusters[d], partial, res)
        for tree in cluster_trees(topology, None, intra):
            sub = subtree_ranks(tree, {v: (v,) for v in tree.nodes})
            for v in tree.nodes:
                if not b.keeps(v):
                    continue
                up = parent(tree, v)
                here = res if up is None else "res"
                if up is not None:
                    b.recv(v, up, tuple(sorted(sub[v])), here)
                for k in children(tree, v):
                    b.send(v, k, tuple(sorted(sub[k])), here)
                b.copy(v, (v,), here, "out")
    elif variant == "short":
        _allgather_vectors(b, intra)
        for r in range(b.size):
            _evaluate(b, r, (r,), b.size, "tree", "out")
    else:
        _binomial_to_zero(b, b.all_blocks, "acc")
        for r in range(b.size):
            if r == 0:
                b.copy(0, (0,), "acc", "out")
            else:
                b.transfer(0, r, (r,), src="acc", dst="out")
    return _finish(b, variant, threshold, intra)


def reduce_scatter(
    topology,
    *,
    counts=None,
    count=1,
    level=None,
    itemsize=1,
    intra="binary",
    threshold=THRESHOLD,
    variant=None,
):
    """MagPIe's reduce-scatter: rank ``i`` gets block ``i`` of the reduced vector.

    associative
        Local reduce of the whole vector to the coordinators; each coordinator sends
        every other coordinator only the blocks of that cluster's ranks, which it
        combines in cluster order and scatters down its local tree.
    short
        MagPIe's allgather of whole vectors; rank ``i`` evaluates the canonical
        expression for block ``i``.
    long
        MPICH's binomial reduce to rank 0, then a flat scatterv from rank 0.

    Examples
    --------
    >>> from wacoll import Topology
    >>> plan = reduce_scatter(Topology.from_sizes([2, 2]), counts=[1, 2, 3, 4],
    ...                       level="associative")
    >>> report = plan.prove()
    >>> report.wide_area_messages, report.wide_area_bytes, report.optimality
    (2, 10, 'yes')
    """
    return _reduce_scatter(
        "reduce_scatter",
        topology,
        count,
        counts,
        level,
        itemsize,
        intra,
        threshold,
        variant,
    )


def reduce_scatter_block(
    topology,
    *,
    count=1,
    level=None,
    itemsize=1,
    intra="binary",
    threshold=THRESHOLD,
    variant=None,
):
    """MagPIe's reduce-scatter with one count per block: see :func:`reduce_scatter`.

    Examples
    --------
    >>> from wacoll import Topology
    >>> reduce_scatter_block(Topology.from_sizes([3, 3]), count=2).algorithm
    'allgather'
    """
    return _reduce_scatter(
        "reduce_scatter_block",
        topology,
        count,
        None,
        level,
        itemsize,
        intra,
        threshold,
        variant,
    )


def _scan(op, topology, count, segments, level, itemsize, intra, threshold, variant):
    exclusive = op == "exscan"
    b, variant = _start(
        op,
        topology,
        level,
        threshold,
        variant,
        intra,
        count=count,
        segments=segments,
        itemsize=itemsize,
    )
    if variant == "associative":
        _scan_coordinator(b, intra, exclusive)
    elif variant == "short":
        _allgather_vectors(b, intra)
        for r in range(1 if exclusive else 0, b.size):
            _evaluate(b, r, b.all_blocks, r if exclusive else r + 1, "fold", "out")
    else:
        chain_scan(b, exclusive=exclusive)
    return _finish(b, variant, threshold, intra, segments=segments)


def scan(
    topology,
    *,
    count=1,
    segments=1,
    level=None,
    itemsize=1,
    intra="binary",
    threshold=THRESHOLD,
    variant=None,
):
    """MagPIe's inclusive scan: rank ``i`` gets the reduction of ranks ``0..i``.

    associative (contiguous clusters only)
        Each coordinator sends its cluster's total to the coordinators of all later
        clusters (``C (C-1) / 2`` wide-area messages) and combines the earlier
        clusters' totals, in order, into its cluster's prefix. Inside a cluster an
        up-sweep and a down-sweep over the ordered tree give every rank its prefix:
        going up, every node keeps its children's subtree sums ``s<k>`` and sends
        its own subtree's sum to its parent (the coordinator's is the cluster
        total); going down, a node that holds the prefix ``p`` of all ranks before
        it keeps ``p + x`` and sends ``p + x`` to its first child and
        ``p + x + s<k1> + ...`` to the later ones. Unlike gathering the cluster's
        contributions at the coordinator and sending every rank its result, this
        keeps the local work and latency logarithmic in the cluster size, and the
        wide area still sees one total per cluster pair.
    short
        MagPIe's allgather of whole vectors; rank ``i`` folds vectors ``0..i``.
    long
        MPICH's chain.

    Examples
    --------
    >>> from wacoll import Topology
    >>> report = scan(Topology.from_sizes([3, 3, 3]), level="associative").prove()
    >>> report.wide_area_messages, report.optimality
    (3, 'yes')
    >>> scan(Topology.from_clusters([[0, 2], [1, 3]]), level="commutative").algorithm
    'allgather'
    """
    return _scan(
        "scan", topology, count, segments, level, itemsize, intra, threshold, variant
    )


def exscan(
    topology,
    *,
    count=1,
    segments=1,
    level=None,
    itemsize=1,
    intra="binary",
    threshold=THRESHOLD,
    variant=None,
):
    """MagPIe-style exclusive scan: rank ``i > 0`` gets the reduction of ranks ``0..i-1``.

    The same three algorithms as :func:`scan`, each rank's own contribution left out
    of its result (rank 0's result is undefined and not written).

    Examples
    --------
    >>> from wacoll import Topology
    >>> plan = exscan(Topology.single(3), level="associative")
    >>> for step in plan.programs[0]:
    ...     print(step)
    recv 1 [0] into s1
    recv 2 [0] into s2
    send 1 [0] from in
    copy [0] in -> q2
    combine [0] s1 -> q2
    send 2 [0] from q2
    """
    return _scan(
        "exscan", topology, count, segments, level, itemsize, intra, threshold, variant
    )


#: The keyword options of this module's builders, in their signatures' order; the
#: magpie family's :data:`~wacoll.plans.families.magpie.OPTIONS` includes them.
OPTIONS = {
    "reduce": (
        "root",
        "count",
        "segments",
        "level",
        "itemsize",
        "intra",
        "threshold",
        "variant",
    ),
    "allreduce": (
        "count",
        "segments",
        "level",
        "itemsize",
        "intra",
        "threshold",
        "variant",
    ),
    "reduce_scatter": (
        "counts",
        "count",
        "level",
        "itemsize",
        "intra",
        "threshold",
        "variant",
    ),
    "reduce_scatter_block": (
        "count",
        "level",
        "itemsize",
        "intra",
        "threshold",
        "variant",
    ),
    "scan": ("count", "segments", "level", "itemsize", "intra", "threshold", "variant"),
    "exscan": ("count", "segments", "level", "itemsize", "intra", "threshold", "variant"),
}
