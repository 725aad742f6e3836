"""The **mpich** family: the MPICH 1.1 algorithms MagPIe compares against.

MagPIe (Kielmann et al., PPoPP 1999, Section 3 and the right half of Table 1)
measures its wide-area algorithms against MPICH 1.1, whose collectives ignore the
cluster structure:

==========================  ==========  ===============================================
operation                   shape       MPICH 1.1 (``intra_fns.c``, 1997)
==========================  ==========  ===============================================
barrier                     hypercube   pairwise exchanges over the largest power of
                                        two; the ranks above it fan in and out
bcast                       bin         binomial tree over the largest power of two
                                        ``N`` of ranks (relative to the root), then
                                        relative rank ``n`` sends to ``n + N``
scatter(v), gather(v)       flat        the root sends/receives each piece
allgather(v)                ring        ``P - 1`` rounds to the successor
alltoall(v)                 flat        every rank to every rank
reduce                      bin         binomial to the root if commutative, else
                                        to rank 0, which sends the result to the root
allreduce                   bin ; bin   reduce to 0 ; bcast from 0
reduce_scatter(_block)      bin ; flat  reduce to 0 ; scatterv
scan, exscan                chain       rank ``i - 1`` to rank ``i``
==========================  ==========  ===============================================

Only the flat algorithms are wide-area optimal; the others chain wide-area
latencies and may send data into a cluster more than once. MPICH 1.1's broadcast is
a binomial tree only when ``P`` is a power of two; otherwise the ``P - N`` extra
ranks hear from a partner ``N`` below them, which sends data into clusters again
(MagPIe: "especially bad for numbers of processors that are not a power of 2").
``exscan`` is MPI-2 and not in MPICH 1.1: it is the chain of MPICH 1.1's scan,
shifted by one rank.

Reductions honour every level: the binomial reduce to rank 0 with children in rank
order (smallest subtree first) computes exactly the canonical ``strict`` expression,
and the chain computes the canonical left fold of scan and exscan. Broadcast,
reduce, allreduce, scan and exscan pipeline ``segments`` one block per message.

Examples
--------
>>> from wacoll import Topology
>>> from wacoll.plans import build
>>> report = build("bcast", Topology.from_sizes([5] * 8), "mpich").prove()
>>> report.optimality, report.max_wide_area_hops > 1
('no', True)
>>> build("scatter", Topology.from_sizes([5] * 8), "mpich").prove().optimality
'yes'
"""

from __future__ import annotations

from functools import partial

import numpy as np

from wacoll.errors import PlanError
from wacoll.plans.builder import PlanBuilder
from wacoll.plans.encoded import single_block_steps
from wacoll.plans.halving import (
    doubling_allgather,
    halving_reduce_scatter,
    largest_power_of_two,
)
from wacoll.plans.operations import round_segments
from wacoll.plans.patterns import (
    EACH,
    chain_scan,
    flat_alltoall,
    flat_gather,
    flat_scatter,
    segment_blocks,
    tree_bcast,
    tree_reduce,
    validate_alltoall_order,
)
from wacoll.plans.prover.encode import COPY, NO_PEER, RECV, SEND
from wacoll.trees import make_tree
from wacoll.trees.basic import from_parents, validate_tree_args

__all__ = [
    "bcast_tree",
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
    "ALLREDUCE_ALGORITHMS",
]

_FAMILY = "mpich"


# ---------------------------------------------------------------------- barrier
def barrier(topology, *, itemsize=1):
    """MPICH 1.1's hypercube barrier.

    With ``N`` the largest power of two not above ``P``, each rank ``r >= N`` first
    notifies rank ``r - N``; ranks ``0..N-1`` then exchange empty messages with
    ``r ^ d`` for ``d = 1, 2, 4, ...`` and finally release their partners above ``N``.

    Examples
    --------
    >>> from wacoll import Topology
    >>> plan = barrier(Topology.single(5))
    >>> [str(s) for s in plan.programs[0]]
    ['recv 4 []', 'send 1 []', 'recv 1 []', 'send 2 []', 'recv 2 []', 'send 4 []']
    >>> plan.prove().messages
    10
    """
    b = PlanBuilder("barrier", topology, itemsize=itemsize)
    size = b.size
    n2 = 1 << (size.bit_length() - 1)
    surfeit = size - n2
    for r in range(surfeit):
        b.recv(r, n2 + r, ())
    for r in range(n2, size):
        b.send(r, r - n2, ())
    d = 1
    while d < n2:
        for r in range(n2):
            # MPI_Sendrecv: the send is posted first, so the exchange cannot deadlock
            b.send(r, r ^ d, ())
            b.recv(r, r ^ d, ())
        d <<= 1
    for r in range(surfeit):
        b.send(r, n2 + r, ())
    for r in range(n2, size):
        b.recv(r, r - n2, ())
    return b.build(family=_FAMILY, algorithm="hypercube")


