"""A collective call read once, into the one description every decision derives from.

A buffer collective's arguments are read once (:mod:`wacoll.mpi.calls`) into a
:class:`CallDescription`. Everything later is a function of it:

- the argument check's :class:`~wacoll.mpi.agreement.Signature` (:attr:`sig`),
- the key under which a repeated call finds its recorded form (:attr:`replay_key`),
- the selection's question (:meth:`CallDescription.selection_call`, a
  :class:`wacoll.plans.Call`), whose answer the dispatcher caches
  (:mod:`wacoll.mpi.dispatch`),
- the shape a learning communicator measures it under (:attr:`shape`).

A rank whose own arguments are invalid gets a description too, with the fault in
:attr:`error`: it still takes part in the check, so that every rank raises the same
error instead of some waiting.

Examples
--------
>>> import numpy as np
>>> from wacoll.mpi import calls
>>> d = describe(calls.bcast, (np.zeros(4), 0), place=calls.Place(0, 2), mode="call")
>>> d.op, d.sig.describe(), d.error is None
('bcast', 'bcast(root=0, count=4, dtype=<f8)', True)
>>> d.selection_call(2).count
4
>>> bad = describe(calls.bcast, (np.zeros(4), 5), place=calls.Place(0, 2), mode="call")
>>> bad.sig.kind, type(bad.error).__name__
('error', 'RootError')
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mpi4py import MPI

from wacoll._kernels.repro_wire import wire_bytes
from wacoll.mpi.agreement import VECTOR_CHECKS, Signature, agree
from wacoll.mpi.calls import Prepared, operator_name
from wacoll.plans import Call
from wacoll.plans.operations import spec

__all__ = [
    "CallDescription",
    "UNKEYED",
    "describe",
    "is_reduction",
    "read_call",
    "replay_family",
]


def is_reduction(op: str) -> bool:
    """Whether the operation ``op`` combines values (takes an operator and a level).

    Examples
    --------
    >>> is_reduction("allreduce"), is_reduction("bcast")
    (True, False)
    """
    return spec(op).kind == "reduction"


@dataclass(eq=False)
class CallDescription:
    """One rank's reading of one collective call.

    Attributes
    ----------
    op : str
        The operation (``"bcast"``, ``"allreduce"``, ...).
    mode : {"call", "start", "bind"}
        Blocking, non-blocking, or persistent.
    args : tuple
        The arguments as the application gave them.
    family : str or None
        The family the call forces (``family=``), None: the communicator's choice.
    options : dict
        The family options the call gives.
    prepared : wacoll.mpi.calls.Prepared or None
        The call's buffers and what chooses its plan; None when :attr:`error`.
    error : Exception or None
        This rank's fault with its own arguments (raised on every rank by the check).
    sig : Signature
        What the check compares across ranks.
    replay_key : object or None
        The recorded-call key of a blocking or non-blocking call whose arguments
        can be told apart by what they look like (:meth:`~wacoll.mpi._fastcall.Recordings.key`); None:
        not recordable.
    vector : bool
        A vector variant, whose counts were agreed on as it was read (it is not
        checked again).
    class_key : tuple or None
        ``(class key, lengths)`` of a blocking call with a replay key: its key
        without its arrays' lengths, and their lengths in bytes
        (:meth:`~wacoll.mpi._fastcall.Recordings.class_key`), under which a call
        that takes every count of its size class is recorded; None: none.
    shape : tuple or None
        The learned shape (:func:`wacoll.mpi.learning.shape_of`) while the call
        explores its candidates; None otherwise.
    candidate : str or None
        While the call explores: the candidate it runs (None: the selection's
        choice).
    explore_key : object or None
        While the call explores: its replay key (:attr:`replay_key` is then None:
        the call is not recorded as itself), under which its candidate's compiled
        call is kept (:mod:`wacoll.mpi.exploring`).
    """

    op: str
    mode: str
    args: tuple
    family: str | None
    options: dict
    prepared: Prepared | None
    error: Exception | None
    sig: Signature
    replay_key: object = None
    vector: bool = False
    class_key: tuple | None = None
    shape: tuple | None = field(default=None)
    candidate: str | None = None
    explore_key: object = None

    @property
    def blocking(self) -> bool:
        """Whether the call is blocking (``mode == "call"``)."""
        return self.mode == "call"

    def fail(self, exc):
        """Record a fault found after reading (no plan, a bad option): the check
        raises it on every rank."""
        self.error, self.replay_key, self.explore_key = exc, None, None

    def selection_call(self, size) -> Call:
        """The selection policy's question for this call on ``size`` ranks."""
        p = self.prepared
        if p is None:  # (a description of a call that could not be read)
            raise AttributeError("'NoneType' object has no attribute 'reduce_op'")
        op = p.reduce_op
        return Call(
            p.op,
            count=p.count,
            counts=p.counts,
            root=p.root,
            level=p.level,
            itemsize=1 if p.dtype is None else p.dtype.itemsize,
            accumulator_itemsize=wire_bytes(p.dtype, size)
            if p.accumulator_itemsize
            else 0,
            user_op=isinstance(op, MPI.Op) and not op.is_predefined,
        )


