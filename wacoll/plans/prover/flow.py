"""What a rank holds when, from its own program alone.

A rank's buffers change only by its own steps, so which write each read sees is a
matter of one program: the last earlier write to the same (buffer, block), or the
operation's initial data, or nothing. :func:`analyse` answers that for every read of
every rank at once: it sorts the accesses of all programs by (rank, buffer, block),
stably, so that each (rank, buffer, block) is a run of accesses in time order, and
each read takes the last write before it in its run. Entries are times: entry ``e``
reads at ``2e`` and writes at ``2e + 1``, so that a step's blocks are taken one by
one as the prover always took them. The user's ``"in"`` buffer is never written by
a correct step, so its reads are answered by the operation's layout alone.

From that follow the faults that need no values (the *static* faults): a peer that
is no other rank, an arrival-order group below level ``commutative``, a block that
does not exist or is not held, a write to ``"in"`` or to a place ``"out"`` lacks,
combining in an operation that moves data and, for data movement (where a block's
value is always its source's contribution), receiving a block already held.

Examples
--------
>>> from wacoll import Topology
>>> from wacoll.plans import build
>>> from wacoll.plans.prover.encode import encode
>>> plan = build("bcast", Topology.single(3), "tree", tree="chain")
>>> steps = encode(plan)
>>> flow = analyse(plan, steps)
>>> [str(s) for p in plan.programs for s in p]
['send 1 [0]', 'recv 0 [0]', 'send 2 [0]', 'recv 1 [0]']
>>> flow.read_def.tolist(), flow.fault_rows.tolist()
([-1, -3, 1, -3], [])
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from wacoll.plans.prover import _flow as _compiled
from wacoll.plans.prover.encode import (
    BAD_PEER,
    COMBINE,
    COPY,
    RECV,
    RECV_COMBINE,
    index_dtype,
)
from wacoll.plans.prover.layout import Layout

__all__ = ["INIT", "MISSING", "NO_READ", "Flow", "analyse"]

#: A read that sees the operation's initial data.
INIT = -1
#: A read of a block the rank does not hold.
MISSING = -2
#: An entry without that read.
NO_READ = -3

#: Whether the compiled dataflow sorts keys that carry their access's number in
#: their low bits, in place, where they fit in 63 bits (else it sorts an order of
#: the accesses stably: more memory and time).
PACK_KEYS = True

#: Fault codes, in the order the prover takes a block's checks.
EXIST, HELD, HELD_SRC, HOLDER, MOVES, OVERLAP, ORDER, STRICT, IN, OUT, PEER, GROUP = (
    range(1, 13)
)


@dataclass(frozen=True, eq=False)
class Flow:
    """The dataflow of every program (see the module docstring).

    Attributes
    ----------
    layout : Layout
    read_def, read2_def : ndarray
        Per entry, the entry whose write its (first, second) read sees, or
        :data:`INIT`, :data:`MISSING`, :data:`NO_READ`. A step's first read is of
        ``src`` (send, copy) or ``dst`` (recv_combine, combine); only a combine
        reads twice (``read2_def`` is None when no step combines).
    writes : ndarray
        Per entry, whether it writes (a valid block, to a buffer other than ``"in"``,
        in an operation that may write so).
    slot : ndarray
        Per entry, the (rank, buffer, block) it writes, as a slot number (-1: none).
    slot_rank, slot_buf, slot_block, slot_last : ndarray
        Per slot: its rank, buffer, block and the entry of its last write (rank and
        block of the dtypes of the steps' ranks and blocks).
    pre, post : ndarray
        Per entry, the static fault before its values are combined (a missing or
        nonexistent block, combining moved data, and for data movement a block
        received again) and after (the write's faults), 0 for none.
    fault_rows, fault_codes, fault_positions : ndarray
        The steps with a static fault, in row order, the fault and the index of its
        block in the step's ``blocks`` (-1 for a fault of the whole step: peer or
        group).
    """

    layout: Layout
    read_def: np.ndarray
    read2_def: np.ndarray | None
    writes: np.ndarray
    slot: np.ndarray
    slot_rank: np.ndarray
    slot_buf: np.ndarray
    slot_block: np.ndarray
    slot_last: np.ndarray
    pre: np.ndarray
    post: np.ndarray
    fault_rows: np.ndarray
    fault_codes: np.ndarray
    fault_positions: np.ndarray


def _definitions(
    n, nb, nkey, rank, block, compact, names, reads1, reads2, writes, ident_t, *, earlier
):
    """Which write each read sees and where each write goes, by a sort of every
    access: the compiled passes of :mod:`wacoll.plans.prover._flow` lay the accesses
    out in one pass and read them, sorted, in one more.

    ``reads1``, ``reads2`` (or None) and ``writes`` are (mask, buffer ids) of the
    entries' first reads, second reads and writes to keep; ``compact`` numbers the
    buffers in the keys ``((rank * nb) + block) * nkey + buffer``, and ``names`` are
    the buffers by number.

    Returns
    -------
    read_def, read2_def : ndarray
        Per entry, the write its read sees, :data:`MISSING` (none) or
        :data:`NO_READ`; ``read2_def`` is None when ``reads2`` is.
    slot : ndarray
        Per entry, the slot (a distinct key, in key order) its write goes to, or -1.
    slot_rank, slot_block, slot_buf, slot_last : ndarray
        Per slot, its rank, block, buffer and last write (-1: none).
    earlier : ndarray or None
        When ``earlier``: per entry, whether its write's (rank, block) was written
        before in any buffer.
    """
    args, n_acc = [], 0
    for part in (reads1, reads2, writes):
        if part is None:
            args += [np.zeros(0, dtype=np.int16), np.zeros(0, dtype=np.uint8)]
            continue
        mask, buf = part
        args += [buf.astype(np.int16, copy=False), mask.view(np.uint8)]
        n_acc += int(np.count_nonzero(mask))
    keys = np.empty(n_acc, dtype=np.int64)
    ident = np.empty(n_acc, dtype=ident_t)
    what = np.empty(n_acc, dtype=np.uint8)
    # where the keys leave room, each holds its access's number in its low bits, so
    # that sorting the keys in place is a stable sort (no order array, no argsort)
    bound = (int(rank.max()) + 1) * max(nb, 1) * nkey if len(rank) else 1
    shift = max(n_acc - 1, 1).bit_length()
    if not PACK_KEYS or bound > 2 ** (63 - shift):  # (keys are below bound)
        shift = 0
    read_def = np.empty(n, dtype=ident_t)
    read2_def = np.empty(n, dtype=ident_t) if reads2 is not None else None
    slot = np.empty(n, dtype=index_dtype(n_acc + 1))
    _compiled.access_keys(
        rank,
        block,
        nb,
        *args,
        compact,
        nkey,
        keys,
        ident,
        what,
        read_def,
        read_def[:0] if read2_def is None else read2_def,
        slot,
        ident_t.type(NO_READ),
        shift,
    )
    del args
    if shift:
        keys.sort()
        order = keys[:0]
    else:
        order = np.argsort(keys, kind="stable").astype(np.int64, copy=False)
    nslots = _compiled.count_slots(keys, order, shift)
    slot_rank = np.empty(nslots, dtype=rank.dtype)
    slot_block = np.empty(nslots, dtype=block.dtype)
    slot_buf = np.empty(nslots, dtype=np.int16)
    slot_last = np.empty(nslots, dtype=ident_t)
    written_before = np.zeros(n if earlier else 0, dtype=np.uint8)
    _compiled.defs_after_sort(
        keys,
        ident,
        what,
        order,
        shift,
        nb,
        nkey,
        names if len(names) else np.zeros(1, dtype=np.int16),
        ident_t.type(MISSING),
        read_def,
        read_def[:0] if read2_def is None else read2_def,
        slot,
        slot_rank,
        slot_block,
        slot_buf,
        slot_last,
        written_before,
    )
    return (
        read_def,
        read2_def,
        slot,
        slot_rank,
        slot_block,
        slot_buf,
        slot_last,
        written_before.view(bool) if earlier else None,
    )


def analyse(plan, steps, *, layout=None, level=None) -> Flow:
    """The dataflow and static faults of ``plan`` (see the module docstring).

    Parameters
    ----------
    plan : wacoll.plans.Plan
    steps : wacoll.plans.prover.encode.Steps
        ``plan``'s programs as arrays.
    layout : Layout, optional
        The operation's :class:`~wacoll.plans.prover.layout.Layout` (default: made
        here).
    level : str, optional
        The level the proof keeps (default ``plan.level``).

    Returns
    -------
    Flow
    """
    if layout is None:
        layout = Layout(plan.op, plan.size, plan.root, plan.nblocks)
    reduction = layout.spec.kind == "reduction"
    level = plan.level if level is None else level
    nb, size, n = steps.nblocks, steps.size, steps.nentries
    nbuf = max(len(steps.buffers), 1)
    if size * nbuf * max(nb, 1) >= 2**62 or nbuf > 2**15:  # (buffer ids are int16)
        raise ValueError("too many ranks, buffers and blocks for the prover's keys")
    in_id, out_id = steps.buffer_id("in"), steps.buffer_id("out")
    ident_t = index_dtype(n + 1)
    present = np.bincount(steps.kind, minlength=5) if steps.nsteps else np.zeros(5)
    combining = bool(present[RECV_COMBINE] or present[COMBINE])
    per = steps.per_entry
    kind, rank = per(steps.kind), per(steps.rank)
    src, dst, block = per(steps.src), per(steps.dst), steps.block
    valid = block < nb if steps.beyond else None

    def ok(mask):
        return mask if valid is None else mask & valid

    # the buffers each entry reads (first, second) and writes
    read1 = (
        np.where((kind == RECV_COMBINE) | (kind == COMBINE), dst, src)
        if combining
        else src
    )
    read2 = np.where(kind == COMBINE, src, -1) if present[COMBINE] else None
    if reduction or not combining:
        writes = dst >= 0
    else:  # moved data is never combined: those steps write nothing
        writes = (kind == RECV) | (kind == COPY)
    if in_id >= 0:
        writes &= dst != in_id
    writes = ok(writes)

    def reads_of(buf):
        outside = (buf >= 0) if in_id < 0 else (buf >= 0) & (buf != in_id)
        return ok(outside)

    # the buffers in the keys ("in" is never written, so never keyed), numbered
    # 0, 1, ... in the order of their ids
    names = np.array([i for i in range(len(steps.buffers)) if i != in_id], dtype=np.int16)
    nkey = max(len(names), 1)
    compact = np.zeros(nbuf, dtype=np.int64)
    compact[names] = np.arange(len(names))

    # which write each read sees, the slots written and, for data movement, the
    # writes of a (rank, block) written before in any buffer
    read_def, read2_def, slot, slot_rank, slot_block, slot_buf, slot_last, earlier = (
        _definitions(
            n,
            nb,
            nkey,
            rank,
            block,
            compact,
            names,
            (reads_of(read1), read1),
            (reads_of(read2), read2) if read2 is not None else None,
            (writes, dst),
            ident_t,
            earlier=not reduction,
        )
    )

    # a read sees the last write before it, else the initial data or nothing
    # (rank is bound now: the arrays are deleted below, once read)
    def resolve(out, buf, rank=rank):
        if layout.op == "bcast":
            unseen = np.flatnonzero(out == MISSING)
            out[unseen[(buf[unseen] == out_id) & layout.out_held(rank[unseen])]] = INIT
        reads_in = np.flatnonzero(ok(buf == in_id)) if in_id >= 0 else []
        if len(reads_in):
            out[reads_in] = np.where(
                layout.in_held(rank[reads_in], block[reads_in]), INIT, MISSING
            )

    resolve(read_def, read1)
    if read2 is not None:
        resolve(read2_def, read2)
    pre = np.zeros(n, dtype=np.int8)
    # a received block already held, for data movement (values are sources)
    if not reduction:
        recv = np.flatnonzero(ok(kind == RECV))
        if len(recv) == int(np.count_nonzero(writes[recv])):
            # every receive writes: a block held before is an earlier write of the
            # (rank, block) in any buffer
            prior = earlier[recv]
        else:  # a receive into "in": any earlier write of the (rank, block)
            wherew = np.flatnonzero(writes)
            times = np.concatenate(
                (2 * wherew.astype(np.int64) + 1, 2 * recv.astype(np.int64))
            )
            key2 = np.concatenate(
                (
                    rank[wherew].astype(np.int64) * nb + block[wherew],
                    rank[recv].astype(np.int64) * nb + block[recv],
                )
            )
            by_time = np.argsort(times, kind="stable")  # (two sorted lists merged)
            order2 = by_time[np.argsort(key2[by_time], kind="stable")]
            del by_time
            key2, written = key2[order2], order2 < len(wherew)
            at = np.arange(len(order2))
            run2 = np.maximum.accumulate(
                np.where(np.concatenate(([True], key2[1:] != key2[:-1])), at, 0)
            )
            seen = np.maximum.accumulate(np.where(written, at, -1))
            prior = np.zeros(len(order2), dtype=bool)
            prior[order2] = seen >= run2
            prior = prior[len(wherew) :]
        initially = layout.in_held(rank[recv], block[recv])
        if layout.op == "bcast":
            initially |= layout.out_held(rank[recv])
        pre[recv[prior | initially]] = HOLDER
        if combining:
            pre[np.flatnonzero((kind == RECV_COMBINE) | (kind == COMBINE))] = MOVES
    del earlier
    # static faults of the entries, in the order the checks are taken
    if read2_def is not None:
        pre[read2_def == MISSING] = HELD_SRC
    pre[read_def == MISSING] = HELD
    post = np.zeros(n, dtype=np.int8)
    later = {}  # entry -> index of its first block without a place in "out", when > 0
    if out_id >= 0:
        outs = np.flatnonzero(ok(dst == out_id))
        lengths = steps.length[outs]
        at = layout.first_disallowed(rank[outs], block[outs], lengths)
        bad = at < lengths
        post[outs[bad]] = OUT
        inner = bad & (at > 0)
        later = dict(zip(outs[inner].tolist(), at[inner].tolist()))
    if in_id >= 0:
        post[dst == in_id] = IN
    if valid is not None:
        beyond = np.flatnonzero(~valid)
        is_recv = kind[beyond] == RECV
        pre[beyond[~is_recv]] = EXIST
        post[beyond[is_recv]] = EXIST
    del kind, rank, src, dst
    # the first static fault of each step: its own (peer, group), else an entry's
    step_code = np.zeros(steps.nsteps, dtype=np.int8)
    if level != "commutative":
        step_code[steps.group] = GROUP
    talks = steps.kind <= RECV_COMBINE
    step_code[talks & ((steps.peer == BAD_PEER) | (steps.peer == steps.rank))] = PEER
    bad = np.flatnonzero(pre | post)
    rows = np.searchsorted(steps.first, bad, side="right") - 1
    head = np.ones(len(rows), dtype=bool)
    head[1:] = rows[1:] != rows[:-1]
    rows, bad = rows[head], bad[head]
    step_faults = np.flatnonzero(step_code)
    faulty = (
        np.union1d(step_faults, rows).astype(np.int64)
        if len(step_faults) or len(rows)
        else np.zeros(0, dtype=np.int64)
    )
    codes = step_code[faulty]
    position = np.full(len(faulty), -1, dtype=np.int64)
    from_entry = codes == 0
    entry = bad[np.searchsorted(rows, faulty[from_entry])]
    codes[from_entry] = np.where(pre[entry] != 0, pre[entry], post[entry])
    if len(entry):
        offsets = steps.offsets()
        within = [later.get(e, 0) if pre[e] == 0 else 0 for e in entry.tolist()]
        position[from_entry] = (
            offsets[entry]
            - offsets[steps.first[faulty[from_entry]]]
            + np.array(within, dtype=np.int64)
        )
    return Flow(
        layout=layout,
        read_def=read_def,
        read2_def=read2_def,
        writes=writes,
        slot=slot,
        slot_rank=slot_rank,
        slot_buf=slot_buf,
        slot_block=slot_block,
        slot_last=slot_last,
        pre=pre,
        post=post,
        fault_rows=faulty,
        fault_codes=codes,
        fault_positions=position,
    )
