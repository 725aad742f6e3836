"""Block ids held as arithmetic runs: the blocks of a step too many for a tuple.

A step's ``blocks`` is normally a tuple of ints. The combining all-to-all's
coordinator on 4096 ranks handles 7.3 million block ids in its own program: as
Python ints that is about 300 MB, and building them took 20 s. Its messages are
regular, though: a member's blocks for other clusters are two stretches of one row
of the ``P x P`` block matrix, a wide-area message is a rectangle, and what a
coordinator hands a member is a column (ids ``P`` apart). :class:`BlockRuns` holds
such ids as runs ``range(start, start + step * length, step)`` and behaves as the
tuple of the ids does: same length, items, slices, iteration, equality (with
tuples and runs, item by item) and hash. Code that
wants the ids in bulk asks :func:`block_array`, which expands the runs without
making an int object per id.

Examples
--------
>>> runs = BlockRuns.from_ranges([(0, 3, 1), (10, 40, 10)])
>>> len(runs), runs[3], tuple(runs)
(6, 10, (0, 1, 2, 10, 20, 30))
>>> runs == (0, 1, 2, 10, 20, 30), hash(runs) == hash((0, 1, 2, 10, 20, 30))
(True, True)
>>> block_array(runs).tolist() == list(runs)
True
"""

from __future__ import annotations

import operator
from bisect import bisect_left
from collections.abc import Sequence

import numpy as np

__all__ = [
    "BlockRuns",
    "block_array",
    "block_chunks",
    "outer_runs",
    "compact_blocks",
    "COMPACT_FROM",
]

#: Steps of more blocks than this are worth holding as :class:`BlockRuns` (below
#: it a tuple is as small and faster to read).
COMPACT_FROM = 64
#: ... and regular enough: at least this many ids a run on average.
IDS_PER_RUN = 4
#: Ids per array when a step's ids are read a chunk at a time (:func:`block_chunks`).
CHUNK = 1 << 18
#: Block ids are below this (so that no id of a run wraps around in int64).
_LIMIT = 2**62


