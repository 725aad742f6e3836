"""An explicit builder for plans: append steps to rank programs, then freeze.

Plan builders of every family write through a :class:`PlanBuilder`; there is no
global program context. :meth:`PlanBuilder.transfer` appends the send to the sender's
program and the matching receive to the receiver's, so a builder written phase by
phase produces programs whose order follows the phases.

A builder may be *focused* on one rank (:func:`focus`): it then keeps only that
rank's steps, and :meth:`PlanBuilder.build` returns a :class:`RankPlan` (that rank's
program and the plan's header) instead of a :class:`~wacoll.plans.plan.Plan`. The
families' builders do not change: they still write every rank's steps through the
builder they create, and a builder they create under ``with focus(r):`` drops the
others. Where a family's loop over ranks costs more than appending, it asks
:meth:`PlanBuilder.keeps` and skips the ranks whose steps would be dropped, so that a
focused build costs time proportional to the focused rank's own steps (plus the
trees, linear in the ranks).

Examples
--------
>>> from wacoll import Topology
>>> from wacoll.plans.builder import PlanBuilder
>>> b = PlanBuilder("bcast", Topology.from_sizes([2]), root=0, count=4)
>>> b.transfer(0, 1, b.all_blocks)
>>> plan = b.build(family="custom", algorithm="by-hand")
>>> plan.prove().messages
1
"""

from __future__ import annotations

import contextlib
import contextvars
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field

from wacoll.errors import PlanError
from wacoll.plans.blockruns import BlockRuns
from wacoll.plans.encoded import EncodedPrograms
from wacoll.plans.operations import block_counts, spec
from wacoll.plans.plan import Plan, Step
from wacoll.topology import Topology

__all__ = ["PlanBuilder", "RankPlan", "RepeatedCounts", "focus", "focused_rank"]

_FOCUS = contextvars.ContextVar("wacoll_plan_focus", default=None)


@contextlib.contextmanager
def focus(rank):
    """Plan builders created inside this block keep only ``rank``'s steps.

    Examples
    --------
    >>> from wacoll import Topology
    >>> from wacoll.plans import build
    >>> with focus(3):
    ...     part = build("bcast", Topology.from_sizes([3, 3]), "magpie", root=1)
    >>> part.rank, [str(s) for s in part.program]
    (3, ['recv 1 [0]', 'send 4 [0]', 'send 5 [0]'])
    """
    if isinstance(rank, bool) or not isinstance(rank, numbers.Integral) or rank < 0:
        raise PlanError(f"focus needs a rank >= 0, got {rank!r}")
    token = _FOCUS.set(int(rank))
    try:
        yield
    finally:
        _FOCUS.reset(token)


def focused_rank():
    """The rank plan builders created now keep (None: every rank)."""
    return _FOCUS.get()


def _held(blocks):
    """A step's blocks as it keeps them: a tuple, or the runs they came as."""
    return (
        blocks
        if type(blocks) is tuple or isinstance(blocks, BlockRuns)
        else tuple(blocks)
    )


class RepeatedCounts(Sequence):
    """``(count,) * n`` without the tuple: the block counts of a focused build of a
    uniform all-to-all, whose ``P * P`` blocks would otherwise cost ``8 P**2`` bytes.

    Examples
    --------
    >>> c = RepeatedCounts(3, 4)
    >>> len(c), c[2], c == (3, 3, 3, 3), c[1:3]
    (4, 3, True, (3, 3))
    """

    __slots__ = ("count", "n")

    def __init__(self, count, n):
        self.count, self.n = count, n

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        if isinstance(index, slice):
            return (self.count,) * len(range(*index.indices(self.n)))
        if not -self.n <= index < self.n:
            raise IndexError("block index out of range")
        return self.count

    def __iter__(self):
        return iter((self.count,) * self.n)

    def __eq__(self, other):
        if isinstance(other, RepeatedCounts):
            return self.n == other.n and (self.count == other.count or not self.n)
        if isinstance(other, (tuple, list)):
            return len(other) == self.n and all(c == self.count for c in other)
        return NotImplemented

    def __hash__(self):
        return hash(tuple(self))

    def __repr__(self):
        return f"RepeatedCounts({self.count}, {self.n})"


