"""The one route of a communicator's collective calls.

Every buffer collective of a :class:`wacoll.Comm` takes the same steps, whatever its
mode, its family or the number of clusters:

1. **replay**: a call that looks like one recorded before (same shapes, same or
   new arrays) runs its recorded form at once, in one trip into C: a blocking one
   to its end (the caller looks it up in :attr:`Route.replays`, the recordings, and
   raises a failed one's error by :meth:`Route.failed`; :mod:`wacoll.mpi.fastpath`,
   :mod:`wacoll.mpi.plancall`), a non-blocking one started
   (:meth:`Route.start_replayed`; :mod:`wacoll.mpi.startcall`);
2. **describe**: otherwise the call is read once (:mod:`wacoll.mpi.described`);
3. **dispatch**: its description becomes one executable, the MPI library's
   collective, a plan or a composite (:mod:`wacoll.mpi.dispatch`);
4. **run** (:meth:`Route.run`): a blocking call runs compiled where it can: a plan
   in the compiled runner, the library's collective called from C, each beside or
   after the communicator's argument check (:mod:`wacoll.mpi.argcheck`), and is
   recorded for replay; a non-blocking call the same way, started in the calling
   thread and finished by the progress engine or its request's ``Wait``
   (:mod:`wacoll.mpi.startcall`); the rest (tracing, ``check="first"``, a plan the
   runner does not take, a composite, a staged buffer, a rank whose own arguments
   are invalid) runs on the Python route,
   the executable's work and the same check advanced together
   (:class:`~wacoll.mpi.task.CallTask`); a persistent call checks once and binds
   (:class:`~wacoll.mpi.persistent.Prequest`).

A failed check raises the same error on every rank; a blocking call's route then
retires its wire (:meth:`Route.retire`), a non-blocking one's stops the
communicator (:meth:`Route.stop`).

The route also holds what a communicator's calls share: the call counter that tags
non-blocking calls' messages (:meth:`Route.next_tag`), the wire, and what the last
call ran (:attr:`Route.last_plan`, :attr:`Route.last_family`,
:attr:`Route.last_route`).
"""

from __future__ import annotations

import atexit
import functools
import itertools
import sys
import weakref

from mpi4py import MPI

from wacoll.errors import WacollError
from wacoll.mpi._fastcall import FOLDED_MARK, NativeCall, Recordings
from wacoll.mpi._runner import mpi_over
from wacoll.mpi.buffers import for_mpi
from wacoll.mpi.clocks import now
from wacoll.mpi.composite import CompositeWork, cluster_communicator
from wacoll.mpi.dispatch import CompositeRun, LibraryCollective, library_method
from wacoll.mpi.engine import Naps, engine, require_threads
from wacoll.mpi.executor import BLOCKING_TAG, ProgramRun, blocking_tag, call_tag
from wacoll.mpi.exploring import ExploringCall, keep_candidate
from wacoll.mpi.fastpath import CAPACITY, call_directly
from wacoll.mpi.interrupts import collective_name
from wacoll.mpi.keeper import stop_keeper
from wacoll.mpi.persistent import Prequest, Request
from wacoll.mpi.plancall import (
    PlanCalls,
    buffer_places,
    kept_alive,
    record,
    record_per_count,
    replayable,
)
from wacoll.mpi.startcall import StartedCall, StartedTask
from wacoll.mpi.task import CallTask, NativeWork, StartOrder
from wacoll.plans.select import NATIVE

__all__ = ["Route", "private_dup", "settle_all"]


#: Routes whose blocking calls may leave verdicts in flight (several clusters), or
#: calls with nothing to move folded into the next check (one cluster too).
_WITH_VERDICTS: weakref.WeakSet = weakref.WeakSet()
_MADE = itertools.count()


def settle_all():
    """Collect the verdicts still in flight on every communicator of this process
    (collective over each: every rank of each calls it, or a call of each): a
    failed one raises, as the communicator's next call would."""
    # in the order the communicators were made (the same on every rank); the
    # wires of failed calls are made at each communicator's own next call
    for route in sorted(_WITH_VERDICTS, key=lambda r: r.made):
        if route.wire is not None and route.broken is None:
            route.settle(catch_up=False, flush=True)


@atexit.register
def _settle_at_exit():
    """At the end of the process (before MPI finalizes): collect the verdicts still
    in flight, as ``MPI_Finalize`` completes what is pending; a failed one is
    reported on standard error (there is no call left to raise it in)."""
    if MPI.Is_finalized():  # (the application finalized MPI itself: done there)
        return
    _settle_every_route()


def _settle_at_finalize(comm, keyval, value):
    """``MPI_Finalize`` deletes ``COMM_SELF``'s attributes first, with MPI still
    working: an application that finalizes MPI itself settles its verdicts there
    (the verdict stream's keeper sends nothing more). A verdict stream freed
    from then on leaves its requests to MPI (:func:`wacoll.mpi._runner.mpi_over`)."""
    try:
        stop_keeper()
        _settle_every_route()
    finally:
        mpi_over()


