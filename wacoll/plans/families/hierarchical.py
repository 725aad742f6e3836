"""The **hierarchical** family: one family inside each cluster, one between coordinators.

MagPIe (Kielmann et al., PPoPP 1999) builds every wide-area collective from two
levels: a tree inside each cluster and a flat tree between the clusters'
*coordinators*. MPICH's hierarchical collectives (``MPIR_*_intra_smp``) and Open
MPI's HAN (Luo et al., CLUSTER 2020) compose the same way from per-level
collectives on sub-communicators. This family keeps the two levels but lets each
be any flat algorithm wacoll has: for example the modern family's recursive
doubling between 16 coordinators and a k-nomial tree inside each cluster, so that
the wide-area algorithms of the papers and the flat ones of today's libraries
meet. Unlike :mod:`wacoll.plans.composite` (the MPI library's own collective inside
clusters, which wacoll cannot see), every level here is a wacoll plan, and the
composite is **one plan**, proved as a whole by :func:`wacoll.plans.prove.prove_plan`.

==========  ===============================================================
operation   phases (``inner``: in every cluster, ``outer``: coordinators)
==========  ===============================================================
barrier     inner barrier ; outer barrier ; inner barrier (the release)
bcast       outer bcast from the root ; inner bcast from each coordinator
reduce      inner reduce to each coordinator ; outer reduce to the root
allreduce   inner reduce ; outer allreduce ; inner bcast
allgather   inner gather ; outer allgather of the clusters' blocks ; inner
            bcast of the whole vector
==========  ===============================================================

Each phase is built by its family's own builder on a sub-topology: one cluster
(:meth:`wacoll.Topology.restrict` to its ranks) for an inner phase, the
coordinators (each in a cluster of its own, with the wide-area links between
them) for the outer one. Its ranks, blocks and buffers are then mapped into the
whole plan: sub-rank ``i`` is the ``i``-th rank of the cluster (or the coordinator
of cluster ``i``), a cluster's partial result lives in buffer ``part``, and each
phase's scratch buffers get a prefix of their own (``h0_``, ``h1_``, ...). Where the
phases cut the vector into different segments (a builder may round ``segments``
up to a multiple of its ranks), the plan's blocks are the common refinement of
their cuts. The coordinators are :meth:`wacoll.Topology.coordinators`: each
cluster's lowest rank, and in a rooted operation the root for its own cluster
(MagPIe's rule), so a root that is not its cluster's lowest rank gathers its
cluster's partial itself. A phase of one rank is left out (a cluster of one rank
needs no inner reduce; one cluster needs no outer phase).

Options (every builder): ``inner`` and ``outer`` name the families
(:data:`PARTS`; defaults ``"magpie"`` inside clusters, MagPIe's binary trees, and
``"modern"`` between coordinators, MPICH 4's choice by size); ``inner_algorithm``
and ``outer_algorithm`` are passed as the phases' ``algorithm`` option (``None``:
the family's default; a string: every phase of that level; ``(("bcast",
"knomial"), ("reduce", "binomial"))``: per operation); ``inner_options`` and
``outer_options`` are more options, as ``(name, value)`` pairs (or a mapping), each
passed to the phases of its level whose builders take it (so that one set serves
every operation, as a communicator's options do), and refused if no builder of
that family takes it.

Reduction levels: the composite keeps the level asked for only if every part does
(each part is built at that level and refuses what it cannot keep) and the
composition does: partial results are combined in cluster order, which is rank
order only when every cluster is a contiguous range of ranks (else level
``"commutative"`` only, as MagPIe's coordinator algorithms), and level
``"strict"`` needs the canonical expression of all ranks to be the canonical
expression of the clusters' canonical expressions (:func:`composes_canonically`:
true for one cluster, for clusters of one rank, for clusters of ``2**k`` ranks
each, ...). Elsewhere the builder raises :class:`~wacoll.errors.PlanError`.

Every phase runs to its end on a rank before the next starts: a coordinator does
not forward a segment into its cluster while it still receives the next one over
the wide area (MagPIe's broadcast does). The plan is priced by the simulator like
any other (:mod:`wacoll.plans.sim`). The selection policy
(:mod:`wacoll.plans.select`) prices a few pairs against MagPIe's plan for large
broadcasts, allreduces and allgathers when :attr:`Policy.hierarchical_from
<wacoll.plans.select.Policy.hierarchical_from>` asks it to (off by default: the
pricing builds every candidate); otherwise ask for the family by name.

Examples
--------
>>> from wacoll import Topology
>>> topo = Topology.from_sizes([4, 4, 4, 4])
>>> plan = allreduce(topo, count=64, level="associative", inner="modern",
...                  inner_algorithm="binomial", outer_algorithm="recursive_doubling")
>>> plan.algorithm
'inner:modern/binomial+outer:modern/recursive_doubling+inner:modern/binomial'
>>> report = plan.prove()
>>> report.level, report.wide_area_messages, report.max_wide_area_hops
('associative', 8, 2)
>>> bcast(Topology.from_sizes([3, 3]), root=4).prove().wide_area_messages
1
"""