# ------------------------------------------------------------------------ bcast
def bcast_tree(n, root=0):
    """MPICH 1.1's broadcast tree over ``n`` ranks rooted at ``root``.

    With ``N`` the largest power of two not above ``n`` and ranks taken relative to
    the root, ranks ``0..N-1`` form a binomial tree (largest subtree first); then each
    relative rank ``v < n - N`` sends, as its last child, to ``v + N``. For a power of
    two this is :func:`wacoll.trees.binomial`.

    Examples
    --------
    >>> from wacoll.trees import children
    >>> t = bcast_tree(6)
    >>> children(t, 0), children(t, 1), children(t, 2)
    ([2, 1, 4], [5], [3])
    >>> children(bcast_tree(6, root=3), 3)
    [5, 4, 1]
    """
    n, root = validate_tree_args(n, root)
    n2 = 1 << (n.bit_length() - 1)
    vchildren = {}
    for v in range(n2):
        kids = []
        mask = ((v & -v) if v else n2) >> 1  # v's children sit below its lowest set bit
        while mask:
            kids.append(v + mask)
            mask >>= 1
        if v + n2 < n:
            kids.append(v + n2)
        vchildren[v] = kids
    real = {
        (v + root) % n: [(c + root) % n for c in kids] for v, kids in vchildren.items()
    }
    return from_parents(real, n, root, "mpich-bcast")


def bcast(topology, *, root=0, count=1, segments=1, itemsize=1):
    """MPICH 1.1's broadcast from ``root`` down :func:`bcast_tree`, pipelined by segment.

    Examples
    --------
    >>> from wacoll import Topology
    >>> plan = bcast(Topology.single(6), root=2)
    >>> [str(s) for s in plan.programs[2]]
    ['send 4 [0]', 'send 3 [0]', 'send 0 [0]']
    >>> plan.prove().messages
    5
    """
    b = PlanBuilder(
        "bcast", topology, root=root, count=count, segments=segments, itemsize=itemsize
    )
    tree_bcast(b, bcast_tree(b.size, b.root), b.all_blocks, segments=EACH)
    return b.build(family=_FAMILY, algorithm="binomial", segments=segments)


# ------------------------------------------------------- scatter(v), gather(v)
def _flat(
    op, topology, pattern, *, root=None, count=1, counts=None, itemsize=1, **params
):
    """A plan of one flat pattern of :mod:`wacoll.plans.patterns`, named ``flat``."""
    b = PlanBuilder(
        op, topology, root=root, count=count, counts=counts, itemsize=itemsize
    )
    pattern(b)
    return b.build(family=_FAMILY, algorithm="flat", **params)


def scatter(topology, *, root=0, count=1, itemsize=1):
    """MPICH 1.1's flat scatter: the root sends piece ``i`` to rank ``i``, in rank order.

    Examples
    --------
    >>> from wacoll import Topology
    >>> [str(s) for s in scatter(Topology.single(3), root=1).programs[1]]
    ['send 0 [0] from in', 'copy [1] in -> out', 'send 2 [2] from in']
    """
    return _flat(
        "scatter", topology, flat_scatter, root=root, count=count, itemsize=itemsize
    )


