"""Composed plans: the MPI library's collectives inside clusters, a plan between them.

Open MPI's HAN builds a hierarchical collective from per-level collectives on
sub-communicators. A :class:`Composite` does the same with wacoll's levels: its
*library phases* are the MPI library's own collective on every cluster (a
sub-communicator per cluster, ranks in rank order, rooted at the cluster's
coordinator), and its *plan phase* is a wacoll plan over the coordinators alone
(MagPIe's wide-area optimal plan on the coordinators' topology, proved by
:func:`wacoll.plans.prove.prove_plan`). Inside a cluster the network is uniform and
the library's tuned C is hard to beat; between clusters wacoll's plan sends each item
across the wide area once.

========== ========================================================================
operation  phases
========== ========================================================================
barrier    library barrier ; plan barrier over coordinators ; library barrier
bcast      plan bcast from the root to the coordinators ; library bcast
reduce     library reduce to the coordinators ; plan reduce to the root
allreduce  library reduce to the coordinators ; plan allreduce ; library bcast
========== ========================================================================

The root of a rooted operation is its cluster's coordinator
(:meth:`wacoll.Topology.coordinators`). The MPI library may combine a predefined
operator in any order, so a composite reduction keeps level ``"commutative"``
(MPI's own promise) and no stronger one.

:meth:`Composite.prove` proves the whole: it runs the phases on symbolic values
(the set of ranks whose contribution a buffer holds; for a barrier, the set of ranks
known to have entered), with each library phase's MPI semantics and the plan
phase's proved result, and requires every contribution to be combined exactly once
and every rank to end with what the operation promises.

Examples
--------
>>> from wacoll import Topology
>>> topo = Topology.from_sizes([4, 4, 4], wan_latency=0.01, wan_bandwidth=1e6)
>>> c = compose("allreduce", topo, count=1024, itemsize=8)
>>> print(c.describe())
allreduce on 12 ranks, level commutative (han: library reduce ; magpie/coordinator ; library bcast)
  library reduce in every cluster to its coordinator (0, 4, 8): in -> acc
  plan over ranks (0, 4, 8): magpie/coordinator allreduce, acc -> out, 6 wide-area messages
  library bcast in every cluster from its coordinator (0, 4, 8): out
>>> report = c.prove()
>>> report.level, report.wide_area_messages, report.library_phases
('commutative', 6, 2)
"""

from __future__ import annotations

from dataclasses import dataclass

from wacoll.errors import PlanError
from wacoll.plans.families import build
from wacoll.plans.operations import spec

__all__ = [
    "HAN",
    "HAN_OPS",
    "LibraryPhase",
    "PlanPhase",
    "Composite",
    "CompositeReport",
    "compose",
]

#: The pseudo-family of composed plans.
HAN = "han"
#: The operations a composite runs.
HAN_OPS = ("barrier", "bcast", "reduce", "allreduce")


@dataclass(frozen=True)
class LibraryPhase:
    """The MPI library's ``op`` (``"barrier"``, ``"bcast"`` or ``"reduce"``) on every
    cluster at once, rooted at ``roots[c]`` (a rank of cluster ``c``), from buffer
    ``src`` into ``dst`` (bcast: ``src == dst``, in place)."""

    op: str
    roots: tuple
    src: str | None = None
    dst: str | None = None

    def __str__(self):
        where = "in every cluster" + (
            f" to its coordinator {self.roots}"
            if self.op == "reduce"
            else f" from its coordinator {self.roots}"
            if self.op == "bcast"
            else ""
        )
        bufs = (
            ""
            if self.src is None
            else (
                f": {self.src}" if self.src == self.dst else f": {self.src} -> {self.dst}"
            )
        )
        return f"library {self.op} {where}{bufs}"


