"""Blocking calls of plans, compiled: one trip into C per call.

A blocking collective that runs a plan becomes a :class:`~wacoll.mpi._runner.PlanCall`:
the compiled runner of this rank's lowered program (:mod:`wacoll.mpi.runner`) and
the call's cross-rank check, driven together in C with the GIL released. On several
clusters the check is the communicator's wide-area optimal all-reduce of four
int64, compiled too and run beside the work (or before it, ``check="first"``); on
one cluster it is the communicator's blocking check (shared memory or a persistent
all-reduce), run first. A call read afresh runs its ``PlanCall`` at once; when its
arguments can be told apart by what they look like
(:meth:`~wacoll.mpi._fastcall.Recordings.key`), the ``PlanCall`` is recorded, and a
repeated call (same shapes, same or new arrays) skips reading its arguments,
selecting and lowering: it finds its ``PlanCall`` by the key and runs it over its
own arrays.

:class:`PlanCalls` is a communicator's: it keeps the compiled runners of the
programs it ran (bounded, :data:`RUNNERS`) and the check's runner, and makes and
records the calls.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

import wacoll.mpi._runner as _runner
from wacoll.mpi.bounded import BoundedCache
from wacoll.mpi.executor import (
    BLOCKING_TAG,
    DIGEST_TAG_LOW,
    DIGEST_TAGS,
    blocking_tag,
)
from wacoll.mpi.fastpath import CAPACITY, call_directly
from wacoll.mpi.runner import array_address, compile_program, count_units, runner_ready
from wacoll.plans.retarget import probe_lowered, size_class

__all__ = [
    "PlanCalls",
    "RUNNERS",
    "buffer_places",
    "kept_alive",
    "library_receives",
    "paced_by",
    "locate_buffer",
    "record",
    "record_per_count",
    "replayable",
]

#: Compiled runners a communicator keeps (one per program and buffer layout; the
#: oldest is dropped first). Each owns its work area.
RUNNERS = 64

_NOWHERE = (-1, 0)


def locate_buffer(view, args):
    """``(argument index, byte offset)`` of ``view`` in the call's arguments ``args``
    (arrays, or buffer specifications led by one), ``(-1, 0)`` for no buffer, None
    when it is not in them (a staged copy). An empty view is found too: an in-place
    call copies its input from the memory that follows it. :class:`PlanCalls` and
    :mod:`wacoll.mpi.persistent` ask it where a prepared call's buffers are."""
    if view is None:
        return _NOWHERE
    at = view.__array_interface__["data"][0]
    for i, arg in enumerate(args):
        array = arg[0] if type(arg) in (list, tuple) and arg else arg
        if type(array) is np.ndarray:
            base = array.__array_interface__["data"][0]
            if base <= at and at + view.nbytes <= base + array.nbytes:
                return i, at - base
    return None


def buffer_places(prepared, args):
    """Where a prepared call's input and output are in its arguments, as a compiled
    call finds them again in a repeated call's own: ``(where_in, where_out,
    in_copy_bytes)``, each place ``(argument index, byte offset)`` or None when the
    buffer is not in the arguments (a staged copy); an in-place input copied from
    the output at the start of each call is ``(-2, byte offset in the output)``
    with its size in bytes."""
    where_out = locate_buffer(prepared.outbuf, args)
    if prepared.in_copy is None:
        return locate_buffer(prepared.inbuf, args), where_out, 0
    start, n = prepared.in_copy
    itemsize = prepared.dtype.itemsize
    return (-2, start * itemsize), where_out, n * itemsize


def replayable(prepared, places):
    """Whether a repeated call finds a compiled call's buffers in its own arguments
    (``places``: :func:`buffer_places`), with nothing to finish after it."""
    where_in, where_out, copy_bytes = places
    return (
        prepared.finish is None
        and where_in is not None
        and where_out is not None
        and (where_out != _NOWHERE or not copy_bytes)
    )


def kept_alive(args):
    """What a recorded call's key names by identity in ``args`` (operators, and the
    datatypes of buffer specifications), to keep alive while it is recorded."""
    return tuple(a for a in args if isinstance(a, MPI.Op)) + tuple(
        a[-1] for a in args if type(a) in (list, tuple) and a
    )


def record(recordings, key, call):
    """Record ``call`` under ``key`` in a communicator's ``recordings``, the oldest
    forgotten past :data:`~wacoll.mpi.fastpath.CAPACITY`."""
    if len(recordings) >= CAPACITY and key not in recordings:
        del recordings[next(iter(recordings))]
    recordings[key] = call


def _element_type(prepared):
    """The element type a call's program is compiled for (bytes when it has none)."""
    return np.dtype(np.uint8) if prepared.dtype is None else prepared.dtype