from __future__ import annotations

from collections.abc import Mapping

from wacoll.errors import PlanError
from wacoll.plans.builder import PlanBuilder, focus
from wacoll.plans.families import gridmpi, magpie, modern, mpich, tree
from wacoll.plans.operations import LEVELS
from wacoll.plans.plan import Step

__all__ = [
    "FAMILY",
    "PARTS",
    "PHASES",
    "composes_canonically",
    "barrier",
    "bcast",
    "reduce",
    "allreduce",
    "allgather",
    "BUILDERS",
    "OPTIONS",
]

FAMILY = "hierarchical"

#: The families a hierarchical plan composes, by name (the registry's names).
PARTS = {
    "gridmpi": gridmpi,
    "magpie": magpie,
    "modern": modern,
    "mpich": mpich,
    "tree": tree,
}

#: The phases of each operation, in order: (the phase's operation, its level).
PHASES = {
    "barrier": (("barrier", "inner"), ("barrier", "outer"), ("barrier", "inner")),
    "bcast": (("bcast", "outer"), ("bcast", "inner")),
    "reduce": (("reduce", "inner"), ("reduce", "outer")),
    "allreduce": (("reduce", "inner"), ("allreduce", "outer"), ("bcast", "inner")),
    "allgather": (("gather", "inner"), ("allgather", "outer"), ("bcast", "inner")),
}

#: Options the composite sets on its parts (not the user's to give per level).
_LAYOUT = ("root", "count", "counts", "segments", "level", "itemsize")
#: The buffer holding a cluster's partial result at its coordinator.
_PART = "part"
#: Arrival-order groups of phase ``k`` are renumbered from ``k * _GROUPS``.
_GROUPS = 1 << 16


# ------------------------------------------------------------------ the levels
def _pairs(value, what):
    """``value`` (a mapping or ``(name, value)`` pairs) as sorted pairs."""
    if value is None:
        return ()
    items = value.items() if isinstance(value, Mapping) else value
    try:
        pairs = [tuple(item) for item in items]
    except TypeError:
        raise PlanError(
            f"{what} must be (name, value) pairs or a mapping, got {value!r}"
        ) from None
    if any(len(p) != 2 or not isinstance(p[0], str) for p in pairs):
        raise PlanError(f"{what} must be (name, value) pairs or a mapping, got {value!r}")
    names = [p[0] for p in pairs]
    if len(set(names)) != len(names):
        raise PlanError(f"{what} names an option twice")
    return tuple(sorted(pairs))


