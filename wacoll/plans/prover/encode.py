"""Plan programs as arrays: a row per step, and a row per block of a step (an *entry*).

Steps are numbered rank by rank in program order (rank ``r``'s steps are rows
``start[r]`` to ``start[r + 1] - 1``). A step's ``blocks`` are cut into entries, runs
of consecutive block ids (``(0, 1, 2, 7)`` is two entries: 3 blocks from 0, 1 from
7), numbered step by step in the order of the blocks (step ``s``'s entries are
``first[s]`` to ``first[s + 1] - 1``), so that row and entry numbers order one
rank's steps and blocks by time. Buffer names become
small integers, in the order of their names (``buffers`` lists them by id). Values that no plan can use are
folded so that the arrays stay small: a peer outside ``0..size-1`` becomes
:data:`BAD_PEER` and a block id beyond the layout becomes ``nblocks``; the prover
takes such values from the plan's steps when it names them in an error.

Reading the attributes of 33.5 million steps (an all-to-all on 4096 ranks) is most
of the cost of this module: the compiled reader :mod:`wacoll.plans.prover._encode`
reads a step's slots where they are in the object, about 0.03 us a step (Python,
reading each attribute once with ``map`` over a whole program, takes 0.4 us).

Examples
--------
>>> from wacoll import Topology
>>> from wacoll.plans import build
>>> steps = encode(build("allgather", Topology.single(2), "mpich"))
>>> steps.kind.tolist(), steps.peer.tolist(), steps.block.tolist()
([3, 0, 1, 3, 0, 1], [-1, 1, 1, -1, 0, 0], [0, 0, 1, 1, 1, 0])
>>> [steps.buffers[i] for i in steps.src[:2]], steps.start.tolist()
(['in', 'out'], [0, 3, 6])
>>> steps = encode(build("allgather", Topology.from_sizes([2, 2]), "magpie"))
>>> str(build("allgather", Topology.from_sizes([2, 2]), "magpie").programs[0][4])
'send 1 [0,2,3]'
>>> at = slice(steps.first[4], steps.first[5])
>>> steps.block[at].tolist(), steps.length[at].tolist()
([0, 2], [1, 2])
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from wacoll.plans.prover import _encode as _compiled

__all__ = [
    "SEND",
    "RECV",
    "RECV_COMBINE",
    "COPY",
    "COMBINE",
    "KIND_CODES",
    "NO_PEER",
    "BAD_PEER",
    "Steps",
    "encode",
    "ranges",
    "distinct",
    "index_dtype",
]

SEND, RECV, RECV_COMBINE, COPY, COMBINE = range(5)
#: Step kind -> code.
KIND_CODES = {
    "send": SEND,
    "recv": RECV,
    "recv_combine": RECV_COMBINE,
    "copy": COPY,
    "combine": COMBINE,
}
#: The peer of a local step.
NO_PEER = -1
#: A peer that is no rank of the plan.
BAD_PEER = -2


def index_dtype(largest):
    """``int32`` if ``largest`` fits, else ``int64``.

    Examples
    --------
    >>> index_dtype(5), index_dtype(2**40)
    (dtype('int32'), dtype('int64'))
    """
    return np.dtype(np.int32 if largest < 2**31 - 1 else np.int64)


def distinct(values):
    """The distinct values, sorted (a stable sort, fast on the nearly sorted arrays
    the prover has, where ``np.unique`` is not).

    Examples
    --------
    >>> distinct(np.array([3, 1, 3, 2])).tolist()
    [1, 2, 3]
    """
    values = np.sort(values, kind="stable")
    keep = np.ones(len(values), dtype=bool)
    np.not_equal(values[1:], values[:-1], out=keep[1:])
    return values[keep]


def ranges(starts, lengths):
    """The concatenation of ``range(starts[i], starts[i] + lengths[i])`` over ``i``.

    Examples
    --------
    >>> ranges(np.array([5, 0, 9]), np.array([2, 0, 3])).tolist()
    [5, 6, 9, 10, 11]
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(lengths)
    shift = np.repeat(np.asarray(starts, dtype=np.int64) - (ends - lengths), lengths)
    return shift + np.arange(total, dtype=np.int64)


class _Buffers(dict):
    """Buffer name -> id, numbering names as they come (None -> -1)."""

    def __init__(self):
        super().__init__({None: -1})
        self.names = []

    def __missing__(self, name):
        self[name] = ident = len(self.names)
        self.names.append(name)
        return ident


