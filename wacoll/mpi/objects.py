"""mpi4py's object collectives (``comm.bcast(obj)``, ``comm.allreduce(x, op)``, ...)
over wacoll plans.

``wacoll.Comm``'s lower-case methods ``barrier``, ``bcast``, ``gather``,
``scatter``, ``allgather``, ``alltoall``, ``reduce``, ``allreduce``, ``scan`` and
``exscan`` have mpi4py's signatures and results, but run the plan the selection
policy chooses (:func:`wacoll.plans.select`), as the buffer collectives do.

``allgather`` and ``bcast`` without a family or options run as one buffer
collective of pickles in agreed blocks (:mod:`wacoll.mpi.pickled`): the
communicator's compiled and replayed route, with its plan or the MPI library's
collective as the selection chooses. The rest of this page describes the plans over
pickled objects that the other calls run, and these two when a family is asked for.

Blocks are pickled objects
--------------------------
The plan is selected for one element per block: one block per rank for ``gather``,
``scatter``, ``allgather`` (and one per rank pair for ``alltoall``), one block for
``bcast`` and the reductions. Each block holds one object, pickled with
``MPI.pickle`` (so ``MPI.pickle.__init__(dumps, loads, protocol)`` applies). A
plan's message is one MPI message, a *frame*::

    kind (1 byte: 0 data, 1 errors) | n (uint32)
    n x (block id (uint32), length (uint64)) | the n pickles, back to back

The receiver learns the frame's size from a matched probe (``Mprobe`` /
``Improbe``, then ``Message.Recv``): no size-first round, so each plan message
is exactly one MPI message (a MagPIe ``bcast`` crosses the wide area once per
cluster). A rank forwards the pickles it received as they are, without
unpickling them; a block that arrived alone is forwarded in its received frame.
A frame is at most :data:`MAX_MESSAGE` bytes (2 GiB - 1); a larger one is an error.

The executor (:func:`execute`) runs a rank's lowered program in order: a send is
an ``Isend`` of its frame (never blocking; the sends are completed at the end), a
receive a matched probe and ``Recv`` of the next frame from its peer (MPI's
non-overtaking rule pairs it with the plan's message). A plan that passed its
check has no cyclic waits, so it cannot deadlock. Consecutive ``recv_combine``
steps of one arrival-order group combine the frames that have arrived, in any
order; when none has, the rank waits for the group's next one in program order.

Results are new objects, as mpi4py's are: a rank's result never is the object it
passed in (its own contribution is unpickled from the pickle it sends anyway; a
reduction works on a copy of it, as mpi4py's does). Nothing else is copied: each
object is pickled once, and each received pickle is unpickled once, where it is
used.

Reductions
----------
``op`` is an ``MPI.Op`` (predefined operators apply to Python objects as in
mpi4py: ``MPI.SUM`` is ``x + y``, ``MPI.MAXLOC`` compares pairs, ...) or any
callable ``op(x, y)``. ``recv_combine`` and ``combine`` steps put the incoming
operand on the side the plan says, so at the ``strict`` and ``associative``
levels operands stay in rank order and a non-commutative operator (string
``SUM``, a Python function) gets mpi4py's result; at ``strict`` the expression
is the canonical binomial tree that mpi4py's own ``reduce`` and ``allreduce``
evaluate. An ``MPI.Op`` is commutative when ``Is_commutative()`` says so (the
predefined ones except ``REPLACE`` and ``NO_OP``; ``MPI.Op.Create(f,
commute=True)``); a plain callable is not. Asserting ``level="commutative"``
for an operator that does not commute is an error. A communicator left at its
default level reduces objects at ``associative``: any grouping, operands in rank
order, because ``MPI.SUM`` on strings or lists is concatenation and does not
commute whatever ``MPI.SUM.Is_commutative()`` says. Unlike the buffer
collectives, no level is raised automatically: an object operator's exactness
depends on the objects.

Errors: flags in the frames
---------------------------
A fault found on one rank (a root out of range aside) does not stop it: it runs
its program to the end, sending *error frames* (the list of known faults:
rank, exception class and message) instead of data, and every rank that
receives one forwards the faults in all its later messages. At the end each
rank that knows of a fault raises the lowest rank's, of its class, with message
``"rank N: ..."``. No rank ever waits for a message that is not sent.

Where every rank depends on every other (``allgather``, ``alltoall``,
``allreduce``, ``barrier``) or only the root's arguments count (``bcast``,
``scatter``) the flags reach every rank with no extra message. ``gather``,
``reduce``, ``scan`` and ``exscan`` leave some ranks without a path from the
rank at fault, so, when the communicator validates (``validate=True``, the
default), they run the ``barrier`` plan after their own as a status round; with
``validate=False`` a rank raises only the faults that reached it. A root out of
range is found by every rank alone and raises
:class:`~wacoll.errors.RootError` (an ``MPI.Exception`` with ``ERR_ROOT``, as
mpi4py's) at once; a root that is not an integer
:class:`~wacoll.errors.RootTypeError` (a TypeError).

The faults: a ``scatter`` / ``alltoall`` sequence that is not exactly ``size``
items (:class:`~wacoll.errors.BufferMismatchError`, a ValueError as mpi4py's;
:class:`~wacoll.errors.BufferTypeError`, a TypeError, if it is not iterable), an
object ``MPI.pickle`` cannot pickle (its exception), a non-callable operator
(:class:`~wacoll.errors.OperatorTypeError`, a TypeError), a bad level (:class:`~wacoll.errors.WacollError`), an
exception raised by the operator or by unpickling, a frame over
:data:`MAX_MESSAGE` (:class:`~wacoll.errors.WacollError`).

A plan family script loaded for the buffer collectives (``family="scripts"``)
does not apply here: object calls use the selection policy's plan.
"""

