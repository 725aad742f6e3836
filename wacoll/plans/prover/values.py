"""The values a run carries from send to receive, a visit at a time.

Each class takes the visits of :class:`wacoll.plans.prover.run.Run` in order
(``visit(run, r, lo, stop)``: rank ``r``'s steps in rows ``lo..stop-1``) and stops
the run at a step with a fault (``fault(run, f)``: the ``f``-th static fault of
:mod:`~wacoll.plans.prover.flow`, reached).

- :class:`Hops` (data movement): a block's value is its source's contribution
  wherever it is, so only the wide-area links its copy crossed differ; a receive
  adds one to the count of the write its send read when it crosses clusters, and a
  copy's count is that of the write it copies. A piece keeps the most hops of its
  blocks, which is all the report needs (the most on any path). No count can stop
  the run, so a compiled pass takes the counts after it, over its visits in order
  (``finish``).
- :class:`Reductions`: the expression of every block, step by step, with the
  checks of each combination and of each receive; :class:`BlockReductions`: the
  same, a value per block, in one compiled pass after the run, for plans it
  proves (it raises :class:`~wacoll.errors.BlockProofIncomplete` at anything else).
- :class:`Knowledge` (barrier): which ranks each rank has heard of, and over how
  many wide-area links.
- :class:`Repeats`: MagPIe's second condition, in the run's order for its examples.
"""

from __future__ import annotations

import numpy as np

from wacoll.errors import BlockProofIncomplete, UnevenPiece
from wacoll.plans.prover import _values as _compiled
from wacoll.plans.prover.encode import (
    COMBINE,
    COPY,
    RECV,
    RECV_COMBINE,
    SEND,
    distinct,
    ranges,
)
from wacoll.plans.prover.flow import (
    GROUP,
    HOLDER,
    ORDER,
    OVERLAP,
    PEER,
    STRICT,
)

__all__ = ["Hops", "Reductions", "BlockReductions", "Knowledge", "Repeats", "UNKNOWN"]

# the former names, which wacoll.plans.prove still imports from here

#: Knowledge rows: a rank not heard of (any count from here up).
UNKNOWN = 2**30


class Hops:
    """Wide-area hops of moved data (see the module docstring)."""

    def __init__(self, steps, flow):
        self.flow = flow
        self.hops = np.zeros(steps.nentries, dtype=np.int32)
        self.visits = []

    def of(self, defs):
        """The hops of the writes ``defs`` (entries, or :data:`INIT`: none)."""
        if not len(defs) or int(defs.min()) >= 0:
            return self.hops[defs]
        out = np.zeros(len(defs), dtype=np.int32)
        written = np.flatnonzero(defs >= 0)
        out[written] = self.hops[defs[written]]
        return out

    def visit(self, run, r, lo, stop):
        self.visits.append((lo, stop))

    def finish(self, run):
        """Count the hops of every receive and copy, over the visits in the run's
        order (in which every send ran before its receive), by
        :func:`wacoll.plans.prover._values.hops_in_order`."""
        visits, self.visits = self.visits, []
        if not visits:
            return
        steps = run.steps
        bounds = np.array(visits, dtype=np.int64)
        copies = np.flatnonzero(steps.kind == COPY)
        read = self.flow.read_def
        _compiled.hops_in_order(
            bounds.ravel(),
            run.recv_rows.astype(np.int64, copy=False),
            run.pairing.recv_send.astype(np.int64, copy=False),
            np.searchsorted(run.recv_rows, bounds[:, 0]).astype(np.int64),
            copies,
            np.searchsorted(copies, bounds[:, 0]).astype(np.int64),
            steps.kind,
            steps.rank,
            run.clusters,
            steps.first.astype(read.dtype, copy=False),
            np.zeros(0, dtype=np.int64) if steps.single else run.offsets,
            read,
            self.flow.writes.view(np.uint8),
            self.hops,
        )

    def fault(self, run, f):
        flow = run.flow
        row, code = int(flow.fault_rows[f]), int(flow.fault_codes[f])
        position = int(flow.fault_positions[f])
        held = run.holder(row, position) if code == HOLDER else None
        run.fail(row, code, position, held=held)


