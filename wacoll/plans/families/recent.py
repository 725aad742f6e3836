"""The **recent** family: collective algorithms published since 2019.

The ``modern`` family holds what MPI libraries have selected since Thakur,
Rabenseifner & Gropp (2005). This one puts on wacoll's plan model the algorithms
that came after, so that they are proved, simulated, exported and run like the others:

======================  ========================  ====================================
algorithm               operations                origin
======================  ========================  ====================================
``double_binary_tree``  allreduce                 NCCL 2.4 (Jeaugey, NVIDIA blog,
                                                  2019), after Sanders, Speck &
                                                  Träff's two-tree algorithms
                                                  (Parallel Computing, 2009)
``swing``               allreduce, allgather,     De Sensi, Bonato, Saam & Hoefler,
                        reduce_scatter(_block)    "Swing: Short-cutting Rings for
                                                  Higher Bandwidth Allreduce"
                                                  (NSDI 2024)
``swing_latency``       allreduce                 the same paper's latency-optimal
                                                  variant
``bine``                bcast, reduce,            De Sensi, Pasqualoni, Piarulli,
                        allreduce, allgather,     Bonato, Ba, Turisini, Domke &
                        reduce_scatter(_block)    Hoefler, "Bine Trees: Enhancing
                                                  Collective Operations by
                                                  Optimizing Communication
                                                  Locality" (SC 2025)
``pat``                 allgather,                Jeaugey, "PAT: a new algorithm for
                        reduce_scatter(_block)    all-gather and reduce-scatter
                                                  operations at scale"
                                                  (arXiv:2506.20252, 2025; NCCL 2.23)
======================  ========================  ====================================

What each does (the patterns are in :mod:`~wacoll.plans.families.recent_parts` and
:mod:`~wacoll.plans.families.recent_nccl`):

- ``double_binary_tree``: two complementary in-order binary trees (NCCL's
  ``ncclGetDtree``: the second is the first mirrored on an even ``P``, shifted by
  one rank on an odd one); each reduces half of the vector to its root and
  broadcasts it back, in segments (``segments`` rounded up to an even number), both
  trees and both phases pipelined.
- ``swing``: rank ``r`` pairs at step ``s`` with ``r + rho(s)`` (``r`` even) or
  ``r - rho(s)`` (odd), ``rho(s) = 1, -1, 3, -5, 11, ...``; the bandwidth-optimal
  allreduce is a reduce-scatter with the steps in that order (nearest partner
  first, half the vector to it) and an allgather in the reverse order, each rank
  owning one chunk (``segments`` rounded up to a multiple of the ranks), rank
  ``r`` the chunk at ``r``'s bits reversed
  (:func:`~wacoll.plans.families.recent_parts.bit_reversal`: the same messages
  as with chunk ``r``, but each a run or two of blocks on a power of two, as
  Swing's code remaps them, so that the prover holds the plan in few pieces);
  its allgather and reduce-scatter are the two halves alone (there rank ``r``'s
  block is ``r``: the operation says so).
- ``swing_latency``: whole vectors exchanged with the same partners, ``log2 P``
  steps.
- ``bine``: Bine trees. The broadcast runs down the distance-halving Bine tree (the
  root sends to its farthest Swing partner first, then nearer ones), the reduce up
  it; the butterflies take Swing's pairs in the other order (a distance-halving
  reduce-scatter, a distance-doubling allgather).
- ``pat``: the allgather broadcasts every rank's block down a binomial tree shifted
  to that rank, Bruck's dimensions reversed (one block to the farthest rank first,
  ``P/2`` blocks to the next rank last), all trees aggregated per message; the
  reduce-scatter is its reverse. ``aggregation`` bounds the blocks per message.

Non-power-of-two sizes
----------------------
Every algorithm runs on every ``P``. Swing's pairs form a matching on an even
``P``: there the butterflies take ``ceil(log2 P)`` steps, in which every rank
reaches every other, some along two paths; a rank sends its partner only the blocks
the partner has not had, so that every block is received once and the butterflies
stay bandwidth-optimal (Swing's and Bine's code choose one path per block the same
way). On an odd ``P`` they fold rank ``P - 1`` into rank ``P - 2`` first and give it
its result last. The latency-optimal Swing allreduce folds the ``P - p`` ranks
above the largest power of two ``p`` into the ranks just below it (as Swing's code
does). The Bine tree on an odd ``P`` gives the ranks its greedy construction did not
reach in ``ceil(log2 P)`` steps the data in one more step. NCCL's trees and PAT are
defined on any ``P``.

Reduction levels
----------------
Swing's and Bine's partners and PAT's trees wrap around the ranks, so they combine
operands out of rank order: level ``"commutative"`` only (the ``reproducible``
arithmetic still gives level ``"strict"``'s bits with them). NCCL's binary trees are
in-order trees (a subtree is a range of ranks), so ``double_binary_tree`` keeps
level ``"associative"`` where both trees are (an even ``P``, and ``P = 1``), and
``"commutative"`` on any ``P``; its expression is never the binomial one of level
``"strict"``. A builder asked for a level it does not keep raises
:class:`~wacoll.errors.PlanError` before building anything (:func:`keeps` tells).

``algorithm="auto"`` (the default) takes the first algorithm of :data:`ALGORITHMS`
that keeps the level. None of them is a default of the selection policy
(:mod:`wacoll.plans.select`); ask for them by name:
``build(op, topology, "recent", algorithm=...)`` or
``wacoll.Comm(...).Allreduce(..., family="recent", algorithm="swing")``.

Examples
--------
>>> from wacoll import Topology
>>> from wacoll.plans import build
>>> plan = build("allreduce", Topology.single(6), "recent", algorithm="swing",
...              count=60, level="commutative")
>>> report = plan.prove()
>>> report.messages, report.bytes  # 3 steps each way; each rank gets 5 + 5 chunks
(36, 600)
>>> build("allreduce", Topology.single(6), "recent", algorithm="double_binary_tree",
...       level="associative", count=4, segments=4).prove().level
'associative'
>>> build("allgather", Topology.single(5), "recent", algorithm="pat").prove().max_sends
3
"""

