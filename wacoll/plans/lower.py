"""Lowering: one rank's program of a proved plan, in buffer element runs.

A plan speaks of blocks; an executor moves elements. :func:`lower` turns rank
``r``'s program into a :class:`LoweredProgram` whose steps name contiguous element runs
``(start, stop)`` of the user's ``in``/``out`` buffers and of scratch buffers it
sizes, given where each block sits in the user's buffers (the offsets). It is pure
Python: the executor (:mod:`wacoll.mpi.executor`) runs the result over MPI, and a
caller that repeats a call keeps the lowered program (``wacoll.Comm`` caches it per
plan and buffer layout). As msccl-tools lowers its programs to per-rank instruction
lists, wacoll lowers plans once and executes them many times.

A lowered ``recv`` is *direct* when its message can land in place: its blocks form
one run of the destination and no earlier step of the program touches them.

Lowering takes a step's block ids as an array (:func:`~wacoll.plans.blockruns.block_array`)
and keeps a scratch buffer's layout as intervals of ids, never a dictionary entry
per block: a coordinator of the combining all-to-all on 4096 ranks names 7.3
million block ids, and lowers in about 0.4 s and 14 MiB. A scratch buffer's runs
of consecutive ids are taken whole; a step of many element runs keeps them as
:class:`ElementRuns`.

Examples
--------
>>> from wacoll import Topology
>>> from wacoll.plans import build
>>> plan = build("bcast", Topology.from_sizes([2, 2]), "magpie", count=6, segments=2)
>>> program = lower(plan, 2)
>>> [(s.kind, s.peer, s.dst) for s in program.steps]
[('recv', 0, ('out', ((0, 3),))), ('send', 3, None), ('recv', 0, ('out', ((3, 6),))), ('send', 3, None)]
>>> program.out_extent, program.scratch_sizes
(6, {})
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from wacoll.errors import BufferMismatchError, PlanError
from wacoll.plans import blockruns
from wacoll.plans import operations as ops
from wacoll.plans.blockruns import BlockRuns, block_array, block_chunks
from wacoll.plans.builder import RepeatedCounts

__all__ = [
    "LoweredStep",
    "LoweredProgram",
    "ElementRuns",
    "lower",
    "lower_steps",
    "default_offsets",
]


def default_offsets(blocks, counts) -> dict:
    """Element offsets of ``blocks`` packed one after another in that order.

    Examples
    --------
    >>> default_offsets((2, 0), (5, 3, 4))
    {2: 0, 0: 4}
    """
    offsets, at = {}, 0
    for b in blocks:
        offsets[b] = at
        at += counts[b]
    return offsets


@dataclass(frozen=True, slots=True)
class LoweredStep:
    """One step of a lowered program.

    Attributes
    ----------
    kind : str
        ``send``, ``recv``, ``recv_combine``, ``copy`` or ``combine``.
    peer : int or None
    elements : int
        Elements the step moves or combines.
    src, dst : tuple or None
        ``(buffer name, runs)``: the element runs ``((start, stop), ...)`` it reads
        or writes.
    src_index, dst_index : tuple or None
        ``(displacements, counts)`` arrays of those runs when there are many short
        ones, for the pack/unpack kernels (which beat a loop of slices there); None
        for :class:`ElementRuns`, which make them when the step runs.
    direct : bool
        A ``recv`` whose message lands in place.
    group : int or None
        The arrival-order group of consecutive ``recv_combine`` steps.
    side : str or None
        Which side of the combination the incoming operand takes.
    index : int
        The step's index in the plan's program (for traces).
    label : str
        The plan step's text (for traces).
    """

    kind: str
    peer: int | None
    elements: int
    src: tuple | None
    dst: tuple | None
    direct: bool
    group: int | None
    side: str | None
    index: int
    label: str
    src_index: tuple | None = None
    dst_index: tuple | None = None


@dataclass(frozen=True)
class LoweredProgram:
    """A rank's lowered program and the buffer sizes it needs.

    Attributes
    ----------
    rank : int
    steps : tuple of LoweredStep
    scratch_sizes : dict
        Elements of each scratch buffer.
    in_extent, out_extent : int
        The fewest elements the ``in`` / ``out`` buffers must hold.
    arithmetic : str
        The plan's arithmetic: with ``"reproducible"`` an element is one exact
        accumulator, and the executor converts the values to and from them.
    """

    rank: int
    steps: tuple
    scratch_sizes: dict
    in_extent: int
    out_extent: int
    arithmetic: str = "plain"


#: Runs per step from which the executor packs with the kernels instead of slicing:
#: measured on this project's kernel benchmark machine, 8 runs of 8 float64 gather in
#: 0.9 us packed against 3.5 us as numpy slices, 64 runs in 1.1 against 19 us; long
#: runs (4096 elements) are as fast or faster as slices.
PACK_MIN_RUNS = 4
PACK_MAX_MEAN_RUN = 1024


def _index(runs):
    """``(displacements, counts)`` arrays for the pack kernels, or None for slicing."""
    if runs is None or len(runs[1]) < PACK_MIN_RUNS or isinstance(runs[1], ElementRuns):
        return None  # (ElementRuns make their arrays when the step runs)
    spans = runs[1]
    total = sum(b - a for a, b in spans)
    if total > PACK_MAX_MEAN_RUN * len(spans):
        return None
    return (
        np.array([a for a, _ in spans], np.intp),
        np.array([b - a for a, b in spans], np.intp),
    )


#: Element runs per step from which a lowered step holds them as
#: :class:`ElementRuns` instead of a tuple of pairs.
ELEMENT_RUNS_FROM = 64


class ElementRuns(Sequence):
    """A lowered step's element runs ``(start, stop)``, held compactly.

    A coordinator of the combining all-to-all hands each member a column of the
    blocks it staged: thousands of short runs per step, the same stride apart. As
    a tuple of pairs they would take more memory than the rest of the program; here
    their starts and lengths are :class:`~wacoll.plans.blockruns.BlockRuns` (a
    column is one run of starts). It is a sequence of ``(start, stop)`` pairs, equal
    to the tuple of them; :meth:`index` gives the pack kernels' arrays.

    Examples
    --------
    >>> runs = ElementRuns(np.arange(0, 400, 4), np.full(100, 2))
    >>> len(runs), runs[1], runs.extent(), runs == tuple((a, a + 2) for a in range(0, 400, 4))
    (100, (4, 6), (0, 398), True)
    >>> [a.tolist()[:3] for a in runs.index()]
    [[0, 4, 8], [2, 2, 2]]
    """

    __slots__ = ("starts", "lengths", "_hash")

    def __init__(self, starts, lengths):
        self.starts = BlockRuns.from_array(starts)
        self.lengths = BlockRuns.from_array(lengths)
        self._hash = None

    def __len__(self):
        return len(self.starts)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return tuple(self)[index]
        start = self.starts[index]
        return start, start + self.lengths[index]

    def __iter__(self):
        starts, lengths = self.index()
        return zip(starts.tolist(), (starts + lengths).tolist())

    def index(self):
        """``(displacements, counts)`` as the pack kernels take them."""
        return (
            block_array(self.starts).astype(np.intp, copy=False),
            block_array(self.lengths).astype(np.intp, copy=False),
        )

    def extent(self):
        """``(start, stop)`` of the span the runs lie in."""
        starts, lengths = self.index()
        return int(starts.min()), int((starts + lengths).max())

    def __eq__(self, other):
        if isinstance(other, ElementRuns):
            return self.starts == other.starts and self.lengths == other.lengths
        if isinstance(other, (tuple, list)):
            return len(other) == len(self) and all(
                tuple(a) == b for a, b in zip(other, self)
            )
        return NotImplemented

    def __hash__(self):
        if self._hash is None:
            self._hash = hash(tuple(self))
        return self._hash

    def __repr__(self):
        return f"ElementRuns({len(self)} runs)"


def _merged_spans(starts, stops):
    """The element spans ``[starts[i], stops[i])``, in their order, with each span
    that begins where the one before ends merged into it."""
    n = len(starts)
    if n == 0:
        return starts, stops
    head = np.ones(n, dtype=bool)
    np.not_equal(starts[1:], stops[:-1], out=head[1:])
    first = np.flatnonzero(head)
    return starts[first], stops[np.append(first[1:], n) - 1]


def _joined(parts):
    """The spans of consecutive chunks of a step, merged across the chunks."""
    if len(parts) == 1:
        return parts[0]
    return _merged_spans(
        np.concatenate([a for a, _ in parts]), np.concatenate([b for _, b in parts])
    )


def _element_runs(run_starts, run_stops):
    """A step's merged element spans as its runs: a tuple of pairs, or
    :class:`ElementRuns` when they are many."""
    if len(run_starts) == 0:
        return ()
    if len(run_starts) <= ELEMENT_RUNS_FROM or int(run_starts.min()) < 0:
        # (a negative offset is refused once the whole program is lowered)
        return tuple(zip(run_starts.tolist(), run_stops.tolist()))
    return ElementRuns(run_starts, run_stops - run_starts)


class _Counts:
    """The plan's block counts, asked in bulk: a repeated count stays a number."""

    def __init__(self, counts):
        self.nblocks = len(counts)
        if isinstance(counts, RepeatedCounts):
            self.count, self.prefix = counts.count, None
        elif (
            isinstance(counts, tuple)
            and counts
            and counts.count(counts[0]) == len(counts)
        ):
            # (a whole all-to-all's tuple of 16.7 million equal counts at 4096
            # ranks: counting them is quicker than making their array)
            self.count, self.prefix = counts[0], None
        else:
            array = np.fromiter(counts, np.int64, self.nblocks)
            self.count, self.array = None, array
            self.prefix = np.zeros(self.nblocks + 1, dtype=np.int64)
            np.cumsum(array, out=self.prefix[1:])

    def check(self, blocks, rank, index):
        """Refuse a step's blocks when one is no block of the plan."""
        top = _largest(blocks)
        if top >= self.nblocks:
            raise PlanError(
                f"rank {rank}: block {top} is no block of this {self.nblocks}-block plan",
                rank=rank,
                step=index,
            )

    def of(self, ids):
        """The count of each block."""
        if self.prefix is None:
            return np.full(len(ids), self.count, dtype=np.int64)
        return self.array[ids]

    def total(self, blocks):
        """The elements of a step's blocks."""
        if self.prefix is None:
            return len(blocks) * self.count
        return sum(int(self.array[ids].sum()) for ids in block_chunks(blocks))

    def before(self, ids):
        """The elements of all blocks below each id (where it sits when every block
        is packed in id order)."""
        return ids * self.count if self.prefix is None else self.prefix[ids]