from __future__ import annotations

import operator
import pickle as _pickle
import struct

from mpi4py import MPI

from wacoll import errors
from wacoll.errors import (
    BufferMismatchError,
    BufferTypeError,
    OperatorTypeError,
    RootTypeError,
    WacollError,
)
from wacoll.mpi import pickled
from wacoll.mpi.faults import fault_of, raise_fault
from wacoll.plans import LEVELS
from wacoll.plans.builder import RankPlan
from wacoll.plans.select import plain_options

__all__ = [
    "barrier",
    "bcast",
    "gather",
    "scatter",
    "allgather",
    "alltoall",
    "reduce",
    "allreduce",
    "scan",
    "exscan",
    "execute",
    "TAG",
    "MAX_MESSAGE",
]

#: The tag of :func:`execute`'s frames when run on its own (a Comm tags each call).
TAG = 0x7AC1
#: The largest frame, in bytes: one MPI message of ``MPI.BYTE`` with an int count.
MAX_MESSAGE = 2**31 - 1

_DATA, _ERRORS = 0, 1
_HEAD = struct.Struct("<BI")
_ENTRY = struct.Struct("<IQ")


# --------------------------------------------------------------------- pickles
_dumps, _loads = pickled.dumps, pickled.loads


class _Item:
    """One block's value on this rank: its pickle, its object, or both.

    ``private`` items (unpickled here, or computed here) may be handed to the
    operator or returned; others (the caller's objects, items two slots share)
    are copied through their pickle first. ``frame`` is the received frame when the
    block arrived alone in it, to forward it unchanged.
    """

    __slots__ = ("data", "obj", "loaded", "private", "frame")

    def __init__(self, data=None, obj=None, loaded=False, private=True, frame=None):
        self.data, self.obj, self.loaded = data, obj, loaded
        self.private, self.frame = private, frame

    def payload(self):
        if self.data is None:
            self.data = _dumps(self.obj)
        return self.data

    def take(self, keep):
        """An object only the caller holds; ``keep``: this item is read again."""
        if self.loaded and self.private and not keep:
            obj, self.obj, self.loaded = self.obj, None, False
            if self.data is None:  # given away: nothing is left to read
                self.data = b""
            return obj
        return _loads(self.payload())


def _user(obj):
    """The item of a caller's object, pickled now (every such object is sent or
    copied into a result, so its pickle is needed anyway)."""
    return _Item(_dumps(obj), obj, loaded=True, private=False)


# ---------------------------------------------------------------------- faults
def _raise(faults, local):
    """Raise the lowest rank's fault (chained to this rank's own exception)."""
    raise_fault(min(faults.values(), key=lambda f: f[0]), local)