def scatterv(topology, *, root=0, counts=None, count=1, itemsize=1):
    """MPICH 1.1's flat scatterv: :func:`scatter` with a count per rank.

    Examples
    --------
    >>> from wacoll import Topology
    >>> scatterv(Topology.from_sizes([2, 2]), counts=[1, 0, 2, 3]).prove().bytes
    5
    """
    return _flat(
        "scatterv",
        topology,
        flat_scatter,
        root=root,
        count=count,
        counts=counts,
        itemsize=itemsize,
    )


def gather(topology, *, root=0, count=1, itemsize=1):
    """MPICH 1.1's flat gather: the root receives piece ``i`` from rank ``i`` in rank order.

    Examples
    --------
    >>> from wacoll import Topology
    >>> [str(s) for s in gather(Topology.single(3), root=2).programs[2]]
    ['recv 0 [0]', 'recv 1 [1]', 'copy [2] in -> out']
    """
    return _flat(
        "gather", topology, flat_gather, root=root, count=count, itemsize=itemsize
    )


def gatherv(topology, *, root=0, counts=None, count=1, itemsize=1):
    """MPICH 1.1's flat gatherv: :func:`gather` with a count per rank.

    Examples
    --------
    >>> from wacoll import Topology
    >>> gatherv(Topology.from_sizes([2, 2]), counts=[4, 0, 1, 1]).prove().wide_area_bytes
    2
    """
    return _flat(
        "gatherv",
        topology,
        flat_gather,
        root=root,
        count=count,
        counts=counts,
        itemsize=itemsize,
    )


# --------------------------------------------------------------- allgather(v)
def _allgather(op, topology, count, counts, itemsize):
    b = PlanBuilder(op, topology, count=count, counts=counts, itemsize=itemsize)
    size = b.size
    if b.focus is None and size > 1:  # P * P steps: as arrays
        b.encoded(_ring_allgather_steps(size))
        return b.build(family=_FAMILY, algorithm="ring")
    for r in range(size):  # rank by rank: each program is the same as step by step
        if not b.keeps(r):
            continue
        b.copy(r, (r,), "in", "out")
        for step in range(1, size):
            # MPI_Sendrecv: forward the block received last, take the next from the left
            b.send(r, (r + 1) % size, ((r - step + 1) % size,), "out")
            b.recv(r, (r - 1) % size, ((r - step) % size,), "out")
    return b.build(family=_FAMILY, algorithm="ring")


def _ring_allgather_steps(size):
    """The ring's programs as arrays: the steps :func:`_allgather` appends, in order."""
    r = np.arange(size, dtype=np.int64)[:, None]
    step = np.arange(1, size, dtype=np.int64)[None, :]
    rounds = (size, size - 1)

    def rows(first, send, recv):
        """Per rank: ``first``, then a (send, recv) pair per round; flattened."""
        pairs = np.stack(
            [np.broadcast_to(send, rounds), np.broadcast_to(recv, rounds)], axis=2
        ).reshape(size, -1)
        return np.concatenate([np.broadcast_to(first, (size, 1)), pairs], axis=1).reshape(
            -1
        )

    none, buf_in, buf_out = -1, 0, 1
    return single_block_steps(
        size,
        np.full(size, 2 * size - 1),
        kind=rows(COPY, SEND, RECV),
        peer=rows(NO_PEER, (r + 1) % size, (r - 1) % size),
        src=rows(buf_in, buf_out, none),
        dst=rows(buf_out, none, buf_out),
        block=rows(r, (r - step + 1) % size, (r - step) % size),
        buffers=("in", "out"),
    )


def allgather(topology, *, count=1, itemsize=1):
    """MPICH 1.1's ring allgather: ``P - 1`` rounds, each rank forwarding to its successor.

    The whole plan's ``P * P`` steps are written as arrays (:mod:`wacoll.plans.encoded`).

    Examples
    --------
    >>> from wacoll import Topology
    >>> plan = allgather(Topology.single(3))
    >>> [str(s) for s in plan.programs[0]]
    ['copy [0] in -> out', 'send 1 [0]', 'recv 2 [2]', 'send 1 [2]', 'recv 2 [1]']
    >>> plan.prove().messages
    6
    """
    return _allgather("allgather", topology, count, None, itemsize)


