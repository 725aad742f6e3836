"""Faults of object collectives as data: what one rank found wrong, sent to the
others so that every rank raises the same exception.

A fault is ``(rank, pickled class or None, message)``: plain data any rank can
unpickle. :func:`raise_fault` raises it as an exception of its class with the
message ``"rank N: ..."``, chained to the rank's own exception where it has one.

Examples
--------
>>> fault = fault_of(3, KeyError("missing"))
>>> exc = rebuild(fault)
>>> type(exc).__name__, exc.rank
('KeyError', 3)
"""

from __future__ import annotations

import pickle as _pickle

from wacoll.errors import WacollError

__all__ = ["fault_of", "rebuild", "raise_fault"]


def fault_of(rank, exc):
    """A fault as plain data: (rank, the pickled class or None, message)."""
    try:
        cls = _pickle.dumps(type(exc))
    except Exception:  # noqa: BLE001 -- a class other ranks cannot import
        cls = None
    return (rank, cls, f"{type(exc).__name__}: {exc}" if cls is None else str(exc))


def rebuild(fault):
    """The exception to raise for a fault: its class, message ``rank N: ...``."""
    rank, cls, message = fault
    text = f"rank {rank}: {message}"
    try:
        kind = _pickle.loads(cls)
        exc = kind.__new__(kind)
        BaseException.__init__(exc, text)
        if text not in str(exc):  # KeyError quotes its message
            raise TypeError
    except Exception:  # noqa: BLE001 -- an exotic class: fall back to ours
        exc = WacollError(text)
    try:
        exc.rank = rank
    except AttributeError:
        pass
    return exc


def raise_fault(fault, local):
    """Raise ``fault`` (chained to this rank's own exception of that rank, from
    ``local``: ``{rank: exception}``)."""
    raise rebuild(fault) from local.get(fault[0])
