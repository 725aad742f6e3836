"""The ranks run in the prover's order, a stretch of a program at a time.

The prover has always run the ranks from a work queue: it takes the next rank and
runs its program until a receive finds no message (the rank then waits for that
peer) or the program ends; a send to a rank that waits for the sender puts that
rank at the back of the queue. :class:`Run` keeps that order exactly, so that the
first fault it meets is the one the prover always reported, but it runs each
*visit* (the stretch of steps a rank runs before it waits) with arrays: where the
visit stops (the first receive whose send has not run, or the first step with a
static fault from :mod:`~wacoll.plans.prover.flow`), which ranks it wakes, and the
values its receives carry:

- data movement: a block's value is its source's contribution, so a receive only
  carries the number of wide-area links its data crossed;
- reductions: the expression each block holds, interned by
  :class:`wacoll.plans.prove.Expressions`, with the checks of every combination (each
  contribution once, rank order, the canonical expression) and of every receive (a
  value received again);
- barrier: the knowledge of which ranks have arrived, one row of a matrix per rank.

MagPIe's repeated data needs the order too, but only for its first examples: when
no block is sent twice into a cluster (or between two clusters, for reductions) the
run does not look at the wide-area messages one by one.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from wacoll.errors import PlanError
from wacoll.plans.prover.flow import (
    EXIST,
    GROUP,
    HELD,
    HELD_SRC,
    HOLDER,
    IN,
    MOVES,
    ORDER,
    OUT,
    OVERLAP,
    PEER,
    STRICT,
)

__all__ = ["Run", "fault_text", "mask_ranks", "format_ranks"]


def mask_ranks(mask):
    """The ranks of the set bits of ``mask`` (bit ``r``: rank ``r``), in order.

    Examples
    --------
    >>> mask_ranks(0b1011)
    [0, 1, 3]
    """
    out, r = [], 0
    while mask:
        if mask & 1:
            out.append(r)
        mask >>= 1
        r += 1
    return out


def format_ranks(ranks, limit=6):
    """``ranks`` for a message: the first ``limit`` of them, then ``...`` if more.

    Examples
    --------
    >>> format_ranks([0, 1, 3]), format_ranks(list(range(9)), limit=3)
    ('0, 1, 3', '0, 1, 2, ...')
    """
    text = ", ".join(map(str, ranks[:limit]))
    return text + (", ..." if len(ranks) > limit else "")


def fault_text(code, *, plan, r, step, b=None, operands=None, exprs=None, held=None):
    """The text of a fault of ``step`` (of rank ``r``) on block ``b``."""
    if code == PEER:
        return f"peer {step.peer} is not another rank of 0..{plan.size - 1}"
    if code == GROUP:
        return "arrival-order combining needs level 'commutative'"
    if code == EXIST:
        return f"block {b} does not exist (the plan has {plan.nblocks})"
    if code in (HELD, HELD_SRC):
        buf = step.src if code == HELD_SRC or step.kind in ("send", "copy") else step.dst
        return f"reads block {b} of {buf!r}, which rank {r} does not hold"
    if code == HOLDER:
        return (
            f"receives block {b} into {step.dst!r}, but rank {r} already holds that "
            f"data in {held!r} (a block sent twice)"
        )
    if code == MOVES:
        return f"{plan.op} moves data and cannot combine it"
    if code == OVERLAP:
        a, c = operands
        return (
            f"combines the contribution of rank "
            f"{format_ranks(mask_ranks(exprs.mask[a] & exprs.mask[c]))} twice"
        )
    if code == ORDER:
        a, c = operands
        return (
            f"puts ranks {exprs.lo[a]}..{exprs.hi[a]} before ranks "
            f"{exprs.lo[c]}..{exprs.hi[c]}, breaking rank order (level "
            f"'associative' keeps operands in rank order)"
        )
    if code == STRICT:
        return (
            "computes a combination that is not part of the canonical expression "
            "(level 'strict' needs the one fixed expression)"
        )
    if code == IN:
        return "writes to 'in', the user's read-only send buffer"
    if code == OUT:
        return f"writes block {b} to 'out', which has no place for it on rank {r}"
    raise AssertionError(f"unknown fault {code}")


class Run:
    """One run of every program (see the module docstring).

    Parameters
    ----------
    plan : wacoll.plans.Plan
    steps : wacoll.plans.prover.encode.Steps
    pairing : wacoll.plans.prover.pairing.Pairing
    flow : wacoll.plans.prover.flow.Flow
    clusters : ndarray
        The cluster of each rank, numbered ``0, 1, ...``.
    values : object
        The values the run carries: :class:`wacoll.plans.prover.values.Hops`,
        :class:`~wacoll.plans.prover.values.Reductions` or
        :class:`~wacoll.plans.prover.values.Knowledge`; their ``visit(run, r, lo,
        stop)`` takes a visit's steps, ``fault(run, row)`` the step where a
        static fault stops the run, and ``finish(run)`` ends a run without a fault.
    repeats : wacoll.plans.prover.values.Repeats or None
        Records MagPIe's repeated data in the run's order, when there is some.
    """

    def __init__(self, plan, steps, pairing, flow, clusters, values, repeats=None):
        self.plan, self.steps, self.pairing, self.flow = plan, steps, pairing, flow
        self.values, self.repeats = values, repeats
        self.clusters = clusters
        size = steps.size
        start = steps.start
        self.start = start.tolist()
        recv_rows, send_rows = pairing.recv_rows, pairing.send_rows
        self.recv_rows = recv_rows
        senders = steps.rank[pairing.recv_send]
        self.recv_sender = senders.astype(np.int64)
        self.recv_sendidx = pairing.recv_send - start[senders]
        self.send_rows = send_rows
        self.recv_at = np.searchsorted(recv_rows, start).tolist()
        self.send_at = np.searchsorted(send_rows, start).tolist()
        self.fault_at = np.searchsorted(flow.fault_rows, start).tolist()
        self.fault_rows = flow.fault_rows.tolist()
        self.offsets = None if steps.single else steps.offsets()
        self.pc = np.zeros(size, dtype=np.int64)
        self.waiting = np.full(size, -1, dtype=np.int64)
        self.waiters = [0] * size
        self.visits = 0

    # ------------------------------------------------------------ the order
    def _blocked(self, c, end):
        """The first receive ``c..end-1`` (indices into the receives) whose send has
        not run, or ``end``."""
        pc, sender, index = self.pc, self.recv_sender, self.recv_sendidx
        width = 8
        while c < end:
            stop = min(c + width, end)
            ready = pc[sender[c:stop]] > index[c:stop]
            if not ready.all():
                return c + int(np.argmin(ready))
            c = stop
            width *= 4
        return end

    def _wake(self, r, lo, stop):
        """Queue the ranks that wait for ``r`` and get a message in rows ``lo..stop-1``."""
        s0 = self.send_at[r]
        s1 = int(np.searchsorted(self.send_rows, stop))
        self.send_at[r] = s1
        if not self.waiters[r] or s1 == s0:
            return
        peers = self.steps.peer[self.send_rows[s0:s1]]
        woken = peers[self.waiting[peers] == r]
        if not len(woken):
            return
        if len(woken) > 1:  # each once, in the order of the sends
            _, first = np.unique(woken, return_index=True)
            woken = woken[np.sort(first)]
        for q in woken.tolist():
            self.waiting[q] = -1
            self.waiters[r] -= 1
            self.queue.append(q)

    def run(self):
        """Run every program; raise :class:`PlanError` at the first fault or at a
        deadlock."""
        steps = self.steps
        size = steps.size
        start, recv_rows, fault_rows = self.start, self.recv_rows, self.fault_rows
        flow_codes = self.flow.fault_codes
        recv_end = self.recv_at[1:] + [len(recv_rows)]
        fault_end = self.fault_at[1:] + [len(fault_rows)]
        pc = self.pc
        self.queue = queue = deque(range(size))
        values, repeats = self.values, self.repeats
        while queue:
            r = queue.popleft()
            lo, hi = start[r] + int(pc[r]), start[r + 1]
            if lo >= hi:
                continue
            self.visits += 1
            c = self.recv_at[r]
            k = self._blocked(c, recv_end[r])
            stop = int(recv_rows[k]) if k < recv_end[r] else hi
            f = self.fault_at[r]
            fault = None
            if f < fault_end[r]:
                row = fault_rows[f]
                if row < stop or (row == stop and flow_codes[f] in (PEER, GROUP)):
                    stop, fault = row, f
            if stop > lo:
                values.visit(self, r, lo, stop)
                if repeats is not None:
                    repeats.visit(self, lo, stop)
            if fault is not None:
                values.fault(self, fault)
                raise AssertionError("a static fault did not stop the run")
            self._wake(r, lo, stop)
            pc[r] = stop - start[r]
            self.recv_at[r] = k
            if stop < hi:
                peer = int(steps.peer[stop])
                self.waiting[r] = peer
                self.waiters[peer] += 1
        stuck = np.flatnonzero(pc < np.diff(steps.start)).tolist()
        if stuck:
            self._deadlock(stuck)
        values.finish(self)

    def _deadlock(self, stuck):
        programs = self.plan.programs
        pc = self.pc
        parts = [
            f"rank {r} waits at step {pc[r]} ({programs[r][pc[r]]})" for r in stuck[:4]
        ]
        more = f" and {len(stuck) - 4} more" if len(stuck) > 4 else ""
        r = stuck[0]
        raise PlanError(
            "deadlock: " + "; ".join(parts) + more + " for messages that are never sent",
            rank=r,
            step=int(pc[r]),
        )

    # --------------------------------------------------------------- faults
    def where(self, row):
        """(rank, step index, Step) of a row."""
        r = int(np.searchsorted(self.steps.start, row, side="right")) - 1
        i = row - self.start[r]
        return r, i, self.plan.programs[r][i]

    def fail(self, row, code, position=-1, **details):
        """Raise the fault ``code`` of the step at ``row`` (on its block at index
        ``position`` of its ``blocks``)."""
        r, i, step = self.where(row)
        b = step.blocks[position] if position >= 0 else None
        text = fault_text(code, plan=self.plan, r=r, step=step, b=b, **details)
        raise PlanError(f"rank {r} step {i} ({step}): {text}", rank=r, step=i)

    def position(self, row, entry):
        """The index in the ``blocks`` of the step at ``row`` of the first block of
        its ``entry``."""
        if self.offsets is None:
            return int(entry - self.steps.first[row])
        return int(self.offsets[entry] - self.offsets[self.steps.first[row]])

    def holder(self, row, position):
        """The buffer in which the rank of ``row`` holds the block at ``position``
        when that step receives it (data movement, where all copies of a block are
        equal): the first such buffer by name."""
        r, i, step = self.where(row)
        b = step.blocks[position]
        layout = self.flow.layout
        held = set()
        if layout.in_held(np.array([r]), np.array([b]))[0]:
            held.add("in")
        if layout.out_held(np.array([r]))[0]:
            held.add("out")
        for earlier in self.plan.programs[r][:i]:
            if earlier.kind in ("recv", "copy") and b in earlier.blocks:
                held.add(earlier.dst)
        if b in step.blocks[:position]:
            held.add(step.dst)
        return min(held)

    # --------------------------------------------------------------- helpers
    def sources(self, rows, sends, entries):
        """For entries of the receives at ``rows`` (one row and its send per entry),
        the entries ``lo..hi-1`` of the sends at ``sends`` that carry their blocks
        (a message's pieces differ at its two ends)."""
        steps = self.steps
        if steps.single:
            return sends, sends + 1
        off, first, length = self.offsets, steps.first, steps.length
        start = first[sends]
        at = off[start] + off[entries] - off[first[rows]]
        # most often the two ends cut a message alike: the same entry number
        lo = start + (entries - first[rows])
        lo = np.minimum(lo, len(length) - 1)
        hi = lo + 1
        other = np.flatnonzero((off[lo] != at) | (length[lo] != length[entries]))
        if len(other):
            at = at[other]
            lo[other] = np.searchsorted(off, at, side="right") - 1
            hi[other] = np.searchsorted(off, at + length[entries[other]], side="left")
        return lo, hi