def _largest(blocks):
    """The largest id of a step's blocks (-1: none)."""
    if not len(blocks):
        return -1
    if isinstance(blocks, BlockRuns):
        return int(np.maximum(blocks.start, blocks.last()).max())
    return max(blocks)


class _KeyedLayout:
    """A user buffer's layout: the offset of each block it holds, as given."""

    def __init__(self, offsets):
        keys = np.fromiter(offsets.keys(), np.int64, len(offsets))
        values = np.fromiter(offsets.values(), np.int64, len(offsets))
        order = np.argsort(keys, kind="stable")
        self.keys, self.values = keys[order], values[order]
        self.slots = len(keys)

    def runs(self, blocks):
        """None: a user's layout is looked up id by id."""
        return None

    def find(self, ids):
        """Per id, its slot (-1: no place) and its element offset."""
        at = np.searchsorted(self.keys, ids)
        inside = np.minimum(at, max(self.slots - 1, 0))
        found = (
            (at < self.slots) & (self.keys[inside] == ids)
            if self.slots
            else np.zeros(len(ids), dtype=bool)
        )
        return (
            np.where(found, at, -1),
            self.values[inside] if self.slots else np.zeros(len(ids), np.int64),
        )


class _RunLayout:
    """A scratch buffer's layout: the blocks its steps name, packed in id order,
    held as intervals of ids (no array of every id)."""

    def __init__(self, lo, hi, sizes):
        self.lo, self.hi, self.sizes = lo, hi, sizes
        widths = hi - lo
        self.slot_base = np.zeros(len(lo), dtype=np.int64)
        np.cumsum(widths[:-1], out=self.slot_base[1:])
        spans = sizes.before(hi) - sizes.before(lo)
        self.element_base = np.zeros(len(lo), dtype=np.int64)
        np.cumsum(spans[:-1], out=self.element_base[1:])
        self.slots = int(widths.sum())
        self.elements = int(spans.sum())

    @classmethod
    def of(cls, block_sets, sizes):
        """The layout of the blocks of ``block_sets`` (tuples or BlockRuns)."""
        los, his, strided = [], [], []
        for blocks in block_sets:
            if isinstance(blocks, BlockRuns):
                step, start, length = blocks.step, blocks.start, blocks.length
                unit = (np.abs(step) <= 1) | (length == 1)
                low = np.where(step < 0, blocks.last(), start)[unit]
                los.append(low)
                his.append(low + np.where(step[unit] == 0, 1, length[unit]))
                if not unit.all():
                    strided.append(blocks)
            else:
                ids = np.fromiter(blocks, np.int64, len(blocks))
                los.append(ids)
                his.append(ids + 1)
        layout = cls(*_merged(los, his), sizes)
        # the ids of strided runs the unit runs do not cover (in a proved plan: none)
        extra = [
            ids[layout.find(ids)[0] < 0]
            for blocks in strided
            for ids in block_chunks(blocks)
        ]
        if not any(len(e) for e in extra):
            return layout
        return cls(
            *_merged([layout.lo] + extra, [layout.hi] + [e + 1 for e in extra]), sizes
        )

    def runs(self, blocks):
        """For :class:`~wacoll.plans.blockruns.BlockRuns` of consecutive ids that the
        buffer holds each in one piece: per run, its first slot, its number of ids
        and its element span ``[start, stop)``; else None (look up id by id)."""
        if not isinstance(blocks, BlockRuns) or not len(blocks):
            return None
        start, length = blocks.start, blocks.length
        if not ((blocks.step == 1) | (length == 1)).all():
            return None
        slots, starts = self.find(start)
        last = start + length - 1
        if int(slots.min()) < 0 or not np.array_equal(
            self.find(last)[0], slots + length - 1
        ):
            return None  # (some id has no place: the lookup id by id names it)
        return (
            slots,
            length,
            starts,
            starts + self.sizes.before(last + 1) - self.sizes.before(start),
        )

    def find(self, ids):
        """Per id, its slot (-1: no place) and its element offset."""
        at = np.searchsorted(self.lo, ids, side="right") - 1
        inside = np.maximum(at, 0)
        if not len(self.lo):
            return np.full(len(ids), -1, dtype=np.int64), np.zeros(len(ids), np.int64)
        lo = self.lo[inside]
        found = (at >= 0) & (ids < self.hi[inside])
        slots = np.where(found, self.slot_base[inside] + ids - lo, -1)
        return slots, self.element_base[inside] + self.sizes.before(
            ids
        ) - self.sizes.before(lo)