def record_per_count(recordings, class_key, prepared, call):
    """Record ``call``, which takes any count of its size class (``recount``),
    under the call's class key (``class_key``:
    :attr:`~wacoll.mpi.described.CallDescription.class_key`): a later call of the
    class whose arrays' lengths follow its count as this call's do replays it.
    Whether it was recorded (not when an array's length is not whole elements of
    the count)."""
    ckey, lengths = class_key
    count = prepared.count
    if any(n > 0 and n % count for n in lengths):
        return False
    itemsize = 1 if prepared.dtype is None else prepared.dtype.itemsize
    if len(recordings) >= CAPACITY and ckey not in recordings:
        del recordings[next(iter(recordings))]
    recordings.record_class(
        ckey,
        tuple(n if n < 0 else n // count for n in lengths),
        itemsize,
        size_class(count, itemsize),
        call,
    )
    return True


class PlanCalls:
    """A communicator's compiled plan calls.

    Parameters
    ----------
    wire : mpi4py.MPI.Intracomm
        The communicator of the plans' messages.
    argcheck : wacoll.mpi.argcheck.ArgumentCheck
        The communicator's argument check: its compiled all-reduce on several
        clusters, its blocking check on one.
    recordings : Recordings or None
        The communicator's recorded calls, where the calls made here are recorded
        (None: calls are not replayed, as with tracing or ``check="first"``).
    """

    def __init__(self, wire, argcheck, *, recordings=None):
        self.wire = wire
        self.recordings = recordings
        self.first = argcheck.first
        self.blocking_check = argcheck.blocking
        self.ready = runner_ready()
        self.argcheck = argcheck
        self._several = argcheck.several and argcheck.enabled
        self._runners = BoundedCache(RUNNERS)
        self._retired = []

    def compiled(self, program, prepared, *, shared=True):
        """``program`` compiled for this call's element type and operator (kept,
        with a runner of it, unless ``shared`` is false: compiled for a runner of
        the caller's own), or None when the runner does not take it or the call's
        buffers are smaller than it needs (the Python executor then raises the
        error that names them)."""
        dtype = _element_type(prepared)
        op = prepared.reduce_op
        # a runner is compiled for its element type and operator (the kernel's codes)
        key = (id(program), dtype, None if op is None else id(op))
        entry = self._runners.get(key)
        if entry is not None and entry[0] is program and entry[3] is op:
            compiled = entry[2]
        else:
            compiled = compile_program(program, dtype, op)
            if shared:
                runner = None if compiled is None else compiled.runner(self.wire)
                self._runners[key] = (program, runner, compiled, op)
        if compiled is None:
            return None
        for view, need in (
            (prepared.inbuf, compiled.in_bytes),
            (prepared.outbuf, compiled.out_bytes),
        ):
            if need and (view is None or view.nbytes < need):
                return None
        return compiled

    def _runner(self, program, prepared):
        """The compiled runner of ``program`` for this call's buffers (one per
        program, reused by every blocking call of it), or None."""
        if self.compiled(program, prepared) is None:
            return None
        dtype = _element_type(prepared)
        op = prepared.reduce_op
        return self._runners.get((id(program), dtype, None if op is None else id(op)))[1]

    def make(
        self,
        plan,
        program,
        prepared,
        sig,
        args,
        key,
        *,
        checked,
        class_key=None,
        parts=1,
        recorder=None,
    ):
        """The :class:`~wacoll.mpi._runner.PlanCall` of a call of ``plan`` (this
        rank's lowered ``program`` of it) read afresh, or None
        when the call takes the Python route (no runner here, a program the runner
        does not take). Recorded under ``key`` (when not None) when a repeated call
        can find its buffers in its own arguments; under ``class_key`` instead
        (:func:`record_per_count`) when one is given (a program every count of the
        call's size class runs, its indices computed from the count as ``parts``
        says: :attr:`~wacoll.mpi.dispatch.PlanRun.per_count`) and the call takes
        any count of its class.

        ``program`` is None for a call with nothing to run but its check (a checked
        Barrier); ``checked`` says whether the call is checked here (not for the
        vector calls, whose counts were agreed before). ``recorder(key, call)``
        records it instead of the communicator's recordings (an explored call's
        candidate, :mod:`wacoll.mpi.exploring`; no class key then).
        """
        if not self.ready or (checked and self._several and not self.argcheck.compiles):
            return None
        places = buffer_places(prepared, args)
        where_in, where_out, copy_bytes = places
        recordable = (
            key is not None
            and self.recordings is not None
            and replayable(prepared, places)
        )
        runner = None
        if program is not None:
            if recordable and class_key is not None:
                runner = self._per_count_runner(plan, program, prepared, parts)
            if runner is None:
                class_key = None
                runner = self._runner(program, prepared)
            if runner is None:
                return None
        # checked on several clusters: in the verdict stream, or (without one)
        # by the compiled all-reduce beside the work
        ring = self.argcheck.verdicts if checked and self._several else None
        check = (
            self.argcheck.compiled if checked and self._several and ring is None else None
        )
        blocking = self.blocking_check if checked and not self._several else None
        keep = kept_alive(args)
        planned = _runner.PlanCall(
            runner,
            check,
            blocking,
            sig.digest(),
            sig,
            where_in or _NOWHERE,
            where_out or _NOWHERE,
            copy_bytes,
            self.first,
            blocking_tag(sig.digest()),
            keep,
            ring,
            BLOCKING_TAG,
        )
        planned.plan, planned.family = plan, plan.family
        planned.paced_by = paced_by(sig, self.wire.Get_rank())
        if recordable and recorder is not None:
            recorder(key, planned)
        elif recordable:
            if class_key is None or not self._record_per_count(
                planned, class_key, prepared
            ):
                record(self.recordings, key, planned)
        return planned

    def _per_count_runner(self, plan, program, prepared, parts):
        """A runner of ``program`` of its own that takes any count of the call's
        size class (:meth:`~wacoll.mpi._runner.Runner.per_count`), kept with the
        communicator's runners; None when the program's sizes do not follow the
        count as ``parts`` says (:func:`~wacoll.mpi.runner.count_units`), or no
        runner takes it. A plan of several segments is lowered twice more, for
        probe counts, once per size class."""
        compiled = self.compiled(program, prepared, shared=False)
        if compiled is None or not prepared.count:
            return None
        probes = None
        if parts > 1:
            probes = tuple(
                compile_program(
                    probe_lowered(plan, self.wire.Get_rank(), counts),
                    _element_type(prepared),
                    prepared.reduce_op,
                )
                for counts in ((1,) * parts, tuple(1 << i for i in range(parts)))
            )
            if None in probes:
                return None
        units = count_units(compiled, prepared.count, parts, probes)
        if units is None:
            return None
        runner = compiled.runner(self.wire)
        try:
            runner.per_count(*units, prepared.count)
        except ValueError:  # (a count it cannot take: a message of 2 GiB)
            return None
        return runner  # (its call's own: recorded with it, kept by retire)

    def _record_per_count(self, planned, class_key, prepared):
        try:
            planned.per_count(prepared.count, DIGEST_TAG_LOW, DIGEST_TAGS)
        except ValueError:  # an offset that is not whole elements of the count
            return False
        return record_per_count(self.recordings, class_key, prepared, planned)

    def library(
        self,
        method,
        replace,
        sig,
        args,
        key,
        *,
        class_key=None,
        prepared=None,
        recorder=None,
    ):
        """The :class:`~wacoll.mpi._runner.LibraryCall` of a blocking call the MPI
        library runs on several clusters (``method``: its non-blocking collective on
        the wire, None for a Barrier), or None without the compiled check (one
        cluster, no check, ``check="first"``, no runner). Recorded under ``key``
        (when not None), like a plan's call.

        ``replace`` lists the arguments a replayed call passes differently (an
        ``MPI.Op`` for an operator named by a string). With ``class_key`` (the
        library runs every count of the call's size class) and the call's
        ``prepared`` buffers, it is recorded for every count of the class
        (:func:`record_per_count`). ``recorder(key, call)`` records it instead, as
        :meth:`make` says."""
        if not self.ready or not self.argcheck.compiles or self.first:
            return None
        keep = kept_alive(args)
        ring = self.argcheck.verdicts
        call = _runner.LibraryCall(
            None if ring is not None else self.argcheck.compiled,
            sig.digest(),
            method,
            replace,
            sig,
            keep,
            BLOCKING_TAG,
            ring,
        )
        call.receives = library_receives(sig, self.wire.Get_rank())
        call.paced_by = paced_by(sig, self.wire.Get_rank())
        call.source = library_source(sig, self.wire.Get_rank())
        if method is not None:  # started from C where its arguments allow
            call_directly(call, sig.kind, args, replace, self.wire)
        if key is not None and self.recordings is not None and recorder is not None:
            recorder(key, call)
        elif key is not None and self.recordings is not None:
            if class_key is not None:
                call.per_count()
            if class_key is None or not record_per_count(
                self.recordings, class_key, prepared, call
            ):
                record(self.recordings, key, call)
        return call

    def gates(self, sig) -> bool:
        """Whether a blocking call the library runs with ``sig`` waits for its
        verdict and then runs the library's blocking collective
        (:class:`~wacoll.mpi._runner.NodeGate`): its verdicts travel in one node's
        memory (:class:`~wacoll.mpi._runner.NodeStream`), where a rank waits for
        every rank to arrive, not for a message, and every rank receives, so waits
        for its verdict anyway (no root, not a Barrier: alike on every rank that
        makes the call). The blocking collective costs less than the non-blocking
        one and its polls."""
        return (
            type(self.argcheck.verdicts) is _runner.NodeStream
            and sig.kind != "barrier"
            and sig.kind not in _ROOT_SENDS
            and sig.kind not in _TO_ROOT
        )

    def run(self, planned, prepared):
        """Run a call read afresh over its prepared buffers: whether its check
        passed (the MPI library's error is raised when the work failed)."""
        return (
            planned.call(array_address(prepared.inbuf), array_address(prepared.outbuf))
            == 0
        )

    @property
    def runners(self) -> int:
        """How many compiled runners are kept (at most :data:`RUNNERS`)."""
        return len(self._runners)

    def retire(self, wire):
        """After a failed call: the plans run on ``wire`` from now on. The runners
        of the retired wire are kept (sends of the abandoned call may still read
        their work areas)."""
        self._retired.extend(entry[1] for entry in self._runners.values())
        self._runners.clear()
        self.wire = wire

    def keep(self, recorded):
        """After a failed call, before the communicator's recordings ``recorded``
        are forgotten: keep the runners of the recorded calls that have one of
        their own (a call recorded for a size class; sends of the abandoned call
        may still read its work area)."""
        for call in recorded:
            calls = getattr(call, "calls", None)  # (a class's calls, by size class)
            for one in (call,) if calls is None else calls.values():
                work = getattr(one, "work", None)
                if work is not None and work.count >= 0:  # (the others are shared)
                    self._retired.append(work)


#: Operations in which the root only sends (its output, if any, is its own data).
_ROOT_SENDS = frozenset(("bcast", "scatter", "scatterv"))
#: Operations in which every rank but the root only sends.
_TO_ROOT = frozenset(("gather", "gatherv", "reduce"))


def library_receives(sig, rank):
    """Whether the MPI library's collective for ``sig`` writes data from other ranks
    into ``rank``'s output buffer (a Barrier writes none).

    Examples
    --------
    >>> from wacoll.mpi.agreement import Signature
    >>> [library_receives(Signature("bcast", root=0), r) for r in (0, 1)]
    [False, True]
    >>> [library_receives(Signature("reduce", root=0), r) for r in (0, 1)]
    [True, False]
    >>> library_receives(Signature("allreduce"), 0), library_receives(Signature("barrier"), 0)
    (True, False)
    """
    if sig.kind == "barrier":
        return False
    if sig.kind in _ROOT_SENDS:
        return rank != sig.root
    if sig.kind in _TO_ROOT:
        return rank == sig.root
    return True


def library_source(sig, rank):
    """The one rank whose data the MPI library's collective for ``sig`` writes into
    ``rank``'s output buffer (a Bcast's or a Scatter's root, for the other ranks),
    or -1 (none, or several).

    Examples
    --------
    >>> from wacoll.mpi.agreement import Signature
    >>> [library_source(Signature("bcast", root=2), r) for r in (0, 2)]
    [2, -1]
    >>> library_source(Signature("allreduce"), 0)
    -1
    """
    if sig.kind in _ROOT_SENDS and rank != sig.root:
        return sig.root
    return -1


def paced_by(sig, rank):
    """The rank whose progress paces ``rank``'s calls of ``sig`` (a compiled
    call's ``paced_by``): the root of a gather or reduce for every other rank,
    which only sends; -1 for every other call.

    Such a rank returns once its sends are out; with nothing to wait for, it
    would run calls ahead of the root without bound and flood the root with
    messages the root cannot match yet (8 ranks on 2 cores, four clusters, a loop
    of 1 KiB gathers: 1.7-4 times the paced loop's time a call). In the verdict
    stream it waits while it is :data:`wacoll.mpi._runner.STREAM_LEAD` calls past
    the root's entries.

    Examples
    --------
    >>> from wacoll.mpi.agreement import Signature
    >>> [paced_by(Signature("gather", root=2), r) for r in (0, 2)]
    [2, -1]
    >>> paced_by(Signature("bcast", root=0), 1), paced_by(Signature("allreduce"), 0)
    (-1, -1)
    """
    if sig.kind in _TO_ROOT and rank != sig.root:
        return sig.root
    return -1
