"""Completion times of a broadcast down a tree under two simple cost models.

*Banikazemi et al. (ICPP 1998), message initiation cost* ``t_ini``: a node that holds
the message at time ``R`` sends to its children one after the other, each send
occupying it for its own ``t_ini``; the child of order ``k`` (0-based) has the
message at ``R + (k + 1) * t_ini[parent]``. Transmission time is ignored.

*MagPIe (Kielmann et al., PPoPP 1999), Figure 1*: a send costs the sender ``t_s`` and
the message reaches the receiver ``t_r`` after the send started; the ``k``-th send of
a node that got the message at ``R`` starts at ``R + k * t_s`` and its child has the
message at ``R + k * t_s + t_r``.

Both return the time at which the last node has the message (0 for a lone root).
The per-message formulas and the checks of their parameters are those of
:mod:`wacoll.costs`, which the simulator's models use too; a bad cost raises
:class:`~wacoll.errors.TopologyError`.

Examples
--------
>>> from wacoll.trees import binomial, flat
>>> bcast_time(binomial(4), [100, 300, 300, 300])
400
>>> bcast_time_ts_tr(flat(8), t_s=10, t_r=1000)
1060
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Sequence

import networkx as nx
import numpy as np

from wacoll.costs import (
    arrival,
    t_ini_message,
    ts_tr_message,
    validate_t_ini,
    validate_time,
)
from wacoll.errors import PlanError
from wacoll.trees.basic import validate_tree

__all__ = [
    "bcast_time",
    "bcast_time_ts_tr",
    "receive_times",
    "validate_costs",
    "validate_members",
]


def validate_costs(costs: Sequence[float]) -> list:
    """Per-rank costs as a list of Python numbers (:func:`wacoll.costs.validate_t_ini`):
    the cost functions here and the tree builders of :mod:`wacoll.trees.hetero` and
    :mod:`wacoll.trees.optimal` check their ``costs`` with it."""
    return validate_t_ini(costs, "costs", "cost of rank")


def validate_members(members: Iterable[int] | None, n: int, root: int) -> list:
    """The sorted participant ranks (default all of ``0..n-1``), checked against
    ``root``: PlanError for a root or member that is not a rank of ``0..n-1``, a member
    given twice, or a root that is not a member."""
    if (
        isinstance(root, (bool, np.bool_))
        or not isinstance(root, numbers.Integral)
        or not 0 <= int(root) < n
    ):
        raise PlanError(f"root {root!r} is not a rank of 0..{n - 1}")
    if members is None:
        return list(range(n))
    if isinstance(members, (str, bytes, dict)):
        raise PlanError(f"members must be a collection of ranks, got {members!r}")
    try:
        members = list(members)
    except TypeError:
        raise PlanError(
            f"members must be a collection of ranks, got {members!r}"
        ) from None
    for m in members:
        if (
            isinstance(m, (bool, np.bool_))
            or not isinstance(m, numbers.Integral)
            or not 0 <= int(m) < n
        ):
            raise PlanError(f"member {m!r} is not a rank of 0..{n - 1}")
    members = sorted(int(m) for m in members)
    for a, b in zip(members, members[1:]):
        if a == b:
            raise PlanError(f"member {a} appears more than once")
    if root not in members:
        raise PlanError(f"root {root} is not in members")
    return members


def _times(tree, message) -> dict:
    """Receive time per node; ``message(p)`` is ``(busy, delay)`` of a send of ``p``.

    The child of order ``k`` of ``p`` gets it at :func:`wacoll.costs.arrival`
    ``(R_p, k, busy, delay)``.
    """
    root = validate_tree(tree)
    times = {root: 0}
    stack = [root]
    while stack:
        p = stack.pop()
        r, (busy, delay) = times[p], message(p)
        for c, data in tree.succ[p].items():
            times[c] = arrival(r, data["order"], busy, delay)
            stack.append(c)
    return times


def _cost_lookup(tree, costs):
    costs = validate_costs(costs)
    for v in tree.nodes:
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < len(costs):
            raise PlanError(
                f"node {v!r} of the tree has no cost (costs cover ranks "
                f"0..{len(costs) - 1})"
            )
    return costs


def receive_times(tree: nx.DiGraph, costs: Sequence[float]) -> dict:
    """The time at which each node has the message, under the ``t_ini`` model.

    Parameters
    ----------
    tree : networkx.DiGraph
        A tree in the wacoll convention (edges parent -> child with ``order``).
    costs : sequence of float
        ``costs[r]`` is rank ``r``'s message initiation cost ``t_ini``.

    Returns
    -------
    dict
        Node -> receive time; the root has 0.

    Examples
    --------
    >>> from wacoll.trees import binomial
    >>> receive_times(binomial(4), [100, 300, 300, 300])
    {0: 0, 1: 200, 2: 100, 3: 400}
    """
    costs = _cost_lookup(tree, costs)
    return dict(sorted(_times(tree, lambda p: t_ini_message(costs[p])).items()))


def bcast_time(tree: nx.DiGraph, costs: Sequence[float]) -> float:
    """Completion time of a broadcast down ``tree`` under the ``t_ini`` model.

    The child of order ``k`` of a node that has the message at ``R`` receives it at
    ``R + (k + 1) * costs[parent]`` (Banikazemi, Moorthy and Panda, ICPP 1998).

    Parameters
    ----------
    tree : networkx.DiGraph
        A tree in the wacoll convention.
    costs : sequence of float
        Per-rank message initiation costs, finite and >= 0.

    Returns
    -------
    float or int
        The latest receive time; 0 for a single node.

    Raises
    ------
    PlanError
        If the tree breaks the convention or a node has no cost.
    TopologyError
        If a cost is not a finite number >= 0.

    Examples
    --------
    >>> from wacoll.trees import binomial
    >>> costs = [100, 300, 300, 300, 300, 100, 300, 300]  # Banikazemi Figure 1
    >>> bcast_time(binomial(8), costs)
    700
    """
    return max(receive_times(tree, costs).values())


def bcast_time_ts_tr(tree: nx.DiGraph, t_s: float, t_r: float) -> float:
    """Completion time of a broadcast down ``tree`` under MagPIe's send/receive model.

    The ``k``-th send (order ``k``) of a node that has the message at ``R`` starts at
    ``R + k * t_s`` and the child has the message at ``R + k * t_s + t_r``.

    Parameters
    ----------
    tree : networkx.DiGraph
        A tree in the wacoll convention.
    t_s : float
        Time a send occupies the sender (>= 0).
    t_r : float
        Time from the start of a send until the receiver has the message (>= 0).

    Returns
    -------
    float or int
        The latest receive time; 0 for a single node.

    Examples
    --------
    MagPIe's Figure 1 (8 ranks, ``t_s = 10``):

    >>> from wacoll.trees import binomial, flat
    >>> [bcast_time_ts_tr(flat(8), 10, t_r) for t_r in (1000, 11)]
    [1060, 71]
    >>> [bcast_time_ts_tr(binomial(8), 10, t_r) for t_r in (1000, 11)]
    [3000, 33]
    """
    costs = ts_tr_message(validate_time("t_s", t_s), validate_time("t_r", t_r))
    return max(_times(tree, lambda p: costs).values())