class _Level:
    """One level's family, algorithm and options, checked, for the phases of ``op``."""

    def __init__(self, op, name, family, algorithm, options):
        self.name = name
        if family == FAMILY:
            raise PlanError(
                f"a hierarchical plan composes flat families; its {name} "
                f"family cannot be {FAMILY!r}"
            )
        if not isinstance(family, str) or family not in PARTS:
            raise PlanError(
                f"{name} must be one of {', '.join(sorted(PARTS))}, got {family!r}"
            )
        self.family, self.module = family, PARTS[family]
        self.ops = tuple(sorted({o for o, lv in PHASES[op] if lv == name}))
        for o in self.ops:
            if o not in self.module.BUILDERS:
                raise PlanError(
                    f"the hierarchical {op} needs the {name} family's {o} "
                    f"plan; the {family} family has none (it builds "
                    f"{', '.join(sorted(self.module.BUILDERS))})"
                )
        if algorithm is None or isinstance(algorithm, str):
            self.algorithm = algorithm
        else:
            self.algorithm = _pairs(algorithm, f"{name}_algorithm")
            for o, alg in self.algorithm:
                if o not in self.ops:
                    raise PlanError(
                        f"{name}_algorithm names {o!r}, which is not "
                        f"among the {name} phases of the hierarchical {op} "
                        f"({', '.join(self.ops)})"
                    )
                if not isinstance(alg, str):
                    raise PlanError(
                        f"{name}_algorithm for {o} must be a string, got {alg!r}"
                    )
        self.options = _pairs(options, f"{name}_options")
        for key, _ in self.options:
            if key in _LAYOUT or key == "algorithm":
                which = f"{name}_algorithm" if key == "algorithm" else "the composite"
                raise PlanError(f"{name}_options may not set {key!r}: {which} sets it")
            if not any(key in taken for taken in self.module.OPTIONS.values()):
                raise PlanError(
                    f"{name}_options: the {family} family takes no option "
                    f"{key!r} for any operation"
                )

    def kwargs(self, op, **layout):
        """The builder options of this level's ``op`` phase."""
        taken = self.module.OPTIONS[op]
        kwargs = {k: v for k, v in layout.items() if k in taken}
        algorithm = (
            self.algorithm
            if isinstance(self.algorithm, str) or self.algorithm is None
            else dict(self.algorithm).get(op)
        )
        if algorithm is not None:
            if "algorithm" not in taken:
                raise PlanError(
                    f"the {self.family} family's {op} takes no algorithm "
                    f"option; {self.name}_algorithm={algorithm!r} cannot "
                    f"apply to it"
                )
            kwargs["algorithm"] = algorithm
        kwargs.update((k, v) for k, v in self.options if k in taken)
        return kwargs

    def params(self):
        """This level's options as the plan records them."""
        return {
            self.name: self.family,
            f"{self.name}_algorithm": self.algorithm,
            f"{self.name}_options": self.options,
        }


# ------------------------------------------------------------------ the levels' order
def _canonical(leaves):
    """The canonical expression (binomial tree at the first leaf) as nested pairs."""
    acc = list(leaves)
    mask = 1
    while mask < len(acc):
        for v in range(0, len(acc) - mask, 2 * mask):
            acc[v] = (acc[v], acc[v + mask])
        mask *= 2
    return acc[0]


def composes_canonically(topology) -> bool:
    """Whether canonical reductions inside each cluster, then between the clusters
    in cluster order, give the canonical expression of all ranks (level strict).

    Examples
    --------
    >>> from wacoll import Topology
    >>> [composes_canonically(Topology.from_sizes(s)) for s in ([4, 4], [4, 2], [2, 4],
    ...                                                          [3, 3], [1, 1, 1], [5])]
    [True, True, False, False, True, True]
    """
    ranks = range(topology.size)
    return _canonical(ranks) == _canonical([_canonical(m) for m in topology.clusters])