def _slot_groups(flow, nblocks):
    """The slots of each (rank, block) group side by side: the slots in group order,
    each slot's group, each group's first place and size, and its key
    ``rank * nblocks + block``."""
    nslots = len(flow.slot_rank)
    group_key = flow.slot_rank.astype(np.int64) * max(nblocks, 1) + flow.slot_block
    order = np.argsort(group_key, kind="stable")
    head = np.ones(nslots, dtype=bool)
    head[1:] = group_key[order][1:] != group_key[order][:-1]
    slot_group = np.empty(nslots, dtype=np.int64)
    slot_group[order] = np.cumsum(head) - 1
    starts = np.flatnonzero(head)
    return (
        order,
        slot_group,
        starts,
        np.diff(np.append(starts, nslots)),
        group_key[order][starts],
    )


class Reductions:
    """Reduction expressions, checked at every combination and receive.

    Parameters
    ----------
    steps, flow
        The plan's arrays and dataflow.
    exprs : wacoll.plans.prove.Expressions
        The interned expressions (leaves ``0..size-1``).
    level : str
        The level the proof keeps.
    canonical : set
        The subexpressions of the canonical expressions (level ``strict``).
    """

    def __init__(self, steps, flow, exprs, level, canonical):
        self.steps, self.flow, self.exprs = steps, flow, exprs
        self.level, self.canonical = level, canonical
        self.expr = np.full(steps.nentries, -1, dtype=np.int64)
        self.hops = np.zeros(steps.nentries, dtype=np.int32)
        nslots = len(flow.slot_rank)
        self.current = np.full(nslots, -1, dtype=np.int64)
        self.mark = np.full(nslots, -1, dtype=np.int64)
        (
            self.group_slots,
            self.slot_group,
            self.group_start,
            self.group_size,
            self.group_key,
        ) = _slot_groups(flow, steps.nblocks)
        self.pairs = {}
        self.send_of = None
        self.widest = int(self.group_size.max()) if nslots else 0

    # ------------------------------------------------------------ values
    def value(self, defs, leaf):
        """Expressions and hops of the writes ``defs`` (:data:`INIT`: rank ``leaf``'s
        contribution)."""
        some = np.maximum(defs, 0)
        return (
            np.where(defs >= 0, self.expr[some], leaf),
            np.where(defs >= 0, self.hops[some], 0),
        )

    def combine_pair(self, a, b):
        """(fault, expression) of ``a (+) b``."""
        found = self.pairs.get((a, b))
        if found is None:
            ex = self.exprs
            if ex.mask[a] & ex.mask[b]:
                found = (OVERLAP, -1)
            else:
                e = ex.make(a, b)
                if self.level == "associative" and not ex.ordered[e]:
                    found = (ORDER, e)
                elif self.level == "strict" and e not in self.canonical:
                    found = (STRICT, e)
                else:
                    found = (0, e)
            self.pairs[(a, b)] = found
        return found

    def combine(self, acc, incoming, left):
        """Combine arrays of (expression, hops): ``acc (+) incoming``, or the other
        way round when ``left``; return expressions, hops, faults and operands."""
        (ea, ha), (eb, hb) = (incoming, acc) if left else (acc, incoming)
        if len(ea) and (ea == ea[0]).all() and (eb == eb[0]).all():
            code, e = self.combine_pair(int(ea[0]), int(eb[0]))
            exprs = np.full(len(ea), e, dtype=np.int64)
            codes = np.full(len(ea), code, dtype=np.int8)
        else:
            keys = np.stack([ea, eb], axis=1)
            unique, inverse = np.unique(keys, axis=0, return_inverse=True)
            found = [self.combine_pair(int(a), int(b)) for a, b in unique.tolist()]
            exprs = np.array([e for _, e in found], dtype=np.int64)[inverse.ravel()]
            codes = np.array([c for c, _ in found], dtype=np.int8)[inverse.ravel()]
        return exprs, np.maximum(ha, hb), codes, (ea, eb)

    def holders(self, r, entries, incoming):
        """Per entry: whether rank ``r`` already holds the expression ``incoming`` of
        its block (in any buffer)."""
        flow = self.flow
        groups, sizes = self._groups(r, entries)
        found = np.zeros(len(entries), dtype=bool)
        for k in range(self.widest):  # the k-th slot of each entry's group
            has = np.flatnonzero(sizes > k)
            if not len(has):
                break
            defs = self.current[self.group_slots[self.group_start[groups[has]] + k]]
            held = np.where(defs >= 0, self.expr[np.maximum(defs, 0)], -1)
            found[has] |= (defs >= 0) & (held == incoming[has])
        blocks = self.steps.block[entries]
        ins = (
            flow.layout.in_held(np.full(len(entries), r), blocks)
            & (incoming == r)
            & (blocks < self.steps.nblocks)
        )
        return found | ins

    def _write(self, entries, exprs):
        """Make ``entries`` the current values of their slots (what a (rank, block)
        holds is read from its slots' current values: :meth:`holders`)."""
        self.current[self.flow.slot[entries]] = entries

    def _holds(self, g, x):
        """Whether a slot of (rank, block) group ``g`` holds expression ``x`` now."""
        start = int(self.group_start[g])
        for s in self.group_slots[start : start + int(self.group_size[g])].tolist():
            d = int(self.current[s])
            if d >= 0 and int(self.expr[d]) == x:
                return True
        return False

    def _groups(self, r, entries):
        """The (rank, block) group of the slots of each entry's block, and its size
        (0 when rank ``r`` has no slot of that block)."""
        slots = self.flow.slot[entries]
        groups = np.full(len(entries), -1, dtype=np.int64)
        has = slots >= 0
        if has.any():
            groups[has] = self.slot_group[slots[has]]
        nb = self.steps.nblocks
        blocks = self.steps.block[entries].astype(np.int64)
        loose = np.flatnonzero(~has & (blocks < nb))
        if len(loose) and len(self.group_key):  # received into "in": by (rank, block)
            key = r * nb + blocks[loose]
            at = np.minimum(np.searchsorted(self.group_key, key), len(self.group_key) - 1)
            groups[loose] = np.where(self.group_key[at] == key, at, -1)
        sizes = np.zeros(len(entries), dtype=np.int64)
        sizes[groups >= 0] = self.group_size[groups[groups >= 0]]
        return np.maximum(groups, 0), sizes

    def held_name(self, r, entry, incoming):
        """The first buffer, by name, in which rank ``r`` holds ``incoming`` for the
        block of ``entry``."""
        flow, steps = self.flow, self.steps
        names = []
        b = int(steps.block[entry])
        if flow.layout.in_held(np.array([r]), np.array([b]))[0] and incoming == r:
            names.append("in")
        groups, sizes = self._groups(r, np.array([entry]))
        g, size = int(groups[0]), int(sizes[0])
        for s in self.group_slots[
            self.group_start[g] : self.group_start[g] + size
        ].tolist():
            d = self.current[s]
            if d >= 0 and self.expr[d] == incoming:
                names.append(steps.buffers[flow.slot_buf[s]])
        return min(names)

    # -------------------------------------------------------------- steps
    def _eval(self, run, row, e0, e1, write):
        """Evaluate entries ``e0..e1-1`` of the step at ``row``; return their dynamic
        faults, the operands of their combinations and the buffer already holding
        the first block received again; write their values when ``write``."""
        steps, flow = self.steps, self.flow
        kind = int(steps.kind[row])
        entries = np.arange(e0, e1)
        r = int(steps.rank[row])
        codes = np.zeros(e1 - e0, dtype=np.int8)
        operands = held = None
        if kind in (RECV, RECV_COMBINE):
            at = int(np.searchsorted(run.pairing.recv_rows, row))
            send = int(run.pairing.recv_send[at])
            incoming = self.carried(run, row, send, entries)
            if run.clusters[steps.rank[send]] != run.clusters[r]:
                incoming = (incoming[0], incoming[1] + 1)
        if kind == RECV:
            expr, hops = incoming
            found = self.holders(r, entries, expr)
            codes[found] = HOLDER
            if found.any():
                i = int(np.argmax(found))
                held = self.held_name(r, e0 + i, int(expr[i]))
        elif kind == COPY:
            expr, hops = self.value(flow.read_def[entries], r)
        else:
            acc = self.value(flow.read_def[entries], r)
            if kind == COMBINE:
                incoming = self.value(flow.read2_def[entries], r)
            expr, hops, codes, operands = self.combine(
                acc, incoming, bool(steps.left[row])
            )
        if write:
            self._write(entries, expr)
            self.expr[entries] = expr
            self.hops[entries] = hops
        return codes, operands, held

    def carried(self, run, row, send, entries):
        """The expressions and hops the send at ``send`` carries for ``entries`` of
        the receive at ``row``; raise :class:`~wacoll.errors.UnevenPiece` when a
        piece gets several."""
        n = len(entries)
        lo, hi = run.sources(np.full(n, row), np.full(n, send), entries)
        sender = int(self.steps.rank[send])
        read = self.flow.read_def
        if bool((hi - lo == 1).all()):
            return self.value(read[lo], sender)
        counts = hi - lo
        expr, hops = self.value(read[ranges(lo, counts)], sender)
        heads = np.cumsum(counts) - counts
        if (expr != np.repeat(expr[heads], counts)).any():
            raise UnevenPiece()
        return expr[heads], np.maximum.reduceat(hops, heads)

    def _sequential(self, e0, e1):
        """Whether entries ``e0..e1-1`` of one step write a slot twice (then each
        block must see the ones before it)."""
        if e1 - e0 < 2:
            return False
        slots = self.flow.slot[e0:e1]
        slots = slots[slots >= 0]
        mark = self.mark
        ident = np.arange(len(slots))
        mark[slots] = ident
        return bool((mark[slots] != ident).any())

    def _fail(self, run, row, code, entry, index, operands, held):
        details = {}
        if code in (OVERLAP, ORDER):
            details = {
                "operands": (int(operands[0][index]), int(operands[1][index])),
                "exprs": self.exprs,
            }
        elif code == HOLDER:
            details = {"held": held}
        run.fail(row, code, run.position(row, entry), **details)

    def _one(self, run, row, e):
        """:meth:`_eval` of a step of one entry ``e``, without arrays (a tree's steps
        are many and small), writing its value; None when it needs arrays."""
        steps, flow = self.steps, self.flow
        kind, r = int(steps.kind[row]), int(steps.rank[row])
        read = flow.read_def
        expr, hops = self.expr, self.hops

        def value(d, leaf):
            return (int(expr[d]), int(hops[d])) if d >= 0 else (leaf, 0)

        code, operands, held = 0, None, None
        if kind in (RECV, RECV_COMBINE):
            if self.send_of is None:
                self.send_of = dict(
                    zip(run.pairing.recv_rows.tolist(), run.pairing.recv_send.tolist())
                )
            send = self.send_of[row]
            j = int(steps.first[send])
            if int(steps.first[send + 1]) - j != 1 or steps.length[j] != steps.length[e]:
                return None
            sender = int(steps.rank[send])
            incoming = value(int(read[j]), sender)
            if run.clusters[sender] != run.clusters[r]:
                incoming = (incoming[0], incoming[1] + 1)
        if kind == RECV:
            slot = int(flow.slot[e])
            if slot < 0:
                return None
            new = incoming
            if self._holds(int(self.slot_group[slot]), new[0]) or (
                new[0] == r
                and flow.layout.in_held(np.array([r]), np.array([int(steps.block[e])]))[0]
            ):
                code, held = HOLDER, self.held_name(r, e, new[0])
        elif kind == COPY:
            new = value(int(read[e]), r)
        else:
            acc = value(int(read[e]), r)
            if kind == COMBINE:
                incoming = value(int(flow.read2_def[e]), r)
            a, c = (incoming, acc) if steps.left[row] else (acc, incoming)
            code, made = self.combine_pair(a[0], c[0])
            new = (made, max(a[1], c[1]))
            operands = ([a[0]], [c[0]])
        self.current[int(flow.slot[e])] = e
        expr[e], hops[e] = new
        return code, operands, held

    def take(self, run, row, static=False):
        """Run the step at ``row``; raise at its first fault, its entries' static
        faults (``pre``, ``post`` of the flow) taken in their place among the
        dynamic ones (``static``: the step has one, so it must fail)."""
        steps, flow = self.steps, self.flow
        e0, e1 = int(steps.first[row]), int(steps.first[row + 1])
        pre, post = flow.pre, flow.post
        if e1 - e0 == 1 and not static:
            found = self._one(run, row, e0)
            if found is not None:
                code, operands, held = found
                if code:
                    self._fail(run, row, code, e0, 0, operands, held)
                return
        if self._sequential(e0, e1):
            for e in range(e0, e1):
                codes, operands, held = self._eval(run, row, e, e + 1, write=True)
                code = int(pre[e]) or int(codes[0]) or int(post[e])
                if code:
                    self._fail(run, row, code, e, 0, operands, held)
        elif e1 > e0:
            codes, operands, held = self._eval(run, row, e0, e1, write=not static)
            every = np.where(
                pre[e0:e1] != 0, pre[e0:e1], np.where(codes != 0, codes, post[e0:e1])
            )
            if every.any():
                i = int(np.argmax(every != 0))
                self._fail(run, row, int(every[i]), e0 + i, i, operands, held)
        if static:
            raise AssertionError("a static fault was not found again")

    def visit(self, run, r, lo, stop):
        kinds = self.steps.kind[lo:stop]
        for row in (lo + np.flatnonzero(kinds != SEND)).tolist():
            self.take(run, row)

    def finish(self, run):
        """Nothing is left to do after the run: values were carried visit by visit."""

    def fault(self, run, f):
        flow = run.flow
        row, code = int(flow.fault_rows[f]), int(flow.fault_codes[f])
        if code in (PEER, GROUP) or self.steps.kind[row] == SEND:
            run.fail(row, code, int(flow.fault_positions[f]))
        self.take(run, row, static=True)