_finalize_hook = None


def _hook_finalize():
    """Make ``MPI_Finalize`` settle every communicator's verdicts (once)."""
    global _finalize_hook
    if _finalize_hook is None:
        _finalize_hook = MPI.Comm.Create_keyval(delete_fn=_settle_at_finalize)
        MPI.COMM_SELF.Set_attr(_finalize_hook, True)


def _settle_every_route():
    for route in sorted(_WITH_VERDICTS, key=lambda r: r.made):
        if route.wire is None or route.broken is not None:
            continue
        try:
            route.settle(catch_up=False, flush=True)
        except Exception as exc:  # noqa: BLE001 -- reported: no call is left to raise it
            print(
                f"wacoll: a collective call's cross-rank check failed after this "
                f"rank had returned from it: {exc}",
                file=sys.stderr,
            )


#: Operations whose count is every rank's: count 0 moves nothing anywhere.
_COUNTED = frozenset(
    (
        "bcast",
        "scatter",
        "gather",
        "allgather",
        "alltoall",
        "reduce",
        "allreduce",
        "scan",
        "exscan",
        "reduce_scatter_block",
    )
)


def moves_nothing(sig) -> bool:
    """Whether a call with signature ``sig`` moves no data on any rank that agrees
    with it: an operation whose count is every rank's, with count 0."""
    return sig.count == 0 and sig.kind in _COUNTED


#: Why a communicator stops after a disagreeing call that returned on a rank
#: before its verdict (:meth:`Route.catch_up`).
STOPPED_AFTER_RETURN = (
    "a call on this wacoll.Comm whose ranks disagreed had returned on some rank "
    "before its cross-rank check's verdict, so its ranks raised at different calls "
    "and can no longer be matched call for call: the communicator runs no further "
    "collectives; Free it and make a new one"
)


class FoldedCall:
    """A recorded blocking call with nothing to move: replaying it folds its digest
    into the communicator's next check (:meth:`Route._fold`): the ring of checks of
    several clusters (:class:`~wacoll.mpi._runner.Verdicts`), or one cluster's
    blocking check (:class:`~wacoll.mpi.agreement.NodeCheck`,
    :class:`~wacoll.mpi.agreement.PersistentCheck`), each with ``fold(digest)``;
    where calls are not checked (``checks`` None), it does nothing at all."""

    __slots__ = ("checks", "digest", "sig", "plan", "family", "note")

    def __init__(self, checks, sig, plan, family, note):
        self.checks, self.sig, self.digest = checks, sig, sig.digest()
        self.plan, self.family = plan, family
        # where the route looks for the last folded call (a list of one, not the
        # route itself: a recorded call that held its route would make the route
        # wait for the garbage collector, whose timing differs between ranks)
        self.note = note

    def run(self, args):
        if self.checks is not None:  # (None: calls are not checked, nothing to do)
            self.checks.fold(self.digest)
            self.note[0] = self
        return True


def _weak_settle(route):
    """``route.settle(catch_up=False, entering=False)`` through a weak reference:
    what an explored call keeps without keeping its route alive (a cycle through
    the recordings would leave the route to the garbage collector)."""
    ref = weakref.ref(route)

    def settle():
        alive = ref()
        if alive is not None:
            alive.settle(catch_up=False, entering=False)

    return settle


def private_dup(comm):
    """A duplicate of ``comm`` as a plain ``MPI.Intracomm`` (mpi4py's Dup keeps the
    subclass, whose collectives would call back into wacoll)."""
    return MPI.Intracomm(MPI.Intracomm.Dup(comm))