def _validate_level(op, topology, level):
    """Raise unless the composition keeps ``level`` (the parts check their own)."""
    if level not in LEVELS:
        raise PlanError(
            f"level must be one of {', '.join(map(repr, LEVELS))}, got {level!r}"
        )
    if level == "commutative" or topology.nclusters == 1:
        return
    if not topology.is_contiguous:
        raise PlanError(
            f"the hierarchical {op} combines the clusters' partial results "
            f"in cluster order, which is not rank order on a reordered "
            f"communicator: it keeps level 'commutative' there, not "
            f"{level!r}"
        )
    if level == "strict" and not composes_canonically(topology):
        sizes = [len(m) for m in topology.clusters]
        raise PlanError(
            f"the hierarchical {op} on clusters of {sizes} ranks combines "
            f"the clusters' canonical expressions, which is not the canonical "
            f"expression of level 'strict' on {topology.size} ranks (it is "
            f"on one cluster, or clusters of 2**k ranks each); use level "
            f"'associative'"
        )


# ------------------------------------------------------------------ the parts
class _Part:
    """One sub-plan and how it maps into the whole: its ranks (sub-rank -> rank), its
    blocks (sub-block -> blocks; None: the same ids, or the layout's refinement),
    its buffers (``bufs(sub_rank, name)``) and its phase number.

    ``own``: block ``r`` is rank ``r``'s own (an allgather's broadcast phase): a
    message to rank ``r`` leaves block ``r`` out, and every rank but the sub-plan's
    first copies its block from ``in`` to ``out`` first, to forward it from there.
    """

    def __init__(self, plan, ranks, phase, bufs, blocks=None, own=False):
        self.plan, self.ranks, self.phase = plan, ranks, phase
        self.bufs, self.blocks, self.own = bufs, blocks, own

    @property
    def name(self):
        return f"{self.plan.family}/{self.plan.algorithm}"

    def program(self, i):
        plan = self.plan
        held = getattr(plan, "program", None)
        if held is not None:  # a focused build: only its rank's program
            return held if plan.rank == i else ()
        return plan.programs[i]


def _sub(part_level, op, topology, local, focused, **layout):
    """Build ``part_level``'s ``op`` on ``topology``; focused on sub-rank ``local`` (or
    its rank 0) when the whole builder is focused."""
    fn = part_level.module.BUILDERS[op]
    kwargs = part_level.kwargs(op, **layout)
    if not focused:
        return fn(topology, **kwargs)
    with focus(0 if local is None else local):
        return fn(topology, **kwargs)


def _local(members, rank):
    """The sub-rank of ``rank`` in ``members`` (None if it is not one)."""
    try:
        return members.index(rank)
    except ValueError:
        return None


def _scratch(phase):
    """The buffer map of a phase that only renames its scratch buffers."""
    prefix = f"h{phase}_"

    def bufs(i, name, prefix=prefix):
        return name if name in ("in", "out") else prefix + name

    return bufs


def _renamed(phase, names):
    """A buffer map: ``names(i)`` maps some names at sub-rank ``i``; scratch prefixed."""
    scratch = _scratch(phase)

    def bufs(i, name):
        mapped = names(i).get(name)
        return scratch(i, name) if mapped is None else mapped

    return bufs


def _refine(layouts):
    """The common refinement of block layouts of one vector: its counts, and for each
    layout the blocks each of its blocks covers (None where a layout is the result)."""
    distinct = sorted(set(layouts), key=layouts.index)
    if len(distinct) == 1:
        return distinct[0], {distinct[0]: None}
    total = sum(distinct[0])
    if total == 0:  # every block empty: one block, which each layout's first carries
        return (0,), {lay: ((0,),) + ((),) * (len(lay) - 1) for lay in distinct}
    cuts = {0, total}
    for lay in distinct:
        at = 0
        for c in lay:
            at += c
            cuts.add(at)
    cuts = sorted(cuts)
    index = {at: i for i, at in enumerate(cuts)}
    counts = tuple(b - a for a, b in zip(cuts, cuts[1:]))
    maps = {}
    for lay in distinct:
        at, cover = 0, []
        for c in lay:
            cover.append(tuple(range(index[at], index[at + c])))
            at += c
        maps[lay] = tuple(cover)
    return counts, maps


