"""Non-blocking calls, compiled: started in the calling thread, finished in C.

A non-blocking collective (``Ibcast``, ``Iallreduce``, ...) whose work is a plan the
compiled runner takes, or the MPI library's own collective, becomes a
:class:`StartedCall`: the recipe of the slots its calls run in
(:class:`~wacoll.mpi._runner.Started`: a runner of the plan, the check's runner or
all-reduce, the check's flags). A call takes a free slot and starts its check and
its work at once, in the calling thread, so that every rank starts its collectives
in program order; the progress engine (:mod:`wacoll.mpi.engine`) then advances it as
a :class:`StartedTask`, and the request's ``Wait`` finishes it in the calling thread,
in C with the GIL released. A repeated call (same shapes, same or new arrays) finds
its ``StartedCall`` by its key and starts without reading its arguments again
(:meth:`wacoll.mpi.route.Route.start_replayed`).

A call the MPI library runs whose check needs no message of its own (one node's,
published in the node's ring: :class:`~wacoll.mpi._runner.NodeRing`; or an
unchecked call) needs no progress engine either: it returns a :class:`NodeRequest`,
the library's own request, whose ``Wait`` and ``Test`` collect the check's verdict
beside the work, in C. ``MPI.Request.Waitall`` and its kin complete it as the
library's; the verdict of a call completed so is collected at the communicator's
next call (:meth:`wacoll.mpi.route.Route.settle`), which no replay skips
(:meth:`wacoll.mpi._fastcall.Recordings.watch`).

What is left to the Python route (:class:`~wacoll.mpi.task.CallTask`): a plan the
runner does not take, a composite, buffers the call stages (a derived datatype),
tracing and ``check="first"``.
"""

from __future__ import annotations

import ctypes
from typing import Any, Literal

from mpi4py import MPI

from wacoll.errors import WacollError
from wacoll.mpi._fastcall import replaced
from wacoll.mpi._runner import OUTCOMES, Started, address
from wacoll.mpi.engine import Task
from wacoll.mpi.interrupts import collective_name, interrupted

__all__ = ["StartedCall", "StartedTask", "NodeRequest", "FREE_SLOTS"]

#: Completed slots a recorded call keeps for its next calls (each holds the runners'
#: work areas); a call finding none makes a new one.
FREE_SLOTS = 4

_OK = OUTCOMES["ok"]
_CHECK_FAILED = OUTCOMES["check failed"]
_WORK_ERROR = OUTCOMES["work error"]


