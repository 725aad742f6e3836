"""One plan for every count of a size class: a plan's structure, retargeted.

A plan's structure (which rank sends which blocks to whom, in which order, and what
it combines) does not depend on the call's count: the count only sets how many
elements each block holds (:func:`wacoll.plans.operations.block_counts`). And the
prover reasons on blocks: a plan it proves delivers every block where it belongs,
whatever the blocks hold. Lowering then gives each block its own element range, in
block order, from the counts alone (:func:`wacoll.plans.lower.default_offsets`). So a
proved plan is correct for any block counts of its layout, by construction: its
proof covers every count.

This module makes one plan serve a size class of counts:

- :func:`structure_call` is the call a class is planned for: the same call at its
  class's *canonical* count, the fewest elements of at least ``2**(k - 1)`` bytes
  for the class ``k = (count * itemsize).bit_length()`` (a call of 1024 to 2047
  float64 elements is planned as one of 1024). The selection, the build, the
  proof and its record on disk happen once per class, for that call; a threshold
  of the selection that is a power of two in bytes falls between the same calls as
  before.
- :func:`retarget` gives that plan the block counts of any count of the class,
  adopting its proof (the byte figures of the proof report made for the new
  counts).
- :func:`retarget_program` lowers it for the new count without lowering it again
  where every block holds the count (one block per rank, or one segment):
  every element index of the class's lowered program is a multiple of the
  class's count, and scales with it.
- :func:`count_parts` says how a plan's lowered indices follow the count: a
  count-linear plan's scale with it (one part), and a plan whose blocks are the
  ``s`` segments of the vector (:func:`~wacoll.plans.operations.block_counts`)
  has every index a sum of whole segments, of ``q = n // s`` elements each plus
  one for each of the first ``n % s``. :func:`probe_lowered` lowers a rank's
  program for chosen block counts, from which such sums are read once per size
  class (:func:`wacoll.mpi.runner.count_units`), and the compiled runner computes
  them for any count.

Calls that are not retargeted are planned for their own count, as before: the
vector variants (their counts are per rank), count 0, and plans whose blocks are not
the plain layout of their count (:func:`retargetable`).

Examples
--------
>>> from wacoll import Topology
>>> from wacoll.plans import Call, select
>>> call = Call("allreduce", count=1500, itemsize=8, level="commutative")
>>> base = structure_call(call)
>>> base.count
1024
>>> topo = Topology.from_sizes([2, 2])
>>> plan = select(base, topo).build(topo)
>>> retargetable(plan, base.count)
True
>>> bigger = retarget(plan, 1500)
>>> sum(bigger.counts), bigger.programs == plan.programs
(1500, True)
>>> bigger.prove().bytes == select(call, topo, family=plan.family).build(topo).prove().bytes
True
"""

from __future__ import annotations

import dataclasses

import numpy as np

from wacoll.plans.builder import RankPlan, RepeatedCounts
from wacoll.plans.lower import ElementRuns, lower_steps
from wacoll.plans.operations import block_counts, spec

__all__ = [
    "MAX_PARTS",
    "canonical_count",
    "count_linear",
    "count_parts",
    "probe_lowered",
    "retarget",
    "retarget_program",
    "retargetable",
    "size_class",
    "structure_call",
]


def size_class(count: int, itemsize: int) -> int:
    """The size class of ``count`` elements of ``itemsize`` bytes: the bit length
    of their bytes (learning's shapes, the dispatcher's class plans and the
    recorded calls of a class all use it).

    Examples
    --------
    >>> size_class(1024, 8), size_class(2047, 8), size_class(2048, 8)
    (14, 14, 15)
    """
    return (count * itemsize).bit_length()