from __future__ import annotations

from wacoll.errors import PlanError
from wacoll.plans.builder import PlanBuilder
from wacoll.plans.families.modern_parts import chunks_of
from wacoll.plans.families.recent_nccl import (
    double_tree_allreduce,
    pat_allgather,
    pat_reduce_scatter,
)
from wacoll.plans.families.recent_parts import (
    bine_tree,
    bit_reversal,
    butterfly_allgather,
    butterfly_reduce_scatter,
    butterfly_rounds,
    odd_fold,
    steps_of,
    swing_latency_allreduce,
)
from wacoll.plans.operations import round_segments
from wacoll.plans.patterns import EACH, tree_bcast, tree_reduce

__all__ = [
    "bcast",
    "reduce",
    "allreduce",
    "allgather",
    "reduce_scatter",
    "reduce_scatter_block",
    "keeps",
    "ALGORITHMS",
    "BUILDERS",
    "OPTIONS",
]

_FAMILY = "recent"

#: The algorithms of each operation (``algorithm="auto"``: the first that keeps the
#: level).
ALGORITHMS = {
    "bcast": ("bine",),
    "reduce": ("bine",),
    "allreduce": ("swing", "swing_latency", "bine", "double_binary_tree"),
    "allgather": ("swing", "bine", "pat"),
    "reduce_scatter": ("swing", "bine", "pat"),
    "reduce_scatter_block": ("swing", "bine", "pat"),
}

#: The butterflies' step orders: (reduce-scatter, allgather).
_ORDERS = {"swing": ("doubling", "halving"), "bine": ("halving", "doubling")}


def keeps(op, algorithm, size, level):
    """Whether ``algorithm`` keeps reduction ``level`` for ``op`` on ``size`` ranks
    (see the module docstring; data movement keeps no level and needs none).

    Examples
    --------
    >>> keeps("allreduce", "swing", 8, "associative")
    False
    >>> [keeps("allreduce", "double_binary_tree", n, "associative") for n in (4, 5)]
    [True, False]
    """
    if level is None or level == "commutative":
        return True
    if (op, algorithm) == ("allreduce", "double_binary_tree"):
        return level == "associative" and (size % 2 == 0 or size == 1)
    return False