class StartedCall:
    """How one non-blocking call starts, again and again.

    Parameters
    ----------
    op : str
        The operation.
    compiled : wacoll.mpi.runner.CompiledProgram or None
        The plan's tables (None: the MPI library runs the call, or nothing does).
    method : callable or None
        The library's non-blocking collective on the wire (None: a plan, or a
        checked Barrier, whose check is the barrier).
    replace : tuple of (int, object)
        Arguments passed to ``method`` otherwise than as given (an operator by name).
    places : tuple
        ``(where_in, where_out, in_copy_bytes)`` of the call's buffers in its
        arguments (:func:`wacoll.mpi.plancall.buffer_places`).
    wire : mpi4py.MPI.Intracomm
        The communicator of the plan's messages.
    argcheck : wacoll.mpi.argcheck.ArgumentCheck or None
        The communicator's check (None: the call is not checked).
    sig : wacoll.mpi.agreement.Signature
    keep : tuple
        Objects the call's key names by identity, kept alive while recorded.
    plan, family, reason
        What the call runs, and why (for ``comm.last_*``).
    """

    def __init__(
        self,
        *,
        op,
        compiled,
        method,
        replace,
        places,
        wire,
        argcheck,
        sig,
        keep,
        plan,
        family,
        reason,
    ):
        self.op, self.compiled, self.method, self.replace = op, compiled, method, replace
        (
            (self.in_index, self.in_offset),
            (self.out_index, self.out_offset),
            self.in_copy_bytes,
        ) = places
        self.wire, self.argcheck, self.sig, self.keep = wire, argcheck, sig, keep
        self.plan, self.family, self.reason = plan, family, reason
        self.digest = sig.digest()
        self.free = []
        self.name = collective_name(op, "start")
        #: The library runs the call and its check needs no message (one node's
        #: ring, or no check): it returns a :class:`NodeRequest`.
        self.direct = (
            compiled is None
            and method is not None
            and (argcheck is None or argcheck.node_ring is not None)
        )

    def _slot(self):
        runner = None if self.compiled is None else self.compiled.runner(self.wire)
        check, start, ring = (
            (None, None, None) if self.argcheck is None else self.argcheck.of_started()
        )
        return Started(runner, check, start, self.digest, self.in_copy_bytes, ring)

    def start(self, args, tag, given=None):
        """Start a call over ``args`` (laid out as the recorded call's) with messages
        tagged ``tag``: its slot, running. ``given``: the arguments as the library
        reads them (:func:`wacoll.mpi.buffers.for_mpi`), for a call read afresh; a
        replayed call's are of the kinds the library reads but for an operator
        named by a string."""
        slot = self.free.pop() if self.free else self._slot()
        inbuf = outbuf = 0
        if self.out_index >= 0:
            outbuf = address(args[self.out_index]) + self.out_offset
        if self.in_index >= 0:
            inbuf = address(args[self.in_index]) + self.in_offset
        elif self.in_index == -2:  # in place: the input is the output as it is now
            inbuf = slot.in_copy_at
            ctypes.memmove(inbuf, outbuf + self.in_offset, self.in_copy_bytes)
        request = None
        if self.method is not None:
            if given is None:
                given = replaced(args, self.replace) if self.replace else args
            request = self.method(*given)
        slot.begin(inbuf, outbuf, tag, request)
        return slot

    def start_direct(self, args, tag, given, route):
        """Start a :attr:`direct` call as :meth:`start` does: its
        :class:`NodeRequest` (the library's request, which the slot polls),
        watched by the route's recordings."""
        slot = self.free.pop() if self.free else self._slot()
        if given is None:
            given = replaced(args, self.replace) if self.replace else args
        request = NodeRequest(self.method(*given))
        slot.begin(0, 0, tag, request, False)
        request._slot, request._call, request._route, request._args = (
            slot,
            self,
            route,
            args,
        )
        route.recorded.watch(request, slot.work_at)
        return request

    def release(self, slot):
        """Keep a slot whose call completed for the next call."""
        if len(self.free) < FREE_SLOTS:
            self.free.append(slot)


class StartedTask(Task):
    """A started call as the progress engine's task: it has no MPI requests to
    wait for in Python (``waiting`` is empty: the engine polls it).

    Parameters
    ----------
    slot : wacoll.mpi._runner.Started
    call : StartedCall
    on_failure : callable
        Called with False after a failed check (the route stops the communicator
        on every rank).
    stop : callable
        Called with the reason when this rank alone abandons the call (an MPI
        error of the check, an interrupt): the communicator stops here.
    abandoned : list
        Where a slot whose call failed is kept (its requests may still be in flight).
    args : tuple
        The call's arguments: kept until it is over (the MPI library keeps a
        non-blocking call's buffers alive the same way).
    """

    __slots__ = ("slot", "call", "on_failure", "stop", "abandoned", "args")
    compiled = True

    def __init__(self, slot, call, on_failure, stop, abandoned, args):
        self.slot, self.call, self.stop = slot, call, stop
        self.args = args  # the application's buffers, alive until the call is over
        self.on_failure, self.abandoned = on_failure, abandoned

    def advance(self, block=False):
        """Whether the call is over; raises its error (every rank the same one for
        a failed check)."""
        slot = self.slot
        if not slot.advance(block):
            return False
        args, self.args = self.args, None
        _over(slot, self.call, args, self.on_failure, self.stop, self.abandoned)
        return True


