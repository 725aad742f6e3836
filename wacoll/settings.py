"""Every ``WACOLL_*`` environment variable, read in one place.

wacoll reads its environment only through :func:`setting` (and :func:`read_settings`
for a communicator's shared ones): :data:`VARIABLES` lists each variable with what it
decides, so the documentation, the readers and the tests work from one table. An
argument given in the code always beats the environment (``wacoll.Comm(comm,
check="first")`` runs ``"first"`` whatever ``WACOLL_CHECK`` says).

A launcher does not always give every rank the same environment (``mpiexec -genv``
against ``-env``, a module file loaded on some nodes only). A rank that reads
``WACOLL_CLUSTERS`` where another does not would take a different path through
discovery, and the two would wait for each other forever. So
:func:`agreed_settings` reads the variables of :data:`SHARED` on every rank and
compares them in one exchange, before any other collective of a communicator's
constructor; where they differ, every rank raises the same
:class:`~wacoll.errors.ConfigurationError`, naming the variable and the ranks. The
others may differ between ranks: a node-local proof cache, a node's own instruction
set, output only.

Examples
--------
>>> read_settings({"WACOLL_CLUSTERS": " 0,0,1,1 ", "HOME": "/root"})["WACOLL_CLUSTERS"]
'0,0,1,1'
>>> read_settings({})["WACOLL_FAMILY"] is None
True
>>> setting("WACOLL_KERNELS", {"WACOLL_KERNELS": "baseline"})
'baseline'
>>> from mpi4py import MPI
>>> agreed_settings(MPI.COMM_SELF, {"WACOLL_CHECK": "off"})["WACOLL_CHECK"]
'off'
"""

from __future__ import annotations

import os

from wacoll.errors import ConfigurationError

__all__ = ["VARIABLES", "SHARED", "setting", "read_settings", "agreed_settings", "switch"]

#: The variables every rank of a communicator must agree on, with what each decides.
SHARED = {
    "WACOLL_TOPOLOGY": "the topology file",
    "WACOLL_CLUSTERS": "the cluster of each rank",
    "WACOLL_FAMILY": "the family forced for every call",
    "WACOLL_LEVEL": "the reduction level asserted for every call",
    "WACOLL_CHECK": "the cross-rank check mode",
    "WACOLL_NODE_CHECK": "\"off\": declared clusters whose ranks share one node check "
    "in messages, as across nodes, not in the node's shared memory",
    "WACOLL_SCRIPTS": "the plan scripts",
    "WACOLL_LEARN": "whether repeated calls learn their fastest candidate",
    "WACOLL_TUNING": "the file of learned choices",
    "WACOLL_MEASURE": "whether discovered links are measured",
}

#: Every variable wacoll reads, with what it decides: :data:`SHARED`, then those that
#: may differ between ranks.
VARIABLES = {
    **SHARED,
    "WACOLL_PROOF_CACHE": "where proofs of plans are kept (\"off\": nowhere)",
    "WACOLL_PROOF_KEY": "the file of the key that signs the proof cache's records",
    "WACOLL_PROOF_WAIT": "seconds a rank waits for another process's proof",
    "WACOLL_KERNELS": "\"baseline\": the portable reduction kernels, not AVX2's",
    "WACOLL_PROGRESS": "progress lines of long commands forced on (1) or off (0)",
    "WACOLL_ON_INTERRUPT": "what an interrupt inside a collective does",
    "WACOLL_LINKS_MAX_AGE": "hours a measured links record is reused (rank 0's "
    "value decides)",
    "WACOLL_GC_FREEZE": "\"off\": the objects alive when wacoll.mpi is imported are "
    "not frozen (wacoll.mpi.heap)",
}


def setting(name, environ=None):
    """The value of the variable ``name`` (one of :data:`VARIABLES`), stripped, or
    None where it is unset or blank.

    Parameters
    ----------
    name : str
    environ : mapping, optional
        The environment (default ``os.environ``).

    Raises
    ------
    KeyError
        ``name`` is not one of :data:`VARIABLES` (a misspelt name in wacoll's code).
    """
    if name not in VARIABLES:
        raise KeyError(
            f"{name} is not a wacoll setting; add it to wacoll.settings.VARIABLES"
        )
    environ = os.environ if environ is None else environ
    return (environ.get(name) or "").strip() or None


def read_settings(environ=None) -> dict:
    """This rank's values of the :data:`SHARED` variables (None: unset or blank).

    Parameters
    ----------
    environ : mapping, optional
        The environment (default ``os.environ``).
    """
    return {name: setting(name, environ) for name in SHARED}


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
                    f"mpiexec -genv {name} ...)"
                )
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
        return {
            "1": "on",
            "yes": "on",
            "true": "on",
            "0": "off",
            "no": "off",
            "false": "off",
        }.get(low, low)
    return value