@dataclass(frozen=True)
class RankPlan:
    """One rank's part of a plan: its program and the plan's header, nothing else.

    What a focused :class:`PlanBuilder` builds; :func:`wacoll.plans.rank.rank_program`
    lowers it. The attributes other than ``rank`` and ``program`` are those of
    :class:`~wacoll.plans.plan.Plan`. ``source``, when given (as
    :func:`wacoll.plans.rank.rank_plan` does), is a function of no arguments that
    builds the whole proved plan: the part then builds it when asked for it
    (:meth:`whole`, and through it ``programs`` and :meth:`prove`), so that it can
    stand where a plan is expected.
    """

    op: str
    size: int
    root: int | None
    counts: tuple
    rank: int
    program: tuple
    level: str | None = None
    itemsize: int = 1
    family: str = ""
    algorithm: str = ""
    params: tuple = ()
    arithmetic: str = "plain"
    source: object = field(default=None, repr=False, compare=False)
    _whole: list = field(default_factory=list, init=False, repr=False, compare=False)

    @property
    def nblocks(self) -> int:
        """Number of blocks."""
        return len(self.counts)

    def whole(self):
        """The whole proved :class:`~wacoll.plans.plan.Plan` this part belongs to,
        built on first use by ``source``."""
        if not self._whole:
            if self.source is None:
                raise PlanError(
                    "this part of a plan does not know its selection: "
                    "build the whole plan with wacoll.plans.build"
                )
            self._whole.append(self.source())
        return self._whole[0]

    @property
    def programs(self) -> tuple:
        """Every rank's program (builds the whole plan: see :meth:`whole`)."""
        return self.whole().programs

    def prove(self):
        """The whole plan's check report (see :meth:`whole`)."""
        return self.whole().prove()


