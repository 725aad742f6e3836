"""The repeated blocking call the MPI library runs, without re-reading it.

Applications call a collective in a loop: ``comm.Allreduce(a, b, op=MPI.SUM)`` every
iteration, over the same arrays or over new ones of the same shape. On one cluster
wacoll hands such a call to the MPI library (the *native* family), and all it adds
is the cross-rank check. What reading the arguments, building the check's signature
and choosing the family cost (tens of microseconds in Python, more than the
collective itself at small sizes) depends only on what the arguments *look like*:
for arrays their dtype, shape, strides and writability (and which of them are the
same object), for the rest their values or identities
(:meth:`~wacoll.mpi._fastcall.Recordings.key`).

So the second call that looks like an earlier one records a :class:`NativeCall`;
every later call that looks the same replays it, in one trip into C: the check,
then the library's blocking collective over the call's own arguments (passed to the
library's C function directly where they are plain arrays: :func:`call_directly`,
as mpi4py would pass them after reading them again). On one node
the check is :class:`~wacoll.mpi.agreement.NodeCheck`, in shared memory (a fraction
of a microsecond); across nodes :class:`~wacoll.mpi.agreement.PersistentCheck`, the
library's persistent all-reduce.

On one cluster the check runs *before* the collective, not beside it as on a grid: a
microsecond collective has no latency to hide, and the library's non-blocking calls
cost more than its blocking ones (MPICH 5, 2 ranks, 8 B: ``Iallreduce`` + ``Wait`` 9
us, ``Allreduce`` 6 us; the check and the call started together and waited for at
once took 19 us, one after the other 12 us). A failed check then also leaves every
buffer untouched.

A call of the library's collective, or of a plan whose blocks all hold the count
or are the vector's segments, does work that follows from the count for every
count of its size class (:func:`wacoll.plans.retarget.count_parts`); such a call is
recorded for the whole class instead, under its key without its arrays' lengths
(:meth:`~wacoll.mpi._fastcall.Recordings.class_key`). A later call whose arrays'
lengths are the same multiples of a count of the class replays it with that
count (``recount``: the check's digest, and a plan's compiled tables and tag, made
for it in C), so a loop over many counts replays every call too.

Only calls whose arguments are numpy arrays, integers, strings, ``None``,
``MPI.IN_PLACE``, ``MPI.Op`` objects and buffer specifications ``[array,
MPI.Datatype]`` or ``[array, count, MPI.Datatype]`` are recorded; operators and
datatypes are known by identity, so a recorded call keeps them alive. A
communicator keeps at most :data:`CAPACITY` recorded calls.

Examples
--------
>>> import numpy as np
>>> calls = Recordings()
>>> a = np.zeros(4)
>>> calls.key(print, None, None, (a, 0)) == calls.key(print, None, None, (np.ones(4), 0))
True
>>> a.shape = (2, 2)   # the same array, another description
>>> calls.key(print, None, None, (a, 0)) == calls.key(print, None, None, (np.ones(4), 0))
False
>>> calls.key(print, None, None, ([a, "d"],)) is None   # a type by name: not recorded
True
"""

from __future__ import annotations

import numpy as np

from wacoll.mpi._fastcall import DIRECT_KINDS, NativeCall, Recordings

__all__ = ["CAPACITY", "NativeCall", "Recordings", "call_directly"]

#: Recorded calls per communicator (the oldest is forgotten first): a loop that
#: cycles up to this many counts (or shapes) replays every call after its first
#: pass. A recorded plan call keeps its compiled runner and work area alive beside
#: the :data:`~wacoll.mpi.plancall.RUNNERS` a communicator keeps.
CAPACITY = 64


#: Per operation: the positions of its send and receive buffers among the call's
#: arguments (-1: none), whether each holds a block per rank (mpi4py divides its
#: length by the communicator's size), and the position of its root (-1: none)
#: and of its operator (-1: none).
_ARGUMENTS = {
    "bcast": (-1, 0, False, False, 1, -1),
    "reduce": (0, 1, False, False, 3, 2),
    "allreduce": (0, 1, False, False, -1, 2),
    "gather": (0, 1, False, True, 2, -1),
    "scatter": (0, 1, True, False, 2, -1),
    "allgather": (0, 1, False, True, -1, -1),
    "alltoall": (0, 1, True, True, -1, -1),
}


def call_directly(call, op, args, replace, wire):
    """Have the recorded ``call`` (a :class:`NativeCall` of ``op`` over ``args``,
    or a :class:`~wacoll.mpi._runner.LibraryCall`, which starts the library's
    non-blocking collective) call the library's collective itself when replayed,
    with each replayed call's buffer addresses and counts, as mpi4py would
    (:meth:`NativeCall.direct`):
    where every buffer is a contiguous numpy array of one native element type that
    the library knows, no ``MPI.IN_PLACE`` is given and the operator is one of the
    library's own. Whether it does (otherwise replays call ``call.method``).

    A replay then skips mpi4py's reading of the arguments, about half of the
    library's own call time for a small collective on one node.
    """
    from mpi4py import MPI

    from wacoll.mpi.runner import handle, runner_ready

    kind = DIRECT_KINDS.get(op)
    if kind is None or call.method is None or not runner_ready():
        return False
    at_send, at_recv, send_blocks, recv_blocks, at_root, at_op = _ARGUMENTS[op]
    buffers = [args[i] for i in (at_send, at_recv) if i >= 0 and args[i] is not None]
    if not buffers or any(
        type(b) is not np.ndarray or not b.flags.c_contiguous for b in buffers
    ):
        return False
    dtype = buffers[0].dtype
    if any(b.dtype != dtype for b in buffers) or not dtype.isnative:
        return False
    datatype = MPI._typedict.get(dtype.char)
    if datatype is None or datatype.Get_size() != dtype.itemsize:
        return False
    operator = MPI.OP_NULL
    if at_op >= 0:
        operator = dict(replace).get(at_op, args[at_op])
        if not isinstance(operator, MPI.Op) or not operator.is_predefined:
            return False
    size = wire.Get_size()
    call.direct(
        kind,
        handle(wire),
        handle(datatype),
        handle(operator),
        args[at_root] if at_root >= 0 else 0,
        at_send,
        at_recv,
        dtype.itemsize * (size if send_blocks else 1),
        dtype.itemsize * (size if recv_blocks else 1),
    )
    return True
