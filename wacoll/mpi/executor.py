"""Run one rank's lowered program over mpi4py, with the Cython kernels.

The executor knows nothing of MagPIe or FNF: it runs whatever lowered program
(:func:`wacoll.plans.lower`) it is given; lowering proves the plan first. Execution is dataflow over non-blocking point-to-point
calls on the communicator it is handed (``wacoll.Comm`` passes its private duplicate):

1. every receive of the program is posted at the start, in program order (MPI matches
   the k-th message from a peer with the k-th receive posted for it, as the plan
   assumes); a receive lands directly in its destination when no earlier step touches
   those blocks, else in a temporary buffer;
2. the steps then run in program order: a send is posted as soon as the rank reaches
   it (its data is final by then), a receive waits for its message, a combine waits
   for the sends still reading the blocks it overwrites.

Because every receive is posted before any rank waits, a send never waits for its
receiver to reach a program point; the only waits are the plan's own data
dependencies, which the checker proved acyclic. So a proved plan cannot deadlock here.

Contiguous blocks travel without copies; scattered blocks are packed and unpacked.
Consecutive ``recv_combine`` steps of one arrival-order group are combined in the
order their messages arrive.

Examples
--------
Run under ``mpiexec -n 3 python -c ...``; on one process::

    >>> import numpy as np
    >>> from mpi4py import MPI
    >>> from wacoll import Topology
    >>> from wacoll.plans import build
    >>> from wacoll.mpi.executor import run_program
    >>> plan = build("allreduce", Topology.single(1), "magpie", count=4)
    >>> out = np.zeros(4)
    >>> run_program(plan, MPI.COMM_SELF, np.arange(4.0), out, op="sum")
    >>> out.tolist()
    [0.0, 1.0, 2.0, 3.0]
"""

from __future__ import annotations

import numpy as np

from wacoll import _kernels
from wacoll.errors import BufferMismatchError, PlanError
from wacoll.mpi.trace import Tracer
from wacoll.plans.lower import lower

__all__ = ["execute", "run_program", "Tracer", "TAG"]

#: The tag of every message wacoll sends on its private communicator.
TAG = 0x7AC0


def _gather(buf, runs, n, dtype, index=None):
    """The elements of ``runs`` of ``buf``, back to back (a view when one run)."""
    if len(runs) == 1:
        start, stop = runs[0]
        return buf[start:stop]
    if not runs:
        return np.empty(0, dtype)
    if index is not None:
        out = np.empty(n, dtype)
        _kernels.pack(buf, index[0], index[1], out)
        return out
    return np.concatenate([buf[a:b] for a, b in runs])


def _scatter(data, buf, runs, index=None):
    """Write the back-to-back ``data`` into ``runs`` of ``buf``."""
    if index is not None:
        _kernels.unpack(data, index[0], index[1], buf)
        return
    at = 0
    for a, b in runs:
        buf[a:b] = data[at:at + b - a]
        at += b - a


def _combine(op, data, target, runs, side):
    """Combine the packed ``data`` into the ``runs`` of ``target`` on ``side``."""
    at = 0
    for a, b in runs:
        _kernels.reduce_into(op, data[at:at + b - a], target[a:b], side=side)
        at += b - a


def _check_fits(name, array, extent):
    size = 0 if array is None else array.size
    if size < extent:
        raise BufferMismatchError(f"{name} has {size} elements; the plan needs {extent}")


def run_program(plan, comm, inbuf, outbuf, *, op=None, in_offsets=None, out_offsets=None,
                tracer=None):
    """Lower and execute this rank's program of ``plan`` on ``comm``.

    A convenience for one-off runs; a caller that repeats a call keeps the
    :func:`~wacoll.plans.lower` result and calls :func:`execute`.

    Parameters
    ----------
    plan : Plan
        A plan for ``comm.Get_size()`` ranks; it is proved first (cached).
    comm : mpi4py.MPI.Intracomm
        The communicator to run on; ``wacoll.Comm`` passes a private duplicate.
    inbuf, outbuf : numpy.ndarray or None
        1-D contiguous arrays of one dtype: the user's send and receive buffers.
    op : str or mpi4py.MPI.Op, optional
        The reduction operator of reduction plans.
    in_offsets, out_offsets : dict, optional
        Element offset of each block in ``inbuf`` / ``outbuf``; by default the blocks
        the operation places there, packed in order.
    tracer : Tracer, optional
        Records every step when given.
    """
    size = comm.Get_size()
    if size != plan.size:
        raise PlanError(f"the plan is for {plan.size} ranks; the communicator has {size}")
    program = lower(plan, comm.Get_rank(), in_offsets, out_offsets)
    execute(program, comm, inbuf, outbuf, op=op, tracer=tracer)


