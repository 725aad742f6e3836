"""The **modern** family: the algorithms MPICH 4/5 and Open MPI 5 select today.

The ``mpich`` family holds MPICH 1.1's collectives, the baseline of MagPIe (1999).
Since then MPI libraries have gathered the algorithms of Thakur, Rabenseifner &
Gropp's "Optimization of collective communication operations in MPICH" (IJHPCA
19(1), 2005), on which MPICH 4's selection file (``coll_selection.json``) and Open
MPI 5's ``coll/tuned`` still choose. This family puts them on wacoll's plan model,
so that they are proved, simulated, exported and run like the 1999 ones:

==========  ======================  ==================================================
operation   algorithm               origin
==========  ======================  ==================================================
barrier     ``dissemination``       Hensgen, Finkel & Manber (IJPP 1988); MPICH's
                                    k-dissemination with k = 2, Open MPI's "bruck"
bcast       ``binomial``            MPICH's binomial tree over any ``P``
            ``scatter_doubling``    van de Geijn (Barnett et al., SHPCC 1994): binomial
                                    scatter + recursive-doubling allgather
            ``scatter_ring``        the same with a ring allgather (MPICH for long
                                    vectors, Open MPI's ``scatter_allgather_ring``)
            ``chain``               Open MPI's pipelined chain
            ``knomial``             Open MPI's k-nomial tree (``radix``)
allgather   ``bruck``               Bruck et al. (IEEE TPDS 8(11), 1997), any ``P``
            ``recursive_doubling``  partners at distance 1, 2, 4, ...
            ``ring``                ``P - 1`` rounds to the successor
alltoall    ``bruck``               Bruck et al. 1997, ``ceil(log2 P)`` rounds
            ``scattered``           every send and receive posted at once, rotated
            ``pairwise``            ``P - 1`` exchanges (XOR partners on 2**k ranks)
allreduce   ``recursive_doubling``  whole vectors, partners at distance 1, 2, 4, ...
            ``rabenseifner``        Rabenseifner (ICCS 2004): reduce-scatter by
                                    recursive halving + allgather by recursive doubling
            ``ring``                ring reduce-scatter + ring allgather (Patarasuk &
                                    Yuan, JPDC 2009; Open MPI's and MPICH's ``ring``)
reduce      ``binomial``            MPICH's binomial tree (as in 1997)
            ``rabenseifner``        reduce-scatter by recursive halving + binomial gather
==========  ======================  ==================================================

``algorithm="auto"`` (the default) chooses as MPICH 4's ``coll_selection.json``
does, by the vector's bytes ``n = count * itemsize`` and ``P``:

- bcast: ``binomial`` when ``P < 8`` or ``n <= 12288``; else, on a power of two
  of ranks, ``scatter_doubling`` up to ``n <= 524288``; else ``scatter_ring``;
- allgather (``N = n P`` bytes gathered): on a power of two of ranks
  ``recursive_doubling`` below ``N = 524288``, else ``bruck`` below ``N = 81920``;
  ``ring`` above;
- alltoall (``n`` per pair): ``bruck`` for ``n <= 256`` and ``P >= 8``,
  ``scattered`` for ``n <= 32768``, ``pairwise`` above;
- allreduce: ``rabenseifner`` for a commutative level (MPICH: a predefined
  operator), ``n > 8`` and ``count >= p`` (``p`` the largest power of two
  ``<= P``); ``recursive_doubling`` otherwise;
- reduce: ``rabenseifner`` for a commutative level, ``n > 2048`` and
  ``count >= p``; ``binomial`` otherwise.

None is a default of the selection policy (:mod:`wacoll.plans.select`); ask for
them by name: ``build(op, topology, "modern", algorithm=...)``, or
``wacoll.Comm(...).Allreduce(..., family="modern", algorithm="ring")``.

Non-power-of-two sizes and reduction levels
--------------------------------------------
MPICH's recursive doubling and Rabenseifner's algorithms fold a ``P`` that is not
a power of two first (:func:`~wacoll.plans.families.modern_parts.fold`): with
``p`` the largest power of two ``<= P`` and ``rem = P - p``, one rank of each
of the pairs ``(0, 1), ..., (2 rem - 2, 2 rem - 1)`` hands its vector to the
other and gets the result back at the end. They combine in rank order, so they
keep level ``"associative"`` at every ``P``, and level ``"strict"`` (the
canonical binomial expression, bit-reproducible) exactly when ``P`` is
``2**a * (2**b - 1)``: 1, 2, 3, 4, 6, 7, 8, 12, 14, 15, 16, ...
(:func:`~wacoll.plans.families.modern_parts.fold_is_canonical`); elsewhere they
raise :class:`~wacoll.errors.PlanError` at level ``"strict"`` (the ``mpich``
family's ``algorithm="halving"`` is strict at every ``P``). The ring allreduce
combines chunk ``c`` in the order ``c + 1, ..., P - 1, 0, ..., c``: level
``"commutative"`` only, as both libraries run it. The binomial reduce keeps every
level (MPICH's non-commutative path roots the tree at rank 0).

Where the plans differ from the libraries' code
-----------------------------------------------
A plan never receives data a rank already holds, so the broadcasts' allgathers
leave out the messages MPICH sends of chunks the scatter already delivered (and
those to the root). MPICH's rotations of Bruck's algorithms are relabellings here
(blocks keep their ids). The recursive-doubling allgather on a ``P`` that is not a
power of two folds as the allreduce does (MPICH selects it on powers of two only).

Examples
--------
>>> from wacoll import Topology
>>> from wacoll.plans import build
>>> plan = build("allreduce", Topology.single(6), "modern", count=1 << 16, itemsize=8,
...              level="commutative")
>>> plan.algorithm, plan.prove().messages
('rabenseifner', 20)
>>> report = build("allgather", Topology.single(5), "modern", algorithm="bruck").prove()
>>> report.messages  # 5 ranks, ceil(log2 5) = 3 rounds each
15
>>> build("allreduce", Topology.single(5), "modern", algorithm="ring",
...       level="commutative").prove().max_sends  # 2 (P - 1)
8
"""

