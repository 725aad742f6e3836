"""The end of a run: every rank's ``"out"`` against the operation's promise, and the
report's measures.

:func:`verify` refuses a plan whose ranks end without a promised block, or (for a
reduction) with a block that lacks or repeats a contribution, is not the canonical
expression at level ``strict`` or breaks rank order at level ``associative``, or (for
a barrier) with a rank that leaves without hearing from every rank. It finds the
first such rank with arrays, then names its first block in order with the rank's
promise from :func:`wacoll.plans.operations.expected`, as the prover always did.
(A moved block always holds its source's contribution: block ids never change, and
every block has one source.)

:func:`max_hops` and :func:`measures` give the rest of
:class:`~wacoll.plans.prove.ProofReport`.
"""

from __future__ import annotations

import numpy as np

from wacoll.errors import PlanError
from wacoll.plans import operations as ops
from wacoll.plans.prover.encode import ranges
from wacoll.plans.prover.run import format_ranks, mask_ranks
from wacoll.plans.prover.values import UNKNOWN, Knowledge, Reductions

__all__ = ["final_out", "Verdicts", "first_failing", "verify", "max_hops", "measures"]


def final_out(plan, steps, flow):
    """The ``"out"`` slots a rank must end with that it wrote: their ranks, first
    blocks, numbers of blocks and last writes. (A written ``"out"`` slot has a place
    in ``"out"`` for all its blocks, or the run stopped at the write.)"""
    layout = flow.layout
    out = steps.buffer_id("out")
    chosen = (flow.slot_buf == out) & (flow.slot_last >= 0)
    ranks, blocks = flow.slot_rank[chosen], flow.slot_block[chosen]
    want = layout.out_allowed(ranks, blocks) & layout.expecting(ranks)
    last = flow.slot_last[chosen][want]
    lengths = np.ones(len(last), dtype=np.int32) if steps.single else steps.length[last]
    return ranks[want], blocks[want], lengths, last


class Verdicts:
    """Which expressions of reduced blocks fail which promise, asked once each.

    ``verdicts(e, form)`` is why expression ``e`` (of
    :class:`~wacoll.plans.prove.Expressions` ``exprs``) fails the promise ``form``
    (``("tree", n)`` or ``("fold", n)``: all of ranks ``0..n-1`` combined) at
    ``level``, or ``""`` when it does not; ``canonical`` holds the canonical
    expression of each form (level ``strict``). :func:`verify` takes it.
    """

    def __init__(self, exprs, level, canonical):
        self.exprs, self.level, self.canonical = exprs, level, canonical
        self.known = {}

    def __call__(self, e, form):
        key = (e, form)
        found = self.known.get(key)
        if found is None:
            ex = self.exprs
            full = (1 << form[1]) - 1
            mask = ex.mask[e]
            if mask != full:
                lacking = mask_ranks(full & ~mask)
                extra = mask_ranks(mask & ~full)
                found = (
                    f"lacks the contributions of ranks {format_ranks(lacking)}"
                    if lacking
                    else f"has extra contributions of ranks {format_ranks(extra)}"
                )
            elif self.level == "strict" and e != self.canonical[form]:
                found = "is not the canonical expression of level 'strict'"
            elif self.level == "associative" and not ex.ordered[e]:
                found = "is not in rank order"
            else:
                found = ""
            self.known[key] = found
        return found


def first_failing(plan, steps, flow, values, verdicts, final):
    """The first rank that ends without a promised block or with a failing value,
    or None.

    The arguments are :func:`verify`'s (``values`` needs only ``expr``, the
    expression of each write, when ``verdicts`` is given; ``final`` is required). The
    pass of :func:`wacoll.plans.prove.prove_plan` that keeps a reduction's values per
    block asks it whether any rank fails, and leaves naming the fault to the exact
    pass.
    """
    layout = flow.layout
    size = plan.size
    ranks, blocks, lengths, last = final
    held = layout.out_held(np.arange(size))
    fresh = ~held[ranks]
    if steps.single:
        covered = np.bincount(ranks[fresh], minlength=size)
    else:
        covered = np.bincount(ranks[fresh], weights=lengths[fresh], minlength=size)
    covered = np.where(held, plan.nblocks, covered)
    bad = covered < layout.expected_count()
    if verdicts is not None and len(last):
        exprs = values.expr[last]
        if plan.op in ("scan", "exscan"):
            forms = np.where(plan.op == "scan", ranks + 1, ranks)
            pairs = np.unique(np.stack([exprs, forms], axis=1), axis=0).tolist()
            failing = {(e, n) for e, n in pairs if verdicts(e, ("fold", n))}
            if failing:
                mark = np.array(
                    [
                        (int(e), int(n)) in failing
                        for e, n in zip(exprs.tolist(), forms.tolist())
                    ]
                )
                bad[ranks[mark]] = True
        else:
            form = layout.form(0)
            for e in np.flatnonzero(np.bincount(exprs)).tolist():
                if verdicts(e, form):
                    bad[ranks[exprs == e]] = True
    failing = np.flatnonzero(bad)
    return int(failing[0]) if len(failing) else None


