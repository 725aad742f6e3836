"""Communication patterns that plan builders of every family compose.

Each tree pattern appends steps to a :class:`~wacoll.plans.builder.PlanBuilder` for
the ranks of a tree (any subset of the communicator); families call them for the
wide area and for the clusters alike. The flat patterns (:func:`flat_scatter`,
:func:`flat_gather`, :func:`flat_alltoall`) move every rank's block straight to its
destination, which MPICH does and MagPIe keeps because it is wide-area optimal.

Examples
--------
>>> from wacoll import Topology, trees
>>> from wacoll.plans.builder import PlanBuilder
>>> from wacoll.plans.patterns import tree_bcast
>>> b = PlanBuilder("bcast", Topology.single(4), root=0, count=8, segments=2)
>>> tree_bcast(b, trees.chain(4), b.all_blocks, segments=[(0,), (1,)])
>>> [str(s) for s in b.programs[1]]
['recv 0 [0]', 'send 2 [0]', 'recv 0 [1]', 'send 2 [1]']
"""

from __future__ import annotations

import numpy as np

from wacoll.errors import PlanError
from wacoll.plans.encoded import single_block_steps
from wacoll.plans.prover.encode import COPY, NO_PEER, RECV, SEND, index_dtype
from wacoll.trees.basic import children, parent, tree_root, validate_tree

__all__ = [
    "tree_bcast",
    "tree_reduce",
    "chain_scan",
    "subtree_ranks",
    "segment_blocks",
    "EACH",
    "flat_scatter",
    "flat_gather",
    "flat_alltoall",
    "ALLTOALL_ORDERS",
    "validate_alltoall_order",
]

#: Send orders of :func:`flat_alltoall`.
ALLTOALL_ORDERS = ("rank", "rotated")


#: ``segments=EACH``: one message per block, so the blocks pipeline.
EACH = "each"


def segment_blocks(blocks, segments=None):
    """The messages a pattern sends, in order, each a tuple of blocks.

    Parameters
    ----------
    blocks : iterable of int
        The blocks to move.
    segments : None, EACH or list of iterable of int
        ``None``: one message with all ``blocks``; :data:`EACH`: one message per
        block (how the families pipeline a plan's ``segments``, one block each);
        a list: those messages.

    Examples
    --------
    >>> segment_blocks((0, 1, 2)), segment_blocks((0, 1, 2), EACH)
    ([(0, 1, 2)], [(0,), (1,), (2,)])
    >>> segment_blocks((0, 1, 2), [[0, 1], [2]])
    [(0, 1), (2,)]
    """
    if segments is None:
        return [tuple(blocks)]
    if isinstance(segments, str):
        if segments != EACH:
            raise PlanError(
                f"segments must be None, {EACH!r} or a list of block "
                f"tuples, got {segments!r}"
            )
        return [(blk,) for blk in blocks]
    return [tuple(s) for s in segments]


def tree_bcast(b, tree, blocks, *, buf="out", segments=None, root_buf=None):
    """Append a broadcast of ``blocks`` from the tree's root down ``tree``.

    Every node receives each segment from its parent into ``buf`` and forwards it to
    its children in ``order``, so several segments pipeline through the tree.

    Parameters
    ----------
    b : PlanBuilder
    tree : networkx.DiGraph
        Over any subset of ranks, by the tree convention.
    blocks : tuple of int
        The blocks to broadcast.
    buf : str
        The buffer they are received into and sent from.
    segments : list of tuple of int, or EACH, optional
        Blocks per message, in send order (default: one message with all blocks;
        see :func:`segment_blocks`).
    root_buf : str, optional
        The buffer the root sends from (default ``buf``).
    """
    validate_tree(tree, members=tree.nodes)
    root = tree_root(tree)
    segs = segment_blocks(blocks, segments)
    for v in tree.nodes:
        if not b.keeps(v):
            continue
        kids = children(tree, v)
        up = parent(tree, v)
        src = (root_buf or buf) if v == root else buf
        for seg in segs:
            if up is not None:
                b.recv(v, up, seg, buf)
            for c in kids:
                b.send(v, c, seg, src)