class BlockReductions(Reductions):
    """Reduction expressions block by block, in one compiled pass after the run.

    :class:`Reductions` keeps one expression per piece, checks a step at a time in
    Python (some twenty numpy calls a step), and gives up when a received piece's
    blocks hold different expressions (:class:`~wacoll.errors.UnevenPiece`: the
    whole proof runs again with every block a piece, every array as long as the
    blocks). Here every block of a written piece has its own expression, so that
    pieces never need cutting again, and
    :func:`wacoll.plans.prover._values.reductions_in_order` carries them over the
    run's visits in its order with the same checks (a contribution combined twice,
    rank order, the canonical expression, a value received again). It proves a
    correct plan; at anything else (a static or dynamic fault, a deadlock, a
    failing result) it raises :class:`~wacoll.errors.BlockProofIncomplete` and the
    prover's exact pass refuses the plan with its usual error. Its values: ``val``
    (an expression per block of each written piece ``e``, from ``woff[e]`` on) and
    ``hops`` (the most wide-area hops of a piece's blocks).
    """

    def __init__(self, steps, flow, exprs, level, canonical):
        self.steps, self.flow, self.exprs = steps, flow, exprs
        self.level, self.canonical = level, canonical
        self.pairs = {}
        self.hops = np.zeros(steps.nentries, dtype=np.int32)
        (
            self.group_slots,
            self.slot_group,
            self.group_start,
            self.group_size,
            self.group_key,
        ) = _slot_groups(flow, steps.nblocks)
        lengths = np.where(flow.writes, steps.length, 0).astype(np.int64)
        self.woff = np.zeros(steps.nentries + 1, dtype=np.int64)
        np.cumsum(lengths, out=self.woff[1:])
        self.val = np.zeros(int(self.woff[-1]), dtype=np.int32)
        self.visits = []

    def visit(self, run, r, lo, stop):
        self.visits.append((lo, stop))

    def fault(self, run, f):
        raise BlockProofIncomplete(int(run.flow.fault_rows[f]))

    def finish(self, run):
        """Carry the expressions over the visits in the run's order."""
        visits, self.visits = self.visits, []
        if not visits:
            return
        steps, flow = self.steps, self.flow
        bounds = np.array(visits, dtype=np.int64)
        recv_rows = run.recv_rows.astype(np.int64, copy=False)
        offsets = (
            np.arange(steps.nentries + 1, dtype=np.int64) if steps.single else run.offsets
        )
        read2 = flow.read2_def if flow.read2_def is not None else flow.read_def[:0]
        row = _compiled.reductions_in_order(
            bounds.ravel(),
            recv_rows,
            run.pairing.recv_send.astype(np.int64, copy=False),
            np.searchsorted(recv_rows, bounds[:, 0]).astype(np.int64),
            steps.kind,
            steps.rank,
            steps.left.view(np.uint8),
            run.clusters,
            steps.first.astype(np.int64, copy=False),
            offsets,
            flow.read_def,
            read2,
            flow.slot.astype(np.int64, copy=False),
            self.slot_group,
            self.group_slots,
            self.group_start,
            self.group_size,
            self.woff,
            self.val,
            self.hops,
            np.full(len(flow.slot_rank), -1, dtype=np.int64),
            self.combine_pair,
        )
        if row >= 0:
            raise BlockProofIncomplete(row)

    def final(self, final):
        """The ``"out"`` slots of :func:`wacoll.plans.prover.results.final_out` a
        block each: ranks, blocks, ones and each block's place in ``val``."""
        ranks, blocks, lengths, last = final
        lengths = lengths.astype(np.int64)
        return (
            np.repeat(ranks, lengths),
            ranges(blocks, lengths),
            np.ones(int(lengths.sum()), dtype=np.int32),
            ranges(self.woff[last], lengths),
        )