from __future__ import annotations

import dataclasses

from wacoll.errors import PlanError
from wacoll.plans.builder import PlanBuilder
from wacoll.plans.families import mpich as _mpich
from wacoll.plans.families import tree as _tree
from wacoll.plans.families.gridmpi_parts import binomial_scatter
from wacoll.plans.families.modern_parts import (
    bruck_allgather,
    bruck_alltoall,
    chunks_of,
    dissemination_barrier,
    doubling_allgather_fold,
    fold_is_canonical,
    pairwise_alltoall,
    rabenseifner_allreduce,
    rabenseifner_reduce,
    recursive_doubling_allreduce,
    ring_allgather,
    ring_allreduce,
)
from wacoll.plans.halving import largest_power_of_two
from wacoll.plans.operations import round_segments
from wacoll.plans.patterns import flat_alltoall

__all__ = [
    "barrier",
    "bcast",
    "allgather",
    "alltoall",
    "allreduce",
    "reduce",
    "choose",
    "ALGORITHMS",
    "BUILDERS",
    "OPTIONS",
]

_FAMILY = "modern"

#: The algorithms of each operation (``algorithm="auto"`` chooses among them).
ALGORITHMS = {
    "barrier": ("dissemination",),
    "bcast": ("binomial", "scatter_doubling", "scatter_ring", "chain", "knomial"),
    "allgather": ("bruck", "recursive_doubling", "ring"),
    "alltoall": ("bruck", "scattered", "pairwise"),
    "allreduce": ("recursive_doubling", "rabenseifner", "ring"),
    "reduce": ("binomial", "rabenseifner"),
}