def _over(slot, call, args, on_failure, stop, abandoned):
    """A started call is over: its slot kept for the next call, or its error
    raised (every rank the same one for a failed check), the slot and the call's
    arguments kept in ``abandoned`` (MPI may still use its buffers)."""
    outcome = slot.outcome
    if outcome == _OK:
        call.release(slot)
        return
    abandoned.append((slot, args))
    if outcome == _CHECK_FAILED:
        on_failure(False)
        raise call.argcheck.failure(call.sig, slot.flags.copy(), exchange=False)
    error = slot.error()
    if outcome != _WORK_ERROR:  # the check's own MPI error, or an interrupt
        stop(
            f"a non-blocking collective on this wacoll.Comm was abandoned "
            f"({type(error).__name__}); its peers may still wait for its "
            f"messages, so the communicator cannot run further "
            f"collectives: Free it"
        )
    raise error


class NodeRequest(MPI.Request):
    """The request of a non-blocking call the MPI library runs, checked in one
    node's ring or not checked (:attr:`StartedCall.direct`): the library's own
    request, so that ``MPI.Request.Waitall`` and its kin complete it as they do
    the library's. Its ``Wait`` advances the work and reads the check's verdict
    together, in C (``Test`` polls the work once the verdict is read): a failed
    check raises at once, and its work, which may never complete, is taken out
    of the request (which is then ``MPI.REQUEST_NULL``). A call completed by the
    library's functions has its verdict collected at the communicator's next
    call.

    Not created directly: ``comm.Ibcast(...)`` and friends return one.
    """

    __slots__ = ("_slot", "_call", "_route", "_args", "_error")
    _slot: Started | None
    _call: StartedCall
    _route: Any  # (wacoll.mpi.route.Route, which imports this module)
    _args: tuple | None
    _error: WacollError | None

    def __init__(self, request=None):
        self._slot = self._error = None

    @property
    def error(self) -> WacollError | None:
        """The wacoll error the call ended with, or None."""
        return self._error

    def Wait(self, status: MPI.Status | None = None) -> Literal[True]:
        """Wait for the call; raise its wacoll error, if any. An interrupt (Ctrl-C)
        in the wait ends the job (:mod:`wacoll.mpi.interrupts`)."""
        if self._slot is not None:
            try:
                self.collect(True)
            except WacollError:
                raise
            except BaseException as exc:
                interrupted(exc, f"Wait of {self._call.name}")
                raise
            if status is None:  # (the handle is MPI_REQUEST_NULL now)
                return True
        return super().Wait(status)

    def Test(self, status: MPI.Status | None = None) -> bool:
        """Whether the call is complete; raise its wacoll error, if any."""
        if self._slot is not None:
            try:
                if not self.collect(False):
                    return False
            except WacollError:
                raise
            except BaseException as exc:
                interrupted(exc, f"Test of {self._call.name}")
                raise
        return super().Test(status)

    wait = Wait
    test = Test  # type: ignore[assignment]  # a bool, as Test (not a pair)

    def collect(self, block):
        """Advance the call (to its end with ``block``); once it is over, its
        verdict collected: whether it is (raises its error). The thread that
        takes the slot advances it (another thread's collection of the same
        request, at a call of its own, finds none and leaves it)."""
        slot, self._slot = self._slot, None
        if slot is None:
            return True
        if not slot.advance(block):
            self._slot = slot
            return False
        route, args = self._route, self._args
        self._args = None
        route.recorded.unwatch(self)
        if slot.outcome == _OK:
            self._call.release(slot)
            return True
        if slot.outcome == _CHECK_FAILED:
            # the work, never waited for, leaves the application's request
            args = (args, MPI.Request(self))
            ctypes.memmove(
                MPI._addressof(self),
                MPI._addressof(MPI.REQUEST_NULL),
                MPI._sizeof(MPI.Request),
            )
        try:
            _over(
                slot,
                self._call,
                args,
                route.stopped_by_check,
                route.stop,
                route.abandoned_calls,
            )
        except WacollError as exc:
            self._error = exc
            raise
        return True