def canonical_count(count: int, itemsize: int) -> int:
    """The count a call of ``count`` elements of ``itemsize`` bytes is planned
    for: the fewest elements of its size class (``count * itemsize`` bytes of
    the same bit length).

    Examples
    --------
    >>> [canonical_count(n, 8) for n in (1, 2, 3, 4, 7, 8, 1024, 2047)]
    [1, 2, 2, 4, 4, 8, 1024, 1024]
    >>> canonical_count(100, 3)  # 300 bytes: the class of 256 to 511 bytes
    86
    """
    if count <= 0:
        return count
    least = 1 << (size_class(count, itemsize) - 1)  # bytes
    return -(-least // itemsize)


def structure_call(call):
    """The call ``call``'s size class is planned for (:func:`canonical_count`), or
    None when ``call`` is planned for its own count (a vector variant, an
    operation without a count, count 0)."""
    if call.counts is not None or not call.count or spec(call.op).layout == "none":
        return None
    count = canonical_count(call.count, call.itemsize)
    return call if count == call.count else dataclasses.replace(call, count=count)


def _layout_counts(plan, count):
    """The block counts of ``plan``'s layout for ``count`` (its segments kept)."""
    layout = spec(plan.op).layout
    if layout == "segments":
        return block_counts(plan.op, plan.size, count=count, segments=len(plan.counts))
    if layout == "pairs" and isinstance(plan.counts, RepeatedCounts):
        return RepeatedCounts(count, plan.size * plan.size)
    return block_counts(plan.op, plan.size, count=count)


def retargetable(plan, count) -> bool:
    """Whether ``plan`` (a :class:`~wacoll.plans.plan.Plan` or a rank's
    :class:`~wacoll.plans.builder.RankPlan`), built for ``count``, has the plain
    block layout of that count, so that :func:`retarget` may give it another."""
    if not isinstance(plan, RankPlan) and not hasattr(plan, "adopt_proof"):
        return False  # (a composite)
    layout, counts = spec(plan.op).layout, plan.counts
    if layout == "segments":
        return _layout_counts(plan, count) == counts
    n = plan.size if layout == "per_rank" else plan.size * plan.size
    if isinstance(counts, RepeatedCounts):
        return counts.n == n and (counts.count == count or not n)
    # (a tuple of P * P counts at scale: counted in C, never rebuilt)
    return len(counts) == n and tuple(counts).count(count) == n


def retarget(plan, count):
    """``plan`` with the block counts of ``count``: the same programs, its proof
    adopted (a :class:`~wacoll.plans.builder.RankPlan` builds its whole plan, when
    asked, retargeted too). ``plan`` must be :func:`retargetable`."""
    counts = _layout_counts(plan, count)
    if isinstance(plan, RankPlan):
        source = plan.source
        whole = None if source is None else (lambda: retarget(plan.whole(), count))
        return dataclasses.replace(plan, counts=counts, source=whole)
    moved = dataclasses.replace(plan, counts=counts)
    if plan.proved:
        moved.adopt_proof(_report_for(plan.prove(), plan, moved))
    return moved


def _report_for(report, plan, moved):
    """``report`` of ``plan`` with the byte figures of ``moved`` (its messages carry
    the same blocks, of other sizes): scaled where every block holds the count
    (exact, and free at any number of ranks), else added up message by message
    (a segmented vector: a few messages a rank)."""
    count, new_count = plan.counts[0], moved.counts[0]
    if count and _one_block_each(plan):  # (retargetable: every block holds count)
        nbytes = report.bytes // count * new_count
        wide = report.wide_area_bytes // count * new_count
    else:
        nbytes = wide = 0
        for message in moved.messages():
            nbytes += message.nbytes
            if message.wide_area:
                wide += message.nbytes
    return dataclasses.replace(report, bytes=nbytes, wide_area_bytes=wide)


def count_linear(plan, count) -> bool:
    """Whether every block of ``plan`` (:func:`retargetable`) holds ``count``
    elements, and does for any count: one block per rank (or pair of ranks), or
    an unsegmented vector. Its lowered programs then scale with the count
    (:func:`retarget_program`).

    Examples
    --------
    >>> from wacoll import Topology
    >>> from wacoll.plans import build
    >>> topo = Topology.from_sizes([2, 2])
    >>> count_linear(build("gather", topo, "magpie", root=0, count=8), 8)
    True
    >>> count_linear(build("bcast", topo, "magpie", root=0, count=8, segments=2), 8)
    False
    """
    return _one_block_each(plan) and retargetable(plan, count)


#: The most segments whose sums the compiled runner computes for any count: a
#: probe gives segment ``i`` ``2**i`` elements (:func:`probe_lowered`).
MAX_PARTS = 20


def count_parts(plan, count) -> int:
    """How the lowered indices of ``plan`` (:func:`retargetable`, built for
    ``count``, the smallest count of its size class) follow any count ``n`` of
    the class: 1 when they scale with it (:func:`count_linear`); ``s`` when the
    plan's blocks are the ``s`` segments of the vector, each index a sum of whole
    segments (``n // s`` elements each, one more for each of the first ``n % s``;
    no segment empty at ``count`` or above, and at most :data:`MAX_PARTS`); 0
    when the class's counts are lowered one by one.

    Examples
    --------
    >>> from wacoll import Topology
    >>> from wacoll.plans import build
    >>> topo = Topology.from_sizes([2, 2])
    >>> count_parts(build("gather", topo, "magpie", root=0, count=8), 8)
    1
    >>> count_parts(build("bcast", topo, "magpie", root=0, count=8, segments=2), 8)
    2
    >>> count_parts(build("bcast", topo, "magpie", root=0, count=8, segments=16), 8)
    0
    """
    if not retargetable(plan, count):
        return 0
    if _one_block_each(plan):
        return 1
    parts = len(plan.counts)
    return parts if parts <= MAX_PARTS and count >= parts else 0


def probe_lowered(plan, rank, counts):
    """``rank``'s lowered program of ``plan`` (a whole plan or a rank's part) with
    its blocks given ``counts`` elements (its structure kept, no proof asked:
    a probe of how its indices follow the block counts, never run).

    Examples
    --------
    >>> from wacoll import Topology
    >>> from wacoll.plans import build
    >>> plan = build("bcast", Topology.from_sizes([2, 2]), "magpie", root=0,
    ...              count=8, segments=2)
    >>> probe_lowered(plan, 0, (1, 2)).steps[0].elements in (1, 2, 3)
    True
    """
    program = plan.program if isinstance(plan, RankPlan) else plan.programs[rank]
    header = RankPlan(
        op=plan.op, size=plan.size, root=plan.root, counts=tuple(counts), rank=rank,
        program=(),
    )  # fmt: skip
    return lower_steps(header, rank, program)


def _one_block_each(plan) -> bool:
    """Whether ``plan``'s layout gives every block the whole count: one block per
    rank (or pair of ranks), or an unsegmented vector."""
    return spec(plan.op).layout != "segments" or len(plan.counts) == 1


def _scaled_runs(runs, scaled):
    if isinstance(runs, ElementRuns):
        starts, lengths = runs.index()
        return ElementRuns(scaled(starts), scaled(lengths))
    return tuple((scaled(a), scaled(b)) for a, b in runs)


def _scaled_where(where, scaled):
    return None if where is None else (where[0], _scaled_runs(where[1], scaled))


def _scaled_index(index, scaled):
    return None if index is None else tuple(scaled(np.asarray(a)) for a in index)


def retarget_program(program, count, new_count):
    """A :class:`~wacoll.plans.lower.LoweredProgram` of a :func:`count_linear`
    plan for ``count``, lowered with the default buffer layout, made for
    ``new_count``: every element index and length scaled by
    ``new_count / count`` (each is a multiple of ``count``: whole blocks of
    ``count`` elements), as lowering the retargeted plan would give.

    Examples
    --------
    >>> from wacoll import Topology
    >>> from wacoll.plans import build, lower
    >>> topo = Topology.from_sizes([2, 2])
    >>> plan = build("allgather", topo, "magpie", count=4)
    >>> moved = retarget_program(lower(plan, 1), 4, 6)
    >>> moved == lower(retarget(plan, 6), 1)
    True
    """

    def scaled(n):  # (exact: n is a whole number of blocks of ``count``)
        return n // count * new_count

    steps = tuple(
        dataclasses.replace(
            step,
            elements=scaled(step.elements),
            src=_scaled_where(step.src, scaled),
            dst=_scaled_where(step.dst, scaled),
            src_index=_scaled_index(step.src_index, scaled),
            dst_index=_scaled_index(step.dst_index, scaled),
        )
        for step in program.steps
    )
    return dataclasses.replace(
        program,
        steps=steps,
        scratch_sizes={k: scaled(n) for k, n in program.scratch_sizes.items()},
        in_extent=scaled(program.in_extent),
        out_extent=scaled(program.out_extent),
    )