#: The algorithms that keep each level at every ``P``; the fold's keep ``"strict"``
#: at some sizes only (see the module docstring).
_COMMUTATIVE_ONLY = {("allreduce", "ring")}
_FOLDED = {
    ("allreduce", "recursive_doubling"),
    ("allreduce", "rabenseifner"),
    ("reduce", "rabenseifner"),
}


def _pof2(n):
    return n & (n - 1) == 0


def choose(op, size, *, count=1, itemsize=1, level=None):
    """The algorithm MPICH 4's selection file picks for ``op`` (see the module
    docstring); ``level`` other than ``"commutative"`` stands for a user-defined
    operator, which MPICH's choices treat apart.

    Examples
    --------
    >>> choose("bcast", 16, count=1 << 16), choose("bcast", 12, count=1 << 16)
    ('scatter_doubling', 'scatter_ring')
    >>> choose("allreduce", 8, count=1024, itemsize=8, level="commutative")
    'rabenseifner'
    >>> choose("allreduce", 8, count=1024, itemsize=8, level="associative")
    'recursive_doubling'
    >>> choose("alltoall", 16, count=4), choose("allgather", 6, count=4)
    ('bruck', 'bruck')
    """
    nbytes = count * itemsize
    commutative = level == "commutative"
    owners = largest_power_of_two(size)
    if op == "barrier":
        return "dissemination"
    if op == "bcast":
        if size < 8 or nbytes <= 12288:
            return "binomial"
        return "scatter_doubling" if _pof2(size) and nbytes <= 524288 else "scatter_ring"
    if op == "allgather":
        total = nbytes * size
        if _pof2(size):
            return "recursive_doubling" if total < 524288 else "ring"
        return "bruck" if total < 81920 else "ring"
    if op == "alltoall":
        if nbytes <= 256 and size >= 8:
            return "bruck"
        return "scattered" if nbytes <= 32768 else "pairwise"
    if op == "allreduce":
        if nbytes > 8 and commutative and count >= owners:
            return "rabenseifner"
        return "recursive_doubling"
    if op == "reduce":
        if nbytes > 2048 and commutative and count >= owners:
            return "rabenseifner"
        return "binomial"
    raise PlanError(
        f"the {_FAMILY} family has no {op} plan; it builds "
        f"{', '.join(sorted(ALGORITHMS))}"
    )


def _algorithm(op, algorithm, size, count, itemsize, level=None):
    """``algorithm`` checked (``"auto"``: :func:`choose`), and the level it keeps."""
    if algorithm == "auto":
        algorithm = choose(op, size, count=count, itemsize=itemsize, level=level)
    elif algorithm not in ALGORITHMS[op]:
        raise PlanError(
            f"modern {op} algorithm must be 'auto' or one of "
            f"{', '.join(ALGORITHMS[op])}; got {algorithm!r}"
        )
    if (
        level is not None
        and level != "commutative"
        and (op, algorithm) in _COMMUTATIVE_ONLY
    ):
        raise PlanError(
            f"the {algorithm} {op} combines chunk c in the order c+1, ..., "
            f"P-1, 0, ..., c: it keeps level 'commutative' only, not "
            f"{level!r} (MPICH and Open MPI run it for commutative "
            f"operators only)"
        )
    if level == "strict" and (op, algorithm) in _FOLDED and not fold_is_canonical(size):
        raise PlanError(
            f"the {algorithm} {op} on {size} ranks folds ranks "
            f"0..{2 * (size - largest_power_of_two(size)) - 1} in pairs "
            f"first (MPICH), which is not the canonical expression of level "
            f"'strict' on {size} ranks (it is on 2**a * (2**b - 1) ranks); "
            f"use level 'associative', or the mpich family's "
            f"algorithm='halving', strict at every size"
        )
    return algorithm


