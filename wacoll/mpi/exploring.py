"""A repeated call whose shape learning still explores, replayed like any other.

Learning (:mod:`wacoll.mpi.learning`) tries a shape's candidates in turns, each
:data:`~wacoll.mpi.learning.ROUNDS` times. A candidate's first call is read afresh
(it builds, proves and compiles the candidate's plan, and is not counted); its
later calls, the counted ones, should cost what the candidate costs in a loop,
not what reading a call afresh costs besides (0.1-0.3 ms a call at 2 ranks, 2-3 ms
at 8 ranks on 2 cores, where the library's collective takes microseconds).

So the compiled call each candidate's first call makes (a plan's
:class:`~wacoll.mpi._runner.PlanCall`, the library's
:class:`~wacoll.mpi._runner.LibraryCall`) is kept in an :class:`ExploringCall`,
recorded under the call's replay key as a compiled call is. A repeated call finds
it (:meth:`wacoll.mpi._fastcall.Recordings.replay`), and :meth:`ExploringCall.run`
runs the candidate whose turn it is, timed, and tells learning its time
(:meth:`~wacoll.mpi.learning.Tuning.observe`). A candidate not compiled yet, or a
decided shape whose chosen candidate was not compiled here, is read afresh
(``run`` returns None). Once the shape is decided, the chosen candidate's
compiled call takes the exploring call's place under the key, and runs.

Every rank explores the same candidate at the same call, replayed or read afresh
(a rank whose arguments changed reads it afresh and observes alike), and the
decision's agreement follows every verdict in flight (:meth:`ExploringCall.run`
settles them first), so a rank whose call failed raises before it, never in it.
A replayed explored call returns before its verdict, as any repeated call may: a
call on which the ranks disagree raises on every rank, at that call or the next,
and where a rank had returned the communicator stops (the MPI guide, "When a call
returns before its verdict").

Kept are the compiled calls a repeated call replays: on one cluster, or unchecked,
the library's collective is not kept (its counted calls are read afresh, timed over
their run alone).
"""

from __future__ import annotations

from wacoll.mpi.clocks import now

__all__ = ["ExploringCall", "keep_candidate"]

_SELECTED = "the selection's choice"


class ExploringCall:
    """The compiled calls of a shape's candidates under one replay key.

    Parameters
    ----------
    tuning : wacoll.mpi.learning.Tuning
        The communicator's learning, which says whose turn it is.
    shape : tuple
        The learned shape (:func:`wacoll.mpi.learning.shape_of`).
    settle : callable
        Collects every verdict in flight (the route's ``settle``), before the
        decision's agreement.
    recordings : dict, optional
        Where it is recorded, under ``key``: once the shape is decided, the
        chosen candidate's compiled call takes its place (or, where there is none,
        it takes itself out: the chosen call is then read afresh and recorded).
    key : object, optional

    Attributes
    ----------
    calls : dict
        Candidate (None: the selection's choice) to its compiled call.
    last : object
        The compiled call that ran last (its ``plan``, ``family``, ``sig`` and
        ``flags`` name what ran and what failed).

    Examples
    --------
    >>> from wacoll.mpi.learning import Tuning
    >>> class Call:  # a compiled call's stand-in: runs, passes its check
    ...     plan = family = sig = flags = None
    ...     def run(self, args):
    ...         return True
    >>> tuning = Tuning(None, rounds=2)
    >>> shape = ("bcast", 4, "<f8", None, None, 0)
    >>> tuning.family_for(shape, [None, "native"])  # the first call: read afresh
    (None, True)
    >>> tuning.observe(shape, 0.002, [None, "native"])
    >>> exploring = ExploringCall(tuning, shape, lambda: None)
    >>> exploring.calls[None] = Call()
    >>> exploring.run(())  # native's turn, not compiled yet: read afresh
    >>> tuning.observe(shape, 0.001)
    >>> exploring.calls["native"] = Call()
    >>> exploring.run(()), exploring.run(())  # the counted calls, replayed
    (True, True)
    >>> exploring.run(())  # decided: the chosen call runs, recorded in its place
    True
    >>> tuning.family_for(shape, None)[1]  # (not explored any more)
    False
    """

    __slots__ = (
        "tuning",
        "shape",
        "settle",
        "recordings",
        "key",
        "calls",
        "last",
        "reason",
    )

    def __init__(self, tuning, shape, settle, recordings=None, key=None):
        self.tuning, self.shape, self.settle = tuning, shape, settle
        self.recordings, self.key = recordings, key
        self.calls: dict = {}
        self.last = None
        #: Why the last call ran what it ran (:attr:`wacoll.Comm.last_reason`).
        self.reason = "a repeated call, run as recorded"

    def run(self, args):
        """Run the candidate whose turn it is over ``args``, timed (or, once the
        shape is decided, the chosen one): whether its check passed; None when
        it is to be read afresh (not compiled yet)."""
        recordings = self.recordings
        if not self.tuning.knows(self.shape):
            # its exploration was dropped for newer shapes': read afresh, it
            # starts again (priced anew) on every rank alike
            if recordings is not None and recordings.get(self.key) is self:
                del recordings[self.key]
            return None
        family, exploring = self.tuning.family_for(self.shape, None)
        if not exploring:  # decided: the chosen call is recorded in its place
            chosen = self.calls.get(family)
            if recordings is not None and recordings.get(self.key) is self:
                if chosen is None:
                    del recordings[self.key]
                else:
                    recordings[self.key] = chosen
            if chosen is None:
                return None
            self.last = chosen
            self.reason = "learned: the choice, run as recorded"
            return chosen.run(args)
        call = self.calls.get(family)
        if call is None:
            return None
        self.last = call
        self.reason = f"learning: trying {family or _SELECTED}"
        started = now()
        passed = call.run(args)
        seconds = now() - started
        if not passed:
            return passed
        if self.tuning.decides_next(self.shape):
            self.settle()  # (raises where a verdict in flight failed)
        self.tuning.observe(self.shape, seconds)
        return passed

    # what names the call that ran last (the route's bookkeeping, its failure)
    @property
    def plan(self):
        return self.last.plan

    @property
    def family(self):
        return self.last.family

    @property
    def sig(self):
        return self.last.sig

    @property
    def flags(self):
        return getattr(self.last, "flags", None)


def keep_candidate(recordings, key, make, candidate, call):
    """Keep ``call``, the compiled call of ``candidate`` made by an explored call
    read afresh, in the :class:`ExploringCall` recorded under ``key`` in
    ``recordings`` (made by ``make(recordings, key)`` and recorded there when
    there is none)."""
    from wacoll.mpi.plancall import record

    exploring = recordings.get(key)
    if type(exploring) is not ExploringCall:
        exploring = make(recordings, key)
        record(recordings, key, exploring)
    exploring.calls[candidate] = call