def _emit(b, part):
    """Append ``part``'s steps, mapped, to the programs of the ranks ``b`` keeps."""
    ranks, bufs, bmap = part.ranks, part.bufs, part.blocks
    offset = part.phase * _GROUPS
    for i, rank in enumerate(ranks):
        if not b.keeps(rank):
            continue
        out = b.programs[rank]
        if part.own and i:
            out.append(Step("copy", (rank,), src="in", dst="out"))
        cache = {}
        for step in part.program(i):
            blocks = step.blocks
            if bmap is not None:
                mapped = cache.get(blocks)
                if mapped is None:
                    mapped = cache[blocks] = tuple(x for k in blocks for x in bmap[k])
                if part.own and step.peer is not None:
                    # the receiver of a message holds its own block already
                    other = rank if step.kind != "send" else ranks[step.peer]
                    mapped = tuple(x for x in mapped if x != other)
                if not mapped and blocks:
                    continue  # a segment the refinement left empty: nothing to move
                blocks = mapped
            src = None if step.src is None else bufs(i, step.src)
            dst = None if step.dst is None else bufs(i, step.dst)
            if step.kind == "copy" and src == dst:
                continue  # the data is where the phase wants it already
            if step.group >= _GROUPS:
                raise PlanError(
                    f"a {part.name} step has an arrival-order group "
                    f"{step.group}, too large to renumber"
                )
            out.append(
                Step(
                    step.kind,
                    blocks,
                    peer=None if step.peer is None else ranks[step.peer],
                    src=src,
                    dst=dst,
                    side=step.side,
                    group=step.group + offset if step.group else 0,
                )
            )


def _algorithm(parts):
    """The plan's name: each phase's level and its parts' family/algorithm names."""
    names = []
    for level, phase in parts:
        if phase:
            names.append(f"{level}:" + "|".join(sorted({p.name for p in phase})))
    return "+".join(names) or "local"


def _finish(b, levels, parts, **params):
    for _, phase in parts:
        for part in phase:
            _emit(b, part)
    for level in levels:
        params.update(level.params())
    return b.build(family=FAMILY, algorithm=_algorithm(parts), **params)


def _levels(
    op, inner, inner_algorithm, inner_options, outer, outer_algorithm, outer_options
):
    return (
        _Level(op, "inner", inner, inner_algorithm, inner_options),
        _Level(op, "outer", outer, outer_algorithm, outer_options),
    )