def _algorithm(op, algorithm, size, level=None):
    """``algorithm`` checked (``"auto"``: the first that keeps ``level``)."""
    if algorithm == "auto":
        for name in ALGORITHMS[op]:
            if keeps(op, name, size, level):
                return name
        raise PlanError(
            f"no recent {op} algorithm keeps level {level!r} on {size} "
            f"ranks; they keep level 'commutative' (double_binary_tree: "
            f"'associative' on an even number of ranks)"
        )
    if algorithm not in ALGORITHMS[op]:
        raise PlanError(
            f"recent {op} algorithm must be 'auto' or one of "
            f"{', '.join(ALGORITHMS[op])}; got {algorithm!r}"
        )
    if not keeps(op, algorithm, size, level):
        if algorithm == "double_binary_tree":
            why = (
                "its two trees are in-order trees, not the binomial tree of level "
                "'strict'"
                if level == "strict"
                else f"on an odd number of ranks its second tree is the first shifted "
                f"by one rank, whose subtrees wrap around (here {size})"
            )
            raise PlanError(
                f"the double_binary_tree {op} does not keep level "
                f"{level!r}: {why}; use level 'commutative'"
                + ("" if level == "strict" else " or an even number of ranks")
            )
        raise PlanError(
            f"the {algorithm} {op} combines operands in the order its "
            f"partners wrap around the ranks: it keeps level 'commutative' "
            f"only, not {level!r}"
        )
    return algorithm


# ------------------------------------------------------------------------ trees
def bcast(topology, *, root=0, count=1, segments=1, itemsize=1, algorithm="auto"):
    """Broadcast from ``root`` down the distance-halving Bine tree, pipelined in
    ``segments`` (no reduction: no level).

    Examples
    --------
    >>> from wacoll import Topology
    >>> plan = bcast(Topology.single(8), root=2)
    >>> [str(s) for s in plan.programs[2]]  # relative ranks 3, -1, 1: farthest first
    ['send 5 [0]', 'send 1 [0]', 'send 3 [0]']
    """
    b = PlanBuilder(
        "bcast", topology, root=root, count=count, segments=segments, itemsize=itemsize
    )
    name = _algorithm("bcast", algorithm, b.size)
    tree_bcast(b, bine_tree(b.size, b.root), b.all_blocks, segments=EACH)
    return b.build(family=_FAMILY, algorithm=name, segments=segments)


def reduce(
    topology, *, root=0, count=1, segments=1, level=None, itemsize=1, algorithm="auto"
):
    """Reduce to ``root`` up the Bine tree of :func:`bcast`, pipelined in
    ``segments``; level ``"commutative"`` only.

    Examples
    --------
    >>> from wacoll import Topology
    >>> reduce(Topology.single(6), root=5, level="commutative").prove().messages
    5
    """
    level = "strict" if level is None else level
    b = PlanBuilder(
        "reduce",
        topology,
        root=root,
        count=count,
        segments=segments,
        level=level,
        itemsize=itemsize,
    )
    name = _algorithm("reduce", algorithm, b.size, level)
    tree_reduce(b, bine_tree(b.size, b.root), b.all_blocks, segments=EACH)
    return b.build(family=_FAMILY, algorithm=name, segments=segments)


