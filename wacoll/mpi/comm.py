"""``wacoll.Comm``: an mpi4py intracommunicator whose collectives run wacoll plans.

Swap an mpi4py communicator for wacoll's with one line::

    from mpi4py import MPI
    import wacoll
    comm = wacoll.Comm(MPI.COMM_WORLD)            # topology: one cluster per node
    comm.Allreduce(sendbuf, recvbuf, op=MPI.SUM)  # same names, signatures, semantics

``wacoll.Comm`` *is* an ``MPI.Intracomm`` (a subclass, over a duplicate of the
communicator it is given): point-to-point, windows, ``MPI.Comm.Compare`` and every
method wacoll does not override are the MPI library's own. ``Dup``, ``Clone``,
``Split``, ``Split_type``, ``Create`` and ``Create_group`` return wacoll
communicators whose topology is derived from their members.

Each buffer collective (``Barrier``, ``Bcast``, ``Scatter[v]``, ``Gather[v]``,
``Allgather[v]``, ``Alltoall[v]``, ``Reduce``, ``Allreduce``, ``Scan``, ``Exscan``,
``Reduce_scatter[_block]``):

1. reads its arguments as mpi4py does (:mod:`wacoll.mpi.calls`);
2. agrees with the other ranks that every rank's arguments are valid and describe
   the same operation, so bad input raises the same error on every rank instead of
   hanging (:mod:`wacoll.mpi.agreement`);
3. asks the selection policy (:func:`wacoll.plans.select`) for the plan, built and
   proved once and cached, and its lowered program for this rank
   (:func:`wacoll.plans.lower`), cached per buffer layout;
4. executes it (:mod:`wacoll.mpi.executor`) on a second, private duplicate, so that
   wacoll's messages never meet the application's.

Reductions follow the communicator's or the call's level: ``"strict"`` (default,
bit-for-bit reproducible whatever the topology), ``"associative"`` or
``"commutative"``. Predefined operators that are exact in any order (integer and
boolean operands, MIN, MAX, logical and bitwise operators) run at the commutative
level automatically: their results are the same bits in any order.
"""

from __future__ import annotations

import functools
import os
import zlib

from mpi4py import MPI

from wacoll.errors import TopologyError, WacollError
from wacoll.mpi import calls
from wacoll.mpi import objects
from wacoll.mpi.agreement import VECTOR_CHECKS, Signature, agree
from wacoll.mpi.discover import topology_from_comm
from wacoll.mpi.executor import execute
from wacoll.mpi.trace import Tracer
from wacoll.plans import LEVELS, Call, Policy, builders, lower, select
from wacoll.plans.select import adapt_script
from wacoll.topology import Topology

__all__ = ["Comm"]