#: What :func:`replay_family` gives for options a replay key cannot hold.
UNKEYED = object()


def replay_family(family, options):
    """The family part of a call's replay key: ``family`` alone for a call without
    options, ``(family, the sorted pairs as text)`` when every option's value is a
    plain number, string, bool, None or a tuple of them, else :data:`UNKEYED` (the
    call is read afresh every time: a tree given as a graph, an array).

    Examples
    --------
    >>> replay_family("mpich", {})
    'mpich'
    >>> replay_family("mpich", {"segments": 4, "algorithm": "ring"})
    ('mpich', "(('algorithm', 'ring'), ('segments', 4))")
    >>> replay_family("mpich", {"segments": 2}) == replay_family("mpich", {"segments": 2.0})
    False
    >>> replay_family(None, {"sizes": [1, 2]}) is UNKEYED
    True
    """
    if not options:
        return family
    pairs = tuple(sorted(options.items()))
    # as text: 2, 2.0 and True are one key in a dict, and options a builder
    # refuses (or ranks disagree on) must not find a recorded call
    return (family, repr(pairs)) if all(_plain(value) for _, value in pairs) else UNKEYED


def _plain(value):
    if value is None or type(value) in (int, float, str, bool):
        return True
    return type(value) is tuple and all(_plain(v) for v in value)


def read_call(reader, place, args, level=None, default_level=None):
    """The call's :class:`~wacoll.mpi.calls.Prepared` (``reader``: the operation's
    reader in :mod:`wacoll.mpi.calls`; ``level``: a reduction's); raises this rank's
    fault with its arguments."""
    if is_reduction(reader.__name__):
        return reader(place, *args, level=level, default_level=default_level)
    return reader(place, *args)


def describe(
    reader,
    args,
    *,
    place,
    mode,
    family=None,
    options=None,
    level=None,
    default_level=None,
    bad_options=None,
    control=None,
    recordings=None,
):
    """Read one call into its :class:`CallDescription`.

    Parameters
    ----------
    reader : callable
        The operation's reader in :mod:`wacoll.mpi.calls` (its name is the
        operation's).
    args : tuple
        The call's arguments.
    place : wacoll.mpi.calls.Place
    mode : {"call", "start", "bind"}
    family, options, level
        What the call asks for (``level``: reductions only).
    default_level : str, optional
        The communicator's reduction level.
    bad_options : WacollError, optional
        A fault found in the options before reading: the call fails with it.
    control : mpi4py.MPI.Intracomm, optional
        Where a vector variant exchanges its counts (collective then).
    recordings : wacoll.mpi._fastcall.Recordings, optional
        The communicator's recorded calls, whose key a recordable blocking or
        non-blocking call gets.
    """
    op = reader.__name__
    options = {} if options is None else options
    key = None
    keyed = replay_family(family, options)
    if recordings is not None and mode != "bind" and keyed is not UNKEYED:
        key = recordings.key(reader, keyed, level, args)
    prepared = error = None
    try:
        prepared = read_call(reader, place, args, level, default_level)
    except Exception as exc:  # noqa: BLE001 - any fault in one rank's arguments
        # goes through the check, so the other ranks raise too instead of waiting
        error = exc
    if error is None and bad_options is not None:
        prepared, error = None, bad_options
    if prepared is None:
        sig = Signature("error")
    else:
        sig = Signature(
            op,
            prepared.root,
            prepared.count,
            None if prepared.dtype is None else prepared.dtype.str,
            prepared.level,
            operator_name(prepared.reduce_op),
            family,
            tuple(sorted(options.items())),
        )
    vector_check = VECTOR_CHECKS.get(op)
    if vector_check is not None:  # the plan needs every rank's counts: exchange
        infos = agree(
            control,
            error,
            sig,
            None if prepared is None else prepared.vector_info,
            exchange=True,
        )
        prepared.counts = vector_check(prepared.root, infos)
        key = None
    class_key = None
    if key is not None and mode == "call" and prepared is not None and prepared.count:
        class_key = recordings.class_key(reader, keyed, level, args)
    return CallDescription(
        op,
        mode,
        args,
        family,
        options,
        prepared,
        error,
        sig,
        None if error is not None else key,
        vector_check is not None,
        None if error is not None else class_key,
    )
