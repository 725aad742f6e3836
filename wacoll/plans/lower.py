"""Lowering: one rank's program of a proved plan, in buffer element runs.

A plan speaks of blocks; an executor moves elements. :func:`lower` turns rank
``r``'s program into a :class:`Program` whose steps name contiguous element runs
``(start, stop)`` of the user's ``in``/``out`` buffers and of scratch buffers it
sizes, given where each block sits in the user's buffers (the offsets). It is pure
Python: the executor (:mod:`wacoll.mpi.executor`) runs the result over MPI, and a
caller that repeats a call keeps the lowered program (``wacoll.Comm`` caches it per
plan and buffer layout). As msccl-tools lowers its programs to per-rank instruction
lists, wacoll lowers plans once and executes them many times.

A lowered ``recv`` is *direct* when its message can land in place: its blocks form
one run of the destination and no earlier step of the program touches them.

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

from dataclasses import dataclass

import numpy as np

from wacoll.errors import BufferMismatchError, PlanError
from wacoll.plans import operations as ops

__all__ = ["LoweredStep", "Program", "lower", "lower_steps", "default_offsets"]


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
        ones, for the pack/unpack kernels (which beat a loop of slices there).
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
class Program:
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


def _runs(blocks, offsets, counts):
    """Merge ``blocks`` into contiguous (start, stop) element runs of one buffer."""
    runs = []
    for b in blocks:
        start = offsets[b]
        stop = start + counts[b]
        if runs and runs[-1][1] == start:
            runs[-1][1] = stop
        else:
            runs.append([start, stop])
    return tuple(tuple(r) for r in runs)


#: Runs per step from which the executor packs with the kernels instead of slicing:
#: measured on this project's kernel benchmark machine, 8 runs of 8 float64 gather in
#: 0.9 us packed against 3.5 us as numpy slices, 64 runs in 1.1 against 19 us; long
#: runs (4096 elements) are as fast or faster as slices.
PACK_MIN_RUNS = 4
PACK_MAX_MEAN_RUN = 1024


def _index(runs):
    """``(displacements, counts)`` arrays for the pack kernels, or None for slicing."""
    if runs is None or len(runs[1]) < PACK_MIN_RUNS:
        return None
    spans = runs[1]
    total = sum(b - a for a, b in spans)
    if total > PACK_MAX_MEAN_RUN * len(spans):
        return None
    return (np.array([a for a, _ in spans], np.intp),
            np.array([b - a for a, b in spans], np.intp))


def _extent(name, offsets, counts):
    """The fewest elements a buffer holding ``offsets``' blocks must have."""
    for b, off in offsets.items():
        if off < 0:
            raise BufferMismatchError(f"{name}: block {b} placed at negative offset {off}")
    return max((off + counts[b] for b, off in offsets.items()), default=0)


def lower(plan, rank: int, in_offsets=None, out_offsets=None) -> Program:
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
    plan.check()
    if not 0 <= rank < plan.size:
        raise PlanError(f"rank {rank} is not a rank of this {plan.size}-rank plan")
    return lower_steps(plan, rank, plan.programs[rank], in_offsets, out_offsets)


def lower_steps(header, rank: int, program, in_offsets=None, out_offsets=None) -> Program:
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
        in_offsets = default_offsets(ops.in_blocks(header.op, header.size, header.root, nb,
                                                   rank), counts)
    if out_offsets is None:
        out_offsets = default_offsets(ops.out_blocks(header.op, header.size, header.root,
                                                     nb, rank), counts)
    scratch_blocks = {}
    for step in program:
        for buf in (step.src, step.dst):
            if buf is not None and buf not in ("in", "out"):
                scratch_blocks.setdefault(buf, set()).update(step.blocks)
    offsets = {"in": in_offsets, "out": out_offsets}
    scratch_sizes = {}
    for buf, blocks in scratch_blocks.items():
        offsets[buf] = default_offsets(sorted(blocks), counts)
        scratch_sizes[buf] = sum(counts[b] for b in blocks)

    def runs_of(buf, blocks, index):
        if buf is None:
            return None
        offs = offsets.get(buf)
        if offs is None:
            raise PlanError(f"rank {rank}: the program uses buffer {buf!r} that has no "
                            f"layout", rank=rank, step=index)
        missing = [b for b in blocks if b not in offs]
        if missing:
            raise PlanError(f"rank {rank}: block {missing[0]} has no place in buffer "
                            f"{buf!r}", rank=rank, step=index)
        return buf, _runs(blocks, offs, counts)

    steps = []
    touched = set()  # (buffer, block) slots touched by earlier steps
    for i, step in enumerate(program):
        src = runs_of(step.src, step.blocks, i)
        dst = runs_of(step.dst, step.blocks, i)
        direct = (step.kind == "recv" and len(dst[1]) <= 1 and
                  not any((step.dst, b) in touched for b in step.blocks))
        steps.append(LoweredStep(step.kind, step.peer, sum(counts[b] for b in step.blocks),
                                 src, dst, direct, step.group, step.side, i, str(step),
                                 _index(src), _index(dst)))
        for buf in (step.src, step.dst):
            if buf is not None:
                touched.update((buf, b) for b in step.blocks)
    return Program(rank, tuple(steps), scratch_sizes, _extent("inbuf", in_offsets, counts),
                   _extent("outbuf", out_offsets, counts), header.arithmetic)