# ------------------------------------------------------------------ segmented vectors
def _segmented(op, topology, *, root, count, segments, level, itemsize, inner, outer):
    """bcast, reduce and allreduce: their parts on one segmented vector."""
    b = PlanBuilder(
        op,
        topology,
        root=root,
        count=count,
        segments=segments,
        level=level,
        itemsize=itemsize,
    )
    if b.level is not None:
        _validate_level(op, topology, b.level)
    focused = b.focus is not None
    clusters = topology.clusters
    coords = topology.coordinators(b.root)
    home = None if b.root is None else topology.cluster_of(b.root)
    many = len(clusters) > 1
    layout = dict(count=count, segments=segments, itemsize=itemsize, level=b.level)
    outer_topo = topology.restrict(coords) if many else None

    def inner_parts(sub_op, phase, bufs_of, skip_single):
        built = []
        for c, members in enumerate(clusters):
            if skip_single and len(members) == 1:
                continue
            coord = members.index(coords[c])
            kwargs = dict(layout)
            if sub_op != "allreduce":
                kwargs["root"] = coord
            plan = _sub(
                inner,
                sub_op,
                topology.restrict(members),
                _local(members, b.focus),
                focused,
                **kwargs,
            )
            built.append(_Part(plan, members, phase, bufs_of(c, coord)))
        return built

    def outer_part(sub_op, phase, bufs):
        kwargs = dict(layout)
        if sub_op != "allreduce":
            kwargs["root"] = home if home is not None else 0
        plan = _sub(outer, sub_op, outer_topo, _local(coords, b.focus), focused, **kwargs)
        return [_Part(plan, coords, phase, bufs)]

    def partial(c):  # where cluster c's partial result is at its coordinator
        return "in" if len(clusters[c]) == 1 else _PART

    parts = []
    if op == "bcast":
        if many:
            parts.append(("outer", outer_part("bcast", 0, _scratch(0))))
        parts.append(("inner", inner_parts("bcast", 1, lambda c, k: _scratch(1), True)))
    else:  # reduce, allreduce: the clusters' partials first

        def up(c, coord):
            into = _PART if many else "out"
            return _renamed(0, lambda i: {"out": into if i == coord else "h0_out"})

        parts.append(("inner", inner_parts("reduce", 0, up, many)))
        if many:
            parts.append(
                ("outer", outer_part(op, 1, _renamed(1, lambda i: {"in": partial(i)})))
            )
        if op == "allreduce":
            parts.append(
                ("inner", inner_parts("bcast", 2, lambda c, k: _scratch(2), True))
            )
    layouts = [p.plan.counts for _, phase in parts for p in phase]
    if layouts:
        counts, maps = _refine(layouts)
        b.counts = counts
        for _, phase in parts:
            for p in phase:
                p.blocks = maps[p.plan.counts]
    return _finish(b, (inner, outer), parts, segments=segments)


def bcast(
    topology,
    *,
    root=0,
    count=1,
    segments=1,
    itemsize=1,
    inner="magpie",
    inner_algorithm=None,
    inner_options=(),
    outer="modern",
    outer_algorithm=None,
    outer_options=(),
):
    """Broadcast: ``outer`` from the root to the other clusters' coordinators, then
    ``inner`` from each coordinator (the root in its own cluster) to its cluster.

    Examples
    --------
    >>> from wacoll import Topology
    >>> plan = bcast(Topology.from_sizes([2, 2, 2]), root=3, outer_algorithm="binomial")
    >>> plan.algorithm
    'outer:modern/binomial+inner:magpie/coordinator'
    >>> [str(s) for s in plan.programs[3]]
    ['send 0 [0]', 'send 4 [0]', 'send 2 [0]']
    >>> [str(s) for s in plan.programs[4]]
    ['recv 3 [0]', 'send 5 [0]']
    """
    inner, outer = _levels(
        "bcast",
        inner,
        inner_algorithm,
        inner_options,
        outer,
        outer_algorithm,
        outer_options,
    )
    return _segmented(
        "bcast",
        topology,
        root=root,
        count=count,
        segments=segments,
        level=None,
        itemsize=itemsize,
        inner=inner,
        outer=outer,
    )


def reduce(
    topology,
    *,
    root=0,
    count=1,
    segments=1,
    level=None,
    itemsize=1,
    inner="magpie",
    inner_algorithm=None,
    inner_options=(),
    outer="modern",
    outer_algorithm=None,
    outer_options=(),
):
    """Reduce: ``inner`` to each cluster's coordinator (the root in its own cluster,
    as in MagPIe), then ``outer`` from the coordinators to the root.

    Examples
    --------
    >>> from wacoll import Topology
    >>> plan = reduce(Topology.from_sizes([2, 2]), root=3, level="commutative",
    ...               inner="modern")
    >>> for step in plan.programs[3]:
    ...     print(step)
    copy [0] in -> part
    recv-combine 2 [0] into part
    copy [0] part -> out
    recv-combine 0 [0] into out
    >>> reduce(Topology.from_clusters([[0, 2], [1, 3]]), level="associative")
    Traceback (most recent call last):
    ...
    wacoll.errors.PlanError: the hierarchical reduce combines the clusters' partial results in cluster order, which is not rank order on a reordered communicator: it keeps level 'commutative' there, not 'associative'
    """
    inner, outer = _levels(
        "reduce",
        inner,
        inner_algorithm,
        inner_options,
        outer,
        outer_algorithm,
        outer_options,
    )
    return _segmented(
        "reduce",
        topology,
        root=root,
        count=count,
        segments=segments,
        level=level,
        itemsize=itemsize,
        inner=inner,
        outer=outer,
    )