def allgatherv(topology, *, counts=None, count=1, itemsize=1):
    """MPICH 1.1's ring allgatherv: :func:`allgather` with a count per rank.

    Examples
    --------
    >>> from wacoll import Topology
    >>> allgatherv(Topology.single(3), counts=[2, 0, 1]).prove().bytes
    6
    """
    return _allgather("allgatherv", topology, count, counts, itemsize)


# ---------------------------------------------------------------- alltoall(v)
def _alltoall(op, topology, count, counts, itemsize, order):
    validate_alltoall_order(order)
    return _flat(
        op,
        topology,
        partial(flat_alltoall, order=order),
        count=count,
        counts=counts,
        itemsize=itemsize,
        order=order,
    )


def alltoall(topology, *, count=1, itemsize=1, order="rank"):
    """MPICH's flat all-to-all: every rank sends block ``i*P+j`` directly to ``j``.

    Parameters
    ----------
    order : {"rank", "rotated"}
        ``"rank"``: every rank posts its sends to ``0, 1, ..., P-1`` (MPICH 1.1, so
        that all start with rank 0); ``"rotated"``: rank ``i`` sends to ``i+1, i+2,
        ...`` and receives from ``i-1, i-2, ...`` (later MPICH versions).

    Examples
    --------
    >>> from wacoll import Topology
    >>> for step in alltoall(Topology.single(3)).programs[1]:
    ...     print(step)
    copy [4] in -> out
    send 0 [3] from in
    send 2 [5] from in
    recv 0 [1]
    recv 2 [7]
    >>> [str(s) for s in alltoall(Topology.single(3), order="rotated").programs[1]][1:3]
    ['send 2 [5] from in', 'send 0 [3] from in']
    """
    return _alltoall("alltoall", topology, count, None, itemsize, order)


def alltoallv(topology, *, counts=None, count=1, itemsize=1, order="rank"):
    """MPICH's flat all-to-all-v: :func:`alltoall` with a (sender, receiver) count matrix.

    Examples
    --------
    >>> from wacoll import Topology
    >>> alltoallv(Topology.single(2), counts=[[1, 2], [3, 4]]).prove().bytes
    5
    """
    return _alltoall("alltoallv", topology, count, counts, itemsize, order)


# ------------------------------------------------------------------ reductions
def _reduce_tree(topology, root):
    """MPICH's binomial reduce tree rooted at ``root``.

    Children are received smallest subtree first, so the operands stay in rank
    order when ``root`` is 0 (and the expression is the canonical one).
    """
    return make_tree("binomial", topology, root=root, operation="reduce")


def reduce(
    topology, *, root=0, count=1, segments=1, level=None, itemsize=1, algorithm="binomial"
):
    """The single-level reduce, by one of two algorithms.

    ``"binomial"`` (MPICH 1.1's, pipelined by segment): at level ``"commutative"``
    the tree is rooted at ``root``; otherwise (MPICH's non-commutative path) at rank
    0, which computes the canonical expression and, if the root is another rank,
    sends it the result. ``"halving"`` (Rabenseifner's reduce): the canonical
    reduce-scatter of :func:`allreduce`'s ``"halving"``, then every owner sends its
    share straight to the root.

    Examples
    --------
    >>> from wacoll import Topology
    >>> for step in reduce(Topology.single(4), root=2).programs[0]:
    ...     print(step)
    copy [0] in -> acc
    recv-combine 1 [0] into acc
    recv-combine 2 [0] into acc
    send 2 [0] from acc
    >>> for step in reduce(Topology.single(4), root=2, level="commutative").programs[2]:
    ...     print(step)
    copy [0] in -> out
    recv-combine 3 [0] into out
    recv-combine 0 [0] into out
    """
    _validate_algorithm("reduce", algorithm)
    if algorithm == "halving":
        b = PlanBuilder(
            "reduce",
            topology,
            root=root,
            count=count,
            segments=_owner_multiple(topology, segments),
            level=level,
            itemsize=itemsize,
        )
        # an owner's share ends in "part": only the root's "out" has room for it
        share = "out" if b.size == 1 else "part"
        owned = halving_reduce_scatter(b, range(b.size), b.all_blocks, result=share)
        for owner, blocks in owned.items():
            if owner == b.root:
                if share != "out":
                    b.copy(owner, blocks, share, "out")
            elif blocks:
                b.transfer(owner, b.root, blocks, "part", "out")
        return b.build(family=_FAMILY, algorithm="halving+gather", segments=segments)
    b = PlanBuilder(
        "reduce",
        topology,
        root=root,
        count=count,
        segments=segments,
        level=level,
        itemsize=itemsize,
    )
    tree_root = b.root if b.level == "commutative" else 0
    tree = _reduce_tree(topology, tree_root)
    for seg in segment_blocks(b.all_blocks, EACH):
        if tree_root == b.root:
            tree_reduce(b, tree, seg, result_buf="out")
        else:
            tree_reduce(b, tree, seg, result_buf="acc")
            b.transfer(tree_root, b.root, seg, src="acc", dst="out")
    return b.build(
        family=_FAMILY, algorithm="binomial", segments=segments, tree_root=tree_root
    )


