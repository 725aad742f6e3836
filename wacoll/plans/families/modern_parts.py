"""Building blocks of the modern family: the patterns of MPICH 4 and Open MPI 5.

Each function appends the steps of one communication pattern to a
:class:`~wacoll.plans.builder.PlanBuilder`; :mod:`wacoll.plans.families.modern`
composes them into plans. Where wacoll already had a pattern it is reused:
Rabenseifner's reduce-scatter is :func:`wacoll.plans.halving.halving_reduce_scatter`
and its allgather :func:`wacoll.plans.halving.doubling_allgather`; van de Geijn's
binomial scatter and the recursive-doubling allgather of a broadcast are
:func:`wacoll.plans.families.gridmpi_parts.binomial_scatter` and
:func:`~wacoll.plans.families.gridmpi_parts.allgather` (whose ring
:func:`ring_allgather` writes again rank by rank, for focused builds).

MPICH's non-power-of-two *fold* (Thakur, Rabenseifner & Gropp 2005, Section 4):
with ``p`` the largest power of two ``<= P`` and ``rem = P - p``, the first
``2 rem`` ranks pair up, ``(0, 1), (2, 3), ...``; one of each pair hands its data to
the other and sits out, so that ``p`` ranks run the power-of-two algorithm, and gets
the result back at the end. :func:`fold` names who stays.

Examples
--------
>>> fold(6)
(4, 2, (1, 3, 4, 5))
>>> fold(6, keep="even")
(4, 2, (0, 2, 4, 5))
>>> [n for n in range(1, 17) if fold_is_canonical(n)]
[1, 2, 3, 4, 6, 7, 8, 12, 14, 15, 16]
"""

from __future__ import annotations

from wacoll.errors import PlanError
from wacoll.plans.families.gridmpi_parts import allgather as _gridmpi_allgather
from wacoll.plans.halving import (
    doubling_allgather,
    halving_reduce_scatter,
    largest_power_of_two,
)

__all__ = [
    "fold",
    "fold_is_canonical",
    "dissemination_barrier",
    "bruck_allgather",
    "doubling_allgather_fold",
    "ring_allgather",
    "bruck_alltoall",
    "pairwise_alltoall",
    "recursive_doubling_allreduce",
    "rabenseifner_allreduce",
    "rabenseifner_reduce",
    "ring_allreduce",
    "chunks_of",
    "rounds",
]


def rounds(size: int) -> int:
    """``ceil(log2 size)``: the rounds of Bruck's algorithms and the dissemination
    barrier (0 for one rank).

    >>> [rounds(n) for n in (1, 2, 3, 4, 5, 8, 9)]
    [0, 1, 2, 2, 3, 3, 4]
    """
    return (size - 1).bit_length()


def fold(size: int, keep: str = "odd"):
    """MPICH's non-power-of-two fold: ``(p, rem, participants)``.

    ``participants`` are the ``p`` ranks that run the power-of-two algorithm, in the
    order of their *new ranks*: of each of the pairs ``(2i, 2i + 1)``, ``i < rem``,
    the odd member (``keep="odd"``, MPICH's allreduce) or the even one
    (``keep="even"``, MPICH's Rabenseifner reduce), then the ranks ``2 rem .. P-1``.
    """
    if keep not in ("odd", "even"):
        raise PlanError(f"keep must be 'odd' or 'even', got {keep!r}")
    p = largest_power_of_two(size)
    rem = size - p
    first = 1 if keep == "odd" else 0
    return p, rem, tuple(2 * i + first for i in range(rem)) + tuple(range(2 * rem, size))


def fold_is_canonical(size: int) -> bool:
    """Whether MPICH's fold followed by a power-of-two exchange in rank order computes
    the canonical (binomial, rank-ordered) expression of level ``"strict"``.

    After the fold, new rank ``i`` holds ``x(2i) + x(2i+1)`` for ``i < rem`` and one
    contribution above; recursive doubling (or halving) combines the ``p`` of them
    as a balanced tree. That is the binomial tree's expression exactly when ``P``,
    in binary, is a run of ones followed by zeros (``2**a * (2**b - 1)``: 3, 6, 7,
    12, 14, 15 and every power of two), where the pairs are the binomial tree's own
    first level; for 5 ranks, say, it computes ``((x0+x1)+x2)+(x3+x4)`` where the
    canonical expression is ``((x0+x1)+(x2+x3))+x4``.
    """
    odd = size >> ((size & -size).bit_length() - 1)  # strip the trailing zeros
    return odd & (odd + 1) == 0