# ---------------------------------------------------------------------- frames
def _frame(ids, payloads):
    head = [_HEAD.pack(_DATA, len(ids))]
    head += [_ENTRY.pack(b, len(p)) for b, p in zip(ids, payloads)]
    size = sum(map(len, head)) + sum(len(p) for p in payloads)
    if size > MAX_MESSAGE:
        raise WacollError(
            f"a message of {size} bytes of pickled objects exceeds the "
            f"{MAX_MESSAGE}-byte limit of one MPI message"
        )
    return b"".join(head + list(payloads))


def _error_frame(faults):
    return _HEAD.pack(_ERRORS, 0) + _pickle.dumps(
        sorted(faults.values(), key=lambda f: f[0])
    )


def _parse(frame):
    """``(ids, payload views, None)`` of a data frame, ``(None, None, faults)``."""
    kind, n = _HEAD.unpack_from(frame, 0)
    view = memoryview(frame)
    if kind == _ERRORS:
        return None, None, _pickle.loads(view[_HEAD.size :])
    ids, views = [], []
    at = _HEAD.size + n * _ENTRY.size
    for k in range(n):
        bid, length = _ENTRY.unpack_from(frame, _HEAD.size + k * _ENTRY.size)
        ids.append(bid)
        views.append(view[at : at + length])
        at += length
    return ids, views, None


def _receive(wire, peer, block=True, tag=TAG):
    """The next frame from ``peer`` (None if ``block`` is false and none is there)."""
    status = MPI.Status()
    if block:
        message = wire.Mprobe(peer, tag, status)
    else:
        message = wire.Improbe(peer, tag, status)
        if message is None:
            return None
    frame = bytearray(status.Get_count(MPI.BYTE))
    message.Recv([frame, MPI.BYTE])
    return frame


# -------------------------------------------------------------------- executor
def _elements(runs):
    return [e for a, b in runs for e in range(a, b)]


def _last_reads(steps):
    """For each slot ``(buffer, element)``, the index of the last step reading it."""
    last = {}
    for i, step in enumerate(steps):
        if step.kind in ("send", "copy", "combine"):
            for e in _elements(step.src[1]):
                last[(step.src[0], e)] = i
        if step.kind in ("combine", "recv_combine"):
            for e in _elements(step.dst[1]):
                last[(step.dst[0], e)] = i
    return last