@dataclass(frozen=True)
class PlanPhase:
    """A proved plan over the coordinators: the plan's rank ``i`` is ``ranks[i]``; it
    reads buffer ``src`` (its ``"in"``) and writes ``dst`` (its ``"out"``)."""

    plan: object
    ranks: tuple
    src: str | None = None
    dst: str | None = None

    def __str__(self):
        report = self.plan.prove()
        bufs = (
            ""
            if self.dst is None
            else (f", {self.dst}" if self.src is None else f", {self.src} -> {self.dst}")
        )
        return (
            f"plan over ranks {self.ranks}: {self.plan.family}/{self.plan.algorithm} "
            f"{self.plan.op}{bufs}, {report.wide_area_messages} wide-area messages"
        )


@dataclass(frozen=True)
class CompositeReport:
    """What :meth:`Composite.prove` proved and counted."""

    level: str | None
    messages: int
    wide_area_messages: int
    wide_area_bytes: int
    library_phases: int
    arithmetic: str = "plain"


@dataclass(frozen=True)
class Composite:
    """A composed plan (see the module docstring). ``clusters`` lists each cluster's
    ranks; ``count`` is the vector's elements, ``itemsize`` their bytes."""

    op: str
    size: int
    root: int | None
    count: int
    itemsize: int
    level: str | None
    clusters: tuple
    phases: tuple
    family: str = HAN
    arithmetic: str = "plain"

    @property
    def algorithm(self) -> str:
        """The phases in a few words, e.g. ``library reduce ; magpie/flat``."""
        return " ; ".join(
            f"library {p.op}"
            if isinstance(p, LibraryPhase)
            else f"{p.plan.family}/{p.plan.algorithm}"
            for p in self.phases
        )

    def describe(self) -> str:
        """The phases, one per line."""
        level = f", level {self.level}" if self.level else ""
        head = f"{self.op} on {self.size} ranks{level} ({self.family}: {self.algorithm})"
        return "\n".join([head] + [f"  {p}" for p in self.phases])

    def prove(self) -> CompositeReport:
        """Prove the composite (see the module docstring); the plan phases are proved
        by the prover first.

        Raises
        ------
        PlanError
            Naming the phase at fault.
        """
        return _check(self)


def compose(
    op,
    topology,
    *,
    root=None,
    count=1,
    itemsize=1,
    level=None,
    segments=1,
    inter="magpie",
):
    """The composed plan of ``op`` on ``topology`` (see the module docstring).

    Parameters
    ----------
    op : {"barrier", "bcast", "reduce", "allreduce"}
    topology : Topology
    root : int, optional
        Root of bcast and reduce.
    count, itemsize, segments
        The vector, as the families take them (``segments`` pipelines the plan
        phase).
    level : {None, "commutative"}
        Reductions: only ``"commutative"`` (the default): the MPI library may
        reorder.
    inter : str
        The family of the plan between coordinators.

    Raises
    ------
    PlanError
        An operation without a composite, a level it cannot keep, or a plan phase
        the family cannot build.
    """
    s = spec(op)
    if op not in HAN_OPS:
        raise PlanError(f"the {HAN} family has no {op} plan; it has {', '.join(HAN_OPS)}")
    if s.kind == "reduction":
        if level not in (None, "commutative"):
            raise PlanError(
                f"the {HAN} family keeps level 'commutative' only: the MPI "
                f"library may combine in any order (asked for {level!r})"
            )
        level = "commutative"
    else:
        level = None
    if s.rooted:
        root = 0 if root is None else root
        if (
            isinstance(root, bool)
            or not isinstance(root, int)
            or not 0 <= root < topology.size
        ):
            raise PlanError(f"root {root!r} is not a rank of 0..{topology.size - 1}")
    else:
        root = None
    coords = topology.coordinators(root)
    upper = topology.restrict(coords)
    kwargs = {"itemsize": itemsize}
    if s.kind != "barrier":
        kwargs.update(count=count, segments=segments)
    if s.kind == "reduction":
        kwargs["level"] = level
    if s.rooted:
        kwargs["root"] = coords.index(root)
    plan = build(op, upper, inter, **kwargs)
    if op == "barrier":
        phases = (
            LibraryPhase("barrier", coords),
            PlanPhase(plan, coords),
            LibraryPhase("barrier", coords),
        )
    elif op == "bcast":
        phases = (
            PlanPhase(plan, coords, None, "out"),
            LibraryPhase("bcast", coords, "out", "out"),
        )
    elif op == "reduce":
        phases = (
            LibraryPhase("reduce", coords, "in", "acc"),
            PlanPhase(plan, coords, "acc", "out"),
        )
    else:
        phases = (
            LibraryPhase("reduce", coords, "in", "acc"),
            PlanPhase(plan, coords, "acc", "out"),
            LibraryPhase("bcast", coords, "out", "out"),
        )
    return Composite(
        op,
        topology.size,
        root,
        count if s.kind != "barrier" else 0,
        itemsize,
        level,
        topology.clusters,
        phases,
    )


