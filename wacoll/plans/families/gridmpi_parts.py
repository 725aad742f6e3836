"""Building blocks of the gridmpi family: block refinement and per-cluster patterns.

Matsuda et al.'s algorithms cut the vector once per cluster: a cluster of ``p`` ranks
splits it into ``p`` contiguous *ranges*, range ``j`` going to the rank at *position*
``j`` of the cluster's order. With clusters of different sizes the plan's blocks are
the common refinement of all those splits (:class:`Layout`), so every block lies in
exactly one range of every cluster and has one owner there.

The patterns below append steps for one group of ranks given in position order
(``order[j]`` owns ``sets[j]``, a tuple of block ids):

- :func:`binomial_scatter` and :func:`binomial_gather`: van de Geijn's scatter
  (``split_copy``) from position 0, and its reverse;
- :func:`allgather`: ``merge_copy``, recursive doubling for power-of-two groups, a
  ring otherwise;
- :func:`reduce_scatter`: Rabenseifner's recursive halving for power-of-two groups
  (partners at distance 1, 2, 4, ... so operands stay in rank order; position ``i``
  ends with range ``bitreverse(i)``), a pairwise exchange otherwise;
- :func:`wide_area_sends` and :func:`wide_area_receives`: ``counter_copy`` and
  ``counter_reduce`` with ``n`` senders per cluster and intra-cluster forwarding.

Examples
--------
>>> from wacoll.plans.families.gridmpi_parts import Layout
>>> lay = Layout.refine(12, [2, 3])
>>> lay.counts
(4, 2, 2, 4)
>>> lay.ranges(2), lay.ranges(3)
(((0, 1), (2, 3)), ((0,), (1, 2), (3,)))
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from wacoll.errors import PlanError

__all__ = [
    "Layout",
    "split_points",
    "binomial_scatter",
    "binomial_gather",
    "allgather",
    "reduce_scatter",
    "sender_groups",
    "wide_area_sends",
    "wide_area_receives",
    "WideMessage",
]


def split_points(count: int, parts: int) -> tuple:
    """The ``parts + 1`` offsets that cut ``count`` elements into near-equal ranges.

    The first ``count % parts`` ranges get one element more, as MPI libraries cut.

    Examples
    --------
    >>> split_points(10, 4)
    (0, 3, 6, 8, 10)
    """
    base, extra = divmod(count, parts)
    points, at = [0], 0
    for j in range(parts):
        at += base + (1 if j < extra else 0)
        points.append(at)
    return tuple(points)


@dataclass(frozen=True)
class Layout:
    """The plan's blocks: the common refinement of every group's split of the vector.

    Attributes
    ----------
    count : int
        Elements of the whole vector.
    counts : tuple of int
        Elements of each block (block ids are indices).
    starts : tuple of int
        Offset of each block in the vector.
    segments : tuple of (int, int), optional
        The element bounds of each segment of a :meth:`pipelined` layout (None for
        one cut by :meth:`refine`, which has no segments of its own).
    """

    count: int
    counts: tuple
    starts: tuple
    segments: tuple | None = None

    @classmethod
    def refine(cls, count: int, sizes, segments: int = 1) -> Layout:
        """Cut ``count`` elements at the split points of every group size in ``sizes``.

        ``segments`` adds the points of an even split into that many segments (it only
        makes the blocks finer). A vector of no elements is one empty block.

        Examples
        --------
        >>> Layout.refine(8, [4, 4]).counts
        (2, 2, 2, 2)
        >>> Layout.refine(0, [3]).counts
        (0,)
        """
        if isinstance(segments, bool) or not isinstance(segments, int) or segments < 1:
            raise PlanError(f"segments must be a positive integer, got {segments!r}")
        if count == 0:
            return cls(0, (0,), (0,))
        points = set(split_points(count, segments))
        for p in sizes:
            points.update(split_points(count, p))
        cuts = sorted(points)
        counts = tuple(b - a for a, b in zip(cuts, cuts[1:]))
        return cls(count, counts, tuple(cuts[:-1]))

    @classmethod
    def pipelined(cls, count: int, sizes, segments: int) -> Layout:
        """Cut ``count`` elements into ``segments`` even segments, then each segment at
        the split points of every group size in ``sizes``.

        A pipelined plan runs its stages on one segment at a time
        (:meth:`ranges` with ``within``), so each segment needs every group's split
        of its own. A segment shorter than a group would leave that group's last
        ranks idle in every segment (the same first ranks would own, and send, all
        of the vector), so there are at most ``count // max(sizes)`` segments, and
        at least one.

        Examples
        --------
        >>> Layout.pipelined(8, [2], 2).counts
        (2, 2, 2, 2)
        >>> Layout.pipelined(8, [2], 2).segments
        ((0, 4), (4, 8))
        >>> len(Layout.pipelined(8, [4], 8).segments)  # two elements per rank at least
        2
        """
        if isinstance(segments, bool) or not isinstance(segments, int) or segments < 1:
            raise PlanError(f"segments must be a positive integer, got {segments!r}")
        if count == 0:
            return cls(0, (0,), (0,), ((0, 0),))
        edges = split_points(count, max(1, min(segments, count // max(sizes))))
        points = set(edges)
        for lo, hi in zip(edges, edges[1:]):
            for p in sizes:
                points.update(lo + x for x in split_points(hi - lo, p))
        cuts = sorted(points)
        counts = tuple(b - a for a, b in zip(cuts, cuts[1:]))
        return cls(count, counts, tuple(cuts[:-1]), tuple(zip(edges, edges[1:])))

    @property
    def nblocks(self) -> int:
        """Number of blocks."""
        return len(self.counts)

    def ranges(self, parts: int, within=None) -> tuple:
        """The blocks of each of the ``parts`` ranges of a group of that size.

        ``within`` (element bounds ``(lo, hi)``, default the whole vector) splits only
        that part of the vector, such as one segment of a :meth:`pipelined` layout
        (whose blocks are cut at every such split). Ranges of no elements hold no
        blocks (the empty vector's one block is range 0's).

        Examples
        --------
        >>> Layout.refine(2, [3]).ranges(3)
        ((0,), (1,), ())
        >>> Layout.pipelined(8, [2], 2).ranges(2, within=(4, 8))
        ((2,), (3,))
        """
        if self.count == 0:
            return ((0,),) + ((),) * (parts - 1)
        lo, hi = (0, self.count) if within is None else within
        points = tuple(lo + x for x in split_points(hi - lo, parts))
        b = bisect.bisect_left(self.starts, lo)
        if within is not None and not set(points[:-1]) <= set(self.starts) | {hi}:
            raise PlanError(
                f"internal: the split of elements [{lo}, {hi}) into {parts} "
                f"ranges does not fall on the layout's blocks"
            )
        out = []
        for j in range(parts):
            blocks = []
            while b < self.nblocks and self.starts[b] < points[j + 1]:
                blocks.append(b)
                b += 1
            out.append(tuple(blocks))
        return tuple(out)


def _union(sets):
    return tuple(sorted(b for s in sets for b in s))


def _is_pow2(p):
    return p & (p - 1) == 0


def _half(size):
    """Binomial split of a group of ``size`` ranks: the largest power of two below it."""
    return 1 << ((size - 1).bit_length() - 1)


def binomial_scatter(b, order, sets, buf="out") -> dict:
    """Scatter ``sets[j]`` from ``order[0]`` to ``order[j]`` down a binomial tree.

    Position ``lo`` hands the upper part ``[lo + m, hi)`` of its subtree to
    ``lo + m``, largest part first (``m`` the largest power of two below the
    subtree's size): van de Geijn's ``split_copy``, recursive halving for powers of
    two. Returns each rank's held blocks (its whole subtree's).

    Examples
    --------
    >>> from wacoll import Topology
    >>> from wacoll.plans.builder import PlanBuilder
    >>> b = PlanBuilder("bcast", Topology.single(4), count=4, segments=4)
    >>> held = binomial_scatter(b, (0, 1, 2, 3), ((0,), (1,), (2,), (3,)))
    >>> [str(s) for s in b.programs[0]], sorted(held[2])
    (['send 2 [2,3]', 'send 1 [1]'], [2, 3])
    """
    held = {order[0]: set(_union(sets))}

    def split(lo, hi):
        if hi - lo <= 1:
            return
        m = _half(hi - lo)
        blocks = _union(sets[lo + m : hi])
        held[order[lo + m]] = set(blocks)
        if blocks:
            b.transfer(order[lo], order[lo + m], blocks, buf, buf)
        split(lo, lo + m)
        split(lo + m, hi)

    split(0, len(order))
    return held


def binomial_gather(b, order, sets, buf="out"):
    """Gather every ``sets[j]`` from ``order[j]`` at ``order[0]``: the scatter reversed.

    Each position receives its children's subtrees smallest first, then sends its
    whole subtree to its parent.
    """

    def join(lo, hi):
        if hi - lo <= 1:
            return
        m = _half(hi - lo)
        join(lo, lo + m)
        join(lo + m, hi)
        blocks = _union(sets[lo + m : hi])
        if blocks:
            b.transfer(order[lo + m], order[lo], blocks, buf, buf)

    join(0, len(order))


def allgather(b, order, sets, buf="out", held=None, method=None):
    """Every rank of ``order`` gets every ``sets[j]``: van de Geijn's ``merge_copy``.

    Recursive doubling (partners at distance 1, 2, 4, ... in position order, so each
    message is one contiguous part when ``sets`` are) for power-of-two groups; a ring
    of ``len(order) - 1`` steps otherwise. ``held`` (rank -> blocks, default each
    rank's own set) says what ranks already hold, such as the root of a scatter: a
    rank is never sent a block it holds. ``method`` (``"doubling"`` or ``"ring"``)
    forces one of the two (doubling needs a power-of-two group).

    Examples
    --------
    >>> from wacoll import Topology
    >>> from wacoll.plans.builder import PlanBuilder
    >>> b = PlanBuilder("allgather", Topology.single(3))
    >>> allgather(b, (0, 1, 2), ((0,), (1,), (2,)))
    >>> [str(s) for s in b.programs[0]]
    ['send 1 [0]', 'recv 2 [2]', 'send 1 [2]', 'recv 2 [1]']
    """
    p = len(order)
    if p == 1:
        return
    if held is None:
        held = {}
    has = {r: set(held.get(r, ())) | set(sets[j]) for j, r in enumerate(order)}
    if method not in (None, "doubling", "ring"):
        raise PlanError(f"allgather method must be 'doubling' or 'ring', got {method!r}")
    if method == "doubling" and not _is_pow2(p):
        raise PlanError(f"recursive doubling needs a power of two of ranks, not {p}")
    moves = []  # (step, from position, to position, blocks) before filtering
    if _is_pow2(p) if method is None else method == "doubling":
        mask, step = 1, 0
        while mask < p:
            for j in range(p):
                first = j & ~(mask - 1)
                moves.append((step, j, j ^ mask, _union(sets[first : first + mask])))
            mask <<= 1
            step += 1
    else:
        for s in range(p - 1):
            for j in range(p):
                moves.append((s, j, (j + 1) % p, tuple(sets[(j - s) % p])))
    # one step at a time: filter against what the receiver holds before the step
    by_step = {}
    for step, src, dst, blocks in moves:
        by_step.setdefault(step, []).append((src, dst, blocks))
    for step in sorted(by_step):
        sends = []
        for src, dst, blocks in by_step[step]:
            wanted = tuple(x for x in blocks if x not in has[order[dst]])
            sends.append((src, dst, wanted))
        received = {}
        for src, dst, wanted in sends:
            if wanted:
                b.send(order[src], order[dst], wanted, buf)
                received.setdefault(dst, []).append((src, wanted))
        for j in range(p):
            for src, wanted in received.get(j, ()):
                b.recv(order[j], order[src], wanted, buf)
                has[order[j]].update(wanted)


def reduce_scatter(b, members, ranges) -> tuple:
    """Reduce the ``"in"`` vectors of ``members`` so each owns one range's partial.

    ``members`` in rank order; the partial of range ``j`` ends in ``"out"`` of the
    returned ``owners[j]``, combined in rank order (operands never swap).

    - power-of-two groups: recursive halving with partners at distance 1, 2, 4, ...;
      the lower partner keeps the lower half, so position ``i`` ends with range
      ``bitreverse(i)`` and each partial is MPICH's binomial expression.
    - other sizes: pairwise; position ``i`` owns range ``i`` and receives every other
      member's piece, sending its own pieces first. Pieces from higher ranks are
      combined on the right as they come; pieces from lower ranks (which come after
      the wrap-around, lowest first) into ``"tmp"``, joined on the left at the end.

    Examples
    --------
    >>> from wacoll import Topology
    >>> from wacoll.plans.builder import PlanBuilder
    >>> b = PlanBuilder("allreduce", Topology.single(4), count=4, segments=4,
    ...                 level="associative")
    >>> reduce_scatter(b, (0, 1, 2, 3), ((0,), (1,), (2,), (3,)))
    (0, 2, 1, 3)
    """
    p = len(members)
    if p == 1:
        b.copy(members[0], _union(ranges), "in", "out")
        return tuple(members)
    if _is_pow2(p):
        return _recursive_halving(b, members, ranges)
    return _pairwise(b, members, ranges)


def _recursive_halving(b, members, ranges):
    p = len(members)
    span = {i: (0, p) for i in range(p)}
    mask = 1
    while mask < p:
        for i in range(p):
            partner = i ^ mask
            lo, hi = span[i]
            mid = (lo + hi) // 2
            if i < partner:
                keep, give, side = (lo, mid), (mid, hi), "right"
            else:
                keep, give, side = (mid, hi), (lo, mid), "left"
            keep_blocks = _union(ranges[keep[0] : keep[1]])
            give_blocks = _union(ranges[give[0] : give[1]])
            src = "in" if mask == 1 else "out"
            me, other = members[i], members[partner]
            if give_blocks:
                b.send(me, other, give_blocks, src)
            if mask == 1:
                b.copy(me, keep_blocks, "in", "out")
            if keep_blocks:
                b.recv_combine(me, other, keep_blocks, "out", side)
            span[i] = keep
        mask <<= 1
    owners = [None] * p
    for i, (lo, _hi) in span.items():
        owners[lo] = members[i]
    return tuple(owners)


def _pairwise(b, members, ranges):
    p = len(members)
    for i in range(p):
        me = members[i]
        for s in range(1, p):
            j = (i - s) % p
            if ranges[j]:
                b.send(me, members[j], ranges[j], "in")
        mine = ranges[i]
        if not mine:
            continue
        b.copy(me, mine, "in", "out")
        lower = False
        for s in range(1, p):
            j = (i + s) % p
            if j > i:
                b.recv_combine(me, members[j], mine, "out", "right")
            elif not lower:
                b.recv(me, members[j], mine, "tmp")
                lower = True
            else:
                b.recv_combine(me, members[j], mine, "tmp", "right")
        if lower:
            b.combine(me, mine, "tmp", "out", "left")
    return tuple(members)


def sender_groups(parts: int, n: int) -> tuple:
    """Split range positions ``0..parts-1`` into ``n`` contiguous groups, one sender each.

    Examples
    --------
    >>> sender_groups(8, 3)
    ((0, 1), (2, 3, 4), (5, 6, 7))
    """
    return tuple(tuple(range(k * parts // n, (k + 1) * parts // n)) for k in range(n))


@dataclass(frozen=True)
class WideMessage:
    """One wide-area message of ``counter_copy``/``counter_reduce`` (sends appended)."""

    src: int
    dst: int
    blocks: tuple
    src_cluster: int


def wide_area_sends(b, cluster, owners, ranges, held, n, destinations) -> list:
    """Append one cluster's ``counter_copy``: forwarding, then ``n`` wide-area senders.

    Parameters
    ----------
    b : PlanBuilder
    cluster : int
        The sending cluster's id.
    owners, ranges : tuple
        ``owners[j]`` holds range ``j`` (blocks ``ranges[j]``) in ``"out"``.
    held : dict
        Rank -> blocks it already holds in ``"out"`` (at least its own range);
        updated with the blocks forwarded to the senders.
    n : int
        Senders, ``1..len(owners)``: the owner of the first range of each of
        :func:`sender_groups`. The other owners forward to their group's sender the
        blocks it lacks (one intra-cluster message each).
    destinations : list of (int, dict)
        Each receiving cluster and the rank that owns each block there.

    Each sender sends one message per destination rank with every block of its group
    that rank owns, as soon as it holds them: its own blocks first, then after each
    forwarded message the messages it completed (block order, then cluster order).
    Returns the :class:`WideMessage` list; the receives are appended by
    :func:`wide_area_receives`.
    """
    messages: list[WideMessage] = []
    if not destinations:  # one cluster: nothing crosses, nothing to forward
        return messages
    for group in sender_groups(len(owners), n):
        sender = owners[group[0]]
        blocks = _union(ranges[j] for j in group)
        have = set(held.get(sender, ())) & set(blocks)
        forwards = []
        for j in group:
            missing = tuple(x for x in ranges[j] if x not in have)
            if missing and owners[j] != sender:
                forwards.append((owners[j], missing))
        pending = []
        for rank_order, (_dst_cluster, owner_of) in enumerate(destinations):
            per_rank: dict[int, list[int]] = {}
            for x in blocks:
                per_rank.setdefault(owner_of[x], []).append(x)
            for dst, mine in per_rank.items():
                pending.append((mine[0], rank_order, dst, tuple(mine)))
        pending.sort()
        for g, missing in forwards:
            b.send(g, sender, missing, "out")

        def emit():
            ready = [m for m in pending if have.issuperset(m[3])]
            for m in ready:
                pending.remove(m)
                b.send(sender, m[2], m[3], "out")
                messages.append(WideMessage(sender, m[2], m[3], cluster))

        emit()
        for g, missing in forwards:
            b.recv(sender, g, missing, "out")
            have.update(missing)
            held.setdefault(sender, set()).update(missing)
            emit()
        if pending:  # cannot happen: every group block is held or forwarded
            raise PlanError(
                f"internal: sender {sender} never holds blocks {pending[0][3]}"
            )
    return messages


def wide_area_receives(b, messages, cluster_of, rank_in_order, combine=False):
    """Append the receives of ``messages`` at their destinations.

    Movement (``combine=False``): each rank receives into ``"out"`` in block order.
    Reduction: each rank combines the partials of the other clusters into its own in
    cluster order: clusters after its own (ascending) on the right, then clusters
    before it (descending) on the left, so contiguous clusters keep rank order.
    ``rank_in_order`` maps a cluster id to its position in cluster order.
    """
    by_dst = {}
    for m in messages:
        by_dst.setdefault(m.dst, []).append(m)
    for dst in sorted(by_dst):
        mine = by_dst[dst]
        if not combine:
            for m in sorted(mine, key=lambda m: m.blocks[0]):
                b.recv(dst, m.src, m.blocks, "out")
            continue
        here = rank_in_order[cluster_of[dst]]

        def key(m):
            there = rank_in_order[m.src_cluster]
            return (0 if there > here else 1, abs(there - here), m.blocks[0])

        for m in sorted(mine, key=key):
            side = "right" if rank_in_order[m.src_cluster] > here else "left"
            b.recv_combine(dst, m.src, m.blocks, "out", side)
