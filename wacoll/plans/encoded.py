"""Programs held as arrays: plans whose steps are too many to make one by one.

An all-to-all of 4096 ranks has a message per pair of ranks: 33.5 million steps. As
:class:`~wacoll.plans.plan.Step` objects they take about 2 us and 400 bytes each, so
building the plan took 76 s and 15 GiB before the prover saw it. The regular
patterns among them (the flat all-to-all, the ring allgather) are instead written as
the prover's arrays (:class:`~wacoll.plans.prover.encode.Steps`) in a few numpy
operations, and a plan holds them as :class:`EncodedPrograms`: a sequence of programs
that makes a rank's :class:`~wacoll.plans.plan.Step` tuple only when someone asks for
it (lowering one rank, drawing, exporting). The prover proves the arrays directly,
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
import re
from collections.abc import Sequence
from itertools import chain

import numpy as np

from wacoll.plans.blockruns import BlockRuns, block_chunks
from wacoll.plans.plan import Step
from wacoll.plans.prover.encode import (
    COMBINE,
    COPY,
    KIND_CODES,
    NO_PEER,
    RECV,
    RECV_COMBINE,
    SEND,
    Steps,
    index_dtype,
)

__all__ = ["EncodedPrograms", "single_block_steps", "program_digest", "program_digests"]

_KIND_NAMES = {code: name for name, code in KIND_CODES.items()}
_SIDES = {None: 0, "right": 1, "left": 2}
_BUFFER_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


class EncodedPrograms(Sequence):
    """Every rank's program, held as :class:`~wacoll.plans.prover.encode.Steps`.

    Indexing makes rank ``r``'s tuple of :class:`~wacoll.plans.plan.Step` (not kept:
    a caller that needs it twice keeps it). The steps must have one block each and
    no arrival-order groups (the arrays keep no group numbers).
    """

    __slots__ = ("steps", "_hash")

    def __init__(self, steps: Steps):
        _validate(steps)
        for value in vars(steps).values():
            if isinstance(value, np.ndarray):
                value.setflags(write=False)  # the plan is immutable
        self.steps = steps
        self._hash = None

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
            s.kind[a:b].tolist(),
            s.peer[a:b].tolist(),
            s.src[a:b].tolist(),
            s.dst[a:b].tolist(),
            s.left[a:b].tolist(),
            s.block[a:b].tolist(),
        ):
            out.append(
                Step(
                    _KIND_NAMES[kind],
                    (block,),
                    peer=None if peer == NO_PEER else peer,
                    src=None if src < 0 else names[src],
                    dst=None if dst < 0 else names[dst],
                    side=("left" if left else "right")
                    if kind in (RECV_COMBINE, COMBINE)
                    else None,
                )
            )
        return tuple(out)

    def __iter__(self):
        return (self[r] for r in range(len(self)))

    def __eq__(self, other):
        if isinstance(other, EncodedPrograms):
            a, b = self.steps, other.steps
            return a is b or (
                a.buffers == b.buffers
                and all(
                    np.array_equal(getattr(a, name), getattr(b, name))
                    for name in ("start", "kind", "peer", "src", "dst", "left", "block")
                )
            )
        if (
            not isinstance(other, Sequence)
            or isinstance(other, str)
            or len(other) != len(self)
        ):
            return False
        return all(tuple(a) == tuple(b) for a, b in zip(self, other))

    def __hash__(self):
        # equal to the hash of the same programs held as tuples of steps
        if self._hash is None:
            self._hash = hash(tuple(self))
        return self._hash

    def __repr__(self):
        return f"EncodedPrograms({self.steps.size} ranks, {self.steps.nsteps} steps)"


def _validate(steps):
    """Refuse arrays that no single-block program of steps could give (a few numpy
    passes: the builders make valid ones; the class is public)."""
    s = steps
    n, size = s.nsteps, s.size

    def fail(what):
        raise ValueError(f"encoded programs: {what}")

    if not s.single or s.group.any():
        fail("steps must have one block each and no arrival-order groups")
    if (
        len(s.start) != size + 1
        or s.start[0] != 0
        or s.start[-1] != n
        or (np.diff(s.start) < 0).any()
    ):
        fail("start does not number the steps rank by rank")
    # (the arrays in the steps' own dtypes: on 4096 ranks, 33.5 million ids)
    ranks = np.arange(size, dtype=s.rank.dtype)
    if not np.array_equal(s.rank, np.repeat(ranks, np.diff(s.start))):
        fail("rank disagrees with start")
    if not (
        np.array_equal(s.first, np.arange(n + 1, dtype=s.first.dtype))
        and (s.length == 1).all()
    ):
        fail("every step must be one entry of one block")
    if len(s.block) and int(s.block.min()) < 0:
        fail("negative block ids")
    if list(s.buffers) != sorted(set(s.buffers)) or not all(
        isinstance(b, str) and _BUFFER_NAME.match(b) for b in s.buffers
    ):
        fail("buffer names must be distinct, sorted and valid")
    kind = s.kind
    if n and (int(kind.min()) < 0 or int(kind.max()) > COMBINE):
        fail("unknown step kinds")
    talks = kind <= RECV_COMBINE
    if (s.peer[~talks] != NO_PEER).any() or (
        (s.peer[talks] < 0) | (s.peer[talks] >= size)
    ).any():
        fail("a peer must name a rank exactly for sends and receives")
    nbuf = len(s.buffers)
    for name, needed in (
        ("src", (kind == SEND) | (kind == COPY) | (kind == COMBINE)),
        ("dst", kind >= RECV),
    ):
        ids = getattr(s, name)
        if (ids[~needed] != -1).any() or (
            (ids[needed] < 0) | (ids[needed] >= nbuf)
        ).any():
            fail(f"{name} must name a buffer exactly where the kind needs one")
    if s.left[(kind != RECV_COMBINE) & (kind != COMBINE)].any():
        fail("only combining steps have a side")


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
        size=size,
        nblocks=nblocks,
        start=start,
        rank=np.repeat(np.arange(size, dtype=ranks), lengths),
        kind=np.asarray(kind).astype(np.int8, copy=False),
        peer=np.asarray(peer).astype(peers, copy=False),
        src=np.asarray(src).astype(small, copy=False),
        dst=np.asarray(dst).astype(small, copy=False),
        left=np.zeros(nsteps, dtype=bool),
        group=np.zeros(nsteps, dtype=bool),
        first=np.arange(nsteps + 1, dtype=index_dtype(nsteps + 1)),
        single=True,
        beyond=bool(nsteps) and int(block.max()) >= nblocks,
        block=block,
        length=np.ones(nsteps, dtype=blocks),
        buffers=tuple(buffers),
    )


# ------------------------------------------------------------------------ digests
def _digest(names, kind, side, group, peer, src, dst, nblocks, blocks):
    """The digest of one program: its numbers of steps and blocks, the names of the
    buffers it uses (sorted), then its columns in a fixed little-endian layout, the
    buffers as indices into those names (-1: none). ``blocks`` is an array, or an
    iterable of arrays that follow one another (hashed a step at a time)."""
    h = hashlib.sha256(b"wacoll program 2\0")
    total = int(np.sum(nblocks))
    h.update(np.array([len(kind), total, len(names)], dtype="<i8").tobytes())
    h.update("\0".join(names).encode() + b"\0")
    for column, dtype in (
        (kind, "<i1"),
        (side, "<i1"),
        (group, "<i8"),
        (peer, "<i8"),
        (src, "<i8"),
        (dst, "<i8"),
        (nblocks, "<i8"),
    ):
        h.update(np.ascontiguousarray(column, dtype=dtype).tobytes())
    for chunk in (blocks,) if isinstance(blocks, np.ndarray) else blocks:
        h.update(np.ascontiguousarray(chunk, dtype="<i8").tobytes())
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
        names = sorted(({s.src for s in program} | {s.dst for s in program}) - {None})
        index = {name: i for i, name in enumerate(names)}
        index[None] = -1
        return _digest(
            names,
            np.fromiter((KIND_CODES[s.kind] for s in program), np.int8, m),
            np.fromiter((_SIDES[s.side] for s in program), np.int8, m),
            np.fromiter((s.group for s in program), np.int64, m),
            np.fromiter(
                (NO_PEER if s.peer is None else s.peer for s in program), np.int64, m
            ),
            np.fromiter((index[s.src] for s in program), np.int64, m),
            np.fromiter((index[s.dst] for s in program), np.int64, m),
            np.fromiter((len(s.blocks) for s in program), np.int64, m),
            _program_blocks(program),
        )
    except (OverflowError, KeyError, TypeError):
        # a value no plan can hold: a digest that matches no proved program
        return hashlib.sha256(b"unprovable\0" + repr(program).encode()).hexdigest()


def _program_blocks(program):
    """A program's block ids: one array, or per step when some are held as runs
    (their ids in one array could take more memory than the whole program)."""
    if not any(type(s.blocks) is BlockRuns for s in program):
        return np.fromiter(chain.from_iterable(s.blocks for s in program), np.int64)
    return (chunk for s in program for chunk in block_chunks(s.blocks))


def program_digests(programs: EncodedPrograms) -> list:
    """The :func:`program_digest` of every rank's program, from the arrays."""
    s = programs.steps
    combining = (s.kind == RECV_COMBINE) | (s.kind == COMBINE)
    side = np.where(combining, np.where(s.left, 2, 1), 0).astype(np.int8)
    out = []
    for r in range(s.size):
        a, b = int(s.start[r]), int(s.start[r + 1])
        src, dst = s.src[a:b], s.dst[a:b]
        used = np.union1d(src, dst)
        used = used[used >= 0]  # ids in name order: the buffers are sorted by name

        def local(ids, used=used):
            return np.where(ids >= 0, np.searchsorted(used, ids), -1)

        out.append(
            _digest(
                [s.buffers[i] for i in used.tolist()],
                s.kind[a:b],
                side[a:b],
                np.zeros(b - a, np.int64),
                s.peer[a:b],
                local(src),
                local(dst),
                np.ones(b - a, np.int64),
                s.block[a:b],
            )
        )
    return out
