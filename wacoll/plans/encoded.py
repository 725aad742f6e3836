"""Programs held as arrays: plans whose steps are too many to make one by one.

An all-to-all of 4096 ranks has a message per pair of ranks: 33.5 million steps. As
:class:`~wacoll.plans.plan.Step` objects they take about 2 us and 400 bytes each, so
building the plan took 76 s and 15 GiB before the checker saw it. The regular
patterns among them (the flat all-to-all, the ring allgather) are instead written as
the checker's arrays (:class:`~wacoll.plans.prover.encode.Steps`) in a few numpy
operations, and a plan holds them as :class:`EncodedPrograms`: a sequence of programs
that makes a rank's :class:`~wacoll.plans.plan.Step` tuple only when someone asks for
it (lowering one rank, drawing, exporting). The checker proves the arrays directly,
and :func:`program_digests` digests them without making a step.

:func:`program_digest` is the digest of one program, made of its steps; it equals
the digest :func:`program_digests` makes of the same program held as arrays, so a
rank that builds its own program step by step can check it against the proof of the
whole plan.

Examples
--------
>>> from wacoll import Topology
>>> from wacoll.plans import build
>>> plan = build("alltoall", Topology.single(3), "mpich")
>>> type(plan.programs).__name__, [str(s) for s in plan.programs[1]]
('EncodedPrograms', ['copy [4] in -> out', 'send 0 [3] from in', 'send 2 [5] from in', 'recv 0 [1]', 'recv 2 [7]'])
>>> program_digests(plan.programs)[1] == program_digest(plan.programs[1])
True
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from itertools import chain

import numpy as np

from wacoll.plans.plan import Step
from wacoll.plans.prover.encode import (COMBINE, KIND_CODES, NO_PEER,
                                        RECV_COMBINE, Steps, index_dtype)

__all__ = ["EncodedPrograms", "single_block_steps", "program_digest", "program_digests"]

_KIND_NAMES = {code: name for name, code in KIND_CODES.items()}
_SIDES = {None: 0, "right": 1, "left": 2}


class EncodedPrograms(Sequence):
    """Every rank's program, held as :class:`~wacoll.plans.prover.encode.Steps`.

    Indexing makes rank ``r``'s tuple of :class:`~wacoll.plans.plan.Step` (not kept:
    a caller that needs it twice keeps it). The steps must have one block each and
    no arrival-order groups (the arrays keep no group numbers).
    """

    __slots__ = ("steps",)

    def __init__(self, steps: Steps):
        if not steps.single or steps.group.any():
            raise ValueError("encoded programs hold single-block steps without groups")
        self.steps = steps

    def __len__(self):
        return self.steps.size

    def __getitem__(self, rank):
        if isinstance(rank, slice):
            return tuple(self[r] for r in range(*rank.indices(len(self))))
        s = self.steps
        rank = range(s.size)[rank]
        a, b = int(s.start[rank]), int(s.start[rank + 1])
        names = s.buffers
        out = []
        for kind, peer, src, dst, left, block in zip(
                s.kind[a:b].tolist(), s.peer[a:b].tolist(), s.src[a:b].tolist(),
                s.dst[a:b].tolist(), s.left[a:b].tolist(), s.block[a:b].tolist()):
            out.append(Step(_KIND_NAMES[kind], (block,),
                            peer=None if peer == NO_PEER else peer,
                            src=None if src < 0 else names[src],
                            dst=None if dst < 0 else names[dst],
                            side=("left" if left else "right")
                            if kind in (RECV_COMBINE, COMBINE) else None))
        return tuple(out)

    def __iter__(self):
        return (self[r] for r in range(len(self)))

    def __eq__(self, other):
        if isinstance(other, EncodedPrograms) and other.steps is self.steps:
            return True
        if not isinstance(other, Sequence) or isinstance(other, str) or \
                len(other) != len(self):
            return False
        return all(tuple(a) == tuple(b) for a, b in zip(self, other))

    def __hash__(self):
        return hash((self.steps.size, self.steps.nsteps))

    def __repr__(self):
        return f"EncodedPrograms({self.steps.size} ranks, {self.steps.nsteps} steps)"


def single_block_steps(nblocks, lengths, kind, peer, src, dst, block, buffers):
    """:class:`~wacoll.plans.prover.encode.Steps` of single-block steps.

    Parameters
    ----------
    nblocks : int
        The plan's blocks.
    lengths : array_like of int
        Steps per rank.
    kind, peer, src, dst, block : ndarray
        Per step, rank by rank in program order: kind code, peer (``NO_PEER`` for a
        local step), buffer ids into ``buffers`` (-1: none), block id.
    buffers : tuple of str
        Buffer names, sorted.

    Examples
    --------
    >>> copy, send, recv = (KIND_CODES[k] for k in ("copy", "send", "recv"))
    >>> s = single_block_steps(2, [2, 1], np.array([copy, send, recv]), np.array([-1, 1, 0]),
    ...                        np.array([0, 1, -1]), np.array([1, -1, 1]),
    ...                        np.array([0, 0, 0]), ("in", "out"))
    >>> s.start.tolist(), s.rank.tolist(), s.first.tolist()
    ([0, 2, 3], [0, 0, 1], [0, 1, 2, 3])
    """
    if list(buffers) != sorted(buffers):
        raise ValueError("buffer names must be sorted")
    lengths = np.asarray(lengths, dtype=np.int64)
    size = len(lengths)
    nsteps = int(lengths.sum())
    start = np.zeros(size + 1, dtype=np.int64)
    np.cumsum(lengths, out=start[1:])
    ranks = np.int16 if size < 2**15 else index_dtype(size)
    peers = ranks if size < 2**15 - 2 else index_dtype(size)
    small = np.int16 if len(buffers) < 2**15 else np.int32
    blocks = index_dtype(nblocks)
    block = np.asarray(block).astype(blocks, copy=False)
    return Steps(
        size=size, nblocks=nblocks, start=start,
        rank=np.repeat(np.arange(size, dtype=ranks), lengths),
        kind=np.asarray(kind).astype(np.int8, copy=False),
        peer=np.asarray(peer).astype(peers, copy=False),
        src=np.asarray(src).astype(small, copy=False),
        dst=np.asarray(dst).astype(small, copy=False),
        left=np.zeros(nsteps, dtype=bool), group=np.zeros(nsteps, dtype=bool),
        first=np.arange(nsteps + 1, dtype=index_dtype(nsteps + 1)), single=True,
        beyond=bool(nsteps) and int(block.max()) >= nblocks,
        block=block, length=np.ones(nsteps, dtype=blocks), buffers=tuple(buffers))


# ------------------------------------------------------------------------ digests
_NAME_CODES = {None: 0}


def _name_code(name):
    """A buffer name as a 64-bit integer (0: no buffer)."""
    code = _NAME_CODES.get(name)
    if code is None:
        code = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little",
                              signed=True) or 1
        if len(_NAME_CODES) < 4096:
            _NAME_CODES[name] = code
    return code


def _digest(kind, side, group, peer, src, dst, nblocks, blocks):
    """The digest of one program's columns (a fixed little-endian layout)."""
    h = hashlib.sha256(b"wacoll program 1\0")
    for column, dtype in ((kind, "<i1"), (side, "<i1"), (group, "<i8"), (peer, "<i8"),
                          (src, "<i8"), (dst, "<i8"), (nblocks, "<i8"), (blocks, "<i8")):
        h.update(np.ascontiguousarray(column, dtype=dtype).tobytes())
    return h.hexdigest()


