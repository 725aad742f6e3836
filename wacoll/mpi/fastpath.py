"""The repeated blocking call the MPI library runs, without re-reading it.

Applications call a collective in a loop with the same arrays: ``comm.Allreduce(a, b,
op=MPI.SUM)`` every iteration. On one cluster wacoll hands such a call to the MPI
library (the *native* family), and all it adds is the cross-rank check. What reading
the arguments, building the check's signature and choosing the family cost (tens of
microseconds in Python, more than the collective itself at small sizes) depends only
on the arguments' *descriptions*: which objects they are and, for arrays, their
shape, strides, dtype and writability. So the second call with the same objects
records a :class:`NativeCall` (a call whose objects are new every time is never
recorded); a later call with the same objects, unchanged, replays it: the
check (:class:`~wacoll.mpi.agreement.PersistentCheck`), then the library's blocking
collective.

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
>>> describe((a, 0)) == describe((a, 0))
True
>>> a.shape = (2, 2)
>>> describe((a, 0)) == describe((np.zeros(4), 0))
False
>>> describe(([a, "d"],)) is None   # a list may change between calls
True
"""

from __future__ import annotations

import numpy as np

__all__ = ["CAPACITY", "NativeCall", "describe"]

#: Recorded calls per communicator (the oldest is forgotten first).
CAPACITY = 16

_ndarray = np.ndarray


def _mpi():
    from mpi4py import MPI

    return MPI


def describe(args):
    """What a recorded call must still match in ``args``, or None if they cannot be
    recorded (an argument whose identity does not say what it holds)."""
    MPI = _mpi()
    out = []
    for a in args:
        t = type(a)
        if t is _ndarray:
            out.append((a.shape, a.strides, a.dtype, a.flags.writeable))
        elif a is None or t is int or t is str or a is MPI.IN_PLACE or \
                isinstance(a, MPI.Op):
            out.append(None)
        else:
            return None
    return tuple(out)


class NativeCall:
    """A blocking call recorded for replay: its check digest and the MPI library's
    non-blocking collective over the same arguments.

    Parameters
    ----------
    args : tuple
        The call's arguments, as given (kept alive while recorded).
    description : tuple
        :func:`describe` of them when recorded.
    digest : int
        The call's signature digest (what the check compares across ranks).
    call : callable or None
        The MPI library's blocking collective over the arguments; None for a checked
        Barrier (the check is the barrier).
    sig : Signature
        The call's signature, for the error message of a failed check.
    """

    __slots__ = ("args", "description", "template", "call", "sig")

    def __init__(self, args, description, digest, call, sig):
        self.args = args
        self.description = description
        self.template = np.array([0, 0, digest, -digest], np.int64)
        self.call = call
        self.sig = sig

    def matches(self, args) -> bool:
        """Whether ``args`` are the recorded objects, still as they were."""
        mine = self.args
        if len(args) != len(mine):
            return False
        for a, b, d in zip(args, mine, self.description):
            if a is not b:
                return False
            # ``is not`` for the dtype: numpy's dtype comparison costs more than the
            # rest together, and an equal dtype that is another object only costs
            # one re-read
            if d is not None and (a.shape != d[0] or a.strides != d[1] or
                                  a.dtype is not d[2] or a.flags.writeable != d[3]):
                return False
        return True

    def run(self, check):
        """Run the call once: ``check`` (a
        :class:`~wacoll.mpi.agreement.PersistentCheck`, or None: no check), then the
        collective.

        Returns None when the call ran, else the failed check's flags (every rank
        learns the same) for the caller's failure path; the collective did not start.
        """
        if check is not None and not check.run(self.template):
            return check.flags.copy()
        if self.call is not None:
            self.call()
        return None