class PlanBuilder:
    """Collects the programs of a plan under construction.

    Parameters
    ----------
    op : str
        Operation name.
    topology : Topology
        The ranks and clusters the plan runs on.
    root : int, optional
        Root of a rooted operation.
    count, counts, segments
        The block layout, as :func:`wacoll.plans.operations.block_counts` takes it.
    level : str, optional
        Reduction level (reductions only; default ``"strict"``).
    itemsize : int
        Bytes per element.
    """

    def __init__(
        self,
        op,
        topology: Topology,
        *,
        root=None,
        count=1,
        counts=None,
        segments=1,
        level=None,
        itemsize=1,
    ):
        self.spec = spec(op)
        if not isinstance(topology, Topology):
            raise PlanError("plan builders need a wacoll.Topology")
        self.op = self.spec.name
        self.topology = topology
        self.size = topology.size
        if self.spec.rooted:
            if root is None:
                root = 0
            if (
                isinstance(root, bool)
                or not isinstance(root, numbers.Integral)
                or not (0 <= root < self.size)  # type: ignore[operator]  # numbers.Integral stubs lack comparisons
            ):
                raise PlanError(f"root {root!r} is not a rank of 0..{self.size - 1}")
            root = int(root)
        else:
            root = None
        self.root = root
        if self.spec.kind == "reduction":
            level = "strict" if level is None else level
        else:
            level = None
        self.level = level
        self.focus = _FOCUS.get()
        self.counts: Sequence[int]
        if self.focus is not None and self.spec.layout == "pairs" and counts is None:
            block_counts(op, 1, count=count)  # the checks, without the P * P tuple
            self.counts = RepeatedCounts(count, self.size * self.size)
        else:
            self.counts = block_counts(
                op, self.size, count=count, counts=counts, segments=segments
            )
        self.itemsize = itemsize
        if self.focus is not None and self.focus >= self.size:
            raise PlanError(f"rank {self.focus} is not a rank of 0..{self.size - 1}")
        self.programs: list[list[Step]] = [[] for _ in range(self.size)]
        self._encoded = None

    def keeps(self, rank) -> bool:
        """Whether this builder keeps ``rank``'s steps (all ranks unless focused)."""
        return self.focus is None or rank == self.focus

    # ------------------------------------------------------------ layout helpers
    @property
    def all_blocks(self) -> tuple:
        """Every block id."""
        return tuple(range(len(self.counts)))

    def clusters(self):
        """The rank tuples of the clusters."""
        return self.topology.clusters

    # ------------------------------------------------------------------ steps
    def send(self, rank, peer, blocks, src="out"):
        """Append a send of ``blocks`` of ``src`` to ``peer``."""
        if self.focus is None or rank == self.focus:
            self.programs[rank].append(Step("send", _held(blocks), peer=peer, src=src))

    def recv(self, rank, peer, blocks, dst="out"):
        """Append a receive of ``blocks`` from ``peer`` into ``dst``."""
        if self.focus is None or rank == self.focus:
            self.programs[rank].append(Step("recv", _held(blocks), peer=peer, dst=dst))

    def recv_combine(self, rank, peer, blocks, dst, side="right", group=0):
        """Append a receive from ``peer`` combined into ``dst`` on ``side``."""
        if self.focus is None or rank == self.focus:
            self.programs[rank].append(
                Step(
                    "recv_combine",
                    _held(blocks),
                    peer=peer,
                    dst=dst,
                    side=side,
                    group=group,
                )
            )

    def copy(self, rank, blocks, src, dst):
        """Append a local copy of ``blocks`` from ``src`` to ``dst``."""
        if blocks and (self.focus is None or rank == self.focus):
            self.programs[rank].append(Step("copy", _held(blocks), src=src, dst=dst))

    def combine(self, rank, blocks, src, dst, side="right"):
        """Append a local combine of ``blocks`` of ``src`` into ``dst`` on ``side``."""
        if self.focus is None or rank == self.focus:
            self.programs[rank].append(
                Step("combine", _held(blocks), src=src, dst=dst, side=side)
            )

    def transfer(self, src_rank, dst_rank, blocks, src="out", dst="out"):
        """Append a send at ``src_rank`` and the matching receive at ``dst_rank``."""
        self.send(src_rank, dst_rank, blocks, src)
        self.recv(dst_rank, src_rank, blocks, dst)

    def transfer_combine(
        self, src_rank, dst_rank, blocks, src, dst, side="right", group=0
    ):
        """Append a send and the matching receive-and-combine."""
        self.send(src_rank, dst_rank, blocks, src)
        self.recv_combine(dst_rank, src_rank, blocks, dst, side, group)

    def encoded(self, steps):
        """Take every rank's whole program as arrays
        (:func:`wacoll.plans.encoded.single_block_steps`), instead of steps appended
        one by one; a whole-plan builder only (not focused, nothing appended)."""
        if self.focus is not None or any(self.programs) or self._encoded is not None:
            raise PlanError("encoded programs replace a whole plan's steps")
        if steps.size != self.size or steps.nblocks != len(self.counts):
            raise PlanError("encoded programs of another layout")
        self._encoded = steps

    # ------------------------------------------------------------------ freeze
    def build(self, *, family="", algorithm="", **params):
        """Freeze the programs into a :class:`~wacoll.plans.plan.Plan` (a
        :class:`RankPlan` of the focused rank when focused)."""
        if self.focus is not None:
            return RankPlan(
                op=self.op,
                size=self.size,
                root=self.root,
                counts=self.counts,
                rank=self.focus,
                program=tuple(self.programs[self.focus]),
                level=self.level,
                itemsize=self.itemsize,
                family=family,
                algorithm=algorithm,
                params=tuple(sorted(params.items())),
            )
        return Plan(
            op=self.op,
            size=self.size,
            root=self.root,
            counts=self.counts,
            programs=tuple(tuple(p) for p in self.programs)
            if self._encoded is None
            else EncodedPrograms(self._encoded),
            clusters=self.topology.cluster_ids,
            level=self.level,
            itemsize=self.itemsize,
            family=family,
            algorithm=algorithm,
            params=tuple(sorted(params.items())),
        )