def allreduce(
    topology,
    *,
    count=1,
    segments=1,
    level=None,
    itemsize=1,
    inner="magpie",
    inner_algorithm=None,
    inner_options=(),
    outer="modern",
    outer_algorithm=None,
    outer_options=(),
):
    """Allreduce: ``inner`` reduce to each coordinator, ``outer`` allreduce between
    the coordinators, ``inner`` bcast from each coordinator.

    Examples
    --------
    >>> from wacoll import Topology
    >>> topo = Topology.from_sizes([2, 2, 2, 2])
    >>> plan = allreduce(topo, level="strict", inner="mpich")
    >>> plan.algorithm, plan.prove().level
    ('inner:mpich/binomial+outer:modern/recursive_doubling+inner:mpich/binomial', 'strict')
    >>> allreduce(Topology.from_sizes([3, 3]), level="strict")
    Traceback (most recent call last):
    ...
    wacoll.errors.PlanError: the hierarchical allreduce on clusters of [3, 3] ranks combines the clusters' canonical expressions, which is not the canonical expression of level 'strict' on 6 ranks (it is on one cluster, or clusters of 2**k ranks each); use level 'associative'
    """
    inner, outer = _levels(
        "allreduce",
        inner,
        inner_algorithm,
        inner_options,
        outer,
        outer_algorithm,
        outer_options,
    )
    return _segmented(
        "allreduce",
        topology,
        root=None,
        count=count,
        segments=segments,
        level=level,
        itemsize=itemsize,
        inner=inner,
        outer=outer,
    )


# ------------------------------------------------------------------ allgather
def allgather(
    topology,
    *,
    count=1,
    itemsize=1,
    inner="magpie",
    inner_algorithm=None,
    inner_options=(),
    outer="modern",
    outer_algorithm=None,
    outer_options=(),
):
    """Allgather: ``inner`` gather to each coordinator, ``outer`` allgather of the
    clusters' blocks between the coordinators, ``inner`` bcast of the whole vector.

    The outer phase's block ``c`` is cluster ``c``'s ranks' blocks; the inner
    broadcast's vector is the plan's blocks in rank order, one element per block
    (its segments are runs of blocks). The outer and inner builders choose by
    the bytes they move (``count * itemsize`` per rank, times the largest
    cluster's ranks for a coordinator's block).

    Examples
    --------
    >>> from wacoll import Topology
    >>> plan = allgather(Topology.from_sizes([2, 2]))
    >>> [str(s) for s in plan.programs[0]]
    ['copy [0] in -> out', 'recv 1 [1]', 'send 2 [0,1]', 'recv 2 [2,3]', 'send 1 [0,2,3]']
    >>> plan.prove().wide_area_messages
    2
    """
    inner, outer = _levels(
        "allgather",
        inner,
        inner_algorithm,
        inner_options,
        outer,
        outer_algorithm,
        outer_options,
    )
    b = PlanBuilder("allgather", topology, count=count, itemsize=itemsize)
    focused = b.focus is not None
    clusters = topology.clusters
    coords = topology.coordinators()
    widest = max(len(m) for m in clusters)
    parts = [("inner", []), ("outer", []), ("inner", [])]
    for _c, members in enumerate(clusters):
        plan = _sub(
            inner,
            "gather",
            topology.restrict(members),
            _local(members, b.focus),
            focused,
            root=0,
            count=count,
            itemsize=itemsize,
        )
        parts[0][1].append(
            _Part(
                plan,
                members,
                0,
                _renamed(0, lambda i: {"out": "out" if i == 0 else "h0_out"}),
                blocks=tuple((r,) for r in members),
            )
        )
    if len(clusters) > 1:
        plan = _sub(
            outer,
            "allgather",
            topology.restrict(coords),
            _local(coords, b.focus),
            focused,
            count=count * widest,
            itemsize=itemsize,
        )
        parts[1][1].append(
            _Part(plan, coords, 1, _renamed(1, lambda i: {"in": "out"}), blocks=clusters)
        )
    whole = b.size
    for _c, members in enumerate(clusters):
        if len(members) == 1:
            continue
        plan = _sub(
            inner,
            "bcast",
            topology.restrict(members),
            _local(members, b.focus),
            focused,
            root=0,
            count=whole,
            segments=1,
            itemsize=max(1, count * itemsize),
        )
        runs, at = [], 0
        for n in plan.counts:
            runs.append(tuple(range(at, at + n)))
            at += n
        parts[2][1].append(
            _Part(plan, members, 2, _scratch(2), blocks=tuple(runs), own=True)
        )
    return _finish(b, (inner, outer), parts)


