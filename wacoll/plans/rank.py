"""One rank's program, derived without building the other ranks' steps.

A running rank needs only its own program. :func:`rank_plan` builds the selected
plan with a builder focused on that rank (:func:`wacoll.plans.builder.focus`): the
family's builder runs as it does for the whole plan, every other rank's steps are
dropped as they are appended, and the loops whose cost grows with the number of ranks
times the blocks (the magpie family's allgather, reduce-scatter and the flat
all-to-all) skip the ranks whose steps would be dropped. :func:`rank_program` lowers
the result; it equals ``lower(selection.build(topology), rank)``, which the tests
check for every family and operation on many topologies.

A focused build proves nothing. :func:`rank_program` runs it only once the whole
plan has been proved (it is given a proof, or its ``proof`` callable finds one, e.g.
in :mod:`wacoll.plans.proofs`' disk cache); without one it builds and proves the whole
plan, and lowers that. :func:`plan_for_rank` is the run-time rule ``wacoll.Comm``
follows: this rank's part when the proof cache holds the plan's proof, else the whole
plan, proved and its proof stored, so that the next run derives only its part.

Examples
--------
>>> from wacoll import Topology
>>> from wacoll.plans import Call, select, lower
>>> topo = Topology.from_sizes([3, 3])
>>> sel = select(Call("allgather", count=2, itemsize=8), topo)
>>> part = rank_plan(sel, topo, 4)
>>> part.algorithm, [str(s) for s in part.program]
('coordinator', ['copy [4] in -> out', 'send 3 [4]', 'recv 3 [0,1,2,3,5]'])
>>> same = rank_program(sel, topo, 4, proof=True)
>>> [s.label for s in same.steps] == [s.label for s in lower(sel.build(topo), 4).steps]
True
"""

from __future__ import annotations

import dataclasses
import functools
import numbers
import warnings

from wacoll.errors import PlanError, ProofCacheWarning
from wacoll.plans.builder import RankPlan, focus
from wacoll.plans.families import build
from wacoll.plans.lower import lower, lower_steps

__all__ = ["rank_plan", "rank_program", "plan_for_rank", "lower_for_rank"]


def _validate_rank(rank, topology):
    if (
        isinstance(rank, bool)
        or not isinstance(rank, numbers.Integral)
        or not (0 <= rank < topology.size)
    ):
        raise PlanError(f"rank {rank!r} is not a rank of 0..{topology.size - 1}")
    return int(rank)


def rank_plan(selection, topology, rank) -> RankPlan:
    """Rank ``rank``'s part of the plan ``selection`` builds on ``topology``, unproved.

    Parameters
    ----------
    selection : Selection
        What :func:`wacoll.plans.select` chose (not the native family).
    topology : Topology
    rank : int

    Returns
    -------
    RankPlan
        The rank's program, with the plan's header (family, algorithm, counts, ...).

    Raises
    ------
    PlanError
        For the native family, a rank outside the topology, or whatever the family's
        builder refuses.

    Examples
    --------
    >>> from wacoll import Topology
    >>> from wacoll.plans import Call, select
    >>> topo = Topology.from_sizes([2, 2])
    >>> part = rank_plan(select(Call("alltoall", count=1), topo), topo, 1)
    >>> [str(s) for s in part.program][:4]
    ['copy [5] in -> out', 'send 2 [6] from in', 'send 3 [7] from in', 'send 0 [4] from in']
    >>> part.counts
    RepeatedCounts(1, 16)
    """
    if selection.native:
        raise PlanError("the native family has no plan: the MPI library runs the call")
    rank = _validate_rank(rank, topology)
    with focus(rank):
        part = build(selection.op, topology, selection.family, **dict(selection.options))
    if not isinstance(part, RankPlan):  # a builder that bypassed PlanBuilder
        raise PlanError(
            f"the {selection.family} family's {selection.op} builder does "
            f"not build through a PlanBuilder; it cannot derive one rank"
        )
    from wacoll.plans.proofs import build_proved

    return dataclasses.replace(
        selection.with_arithmetic(part),
        source=functools.partial(build_proved, selection, topology),
    )