def _relabel(plan, algorithm, **params):
    """A plan another family's builder made, as this family's ``algorithm``."""
    return dataclasses.replace(
        plan, family=_FAMILY, algorithm=algorithm, params=tuple(sorted(params.items()))
    )


# ---------------------------------------------------------------------- barrier
def barrier(topology, *, itemsize=1, algorithm="auto"):
    """The dissemination barrier: ``ceil(log2 P)`` rounds, in round ``k`` an empty
    message to ``r + 2**k`` and one from ``r - 2**k`` (``P ceil(log2 P)`` messages).

    Examples
    --------
    >>> from wacoll import Topology
    >>> plan = barrier(Topology.single(5))
    >>> [str(s) for s in plan.programs[0]]
    ['send 1 []', 'recv 4 []', 'send 2 []', 'recv 3 []', 'send 4 []', 'recv 1 []']
    >>> plan.prove().messages
    15
    """
    b = PlanBuilder("barrier", topology, itemsize=itemsize)
    name = _algorithm("barrier", algorithm, b.size, 0, itemsize)
    dissemination_barrier(b)
    return b.build(family=_FAMILY, algorithm=name)


# ------------------------------------------------------------------------ bcast
def bcast(
    topology, *, root=0, count=1, segments=1, itemsize=1, algorithm="auto", radix=4
):
    """Broadcast from ``root`` (no reduction: no level).

    ``"binomial"``, ``"chain"`` and ``"knomial"`` (k-nomial tree of ``radix``) send
    the vector down a tree, pipelined in ``segments`` (the tree family's plans,
    :func:`wacoll.plans.families.tree.bcast`, relabelled: that family already
    covers pipelined chains and k-nomial trees). ``"scatter_ring"`` and
    ``"scatter_doubling"`` cut the vector into ``P`` chunks (``segments`` rounded up
    to a multiple of ``P``; relative rank ``j`` owns chunk ``j``), scatter them down
    a binomial tree and allgather them by a ring or by recursive doubling
    (:mod:`wacoll.plans.families.modern_parts`, on
    :mod:`wacoll.plans.families.gridmpi_parts`), sending no rank a chunk it holds.

    Examples
    --------
    >>> from wacoll import Topology
    >>> plan = bcast(Topology.single(4), count=8, algorithm="scatter_ring")
    >>> [str(s) for s in plan.programs[2]]  # the scatter gives rank 2 chunks 2 and 3
    ['recv 0 [2,3]', 'send 3 [3]', 'send 3 [2]', 'recv 1 [1]', 'send 3 [1]', 'recv 1 [0]', 'send 3 [0]']
    """
    size = topology.size
    name = _algorithm("bcast", algorithm, size, count, itemsize)
    if name in ("binomial", "chain", "knomial"):
        tree = f"knomial{radix}" if name == "knomial" else name
        if name == "knomial" and (
            isinstance(radix, bool) or not isinstance(radix, int) or radix < 2
        ):
            raise PlanError(
                f"the knomial bcast needs an integer radix >= 2, got {radix!r}"
            )
        plan = _tree.bcast(
            topology,
            tree=tree,
            root=root,
            count=count,
            segments=segments,
            itemsize=itemsize,
        )
        extra = {"radix": radix} if name == "knomial" else {}
        return _relabel(plan, name, segments=segments, **extra)
    b = PlanBuilder(
        "bcast",
        topology,
        root=root,
        count=count,
        segments=round_segments(segments, size),
        itemsize=itemsize,
    )
    order = tuple((b.root + j) % size for j in range(size))
    chunks = chunks_of(b.all_blocks, size)
    held = binomial_scatter(b, order, chunks)
    if name == "scatter_ring":
        ring_allgather(b, order, chunks, held=held)
    else:
        doubling_allgather_fold(b, order, chunks, held=held)
    return b.build(family=_FAMILY, algorithm=name, segments=segments)