class Route:
    """How one communicator runs its calls (see the module docstring).

    Parameters
    ----------
    wire : mpi4py.MPI.Intracomm
        The private duplicate the calls' messages travel on.
    argcheck : wacoll.mpi.argcheck.ArgumentCheck
        The communicator's argument check (its ``control`` carries the checks).
    dispatcher : wacoll.mpi.dispatch.Dispatcher
    tracer : wacoll.mpi.trace.Tracer or None

    Attributes
    ----------
    wire : mpi4py.MPI.Intracomm
        The current wire (a failed blocking call retires it for a fresh one).
    seq : int
        Calls started so far (numbers the tags of non-blocking calls).
    broken : str or None
        Why the communicator can run no more collectives, or None.
    broken_everywhere : bool
        Every rank stops, each when it learns of it (see :meth:`stop`).
    last_plan, last_family, last_route, last_reason
        What the most recent collective ran, and why (see :class:`wacoll.Comm`).
    """

    def __init__(self, wire, argcheck, dispatcher, tracer=None, tuning=None):
        self.wire = wire
        #: The communicator's learning (:class:`~wacoll.mpi.learning.Tuning`), or
        #: None: an explored call's compiled candidate is kept for its counted
        #: calls to replay (:mod:`wacoll.mpi.exploring`).
        self.tuning = tuning
        self.argcheck = argcheck
        self.control = argcheck.control
        self.dispatcher = dispatcher
        self.network = dispatcher.network
        self.place = dispatcher.place
        self.tracer = tracer
        # the library phases of composed plans (family "han") run on it
        self.cluster = (
            cluster_communicator(wire, self.network)
            if self.network.nclusters > 1
            else None
        )
        self.recorded = Recordings()
        #: The recorded calls, or None while calls must not replay.
        self.replays = None if tracer is not None or argcheck.first else self.recorded
        self.plan_calls = PlanCalls(wire, argcheck, recordings=self.replays)
        #: Non-blocking calls started compiled, by their key (:mod:`.startcall`).
        self.started = {}  # the compiled non-blocking calls (record: bounded)
        self.scratch = {}
        self.seen = set()  # keys of library calls met once
        # wires of failed calls, never freed: messages the abandoned work sent may
        # still wait in a peer's queue, and the MPI library reuses a freed
        # communicator's context for a new one, whose receives would match them
        self.abandoned = []
        # slots of failed non-blocking calls, with their buffers (never reused)
        self.abandoned_calls = []
        #: A failed verdict :meth:`collect_due` collected (in :meth:`free`: raised).
        self.due_failure = None
        self._seq = 0
        #: A failed call's wire is yet to be replaced (:meth:`catch_up`).
        self.retire_due = False
        #: The progress engine's entries of the non-blocking calls started, until
        #: seen complete (:meth:`free` completes them first).
        self.in_flight = []
        #: The order the library's collectives start in when checks come first.
        self.start_order = StartOrder()
        self.made = next(_MADE)  # (communicators are made in one order everywhere)
        #: The folded call that ran last (:class:`FoldedCall`), in a list of one:
        #: what a failed flush of one cluster's blocking check names.
        self.folded_note = [None]
        if argcheck.verdicts is not None or argcheck.blocking is not None:
            _WITH_VERDICTS.add(self)
            _hook_finalize()
        self.broken = None
        self.broken_everywhere = False
        self._last = (None, None, None)  # plan, family, route
        self._last_reason = ""
        self._ran_at = 0  # replays counted when the last call read afresh ran
        #: Seconds the most recent explored call (``desc.shape`` set) took to run:
        #: its compiled call, or on the Python route its task (reading the call,
        #: dispatching it and setting its run up left out): what a learning
        #: communicator compares.
        self.run_seconds = 0.0

    # ------------------------------------------------------------ shared state
    def next_tag(self) -> int:
        """Count a call started outside :meth:`run` (an object call, a persistent
        start): the tag of its messages."""
        seq = self.seq
        self.seq = seq + 1
        return call_tag(seq)

    def usable(self):
        """Raise when the communicator can run no collective (freed, or stopped)."""
        if self.wire is None:
            raise WacollError("this wacoll.Comm has been freed")
        if self.broken is not None:
            raise WacollError(self.broken)

    @property
    def seq(self) -> int:
        """Calls started so far, replayed ones too (the recordings count those)."""
        return self._seq + self.recorded.nreplayed

    @seq.setter
    def seq(self, value: int) -> None:
        self._seq = value - self.recorded.nreplayed

    def ran(self, plan, family, route, reason=None):
        """Note what the most recent collective ran (and why, when it was chosen
        afresh: a replayed call keeps the reason of the call it repeats)."""
        self._ran_at = self.recorded.nreplayed
        self._last = (plan, family, route)
        if reason is not None:
            self._last_reason = reason

    def _sync_last(self):
        """Take what the last replayed call ran, where one ran since the last call
        read afresh (a replay notes nothing itself: it stays in C)."""
        recorded = self.recorded
        if recorded.nreplayed == self._ran_at:
            return
        last = recorded.last
        if type(last) is ExploringCall:
            why = last.reason
        else:
            why = "a repeated call, run as recorded"
        if type(last) is NativeCall:
            self.ran(None, NATIVE, "replayed", why)
        else:
            self.ran(last.plan, last.family, "replayed", why)

    @property
    def last_plan(self):
        self._sync_last()
        return self._last[0]

    @property
    def last_family(self):
        self._sync_last()
        return self._last[1]

    @property
    def last_route(self):
        self._sync_last()
        return self._last[2]

    @property
    def last_reason(self):
        self._sync_last()
        return self._last_reason

    # ------------------------------------------------------------ 1. replay
    def start_replayed(self, reader, family, level, args):
        """Start the recorded non-blocking call these arguments match: its request
        (a :class:`~wacoll.mpi.persistent.Request`, or on one node the library's
        own, :class:`~wacoll.mpi.startcall.NodeRequest`), or None when none
        matches or a verdict it collected failed (describe the call afresh)."""
        key = self.recorded.key(reader, family, level, args)
        call = None if key is None or self.broken is not None else self.started.get(key)
        if call is None:
            return None
        self.settle(flush=True)
        if self.broken is not None:  # (a verdict it collected failed)
            return None
        return self._launch(call, args, "replayed", "a repeated call, run as recorded")

    # ------------------------------------------------------------ 4. run
    def run(self, desc, exe):
        """Run the call ``desc`` describes by ``exe`` (None: this rank's arguments
        are invalid, and it only takes part in the check): None for a blocking
        call, a :class:`~wacoll.mpi.persistent.Request` for a non-blocking one, a
        :class:`~wacoll.mpi.persistent.Prequest` for a persistent one."""
        mode = desc.mode
        if mode != "call" and (
            self.argcheck.verdicts is not None or self.argcheck.blocking is not None
        ):
            self.settle(flush=True)  # checked apart from the ring and folded calls
        if mode == "start":
            require_threads()  # before anything starts
        if exe is not None and mode == "start" and self.replays is not None:
            call = self._startable(desc, exe)
            if call is not None:
                return self._launch(
                    call,
                    desc.args,
                    "compiled",
                    exe.reason,
                    None if call.method is None else tuple(map(for_mpi, desc.args)),
                )
        if desc.vector:
            self.flush_folds()  # (a vector call is agreed on apart from them)
        ring = self.argcheck.verdicts
        # not with check="first", whose every call waits for its own verdict
        folds = ring if ring is not None else self.argcheck.blocking
        if (
            (folds is not None or not self.argcheck.enabled)
            and not self.argcheck.first
            and mode == "call"
            and exe is not None
            and desc.shape is None
            and self.tracer is None
            and moves_nothing(desc.sig)
        ):
            self._fold(desc, exe, folds)
            return None
        seq = self.seq
        self.seq = seq + 1
        if exe is not None and mode == "call" and self.tracer is None:
            try:
                compiled = self._compiled(desc, exe)
            except WacollError as exc:  # raised on every rank by the check
                desc.fail(exc)
                exe = compiled = None
            if compiled is not None:
                recorded, go = compiled
                self.ran(exe.plan, exe.family, "compiled", exe.reason)
                passed = self._timed(go) if desc.shape is not None else go()
                if not passed:
                    self.failed(recorded)
                if ring is not None and ring.defer and not ring.idle:
                    # a call read afresh waits for its verdict (only replayed
                    # calls return before theirs): where arguments change from
                    # call to call, every rank raises at the call itself
                    self.settle(catch_up=False, entering=False)
                if (
                    type(exe) is not LibraryCollective
                    and desc.prepared.finish is not None
                ):
                    desc.prepared.finish()
                return None
        tag = BLOCKING_TAG if mode == "call" else call_tag(seq)
        work = None
        if exe is not None and mode != "bind":
            try:
                work = self._work(
                    desc, exe, blocking_tag(desc.sig.digest()) if mode == "call" else tag
                )
            except WacollError as exc:  # raised on every rank by the check
                desc.fail(exc)
                exe = None
        check = (
            None
            if desc.vector
            else self.argcheck.of_call(
                desc.error, desc.sig, tag=tag, blocking=mode == "call"
            )
        )
        if check is None and desc.error is not None:
            raise desc.error
        if mode == "bind":
            return self._bind(desc, exe, check)
        if exe is not None:
            self.ran(
                exe.plan,
                exe.family,
                "library" if type(exe) is LibraryCollective else "python",
                exe.reason,
            )
        gated = self.argcheck.gated(mode == "call") or self._gated_library(desc, exe)
        task = CallTask(
            work,
            check,
            exchange=mode == "call" and self.argcheck.verdicts is None,
            gated=gated,
            order=(self.start_order, self.start_order.ticket())
            if gated and check is not None and type(work) is NativeWork
            else None,
            finish=None
            if exe is None or type(exe) is LibraryCollective
            else desc.prepared.finish,
            on_failure=self.retire if mode == "call" else self.stopped_by_check,
        )
        if mode == "start":
            return self._submitted(task, collective_name(desc.op, mode))
        if desc.shape is not None:
            self._timed(functools.partial(task.advance, block=True))
        else:
            task.advance(block=True)
        return None

    def _fold(self, desc, exe, checks):
        """A blocking call with nothing to move (every rank's count is 0): its
        digest folded into the next check (:meth:`~wacoll.mpi._runner.Verdicts.fold`,
        or one cluster's blocking check's ``fold``), and the call recorded so that
        a repeated one does no more."""
        folded = FoldedCall(checks, desc.sig, exe.plan, exe.family, self.folded_note)
        folded.run(desc.args)
        self.seq += 1
        self.ran(exe.plan, exe.family, "folded", exe.reason)
        key = desc.replay_key
        if key is not None and self.replays is not None:
            record(self.recorded, key, folded)

    def _launch(self, call, args, route, reason, given=None):
        """Start a non-blocking call compiled (:mod:`wacoll.mpi.startcall`) and hand
        it to the progress engine: its request (MPI_THREAD_MULTIPLE checked by the
        caller)."""
        seq = self._seq + self.recorded.nreplayed  # (self.seq, inline)
        self._seq += 1
        if call.direct and not self.recorded.full:
            # the library's own request: no progress engine, no generalized request
            request = call.start_direct(args, call_tag(seq), given, self)
            self.ran(call.plan, call.family, route, reason)
            return request
        require_threads()  # before anything starts
        slot = call.start(args, call_tag(seq), given)
        self.ran(call.plan, call.family, route, reason)
        task = StartedTask(
            slot, call, self.stopped_by_check, self.stop, self.abandoned_calls, args
        )
        return self._submitted(task, call.name)

    def _submitted(self, task, name):
        """Hand a started non-blocking call to the progress engine: its request,
        its entry kept until it completes (:meth:`free` waits for it)."""
        grequest, entry = engine().submit(task)
        in_flight = self.in_flight
        if len(in_flight) >= 64:  # forget the completed ones
            in_flight[:] = [e for e in in_flight if not e.done]
        in_flight.append(entry)
        return Request(grequest, entry, name)

    def _startable(self, desc, exe):
        """The compiled form of a non-blocking call read afresh (recorded under its
        key when a repeated call can find its buffers in its own arguments), or
        None for the Python route."""
        plan_calls, argcheck = self.plan_calls, self.argcheck
        checked = argcheck.enabled and not desc.vector
        if not plan_calls.ready or isinstance(exe, CompositeRun):
            return None
        if checked and not argcheck.checks_started:
            return None
        prepared, args = desc.prepared, desc.args
        compiled = method = None
        if type(exe) is LibraryCollective:
            places = ((-1, 0), (-1, 0), 0)
            method = self._library(desc, checked, "nonblocking")
        else:
            if not (desc.op == "barrier" and checked):  # the check is the barrier
                compiled = plan_calls.compiled(exe.program, prepared)
                if compiled is None:
                    return None
            places = buffer_places(prepared, args)
            if not replayable(prepared, places):
                return None
        call = StartedCall(
            op=desc.op,
            compiled=compiled,
            method=method,
            replace=_replaced(args),
            places=places,
            wire=self.wire,
            argcheck=argcheck if checked else None,
            sig=desc.sig,
            keep=kept_alive(args),
            plan=exe.plan,
            family=exe.family,
            reason=exe.reason,
        )
        if desc.replay_key is not None:
            record(self.started, desc.replay_key, call)
        return call

    def _timed(self, run):
        """``run()``, its duration on this rank kept for learning
        (:attr:`run_seconds`)."""
        started = now()
        result = run()
        self.run_seconds = now() - started
        return result

    def _compiled(self, desc, exe):
        """The blocking call's compiled form ready to run over its buffers, as
        ``(call, go)``: ``go()`` runs it and says whether the check passed (``call``
        names the failure); None for the Python route."""
        prepared, args, key = desc.prepared, desc.args, desc.replay_key
        checked = self.argcheck.enabled and not desc.vector
        recorder = None
        if desc.shape is not None and desc.explore_key is not None:
            # an explored call: its candidate's compiled call kept for the
            # shape's counted calls, not recorded as itself
            recorder = self._candidate_keeper(desc)
            if recorder is not None:
                key = desc.explore_key
        # a call recorded for every count of its size class: where its work
        # follows from the count (the library's collective, or a program whose
        # blocks hold the count or are the vector's segments), and learning has
        # decided
        class_key = (
            desc.class_key
            if key is not None and desc.shape is None and getattr(exe, "per_count", False)
            else None
        )
        if type(exe) is LibraryCollective:
            given = tuple(map(for_mpi, args))
            if checked and self.argcheck.several and self.plan_calls.gates(desc.sig):
                # its verdict first (every rank receives), in shared memory, then
                # the library's blocking collective, called as one cluster's are
                call = self._native_call(
                    desc,
                    checked,
                    class_key,
                    check=self.argcheck.node_gate,
                    key=key,
                    recorder=recorder,
                )
                return call, functools.partial(call.run, given)
            if checked and self.argcheck.several:  # the check beside it, in C
                method = self._library(desc, True, "nonblocking")
                call = self.plan_calls.library(
                    method,
                    _replaced(args),
                    desc.sig,
                    args,
                    key,
                    class_key=class_key,
                    prepared=prepared,
                    recorder=recorder,
                )
                return (
                    None if call is None else (call, functools.partial(call.run, given))
                )
            # one cluster, or unchecked: the check first, then the library's
            # blocking collective, as a replay runs it (the library never matches a
            # blocking collective with a non-blocking one)
            call = self._native_call(desc, checked, class_key)
            return call, functools.partial(call.run, given)
        if isinstance(exe, CompositeRun):
            return None
        program = None if desc.op == "barrier" and checked else exe.program
        planned = self.plan_calls.make(
            exe.plan,
            program,
            prepared,
            desc.sig,
            args,
            key,
            checked=checked,
            class_key=class_key,
            parts=exe.per_count,
            recorder=recorder,
        )
        if planned is None:
            return None
        return planned, functools.partial(self.plan_calls.run, planned, prepared)

    def _candidate_keeper(self, desc):
        """``recorder(key, call)`` for an explored call's compiled call: kept as
        its candidate's in the :class:`~wacoll.mpi.exploring.ExploringCall` under
        ``key`` (None when nothing is recorded here)."""
        tuning, recordings = self.tuning, self.recorded
        if tuning is None or self.replays is None:
            return None
        shape, candidate = desc.shape, desc.candidate

        def make(recordings, key):
            settle = _weak_settle(self)
            return ExploringCall(tuning, shape, settle, recordings, key)

        return lambda key, call: keep_candidate(recordings, key, make, candidate, call)

    def _library(self, desc, checked, kind):
        """The library's ``kind`` (``"blocking"`` or ``"nonblocking"``) collective
        of the call on the wire, or None for a checked Barrier: the check is the
        barrier."""
        if desc.op == "barrier" and checked:
            return None
        return library_method(self.wire, desc.op, kind)

    def _native_call(
        self, desc, checked, class_key=None, *, check=None, key=None, recorder=None
    ):
        """The library's blocking call with the one-cluster check before it (or
        ``check``: the :attr:`~wacoll.mpi.argcheck.ArgumentCheck.node_gate` of
        declared clusters on one node), recorded for replay the second time a call
        looks the same (a loop, not a call met once; with ``check``, at once): with
        ``class_key``, the second time a call of its size class does, for every
        count of the class. An explored call's is kept by ``recorder(key, call)`` instead (as
        :meth:`~wacoll.mpi.plancall.PlanCalls.make` says)."""
        method = self._library(desc, checked, "blocking")
        replace = _replaced(desc.args)
        call = NativeCall(
            desc.sig.digest(),
            method,
            replace,
            desc.sig,
            check if check is not None or not checked else self.argcheck.blocking,
            kept_alive(desc.args),
        )
        if recorder is not None:
            if key is not None and self.replays is not None:
                call_directly(call, desc.op, desc.args, replace, self.wire)
                recorder(key, call)
            return call
        key = desc.replay_key
        if key is not None and self.replays is not None:
            seen = key if class_key is None else class_key[0]
            # (on several clusters recorded at once, as their other calls are)
            if check is None and seen not in self.seen:
                if len(self.seen) >= 4 * CAPACITY:
                    self.seen.clear()
                self.seen.add(seen)
                return call
            # recorded: its replays call the library themselves where they can
            call_directly(call, desc.op, desc.args, replace, self.wire)
            if class_key is not None:
                call.per_count()
                if not record_per_count(self.recorded, class_key, desc.prepared, call):
                    record(self.recorded, key, call)
            else:
                record(self.recorded, key, call)
        return call

    def _work(self, desc, exe, tag):
        """The executable's work on the Python route."""
        prepared = desc.prepared
        blocking = desc.mode == "call"
        if desc.op == "barrier" and self.argcheck.enabled:
            # the check is an all-reduce: it synchronises every rank already
            return NativeWork(lambda: MPI.REQUEST_NULL)
        scratch = self.scratch if blocking else None
        if type(exe) is LibraryCollective:
            given = tuple(map(for_mpi, desc.args))
            if (
                blocking
                and not (
                    self.argcheck.several and self.argcheck.enabled and not desc.vector
                )
                or self._gated_library(desc, exe)
            ):
                # as on the compiled route (_native_call): the blocking collective
                # after the check, or with no check (a vector call's counts were
                # agreed as it was read)
                method = library_method(self.wire, desc.op, "blocking")
                return NativeWork(functools.partial(_blocking, method, given))
            method = library_method(self.wire, desc.op, "nonblocking")
            return NativeWork(functools.partial(method, *given))
        if isinstance(exe, CompositeRun):
            # one cluster: its communicator is the wire itself (same ranks, order)
            cluster = self.wire if self.cluster is None else self.cluster
            return CompositeWork(
                exe.plan,
                exe.programs,
                self.wire,
                cluster,
                prepared.inbuf,
                prepared.outbuf,
                op=for_mpi(prepared.reduce_op),
                scratch=scratch,
                tag=tag,
                tracer=self.tracer,
            )
        return ProgramRun(
            exe.program,
            self.wire,
            prepared.inbuf,
            prepared.outbuf,
            op=prepared.reduce_op,
            tracer=self.tracer,
            scratch=scratch,
            tag=tag,
        )

    def _gated_library(self, desc, exe):
        """Whether a blocking call the library runs waits for its verdict and then
        runs the library's blocking collective, on every route alike (the library
        never matches a blocking collective with a non-blocking one):
        :meth:`~wacoll.mpi.plancall.PlanCalls.gates`."""
        return (
            desc.mode == "call"
            and type(exe) is LibraryCollective
            and self.argcheck.enabled
            and not desc.vector
            and self.plan_calls.gates(desc.sig)
        )

    def _bind(self, desc, exe, check):
        """A persistent request: the call checked, selected and lowered once."""
        if check is not None:  # agree once, now, on everything the request binds
            CallTask(
                None if check.error else NativeWork(lambda: MPI.REQUEST_NULL),
                check,
                on_failure=self.retire,
            ).advance(block=True)
        self.ran(
            exe.plan,
            exe.family,
            "library" if type(exe) is LibraryCollective else "python",
            exe.reason,
        )
        program = None if type(exe) is LibraryCollective else exe.program
        return Prequest(self, desc.prepared, exe.plan, program, desc.args, desc.op)

    # ------------------------------------------------------------ failures
    def settle(self, catch_up=True, flush=False, entering=True):
        """Collect every verdict still in flight (blocking calls that returned
        before their check's verdict, :class:`~wacoll.mpi._runner.Verdicts`):
        before anything that must not start while one may have failed (a call read
        afresh, a non-blocking start, ``Free``, a new communicator). A failed one
        raises its error here, on every rank. With ``flush`` (where every rank
        settles at the same call: not a call read afresh, which another rank may
        replay), calls folded into the next check are checked now. ``entering``:
        at the start of a call (the calls whose verdicts are in flight have
        returned), not within one."""
        ring = self.argcheck.verdicts
        if ring is None and not self.retire_due:  # (a non-blocking start's fast way)
            blocking = self.argcheck.blocking
            folded = flush and blocking is not None and blocking.nfolded
            if not folded and not (entering and self.recorded.completed_watched()):
                return  # nothing in flight, folded or due
        if entering:
            self.collect_due()
        if ring is not None and entering:
            ring.enter()
        if ring is not None and not (ring.idle and not (flush and ring.nfolded)):
            if not (ring.flush() if flush else ring.settle()):
                self.failed(None)
        if flush:
            self.flush_folds()
        if catch_up:
            self.catch_up()

    def collect_due(self):
        """Collect the verdicts of the non-blocking calls the library's own
        functions completed (``MPI.Request.Waitall`` and its kin: see
        :class:`~wacoll.mpi.startcall.NodeRequest`). A failed one stops the
        communicator, as on the ranks that learned of it in a ``Wait``: the call
        that collects it then fails through its check, at the same call on every
        rank, however each rank completed the request. Whether none failed."""
        for request in self.recorded.completed_watched():
            try:
                request.collect(True)
            except WacollError as exc:
                self.due_failure = self.due_failure or exc  # (raised by free)
        return self.broken is None

    def flush_folds(self):
        """Check the calls folded into one cluster's blocking check now (where every
        rank does: a call every rank makes, ``Free``, a new communicator); a failed
        check raises here, on every rank."""
        blocking = self.argcheck.blocking
        if blocking is not None and blocking.nfolded and not blocking.flush():
            self.failed(self.folded_note[0])

    def failed(self, recorded):
        """After a compiled or replayed call's check failed (``recorded``: the call;
        None when a verdict collected later failed): retire the wire and raise the
        error every rank raises, that of the oldest failed verdict."""
        ring = self.argcheck.verdicts
        tag = None
        if ring is not None and ring.failed >= 0:
            sig, flags, tag = ring.failure()
            if sig is None and recorded is not None:  # (a NodeGate's entry)
                sig = recorded.sig
        else:
            sig, flags = recorded.sig, getattr(recorded, "flags", None)
        self.retire(False)  # (it leaves the check's own flags as they are)
        # where ranks learn at different calls, no exchange (a collective) names
        # the ranks: the flags, or the faulty rank's error as it sent it, say
        # what failed, the same on every rank
        raise self.argcheck.failure(sig, flags, exchange=ring is None, tag=tag)

    def retire(self, work_done=False):
        """After a failed check in a blocking call: retire the call's wire (messages
        or a library collective of the abandoned call may still be in flight on it)
        and continue on a fresh duplicate. Where the check runs before any work
        (one cluster, ``check="first"``) nothing was sent on the wire, and it stays.

        Where verdicts may be collected after a call returned (several clusters,
        :class:`~wacoll.mpi._runner.Verdicts`), ranks learn of a failure at
        different calls, and one that raised may go on to collectives of the
        application's own while a peer has yet to learn: nothing collective
        happens here then. The checks in flight are given up (a fresh ring, other
        tags), and the new wire is made at this rank's next call
        (:meth:`catch_up`), where every rank makes it, each at its own next call.
        Elsewhere every rank learns within the call, and the wire is made now
        (collective)."""
        if self.argcheck.gated(True):
            blocking = self.argcheck.blocking
            if blocking is not None and int(blocking.flags[1]) & FOLDED_MARK:
                # a rank folded calls into the failed check: one whose count was 0
                # returned from a call the others raised in, so the ranks may be a
                # call apart, and no later call can be matched (every rank sees
                # the mark: the check's MAX)
                self.stop(STOPPED_AFTER_RETURN, agreed=True)
            return
        self.plan_calls.keep(self.recorded.values())
        self.recorded.clear()  # their collectives were bound to the retired wire
        self.started.clear()
        argcheck = self.argcheck
        if argcheck.verdicts is not None:
            argcheck.notify(argcheck.verdicts.failed_after_return)
            argcheck.renew()  # checks of later calls may be in flight
            self.retire_due = True
            return
        self._new_wire()

    def catch_up(self):
        """Make the wire a failed call left due (:meth:`retire`; collective: every
        rank makes it at its first call after it raised).

        Unless a rank had returned from the failed call before its verdict: it
        raised at a later call, so the ranks are no longer at the same call (one
        that raised in the failed call has gone on to the next). No further call
        can be matched across ranks then: the communicator stops on every rank,
        and this call raises (every rank knows it from every rank's notice,
        :meth:`~wacoll.mpi.argcheck.ArgumentCheck.notify`)."""
        if self.retire_due:
            self.retire_due = False
            if self.argcheck.returned_anywhere():
                self.abandoned.append(self.wire)
                self.stop(STOPPED_AFTER_RETURN)
                raise WacollError(STOPPED_AFTER_RETURN)
            self._new_wire()

    def _new_wire(self):
        self.abandoned.append(self.wire)
        self.wire = private_dup(self.control)
        if self.cluster is not None:  # a library phase may be pending on it
            self.abandoned.append(self.cluster)
            self.cluster = cluster_communicator(self.wire, self.network)
        self.plan_calls.retire(self.wire)

    def stopped_by_check(self, work_done):
        """After a failed check in a non-blocking call: its work may still be in
        flight on the wire, which is never freed."""
        self.abandoned.append(self.wire)
        self.stop(
            "a non-blocking collective on this wacoll.Comm failed its "
            "cross-rank check; its messages may still be in flight, so the "
            "communicator cannot run further collectives: Free it",
            agreed=True,
        )

    def stop(self, reason, agreed=False):
        """No further collective runs on this communicator: each raises ``reason``
        (an interrupted call, a failed non-blocking one). ``agreed``: every rank
        stops (a check failed on all), each when it learns of it; the next call
        then fails through its check, on every rank at that call (else it is
        refused here: the peers may be inside the call that stopped it)."""
        self.replays = None
        self.broken = reason
        self.broken_everywhere = agreed

    def free(self):
        """Free the wire and the cluster communicator (twice is harmless).

        As ``MPI_Comm_free`` does, the calls still in flight complete normally
        first, each with its result (or its error, raised by its request's
        ``Wait``): a non-blocking call's messages travel on the wire, which must
        outlive them.
        """
        if self.wire is None:
            return
        failure = self.due_failure = None  # (one collected earlier failed a call)
        if self.broken is None:
            try:  # a failed verdict is raised once the communicator is freed
                self.settle(catch_up=False, flush=True)
            except WacollError as exc:
                failure = exc
            try:
                self.catch_up()  # (as every rank does at its next call)
            except WacollError:
                pass  # stopped (STOPPED_AFTER_RETURN): freed all the same
        for request in self.recorded.watched:
            try:
                request.collect(True)
            except Exception as exc:  # (kept: the wire and the windows are freed)
                failure = failure or exc
        failure = failure or self.due_failure
        for entry in self.in_flight:
            if entry.task.compiled:
                engine().finish(entry)  # in this thread
            naps = Naps()
            while not entry.done:  # the engine's thread advances it
                naps.sleep()
        self.in_flight = []
        if self.wire not in self.abandoned:
            self.wire.Free()
        if self.cluster is not None and self.cluster not in self.abandoned:
            self.cluster.Free()
        self.argcheck.free()
        self.wire = self.replays = None
        self.broken = "this wacoll.Comm has been freed"  # (persistent requests too)
        if failure is not None:
            raise failure


def _replaced(args):
    """The arguments a library collective is given otherwise than as the
    application wrote them: position and value (an ``MPI.Op`` for an operator named
    by a string)."""
    return tuple((i, for_mpi(a)) for i, a in enumerate(args) if type(a) is str)


def _blocking(method, args):
    """Run a blocking collective as a :class:`NativeWork`'s start: done at once."""
    method(*args)
    return MPI.REQUEST_NULL