def verify(plan, steps, flow, values, verdicts=None, *, final=None):
    """Raise :class:`PlanError` at the first rank and block that break the
    operation's promise (see the module docstring).

    Parameters
    ----------
    plan : wacoll.plans.Plan
    steps : wacoll.plans.prover.encode.Steps
    flow : wacoll.plans.prover.flow.Flow
    values : Hops, Reductions or Knowledge
        The run's values.
    verdicts : callable, optional
        ``verdicts(expression, form)``: why a reduced block fails its promise
        (``""``: it does not); reductions only.
    final : tuple, optional
        :func:`final_out` of the plan (default: computed here).
    """
    if not isinstance(values, Knowledge):
        if final is None:
            final = final_out(plan, steps, flow)
        r = first_failing(plan, steps, flow, values, verdicts, final)
        if r is not None:
            _name_block(plan, flow, values, verdicts, r, final)
    else:
        unknown = values.rows >= UNKNOWN
        lost = np.flatnonzero(unknown.any(axis=1))
        if len(lost):
            r = int(lost[0])
            missing = np.flatnonzero(unknown[r]).tolist()
            raise PlanError(
                f"rank {r} leaves the barrier without hearing from ranks "
                f"{format_ranks(missing)}",
                rank=r,
            )


def _name_block(plan, flow, values, verdicts, r, final):
    """Raise the error of rank ``r``'s first failing block."""
    ranks, blocks, lengths, last = final
    mine = ranks == r
    final = {
        b + i: d
        for b, n, d in zip(
            blocks[mine].tolist(), lengths[mine].tolist(), last[mine].tolist()
        )
        for i in range(n)
    }
    initially = bool(flow.layout.out_held(np.array([r]))[0])
    expected = ops.expected(plan.op, plan.size, plan.root, plan.nblocks, r)
    for (buf, b), want in sorted(expected.items()):
        d = final.get(b)
        if d is None and not initially:
            raise PlanError(f"rank {r} ends without block {b} in {buf!r}", rank=r)
        if verdicts is not None:
            why = verdicts(int(values.expr[d]), want)
            if why:
                raise PlanError(f"rank {r} block {b} of {buf!r} {why}", rank=r)
    raise AssertionError(f"rank {r} was found failing, but none of its blocks fails")


def max_hops(plan, steps, flow, values, *, final=None) -> int:
    """The most wide-area links on any path from a data item's source to a rank
    (``final``: :func:`final_out` of the plan, default computed here)."""
    if isinstance(values, Knowledge):
        return int(values.rows.max()) if values.rows.size else 0
    last = (final_out(plan, steps, flow) if final is None else final)[3]
    if not len(last):
        return 0
    if isinstance(values, Reductions):
        return int(values.hops[last].max())
    return int(values.of(last).max())


def measures(plan, steps, pairing, clusters) -> dict:
    """Messages and bytes (in all, across the wide area), steps and the most
    messages a rank sends."""
    rows = pairing.send_rows
    senders = steps.rank[rows]
    wide = clusters[senders] != clusters[steps.peer[rows]]
    first = steps.first
    counts = plan.counts
    uniform = len(counts) and counts.count(counts[0]) == len(counts)
    if steps.single and uniform:  # one block of counts[0] elements each
        nbytes = None
    elif uniform:  # the blocks of a message times the elements of a block
        offsets = steps.offsets()
        nbytes = (offsets[first[rows + 1]] - offsets[first[rows]]) * counts[0]
    else:
        count = first[rows + 1] - first[rows]
        entries = ranges(first[rows], count)
        before = np.zeros(len(counts) + 1, dtype=np.int64)  # elements before each block
        np.cumsum(np.asarray(counts, dtype=np.int64), out=before[1:])
        b = steps.block[entries]
        elements = before[b + steps.length[entries]] - before[b]
        running = np.zeros(len(elements) + 1, dtype=np.int64)
        np.cumsum(elements, out=running[1:])
        ends = np.cumsum(count)
        nbytes = running[ends] - running[ends - count]
    itemsize = plan.itemsize
    sends = np.bincount(senders, minlength=plan.size) if plan.size else np.zeros(1)
    crossing = int(np.count_nonzero(wide))
    if nbytes is None:
        total, wide_total = len(rows) * counts[0], crossing * counts[0]
    else:
        total, wide_total = int(nbytes.sum()), int(nbytes[wide].sum())
    return {
        "messages": len(rows),
        "bytes": total * itemsize,
        "wide_area_messages": crossing,
        "wide_area_bytes": wide_total * itemsize,
        "steps": steps.nsteps,
        "max_sends": int(sends.max()) if len(sends) else 0,
    }