def dissemination_barrier(b):
    """Hensgen, Finkel & Manber's dissemination barrier (MPICH's k-dissemination
    with ``k = 2``, Open MPI's "bruck" barrier): in round ``k`` every rank sends an
    empty message to ``r + 2**k`` and waits for one from ``r - 2**k``, ``ceil(log2 P)``
    rounds of ``P`` messages."""
    size = b.size
    d = 1
    while d < size:
        for r in range(size):
            b.send(r, (r + d) % size, ())
            b.recv(r, (r - d) % size, ())
        d <<= 1


def bruck_allgather(b, order, sets, buf="out"):
    """Bruck et al.'s allgather over the ranks ``order`` (position ``i`` holds
    ``sets[i]`` in ``buf``): in round ``k`` position ``i`` sends the sets of
    positions ``i .. i + c - 1`` (all it holds; ``c = min(2**k, P - 2**k)``) to
    position ``i - 2**k`` and receives those of ``i + 2**k ..`` from ``i + 2**k``.

    ``ceil(log2 P)`` rounds for any ``P``. MPICH's version gathers into a scratch
    buffer and rotates it into place at the end; here blocks keep their ids, so
    they land in place and the rotation is a relabelling.
    """
    size = len(order)
    d = 1
    while d < size:
        c = min(d, size - d)
        for i, r in enumerate(order):
            if not b.keeps(r):
                continue
            mine = tuple(x for j in range(i, i + c) for x in sets[j % size])
            theirs = tuple(x for j in range(i + d, i + d + c) for x in sets[j % size])
            b.send(r, order[(i - d) % size], mine, buf)
            b.recv(r, order[(i + d) % size], theirs, buf)
        d <<= 1


def ring_allgather(b, order, sets, held=None, buf="out"):
    """The ring allgather: ``P - 1`` rounds; in round ``s`` position ``j`` sends
    ``sets[j - s]`` to its successor and receives ``sets[j - 1 - s]`` from its
    predecessor. A rank is never sent a block ``held`` (rank -> blocks) says it has
    (the messages :func:`~wacoll.plans.families.gridmpi_parts.allgather`'s ring
    sends, written rank by rank so that a focused build costs one rank's steps)."""
    size = len(order)
    held = held or {}
    has = [set(held.get(r, ())) | set(sets[j]) for j, r in enumerate(order)]
    for j, r in enumerate(order):
        if not b.keeps(r):
            continue
        right, left = (j + 1) % size, (j - 1) % size
        for s in range(size - 1):
            out = tuple(x for x in sets[(j - s) % size] if x not in has[right])
            inc = tuple(x for x in sets[(j - 1 - s) % size] if x not in has[j])
            if out:
                b.send(r, order[right], out, buf)
            if inc:
                b.recv(r, order[left], inc, buf)


def doubling_allgather_fold(b, order, sets, held=None, buf="out"):
    """The recursive-doubling allgather (partners at distance 1, 2, 4, ...), with
    MPICH's fold for a number of positions that is not a power of two.

    Of each pair of positions ``(2i, 2i + 1)``, ``i < rem``, the even one sends
    what it has to the odd one, the ``p`` remaining positions exchange by recursive
    doubling, and each odd one sends its partner what it lacks at the end. (MPICH
    runs its recursive-doubling allgather on powers of two only; its allreduce folds
    this way.) ``held`` as in :func:`ring_allgather`.
    """
    order, sets = tuple(order), tuple(sets)
    size = len(order)
    p, rem, parts = fold(size)
    if rem == 0:
        _gridmpi_allgather(b, order, sets, buf=buf, held=held, method="doubling")
        return
    has = {r: set((held or {}).get(r, ())) | set(sets[j]) for j, r in enumerate(order)}
    for i in range(rem):
        even, odd = order[2 * i], order[2 * i + 1]
        give = tuple(sorted(has[even] - has[odd]))
        if give:
            b.transfer(even, odd, give, buf, buf)
            has[odd].update(give)
    merged = tuple(
        tuple(sorted(set(sets[2 * i]) | set(sets[2 * i + 1]))) for i in range(rem)
    )
    merged += sets[2 * rem :]
    _gridmpi_allgather(
        b,
        tuple(order[j] for j in parts),
        merged,
        buf=buf,
        held={order[j]: has[order[j]] for j in parts},
        method="doubling",
    )
    every = set().union(*map(set, sets), *has.values())
    for i in range(rem):
        even, odd = order[2 * i], order[2 * i + 1]
        give = tuple(sorted(every - has[even]))
        if give:
            b.transfer(odd, even, give, buf, buf)


