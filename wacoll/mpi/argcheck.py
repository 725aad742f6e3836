"""A communicator's cross-rank argument check, chosen once when it is made.

Every collective call is checked across ranks (unless ``check="off"``): each rank
contributes its signature digest and whether its own arguments are valid, and one
small all-reduce tells every rank whether to run the call or raise the same error
(:mod:`wacoll.mpi.agreement` says what is exchanged). Which all-reduce it is depends
only on the communicator, never on the call, so :class:`ArgumentCheck` decides it
once:

several clusters
    the topology-aware all-reduce of MagPIe's family, lowered once for this rank
    (one wide-area latency, like the call's own) and compiled for the runner, run
    *beside* the call (``"beside"``) or before any rank sends (``"first"``);
one cluster
    the communicator's blocking check (:func:`~wacoll.mpi.agreement.blocking_check`:
    shared memory on one node, a persistent all-reduce across nodes), run before a
    blocking call; a non-blocking call runs the library's ``Iallreduce`` beside its
    work.

Every route of a call takes its check from here: the compiled calls
(:mod:`wacoll.mpi.plancall`, :mod:`wacoll.mpi.fastpath`) its compiled or blocking
form, the Python route :meth:`ArgumentCheck.of_call`, and a failed compiled call
:meth:`ArgumentCheck.failure`.

Examples
--------
>>> from mpi4py import MPI
>>> from wacoll import Topology
>>> from wacoll.mpi.agreement import Signature
>>> check = ArgumentCheck(MPI.COMM_SELF.Dup(), Topology.single(1), "beside")
>>> check.enabled, check.several, check.mode
(True, False, 'beside')
>>> check.of_call(None, Signature("bcast", 0, 4, "<f8"), tag=0, blocking=True).ok
True
>>> check.free()
"""

from __future__ import annotations

import functools

import numpy as np
from mpi4py import MPI

from wacoll.mpi.agreement import Check, blocking_check
from wacoll.mpi.runner import compile_program, runner_ready
from wacoll.plans import Call, select
from wacoll.plans.rank import lower_for_rank, plan_for_rank

__all__ = ["ArgumentCheck", "CHECK_MODES"]

#: The check modes (see :class:`wacoll.Comm`'s ``check``).
CHECK_MODES = ("beside", "first", "off")


class ArgumentCheck:
    """The argument check of one communicator's calls.

    Parameters
    ----------
    control : mpi4py.MPI.Intracomm
        The communicator the checks travel on (never a call's own; collective: every
        rank makes its check).
    topology : wacoll.Topology
        The communicator's clusters: one, or several.
    mode : {"beside", "first", "off"}

    Attributes
    ----------
    mode : str
    enabled : bool
        Whether calls are checked (``mode != "off"``).
    several : bool
        Whether the communicator spans several clusters.
    first : bool
        Whether the check completes before the work (``"first"``).
    program : wacoll.plans.lower.LoweredProgram or None
        Several clusters: this rank's lowered check all-reduce.
    compiled : wacoll.mpi._runner.Runner or None
        Several clusters, checked, compiled runner available: ``program``'s runner
        over ``control`` (what compiled calls run beside their work).
    blocking : NodeCheck or PersistentCheck or None
        One cluster, checked: the check of blocking calls.
    spare : list
        Runners of the compiled check whose Python-route call is over, for the next
        (each call in flight has its own).
    abandoned : list
        Checks given up while they ran (an interrupt, an MPI error): kept, with their
        runners and buffers, for as long as the communicator lives.
    """

    def __init__(self, control, topology, mode):
        self.control = control
        self.mode = mode
        self.enabled = mode != "off"
        self.several = topology.nclusters > 1
        self.first = mode == "first"
        self.program = self.compiled = self.blocking = self._tables = None
        self.spare, self.abandoned = [], []
        rank = control.Get_rank()
        if self.several:  # the check runs as a wide-area optimal all-reduce
            selection = select(
                Call("allreduce", count=4, itemsize=8, level="commutative"),
                topology,
                family="magpie",
            )
            self.program = lower_for_rank(plan_for_rank(selection, topology, rank), rank)
            if self.enabled and runner_ready():
                self._tables = compile_program(self.program, np.dtype(np.int64), "max")
                self.compiled = self._tables.runner(control)
        elif self.enabled:  # blocking calls check first (shared memory on one node)
            self.blocking = blocking_check(control)

    def of_call(self, error, sig, *, tag, blocking):
        """The :class:`~wacoll.mpi.agreement.Check` of one call on the Python route
        (``error``: this rank's fault with its arguments, or None), or None when
        calls are not checked. A blocking call on one cluster completes it now, in
        the blocking check; on several clusters it runs in the compiled runner, as
        a compiled call's check does (one of :attr:`spare` runners, or a new one)."""
        if not self.enabled:
            return None
        if self._tables is not None:
            runner = self.spare.pop() if self.spare else self._tables.runner(self.control)
            return Check(self.control, error, sig, runner=runner, pool=self, tag=tag)
        return Check(
            self.control,
            error,
            sig,
            program=self.program,
            tag=tag,
            persistent=self.blocking if blocking else None,
        )

    @property
    def checks_started(self) -> bool:
        """Whether a compiled non-blocking call can be checked here
        (:meth:`of_started`)."""
        return (
            self.enabled
            and not self.first
            and (not self.several or self._tables is not None)
        )

    def of_started(self):
        """What a compiled non-blocking call's check is made of, for each call in
        flight its own: ``(runner, start)``, a fresh runner of the compiled check
        on several clusters, or on one cluster ``start(flags)``, which starts the
        library's ``Iallreduce`` in place (MAX) and returns its request. None when
        calls are not checked, or the compiled check is missing (the Python route
        checks them)."""
        if not self.enabled or self.first:
            return None
        if self.several:
            return (
                None
                if self._tables is None
                else (self._tables.runner(self.control), None)
            )
        return None, functools.partial(_iallreduce_max, self.control)

    def gated(self, blocking):
        """Whether the call's work waits for its check: ``"first"``, and a blocking
        call on one cluster (whose check has no latency to hide)."""
        return self.first or (blocking and not self.several)

    def failure(self, sig, flags, exchange=True):
        """The error every rank raises after a compiled or replayed call's check
        failed (``flags``: what the check all-reduced; None: the blocking check's).
        ``exchange=False`` for a non-blocking call: no collective, the error named
        by the flags alone (see :meth:`~wacoll.mpi.agreement.Check.failure`)."""
        if flags is None:
            flags = self.blocking.flags.copy()
        return Check.completed(self.control, sig, flags).failure(exchange)

    def free(self):
        """Release the blocking check's resources (collective)."""
        if self.blocking is not None:
            self.blocking.free()
            self.blocking = None


def _iallreduce_max(control, flags):
    """Start the MAX all-reduce of a check's flags, in place, on ``control``."""
    return control.Iallreduce(MPI.IN_PLACE, flags, op=MPI.MAX)