def _once(parts, where):
    """The union of ``parts`` (sets of contributions), each contribution once."""
    total = frozenset()
    for part in parts:
        if total & part:
            raise PlanError(
                f"{where}: contribution of rank {min(total & part)} combined twice"
            )
        total |= part
    return total


def _held(state, rank, buf, where):
    value = state.get((rank, buf))
    if value is None:
        raise PlanError(
            f"{where}: rank {rank} reads buffer {buf!r}, which holds nothing", rank=rank
        )
    return value


def _check(c: Composite) -> CompositeReport:
    ranks = range(c.size)
    # (rank, buffer) -> the ranks whose contribution it holds (or known entered)
    state: dict[tuple[int | None, str | None], frozenset] = {}
    if c.op == "barrier":  # what a rank knows: the ranks that have entered
        state = {(r, "k"): frozenset({r}) for r in ranks}
    elif c.op == "bcast":
        state = {(c.root, "out"): frozenset({c.root})}
    else:
        state = {(r, "in"): frozenset({r}) for r in ranks}
    messages = wide = wide_bytes = libraries = 0
    for number, phase in enumerate(c.phases):
        where = f"phase {number} ({phase})"
        if isinstance(phase, LibraryPhase):
            libraries += 1
            if len(phase.roots) != len(c.clusters):
                raise PlanError(f"{where}: needs one root per cluster")
            for members, root in zip(c.clusters, phase.roots):
                if root not in members:
                    raise PlanError(f"{where}: root {root} is not in cluster {members}")
                if phase.op == "barrier":
                    known = frozenset().union(*(state[(m, "k")] for m in members))
                    state.update({(m, "k"): known for m in members})
                elif phase.op == "bcast":
                    value = _held(state, root, phase.src, where)
                    state.update({(m, phase.dst): value for m in members})
                elif phase.op == "reduce":
                    state[(root, phase.dst)] = _once(
                        [_held(state, m, phase.src, where) for m in members], where
                    )
                else:
                    raise PlanError(f"{where}: no library phase {phase.op!r}")
            continue
        plan = phase.plan
        report = plan.prove()
        messages += report.messages
        wide += report.wide_area_messages
        wide_bytes += report.wide_area_bytes
        coords = phase.ranks
        if plan.op == "barrier":
            known = frozenset().union(*(state[(r, "k")] for r in coords))
            state.update({(r, "k"): known for r in coords})
        elif plan.op == "bcast":
            value = _held(state, coords[plan.root], phase.dst, where)
            state.update({(r, phase.dst): value for r in coords})
        else:
            total = _once([_held(state, r, phase.src, where) for r in coords], where)
            targets = [coords[plan.root]] if plan.op == "reduce" else coords
            state.update({(r, phase.dst): total for r in targets})
    everyone = frozenset(ranks)
    want: frozenset
    at: range | list[int | None]
    if c.op == "barrier":
        want, buf, at = everyone, "k", ranks
    elif c.op == "bcast":
        want, buf, at = frozenset({c.root}), "out", ranks
    else:
        want, buf = everyone, "out"
        at = [c.root] if c.op == "reduce" else ranks
    for r in at:
        if state.get((r, buf)) != want:
            what = "entered" if c.op == "barrier" else "contributed"
            missing = sorted(want - state.get((r, buf), frozenset()))
            raise PlanError(
                f"rank {r} ends without every rank's part: rank "
                f"{missing[0] if missing else '?'} has not {what}",
                rank=r,
            )
    return CompositeReport(c.level, messages, wide, wide_bytes, libraries)
