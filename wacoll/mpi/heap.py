"""Full garbage collections kept off the call path: the objects alive when
:mod:`wacoll.mpi` is first imported are frozen.

The interpreter's cyclic garbage collector runs a full (generation 2) collection
now and then, as objects are allocated, and a full collection visits every object
it tracks. Once ``wacoll.mpi`` is imported (numpy, mpi4py, networkx and wacoll's own
modules: about 46,000 objects) a full collection takes 7-14 ms, and a shape's first
calls, which build, prove and lower plans, allocate enough to run several. A
collection inside a collective delays every rank that waits for this one: 2 ranks
declared as two clusters, each rank's first twenty calls met four of them (14 ms
each), and a rank that held the claim to prove a plan made the other wait for it.

So, as Python's documentation advises for long-lived objects (:func:`gc.freeze`),
the first import of :mod:`wacoll.mpi` moves every object alive then (the modules,
classes and functions a program imports at its start) to the permanent generation,
which collections no longer visit. Objects made later are collected as before;
objects alive at that moment that later become unreachable cycles are not
reclaimed (reference counting still frees every other object). ``WACOLL_GC_FREEZE=off``
(or ``0``, ``no``, ``false``) leaves the collector as it is; ``on`` and ``auto`` (or
``1``, ``yes``, ``true``, or unset) freeze; any other value is refused, naming
the variable, when ``wacoll.mpi`` is imported.

Measured with ``benchmarks/bench_cold.py --ranks 2,8 --layouts two --ops
Bcast,Allreduce``, from the wheel, empty proof cache: a shape's first 20 calls at
8 ranks 201-241 ms without the freeze, 112-128 with it; at 2 ranks 33-57 and 18-29.

Examples
--------
>>> freeze_imports({"WACOLL_GC_FREEZE": "off"})
False
>>> freeze_imports({"WACOLL_GC_FREEZE": "of"})
Traceback (most recent call last):
...
wacoll.errors.WacollError: WACOLL_GC_FREEZE must be on, off or auto (or 1/0, yes/no, true/false), not 'of'
"""

from __future__ import annotations

import gc

from wacoll.errors import WacollError
from wacoll.settings import setting, switch

__all__ = ["freeze_imports"]

_frozen = False


def freeze_imports(environ=None) -> bool:
    """Freeze the objects alive now (:func:`gc.freeze`), once per process, unless
    ``WACOLL_GC_FREEZE`` is off: whether this call froze them."""
    global _frozen
    mode = switch(setting("WACOLL_GC_FREEZE", environ))
    if mode not in ("on", "off", "auto"):
        raise WacollError(
            f"WACOLL_GC_FREEZE must be on, off or auto (or 1/0, yes/no, "
            f"true/false), not {setting('WACOLL_GC_FREEZE', environ)!r}"
        )
    if _frozen or mode == "off":
        return False
    gc.freeze()
    _frozen = True
    return True
