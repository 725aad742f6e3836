"""Predict how long a plan takes: a discrete-event simulation under a cost model.

:func:`simulate` runs every rank's program in order on a simulated clock. A ``send``
occupies the sender for the model's send time and hands the message to the network;
the model says when it becomes available at the receiver. A ``recv`` or
``recv_combine`` completes at ``max(time the rank reaches it, arrival)`` plus the
model's receive overhead (default 0) plus the combine cost; ``copy`` and ``combine``
cost ``bytes / compute_rate`` (default: free). The k-th send from ``a`` to ``b``
meets ``b``'s k-th receive from ``a`` (:meth:`~wacoll.plans.Plan.messages`). Sends
never wait for their receiver (eager delivery, as the prover assumes). Consecutive
``recv_combine`` steps of one arrival-order ``group`` are served in the order their
messages arrive (ties: program order), which is what a PATHS-style runtime does.

Three models, from the papers wacoll follows:

:class:`TsTrModel`
    MagPIe / Bernaschi et al.: a send occupies the sender ``t_s``; the receiver has
    the message ``t_r`` after the send started.
:class:`TiniModel`
    Banikazemi et al.: a send from rank ``r`` occupies it ``t_ini[r]`` (plus
    ``nbytes / bandwidth`` if given); the receiver has the message at the end.
:class:`LinkModel`
    Two-level latency/bandwidth with contention on the wide area (Matsuda et al.):
    intra-cluster messages leave at the sender's node rate; wide-area messages share
    their directed cluster-pair link max-min fairly, each capped by its sender's
    rate (a fluid simulation).

``simulate(plan)`` without a model uses a :class:`LinkModel` over the plan's
clusters with :class:`~wacoll.Topology`'s default links. :attr:`SimResult.completion`
is when the last rank finishes its program, which includes a sender still busy with
its last send; :attr:`SimResult.arrivals` says when each message was delivered (for a
broadcast, ``max(arrivals)`` is when the last rank has the data, the quantity the
tree cost functions of :mod:`wacoll.trees` compute).

How it runs: the simple models have no shared resource, so times follow from the
message dependencies alone, and each rank runs ahead as far as its messages allow
(per-rank cursors over precompiled programs, cached on the plan). Under
:class:`LinkModel` the wide-area transfers, the only shared resource, are
additionally ordered in time on an event heap, with at most one live completion
entry per link. The models live in :mod:`wacoll.plans.sim.models`, the engine in
:mod:`wacoll.plans.sim.engine`, the results in :mod:`wacoll.plans.sim.result`;
this module is their public face.

Examples
--------
MagPIe's Figure 1: a flat and a binomial broadcast tree over 8 nodes, ``t_s = 10``.

>>> from wacoll import Topology
>>> from wacoll.plans import build
>>> from wacoll.plans.sim import simulate, TsTrModel
>>> flat = build("bcast", Topology.single(8), "tree", tree="flat")
>>> binomial = build("bcast", Topology.single(8), "tree", tree="binomial")
>>> [simulate(p, TsTrModel(10, t_r)).completion
...  for t_r in (1000, 11) for p in (flat, binomial)]
[1060.0, 3000.0, 71.0, 33.0]
"""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING

from wacoll.errors import PlanError
from wacoll.plans.sim.engine import Engine, costed_programs, structure_of
from wacoll.plans.sim.models import LinkModel, Model, TiniModel, TsTrModel
from wacoll.plans.sim.result import Event, SimResult
from wacoll.topology import Topology

if TYPE_CHECKING:
    from wacoll.plans.plan import Plan

__all__ = ["simulate", "TsTrModel", "TiniModel", "LinkModel", "SimResult", "Event"]


def simulate(
    plan: Plan, model: Model | None = None, *, checked: bool = True
) -> SimResult:
    """Simulate ``plan`` under ``model`` and predict when each rank finishes.

    Parameters
    ----------
    plan : Plan
        Checked first (:meth:`~wacoll.plans.Plan.prove`, cached); a plan that fails
        its check raises :class:`~wacoll.errors.PlanError` and is not simulated.
    model : TsTrModel, TiniModel or LinkModel, optional
        Default: ``LinkModel`` over a topology with the plan's clusters and the
        default link parameters of :class:`~wacoll.Topology` (10 us, 1 GB/s inside
        a cluster; MagPIe's 10 ms, 1 MB/s across).
    checked : bool
        False: not checked first, for a price alone (a plan that stalls still
        raises :class:`~wacoll.errors.PlanError`; sends and receives that do not
        pair up, too). A plan that runs is checked before it runs, whatever its
        price said.

    Returns
    -------
    SimResult

    Examples
    --------
    Rank 0 sends 1000 bytes to each rank of another cluster over a 10 ms, 1 MB/s
    link, waiting for each message to cross before it sends the next:

    >>> from wacoll import Topology
    >>> from wacoll.plans import build
    >>> topo = Topology.from_sizes([1, 2], wan_latency=0.01, wan_bandwidth=1e6)
    >>> plan = build("bcast", topo, "tree", tree="flat", count=1000)
    >>> result = simulate(plan, LinkModel(topo, buffered=False))
    >>> [round(t, 6) for t in result.arrivals], round(result.completion, 6)
    ([0.011, 0.012], 0.012)
    >>> result.finish[0]  # rank 0 was busy until its last byte crossed
    0.002
    """
    from wacoll.plans.plan import Plan

    if not isinstance(plan, Plan):
        raise PlanError("simulate needs a wacoll Plan")
    if model is None:
        model = LinkModel(_default_topology(plan))
    elif not isinstance(model, Model):
        raise PlanError(
            f"simulate needs a TsTrModel, TiniModel or LinkModel, "
            f"got {type(model).__name__}"
        )
    if checked:
        plan.prove()
    messages = plan.messages()
    # The simulation allocates many small acyclic objects; collecting cycles in the
    # middle of it only costs time. They are all gone before collecting resumes.
    collecting = gc.isenabled()
    gc.disable()
    try:
        result = _run(plan, model, messages)
    finally:
        if collecting:
            gc.enable()
    return result


def _run(plan, model, messages):
    structure = structure_of(plan, messages)
    busy, delay, flows = model.prepare(plan, messages, structure)
    progs = costed_programs(plan, messages, structure.rows, model)
    engine = Engine(plan, model, structure, progs, busy, delay, flows)
    finish, arrivals, starts, ends = engine.run()
    return SimResult.from_run(plan, model, finish, arrivals, starts, ends)


def _default_topology(plan):
    members = {}
    for r, c in enumerate(plan.clusters):
        members.setdefault(c, []).append(r)
    return Topology.from_clusters([members[c] for c in sorted(members)])