def execute(
    program, plan, wire, slots, *, op=None, faults=None, local=None, tracer=None, tag=TAG
):
    """Run this rank's lowered ``program`` of ``plan`` over pickled blocks.

    Parameters
    ----------
    program : wacoll.plans.LoweredProgram
        Lowered with each block at the element offset of its id in ``in`` and
        ``out`` (blocks hold one object each); scratch buffers as ``lower`` lays them.
    plan : wacoll.plans.Plan
        The plan (its steps' block ids go in the frames and are checked on receipt).
    wire : mpi4py.MPI.Intracomm
    slots : dict
        ``{buffer: {element: _Item}}``: the caller's objects in ``in`` / ``out``;
        filled in place.
    op : callable, optional
        The reduction operator, called as ``op(left, right)``.
    faults, local : dict, optional
        Known faults ``{rank: fault}`` and this rank's own exceptions ``{rank: exc}``;
        updated in place. With any fault the program still runs to its end, sending
        error frames instead of data.
    tracer : Tracer, optional
        Records every step, with its peer and frame bytes.

    Returns
    -------
    dict
        The faults known at the end (empty when all went well).
    """
    faults = {} if faults is None else faults
    local = {} if local is None else local
    me = program.rank
    # (a part of a plan whose proof is cached holds this rank's program only)
    plan_steps = plan.program if isinstance(plan, RankPlan) else plan.programs[me]
    steps = program.steps
    last = _last_reads(steps)
    clock = tracer.clock if tracer else None
    sends, keep_alive, built = [], [], {}

    def fail(exc):
        local.setdefault(me, exc)
        faults.setdefault(me, fault_of(me, exc))

    def slot(buf):
        return slots.setdefault(buf, {})

    def operand(buf, e, i):
        return slot(buf)[e].take(keep=last.get((buf, e), -1) > i or buf == "out")

    def combine(dst, incoming, side, i):
        # incoming: objects only the executor holds, in the order of dst's elements
        if faults:
            return
        try:
            target = slot(dst[0])
            for e, b in zip(_elements(dst[1]), incoming):
                a = target[e].take(keep=False)
                target[e] = _Item(
                    obj=op(a, b) if side == "right" else op(b, a), loaded=True
                )
        except Exception as exc:  # noqa: BLE001 -- reported to every rank
            fail(exc)

    def accept(i, frame):
        """Take in a received frame for step ``i``; the incoming objects to combine."""
        step = steps[i]
        ids, views, theirs = _parse(frame)
        if theirs is not None:
            for f in theirs:
                faults.setdefault(f[0], tuple(f))
            return None
        if faults:
            return None
        want = list(plan_steps[step.index].blocks)
        if ids != want:
            fail(
                WacollError(
                    f"the message from rank {step.peer} carries blocks {ids}; "
                    f"step {step.index} expects {want} (do all ranks make "
                    f"the same call?)"
                )
            )
            return None
        if step.kind == "recv":
            target = slot(step.dst[0])
            alone = frame if len(views) == 1 else None
            for e, view in zip(_elements(step.dst[1]), views):
                target[e] = _Item(view, frame=alone)
            return None
        try:
            return [_loads(view) for view in views]
        except Exception as exc:  # noqa: BLE001
            fail(exc)
            return None

    def send(step):
        if not faults:
            try:
                items = [slot(step.src[0])[e] for e in _elements(step.src[1])]
                if len(items) == 1 and items[0].frame is not None:
                    return items[0].frame
                ids = tuple(plan_steps[step.index].blocks)
                key = (ids,) + tuple(map(id, items))
                frame = built.get(key)
                if frame is None:
                    frame = built[key] = _frame(ids, [it.payload() for it in items])
                    keep_alive.append(items)
                return frame
            except Exception as exc:  # noqa: BLE001
                fail(exc)
        return _error_frame(faults)

    i = 0
    while i < len(steps):
        step = steps[i]
        t0 = clock() if clock else 0.0
        kind = step.kind
        nbytes = None
        if kind == "send":
            frame = send(step)
            nbytes = len(frame)
            keep_alive.append(frame)
            sends.append(wire.Isend([frame, MPI.BYTE], step.peer, tag))
        elif kind == "recv_combine" and step.group:
            j = i
            while (
                j < len(steps)
                and steps[j].kind == "recv_combine"
                and steps[j].group == step.group
            ):
                j += 1
            pending = list(range(i, j))
            while pending:  # combine in arrival order (the plan allows it)
                progressed = False
                for k in [
                    k
                    for n, k in enumerate(pending)
                    if steps[k].peer not in {steps[q].peer for q in pending[:n]}
                ]:
                    frame = _receive(wire, steps[k].peer, block=False, tag=tag)
                    if frame is not None:
                        pending.remove(k)
                        progressed = True
                        incoming = accept(k, frame)
                        if incoming is not None:
                            combine(steps[k].dst, incoming, steps[k].side, k)
                if not progressed and pending:
                    frame = _receive(wire, steps[pending[0]].peer, tag=tag)
                    k = pending.pop(0)
                    incoming = accept(k, frame)
                    if incoming is not None:
                        combine(steps[k].dst, incoming, steps[k].side, k)
            if tracer:
                tracer.record(f"group of {j - i}", "step", t0, clock(), step=step.index)
            i = j
            continue
        elif kind in ("recv", "recv_combine"):
            frame = _receive(wire, step.peer, tag=tag)
            nbytes = len(frame)
            incoming = accept(i, frame)
            if incoming is not None:
                combine(step.dst, incoming, step.side, i)
        elif kind == "copy":
            if not faults:
                source, target = slot(step.src[0]), slot(step.dst[0])
                for s, d in zip(_elements(step.src[1]), _elements(step.dst[1])):
                    item = target[d] = source[s]
                    item.private = False  # two slots hold it now
        else:  # combine
            if not faults:
                try:
                    incoming = [
                        operand(step.src[0], e, i) for e in _elements(step.src[1])
                    ]
                except Exception as exc:  # noqa: BLE001
                    fail(exc)
                else:
                    combine(step.dst, incoming, step.side, i)
        if tracer:
            tracer.record(
                step.label,
                "step",
                t0,
                clock(),
                step=step.index,
                peer=step.peer,
                bytes=nbytes,
            )
        i += 1
    MPI.Request.Waitall(sends)
    return faults