#: The algorithms of :func:`reduce` and :func:`allreduce`.
ALLREDUCE_ALGORITHMS = ("binomial", "halving")


def _validate_algorithm(op, algorithm):
    if algorithm not in ALLREDUCE_ALGORITHMS:
        raise PlanError(
            f"mpich {op} algorithm must be one of {ALLREDUCE_ALGORITHMS}, "
            f"got {algorithm!r}"
        )


def _owner_multiple(topology, segments):
    """``segments`` rounded up to a multiple of the halving's owners."""
    return round_segments(segments, largest_power_of_two(topology.size))


def allreduce(
    topology, *, count=1, segments=1, level=None, itemsize=1, algorithm="binomial"
):
    """The single-level allreduce, by one of two algorithms.

    ``"binomial"`` (MPICH 1.1's): a binomial reduce to rank 0, then :func:`bcast`
    from 0. ``"halving"`` (Rabenseifner's, as later MPICH versions run it for long
    vectors, but with the distances doubling so that every block keeps the canonical
    expression: :mod:`wacoll.plans.halving`): a reduce-scatter by recursive halving
    and an allgather by recursive doubling, ``2 (P-1)/P`` of the vector per rank
    instead of ``2 log2 P`` vectors through rank 0. Its blocks are the vector cut
    into ``segments`` rounded up to a multiple of the largest power of two ``<= P``,
    so that every owner gets an equal share.

    Examples
    --------
    >>> from wacoll import Topology
    >>> allreduce(Topology.single(5), level="strict").prove().messages
    8
    >>> plan = allreduce(Topology.single(6), count=1 << 20, algorithm="halving")
    >>> report = plan.prove()
    >>> plan.nblocks, report.level, report.messages
    (4, 'strict', 24)
    """
    _validate_algorithm("allreduce", algorithm)
    if algorithm == "halving":
        b = PlanBuilder(
            "allreduce",
            topology,
            count=count,
            segments=_owner_multiple(topology, segments),
            level=level,
            itemsize=itemsize,
        )
        ranks = range(b.size)
        owned = halving_reduce_scatter(b, ranks, b.all_blocks)
        doubling_allgather(b, ranks, owned, b.all_blocks)
        return b.build(family=_FAMILY, algorithm="halving+doubling", segments=segments)
    b = PlanBuilder(
        "allreduce",
        topology,
        count=count,
        segments=segments,
        level=level,
        itemsize=itemsize,
    )
    segs = segment_blocks(b.all_blocks, EACH)
    tree = _reduce_tree(topology, 0)
    for seg in segs:
        tree_reduce(b, tree, seg, result_buf="out")
    tree_bcast(b, bcast_tree(b.size, 0), b.all_blocks, segments=segs)
    return b.build(family=_FAMILY, algorithm="binomial+binomial", segments=segments)


def _reduce_scatter(op, topology, count, counts, level, itemsize):
    b = PlanBuilder(
        op, topology, count=count, counts=counts, level=level, itemsize=itemsize
    )
    # MPI_Reduce of the whole vector to rank 0 into a scratch buffer ...
    tree_reduce(b, _reduce_tree(topology, 0), b.all_blocks, result_buf="tmp")
    # ... then MPI_Scatterv of block i to rank i
    flat_scatter(b, root=0, src="tmp")
    return b.build(family=_FAMILY, algorithm="binomial+flat")