# -------------------------------------------------------------------- allgather
def allgather(topology, *, count=1, itemsize=1, algorithm="auto"):
    """Allgather: each rank copies its block to ``out``, then Bruck's algorithm
    (``ceil(log2 P)`` rounds at any ``P``), recursive doubling (``log2 P`` rounds
    on ``2**k`` ranks; otherwise MPICH's fold adds two) or the ring (``P - 1``).

    Examples
    --------
    >>> from wacoll import Topology
    >>> [str(s) for s in allgather(Topology.single(3), algorithm="bruck").programs[0]]
    ['copy [0] in -> out', 'send 2 [0]', 'recv 1 [1]', 'send 1 [0]', 'recv 2 [2]']
    >>> allgather(Topology.single(8), algorithm="recursive_doubling").prove().max_sends
    3
    """
    b = PlanBuilder("allgather", topology, count=count, itemsize=itemsize)
    name = _algorithm("allgather", algorithm, b.size, count, itemsize)
    order, sets = tuple(range(b.size)), tuple((r,) for r in range(b.size))
    for r in order:
        b.copy(r, (r,), "in", "out")
    if name == "bruck":
        bruck_allgather(b, order, sets)
    elif name == "recursive_doubling":
        doubling_allgather_fold(b, order, sets)
    else:
        ring_allgather(b, order, sets)
    return b.build(family=_FAMILY, algorithm=name)


# --------------------------------------------------------------------- alltoall
def alltoall(topology, *, count=1, itemsize=1, algorithm="auto"):
    """All-to-all: Bruck's (``ceil(log2 P)`` rounds, blocks forwarded through
    ``tmp``), ``"scattered"`` (every rank posts all its sends, rotated: rank ``i``
    to ``i+1, i+2, ...``, then all its receives) or the pairwise exchange
    (``P - 1`` rounds of one send and one receive).

    Examples
    --------
    >>> from wacoll import Topology
    >>> alltoall(Topology.single(5), algorithm="bruck").prove().messages  # 5 x 3
    15
    >>> [str(s) for s in alltoall(Topology.single(4), algorithm="pairwise").programs[1]]
    ['copy [5] in -> out', 'send 0 [4] from in', 'recv 0 [1]', 'send 3 [7] from in', 'recv 3 [13]', 'send 2 [6] from in', 'recv 2 [9]']
    """
    b = PlanBuilder("alltoall", topology, count=count, itemsize=itemsize)
    name = _algorithm("alltoall", algorithm, b.size, count, itemsize)
    if name == "bruck":
        bruck_alltoall(b)
    elif name == "pairwise":
        pairwise_alltoall(b)
    else:
        flat_alltoall(b, order="rotated")
    return b.build(family=_FAMILY, algorithm=name)


# ------------------------------------------------------------------ reductions
def allreduce(topology, *, count=1, segments=1, level=None, itemsize=1, algorithm="auto"):
    """Allreduce by recursive doubling, Rabenseifner's algorithm or the ring.

    Levels: ``"recursive_doubling"`` and ``"rabenseifner"`` keep ``"associative"``
    at every ``P`` and ``"strict"`` on ``2**a * (2**b - 1)`` ranks; ``"ring"`` keeps
    ``"commutative"`` only (see the module docstring). Blocks: recursive doubling
    sends the whole vector in each message; Rabenseifner's algorithm cuts it into
    ``segments`` rounded up to a multiple of ``p`` (the largest power of two
    ``<= P``) and the ring into a multiple of ``P``, so that every owner gets an
    equal share.

    Examples
    --------
    >>> from wacoll import Topology
    >>> report = allreduce(Topology.single(8), algorithm="recursive_doubling").prove()
    >>> report.level, report.messages  # strict: 8 ranks, 3 rounds
    ('strict', 24)
    >>> allreduce(Topology.single(5), level="strict", algorithm="recursive_doubling")
    Traceback (most recent call last):
    ...
    wacoll.errors.PlanError: the recursive_doubling allreduce on 5 ranks folds ranks 0..1 in pairs first (MPICH), which is not the canonical expression of level 'strict' on 5 ranks (it is on 2**a * (2**b - 1) ranks); use level 'associative', or the mpich family's algorithm='halving', strict at every size
    """
    level = "strict" if level is None else level
    name = _algorithm("allreduce", algorithm, topology.size, count, itemsize, level)
    size = topology.size
    parts = {"rabenseifner": largest_power_of_two(size), "ring": size}.get(name, 1)
    b = PlanBuilder(
        "allreduce",
        topology,
        count=count,
        level=level,
        itemsize=itemsize,
        segments=round_segments(segments, parts),
    )
    if name == "recursive_doubling":
        recursive_doubling_allreduce(b, b.all_blocks, ordered=level != "commutative")
    elif name == "rabenseifner":
        rabenseifner_allreduce(b, b.all_blocks)
    else:
        ring_allreduce(b, chunks_of(b.all_blocks, size))
    return b.build(family=_FAMILY, algorithm=name, segments=segments)


