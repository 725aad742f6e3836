"""``wacoll.Comm``: mpi4py's collective methods, run by topology-aware plans.

Swap an mpi4py communicator's collectives for wacoll's with one line::

    from mpi4py import MPI
    import wacoll
    comm = wacoll.Comm(MPI.COMM_WORLD)          # topology: one cluster per node
    comm.Allreduce(sendbuf, recvbuf, op=MPI.SUM)  # same names, signatures, semantics

Each call (1) reads the buffer specifications as mpi4py does, (2) agrees with the
other ranks that every rank's arguments are valid and describe the same operation --
so bad input raises the same error on every rank instead of hanging -- (3) picks a
plan (cached per operation, root, counts, datatype, level and options), which the
checker has proved, and (4) runs it on a private duplicate of the communicator.

Algorithm choice: the **magpie** family by default when the topology has several
clusters, the **mpich** family (single-level algorithms) on one cluster -- except that,
as MPICH itself does, vectors of ``large_message`` bytes or more are broadcast by van
de Geijn's scatter-allgather and all-reduced by Rabenseifner's reduce-scatter-allgather
(where the level allows) on one cluster (the gridmpi family's flat algorithms); any family
per communicator or per call (``family="tree", tree="lam"``, ``family="gridmpi", n=4``,
...), and **scripts**: plan files loaded at start-up (``scripts=`` or the
``WACOLL_SCRIPTS`` environment variable) and selected by operation, size and root. A
communicator-level family that has no plan for an operation falls back to the default
family for it; a per-call ``family=`` that has none raises :class:`PlanError`.

Reductions follow the communicator's or the call's level: ``"strict"`` (default,
bit-for-bit reproducible whatever the topology), ``"associative"`` or
``"commutative"``. Predefined operators that are exact in any order (integer and
boolean operands, MIN, MAX, logical and bitwise operators) run at the commutative
level automatically: their results are the same bits in any order.
"""

from __future__ import annotations

import inspect
import math
import os
import zlib

import numpy as np

from wacoll import _kernels
from wacoll.mpi.agreement import VECTOR_CHECKS, agree
from wacoll.mpi.buffers import parse_buffer, parse_vbuffer
from wacoll.errors import BufferMismatchError, PlanError, TopologyError, WacollError
from wacoll.mpi.executor import Tracer, run_program
from wacoll.plans import LEVELS, build, builders
from wacoll.plans.operations import block_counts
from wacoll.mpi.discover import topology_from_comm
from wacoll.topology import Topology

__all__ = ["Comm"]

#: The most segments a vector is cut into for pipelining.
MAX_SEGMENTS = 8
_EXACT_OPS = ("MIN", "MAX", "LAND", "LOR", "LXOR", "BAND", "BOR", "BXOR")



def _mpi():
    from mpi4py import MPI

    return MPI


class _Prepared:
    """One rank's view of a call, ready to run once all ranks agree."""

    __slots__ = ("op", "root", "count", "counts", "dtype", "inbuf", "outbuf", "in_offsets",
                 "out_offsets", "reduce_op", "level", "info")

    def __init__(self, op, **fields):
        self.op = op
        for name in self.__slots__[1:]:
            setattr(self, name, fields.get(name))


