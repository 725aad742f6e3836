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

from wacoll.plans.builder import RankPlan, RepeatedCounts
from wacoll.plans.operations import block_counts, spec

__all__ = ["canonical_count", "retarget", "retargetable", "structure_call"]


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
    least = 1 << ((count * itemsize).bit_length() - 1)  # bytes
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
    return _layout_counts(plan, count) == plan.counts


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
    the same blocks, of other sizes)."""
    nbytes = wide = 0
    for message in moved.messages():
        nbytes += message.nbytes
        if message.wide_area:
            wide += message.nbytes
    return dataclasses.replace(report, bytes=nbytes, wide_area_bytes=wide)