# ------------------------------------------------------------------ the calls
def _root(comm, root):
    try:
        root = operator.index(root)
    except TypeError:
        raise RootTypeError(f"root must be an integer rank, got {root!r}") from None
    size = comm.Get_size()
    if not 0 <= root < size:
        raise errors.RootError(
            f"root {root} is not a rank of this communicator (0..{size - 1})"
        )
    return root


def _sequence(obj, size):
    """The ``size`` items of a scatter / alltoall sequence, as mpi4py reads them."""
    try:
        items = [None] * size if obj is None else list(obj)
    except TypeError:
        raise BufferTypeError(
            f"expecting a sequence of {size} items, got {type(obj).__name__}"
        ) from None
    if len(items) != size:
        raise BufferMismatchError(f"expecting {size} items, got {len(items)}")
    return items


def _commutes(op):
    if isinstance(op, MPI.Op):
        try:
            return bool(op.Is_commutative())
        except MPI.Exception:
            return False
    return False


def _run(
    comm,
    opname,
    root,
    slots,
    *,
    level=None,
    reduce_op=None,
    faults=None,
    local=None,
    family=None,
    options=None,
):
    """Select, lower and execute one object call; raise any fault everywhere."""
    route = comm.route
    route.usable()
    route.flush_folds()  # (an object call is agreed on apart from them)
    wire = route.wire
    tracer = comm.tracer
    t0 = tracer.clock() if tracer else 0.0
    faults = {} if faults is None else faults
    local = {} if local is None else local
    run = route.dispatcher.object_run(
        opname, root, level, family, plain_options(dict(options or {}))
    )
    plan = run.plan
    route.ran(plan, plan.family, "python", run.reason)
    execute(
        run.program,
        plan,
        wire,
        slots,
        op=reduce_op,
        faults=faults,
        local=local,
        tracer=tracer,
        tag=route.next_tag(),
    )
    if comm.validate and opname in _STATUS and plan.size > 1:
        status = route.dispatcher.object_run("barrier", None, None, None, {})
        execute(
            status.program,
            status.plan,
            wire,
            {},
            faults=faults,
            local=local,
            tracer=tracer,
            tag=route.next_tag(),
        )
    if tracer:
        tracer.record(
            f"{plan.op} ({plan.family}/{plan.algorithm})",
            "operation",
            t0,
            tracer.clock(),
            objects=True,
        )
    if faults:
        _raise(faults, local)
    return slots.get("out", {})


#: Calls where some rank has no message path from some other: they end with the
#: barrier plan as a status round when the communicator validates.
_STATUS = ("gather", "reduce", "scan", "exscan")


def _prepare(comm, build):
    """Run ``build()`` (this rank's items); a fault becomes a flag, not an exception."""
    faults, local = {}, {}
    try:
        slots = build()
    except Exception as exc:  # noqa: BLE001 -- every rank learns of it
        me = comm.Get_rank()
        local[me] = exc
        faults[me] = fault_of(me, exc)
        slots = {}
    return slots, faults, local


def barrier(comm, *, family=None, **options):
    """Synchronise every rank (the plan's barrier)."""
    _run(comm, "barrier", None, {}, family=family, options=options)


def bcast(comm, obj, root=0, *, family=None, **options):
    """``obj`` of the root, on every rank (a new object everywhere)."""
    root = _root(comm, root)
    if family is None and not options:  # the buffer collective's route
        return pickled.bcast(comm, obj, root)
    me = comm.Get_rank()
    slots, faults, local = _prepare(
        comm, lambda: {"out": {0: _user(obj)}} if me == root else {}
    )
    out = _run(
        comm,
        "bcast",
        root,
        slots,
        faults=faults,
        local=local,
        family=family,
        options=options,
    )
    return out[0].take(keep=False)


def gather(comm, sendobj, root=0, *, family=None, **options):
    """The list of every rank's ``sendobj`` at the root; None elsewhere."""
    root = _root(comm, root)
    me, size = comm.Get_rank(), comm.Get_size()
    slots, faults, local = _prepare(comm, lambda: {"in": {me: _user(sendobj)}})
    out = _run(
        comm,
        "gather",
        root,
        slots,
        faults=faults,
        local=local,
        family=family,
        options=options,
    )
    return [out[b].take(keep=False) for b in range(size)] if me == root else None