@dataclass(frozen=True, eq=False)
class Steps:
    """Every rank's program as arrays (see the module docstring).

    Attributes
    ----------
    size, nblocks : int
        The plan's ranks and blocks.
    start : ndarray
        ``size + 1`` row numbers: rank ``r``'s steps are ``start[r]:start[r + 1]``.
    rank, kind, peer, src, dst, left, group : ndarray
        Per step: its rank, kind code (:data:`KIND_CODES`), peer (:data:`NO_PEER` for a
        local step, :data:`BAD_PEER` for one outside the ranks), source and
        destination buffer ids (-1: none), whether it combines on the left, whether
        it belongs to an arrival-order group.
    first : ndarray
        ``nsteps + 1`` entry numbers: step ``s``'s blocks are entries
        ``first[s]:first[s + 1]``.
    single : bool
        Every step has one block (then entry ``s`` is step ``s``'s block).
    beyond : bool
        Some block id is ``nblocks`` or more.
    block, length : ndarray
        Per entry, its first block id and its number of blocks: an entry is a run of
        consecutive ids in a step's ``blocks`` (an id from ``nblocks`` on is an entry
        of its own, folded to ``nblocks``).
    buffers : tuple of str
        Buffer names by id.
    """

    size: int
    nblocks: int
    start: np.ndarray
    rank: np.ndarray
    kind: np.ndarray
    peer: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    left: np.ndarray
    group: np.ndarray
    first: np.ndarray
    single: bool
    beyond: bool
    block: np.ndarray
    length: np.ndarray
    buffers: tuple

    @property
    def nsteps(self) -> int:
        """Steps in all programs."""
        return len(self.kind)

    @property
    def nentries(self) -> int:
        """Entries in all steps."""
        return len(self.block)

    def offsets(self):
        """Per entry (and one past the last), the number of blocks before it: entry
        ``e`` covers blocks ``offsets[e] - offsets[first[s]]`` on of its step ``s``
        (made once: the run and the measures both read it)."""
        return self._offsets

    @cached_property
    def _offsets(self):
        out = np.zeros(self.nentries + 1, dtype=np.int64)
        np.cumsum(self.length, out=out[1:])
        return out

    def per_entry(self, values):
        """Per-step ``values`` repeated for each entry of the step."""
        if self.single:
            return values
        return np.repeat(values, np.diff(self.first))

    def buffer_id(self, name) -> int:
        """The id of buffer ``name``, or -1 when no step names it."""
        try:
            return self.buffers.index(name)
        except ValueError:
            return -1


def encode(plan) -> Steps:
    """The arrays of every rank's program of ``plan``.

    Parameters
    ----------
    plan : wacoll.plans.Plan

    Returns
    -------
    Steps

    Raises
    ------
    OverflowError
        More ranks or blocks than fit in 31 bits, or more than 32768 buffers.
    """
    held = getattr(plan.programs, "steps", None)
    if isinstance(held, Steps):  # programs held as arrays (wacoll.plans.encoded)
        return held
    programs = plan.programs
    if type(programs) is not tuple:
        programs = tuple(programs)
    # the step class, from the plan itself (importing it would make a cycle: a
    # plan's prove() imports the prover)
    Step = next((type(program[0]) for program in programs if program), None)
    size, nblocks = plan.size, plan.nblocks
    buffers = _Buffers()
    lengths = np.fromiter(map(len, programs), np.int64, size)
    nsteps = int(lengths.sum())
    kind, peer, src, dst, left, group, first, block, length = _compiled.encode_programs(
        programs, Step, KIND_CODES, buffers, size, nblocks, nsteps
    )
    start = np.zeros(size + 1, dtype=np.int64)
    np.cumsum(lengths, out=start[1:])
    nentries = len(block)
    single = nentries == nsteps and (
        nsteps == 0
        or (int((first[1:] - first[:-1]).min()) == 1 and int(length.max()) == 1)
    )
    # buffers numbered by name (the reader numbers them as it meets them)
    names = sorted(buffers.names)
    renumber = np.zeros(len(names) + 1, dtype=np.int32)  # (id -1 stays -1)
    renumber[:-1] = [names.index(n) for n in buffers.names]
    renumber[-1] = -1
    if names != buffers.names:
        src, dst = renumber[src], renumber[dst]
    small = np.int16 if len(names) < 2**15 else np.int32
    ranks = np.int16 if size < 2**15 else index_dtype(size)
    return Steps(
        size=size,
        nblocks=nblocks,
        start=start,
        rank=np.repeat(np.arange(size, dtype=ranks), lengths),
        kind=kind,
        peer=peer.astype(ranks if size < 2**15 - 2 else index_dtype(size), copy=False),
        src=src.astype(small, copy=False),
        dst=dst.astype(small, copy=False),
        left=left,
        group=group,
        first=first,
        single=single,
        beyond=bool(nentries) and int(block.max()) >= nblocks,
        block=block.astype(index_dtype(nblocks), copy=False),
        length=length.astype(index_dtype(nblocks), copy=False),
        buffers=tuple(names),
    )