def bruck_alltoall(b):
    """Bruck et al.'s all-to-all (MPICH's ``brucks``): ``ceil(log2 P)`` rounds; in
    round ``k`` every rank sends to ``r + 2**k`` the blocks whose remaining distance
    ``(destination - source) mod P`` has bit ``k`` set, and receives from
    ``r - 2**k``.

    Blocks travel through scratch ``"tmp"`` (MPICH's phase-1 rotation copies the
    send buffer there; its last rotation copies the received blocks out): a rank
    copies its own blocks ``in -> tmp`` first and its incoming ones ``tmp -> out``
    last; its block to itself goes ``in -> out``.
    """
    size = b.size
    ranks = [r for r in range(size) if b.keeps(r)]  # (a focused build: one rank)
    for r in ranks:
        b.copy(r, (r * size + r,), "in", "out")
        b.copy(r, tuple(r * size + (r + k) % size for k in range(1, size)), "in", "tmp")
    d = 1
    while d < size:
        for r in ranks:
            # the blocks at r in this round: from source s = r - (the bits of their
            # distance below d that are set), distance k with bit d set
            out = []
            for k in range(1, size):
                if k & d:
                    s = (r - (k & (d - 1))) % size
                    out.append(s * size + (s + k) % size)
            inc = []
            src = (r - d) % size
            for k in range(1, size):
                if k & d:
                    s = (src - (k & (d - 1))) % size
                    inc.append(s * size + (s + k) % size)
            b.send(r, (r + d) % size, tuple(sorted(out)), "tmp")
            b.recv(r, src, tuple(sorted(inc)), "tmp")
        d <<= 1
    for r in ranks:
        b.copy(r, tuple(s * size + r for s in range(size) if s != r), "tmp", "out")


def pairwise_alltoall(b):
    """The pairwise-exchange all-to-all (MPICH's ``pairwise``, Open MPI's
    ``pairwise``): ``P - 1`` rounds; in round ``i`` rank ``r`` sends its block for
    ``r XOR i`` and receives that rank's (``P`` a power of two), else sends to
    ``r + i`` and receives from ``r - i``."""
    size = b.size
    pof2 = size & (size - 1) == 0
    for r in range(size):
        if not b.keeps(r):
            continue
        b.copy(r, (r * size + r,), "in", "out")
        for i in range(1, size):
            dst = r ^ i if pof2 else (r + i) % size
            src = r ^ i if pof2 else (r - i) % size
            b.send(r, dst, (r * size + dst,), "in")
            b.recv(r, src, (src * size + r,), "out")


def recursive_doubling_allreduce(b, blocks, ordered=True):
    """MPICH's recursive-doubling allreduce, its fold included.

    The even rank of each of the first ``rem`` pairs sends its vector to the odd
    one, which combines it on the left; the ``p`` remaining ranks exchange whole
    vectors with partners at distance 1, 2, 4, ... (in new ranks) and combine; each
    odd rank finally sends the result to its even partner. ``ordered``: the
    incoming operand goes on the side that keeps rank order (MPICH's path for
    non-commutative operators); else always on the left, as MPICH combines
    commutative ones (``tmp op recvbuf``).
    """
    size = b.size
    if size == 1:
        b.copy(0, blocks, "in", "out")
        return
    p, rem, parts = fold(size)
    for r in range(2 * rem, size):
        b.copy(r, blocks, "in", "out")
    for i in range(rem):
        even, odd = 2 * i, 2 * i + 1
        b.send(even, odd, blocks, "in")
        b.copy(odd, blocks, "in", "out")
        b.recv_combine(odd, even, blocks, "out", side="left")
    mask = 1
    while mask < p:
        for i, r in enumerate(parts):
            dst = parts[i ^ mask]
            b.send(r, dst, blocks, "out")
            side = "left" if dst < r or not ordered else "right"
            b.recv_combine(r, dst, blocks, "out", side=side)
        mask <<= 1
    for i in range(rem):
        b.transfer(2 * i + 1, 2 * i, blocks, "out", "out")


def _fold_in(b, blocks, keep):
    """The fold of Rabenseifner's algorithms: the sitting-out member of each of the
    first ``rem`` pairs sends its vector to the staying one, which combines it with
    its own in ``"tmp"``, rank order kept. Returns ``(participants, src)``: the
    staying ranks in new-rank order and the buffer each one's contribution is in."""
    p, rem, parts = fold(b.size, keep)
    src = dict.fromkeys(parts, "in")
    for i in range(rem):
        even, odd = 2 * i, 2 * i + 1
        stay, leave = (odd, even) if keep == "odd" else (even, odd)
        b.send(leave, stay, blocks, "in")
        b.recv(stay, leave, blocks, "tmp")
        b.combine(stay, blocks, "in", "tmp", side="right" if keep == "odd" else "left")
        src[stay] = "tmp"
    return parts, src