def _merged(los, his):
    """The union of the intervals ``[lo, hi)`` as sorted disjoint intervals."""
    lo = np.concatenate(los) if los else np.zeros(0, dtype=np.int64)
    hi = np.concatenate(his) if his else np.zeros(0, dtype=np.int64)
    if not len(lo):
        return lo, hi
    order = np.argsort(lo, kind="stable")
    lo, hi = lo[order], hi[order]
    reach = np.maximum.accumulate(hi)
    new = np.ones(len(lo), dtype=bool)
    np.greater(lo[1:], reach[:-1], out=new[1:])
    first = np.flatnonzero(new)
    return lo[first], np.maximum.reduceat(hi, first)


def _extent(name, offsets, counts):
    """The fewest elements a buffer holding ``offsets``' blocks must have."""
    for b, off in offsets.items():
        if off < 0:
            raise BufferMismatchError(
                f"{name}: block {b} placed at negative offset {off}"
            )
    return max((off + counts[b] for b, off in offsets.items()), default=0)


#: Steps of at most this many block ids (as a tuple) are lowered together, up to
#: BATCH_STEPS at a time: an all-to-all's rank has thousands of one-block steps,
#: and numpy's work per call would cost more than the blocks.
SMALL_STEP = 16
BATCH_STEPS = 4096