class Comm:
    """An mpi4py intracommunicator whose collectives run wacoll plans.

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm
        The communicator to wrap; wacoll works on a private duplicate.
    topology : Topology, optional
        Which rank is in which cluster; by default :func:`wacoll.topology_from_comm`.
    family : str, optional
        Plan family for every call (default: magpie on several clusters, mpich on one);
        ``"scripts"`` selects loaded script plans.
    level : {"strict", "associative", "commutative"}
        Reduction level asserted for the whole communicator.
    threshold : int
        MagPIe's short/long message threshold for non-associative reductions (bytes).
    segment_size : int
        Cut broadcast and reduction vectors into segments of about this many bytes
        (at most :data:`MAX_SEGMENTS`) that pipeline through the plan's trees
        (0: never cut).
    large_message : int
        On one cluster, the vector size in bytes from which the default choice
        switches to the bandwidth-optimal flat algorithms (see above).
    scripts : str or path, optional
        A plan script file or a directory of them (default ``$WACOLL_SCRIPTS``).
    validate : bool
        Agree on valid arguments before every call (one small collective; on a
        wide-area grid that is one more wide-area latency per call). Without it a bad
        argument on one rank can leave the others waiting, as in MPI itself.
    trace : bool
        Record every operation and step; write them with :meth:`write_trace`.
    **options
        Family options, e.g. ``tree="lam"`` or ``n=4``.
    """

    def __init__(self, comm, topology=None, *, family=None, level="strict", threshold=512,
                 segment_size=262144, large_message=262144, scripts=None, validate=True,
                 trace=False, **options):
        MPI = _mpi()
        if not isinstance(comm, MPI.Comm) or comm == MPI.COMM_NULL:
            raise WacollError("wacoll.Comm wraps an mpi4py intracommunicator")
        if comm.Is_inter():
            raise WacollError("wacoll.Comm needs an intracommunicator; this one is an "
                              "inter-communicator")
        if level not in LEVELS:
            raise WacollError(f"level must be one of {LEVELS}, got {level!r}")
        self._comm = comm.Dup()
        self.size = self._comm.Get_size()
        self.rank = self._comm.Get_rank()
        self.level = level
        self.threshold = threshold
        self.segment_size = segment_size
        self.large_message = large_message
        self.validate = validate
        self.options = dict(options)
        self.tracer = Tracer() if trace else None
        self._plans = {}
        #: The plan the most recent collective ran (for inspection and drawing).
        self.last_plan = None
        if topology is None:
            topology = topology_from_comm(self._comm)
        elif not isinstance(topology, Topology):
            raise TopologyError("topology must be a wacoll.Topology")
        # Every rank must build the same plans: agree on everything that chooses them.
        agree(self._comm, None if topology.size == self.size else
              TopologyError(f"the topology has {topology.size} ranks; the "
                            f"communicator has {self.size}"),
              ("constructor", repr(topology.to_dict()), family, level, threshold,
               segment_size, large_message, repr(sorted(options.items())), validate),
              validate=True)
        self.topology = topology
        self.default_family = "magpie" if topology.nclusters > 1 else "mpich"
        self.family = family or self.default_family
        self._chosen = family is not None
        if self.family != "scripts":
            builders(self.family)  # validates the name on every rank alike
        self._scripts = {}
        scripts = scripts or os.environ.get("WACOLL_SCRIPTS") or None
        self._load_scripts(scripts)  # collective even without scripts: all ranks agree
        if self.family == "scripts" and not self._scripts:
            raise WacollError("family 'scripts' needs scripts= or $WACOLL_SCRIPTS")

    # ------------------------------------------------------------------ misc
    def Get_size(self):
        """The number of ranks."""
        return self.size

    def Get_rank(self):
        """This process's rank."""
        return self.rank

    @property
    def mpi_comm(self):
        """The private duplicate communicator wacoll runs on."""
        return self._comm

    def Free(self):
        """Free the private duplicate communicator."""
        if self._comm is not None:
            self._comm.Free()
            self._comm = None

    # ------------------------------------------------------------- collectives
    def Barrier(self, *, family=None, **options):
        """Synchronise all ranks."""
        self._call(lambda: _Prepared("barrier"), family, options)

    def Bcast(self, buf, root=0, *, family=None, **options):
        """Broadcast ``buf`` from ``root`` to every rank."""
        def prep():
            self._check_root(root)
            view, count = parse_buffer(buf, "buf")
            if self.rank != root:
                _writable(view, "buf")
            return _Prepared("bcast", root=root, count=count, dtype=view.dtype,
                             outbuf=view)
        self._call(prep, family, options)

    def Scatter(self, sendbuf, recvbuf, root=0, *, family=None, **options):
        """Send block ``i`` of the root's ``sendbuf`` to rank ``i``."""
        def prep():
            self._check_root(root)
            MPI = _mpi()
            inbuf = None
            if self.rank == root and recvbuf is MPI.IN_PLACE:
                inbuf, total = parse_buffer(sendbuf, "sendbuf")
                count = _split(total, self.size, "sendbuf")
                out = np.empty(count, inbuf.dtype)
            else:
                out, count = parse_buffer(recvbuf, "recvbuf")
                _writable(out, "recvbuf")
                if self.rank == root:
                    inbuf, total = parse_buffer(sendbuf, "sendbuf")
                    _need(total, count * self.size, "sendbuf")
                    _same_dtype(inbuf, out)
            return _Prepared("scatter", root=root, count=count, dtype=out.dtype,
                             inbuf=inbuf, outbuf=out)
        self._call(prep, family, options)

    def Scatterv(self, sendbuf, recvbuf, root=0, *, family=None, **options):
        """Send ``counts[i]`` elements at ``displs[i]`` of the root's buffer to rank i."""
        def prep():
            self._check_root(root)
            MPI = _mpi()
            inbuf = offsets = counts = None
            if self.rank == root:
                vb = parse_vbuffer(sendbuf, self.size, "sendbuf")
                inbuf, counts = vb.view, vb.counts
                offsets = dict(enumerate(vb.displs))
            if self.rank == root and recvbuf is MPI.IN_PLACE:
                out = np.empty(counts[root], inbuf.dtype)
            else:
                out, _ = parse_buffer(recvbuf, "recvbuf")
                _writable(out, "recvbuf")
                if inbuf is not None:
                    _same_dtype(inbuf, out)
            return _Prepared("scatterv", root=root, dtype=out.dtype, inbuf=inbuf,
                             outbuf=out, in_offsets=offsets,
                             info=(out.size, counts))
        self._call(prep, family, options, vector=VECTOR_CHECKS["scatterv"])

    def Gather(self, sendbuf, recvbuf, root=0, *, family=None, **options):
        """Collect every rank's ``sendbuf`` in rank order at ``root``."""
        def prep():
            self._check_root(root)
            MPI = _mpi()
            out = None
            if self.rank == root:
                out, total = parse_buffer(recvbuf, "recvbuf")
                _writable(out, "recvbuf")
            if self.rank == root and sendbuf is MPI.IN_PLACE:
                count = _split(total, self.size, "recvbuf")
                inbuf = out[root * count:(root + 1) * count].copy()
            else:
                inbuf, count = parse_buffer(sendbuf, "sendbuf")
                if out is not None:
                    _need(total, count * self.size, "recvbuf")
                    _same_dtype(inbuf, out)
            return _Prepared("gather", root=root, count=count, dtype=inbuf.dtype,
                             inbuf=inbuf, outbuf=out)
        self._call(prep, family, options)

    def Gatherv(self, sendbuf, recvbuf, root=0, *, family=None, **options):
        """Collect ``counts[i]`` elements from rank ``i`` at ``displs[i]`` at the root."""
        def prep():
            self._check_root(root)
            MPI = _mpi()
            out = offsets = counts = None
            if self.rank == root:
                vb = parse_vbuffer(recvbuf, self.size, "recvbuf")
                out, counts = vb.view, vb.counts
                _writable(out, "recvbuf")
                offsets = dict(enumerate(vb.displs))
            if self.rank == root and sendbuf is MPI.IN_PLACE:
                d = offsets[root]
                inbuf = out[d:d + counts[root]].copy()
            else:
                inbuf, _ = parse_buffer(sendbuf, "sendbuf")
                if out is not None:
                    _same_dtype(inbuf, out)
            return _Prepared("gatherv", root=root, dtype=inbuf.dtype, inbuf=inbuf,
                             outbuf=out, out_offsets=offsets, info=(inbuf.size, counts))
        self._call(prep, family, options, vector=VECTOR_CHECKS["gatherv"])

    def Allgather(self, sendbuf, recvbuf, *, family=None, **options):
        """Every rank collects every rank's ``sendbuf`` in rank order."""
        def prep():
            MPI = _mpi()
            out, total = parse_buffer(recvbuf, "recvbuf")
            _writable(out, "recvbuf")
            if sendbuf is MPI.IN_PLACE:
                count = _split(total, self.size, "recvbuf")
                inbuf = out[self.rank * count:(self.rank + 1) * count].copy()
            else:
                inbuf, count = parse_buffer(sendbuf, "sendbuf")
                _need(total, count * self.size, "recvbuf")
                _same_dtype(inbuf, out)
            return _Prepared("allgather", count=count, dtype=out.dtype, inbuf=inbuf,
                             outbuf=out)
        self._call(prep, family, options)

    def Allgatherv(self, sendbuf, recvbuf, *, family=None, **options):
        """Every rank collects ``counts[i]`` elements of rank ``i`` at ``displs[i]``."""
        def prep():
            MPI = _mpi()
            vb = parse_vbuffer(recvbuf, self.size, "recvbuf")
            out = vb.view
            _writable(out, "recvbuf")
            if sendbuf is MPI.IN_PLACE:
                d = vb.displs[self.rank]
                inbuf = out[d:d + vb.counts[self.rank]].copy()
            else:
                inbuf, _ = parse_buffer(sendbuf, "sendbuf")
                _same_dtype(inbuf, out)
            if inbuf.size != vb.counts[self.rank]:
                raise BufferMismatchError(f"sendbuf has {inbuf.size} elements; recvcounts "
                                          f"says {vb.counts[self.rank]} for this rank")
            return _Prepared("allgatherv", dtype=out.dtype, inbuf=inbuf, outbuf=out,
                             out_offsets=dict(enumerate(vb.displs)), counts=vb.counts,
                             info=vb.counts)
        self._call(prep, family, options, vector=VECTOR_CHECKS["allgatherv"])

    def Alltoall(self, sendbuf, recvbuf, *, family=None, **options):
        """Rank ``i`` sends its ``j``-th block to rank ``j``, which stores it ``i``-th."""
        def prep():
            MPI = _mpi()
            out, total = parse_buffer(recvbuf, "recvbuf")
            _writable(out, "recvbuf")
            count = _split(total, self.size, "recvbuf")
            if sendbuf is MPI.IN_PLACE:
                inbuf = out.copy()
            else:
                inbuf, stotal = parse_buffer(sendbuf, "sendbuf")
                _need(stotal, total, "sendbuf")
                _same_dtype(inbuf, out)
            return _Prepared("alltoall", count=count, dtype=out.dtype, inbuf=inbuf,
                             outbuf=out)
        self._call(prep, family, options)

    def Alltoallv(self, sendbuf, recvbuf, *, family=None, **options):
        """Rank ``i`` sends ``sendcounts[j]`` elements to ``j`` (vector all-to-all)."""
        def prep():
            MPI = _mpi()
            P, me = self.size, self.rank
            rv = parse_vbuffer(recvbuf, P, "recvbuf")
            _writable(rv.view, "recvbuf")
            if sendbuf is MPI.IN_PLACE:
                sv_view, scounts, sdispls = rv.view.copy(), rv.counts, rv.displs
            else:
                sv = parse_vbuffer(sendbuf, P, "sendbuf")
                _same_dtype(sv.view, rv.view)
                sv_view, scounts, sdispls = sv.view, sv.counts, sv.displs
            return _Prepared("alltoallv", dtype=rv.view.dtype, inbuf=sv_view,
                             outbuf=rv.view,
                             in_offsets={me * P + j: sdispls[j] for j in range(P)},
                             out_offsets={j * P + me: rv.displs[j] for j in range(P)},
                             info=(scounts, rv.counts))
        self._call(prep, family, options, vector=VECTOR_CHECKS["alltoallv"])

    def Reduce(self, sendbuf, recvbuf, op=None, root=0, *, family=None, level=None,
               **options):
        """Combine every rank's ``sendbuf`` with ``op`` into the root's ``recvbuf``."""
        def prep():
            self._check_root(root)
            return self._reduction("reduce", sendbuf, recvbuf, op, level, root)
        self._call(prep, family, options)

    def Allreduce(self, sendbuf, recvbuf, op=None, *, family=None, level=None, **options):
        """Combine every rank's ``sendbuf`` with ``op`` into every ``recvbuf``."""
        self._call(lambda: self._reduction("allreduce", sendbuf, recvbuf, op, level),
                   family, options)

    def Scan(self, sendbuf, recvbuf, op=None, *, family=None, level=None, **options):
        """Rank ``i`` receives the combination of ranks ``0..i``."""
        self._call(lambda: self._reduction("scan", sendbuf, recvbuf, op, level),
                   family, options)

    def Exscan(self, sendbuf, recvbuf, op=None, *, family=None, level=None, **options):
        """Rank ``i > 0`` receives the combination of ranks ``0..i-1``."""
        self._call(lambda: self._reduction("exscan", sendbuf, recvbuf, op, level),
                   family, options)

    def Reduce_scatter_block(self, sendbuf, recvbuf, op=None, *, family=None, level=None,
                             **options):
        """Combine, then give rank ``i`` the ``i``-th block of ``recvbuf``'s size."""
        def prep():
            MPI = _mpi()
            out, count = parse_buffer(recvbuf, "recvbuf")
            _writable(out, "recvbuf")
            if sendbuf is MPI.IN_PLACE:
                count = _split(count, self.size, "recvbuf")
                inbuf = out.copy()
                out = out[:count]
            else:
                inbuf, total = parse_buffer(sendbuf, "sendbuf")
                _need(total, count * self.size, "sendbuf")
                _same_dtype(inbuf, out)
            prep_ = self._reduce_parts("reduce_scatter_block", inbuf, out, op, level)
            prep_.count = count
            return prep_
        self._call(prep, family, options)

    def Reduce_scatter(self, sendbuf, recvbuf, recvcounts=None, op=None, *, family=None,
                       level=None, **options):
        """Combine, then give rank ``i`` ``recvcounts[i]`` elements of the result."""
        def prep():
            MPI = _mpi()
            out, own = parse_buffer(recvbuf, "recvbuf")
            _writable(out, "recvbuf")
            counts = None
            if recvcounts is not None:
                counts = tuple(int(c) for c in recvcounts)
                if len(counts) != self.size or min(counts, default=0) < 0:
                    raise BufferMismatchError(f"recvcounts needs {self.size} counts >= 0")
            if sendbuf is MPI.IN_PLACE:
                inbuf = out.copy()
                if counts is None:
                    raise BufferMismatchError("MPI.IN_PLACE needs recvcounts")
                out = out[:counts[self.rank]]
            else:
                inbuf, _ = parse_buffer(sendbuf, "sendbuf")
                _same_dtype(inbuf, out)
            prep_ = self._reduce_parts("reduce_scatter", inbuf, out, op, level)
            prep_.info = (out.size if counts is None else counts[self.rank], counts,
                          inbuf.size)
            return prep_
        self._call(prep, family, options, vector=VECTOR_CHECKS["reduce_scatter"])

    # ------------------------------------------------------------- tracing
    def write_trace(self, path):
        """Gather every rank's trace records; rank 0 writes a Chrome trace file.

        Collective. Open the file in Perfetto or chrome://tracing: one track per rank.
        """
        from wacoll.mpi.trace import write_chrome_trace

        if self.tracer is None:
            raise WacollError("tracing is off: create the Comm with trace=True")
        records = self._comm.gather(self.tracer.records, root=0)
        if self.rank == 0:
            write_chrome_trace(records, path)

    # ------------------------------------------------------------- internals
    def _check_root(self, root):
        if isinstance(root, bool) or not isinstance(root, (int, np.integer)) or not (
                0 <= root < self.size):
            raise WacollError(f"root {root!r} is not a rank of 0..{self.size - 1}")

    def _reduction(self, opname, sendbuf, recvbuf, op, level, root=None):
        MPI = _mpi()
        out = None
        if opname != "reduce" or self.rank == root:
            out, ocount = parse_buffer(recvbuf, "recvbuf")
            _writable(out, "recvbuf")
        if sendbuf is MPI.IN_PLACE:
            if out is None:
                raise BufferMismatchError("MPI.IN_PLACE is for the root's sendbuf only")
            inbuf = out.copy()
        else:
            inbuf, _ = parse_buffer(sendbuf, "sendbuf")
            if out is not None:
                _need(ocount, inbuf.size, "recvbuf")
                _same_dtype(inbuf, out)
                out = out[:inbuf.size]
        prep = self._reduce_parts(opname, inbuf, out, op, level)
        prep.root = root
        prep.count = inbuf.size
        return prep

    def _reduce_parts(self, opname, inbuf, out, op, level):
        MPI = _mpi()
        op = MPI.SUM if op is None else op
        dtype = inbuf.dtype
        _kernels.check_op(op, dtype)
        level = self.level if level is None else level
        if level not in LEVELS:
            raise WacollError(f"level must be one of {LEVELS}, got {level!r}")
        commutes = _kernels.is_commutative(op)
        if level == "commutative" and not commutes:
            raise WacollError("level 'commutative' asserted for an operator that is not "
                              "commutative")
        if commutes and _exact(op, dtype):
            level = "commutative"
        return _Prepared(opname, dtype=dtype, inbuf=inbuf, outbuf=out, reduce_op=op,
                         level=level)

    def _call(self, prep, family, options, vector=None):
        if self._comm is None:
            raise WacollError("this wacoll.Comm has been freed")
        try:
            prepared = prep()
            error = None
        except WacollError as exc:
            prepared, error = None, exc
        if prepared is None:
            sig = ("error",)
        else:
            sig = (prepared.op, prepared.root, prepared.count,
                   None if prepared.dtype is None else prepared.dtype.str,
                   prepared.level, _op_name(prepared.reduce_op), family,
                   tuple(sorted(options.items())))
        infos = self._agree(error, sig, None if prepared is None or vector is None
                            else prepared.info, vector is not None)
        if vector is not None:
            vector(prepared, infos)
        self._run(prepared, sig, family, options)

    def _agree(self, error, sig, info=None, exchange=False):
        """Raise on every rank if any rank failed or the ranks disagree on ``sig``."""
        return agree(self._comm, error, sig, info, exchange=exchange,
                     validate=self.validate)

    def _plan(self, prepared, family, options):
        op = prepared.op
        if (family or self.family) == "scripts":
            plan = self._script_plan(prepared)
            if plan is not None:
                return plan
        fam, opts = self._family(prepared, family)
        table = builders(fam)
        opts = {**self.options, **opts}
        opts.update(options)
        key = (op, prepared.root, prepared.count, prepared.counts,
               None if prepared.dtype is None else prepared.dtype.itemsize,
               prepared.level, fam, tuple(sorted(opts.items())))
        plan = self._plans.get(key)
        if plan is not None:
            return plan
        fn = table[op]
        accepted = inspect.signature(fn).parameters
        kwargs = {k: v for k, v in opts.items() if k in accepted}
        unknown = sorted(set(options) - set(accepted))
        if unknown:
            raise PlanError(f"the {fam} family's {op} takes no option {unknown[0]!r}")
        if "threshold" in accepted and "threshold" not in kwargs:
            kwargs["threshold"] = self.threshold
        if prepared.root is not None:
            kwargs["root"] = prepared.root
        if prepared.level is not None:
            kwargs["level"] = prepared.level
        if prepared.dtype is not None:
            kwargs["itemsize"] = prepared.dtype.itemsize
        if prepared.counts is not None:
            kwargs["counts"] = prepared.counts
        elif prepared.count is not None:
            kwargs["count"] = prepared.count
        if self.segment_size and "segments" in accepted and prepared.count and \
                fam != "gridmpi":
            nbytes = prepared.count * prepared.dtype.itemsize
            # A few segments give most of the pipelining; many only add messages.
            kwargs["segments"] = max(1, min(prepared.count, MAX_SEGMENTS,
                                            math.ceil(nbytes / self.segment_size)))
        plan = build(op, self.topology, fam, **kwargs)
        plan.check()
        self._plans[key] = plan
        return plan

    def _family(self, prepared, family):
        """The family (and its extra options) that builds this call's plan."""
        if family and family != "scripts":
            if prepared.op not in builders(family):
                raise PlanError(f"the {family} family has no {prepared.op} plan")
            return family, {}
        if self._chosen and self.family != "scripts" and \
                prepared.op in builders(self.family):
            return self.family, {}
        return self._default_choice(prepared)

    def _default_choice(self, prepared):
        """The default family and options for a call (see the module docstring)."""
        fam = self.default_family
        if self.topology.nclusters > 1 or self.size < 3 or prepared.count is None:
            return fam, {}
        nbytes = prepared.count * prepared.dtype.itemsize
        if nbytes < self.large_message:
            return fam, {}
        if prepared.op == "bcast":
            return "gridmpi", {"algorithm": "flat-vandegeijn"}
        if prepared.op == "allreduce" and prepared.level != "strict":
            return "gridmpi", {"algorithm": "flat-rabenseifner"}
        return fam, {}

    def _run(self, prepared, sig, family, options):
        tracer = self.tracer
        t0 = tracer.clock() if tracer else 0.0
        plan = self._plan(prepared, family, options)
        self.last_plan = plan
        run_program(plan, self._comm, prepared.inbuf, prepared.outbuf,
                    op=prepared.reduce_op, in_offsets=prepared.in_offsets,
                    out_offsets=prepared.out_offsets, tracer=tracer)
        if tracer:
            tracer.record(f"{plan.op} ({plan.family}/{plan.algorithm})", "operation", t0,
                          tracer.clock())

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
        digest = [(key, zlib.crc32(scripts.to_sexpr(plan).encode()))
                  for key, plan in sorted(found.items())]
        agree(self._comm, error, ("scripts", repr(digest)), validate=True)
        self._scripts = found

    def _script_plan(self, prepared):
        import dataclasses

        plan = self._scripts.get((prepared.op, self.size))
        if plan is None or plan.root != prepared.root:
            return None  # no script for this call: the default family builds it
        if prepared.counts is not None:
            counts = block_counts(plan.op, self.size, counts=prepared.counts)
        else:
            counts = _layout_counts(plan, prepared.count)
        if counts is None:
            return None
        adapted = dataclasses.replace(
            plan, counts=counts, level=prepared.level if plan.level else None,
            itemsize=prepared.dtype.itemsize if prepared.dtype is not None else 1)
        adapted.check()
        return adapted