class Knowledge:
    """A barrier's knowledge: which ranks each rank has heard of, over how many
    wide-area links (:data:`UNKNOWN`: not heard of)."""

    def __init__(self, size):
        self.rows = np.full((size, size), UNKNOWN, dtype=np.int32)
        np.fill_diagonal(self.rows, 0)
        self.messages = {}

    def visit(self, run, r, lo, stop):
        steps, cl = run.steps, run.clusters
        kinds = steps.kind[lo:stop].tolist()
        mine = self.rows[r]
        recv_at = None
        for row, kind in enumerate(kinds, lo):
            if kind == SEND:
                peer = int(steps.peer[row])
                self.messages[row] = mine + 1 if cl[r] != cl[peer] else mine.copy()
            elif kind in (RECV, RECV_COMBINE):
                if recv_at is None:
                    recv_at = int(np.searchsorted(run.pairing.recv_rows, row))
                send = int(run.pairing.recv_send[recv_at])
                recv_at += 1
                np.minimum(mine, self.messages.pop(send), out=mine)

    def finish(self, run):
        """Nothing is left to do after the run: values were carried visit by visit."""

    def fault(self, run, f):
        flow = run.flow
        run.fail(
            int(flow.fault_rows[f]),
            int(flow.fault_codes[f]),
            int(flow.fault_positions[f]),
        )