class Comm(MPI.Intracomm):
    """An mpi4py intracommunicator whose collectives run wacoll plans.

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm
        The communicator to wrap; wacoll works on duplicates of it.
    topology : Topology, optional
        Which rank is in which cluster; by default :func:`wacoll.topology_from_comm`.
    family : str, optional
        Plan family for every call (default: the selection policy's choice, see
        :mod:`wacoll.plans.select`); ``"scripts"`` selects loaded script plans.
    level : {"strict", "associative", "commutative"}
        Reduction level asserted for the whole communicator.
    threshold, segment_size, large_message : int
        The selection policy's tunables (:class:`wacoll.plans.Policy`).
    scripts : str or path, optional
        A plan script file or a directory of them (default ``$WACOLL_SCRIPTS``).
    validate : bool
        Agree on valid arguments before every call (one small collective; on a
        wide-area grid that is one more wide-area latency per call). Without it a bad
        argument on one rank can leave the others waiting, as in MPI itself.
    trace : bool
        Record every operation and step (:attr:`tracer`); write them with
        :meth:`write_trace`.
    **options
        Family options, e.g. ``tree="lam"`` or ``n=4``.
    """

    def __new__(cls, comm=None, *args, **kwargs):
        if comm is None:  # mpi4py's Dup and Clone make the object, then _adopt fills it
            return super().__new__(cls)
        if not isinstance(comm, MPI.Comm) or comm == MPI.COMM_NULL:
            raise WacollError("wacoll.Comm wraps an mpi4py intracommunicator")
        if comm.Is_inter():
            raise WacollError("wacoll.Comm needs an intracommunicator; this one is an "
                              "inter-communicator")
        return super().__new__(cls, comm.Dup())

    def __init__(self, comm=None, topology=None, *, family=None, level="strict",
                 threshold=512, segment_size=262144, large_message=262144, scripts=None,
                 validate=True, trace=False, **options):
        if comm is None:
            return
        error = None
        try:
            if level not in LEVELS:
                raise WacollError(f"level must be one of {LEVELS}, got {level!r}")
            policy = Policy(threshold=threshold, segment_size=segment_size,
                            large_message=large_message)
            if topology is not None and not isinstance(topology, Topology):
                raise TopologyError("topology must be a wacoll.Topology")
            if family not in (None, "scripts"):
                builders(family)
        except WacollError as exc:
            error, policy = exc, None
        wire = _private_dup(self)
        if topology is None and error is None:
            topology = topology_from_comm(wire)
        size = self.Get_size()
        if error is None and topology.size != size:
            error = TopologyError(f"the topology has {topology.size} ranks; the "
                                  f"communicator has {size}")
        fields = (("topology", repr(topology.to_dict()) if isinstance(topology, Topology)
                   else None),
                  ("family", family), ("level", level), ("threshold", threshold),
                  ("segment_size", segment_size), ("large_message", large_message),
                  ("options", repr(sorted(options.items()))), ("validate", validate))
        try:
            agree(wire, error, Signature("constructor", options=fields), validate=True)
        except WacollError:
            wire.Free()
            MPI.Intracomm.Free(self)
            raise
        self._setup(wire, topology, family, level, policy, options, validate, trace)
        scripts = scripts or os.environ.get("WACOLL_SCRIPTS") or None
        self._load_scripts(scripts)  # collective even without scripts: all ranks agree
        if self.family == "scripts" and not self._scripts:
            raise WacollError("family 'scripts' needs scripts= or $WACOLL_SCRIPTS")

    def _setup(self, wire, topology, family, level, policy, options, validate, trace,
               scripts=None):
        self._wire = wire
        self._place = calls.Place(wire.Get_rank(), wire.Get_size())
        #: The :class:`~wacoll.Topology` (clusters and links) wacoll plans for;
        #: ``topology`` is mpi4py's own (the MPI virtual topology kind).
        self.network = topology
        #: The family forced for every call, or None: the selection policy chooses.
        self.family = family
        self.level = level
        self.policy = policy
        self.options = dict(options)
        self.validate = validate
        #: The trace of this rank's calls (a :class:`~wacoll.mpi.trace.Tracer`), or None.
        self.tracer = Tracer() if trace else None
        self._scripts = dict(scripts or {})
        self._plans = {}
        self._programs = {}
        self._scratch = {}
        #: The plan the most recent collective ran (for inspection and drawing).
        self.last_plan = None

    def _adopt(self, parent, topology):
        """Fill a communicator mpi4py made (Dup, Clone) or one derived from ``parent``."""
        wire = _private_dup(self)
        self._setup(wire, topology, parent.family, parent.level, parent.policy,
                    parent.options, parent.validate, parent.tracer is not None,
                    {k: v for k, v in parent._scripts.items() if k[1] == wire.Get_size()})
        return self

    # ------------------------------------------------------------ communicators
    @property
    def mpi_comm(self):
        """The private duplicate wacoll's plans run on (None once freed)."""
        return getattr(self, "_wire", None)

    def Free(self):
        """Free this communicator and wacoll's private duplicate (twice is harmless)."""
        wire = getattr(self, "_wire", None)
        if wire is None:
            return
        wire.Free()
        self._wire = None
        MPI.Intracomm.Free(self)

    def Dup(self, info=None):
        """A duplicate with the same topology and settings (collective)."""
        new = super().Dup() if info is None else super().Dup(info)
        return new._adopt(self, self.network)

    def Clone(self):
        """A duplicate with the same topology and settings (collective)."""
        return super().Clone()._adopt(self, self.network)

    def _derive(self, comm):
        """Wrap a new sub-communicator of this one, with its members' topology."""
        if comm == MPI.COMM_NULL:
            return comm
        members = comm.allgather(self.Get_rank())
        new = MPI.Intracomm.__new__(type(self), comm)
        return new._adopt(self, self.network.restrict(members))

    def Split(self, color=0, key=0):
        """Split by ``color``; each part is a wacoll communicator (collective)."""
        return self._derive(super().Split(color, key))

    def Split_type(self, split_type, key=0, info=MPI.INFO_NULL):
        """Split by type (e.g. shared memory); each part is a wacoll communicator."""
        return self._derive(super().Split_type(split_type, key, info))

    def Create(self, group):
        """A wacoll communicator over ``group`` (collective over this one)."""
        return self._derive(super().Create(group))

    def Create_group(self, group, tag=0):
        """A wacoll communicator over ``group`` (collective over its members)."""
        return self._derive(super().Create_group(group, tag))

    # ------------------------------------------------------------- collectives
    def Barrier(self, *, family=None, **options):
        """Synchronise all ranks."""
        self._collective(calls.barrier, (), family, options)

    def Bcast(self, buf, root=0, *, family=None, **options):
        """Broadcast ``buf`` from ``root`` to every rank."""
        self._collective(calls.bcast, (buf, root), family, options)

    def Scatter(self, sendbuf, recvbuf, root=0, *, family=None, **options):
        """Send block ``i`` of the root's ``sendbuf`` to rank ``i``."""
        self._collective(calls.scatter, (sendbuf, recvbuf, root), family, options)

    def Scatterv(self, sendbuf, recvbuf, root=0, *, family=None, **options):
        """Send ``counts[i]`` elements at ``displs[i]`` of the root's buffer to rank i."""
        self._collective(calls.scatterv, (sendbuf, recvbuf, root), family, options)

    def Gather(self, sendbuf, recvbuf, root=0, *, family=None, **options):
        """Collect every rank's ``sendbuf`` in rank order at ``root``."""
        self._collective(calls.gather, (sendbuf, recvbuf, root), family, options)

    def Gatherv(self, sendbuf, recvbuf, root=0, *, family=None, **options):
        """Collect ``counts[i]`` elements from rank ``i`` at ``displs[i]`` at the root."""
        self._collective(calls.gatherv, (sendbuf, recvbuf, root), family, options)

    def Allgather(self, sendbuf, recvbuf, *, family=None, **options):
        """Every rank collects every rank's ``sendbuf`` in rank order."""
        self._collective(calls.allgather, (sendbuf, recvbuf), family, options)

    def Allgatherv(self, sendbuf, recvbuf, *, family=None, **options):
        """Every rank collects ``counts[i]`` elements of rank ``i`` at ``displs[i]``."""
        self._collective(calls.allgatherv, (sendbuf, recvbuf), family, options)

    def Alltoall(self, sendbuf, recvbuf, *, family=None, **options):
        """Rank ``i`` sends its ``j``-th block to rank ``j``, which stores it ``i``-th."""
        self._collective(calls.alltoall, (sendbuf, recvbuf), family, options)

    def Alltoallv(self, sendbuf, recvbuf, *, family=None, **options):
        """Rank ``i`` sends ``sendcounts[j]`` elements to ``j`` (vector all-to-all)."""
        self._collective(calls.alltoallv, (sendbuf, recvbuf), family, options)

    def Reduce(self, sendbuf, recvbuf, op=MPI.SUM, root=0, *, family=None, level=None,
               **options):
        """Combine every rank's ``sendbuf`` with ``op`` into the root's ``recvbuf``."""
        self._collective(calls.reduce, (sendbuf, recvbuf, op, root), family, options,
                         level)

    def Allreduce(self, sendbuf, recvbuf, op=MPI.SUM, *, family=None, level=None,
                  **options):
        """Combine every rank's ``sendbuf`` with ``op`` into every ``recvbuf``."""
        self._collective(calls.allreduce, (sendbuf, recvbuf, op), family, options, level)

    def Scan(self, sendbuf, recvbuf, op=MPI.SUM, *, family=None, level=None, **options):
        """Rank ``i`` receives the combination of ranks ``0..i``."""
        self._collective(calls.scan, (sendbuf, recvbuf, op), family, options, level)

    def Exscan(self, sendbuf, recvbuf, op=MPI.SUM, *, family=None, level=None,
               **options):
        """Rank ``i > 0`` receives the combination of ranks ``0..i-1``."""
        self._collective(calls.exscan, (sendbuf, recvbuf, op), family, options, level)

    def Reduce_scatter_block(self, sendbuf, recvbuf, op=MPI.SUM, *, family=None,
                             level=None, **options):
        """Combine, then give rank ``i`` the ``i``-th block of ``recvbuf``'s size."""
        self._collective(calls.reduce_scatter_block, (sendbuf, recvbuf, op), family,
                         options, level)

    def Reduce_scatter(self, sendbuf, recvbuf, recvcounts=None, op=MPI.SUM, *,
                       family=None, level=None, **options):
        """Combine, then give rank ``i`` ``recvcounts[i]`` elements of the result."""
        self._collective(calls.reduce_scatter, (sendbuf, recvbuf, recvcounts, op),
                         family, options, level)

    # ------------------------------------------------------------- object collectives
    # mpi4py's lower-case (pickle-based) collectives, run over wacoll plans: see
    # wacoll.mpi.objects for the frames, the reduction order and the error flags.
    def barrier(self, *, family=None, **options):
        """Synchronise all ranks (mpi4py's ``barrier``)."""
        return objects.barrier(self, family=family, **options)

    def bcast(self, obj, root=0, *, family=None, **options):
        """The root's ``obj`` on every rank (mpi4py's ``bcast``)."""
        return objects.bcast(self, obj, root, family=family, **options)

    def gather(self, sendobj, root=0, *, family=None, **options):
        """Every rank's ``sendobj`` in a list at the root (mpi4py's ``gather``)."""
        return objects.gather(self, sendobj, root, family=family, **options)

    def scatter(self, sendobj, root=0, *, family=None, **options):
        """Item ``i`` of the root's ``sendobj`` on rank ``i`` (mpi4py's ``scatter``)."""
        return objects.scatter(self, sendobj, root, family=family, **options)

    def allgather(self, sendobj, *, family=None, **options):
        """Every rank's ``sendobj`` in a list on every rank (mpi4py's ``allgather``)."""
        return objects.allgather(self, sendobj, family=family, **options)

    def alltoall(self, sendobj, *, family=None, **options):
        """Item ``j`` of rank ``i``'s ``sendobj`` as item ``i`` on rank ``j``."""
        return objects.alltoall(self, sendobj, family=family, **options)

    def reduce(self, sendobj, op=MPI.SUM, root=0, *, family=None, level=None, **options):
        """``op`` over every rank's ``sendobj`` at the root (mpi4py's ``reduce``)."""
        return objects.reduce(self, sendobj, op, root, family=family, level=level,
                              **options)

    def allreduce(self, sendobj, op=MPI.SUM, *, family=None, level=None, **options):
        """``op`` over every rank's ``sendobj`` on every rank (mpi4py's ``allreduce``)."""
        return objects.allreduce(self, sendobj, op, family=family, level=level, **options)

    def scan(self, sendobj, op=MPI.SUM, *, family=None, level=None, **options):
        """On rank ``i``, ``op`` over ranks ``0..i`` (mpi4py's ``scan``)."""
        return objects.scan(self, sendobj, op, family=family, level=level, **options)

    def exscan(self, sendobj, op=MPI.SUM, *, family=None, level=None, **options):
        """On rank ``i > 0``, ``op`` over ranks ``0..i-1`` (mpi4py's ``exscan``)."""
        return objects.exscan(self, sendobj, op, family=family, level=level, **options)

    # ------------------------------------------------------------- tracing
    def write_trace(self, path):
        """Gather every rank's trace records; rank 0 writes a Chrome trace file.

        Collective. Open the file in Perfetto or chrome://tracing: one track per rank.
        """
        from wacoll.mpi.trace import write_chrome_trace

        if self.tracer is None:
            raise WacollError("tracing is off: create the Comm with trace=True")
        records = self._wire.gather(self.tracer.records, root=0)
        if self.Get_rank() == 0:
            write_chrome_trace(records, path)

    # ------------------------------------------------------------- the machinery
    def _collective(self, reader, args, family, options, level=None):
        """Read, agree on, select, lower and execute one collective call.

        With tracing on, each phase is recorded as a ``phase`` event (``arguments``,
        ``agreement``, ``plan``, ``lower``, ``execute``) inside the call's
        ``operation`` event: the public way to see where a call's time goes.
        """
        if getattr(self, "_wire", None) is None:
            raise WacollError("this wacoll.Comm has been freed")
        tracer = self.tracer
        clock = tracer.clock if tracer else None
        t0 = clock() if clock else 0.0
        op = reader.__name__
        if op in _REDUCTIONS:
            reader = functools.partial(reader, level=level, default_level=self.level)
        try:
            prepared, error = reader(self._place, *args), None
        except WacollError as exc:
            prepared, error = None, exc
        if prepared is None:
            sig = Signature("error")
        else:
            sig = Signature(op, prepared.root, prepared.count,
                            None if prepared.dtype is None else prepared.dtype.str,
                            prepared.level, calls.operator_name(prepared.reduce_op),
                            family, tuple(sorted(options.items())))
        check = VECTOR_CHECKS.get(op)
        t1 = clock() if clock else 0.0
        infos = agree(self._wire, error, sig,
                      None if prepared is None else prepared.vector_info,
                      exchange=check is not None, validate=self.validate)
        if check is not None:
            prepared.counts = check(prepared.root, infos)
        t2 = clock() if clock else 0.0
        plan = self._plan(prepared, family, options)
        self.last_plan = plan
        t3 = clock() if clock else 0.0
        program = self._program(plan, prepared)
        t4 = clock() if clock else 0.0
        execute(program, self._wire, prepared.inbuf, prepared.outbuf,
                op=prepared.reduce_op, tracer=tracer, scratch=self._scratch)
        if tracer:
            t5 = clock()
            for name, start, end in (("arguments", t0, t1), ("agreement", t1, t2),
                                     ("plan", t2, t3), ("lower", t3, t4),
                                     ("execute", t4, t5)):
                tracer.record(name, "phase", start, end)
            tracer.record(f"{plan.op} ({plan.family}/{plan.algorithm})", "operation", t0,
                          t5)

    def _plan(self, prepared, family, options):
        """The proved plan for a call: a script's, or the selection policy's (cached)."""
        call = Call(prepared.op, count=prepared.count, counts=prepared.counts,
                    root=prepared.root, level=prepared.level,
                    itemsize=1 if prepared.dtype is None else prepared.dtype.itemsize)
        if (family or self.family) == "scripts":
            script = self._scripts.get((call.op, self._place.size))
            if script is not None:
                key = ("script", call)
                if key not in self._plans:
                    self._plans[key] = adapt_script(script, call)
                if self._plans[key] is not None:
                    return self._plans[key]
        key = (call, family, tuple(sorted(options.items())))
        plan = self._plans.get(key)
        if plan is None:
            selection = select(call, self.network,
                               family=None if family == "scripts" else family,
                               options=options,
                               comm_family=None if self.family == "scripts"
                               else self.family,
                               comm_options=self.options, policy=self.policy)
            plan = self._plans[key] = selection.build(self.network)
        return plan

    def _program(self, plan, prepared):
        """This rank's lowered program of ``plan`` for the call's buffer layout (cached)."""
        key = (id(plan), _layout_key(prepared.in_offsets),
               _layout_key(prepared.out_offsets))
        entry = self._programs.get(key)
        if entry is None or entry[0] is not plan:
            entry = self._programs[key] = (plan, lower(plan, self._place.rank,
                                                       prepared.in_offsets,
                                                       prepared.out_offsets))
        return entry[1]

    # ------------------------------------------------------------- scripts
    def _load_scripts(self, path):
        from wacoll.plans import scripts

        found = {}
        error = None
        if path:
            try:
                for plan in scripts.load_all(path):
                    found[(plan.op, plan.size)] = plan
            except WacollError as exc:
                error = exc
        # the same plans everywhere: compare their text, not just their names
        digest = [(f"{op}/{size}", zlib.crc32(scripts.to_sexpr(plan).encode()))
                  for (op, size), plan in sorted(found.items())]
        agree(self._wire, error, Signature("scripts", options=tuple(digest)),
              validate=True)
        self._scripts = found


_REDUCTIONS = ("reduce", "allreduce", "scan", "exscan", "reduce_scatter_block",
               "reduce_scatter")


def _private_dup(comm):
    """A duplicate of ``comm`` as a plain ``MPI.Intracomm`` (mpi4py's Dup keeps the
    subclass, whose collectives would call back into wacoll)."""
    return MPI.Intracomm(MPI.Intracomm.Dup(comm))


def _layout_key(offsets):
    return None if offsets is None else tuple(sorted(offsets.items()))