class _Lowering:
    """One rank's steps lowered in order, one by one or a batch of small ones at a
    time, with the slots of each buffer that earlier steps touched (a receive into
    untouched slots of one run may land in place)."""

    def __init__(self, rank, layouts, sizes):
        self.rank, self.layouts, self.sizes = rank, layouts, sizes
        self.touched = {
            buf: np.zeros(layout.slots, dtype=bool) for buf, layout in layouts.items()
        }

    def slots_of(self, buf, ids, index):
        """Per id, its slot in ``buf`` and its element offset (refusing an id that has
        no place there)."""
        layout = self.layouts.get(buf)
        if layout is None:  # pragma: no cover - every name but in/out is scratch
            raise PlanError(
                f"rank {self.rank}: the program uses buffer {buf!r} that has no layout",
                rank=self.rank,
                step=index,
            )
        slots, starts = layout.find(ids)
        if len(slots) and int(slots.min()) < 0:
            missing = int(ids[np.flatnonzero(slots < 0)[0]])
            raise PlanError(
                f"rank {self.rank}: block {missing} has no place in buffer {buf!r}",
                rank=self.rank,
                step=index,
            )
        return slots, starts

    def step(self, i, step):
        """Step ``i`` lowered alone."""
        sizes, layouts, touched = self.sizes, self.layouts, self.touched
        sizes.check(step.blocks, self.rank, i)
        # a step's ids a chunk at a time (one step may name millions of blocks),
        # or its runs whole where a scratch buffer holds each of them in one piece
        whole = len(step.blocks) <= blockruns.CHUNK
        chunks = [block_array(step.blocks)] if whole else None

        def each_chunk():
            return chunks if chunks is not None else block_chunks(step.blocks)

        runs, seen, held = {}, False, {}
        for buf in (step.src, step.dst):
            if buf is None:
                continue
            held[buf] = spans = layouts[buf].runs(step.blocks)
            if spans is not None:  # (slot starts, slot counts, element spans)
                parts = [_merged_spans(spans[2], spans[3])]
                if buf == step.dst and step.kind == "recv":
                    seen = any(
                        touched[buf][a : a + n].any()
                        for a, n in zip(spans[0].tolist(), spans[1].tolist())
                    )
            else:
                parts = []
                for ids in each_chunk():
                    slots, starts = self.slots_of(buf, ids, i)
                    parts.append(_merged_spans(starts, starts + sizes.of(ids)))
                    if buf == step.dst and step.kind == "recv":
                        seen = seen or bool(touched[buf][slots].any())
                if whole:  # (kept to mark them touched below)
                    held[buf] = slots
            runs[buf] = (buf, _element_runs(*_joined(parts)))
        src = runs.get(step.src) if step.src is not None else None
        dst = runs.get(step.dst) if step.dst is not None else None
        lowered = _lowered_step(i, step, sizes.total(step.blocks), src, dst, seen)
        for buf, spans in held.items():
            if isinstance(spans, np.ndarray):  # the slots of a step read whole
                touched[buf][spans] = True
            elif spans is not None:
                for a, n in zip(spans[0].tolist(), spans[1].tolist()):
                    touched[buf][a : a + n] = True
            else:
                for ids in each_chunk():
                    touched[buf][layouts[buf].find(ids)[0]] = True
        return lowered

    def batch(self, program, i, j):
        """Steps ``i..j-1`` (each a short tuple of ids) lowered together, as
        :meth:`step` lowers them one by one; None when one has an id that is no
        block of the plan or has no place in a buffer (:meth:`step` names it)."""
        batch = program[i:j]
        m = j - i
        lengths = np.fromiter(map(len, (s.blocks for s in batch)), np.int64, m)
        ids = np.fromiter(
            (b for s in batch for b in s.blocks), np.int64, int(lengths.sum())
        )
        if len(ids) and int(ids.max()) >= self.sizes.nblocks:
            return None
        owner = np.repeat(np.arange(m), lengths)
        counts = self.sizes.of(ids)
        before = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum(counts, out=before[1:])
        bounds = np.zeros(m + 1, dtype=np.int64)
        np.cumsum(lengths, out=bounds[1:])
        totals = (before[bounds[1:]] - before[bounds[:-1]]).tolist()
        # every access (a step's src or dst buffer, on all its ids), by buffer
        runs = {"src": [None] * m, "dst": [None] * m}
        accesses = {}  # buf -> ([slots], [steps], [is a receive's destination])
        for role in ("src", "dst"):
            names = [getattr(s, role) for s in batch]
            for buf in set(names) - {None}:
                if buf not in self.layouts:  # pragma: no cover - see slots_of
                    return None
                mine = np.array([name == buf for name in names])
                take = mine[owner]
                slots, starts = self.layouts[buf].find(ids[take])
                if len(slots) and int(slots.min()) < 0:
                    return None
                who = owner[take]
                if not len(who):
                    continue
                stops = starts + counts[take]
                head = np.ones(len(who), dtype=bool)
                head[1:] = (who[1:] != who[:-1]) | (starts[1:] != stops[:-1])
                first = np.flatnonzero(head)
                last = np.append(first[1:], len(who)) - 1
                for k, a, b in zip(
                    who[first].tolist(), starts[first].tolist(), stops[last].tolist()
                ):
                    if runs[role][k] is None:
                        runs[role][k] = []
                    runs[role][k].append((a, b))
                receives = np.array(
                    [role == "dst" and s.kind == "recv" and s.dst == buf for s in batch]
                )
                got = accesses.setdefault(buf, ([], [], []))
                got[0].append(slots)
                got[1].append(who)
                got[2].append(receives[who])
        # a receive saw its slots touched when an earlier step (before the batch
        # or in it) touched one of them
        seen = np.zeros(m, dtype=bool)
        for buf, (slots, who, receive) in accesses.items():
            slots, who = np.concatenate(slots), np.concatenate(who)
            receive = np.concatenate(receive)
            order = np.argsort(who, kind="stable")
            slots, who, receive = slots[order], who[order], receive[order]
            known, first = np.unique(slots, return_index=True)
            earliest = who[first][np.searchsorted(known, slots)]
            hit = receive & (self.touched[buf][slots] | (earliest < who))
            seen[who[hit]] = True
            self.touched[buf][slots] = True
        lowered = []
        for k, step in enumerate(batch):
            src = (
                (step.src, tuple(runs["src"][k] or ())) if step.src is not None else None
            )
            dst = (
                (step.dst, tuple(runs["dst"][k] or ())) if step.dst is not None else None
            )
            lowered.append(_lowered_step(i + k, step, totals[k], src, dst, bool(seen[k])))
        return lowered


