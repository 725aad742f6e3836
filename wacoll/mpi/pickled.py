"""Object ``allgather`` and ``bcast`` over wacoll's own buffer collectives.

mpi4py's ``comm.allgather(obj)`` pickles ``obj``, all-gathers the pickles' lengths,
then all-gathers the pickles (``Allgatherv``): two collectives a call. A plan run
over pickled frames (:func:`wacoll.mpi.objects.execute`) needs one, but steps through
it in Python. Here each rank's pickle travels in a *block* of a size every rank
agrees on, behind its length::

    length (int64; -1 - n for n bytes of a pickled fault) | pickle | padding

so one call is one buffer ``Allgather`` (or ``Bcast``) of ``P`` blocks: the
communicator's checked, compiled and replayed route with the plan the selection
chooses (:mod:`wacoll.mpi.plancall`). Every rank reads every length, so every rank
knows at once whether a pickle did not fit; then all send again in blocks that fit
(a second collective, as mpi4py always makes). The block size is kept per
communicator and follows the pickles: it grows to the next power of two that fits
and shrinks when the pickles have become four times smaller, the same way on
every rank because every rank decides on the same lengths.

Faults travel as data: a rank whose object cannot be pickled sends the fault
instead, and every rank raises the lowest rank's (``rank N: ...``), as
:mod:`wacoll.mpi.objects` does.

Examples
--------
>>> block_for(100), block_for(300), block_for(5000)
(256, 512, 8192)
"""

from __future__ import annotations

import pickle as _pickle
import weakref

import numpy as np
from mpi4py import MPI

from wacoll.mpi.faults import fault_of, raise_fault

__all__ = [
    "FIRST_BLOCK",
    "allgather",
    "bcast",
    "block_for",
    "block_size",
    "dumps",
    "loads",
]

#: The block size (bytes, the length word included) a communicator starts with.
FIRST_BLOCK = 256
_WORD = 8

# per communicator (by id): [block size, send buffer, receive buffer]
_STATE: dict[int, list] = {}


def dumps(obj):
    """``obj``'s pickle by ``MPI.pickle`` (so ``MPI.pickle.__init__`` applies)."""
    return MPI.pickle.dumps(obj)


def loads(data):
    """The object of a pickle (a bytes-like object); None for an empty one, as in
    mpi4py."""
    return None if len(data) == 0 else MPI.pickle.loads(data)


def block_for(nbytes: int) -> int:
    """The block size for a pickle of ``nbytes``: the length word and the pickle,
    rounded up to a power of two, at least :data:`FIRST_BLOCK`."""
    need = nbytes + _WORD
    block = FIRST_BLOCK
    while block < need:
        block *= 2
    return block


def block_size(comm) -> int:
    """The block size (bytes) the next object ``allgather`` or ``bcast`` on
    ``comm`` starts with."""
    return _state(comm)[0]


def _state(comm):
    state = _STATE.get(id(comm))
    if state is None:
        state = _STATE[id(comm)] = [FIRST_BLOCK, None, None]
        weakref.finalize(comm, _STATE.pop, id(comm), None)
    return state


def _encode(obj, rank):
    """``(payload, length word, local exception)`` of this rank's object."""
    try:
        data = dumps(obj)
        return data, len(data), None
    except Exception as exc:  # noqa: BLE001 -- every rank learns of it
        fault = _pickle.dumps(fault_of(rank, exc))
        return fault, -1 - len(fault), exc


def _buffers(state, block, rows):
    """The send block and the ``rows`` x ``block`` receive buffer (reused)."""
    send, out = state[1], state[2]
    if send is None or send.shape[0] != block:
        send = state[1] = np.zeros(block, np.uint8)
    if out is None or out.shape != (rows, block):
        out = state[2] = np.empty((rows, block), np.uint8)
    return send, out


def _fill(send, payload, word):
    send.view(np.int64)[0] = word
    if len(payload) + _WORD <= send.shape[0]:
        memoryview(send)[_WORD : _WORD + len(payload)] = payload


def _lengths(out):
    """Each row's length word, as Python integers (a block is a multiple of 8)."""
    return out.view(np.int64)[:, 0].tolist()


def _size(word):
    return int(word) if word >= 0 else -1 - int(word)


def _adapt(state, largest):
    """The next block size after a call whose largest pickle was ``largest``."""
    block = state[0]
    if block > FIRST_BLOCK and 4 * (largest + _WORD) < block:
        state[0] = block_for(largest)


def _decode(out, words, local):
    """The objects of ``out``'s rows, or raise the lowest rank's fault everywhere."""
    failed = [r for r, w in enumerate(words) if w < 0]
    if failed:
        r = failed[0]
        fault = _pickle.loads(out[r, _WORD : _WORD + _size(words[r])].tobytes())
        raise_fault(fault, local)
    return [loads(out[r, _WORD : _WORD + int(w)]) for r, w in enumerate(words)]


def allgather(comm, sendobj):
    """mpi4py's ``allgather``: every rank's ``sendobj``, on every rank (new
    objects), by :meth:`wacoll.Comm.Allgather` of pickles in agreed blocks."""
    rank, size = comm.Get_rank(), comm.Get_size()
    state = _state(comm)
    payload, word, exc = _encode(sendobj, rank)
    local = {} if exc is None else {rank: exc}
    while True:
        block = state[0]
        send, out = _buffers(state, block, size)
        _fill(send, payload, word)
        comm.Allgather(send, out)
        words = _lengths(out)
        largest = max(map(_size, words))
        if largest + _WORD <= block:
            break
        state[0] = block_for(largest)  # the same on every rank: the same lengths
    _adapt(state, largest)
    return _decode(out, words, local)


def bcast(comm, obj, root):
    """mpi4py's ``bcast``: the root's ``obj`` on every rank (a new object), by
    :meth:`wacoll.Comm.Bcast` of its pickle in an agreed block."""
    rank = comm.Get_rank()
    state = _state(comm)
    payload, word, exc = (b"", 0, None) if rank != root else _encode(obj, rank)
    local = {} if exc is None else {rank: exc}
    while True:
        block = state[0]
        _, out = _buffers(state, block, 1)
        if rank == root:
            _fill(out[0], payload, word)
        comm.Bcast(out[0], root=root)
        words = _lengths(out)
        largest = _size(words[0])
        if largest + _WORD <= block:
            break
        state[0] = block_for(largest)
    _adapt(state, largest)
    return _decode(out, words, local)[0]