def subtree_ranks(tree, ranges):
    """The set of contributions each node's subtree covers, given each node's own."""
    covered = {}
    for v in reversed(list(_topological(tree))):
        s = set(ranges[v])
        for c in tree.succ[v]:
            s |= covered[c]
        covered[v] = s
    return covered


def _topological(tree):
    root = tree_root(tree)
    order, stack = [], [root]
    while stack:
        v = stack.pop()
        order.append(v)
        stack.extend(tree.succ[v])
    return order


def _side(level, acc, sub, v, c):
    """Which side child ``c``'s subtree goes on so that rank order is kept."""
    if level == "commutative":
        return "right"
    lo, hi = min(sub), max(sub)
    contiguous = hi - lo + 1 == len(sub)
    if contiguous and max(acc) + 1 == lo:
        return "right"
    if contiguous and hi + 1 == min(acc):
        return "left"
    raise PlanError(
        f"the reduce tree does not keep rank order at rank {v}: child {c} brings ranks "
        f"{sorted(sub)[:6]} next to ranks {min(acc)}..{max(acc)}; use level='commutative' "
        f"or a rank-ordered reduce tree such as lam(n) or make_tree('binomial', ..., "
        f"operation='reduce')"
    )


def tree_reduce(
    b,
    tree,
    blocks,
    *,
    result_buf="out",
    acc_buf="acc",
    start=None,
    ranges=None,
    segments=None,
    arrival=False,
):
    """Append a reduction of ``blocks`` up ``tree`` into ``result_buf`` at its root.

    Each node starts with a value in ``start[v]`` (default ``"in"``) covering the
    contributions ``ranges[v]`` (default ``{v}``), combines its children's partial
    results in ``order`` (or in arrival order when ``arrival`` and the level is
    commutative) on the side that keeps rank order, and sends the result to its parent.

    Raises
    ------
    PlanError
        If the level keeps rank order and the tree cannot.
    """
    validate_tree(tree, members=tree.nodes)
    root = tree_root(tree)
    level = b.level
    start = start or {}
    ranges = ranges or {v: (v,) for v in tree.nodes}
    covered = subtree_ranks(tree, ranges)
    segs = segment_blocks(blocks, segments)
    for v in tree.nodes:
        if not b.keeps(v):
            continue  # (a focused build follows a proved whole one: no order to check)
        kids = children(tree, v)
        up = parent(tree, v)
        own = start.get(v, "in")
        acc = result_buf if v == root else acc_buf
        if not kids:
            if up is None:
                b.copy(v, blocks, own, acc)
            else:
                for seg in segs:
                    b.send(v, up, seg, own)
            continue
        sides = []
        have = set(ranges[v])
        for c in kids:
            sides.append(_side(level, have, covered[c], v, c))
            have |= covered[c]
        group = v + 1 if (arrival and level == "commutative" and len(kids) > 1) else 0
        if own != acc:
            b.copy(v, blocks, own, acc)
        for seg in segs:
            for c, side in zip(kids, sides):
                b.recv_combine(v, c, seg, acc, side, group)
            if up is not None:
                b.send(v, up, seg, acc)