def reduce_scatter(topology, *, counts=None, count=1, level=None, itemsize=1):
    """MPICH 1.1's reduce-scatter: binomial reduce to rank 0, then a flat scatterv.

    Examples
    --------
    >>> from wacoll import Topology
    >>> plan = reduce_scatter(Topology.single(4), counts=[1, 2, 0, 1])
    >>> [str(s) for s in plan.programs[0]][-3:]
    ['send 1 [1] from tmp', 'send 2 [2] from tmp', 'send 3 [3] from tmp']
    >>> plan.prove().messages
    6
    """
    return _reduce_scatter("reduce_scatter", topology, count, counts, level, itemsize)


def reduce_scatter_block(topology, *, count=1, level=None, itemsize=1):
    """MPICH's reduce-scatter with equal blocks: :func:`reduce_scatter` with one count.

    Examples
    --------
    >>> from wacoll import Topology
    >>> report = reduce_scatter_block(Topology.from_sizes([2, 2]), count=3).prove()
    >>> report.max_wide_area_hops, report.optimality  # 3 -> 2 -> 0, then 0 -> 3
    (2, 'no')
    """
    return _reduce_scatter("reduce_scatter_block", topology, count, None, level, itemsize)


def scan(topology, *, count=1, segments=1, level=None, itemsize=1):
    """MPICH 1.1's chain scan, pipelined by segment.

    Rank ``i`` receives the prefix of ranks ``0..i-1`` from ``i - 1``, combines its
    own contribution on the right and sends the result to ``i + 1``: the left fold,
    the canonical scan expression at every level.

    Examples
    --------
    >>> from wacoll import Topology
    >>> [str(s) for s in scan(Topology.single(3)).programs[1]]
    ['recv 0 [0]', 'combine [0] in -> out', 'send 2 [0]']
    """
    b = PlanBuilder(
        "scan", topology, count=count, segments=segments, level=level, itemsize=itemsize
    )
    chain_scan(b)
    return b.build(family=_FAMILY, algorithm="chain", segments=segments)


def exscan(topology, *, count=1, segments=1, level=None, itemsize=1):
    """The chain exclusive scan (MPI-2; the analogue of MPICH 1.1's scan).

    Rank ``i`` receives the prefix of ranks ``0..i-1`` into ``out`` and forwards that
    prefix combined with its own contribution; rank 0 receives nothing.

    Examples
    --------
    >>> from wacoll import Topology
    >>> plan = exscan(Topology.single(3))
    >>> print(plan.describe())
    exscan on 3 ranks, level strict (mpich/chain)
    rank 0: send 1 [0] from in
    rank 1: recv 0 [0]; copy [0] out -> acc; combine [0] in -> acc; send 2 [0] from acc
    rank 2: recv 1 [0]
    """
    b = PlanBuilder(
        "exscan", topology, count=count, segments=segments, level=level, itemsize=itemsize
    )
    chain_scan(b, exclusive=True)
    return b.build(family=_FAMILY, algorithm="chain", segments=segments)


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
    "barrier": ("itemsize",),
    "bcast": ("root", "count", "segments", "itemsize"),
    "scatter": ("root", "count", "itemsize"),
    "scatterv": ("root", "counts", "count", "itemsize"),
    "gather": ("root", "count", "itemsize"),
    "gatherv": ("root", "counts", "count", "itemsize"),
    "allgather": ("count", "itemsize"),
    "allgatherv": ("counts", "count", "itemsize"),
    "alltoall": ("count", "itemsize", "order"),
    "alltoallv": ("counts", "count", "itemsize", "order"),
    "reduce": ("root", "count", "segments", "level", "itemsize", "algorithm"),
    "allreduce": ("count", "segments", "level", "itemsize", "algorithm"),
    "reduce_scatter": ("counts", "count", "level", "itemsize"),
    "reduce_scatter_block": ("count", "level", "itemsize"),
    "scan": ("count", "segments", "level", "itemsize"),
    "exscan": ("count", "segments", "level", "itemsize"),
}
