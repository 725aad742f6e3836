"""The environment settings that shape a communicator, read in one place and agreed
across its ranks before anything depends on them.

A launcher does not always give every rank the same environment (``mpiexec -genv``
against ``-env``, a module file loaded on some nodes only). A rank that reads
``WACOLL_CLUSTERS`` where another does not would take a different path through
discovery, and the two would wait for each other forever. So
:func:`agreed_settings` reads the variables of :data:`SHARED` on every rank and
compares them in one exchange, before any other collective of the constructor; where
they differ, every rank raises the same :class:`~wacoll.errors.ConfigurationError`,
naming the variable and the ranks.

Variables that may differ between ranks are not compared: ``WACOLL_PROOF_CACHE`` and
``WACOLL_PROOF_WAIT`` (a node-local cache is fine), ``WACOLL_KERNELS`` (a node's own
instruction set), ``WACOLL_PROGRESS`` (output only).

Examples
--------
>>> read_settings({"WACOLL_CLUSTERS": " 0,0,1,1 ", "HOME": "/root"})["WACOLL_CLUSTERS"]
'0,0,1,1'
>>> read_settings({})["WACOLL_FAMILY"] is None
True
>>> from mpi4py import MPI
>>> agreed_settings(MPI.COMM_SELF, {"WACOLL_CHECK": "off"})["WACOLL_CHECK"]
'off'
"""

from __future__ import annotations

import os

from wacoll.errors import ConfigurationError

__all__ = ["SHARED", "read_settings", "agreed_settings", "switch"]

#: The variables every rank of a communicator must agree on, with what each decides.
SHARED = {
    "WACOLL_TOPOLOGY": "the topology file",
    "WACOLL_CLUSTERS": "the cluster of each rank",
    "WACOLL_FAMILY": "the family forced for every call",
    "WACOLL_LEVEL": "the reduction level asserted for every call",
    "WACOLL_CHECK": "the cross-rank check mode",
    "WACOLL_SCRIPTS": "the plan scripts",
    "WACOLL_LEARN": "whether repeated calls learn their fastest candidate",
    "WACOLL_TUNING": "the file of learned choices",
    "WACOLL_MEASURE": "whether discovered links are measured",
}


def read_settings(environ=None) -> dict:
    """This rank's values of the :data:`SHARED` variables (None: unset or blank).

    Parameters
    ----------
    environ : mapping, optional
        The environment (default ``os.environ``).
    """
    environ = os.environ if environ is None else environ
    return {name: (environ.get(name) or "").strip() or None for name in SHARED}


def _shown(value) -> str:
    return "unset" if value is None else repr(value)


def agreed_settings(comm, environ=None) -> dict:
    """The :data:`SHARED` settings, the same on every rank of ``comm`` (collective).

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm
    environ : mapping, optional
        This rank's environment (default ``os.environ``).

    Returns
    -------
    dict
        Variable name to value (None where unset), identical on every rank.

    Raises
    ------
    ConfigurationError
        On every rank alike, when any variable differs between ranks: the message
        names the first such variable, what it decides, and two ranks that differ.
    """
    mine = read_settings(environ)
    everyone = comm.allgather(tuple(mine.items()))
    first = dict(everyone[0])
    for rank, theirs in enumerate(everyone):
        theirs = dict(theirs)
        for name in SHARED:
            if theirs[name] != first[name]:
                raise ConfigurationError(
                    f"{name} ({SHARED[name]}) differs between the ranks: rank 0 has "
                    f"{_shown(first[name])}, rank {rank} has {_shown(theirs[name])}; "
                    f"give every rank the same environment (for example "
                    f"mpiexec -genv {name} ...)")
    return mine


def switch(value) -> str:
    """A three-way setting (``learn=``, ``measure=`` or their variables) as ``"auto"``,
    ``"on"`` or ``"off"``: None is ``"auto"``; booleans and ``1``/``0``,
    ``yes``/``no``, ``true``/``false`` (any case) are ``"on"``/``"off"``; other
    strings pass through lower-cased, other values unchanged, to be refused by the
    caller, which knows its modes.

    Examples
    --------
    >>> switch(None), switch(True), switch(" OFF "), switch("0"), switch("fresh")
    ('auto', 'on', 'off', 'off', 'fresh')
    """
    if value is None:
        return "auto"
    if value is True or value is False:
        return "on" if value else "off"
    if isinstance(value, str):
        low = value.strip().lower()
        return {"1": "on", "yes": "on", "true": "on", "0": "off", "no": "off",
                "false": "off"}.get(low, low)
    return value