def program_digest(program) -> str:
    """The digest of one program of :class:`~wacoll.plans.plan.Step` objects.

    Examples
    --------
    >>> a = (Step("send", (0, 1), peer=1, src="in"),)
    >>> program_digest(a) == program_digest((Step("send", (0, 1), peer=1, src="out"),))
    False
    """
    m = len(program)
    try:
        return _digest(
            np.fromiter((KIND_CODES[s.kind] for s in program), np.int8, m),
            np.fromiter((_SIDES[s.side] for s in program), np.int8, m),
            np.fromiter((s.group for s in program), np.int64, m),
            np.fromiter((NO_PEER if s.peer is None else s.peer for s in program),
                        np.int64, m),
            np.fromiter((_name_code(s.src) for s in program), np.int64, m),
            np.fromiter((_name_code(s.dst) for s in program), np.int64, m),
            np.fromiter((len(s.blocks) for s in program), np.int64, m),
            np.fromiter(chain.from_iterable(s.blocks for s in program), np.int64))
    except (OverflowError, KeyError, TypeError):
        # a value no plan can hold: a digest that matches no proved program
        return hashlib.sha256(b"unprovable\0" + repr(program).encode()).hexdigest()


def program_digests(programs: EncodedPrograms) -> list:
    """The :func:`program_digest` of every rank's program, from the arrays."""
    s = programs.steps
    codes = np.array([_name_code(n) for n in s.buffers] + [0], dtype=np.int64)
    combining = (s.kind == RECV_COMBINE) | (s.kind == COMBINE)
    side = np.where(combining, np.where(s.left, 2, 1), 0).astype(np.int8)
    out = []
    for r in range(s.size):
        a, b = int(s.start[r]), int(s.start[r + 1])
        out.append(_digest(s.kind[a:b], side[a:b], np.zeros(b - a, np.int64),
                           s.peer[a:b], codes[s.src[a:b]], codes[s.dst[a:b]],
                           np.ones(b - a, np.int64), s.block[a:b]))
    return out
