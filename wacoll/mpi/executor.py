"""Run one rank's program of a proved plan over mpi4py, with the Cython kernels.

The executor knows nothing of MagPIe or FNF: it runs whatever plan it is given, after
the checker has proved it. Execution is dataflow over non-blocking point-to-point
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

from wacoll.errors import BufferMismatchError, PlanError
from wacoll.plans import operations as ops

__all__ = ["run_program", "default_offsets", "Tracer"]

#: The tag of every message wacoll sends on its private communicator.
TAG = 0x7AC0


def default_offsets(blocks, counts) -> dict:
    """Element offsets of ``blocks`` packed one after another in that order.

    Examples
    --------
    >>> default_offsets((2, 0), (5, 3, 4))
    {2: 0, 0: 4}
    """
    offsets, at = {}, 0
    for b in blocks:
        offsets[b] = at
        at += counts[b]
    return offsets


class Tracer:
    """Collects start and end times of a rank's operations and steps (PATHS's trace
    wrappers); :func:`wacoll.mpi.trace.write_chrome_trace` merges and writes them."""

    def __init__(self, clock=None):
        if clock is None:
            from mpi4py import MPI

            clock = MPI.Wtime
        self.clock = clock
        self.records = []

    def record(self, name, category, start, end, **args):
        """Add one complete event (seconds)."""
        self.records.append({"name": name, "cat": category, "start": start, "end": end,
                             "args": args})


def _runs(blocks, offsets, counts):
    """Merge ``blocks`` into contiguous (start, stop) element runs of one buffer."""
    runs = []
    for b in blocks:
        start = offsets[b]
        stop = start + counts[b]
        if runs and runs[-1][1] == start:
            runs[-1][1] = stop
        else:
            runs.append([start, stop])
    return [tuple(r) for r in runs]


class _Compiled:
    """A rank's program turned into buffer runs; cached on the plan per layout."""

    def __init__(self, plan, rank, in_offsets, out_offsets):
        counts = plan.counts
        program = plan.programs[rank]
        self.program = program
        scratch_blocks = {}
        for step in program:
            for buf in (step.src, step.dst):
                if buf is not None and buf not in ("in", "out"):
                    scratch_blocks.setdefault(buf, set()).update(step.blocks)
        self.offsets = {"in": in_offsets, "out": out_offsets}
        self.scratch_sizes = {}
        for buf, blocks in scratch_blocks.items():
            offs = default_offsets(sorted(blocks), counts)
            self.offsets[buf] = offs
            self.scratch_sizes[buf] = sum(counts[b] for b in blocks)
        self.steps = []
        touched = set()  # (buffer, block) slots touched by earlier steps
        for i, step in enumerate(program):
            n = sum(counts[b] for b in step.blocks)
            src = dst = None
            if step.src is not None:
                src = (step.src, _runs(step.blocks, self._offsets(step.src, rank), counts))
            if step.dst is not None:
                dst = (step.dst, _runs(step.blocks, self._offsets(step.dst, rank), counts))
            direct = (step.kind == "recv" and len(dst[1]) <= 1 and
                      not any((step.dst, b) in touched for b in step.blocks))
            self.steps.append((step, n, src, dst, direct))
            for buf in (step.src, step.dst):
                if buf is not None:
                    touched.update((buf, b) for b in step.blocks)

    def _offsets(self, buf, rank):
        offs = self.offsets.get(buf)
        if offs is None:
            raise PlanError(f"rank {rank}: the program uses buffer {buf!r} "
                            f"that has no layout")
        return offs


def _compiled(plan, rank, in_offsets, out_offsets):
    key = ("compiled", rank, tuple(sorted(in_offsets.items())),
           tuple(sorted(out_offsets.items())))
    comp = plan._cache.get(key)
    if comp is None:
        comp = _Compiled(plan, rank, in_offsets, out_offsets)
        plan._cache[key] = comp
    return comp


def _gather(buf, runs, n, dtype):
    if len(runs) == 1:
        start, stop = runs[0]
        return buf[start:stop]
    if not runs:
        return np.empty(0, dtype)
    return np.concatenate([buf[a:b] for a, b in runs])


def _scatter(data, buf, runs):
    at = 0
    for a, b in runs:
        buf[a:b] = data[at:at + b - a]
        at += b - a


def _combine(op, data, target, runs, side):
    """Combine the packed ``data`` into the ``runs`` of ``target`` on ``side``."""
    from wacoll import _kernels

    at = 0
    for a, b in runs:
        _kernels.reduce_into(op, data[at:at + b - a], target[a:b], side=side)
        at += b - a