def reduce(
    topology, *, root=0, count=1, segments=1, level=None, itemsize=1, algorithm="auto"
):
    """Reduce to ``root`` by the binomial tree or Rabenseifner's algorithm.

    ``"binomial"`` is MPICH's binomial reduce, unchanged since MPICH 1.1 (the
    ``mpich`` family's plan, relabelled): pipelined in ``segments``, rooted at the
    root at level ``"commutative"`` and at rank 0 (which then sends the result to
    the root) otherwise; every level. ``"rabenseifner"``: MPICH's fold (the odd
    rank of a pair sits out), the reduce-scatter of :func:`allreduce`'s, then a
    binomial gather to the root; levels as the allreduce's.

    Examples
    --------
    >>> from wacoll import Topology
    >>> plan = reduce(Topology.single(4), root=3, count=8, algorithm="rabenseifner")
    >>> for step in plan.programs[3]:
    ...     print(step)
    send 2 [0,1] from in
    recv 2 [2,3] into acc1
    combine [2,3] in -> acc1
    send 1 [2] from acc1
    recv 1 [3] into part
    combine [3] acc1 -> part
    copy [3] part -> out
    recv 1 [2]
    recv 2 [0,1]
    """
    level = "strict" if level is None else level
    size = topology.size
    name = _algorithm("reduce", algorithm, size, count, itemsize, level)
    if name == "binomial":
        plan = _mpich.reduce(
            topology,
            root=root,
            count=count,
            segments=segments,
            level=level,
            itemsize=itemsize,
            algorithm="binomial",
        )
        return _relabel(plan, name, segments=segments)
    b = PlanBuilder(
        "reduce",
        topology,
        root=root,
        count=count,
        level=level,
        itemsize=itemsize,
        segments=round_segments(segments, largest_power_of_two(size)),
    )
    rabenseifner_reduce(b, b.all_blocks, b.root)
    return b.build(family=_FAMILY, algorithm=name, segments=segments)


BUILDERS = {
    "barrier": barrier,
    "bcast": bcast,
    "allgather": allgather,
    "alltoall": alltoall,
    "allreduce": allreduce,
    "reduce": reduce,
}

#: The keyword options each builder takes, in its signature's order: what
#: :func:`wacoll.plans.families.options` reports and :func:`wacoll.plans.build` accepts.
OPTIONS = {
    "barrier": ("itemsize", "algorithm"),
    "bcast": ("root", "count", "segments", "itemsize", "algorithm", "radix"),
    "allgather": ("count", "itemsize", "algorithm"),
    "alltoall": ("count", "itemsize", "algorithm"),
    "allreduce": ("count", "segments", "level", "itemsize", "algorithm"),
    "reduce": ("root", "count", "segments", "level", "itemsize", "algorithm"),
}