def chain_scan(b, *, exclusive=False, segments=EACH):
    """Append MPICH's chain scan: rank ``i`` gets the prefix from ``i - 1``, passes it on.

    Inclusive (``scan``): rank ``i`` receives the prefix of ranks ``0..i-1`` into
    ``"out"``, combines its own contribution on the right and sends the result to
    ``i + 1``: the left fold, the canonical scan expression at every level.
    Exclusive (``exscan``): rank ``i`` keeps the received prefix in ``"out"`` and
    forwards it combined with its own contribution (in ``"acc"``); rank 0 sends its
    contribution and receives nothing. Every segment runs down the whole chain before
    the next starts on it, so segments pipeline.

    Parameters
    ----------
    b : PlanBuilder
    exclusive : bool
        Build the exclusive scan.
    segments : None, EACH or list of tuple of int
        The messages, as :func:`segment_blocks` takes them (default: one per block).

    Examples
    --------
    >>> from wacoll import Topology
    >>> from wacoll.plans.builder import PlanBuilder
    >>> b = PlanBuilder("exscan", Topology.single(3))
    >>> chain_scan(b, exclusive=True)
    >>> [str(s) for s in b.programs[1]]
    ['recv 0 [0]', 'copy [0] out -> acc', 'combine [0] in -> acc', 'send 2 [0] from acc']
    """
    last = b.size - 1
    for seg in segment_blocks(b.all_blocks, segments):
        for r in range(b.size):
            if not b.keeps(r):
                continue
            if r:
                b.recv(r, r - 1, seg, "out")
            if not exclusive:
                if r:
                    b.combine(r, seg, "in", "out", side="right")
                else:
                    b.copy(r, seg, "in", "out")
                forward = "out"
            elif 0 < r < last:
                forward = "acc"
                b.copy(r, seg, "out", forward)
                b.combine(r, seg, "in", forward, side="right")
            else:
                forward = "in"
            if r < last:
                b.send(r, r + 1, seg, forward)


# ------------------------------------------------------------------ flat patterns
def flat_scatter(b, *, root=None, src="in", dst="out"):
    """Append a flat scatter: ``root`` sends block ``i`` of ``src`` to rank ``i``.

    The sends leave in rank order; the root copies its own block from ``src`` to
    ``dst``, and every other rank receives its block into ``dst``.

    Parameters
    ----------
    b : PlanBuilder
    root : int, optional
        The sender (default ``b.root``).
    src, dst : str
        The buffer the root sends from and the one the blocks land in.

    Examples
    --------
    >>> from wacoll import Topology
    >>> from wacoll.plans.builder import PlanBuilder
    >>> b = PlanBuilder("scatter", Topology.single(3), root=1)
    >>> flat_scatter(b)
    >>> [str(s) for s in b.programs[1]]
    ['send 0 [0] from in', 'copy [1] in -> out', 'send 2 [2] from in']
    """
    _flat_rooted(b, root, src, dst, to_root=False)


def flat_gather(b, *, root=None, src="in", dst="out"):
    """Append a flat gather: ``root`` receives block ``i`` from rank ``i``, in rank order.

    Every rank other than ``root`` (default ``b.root``) sends its block of ``src``;
    the root copies its own from ``src`` and receives the others into ``dst``.

    Examples
    --------
    >>> from wacoll import Topology
    >>> from wacoll.plans.builder import PlanBuilder
    >>> b = PlanBuilder("gather", Topology.single(3), root=2)
    >>> flat_gather(b)
    >>> [str(s) for s in b.programs[2]]
    ['recv 0 [0]', 'recv 1 [1]', 'copy [2] in -> out']
    """
    _flat_rooted(b, root, src, dst, to_root=True)


def _flat_rooted(b, root, src, dst, *, to_root):
    """Block ``r`` between ``root`` and each rank ``r``, in rank order."""
    root = b.root if root is None else root
    for r in range(b.size):
        if not (b.keeps(r) or b.keeps(root)):
            continue
        if r == root:
            b.copy(r, (r,), src, dst)
        elif to_root:
            b.transfer(r, root, (r,), src=src, dst=dst)
        else:
            b.transfer(root, r, (r,), src=src, dst=dst)


def validate_alltoall_order(order):
    """Raise :class:`PlanError` unless ``order`` is one of :data:`ALLTOALL_ORDERS`."""
    if order not in ALLTOALL_ORDERS:
        raise PlanError(f"alltoall order must be one of {ALLTOALL_ORDERS}, got {order!r}")


