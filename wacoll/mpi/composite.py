"""Running a composed plan: library collectives in the clusters, a plan between them.

:class:`CompositeWork` runs one rank's part of a
:class:`~wacoll.plans.composite.Composite` as a call's work (the interface of
:class:`~wacoll.mpi.task.NativeWork` and :class:`~wacoll.mpi.executor.ProgramRun`): its
phases one after the other, each a non-blocking collective of the MPI library on the
rank's cluster communicator (ranks in rank order, made by
:func:`cluster_communicator`) or a :class:`~wacoll.mpi.executor.ProgramRun` of the plan
phase over the call's wire, the plan's rank ``i`` being the wire's rank
``phase.ranks[i]``. Ranks outside the plan phase skip it.

Every rank starts the library collectives of a call in the same order, and a
blocking call completes before the next begins, so the cluster communicator's
collectives match. Concurrent non-blocking calls could start them in different
orders on different ranks, so composites run blocking calls only (the selection
policy says so).
"""

from __future__ import annotations

import dataclasses

from wacoll.mpi.engine import advance_request
from wacoll.mpi.executor import ProgramRun
from wacoll.mpi.scratch import scratch_array
from wacoll.plans.composite import LibraryPhase
from wacoll.plans.lower import lower

__all__ = ["CompositeWork", "cluster_communicator", "rank_programs"]


def cluster_communicator(wire, topology):
    """The communicator of this rank's cluster of ``topology`` (collective over
    ``wire``), its ranks in the order of ``wire``'s."""
    rank = wire.Get_rank()
    return wire.Split(topology.cluster_of(rank), rank)


def rank_programs(composite, rank):
    """``rank``'s lowered program of each plan phase of ``composite`` (None where it
    takes no part), its peers renumbered to the composite's ranks.

    Examples
    --------
    >>> from wacoll import Topology
    >>> from wacoll.plans.composite import compose
    >>> c = compose("bcast", Topology.from_sizes([2, 2]), root=1, count=4)
    >>> [None if p is None else [(s.kind, s.peer) for s in p.steps]
    ...  for p in rank_programs(c, 2)]
    [[('recv', 1)], None]
    """
    programs = []
    for phase in composite.phases:
        if isinstance(phase, LibraryPhase) or rank not in phase.ranks:
            programs.append(None)
            continue
        program = lower(phase.plan, phase.ranks.index(rank))
        steps = tuple(
            step
            if step.peer is None
            else dataclasses.replace(step, peer=phase.ranks[step.peer])
            for step in program.steps
        )
        programs.append(dataclasses.replace(program, rank=rank, steps=steps))
    return programs


class CompositeWork:
    """One rank's part of a composite, as a call's work.

    Parameters
    ----------
    composite : Composite
    programs : list
        :func:`rank_programs` of this rank (cached by the caller).
    wire, cluster : mpi4py.MPI.Intracomm
        The call's communicator and this rank's cluster communicator.
    inbuf, outbuf : numpy.ndarray or None
        The user's buffers as 1-D arrays (bcast: ``outbuf`` only).
    op : mpi4py.MPI.Op, optional
    scratch : dict, optional
        Reused scratch arrays (blocking calls).
    tag : int
        The tag of the plan phase's messages.
    """

    __slots__ = ("_starts", "_index", "_current", "done", "_started")

    def __init__(
        self,
        composite,
        programs,
        wire,
        cluster,
        inbuf,
        outbuf,
        *,
        op=None,
        scratch=None,
        tag=0,
        tracer=None,
    ):
        rank = wire.Get_rank()
        bufs = {"in": inbuf, "out": outbuf}
        if any(
            isinstance(p, LibraryPhase) and p.dst == "acc" and rank in p.roots
            for p in composite.phases
        ):
            # not a plan buffer name: the plan phase's own scratch must not share it
            bufs["acc"] = scratch_array(
                scratch, "<cluster result>", composite.count, inbuf.dtype
            )
        members = next(c for c in composite.clusters if rank in c)
        order = sorted(members)
        starts = []
        for phase, program in zip(composite.phases, programs):
            if isinstance(phase, LibraryPhase):
                root = next(r for r in phase.roots if r in members)
                starts.append(
                    _library(phase, cluster, order.index(root), rank == root, bufs, op)
                )
            elif program is not None:
                starts.append(
                    _plan_run(program, wire, bufs, phase, op, scratch, tag, tracer)
                )
        self._starts = starts
        self._index = 0
        self._current = None
        self._started = False
        self.done = not starts

    @property
    def started(self):
        return self._started

    @property
    def waiting(self):
        current = self._current
        if current is None:
            return []
        return current.waiting if isinstance(current, ProgramRun) else [current]

    def advance(self, block=False):
        """Run the phases in order; True once all are done."""
        self._started = True
        while not self.done:
            if self._current is None:
                self._current = self._starts[self._index]()
            current = self._current
            if isinstance(current, ProgramRun):
                finished = current.advance(block)
            else:
                finished = advance_request(current, block)
            if not finished:
                return False
            self._current = None
            self._index += 1
            self.done = self._index == len(self._starts)
        return True

    def cancel(self):
        """Abandon the work (after a failed check): a pending plan phase's receives
        are cancelled; a library collective cannot be (its communicator is retired)."""
        if isinstance(self._current, ProgramRun):
            self._current.cancel()
        self.done = True


def _library(phase, cluster, root, is_root, bufs, op):
    """A function starting ``phase``'s library collective on this rank."""
    if phase.op == "barrier":
        return cluster.Ibarrier
    if phase.op == "bcast":
        buf = bufs[phase.src]
        return lambda: cluster.Ibcast(buf, root=root)
    send = bufs[phase.src]
    recv = bufs[phase.dst] if is_root else None
    return lambda: cluster.Ireduce(send, recv, op=op, root=root)


def _plan_run(program, wire, bufs, phase, op, scratch, tag, tracer):
    """A function starting this rank's run of the plan phase."""
    inbuf = None if phase.src is None else bufs[phase.src]
    outbuf = None if phase.dst is None else bufs[phase.dst]
    return lambda: ProgramRun(
        program, wire, inbuf, outbuf, op=op, scratch=scratch, tag=tag, tracer=tracer
    )
