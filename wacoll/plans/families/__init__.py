"""The plan families and their registry.

Each family module holds ``BUILDERS`` (operation -> builder function); :func:`build`
picks a family's builder by name::

    build(op, topology, family, root=..., count=..., level=..., **family_options)

Families: ``magpie`` (MagPIe's wide-area algorithms), ``mpich`` (the MPICH 1.1
algorithms MagPIe compares against), ``tree`` (any tree, PATHS/LAM), ``gridmpi``
(Matsuda's multi-sender broadcast and allreduce) and ``combining`` (Plaat's
cluster-combining alltoall).
"""

from __future__ import annotations

import importlib
import inspect

from wacoll.errors import PlanError
from wacoll.plans.operations import OPERATIONS

__all__ = ["FAMILIES", "builders", "build", "options"]

#: Plan families and the modules that hold their builders.
FAMILIES = {
    "magpie": "wacoll.plans.families.magpie",
    "mpich": "wacoll.plans.families.mpich",
    "tree": "wacoll.plans.families.tree",
    "gridmpi": "wacoll.plans.families.gridmpi",
    "combining": "wacoll.plans.families.combining",
}


def builders(family: str) -> dict:
    """The operation -> builder mapping of ``family``.

    Examples
    --------
    >>> sorted(builders("tree"))
    ['allreduce', 'bcast', 'reduce']
    """
    try:
        module = FAMILIES[family]
    except (KeyError, TypeError):
        raise PlanError(f"unknown plan family {family!r}; known: {', '.join(FAMILIES)}") \
            from None
    return importlib.import_module(module).BUILDERS


def build(op: str, topology, family: str = "magpie", **options) -> Plan:
    """Build the ``family`` plan for operation ``op`` on ``topology``.

    ``options`` are the builder's keyword arguments: ``root``, ``count`` (elements),
    ``counts`` (v-variants), ``segments``, ``level``, ``itemsize`` and the family's own.

    Examples
    --------
    >>> from wacoll import Topology
    >>> plan = build("bcast", Topology.from_sizes([4, 4]), "magpie", root=5, count=1024)
    >>> plan.algorithm, plan.check().wide_area_messages
    ('coordinator', 1)
    >>> build("bcast", Topology.single(2), "tree", fanout=3)
    Traceback (most recent call last):
    ...
    wacoll.errors.PlanError: the tree family's bcast takes no option 'fanout'; it takes tree, root, count, segments, itemsize, group_size
    """
    if op not in OPERATIONS:
        raise PlanError(f"unknown operation {op!r}; known: {', '.join(OPERATIONS)}")
    table = builders(family)
    if op not in table:
        raise PlanError(f"the {family} family has no {op} plan; it builds "
                        f"{', '.join(sorted(table))}")
    fn = table[op]
    accepted = inspect.signature(fn).parameters
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        takes = ", ".join(name for name in accepted if name != "topology")
        raise PlanError(f"the {family} family's {op} takes no option {unknown[0]!r}; "
                        f"it takes {takes}")
    return fn(topology, **options)


def options(family: str, op: str) -> tuple:
    """The keyword options ``family``'s ``op`` builder takes.

    Examples
    --------
    >>> options("tree", "bcast")
    ('tree', 'root', 'count', 'segments', 'itemsize', 'group_size')
    """
    table = builders(family)
    if op not in table:
        raise PlanError(f"the {family} family has no {op} plan")
    return tuple(name for name in inspect.signature(table[op]).parameters
                 if name != "topology")
