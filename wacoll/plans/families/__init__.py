"""The plan families and their registry: which builders a family has, which options
each takes, and :func:`build`, the one entry point that picks a builder by name::

    build(op, topology, family, root=..., count=..., level=..., **family_options)

Families: ``magpie`` (MagPIe's wide-area algorithms), ``mpich`` (the MPICH 1.1
algorithms MagPIe compares against), ``tree`` (any tree, PATHS/LAM), ``gridmpi``
(Matsuda's multi-sender broadcast and allreduce, and an allgather after them),
``combining`` (Plaat's cluster-combining alltoall), ``modern`` (the algorithms
MPICH 4 and Open MPI 5 select: Bruck, recursive doubling, ring, Rabenseifner, van
de Geijn, dissemination)
``hierarchical`` (any of these inside each cluster and any between the clusters'
coordinators, composed into one plan) and ``recent`` (algorithms published since
2019: NCCL's double binary tree and PAT, Swing, Bine trees).

Each family module defines ``BUILDERS`` (operation -> builder function) and, next to
it, ``OPTIONS`` (operation -> the keyword options that builder takes, in its
signature's order). Callers ask :func:`options` rather than inspect a builder; a test
keeps every table equal to its builder's signature. A family module is imported the
first time it is asked for.

Examples
--------
>>> sorted(FAMILIES)
['combining', 'gridmpi', 'hierarchical', 'magpie', 'modern', 'mpich', 'recent', 'tree']
>>> options("mpich", "alltoall")
('count', 'itemsize', 'order')
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from wacoll.errors import PlanError
from wacoll.plans.operations import OPERATIONS

if TYPE_CHECKING:
    from wacoll.plans.plan import Plan
    from wacoll.topology import Topology

__all__ = ["FAMILIES", "builders", "options", "build"]

#: Plan families and the modules that hold their builders.
FAMILIES = {
    "magpie": "wacoll.plans.families.magpie",
    "mpich": "wacoll.plans.families.mpich",
    "tree": "wacoll.plans.families.tree",
    "gridmpi": "wacoll.plans.families.gridmpi",
    "combining": "wacoll.plans.families.combining",
    "modern": "wacoll.plans.families.modern",
    "hierarchical": "wacoll.plans.families.hierarchical",
    "recent": "wacoll.plans.families.recent",
}


def _module(family: str):
    """The module of ``family``, imported on first use; PlanError for an unknown name."""
    try:
        name = FAMILIES[family]
    except (KeyError, TypeError):
        raise PlanError(
            f"unknown plan family {family!r}; known: {', '.join(FAMILIES)}"
        ) from None
    return importlib.import_module(name)


def builders(family: str) -> dict:
    """The operation -> builder mapping of ``family``.

    Raises
    ------
    PlanError
        If ``family`` is not one of :data:`FAMILIES`.

    Examples
    --------
    >>> sorted(builders("tree"))
    ['allreduce', 'bcast', 'reduce']
    """
    return _module(family).BUILDERS


def options(family: str, op: str) -> tuple:
    """The keyword options ``family``'s builder for ``op`` takes, in signature order.

    Everything but the topology: the block layout (``root``, ``count``, ``counts``,
    ``segments``, ``itemsize``), ``level`` for reductions, and the family's own.

    Raises
    ------
    PlanError
        If the family is unknown or has no plan for ``op``.

    Examples
    --------
    >>> options("tree", "bcast")
    ('tree', 'root', 'count', 'segments', 'itemsize', 'group_size')
    >>> "threshold" in options("magpie", "allreduce")
    True
    >>> options("combining", "bcast")
    Traceback (most recent call last):
    ...
    wacoll.errors.PlanError: the combining family has no bcast plan; it builds alltoall, alltoallv
    """
    module = _module(family)
    if op not in module.BUILDERS:
        raise PlanError(
            f"the {family} family has no {op} plan; it builds "
            f"{', '.join(sorted(module.BUILDERS))}"
        )
    return module.OPTIONS[op]


def build(op: str, topology: Topology, family: str = "magpie", **kwargs: Any) -> Plan:
    """Build the ``family`` plan for operation ``op`` on ``topology``.

    ``kwargs`` are the builder's keyword options (see :func:`options`): ``root``,
    ``count`` (elements), ``counts`` (v-variants), ``segments``, ``level``,
    ``itemsize`` and the family's own.

    Returns
    -------
    Plan

    Raises
    ------
    PlanError
        For an unknown operation or family, an operation the family has no plan
        for, an option its builder does not take, or whatever the builder refuses.

    Examples
    --------
    >>> from wacoll import Topology
    >>> plan = build("bcast", Topology.from_sizes([4, 4]), "magpie", root=5, count=1024)
    >>> plan.algorithm, plan.prove().wide_area_messages
    ('coordinator', 1)
    >>> build("bcast", Topology.single(2), "tree", fanout=3)
    Traceback (most recent call last):
    ...
    wacoll.errors.PlanError: the tree family's bcast takes no option 'fanout'; it takes tree, root, count, segments, itemsize, group_size
    """
    if op not in OPERATIONS:
        raise PlanError(f"unknown operation {op!r}; known: {', '.join(OPERATIONS)}")
    accepted = options(family, op)
    unknown = sorted(set(kwargs) - set(accepted))
    if unknown:
        raise PlanError(
            f"the {family} family's {op} takes no option {unknown[0]!r}; "
            f"it takes {', '.join(accepted)}"
        )
    return builders(family)[op](topology, **kwargs)