def _expand(start, step, length):
    """The ids of the runs, concatenated (int64)."""
    total = int(length.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(length)
    begins = ends - length
    within = np.arange(total, dtype=np.int64) - np.repeat(begins, length)
    return np.repeat(start, length) + within * np.repeat(step, length)


class BlockRuns(Sequence):
    """Block ids as the concatenation of arithmetic runs (see the module docstring).

    Parameters
    ----------
    start, step, length : array_like of int
        Run ``i`` is ``start[i], start[i] + step[i], ...`` (``length[i]`` ids, at
        least one; ``step`` may be any integer). Every id must be >= 0 and below
        2**62.

    Raises
    ------
    ValueError
        Arrays of different lengths, an empty run, or an id out of that range.
    """

    __slots__ = ("start", "step", "length", "_n", "_hash", "_ends")

    def __init__(self, start, step, length):
        start, step, length = (
            np.array(a, dtype=np.int64, ndmin=1) for a in (start, step, length)
        )
        if not start.shape == step.shape == length.shape or start.ndim != 1:
            raise ValueError("block runs need start, step and length of one length")
        if len(length):
            if int(length.min()) < 1:
                raise ValueError("block runs must be nonempty")
            # (in floating point first: the ids in int64 must not wrap around)
            reach = step.astype(float) * (length - 1)
            if (
                float(np.abs(reach).max()) >= _LIMIT
                or int(start.max()) >= _LIMIT
                or float((start + reach).max()) >= _LIMIT
            ):
                raise ValueError("block runs must hold ids below 2**62")
        for a in (start, step, length):
            a.setflags(write=False)
        self.start, self.step, self.length = start, step, length
        if len(length) and (int(start.min()) < 0 or int(self.last().min()) < 0):
            raise ValueError("block runs must hold ids >= 0")
        self._n = int(length.sum())
        self._hash = self._ends = None

    def last(self):
        """The last id of each run (int64 array)."""
        return self.start + self.step * (self.length - 1)

    @classmethod
    def from_ranges(cls, ranges):
        """Runs from ``(start, stop, step)`` triples as :class:`range` takes them
        (empty ranges are left out)."""
        kept = [(a, b, s) for a, b, s in ranges if len(range(a, b, s))]
        return cls(
            [a for a, _, _ in kept],
            [s for _, _, s in kept],
            [len(range(a, b, s)) for a, b, s in kept],
        )

    @classmethod
    def from_array(cls, ids):
        """The fewest runs, taken greedily from the left, that spell ``ids``.

        Examples
        --------
        >>> r = BlockRuns.from_array([4, 5, 6, 9, 12, 15, 7])
        >>> r.start.tolist(), r.step.tolist(), r.length.tolist()
        ([4, 9, 7], [1, 3, 1], [3, 3, 1])
        """
        ids = np.asarray(ids, dtype=np.int64).ravel()
        n = len(ids)
        if n < 2:
            return cls(ids, [1] * n, [1] * n)
        gap = np.diff(ids)
        # the last gap index of each stretch of equal gaps, in order
        last = np.append(np.flatnonzero(gap[1:] != gap[:-1]), n - 2).tolist()
        starts, steps, lengths = [], [], []
        at = 0
        while at < n:
            if at == n - 1:  # the last id alone
                starts.append(at)
                steps.append(1)
                lengths.append(1)
                break
            end = last[bisect_left(last, at)]  # ids at..end + 1 share gap[at]
            starts.append(at)
            steps.append(int(gap[at]))
            lengths.append(end + 2 - at)
            at = end + 2
        return cls(ids[starts], steps, lengths)

    def __len__(self):
        return self._n

    def __getitem__(self, index):
        if isinstance(index, slice):  # (the ids asked for only)
            return tuple(self._at(np.arange(*index.indices(self._n))).tolist())
        index = operator.index(index)
        if not -self._n <= index < self._n:
            raise IndexError("block index out of range")
        return int(self._at(np.array([index % self._n]))[0])

    def _at(self, positions):
        """The ids at ``positions`` (an int array of valid positions)."""
        if self._ends is None:
            self._ends = np.cumsum(self.length)
        run = np.searchsorted(self._ends, positions, side="right")
        within = positions - (self._ends - self.length)[run]
        return self.start[run] + within * self.step[run]

    def __iter__(self):
        return iter(block_array(self).tolist())

    def __eq__(self, other):
        # as the tuple of the ids compares: with runs and tuples only, item by item
        if isinstance(other, BlockRuns):
            return self._n == other._n and np.array_equal(
                block_array(self), block_array(other)
            )
        if isinstance(other, tuple):
            if len(other) != self._n:
                return False
            items = np.asarray(other) if other else np.zeros(0, np.int64)
            if items.dtype.kind in "bi" and items.ndim == 1:  # (else item by item)
                return bool(np.array_equal(block_array(self), items))
            return tuple(self) == other
        return NotImplemented

    def __hash__(self):
        # the hash of the same ids as a tuple, so that equal steps hash alike
        if self._hash is None:
            self._hash = hash(tuple(self))
        return self._hash

    def __reduce__(self):
        return (BlockRuns, (self.start, self.step, self.length))

    def __repr__(self):
        return f"BlockRuns({self._n} blocks in {len(self.length)} runs)"


def block_array(blocks) -> np.ndarray:
    """The ids of ``blocks`` (a tuple or :class:`BlockRuns`) as an int64 array.

    Examples
    --------
    >>> block_array((3, 1)).tolist(), block_array(BlockRuns([2], [-1], [3])).tolist()
    ([3, 1], [2, 1, 0])
    """
    if isinstance(blocks, BlockRuns):
        return _expand(blocks.start, blocks.step, blocks.length)
    return np.fromiter(blocks, np.int64, len(blocks))


def block_chunks(blocks, size=None):
    """The ids of ``blocks`` as int64 arrays of at most ``size`` ids each, in order:
    a step of millions of ids is read a chunk at a time.

    Examples
    --------
    >>> [a.tolist() for a in block_chunks(BlockRuns([0, 10], [1, 2], [3, 2]), 2)]
    [[0, 1], [2, 10], [12]]
    """
    size = CHUNK if size is None else size
    if not isinstance(blocks, BlockRuns) or len(blocks) <= size:
        yield block_array(blocks)
        return
    # cut the runs at every multiple of size ids, then expand one chunk at a time
    ends = np.cumsum(blocks.length)
    cuts = np.arange(size, int(ends[-1]), size)
    edges = np.union1d(np.concatenate(([0], ends)), cuts)
    run = np.searchsorted(ends, edges[:-1], side="right")
    within = edges[:-1] - (ends - blocks.length)[run]
    starts = blocks.start[run] + within * blocks.step[run]
    steps, lengths = blocks.step[run], np.diff(edges)
    chunk = np.searchsorted(cuts, edges[:-1], side="right")
    bounds = np.flatnonzero(np.diff(chunk)) + 1
    for a, b in zip(np.concatenate(([0], bounds)), np.append(bounds, len(run))):
        yield _expand(starts[a:b], steps[a:b], lengths[a:b])


def outer_runs(rows, columns):
    """The ids ``row + column`` for each of ``rows`` in order and each of ``columns``
    in order, held as :func:`compact_blocks` holds ids (a tuple when short or
    irregular), without making every id when the columns are regular: a wide-area
    message of the combining all-to-all is a rectangle of the ``P x P`` block matrix.

    Examples
    --------
    >>> outer_runs(np.array([0, 1000]), np.arange(0, 128, 2))
    BlockRuns(128 blocks in 2 runs)
    >>> outer_runs(np.array([0, 1000]), np.arange(3))
    (0, 1, 2, 1000, 1001, 1002)
    """
    rows = np.asarray(rows, dtype=np.int64)
    columns = BlockRuns.from_array(columns)
    n = len(rows) * len(columns)
    if n <= COMPACT_FROM or IDS_PER_RUN * len(rows) * len(columns.length) > n:
        return compact_blocks((rows[:, None] + block_array(columns)[None, :]).ravel())
    return BlockRuns(
        (rows[:, None] + columns.start[None, :]).ravel(),
        np.tile(columns.step, len(rows)),
        np.tile(columns.length, len(rows)),
    )


def compact_blocks(ids):
    """``ids`` (an int array) as a step's ``blocks``: a tuple when short or
    irregular, else :class:`BlockRuns`.

    Examples
    --------
    >>> compact_blocks(np.arange(3))
    (0, 1, 2)
    >>> compact_blocks(np.arange(0, 1000, 10))
    BlockRuns(100 blocks in 1 runs)
    """
    ids = np.asarray(ids, dtype=np.int64)
    if len(ids) <= COMPACT_FROM:
        return tuple(ids.tolist())
    runs = BlockRuns.from_array(ids)
    if IDS_PER_RUN * len(runs.length) > len(ids):  # barely regular: a tuple reads faster
        return tuple(ids.tolist())
    return runs