def _lowered_step(i, step, total, src, dst, seen):
    """The :class:`LoweredStep` of step ``i`` with its element runs and elements."""
    direct = step.kind == "recv" and len(dst[1]) <= 1 and not seen
    return LoweredStep(
        step.kind,
        step.peer,
        total,
        src,
        dst,
        direct,
        step.group,
        step.side,
        i,
        str(step),
        _index(src),
        _index(dst),
    )


def lower(plan, rank: int, in_offsets=None, out_offsets=None) -> LoweredProgram:
    """Lower rank ``rank``'s program of ``plan`` (proved first) to element runs.

    Parameters
    ----------
    plan : Plan
    rank : int
    in_offsets, out_offsets : dict, optional
        Element offset of each block in the ``in`` / ``out`` buffers; by default the
        blocks the operation places there, packed in block order.

    Raises
    ------
    PlanError
        The plan fails its check, or a step uses a buffer without a layout.
    """
    plan.prove()
    if not 0 <= rank < plan.size:
        raise PlanError(f"rank {rank} is not a rank of this {plan.size}-rank plan")
    return lower_steps(plan, rank, plan.programs[rank], in_offsets, out_offsets)


def lower_steps(
    header, rank: int, program, in_offsets=None, out_offsets=None
) -> LoweredProgram:
    """Lower ``program``, rank ``rank``'s steps of a plan described by ``header``.

    :func:`lower` without the proof: ``header`` is anything with the plan's ``op``,
    ``size``, ``root`` and ``counts`` (a :class:`~wacoll.plans.plan.Plan` or a
    :class:`~wacoll.plans.builder.RankPlan`). The caller answers for the program
    being part of a proved plan (:func:`wacoll.plans.rank.rank_program` does).

    Examples
    --------
    >>> from wacoll import Topology
    >>> from wacoll.plans import build
    >>> plan = build("gather", Topology.single(3), "magpie", root=2)
    >>> lower_steps(plan, 2, plan.programs[2]) == lower(plan, 2)
    True
    """
    counts = header.counts
    nb = len(counts)
    if in_offsets is None:
        in_offsets = default_offsets(
            ops.in_blocks(header.op, header.size, header.root, nb, rank), counts
        )
    if out_offsets is None:
        out_offsets = default_offsets(
            ops.out_blocks(header.op, header.size, header.root, nb, rank), counts
        )
    sizes = _Counts(counts)
    layouts: dict[str, _KeyedLayout | _RunLayout] = {
        "in": _KeyedLayout(in_offsets),
        "out": _KeyedLayout(out_offsets),
    }
    scratch_steps: dict[str, list[int]] = {}
    for i, step in enumerate(program):
        for buf in (step.src, step.dst):
            if buf is not None and buf not in ("in", "out"):
                scratch_steps.setdefault(buf, []).append(i)
    scratch: dict[str, _RunLayout] = {
        buf: _RunLayout.of([program[i].blocks for i in rows], sizes)
        for buf, rows in scratch_steps.items()
    }
    layouts.update(scratch)
    scratch_sizes = {buf: layout.elements for buf, layout in scratch.items()}

    lowering = _Lowering(rank, layouts, sizes)
    steps: list[LoweredStep] = []
    i = 0
    while i < len(program):
        j = i
        while (
            j < len(program)
            and j - i < BATCH_STEPS
            and type(program[j].blocks) is tuple
            and len(program[j].blocks) <= SMALL_STEP
        ):
            j += 1
        batch = lowering.batch(program, i, j) if j - i > 1 else None
        if batch is None:  # (one step, or a batch with a fault the step names)
            j = max(j, i + 1)
            batch = [lowering.step(k, program[k]) for k in range(i, j)]
        steps += batch
        i = j
    return LoweredProgram(
        rank,
        tuple(steps),
        scratch_sizes,
        _extent("inbuf", in_offsets, counts),
        _extent("outbuf", out_offsets, counts),
        header.arithmetic,
    )