def rank_program(
    selection, topology, rank, in_offsets=None, out_offsets=None, *, proof=None
):
    """Rank ``rank``'s lowered program of the plan ``selection`` builds, and its header.

    Equal to ``lower(selection.build(topology), rank, in_offsets, out_offsets)``, in
    time and memory proportional to the rank's own steps once the whole plan is known
    to be proved.

    Parameters
    ----------
    selection : Selection
    topology : Topology
    rank : int
    in_offsets, out_offsets : dict, optional
        Buffer layouts, as :func:`wacoll.plans.lower` takes them.
    proof : bool or callable, optional
        ``True``: the caller has proved this plan (or holds a proof of it); derive
        the rank's part only. A callable ``proof(selection, topology)`` returns a
        truthy proof, or a falsy value when it has none. ``None`` (the default) or
        no proof: build and prove the whole plan and lower it.

    Returns
    -------
    LoweredProgram
        The lowered program (:func:`rank_plan` gives the plan's names).

    Examples
    --------
    >>> from wacoll import Topology
    >>> from wacoll.plans import Call, select
    >>> topo = Topology.from_sizes([2, 2])
    >>> sel = select(Call("reduce_scatter_block", count=3, itemsize=8,
    ...                   level="associative"), topo)
    >>> program = rank_program(sel, topo, 3, proof=True)
    >>> [(s.kind, s.peer) for s in program.steps]
    [('send', 2), ('recv', 2), ('copy', None)]
    """
    rank = _validate_rank(rank, topology)
    proved = proof(selection, topology) if callable(proof) else proof
    if not proved:
        return lower(selection.build(topology), rank, in_offsets, out_offsets)
    part = rank_plan(selection, topology, rank)
    return lower_steps(part, rank, part.program, in_offsets, out_offsets)


def plan_for_rank(selection, topology, rank, *, directory=None):
    """What a running rank needs of the plan ``selection`` builds: a proved plan.

    When the proof cache (:mod:`wacoll.plans.proofs`, ``directory`` or its default)
    holds the plan's proof, only ``rank``'s part (a
    :class:`~wacoll.plans.builder.RankPlan`), whose program's digest must be the one
    the proof recorded for this rank; otherwise (with a
    :class:`~wacoll.errors.ProofCacheWarning` on a digest mismatch) the whole plan,
    built and proved, its proof stored for the next run. On a miss, the processes that
    share the cache prove the plan once: the first claims it and the others wait for
    its proof (:mod:`wacoll.plans.prooflock`), then derive only their own parts. With
    the cache off, always the whole plan (:meth:`Selection.build
    <wacoll.plans.Selection.build>`).

    Examples
    --------
    >>> import tempfile
    >>> from wacoll import Topology
    >>> from wacoll.plans import Call, select
    >>> topo = Topology.from_sizes([2, 2])
    >>> sel = select(Call("alltoall", count=1), topo)
    >>> where = tempfile.mkdtemp()
    >>> type(plan_for_rank(sel, topo, 1, directory=where)).__name__
    'Plan'
    >>> part = plan_for_rank(sel, topo, 1, directory=where)
    >>> type(part).__name__, part.rank, len(part.program)
    ('RankPlan', 1, 7)
    """
    from wacoll.plans import proofs

    rank = _validate_rank(rank, topology)
    where = proofs.cache_dir() if directory is None else directory
    if where is None or where is False:
        return selection.build(topology)
    with proofs.claimed(selection, topology, directory=where) as proof:
        if proof is not None:
            part = rank_plan(selection, topology, rank)
            if proofs.program_digest(part.program) == proof.rank_digests[rank]:
                return part
            warnings.warn(
                f"rank {rank}'s program derived alone is not the one the "
                f"cached proof covers; proving the whole {selection.op} plan",
                ProofCacheWarning,
                stacklevel=2,
            )
        plan = selection.build(topology)
        proofs.store(selection, topology, plan, directory=where)
        return plan


def lower_for_rank(plan, rank, in_offsets=None, out_offsets=None):
    """Lower ``rank``'s program of what :func:`plan_for_rank` returned.

    A :class:`~wacoll.plans.plan.Plan` is lowered by :func:`wacoll.plans.lower`
    (proved first); a :class:`~wacoll.plans.builder.RankPlan`, a part of a plan whose
    proof is cached, by :func:`wacoll.plans.lower.lower_steps`.

    Examples
    --------
    >>> from wacoll import Topology
    >>> from wacoll.plans import Call, select
    >>> topo = Topology.from_sizes([2, 2])
    >>> sel = select(Call("bcast", count=4, root=0), topo)
    >>> lower_for_rank(rank_plan(sel, topo, 3), 3).steps[0].label
    'recv 2 [0]'
    """
    if isinstance(plan, RankPlan):
        if plan.rank != rank:
            raise PlanError(
                f"this part of the plan is rank {plan.rank}'s, not rank {rank}'s"
            )
        return lower_steps(plan, rank, plan.program, in_offsets, out_offsets)
    return lower(plan, rank, in_offsets, out_offsets)
