"""The repeated blocking call the MPI library runs, without re-reading it.

Applications call a collective in a loop with the same arrays: ``comm.Allreduce(a, b,
op=MPI.SUM)`` every iteration. On one cluster wacoll hands such a call to the MPI
library (the *native* family), and all it adds is the cross-rank check. What reading
the arguments, building the check's signature and choosing the family cost (tens of
microseconds in Python, more than the collective itself at small sizes) depends only
on the arguments' *snapshot*: which objects they are and, for arrays, their
address, length, element format, shape, strides and writability (compared in C,
:class:`wacoll.mpi._fastcall.Snapshot`). So the second call with the same objects
records a :class:`NativeCall` (a call whose objects are new every time is never
recorded); a later call with the same objects, unchanged, replays it: the
check, then the library's blocking collective. On one node the check is
:class:`~wacoll.mpi.agreement.NodeCheck`, in shared memory (a fraction of a
microsecond); across nodes :class:`~wacoll.mpi.agreement.PersistentCheck`, the
library's persistent all-reduce.

On one cluster the check runs *before* the collective, not beside it as on a grid: a
microsecond collective has no latency to hide, and the library's non-blocking calls
cost more than its blocking ones (MPICH 5, 2 ranks, 8 B: ``Iallreduce`` + ``Wait`` 9
us, ``Allreduce`` 6 us; the check and the call started together and waited for at
once took 19 us, one after the other 12 us). A failed check then also leaves every
buffer untouched.

Only arguments whose identity says everything are recorded: numpy arrays, integers,
``None``, ``MPI.IN_PLACE``, ``MPI.Op`` objects and operator names. A recorded call
keeps its argument objects alive (so that their identities cannot be reused by new
objects); a communicator keeps at most :data:`CAPACITY` of them.

Examples
--------
>>> import numpy as np
>>> a = np.zeros(4)
>>> snap = snapshot((a, 0))
>>> snap.matches((a, 0)), snap.matches((np.zeros(4), 0))
(True, False)
>>> a.shape = (2, 2)
>>> snap.matches((a, 0))
False
>>> snapshot(([a, "d"],)) is None   # a list may change between calls
True
"""

from __future__ import annotations

import numpy as np

from wacoll.mpi._fastcall import NativeCall, Recordings, Snapshot

__all__ = ["CAPACITY", "NativeCall", "Recordings", "snapshot"]

#: Recorded calls per communicator (the oldest is forgotten first).
CAPACITY = 16

_ndarray = np.ndarray


def _mpi():
    from mpi4py import MPI

    return MPI


def snapshot(args):
    """A :class:`~wacoll.mpi._fastcall.Snapshot` of ``args``, or None if they cannot
    be recorded (an argument whose identity does not say what it holds)."""
    MPI = _mpi()
    buffers = []
    for a in args:
        t = type(a)
        if t is _ndarray:
            buffers.append(True)
        elif a is None or t is int or t is str or a is MPI.IN_PLACE or \
                isinstance(a, MPI.Op):
            buffers.append(False)
        else:
            return None
    return Snapshot(tuple(args), tuple(buffers))