# ------------------------------------------------------------------- allreduce
def allreduce(topology, *, count=1, segments=1, level=None, itemsize=1, algorithm="auto"):
    """Allreduce by Swing (bandwidth- or latency-optimal), a Bine butterfly or
    NCCL's double binary tree.

    Blocks: ``"swing"`` and ``"bine"`` cut the vector into ``segments`` rounded up
    to a multiple of the ranks they run over (``P``, or ``P - 1`` on an odd ``P``),
    one chunk per rank; ``"double_binary_tree"`` rounds ``segments`` up to an even
    number, half per tree, one segment per message; ``"swing_latency"`` sends whole
    vectors. Levels: see :func:`keeps`.

    Examples
    --------
    >>> from wacoll import Topology
    >>> plan = allreduce(Topology.single(8), level="commutative",
    ...                  algorithm="swing_latency")
    >>> [step.peer for step in plan.programs[0] if step.kind == "send"]  # rho: 1, -1, 3
    [1, 7, 3]
    >>> allreduce(Topology.single(5), level="associative", algorithm="double_binary_tree")
    Traceback (most recent call last):
    ...
    wacoll.errors.PlanError: the double_binary_tree allreduce does not keep level 'associative': on an odd number of ranks its second tree is the first shifted by one rank, whose subtrees wrap around (here 5); use level 'commutative' or an even number of ranks
    """
    level = "strict" if level is None else level
    size = topology.size
    name = _algorithm("allreduce", algorithm, size, level)
    ranks, host, extra = odd_fold(size)
    parts = {"swing": len(ranks), "bine": len(ranks), "double_binary_tree": 2}.get(
        name, 1
    )
    b = PlanBuilder(
        "allreduce",
        topology,
        count=count,
        level=level,
        itemsize=itemsize,
        segments=round_segments(segments, parts),
    )
    blocks = b.all_blocks
    if name == "swing_latency":
        swing_latency_allreduce(b, blocks)
    elif name == "double_binary_tree":
        half = len(blocks) // 2
        double_tree_allreduce(b, (blocks[:half], blocks[half:]), level != "commutative")
    else:
        _butterfly_allreduce(b, blocks, ranks, host, extra, _ORDERS[name])
    return b.build(family=_FAMILY, algorithm=name, segments=segments)


def _butterfly_allreduce(b, blocks, ranks, host, extra, orders):
    """A butterfly reduce-scatter of one chunk per rank of ``ranks``, then the
    butterfly allgather; an odd ``P``'s last rank folded into ``host``."""
    m = len(ranks)
    for r in ranks:
        b.copy(r, blocks, "in", "acc")
    if extra is not None:
        b.send(extra, host, blocks, "in")
        b.recv_combine(host, extra, blocks, "acc", side="left")
    chunks = chunks_of(blocks, m)
    if orders == _ORDERS["swing"]:  # chunks in bit-reversed order: runs of blocks
        chunks = [chunks[i] for i in bit_reversal(m)]
    # the reduce-scatter is the allgather's exchanges in reverse: one set of rounds
    rounds = butterfly_rounds(m, steps_of(m, orders[1])) if m > 1 else ()
    butterfly_reduce_scatter(b, ranks, chunks, rounds)
    for i, r in enumerate(ranks):
        b.copy(r, chunks[i], "acc", "out")
    butterfly_allgather(b, ranks, chunks, rounds)
    if extra is not None:
        b.transfer(host, extra, blocks, "out", "out")


# ------------------------------------------------------------------- allgather
def allgather(topology, *, count=1, itemsize=1, algorithm="auto", aggregation=None):
    """Allgather by the Swing butterfly (distance-halving), the Bine butterfly
    (distance-doubling) or PAT (``aggregation``: PAT's most blocks per message,
    None for no bound; the butterflies take none).

    Examples
    --------
    >>> from wacoll import Topology
    >>> [str(s) for s in allgather(Topology.single(4), algorithm="pat").programs[0]]
    ['copy [0] in -> out', 'send 2 [0]', 'recv 2 [2]', 'send 1 [0,2]', 'recv 3 [3,1]']
    >>> allgather(Topology.single(16), algorithm="pat", aggregation=2).prove().messages
    128
    """
    b = PlanBuilder("allgather", topology, count=count, itemsize=itemsize)
    name = _algorithm("allgather", algorithm, b.size)
    _validate_aggregation(name, aggregation)
    for r in range(b.size):
        b.copy(r, (r,), "in", "out")
    if name == "pat":
        pat_allgather(b, aggregation)
        return b.build(family=_FAMILY, algorithm=name, aggregation=aggregation)
    ranks, host, extra = odd_fold(b.size)
    groups = [(r,) for r in ranks]
    if extra is not None:
        b.transfer(extra, host, (extra,), "out", "out")
        groups[host] = (host, extra)
    if len(ranks) > 1:
        m = len(ranks)
        butterfly_allgather(
            b, ranks, groups, butterfly_rounds(m, steps_of(m, _ORDERS[name][1]))
        )
    if extra is not None:
        b.transfer(host, extra, tuple(range(extra)), "out", "out")
    return b.build(family=_FAMILY, algorithm=name)