class Repeats:
    """MagPIe's second condition: whether a block enters a cluster that already has
    it (data movement) or one cluster sends a block to another twice (reductions),
    and the first 8 examples in the run's order."""

    LIMIT = 8

    def __init__(self, steps, pairing, layout, clusters, cluster_ids, reduction):
        self.steps, self.reduction = steps, reduction
        self.cluster_ids = cluster_ids
        self.layout, self.clusters = layout, clusters
        self.nclusters = int(clusters.max()) + 1 if len(clusters) else 1
        blocks, src_c, dst_c = self._events(pairing.send_rows)
        if steps.beyond:  # (blocks beyond the layout stop the run at a fault)
            valid = blocks < steps.nblocks
            blocks, src_c, dst_c = blocks[valid], src_c[valid], dst_c[valid]
        self.items = []
        self.any = bool(len(blocks)) and self._repeated(blocks, src_c, dst_c)
        self.seen = set()

    def _events(self, rows):
        """The blocks the sends at ``rows`` carry across clusters, with the clusters
        they leave and enter."""
        steps, cl = self.steps, self.clusters
        src_c = cl[steps.rank[rows]]
        dst_c = cl[np.maximum(steps.peer[rows], 0)]
        wide = src_c != dst_c
        rows, src_c, dst_c = rows[wide], src_c[wide], dst_c[wide]
        if steps.single:
            return steps.block[rows].astype(np.int64), src_c, dst_c
        first = steps.first
        count = first[rows + 1] - first[rows]
        entries = ranges(first[rows], count)
        length = steps.length[entries].astype(np.int64)
        blocks = ranges(steps.block[entries], length)
        count = np.bincount(
            np.repeat(np.arange(len(rows)), count), weights=length, minlength=len(rows)
        ).astype(np.int64)
        return blocks, np.repeat(src_c, count), np.repeat(dst_c, count)

    def _keys(self, blocks, src_c, dst_c):
        c = self.nclusters
        if self.reduction:
            return (blocks * c + src_c) * c + dst_c
        return blocks * c + dst_c

    def _repeated(self, blocks, src_c, dst_c):
        if (
            not self.reduction
            and (dst_c == self.clusters[self.layout.source(blocks)]).any()
        ):
            return True
        once = np.zeros(self.steps.nblocks, dtype=bool)
        once[blocks] = True
        if int(np.count_nonzero(once)) == len(blocks):
            return False  # every block crosses once: no key twice
        keys = self._keys(blocks, src_c, dst_c)
        space = int(keys.max()) + 1
        if space <= 2**28:
            seen = np.zeros(space, dtype=bool)
            seen[keys] = True
            return int(np.count_nonzero(seen)) < len(keys)
        return len(distinct(keys)) < len(keys)

    def visit(self, run, lo, stop):
        if not self.any or len(self.items) >= self.LIMIT:
            return
        rows = lo + np.flatnonzero(self.steps.kind[lo:stop] == SEND)
        if not len(rows):
            return
        blocks, src_c, dst_c = self._events(rows)
        keys = self._keys(blocks, src_c, dst_c).tolist()
        initial = (
            [] if self.reduction else self.clusters[self.layout.source(blocks)].tolist()
        )
        dst_c = dst_c.tolist()
        src_c = src_c.tolist()
        blocks = blocks.tolist()
        seen, ids = self.seen, self.cluster_ids
        for i, key in enumerate(keys):
            if key in seen or (not self.reduction and dst_c[i] == initial[i]):
                item = (
                    (blocks[i], ids[dst_c[i]])
                    if not self.reduction
                    else (blocks[i], ids[src_c[i]], ids[dst_c[i]])
                )
                self.items.append(item)
                if len(self.items) >= self.LIMIT:
                    return
            seen.add(key)