def _layout_counts(plan, count):
    """Re-cut ``count`` elements into a script plan's blocks (same block structure)."""
    from wacoll.plans.operations import spec

    layout = spec(plan.op).layout
    if layout == "none":
        return ()
    if count is None:
        return None
    if layout == "segments":
        n = plan.nblocks
        base, extra = divmod(count, n)
        return tuple(base + (1 if i < extra else 0) for i in range(n))
    return (count,) * plan.nblocks


def _exact(op, dtype):
    """Whether ``op`` gives the same bits in any order on ``dtype``."""
    name = _op_name(op)
    if name is None:
        return False
    if name in _EXACT_OPS:
        return True
    return name in ("SUM", "PROD") and dtype.kind in "biu"


def _op_name(op):
    if op is None:
        return None
    MPI = _mpi()
    for name in ("SUM", "PROD", "MIN", "MAX", "LAND", "LOR", "LXOR", "BAND", "BOR",
                 "BXOR"):
        if op == getattr(MPI, name):
            return name
    if isinstance(op, str):
        return op.upper()
    return "user-defined"


def _writable(view, role):
    if not view.flags.writeable:
        raise BufferMismatchError(f"{role} is read-only")


def _need(have, want, role):
    if have != want:
        raise BufferMismatchError(f"{role} has {have} elements; {want} are needed")


def _split(total, parts, role):
    if total % parts:
        raise BufferMismatchError(f"{role} has {total} elements, not a multiple of "
                                  f"{parts} ranks")
    return total // parts


def _same_dtype(a, b):
    if a.dtype != b.dtype:
        raise BufferMismatchError(f"sendbuf holds {a.dtype} but recvbuf holds {b.dtype}")