def _validate_aggregation(name, aggregation):
    if aggregation is not None and name != "pat":
        raise PlanError(
            f"aggregation bounds PAT's messages; the {name} algorithm takes none"
        )


# --------------------------------------------------------------- reduce-scatter
def _reduce_scatter(op, topology, count, counts, level, itemsize, algorithm, aggregation):
    level = "strict" if level is None else level
    b = PlanBuilder(
        op, topology, count=count, counts=counts, level=level, itemsize=itemsize
    )
    name = _algorithm(op, algorithm, b.size, level)
    _validate_aggregation(name, aggregation)
    size = b.size
    every = b.all_blocks
    ranks, host, extra = odd_fold(size) if name != "pat" else (range(size), None, None)
    for r in ranks:
        b.copy(r, every, "in", "acc")
    if name == "pat":
        pat_reduce_scatter(b, aggregation)
    else:
        groups = [(r,) for r in ranks]
        if extra is not None:
            b.send(extra, host, every, "in")
            b.recv_combine(host, extra, every, "acc", side="left")
            groups[host] = (host, extra)
        m = len(ranks)
        rounds = butterfly_rounds(m, steps_of(m, _ORDERS[name][1])) if m > 1 else ()
        butterfly_reduce_scatter(b, ranks, groups, rounds)
        if extra is not None:
            b.transfer(host, extra, (extra,), "acc", "out")
    for r in ranks:
        b.copy(r, (r,), "acc", "out")
    return b.build(family=_FAMILY, algorithm=name, aggregation=aggregation)


def reduce_scatter(
    topology,
    *,
    counts=None,
    count=1,
    level=None,
    itemsize=1,
    algorithm="auto",
    aggregation=None,
):
    """Reduce-scatter (rank ``r`` gets block ``r`` of ``counts[r]`` elements) by the
    Swing butterfly (distance-doubling), the Bine butterfly (distance-halving) or
    PAT; level ``"commutative"`` only.

    Examples
    --------
    >>> from wacoll import Topology
    >>> plan = reduce_scatter(Topology.single(4), counts=[2, 0, 1, 3], level="commutative",
    ...                       algorithm="swing")
    >>> plan.prove().messages  # 2 steps of 4 exchanges
    8
    """
    return _reduce_scatter(
        "reduce_scatter", topology, count, counts, level, itemsize, algorithm, aggregation
    )


def reduce_scatter_block(
    topology, *, count=1, level=None, itemsize=1, algorithm="auto", aggregation=None
):
    """:func:`reduce_scatter` with ``count`` elements per block.

    Examples
    --------
    >>> from wacoll import Topology
    >>> report = reduce_scatter_block(Topology.single(7), count=2, level="commutative",
    ...                               algorithm="pat").prove()
    >>> report.messages, report.bytes  # 3 steps; each rank sends 6 blocks
    (21, 84)
    """
    return _reduce_scatter(
        "reduce_scatter_block",
        topology,
        count,
        None,
        level,
        itemsize,
        algorithm,
        aggregation,
    )


BUILDERS = {
    "bcast": bcast,
    "reduce": reduce,
    "allreduce": allreduce,
    "allgather": allgather,
    "reduce_scatter": reduce_scatter,
    "reduce_scatter_block": reduce_scatter_block,
}

#: The keyword options each builder takes, in its signature's order: what
#: :func:`wacoll.plans.families.options` reports and :func:`wacoll.plans.build` accepts.
OPTIONS = {
    "bcast": ("root", "count", "segments", "itemsize", "algorithm"),
    "reduce": ("root", "count", "segments", "level", "itemsize", "algorithm"),
    "allreduce": ("count", "segments", "level", "itemsize", "algorithm"),
    "allgather": ("count", "itemsize", "algorithm", "aggregation"),
    "reduce_scatter": (
        "counts",
        "count",
        "level",
        "itemsize",
        "algorithm",
        "aggregation",
    ),
    "reduce_scatter_block": ("count", "level", "itemsize", "algorithm", "aggregation"),
}