# ------------------------------------------------------------------ barrier
def barrier(
    topology,
    *,
    itemsize=1,
    inner="magpie",
    inner_algorithm=None,
    inner_options=(),
    outer="modern",
    outer_algorithm=None,
    outer_options=(),
):
    """Barrier: ``inner`` in every cluster (its coordinator learns that the cluster
    has arrived), ``outer`` between the coordinators, ``inner`` again (the release).

    Examples
    --------
    >>> from wacoll import Topology
    >>> report = barrier(Topology.from_sizes([3, 3, 3])).prove()
    >>> report.wide_area_messages, report.max_wide_area_hops
    (6, 1)
    """
    inner, outer = _levels(
        "barrier",
        inner,
        inner_algorithm,
        inner_options,
        outer,
        outer_algorithm,
        outer_options,
    )
    b = PlanBuilder("barrier", topology, itemsize=itemsize)
    focused = b.focus is not None
    clusters = topology.clusters
    coords = topology.coordinators()

    local = [
        (
            _sub(
                inner,
                "barrier",
                topology.restrict(members),
                _local(members, b.focus),
                focused,
                itemsize=itemsize,
            ),
            members,
        )
        for members in clusters
        if len(members) > 1
    ]  # (run twice: arrival, release)
    parts = [
        ("inner", [_Part(plan, members, 0, _scratch(0)) for plan, members in local]),
        ("outer", []),
        ("inner", [_Part(plan, members, 2, _scratch(2)) for plan, members in local]),
    ]
    if len(clusters) > 1:
        plan = _sub(
            outer,
            "barrier",
            topology.restrict(coords),
            _local(coords, b.focus),
            focused,
            itemsize=itemsize,
        )
        parts[1][1].append(_Part(plan, coords, 1, _scratch(1)))
    return _finish(b, (inner, outer), parts)


BUILDERS = {
    "barrier": barrier,
    "bcast": bcast,
    "reduce": reduce,
    "allreduce": allreduce,
    "allgather": allgather,
}

_LEVEL_OPTIONS = (
    "inner",
    "inner_algorithm",
    "inner_options",
    "outer",
    "outer_algorithm",
    "outer_options",
)

#: The keyword options each builder takes, in its signature's order: what
#: :func:`wacoll.plans.families.options` reports and :func:`wacoll.plans.build` accepts.
OPTIONS = {
    "barrier": ("itemsize",) + _LEVEL_OPTIONS,
    "bcast": ("root", "count", "segments", "itemsize") + _LEVEL_OPTIONS,
    "reduce": ("root", "count", "segments", "level", "itemsize") + _LEVEL_OPTIONS,
    "allreduce": ("count", "segments", "level", "itemsize") + _LEVEL_OPTIONS,
    "allgather": ("count", "itemsize") + _LEVEL_OPTIONS,
}