def flat_alltoall(b, *, order="rotated"):
    """Append a flat all-to-all: rank ``i`` sends block ``i*P+j`` straight to rank ``j``.

    Each rank copies its own block, posts all its sends of ``"in"``, then all its
    receives into ``"out"``, so nothing can block. A whole-plan build writes these
    ``P * P`` steps as arrays (:mod:`wacoll.plans.encoded`); a focused one appends
    its rank's steps.

    Parameters
    ----------
    b : PlanBuilder
    order : {"rotated", "rank"}
        ``"rotated"``: rank ``i`` sends to ``i+1, i+2, ...`` (wrapping) and receives
        from ``i-1, i-2, ...``, so that no rank is every sender's first target;
        ``"rank"``: every rank sends to and receives from ``0, 1, ..., P-1``.

    Examples
    --------
    >>> from wacoll import Topology
    >>> from wacoll.plans.builder import PlanBuilder
    >>> b = PlanBuilder("alltoall", Topology.single(3))
    >>> flat_alltoall(b)
    >>> [str(s) for s in b.build().programs[1]]
    ['copy [4] in -> out', 'send 2 [5] from in', 'send 0 [3] from in', 'recv 0 [1]', 'recv 2 [7]']
    """
    validate_alltoall_order(order)
    size = b.size
    if b.focus is None and size > 1:  # P * P steps: as arrays
        b.encoded(_flat_alltoall_steps(size, len(b.counts), order))
        return
    for r in range(size):
        if not b.keeps(r):
            continue
        if order == "rank":
            dsts = srcs = [p for p in range(size) if p != r]
        else:
            dsts = [(r + k) % size for k in range(1, size)]
            srcs = [(r - k) % size for k in range(1, size)]
        b.copy(r, (r * size + r,), "in", "out")
        for dst in dsts:
            b.send(r, dst, (r * size + dst,), "in")
        for src in srcs:
            b.recv(r, src, (src * size + r,), "out")


def _flat_alltoall_steps(size, nblocks, order):
    """:func:`flat_alltoall`'s programs as arrays (the same steps, in the same order).

    Each column is written in place, in the dtype the prover keeps
    (:func:`~wacoll.plans.encoded.single_block_steps`), with no ``P x P`` int64
    temporaries: on 4096 ranks the 33.5 million steps took 2.8 s that way, most of
    it copying."""
    width = 2 * size - 1  # a rank's steps: its copy, P - 1 sends, P - 1 receives
    peers = np.int16 if size < 2**15 - 2 else index_dtype(size)
    blocks = index_dtype(nblocks)
    r = np.arange(size, dtype=blocks)[:, None]
    k = np.arange(1, size, dtype=blocks)[None, :]
    # each rank's row: [copy | sends | receives]
    kind = np.empty((size, width), dtype=np.int8)
    kind[:, 0], kind[:, 1:size], kind[:, size:] = COPY, SEND, RECV
    peer = np.empty((size, width), dtype=peers)
    peer[:, 0] = NO_PEER
    sends, recvs = peer[:, 1:size], peer[:, size:]
    if order == "rank":  # 0..P-1 without r, for both
        np.add(k - 1, k - 1 >= r, out=sends, casting="unsafe")
        recvs[...] = sends
    else:  # r + k and r - k, wrapped (r + k - P stays within a peer's dtype)
        np.add(r, k - size, out=sends, casting="unsafe")
        sends[sends < 0] += size
        np.subtract(r, k, out=recvs, casting="unsafe")
        recvs[recvs < 0] += size
    none, buf_in, buf_out = -1, 0, 1
    src = np.full((size, width), none, dtype=np.int16)
    src[:, :size] = buf_in
    dst = np.full((size, width), none, dtype=np.int16)
    dst[:, 0], dst[:, size:] = buf_out, buf_out
    block = np.empty((size, width), dtype=blocks)
    block[:, 0] = np.arange(size, dtype=blocks) * (size + 1)
    np.add(r * size, sends, out=block[:, 1:size], dtype=blocks, casting="unsafe")
    np.multiply(recvs, size, out=block[:, size:], dtype=blocks, casting="unsafe")
    block[:, size:] += r
    return single_block_steps(
        nblocks,
        np.full(size, width),
        kind=kind.reshape(-1),
        peer=peer.reshape(-1),
        src=src.reshape(-1),
        dst=dst.reshape(-1),
        block=block.reshape(-1),
        buffers=("in", "out"),
    )