def execute(program, comm, inbuf, outbuf, *, op=None, tracer=None, scratch=None):
    """Execute a lowered ``program`` on ``comm`` over ``inbuf`` and ``outbuf``.

    Parameters
    ----------
    program : wacoll.plans.Program
        This rank's lowered program.
    comm : mpi4py.MPI.Intracomm
    inbuf, outbuf : numpy.ndarray or None
        1-D contiguous arrays of one dtype.
    op : str or mpi4py.MPI.Op, optional
        The reduction operator of reduction plans.
    tracer : Tracer, optional
        Records every step when given.
    scratch : dict, optional
        Reusable scratch arrays by buffer name (filled on first use): a caller that
        repeats a call passes the same dict to reuse the memory.
    """
    from mpi4py import MPI

    _check_fits("inbuf", inbuf, program.in_extent)
    _check_fits("outbuf", outbuf, program.out_extent)
    dtype = outbuf.dtype if outbuf is not None else (
        inbuf.dtype if inbuf is not None else np.dtype(np.uint8))
    bufs = {"in": inbuf, "out": outbuf}
    for name, n in program.scratch_sizes.items():
        if scratch is None:
            bufs[name] = np.empty(n, dtype)
            continue
        held = scratch.get(name)
        if held is None or held.dtype != dtype or held.size < n:
            held = scratch[name] = np.empty(n, dtype)
        bufs[name] = held[:n]
    for name in ("in", "out"):
        if bufs[name] is None:
            bufs[name] = np.empty(0, dtype)
    clock = tracer.clock if tracer else None
    steps = program.steps

    # 1. post every receive up front, in program order
    recv_reqs, recv_data = {}, {}
    for i, step in enumerate(steps):
        if step.kind not in ("recv", "recv_combine"):
            continue
        dst = step.dst
        if step.direct and dst[1]:
            start, stop = dst[1][0]
            target = bufs[dst[0]][start:stop]
        elif step.direct:
            target = np.empty(0, dtype)
        else:
            target = np.empty(step.elements, dtype)
        recv_data[i] = target
        recv_reqs[i] = comm.Irecv(target, source=step.peer, tag=TAG)

    # 2. run the steps in program order
    readers = {}  # (buffer, run start) -> send requests still reading it
    sends = []

    def before_write(buf, runs):
        # a combine or receive may overwrite data a posted send still reads
        if not readers:
            return
        for start, stop in runs:
            for key in [k for k in readers if k[0] == buf and start < k[2] and k[1] < stop]:
                MPI.Request.Waitall(readers.pop(key))

    def finish_recv(i):
        step = steps[i]
        data = recv_data.pop(i)
        dst = step.dst
        if step.kind == "recv":
            if not step.direct:
                before_write(dst[0], dst[1])
                _scatter(data, bufs[dst[0]], dst[1], step.dst_index)
            return
        before_write(dst[0], dst[1])
        _combine(op, data, bufs[dst[0]], dst[1], step.side)

    i = 0
    while i < len(steps):
        step = steps[i]
        t0 = clock() if clock else 0.0
        kind = step.kind
        if kind == "send":
            src = step.src
            data = _gather(bufs[src[0]], src[1], step.elements, dtype, step.src_index)
            req = comm.Isend(data, dest=step.peer, tag=TAG)
            sends.append(req)
            for start, stop in src[1]:
                readers.setdefault((src[0], start, stop), []).append(req)
        elif kind == "recv_combine" and step.group:
            j = i
            while j < len(steps) and steps[j].kind == "recv_combine" and \
                    steps[j].group == step.group:
                j += 1
            group = list(range(i, j))
            reqs = [recv_reqs.pop(k) for k in group]
            for _ in group:
                idx = MPI.Request.Waitany(reqs)
                finish_recv(group[idx])
                reqs[idx] = MPI.REQUEST_NULL
            if tracer:
                tracer.record(f"group of {len(group)}", "step", t0, clock(), step=step.index)
            i = j
            continue
        elif kind in ("recv", "recv_combine"):
            recv_reqs.pop(i).Wait()
            finish_recv(i)
        elif kind == "copy":
            src, dst = step.src, step.dst
            data = _gather(bufs[src[0]], src[1], step.elements, dtype, step.src_index)
            before_write(dst[0], dst[1])
            _scatter(data.copy() if src[0] == dst[0] else data, bufs[dst[0]], dst[1],
                     step.dst_index)
        else:  # combine
            src, dst = step.src, step.dst
            data = _gather(bufs[src[0]], src[1], step.elements, dtype, step.src_index)
            before_write(dst[0], dst[1])
            _combine(op, data, bufs[dst[0]], dst[1], step.side)
        if tracer:
            tracer.record(step.label, "step", t0, clock(), step=step.index, peer=step.peer,
                          elements=step.elements)
        i += 1
    MPI.Request.Waitall(sends)
