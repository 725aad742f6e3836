"""Sends matched with receives: the k-th send from ``a`` to ``b`` meets ``b``'s k-th
receive from ``a`` (MPI's non-overtaking rule; steps carry no tags).

:func:`pair` matches every message of a plan with sorts over arrays and refuses a
plan whose sends and receives do not pair up with exactly the errors of
:meth:`wacoll.plans.Plan.messages`: over the pairs ``(a, b)`` in sorted order and
the messages ``k`` of each, the first send nobody receives, receive nobody sends, or
message whose blocks the receive does not expect. It does not build
:class:`~wacoll.plans.plan.Message` objects (an all-to-all on 4096 ranks has 16.7
million messages); the plan still lists them on demand.

Examples
--------
>>> from wacoll import Topology
>>> from wacoll.plans import build
>>> from wacoll.plans.prover.encode import encode
>>> plan = build("gather", Topology.single(3), "mpich")
>>> matched = pair(plan, encode(plan))
>>> matched.recv_rows.tolist(), matched.recv_send.tolist()
([1, 2], [3, 4])
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from wacoll.errors import PlanError
from wacoll.plans.prover import _pairing as _compiled
from wacoll.plans.prover.encode import RECV, RECV_COMBINE, SEND, ranges

__all__ = ["Pairing", "pair"]


@dataclass(frozen=True, eq=False)
class Pairing:
    """Which send each receive meets.

    Attributes
    ----------
    send_rows, recv_rows : ndarray
        The rows of all sends and of all receives (``recv`` and ``recv_combine``), in
        row order (rank by rank, in program order).
    recv_send : ndarray
        For each receive of ``recv_rows``, the row of the send it meets.
    """

    send_rows: np.ndarray
    recv_rows: np.ndarray
    recv_send: np.ndarray


def _runs(keys):
    """Start and length of each run of equal values of a sorted array."""
    if not len(keys):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
    return starts, np.diff(np.append(starts, len(keys)))


def _unequal(plan, steps, sends, recvs):
    """Whether each pair (``sends[i]``, ``recvs[i]``) carries other blocks than the
    receive expects: other runs of blocks (folded block ids compared in the plan's
    own steps)."""
    first, block = steps.first, steps.block
    if steps.single:  # one block each: entry s is step s's block
        a, b = block[sends], block[recvs]
        bad = a != b
        folded = np.flatnonzero((a == steps.nblocks) & (a == b)) if steps.beyond else []
    else:
        bad = np.empty(len(sends), dtype=np.uint8)
        folded = np.empty(len(sends), dtype=np.uint8)
        _compiled.unequal(
            first,
            block,
            steps.length.astype(block.dtype, copy=False),
            sends.astype(np.int64, copy=False),
            recvs.astype(np.int64, copy=False),
            steps.nblocks,
            bad,
            folded,
        )
        bad = bad.view(bool)
        folded = np.flatnonzero(folded) if steps.beyond else []
    for i in folded:  # ids beyond the layout were folded: compare the real ones
        bad[i] = _blocks(plan, steps, int(sends[i])) != _blocks(
            plan, steps, int(recvs[i])
        )
    return bad


def _blocks(plan, steps, row):
    r = int(np.searchsorted(steps.start, row, side="right")) - 1
    return plan.programs[r][row - int(steps.start[r])].blocks


def _index(steps, row):
    """(rank, step index) of a row."""
    r = int(np.searchsorted(steps.start, row, side="right")) - 1
    return r, int(row - steps.start[r])


def _raise(plan, steps, a, b, k, s_row, r_row):
    """Raise the error :meth:`Plan.messages` raises for message ``k`` from ``a`` to
    ``b``: ``s_row`` or ``r_row`` is None for a missing end."""
    if r_row is None:
        _, i = _index(steps, s_row)
        raise PlanError(
            f"rank {a} step {i} sends to {b}, which never receives it", rank=a, step=i
        )
    _, j = _index(steps, r_row)
    if s_row is None:
        raise PlanError(
            f"rank {b} step {j} receives from {a}, which never sends it", rank=b, step=j
        )
    _, i = _index(steps, s_row)
    raise PlanError(
        f"rank {b} step {j} expects blocks {list(_blocks(plan, steps, r_row))} from "
        f"{a}, but its message {k} (step {i}) carries "
        f"{list(_blocks(plan, steps, s_row))}",
        rank=b,
        step=j,
    )


def _first_error(plan, steps, s_rows, s_keys, r_rows, r_keys, bad_keys):
    """Raise the first pairing error: ``s_keys``/``r_keys`` are the sorted keys
    ``a * size + b`` of the sends and receives with peers among the ranks (rows in the
    same order), ``bad_keys`` the ``(a, b, row, is_send)`` of the others."""
    size = steps.size
    s_start, s_count = _runs(s_keys)
    r_start, r_count = _runs(r_keys)
    s_unique, r_unique = s_keys[s_start], r_keys[r_start]
    keys = np.union1d(s_unique, r_unique)
    ns = np.zeros(len(keys), dtype=np.int64)
    nr = np.zeros(len(keys), dtype=np.int64)
    s_at = np.searchsorted(keys, s_unique)
    r_at = np.searchsorted(keys, r_unique)
    ns[s_at], nr[r_at] = s_count, r_count
    s_first = np.zeros(len(keys), dtype=np.int64)
    r_first = np.zeros(len(keys), dtype=np.int64)
    s_first[s_at], r_first[r_at] = s_start, r_start
    both = np.minimum(ns, nr)
    sends = s_rows[ranges(s_first, both)]
    recvs = r_rows[ranges(r_first, both)]
    unequal = np.flatnonzero(_unequal(plan, steps, sends, recvs))
    big = np.iinfo(np.int64).max
    first_k = np.where(ns != nr, both, big)
    if len(unequal):
        owner = np.repeat(np.arange(len(keys)), both)[unequal]
        offset = np.cumsum(both) - both
        k_bad = unequal - offset[owner]
        np.minimum.at(first_k, owner, k_bad)
    failing = np.flatnonzero(first_k != big)
    found = None
    if len(failing):
        i = int(failing[0])
        a, b = divmod(int(keys[i]), size)
        found = (a, b, int(first_k[i]), i)
    if bad_keys:
        a, b, row, is_send = min(bad_keys)
        if found is None or (a, b) < found[:2]:
            _raise(
                plan, steps, a, b, 0, row if is_send else None, None if is_send else row
            )
    if found is None:
        raise AssertionError("sends and receives were found unpaired, but no pair fails")
    a, b, k, i = found
    s_row = int(s_rows[s_first[i] + k]) if k < ns[i] else None
    r_row = int(r_rows[r_first[i] + k]) if k < nr[i] else None
    _raise(plan, steps, a, b, k, s_row, r_row)


def pair(plan, steps) -> Pairing:
    """Match every receive of ``plan`` with its send.

    Parameters
    ----------
    plan : wacoll.plans.Plan
    steps : wacoll.plans.prover.encode.Steps
        ``plan``'s programs as arrays.

    Returns
    -------
    Pairing

    Raises
    ------
    PlanError
        The first send nobody receives, receive nobody sends, or message with other
        blocks than its receive expects, as :meth:`wacoll.plans.Plan.messages`
        names it.
    """
    size = steps.size
    kind = steps.kind
    send_rows = np.flatnonzero(kind == SEND)
    recv_rows = np.flatnonzero((kind == RECV) | (kind == RECV_COMBINE))
    wide = np.int32 if size * size < 2**31 else np.int64
    s_peer = steps.peer[send_rows].astype(wide)
    r_peer = steps.peer[recv_rows].astype(wide)
    s_ok, r_ok = s_peer >= 0, r_peer >= 0
    s_keys = steps.rank[send_rows].astype(wide) * size + s_peer
    r_keys = r_peer * size + steps.rank[recv_rows]
    s_all, r_all = bool(s_ok.all()), bool(r_ok.all())
    s_sel = send_rows if s_all else send_rows[s_ok]
    r_sel = recv_rows if r_all else recv_rows[r_ok]
    if not s_all:
        s_keys = s_keys[s_ok]
    if not r_all:
        r_keys, r_peer = r_keys[r_ok], r_peer[r_ok]
    s_order = np.argsort(s_keys, kind="stable")
    if size <= 2**16:  # receives are in receiver order: a (radix) sort by sender
        r_order = np.argsort(r_peer.astype(np.uint16), kind="stable")
    else:
        r_order = np.argsort(r_keys, kind="stable")
    s_keys, r_keys = s_keys[s_order], r_keys[r_order]
    s_sorted, r_sorted = s_sel[s_order], r_sel[r_order]
    aligned = s_all and r_all and np.array_equal(s_keys, r_keys)
    if aligned and not _unequal(plan, steps, s_sorted, r_sorted).any():
        recv_send = np.empty(len(recv_rows), dtype=send_rows.dtype)
        recv_send[r_order] = s_sorted
        return Pairing(send_rows, recv_rows, recv_send)
    bad_keys = []
    for row in send_rows[~s_ok].tolist():
        a, i = _index(steps, row)
        bad_keys.append((a, plan.programs[a][i].peer, row, True))
    for row in recv_rows[~r_ok].tolist():
        b, j = _index(steps, row)
        bad_keys.append((plan.programs[b][j].peer, b, row, False))
    _first_error(plan, steps, s_sorted, s_keys, r_sorted, r_keys, bad_keys)
    raise AssertionError("unreachable")  # _first_error raises