def run_program(plan, comm, inbuf, outbuf, *, op=None, in_offsets=None, out_offsets=None,
                tracer=None):
    """Execute this rank's program of ``plan`` on ``comm``.

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
    from mpi4py import MPI

    plan.check()
    size, rank = comm.Get_size(), comm.Get_rank()
    if size != plan.size:
        raise PlanError(f"the plan is for {plan.size} ranks; the communicator has {size}")
    counts = plan.counts
    nb = plan.nblocks
    if in_offsets is None:
        in_offsets = default_offsets(ops.in_blocks(plan.op, size, plan.root, nb, rank),
                                     counts)
    if out_offsets is None:
        out_offsets = default_offsets(ops.out_blocks(plan.op, size, plan.root, nb, rank),
                                      counts)
    _check_fits("inbuf", inbuf, in_offsets, counts)
    _check_fits("outbuf", outbuf, out_offsets, counts)
    comp = _compiled(plan, rank, in_offsets, out_offsets)
    dtype = outbuf.dtype if outbuf is not None else (
        inbuf.dtype if inbuf is not None else np.dtype(np.uint8))
    bufs = {"in": inbuf, "out": outbuf}
    for name, n in comp.scratch_sizes.items():
        bufs[name] = np.empty(n, dtype)
    for name in ("in", "out"):
        if bufs[name] is None:
            bufs[name] = np.empty(0, dtype)
    clock = tracer.clock if tracer else None

    # 1. post every receive up front, in program order
    recv_reqs, recv_data = {}, {}
    for i, (step, n, _src, dst, direct) in enumerate(comp.steps):
        if step.kind not in ("recv", "recv_combine"):
            continue
        if direct and dst[1]:
            start, stop = dst[1][0]
            target = bufs[dst[0]][start:stop]
        elif direct:
            target = np.empty(0, dtype)
        else:
            target = np.empty(n, dtype)
        recv_data[i] = target
        recv_reqs[i] = comm.Irecv(target, source=step.peer, tag=TAG)

    # 2. run the steps in program order
    readers = {}  # (buffer, block) -> send requests still reading it
    sends = []

    def before_write(buf, blocks):
        for b in blocks:
            pending = readers.pop((buf, b), None)
            if pending:
                MPI.Request.Waitall(pending)

    def finish_recv(i):
        step, n, _src, dst, direct = comp.steps[i]
        data = recv_data.pop(i)
        if step.kind == "recv":
            if not direct:
                before_write(dst[0], step.blocks)
                _scatter(data, bufs[dst[0]], dst[1])
            return
        before_write(dst[0], step.blocks)
        _combine(op, data, bufs[dst[0]], dst[1], step.side)

    steps = comp.steps
    i = 0
    while i < len(steps):
        step, n, src, dst, direct = steps[i]
        t0 = clock() if clock else 0.0
        kind = step.kind
        if kind == "send":
            data = _gather(bufs[src[0]], src[1], n, dtype)
            req = comm.Isend(data, dest=step.peer, tag=TAG)
            sends.append(req)
            for b in step.blocks:
                readers.setdefault((src[0], b), []).append(req)
        elif kind == "recv":
            recv_reqs.pop(i).Wait()
            finish_recv(i)
        elif kind == "recv_combine" and step.group:
            j = i
            while j < len(steps) and steps[j][0].kind == "recv_combine" and \
                    steps[j][0].group == step.group:
                j += 1
            group = list(range(i, j))
            reqs = [recv_reqs.pop(k) for k in group]
            for _ in group:
                idx = MPI.Request.Waitany(reqs)
                finish_recv(group[idx])
                reqs[idx] = MPI.REQUEST_NULL
            if tracer:
                tracer.record(f"group of {len(group)}", "step", t0, clock(), step=i)
            i = j
            continue
        elif kind == "recv_combine":
            recv_reqs.pop(i).Wait()
            finish_recv(i)
        elif kind == "copy":
            data = _gather(bufs[src[0]], src[1], n, dtype)
            before_write(dst[0], step.blocks)
            _scatter(data.copy() if src[0] == dst[0] else data, bufs[dst[0]], dst[1])
        else:  # combine
            data = _gather(bufs[src[0]], src[1], n, dtype)
            before_write(dst[0], step.blocks)
            _combine(op, data, bufs[dst[0]], dst[1], step.side)
        if tracer:
            tracer.record(str(step), "step", t0, clock(), step=i, peer=step.peer,
                          elements=n)
        i += 1
    MPI.Request.Waitall(sends)


def _check_fits(name, array, offsets, counts):
    """Every block the plan places in ``array`` must lie inside it."""
    size = 0 if array is None else array.size
    for b, off in offsets.items():
        if off < 0 or off + counts[b] > size:
            raise BufferMismatchError(f"{name} has {size} elements; block {b} of the plan "
                                      f"needs elements {off}..{off + counts[b] - 1}")