def scatter(comm, sendobj, root=0, *, family=None, **options):
    """Item ``i`` of the root's sequence of ``size`` items, on rank ``i``."""
    root = _root(comm, root)
    me, size = comm.Get_rank(), comm.Get_size()

    def build():
        if me != root:
            return {}
        return {"in": {b: _user(x) for b, x in enumerate(_sequence(sendobj, size))}}

    slots, faults, local = _prepare(comm, build)
    out = _run(
        comm,
        "scatter",
        root,
        slots,
        faults=faults,
        local=local,
        family=family,
        options=options,
    )
    return out[me].take(keep=False)


def allgather(comm, sendobj, *, family=None, **options):
    """The list of every rank's ``sendobj``, on every rank."""
    if family is None and not options:  # the buffer collective's route
        return pickled.allgather(comm, sendobj)
    me, size = comm.Get_rank(), comm.Get_size()
    slots, faults, local = _prepare(comm, lambda: {"in": {me: _user(sendobj)}})
    out = _run(
        comm,
        "allgather",
        None,
        slots,
        faults=faults,
        local=local,
        family=family,
        options=options,
    )
    return [out[b].take(keep=False) for b in range(size)]


def alltoall(comm, sendobj, *, family=None, **options):
    """Item ``j`` of rank ``i``'s sequence becomes item ``i`` of rank ``j``'s list."""
    me, size = comm.Get_rank(), comm.Get_size()

    def build():
        items = _sequence(sendobj, size)
        return {"in": {me * size + j: _user(x) for j, x in enumerate(items)}}

    slots, faults, local = _prepare(comm, build)
    out = _run(
        comm,
        "alltoall",
        None,
        slots,
        faults=faults,
        local=local,
        family=family,
        options=options,
    )
    return [out[j * size + me].take(keep=False) for j in range(size)]


def _reduction(comm, opname, sendobj, op, root, level, family, options):
    level = comm.level if level is None else level

    def build():
        nonlocal level
        if not callable(op):
            raise OperatorTypeError(f"op must be an MPI.Op or a callable, got {op!r}")
        if level is None:
            # any grouping, operands in rank order: a predefined operator applied to
            # Python objects is their ``+``/``*``..., which need not commute (str, list)
            level = "associative"
        if level not in LEVELS:
            raise WacollError(f"level must be one of {LEVELS}, got {level!r}")
        if level == "commutative" and not _commutes(op):
            raise WacollError(
                "level 'commutative' asserted for an operator that is not commutative"
            )
        return {"in": {0: _user(sendobj)}}

    slots, faults, local = _prepare(comm, build)
    plan_level = level if level in LEVELS else "strict"  # the same plan on every rank
    return _run(
        comm,
        opname,
        root,
        slots,
        level=plan_level,
        reduce_op=op,
        faults=faults,
        local=local,
        family=family,
        options=options,
    )


def reduce(comm, sendobj, op=MPI.SUM, root=0, *, family=None, level=None, **options):
    """``op`` over every rank's ``sendobj`` (in rank order), at the root; None
    elsewhere."""
    root = _root(comm, root)
    out = _reduction(comm, "reduce", sendobj, op, root, level, family, options)
    return out[0].take(keep=False) if comm.Get_rank() == root else None


def allreduce(comm, sendobj, op=MPI.SUM, *, family=None, level=None, **options):
    """``op`` over every rank's ``sendobj`` (in rank order), on every rank."""
    out = _reduction(comm, "allreduce", sendobj, op, None, level, family, options)
    return out[0].take(keep=False)


def scan(comm, sendobj, op=MPI.SUM, *, family=None, level=None, **options):
    """On rank ``i``, ``op`` over the ``sendobj`` of ranks ``0..i``."""
    out = _reduction(comm, "scan", sendobj, op, None, level, family, options)
    return out[0].take(keep=False)


def exscan(comm, sendobj, op=MPI.SUM, *, family=None, level=None, **options):
    """On rank ``i > 0``, ``op`` over the ``sendobj`` of ranks ``0..i-1``; None on
    rank 0."""
    out = _reduction(comm, "exscan", sendobj, op, None, level, family, options)
    return None if comm.Get_rank() == 0 else out[0].take(keep=False)