def rabenseifner_allreduce(b, blocks):
    """Rabenseifner's allreduce as MPICH runs it (``reduce_scatter_allgather``):
    the fold, a reduce-scatter by recursive halving of the vector with partners at
    distance 1, 2, 4, ... (:func:`wacoll.plans.halving.halving_reduce_scatter`), an
    allgather by recursive doubling (:func:`wacoll.plans.halving.doubling_allgather`),
    and the result sent back to the ranks that sat out. ``blocks`` should be a
    multiple of ``p`` so that every participant owns a share."""
    if b.size == 1:
        b.copy(0, blocks, "in", "out")
        return
    parts, src = _fold_in(b, blocks, "odd")
    owned = halving_reduce_scatter(b, parts, blocks, src=src, acc="acc", result="out")
    doubling_allgather(b, parts, owned, blocks)
    for i in range(b.size - len(parts)):
        b.transfer(2 * i + 1, 2 * i, blocks, "out", "out")


def rabenseifner_reduce(b, blocks, root):
    """Rabenseifner's reduce as MPICH runs it (``reduce_scatter_gather``): the fold
    (the odd member of a pair sits out), the reduce-scatter of
    :func:`rabenseifner_allreduce`, then a binomial gather of the shares to the root
    along the halving's distances in reverse (largest first). A root that sat out
    gets the result from its partner, which gathered in its stead."""
    size = b.size
    if size == 1:
        b.copy(0, blocks, "in", "out")
        return
    parts, src = _fold_in(b, blocks, "even")
    owned = halving_reduce_scatter(b, parts, blocks, src=src, acc="acc", result="part")
    stand_in = root if root in src else root - 1
    new_root = parts.index(stand_in)
    held = {r: tuple(owned[r]) for r in parts}
    if stand_in == root:
        b.copy(root, held[root], "part", "out")
    alive = range(len(parts))
    mask = len(parts) // 2
    while mask:
        for i in alive:
            if (i & mask) != (new_root & mask):
                r, dst = parts[i], parts[i ^ mask]
                if held[r]:
                    b.transfer(r, dst, held[r], "part", "out" if dst == root else "part")
                held[dst] = tuple(sorted(held[dst] + held[r]))
        alive = [i for i in alive if (i & mask) == (new_root & mask)]
        mask //= 2
    if stand_in != root:
        b.transfer(stand_in, root, blocks, "part", "out")


def chunks_of(blocks, parts):
    """``blocks`` cut into ``parts`` consecutive chunks (the first ones longer).

    >>> chunks_of((0, 1, 2, 3, 4), 3)
    ((0, 1), (2, 3), (4,))
    """
    base, extra = divmod(len(blocks), parts)
    out, at = [], 0
    for i in range(parts):
        n = base + (1 if i < extra else 0)
        out.append(tuple(blocks[at : at + n]))
        at += n
    return tuple(out)


def ring_allreduce(b, chunks):
    """The ring allreduce (Patarasuk & Yuan 2009; MPICH's and Open MPI's ``ring``):
    a ring reduce-scatter, then a ring allgather, ``2 (P - 1)`` rounds.

    Every rank copies its vector to ``"out"``; in round ``i`` of the reduce-scatter
    rank ``r`` sends chunk ``r - 1 - i`` to ``r + 1`` and combines chunk ``r - 2 - i``
    from ``r - 1`` into its own, incoming operand on the left (``tmp op recvbuf``);
    rank ``r`` ends with chunk ``r`` reduced and the ring allgather passes the chunks
    on. Chunk ``c``'s operands are combined in the order ``c + 1, c + 2, ..., c``:
    commutative operators only.
    """
    size = b.size
    every = tuple(x for c in chunks for x in c)
    for r in range(size):
        if not b.keeps(r):
            continue
        b.copy(r, every, "in", "out")
        if size == 1:
            continue
        right, left = (r + 1) % size, (r - 1) % size
        for i in range(size - 1):
            b.send(r, right, chunks[(r - 1 - i) % size], "out")
            b.recv_combine(r, left, chunks[(r - 2 - i) % size], "out", side="left")
        for i in range(1, size):
            b.send(r, right, chunks[(r - i + 1) % size], "out")
            b.recv(r, left, chunks[(r - i) % size], "out")
