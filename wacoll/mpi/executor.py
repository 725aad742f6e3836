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
dependencies, which the prover proved acyclic. So a proved plan cannot deadlock here.

A program of a plan on reproducible arithmetic (``program.arithmetic``) runs on
exact accumulators: the run converts this rank's contribution first and rounds the
result into the receive buffer last (:mod:`wacoll.mpi.accumulate`), combining with
the kernels' ``"repro_sum"``. Its messages travel packed
(:mod:`wacoll._kernels.repro_wire`: a rank's own values, or narrow bins), so every
receive lands in the pool and is unpacked from there.

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
from mpi4py import MPI

from wacoll import _kernels
from wacoll._kernels import repro_wire
from wacoll.errors import BufferMismatchError, PlanError
from wacoll.mpi.scratch import scratch_array
from wacoll.mpi.trace import Tracer
from wacoll.plans.lower import ElementRuns, lower

__all__ = [
    "execute",
    "run_program",
    "ProgramRun",
    "Tracer",
    "TAG",
    "BLOCKING_TAG",
    "blocking_tag",
    "call_tag",
]

#: Messages travel as bytes: a rank whose element type differs from its peer's
#: (an erroneous call the cross-rank check reports) then gets a short or truncated
#: message, never a partial element the MPI library would abort on.
_BYTE = MPI.BYTE

#: Tags of a communicator's plan messages: a window of call sequence numbers, so
#: that the messages of calls in flight together (non-blocking, persistent) never
#: match each other's receives.
TAG_BASE, TAG_SPAN = 1 << 14, 1 << 14
#: The tag of blocking calls' messages (plan and check). A blocking call completes on
#: a rank before its next call starts there, and MPI does not let messages between
#: two ranks overtake each other, so successive blocking calls can share one tag; it
#: is outside the window of the calls in flight (non-blocking, persistent), whose
#: messages it never matches. One tag lets a repeated call run without knowing its
#: sequence number (:class:`wacoll.mpi._runner.PlanCall`).
BLOCKING_TAG = TAG_BASE - 1
#: Tags of blocking calls' plan messages: ``DIGEST_TAG_LOW`` and up, one of
#: ``DIGEST_TAGS`` made from the call's signature digest (:func:`blocking_tag`),
#: below :data:`BLOCKING_TAG` and the clock exchange's tag.
DIGEST_TAG_LOW, DIGEST_TAGS = 1 << 13, 8188


def blocking_tag(digest: int) -> int:
    """The tag of a blocking call's plan messages: made from its signature's
    ``digest``, so that a rank whose arguments differ from its peer's (a call the
    cross-rank check will refuse) never receives the peer's messages into its
    buffers. A call returns before its check's verdict is in
    (:class:`wacoll.mpi._runner.Verdicts`); the tag keeps what it writes its own.
    Two different signatures share a tag once in :data:`DIGEST_TAGS`; the check
    still refuses such a call, on every rank.

    Examples
    --------
    >>> blocking_tag(0), blocking_tag(DIGEST_TAGS), blocking_tag(-1) < BLOCKING_TAG
    (8192, 8192, True)
    """
    return DIGEST_TAG_LOW + digest % DIGEST_TAGS


def call_tag(seq: int) -> int:
    """The tag of the ``seq``-th collective call's messages on a communicator.

    Examples
    --------
    >>> call_tag(0), call_tag(1), call_tag(TAG_SPAN)
    (16384, 16385, 16384)
    """
    return TAG_BASE + seq % TAG_SPAN


#: The tag of :func:`run_program`'s messages (one-off runs on any communicator).
TAG = 0x7AC0


def _spans(runs):
    """The spans a write is compared with the tracked readers by: each run, or for
    many (:class:`~wacoll.plans.lower.ElementRuns`) the one span they lie in."""
    return (runs.extent(),) if isinstance(runs, ElementRuns) else runs


def _gather(buf, runs, n, dtype, index=None):
    """The elements of ``runs`` of ``buf``, back to back (a view when one run)."""
    if index is None and isinstance(runs, ElementRuns):
        index = runs.index()
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
    if index is None and isinstance(runs, ElementRuns):
        index = runs.index()
    if index is not None:
        _kernels.unpack(data, index[0], index[1], buf)
        return
    at = 0
    for a, b in runs:
        buf[a:b] = data[at : at + b - a]
        at += b - a


def _combine(op, data, target, runs, side):
    """Combine the packed ``data`` into the ``runs`` of ``target`` on ``side``."""
    at = 0
    for a, b in runs:
        _kernels.reduce_into(op, data[at : at + b - a], target[a:b], side=side)
        at += b - a


#: The scratch entries of the receive pool and of the unpacked accumulators (not plan
#: buffer names: those are lower case letters, digits and underscores).
_RECV_POOL, _UNPACKED = "<receive pool>", "<unpacked>"


def _validate_fits(name, array, extent):
    size = 0 if array is None else array.size
    if size < extent:
        raise BufferMismatchError(f"{name} has {size} elements; the plan needs {extent}")


def run_program(
    plan, comm, inbuf, outbuf, *, op=None, in_offsets=None, out_offsets=None, tracer=None
):
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


def execute(program, comm, inbuf, outbuf, *, op=None, tracer=None, scratch=None, tag=TAG):
    """Execute a lowered ``program`` on ``comm`` over ``inbuf`` and ``outbuf``.

    Parameters
    ----------
    program : wacoll.plans.LoweredProgram
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
    tag : int
        The tag of this call's messages (calls in flight together need distinct tags).
    """
    ProgramRun(
        program, comm, inbuf, outbuf, op=op, tracer=tracer, scratch=scratch, tag=tag
    ).advance(block=True)


class ProgramRun:
    """One execution of a lowered program, advanced in steps.

    Creating a run posts all its receives (so that the runs of successive calls post
    their receives in call order, as MPI's matching requires). :meth:`advance` then
    runs steps in program order until the program is done or, when not blocking,
    until a step must wait for a message or a send; :attr:`waiting` lists the
    requests it waits for, so that a progress engine can wait on several runs at
    once. A blocking call is ``ProgramRun(...).advance(block=True)``.
    """

    __slots__ = (
        "steps",
        "comm",
        "bufs",
        "dtype",
        "op",
        "tag",
        "tracer",
        "recv_reqs",
        "recv_data",
        "readers",
        "sends",
        "index",
        "waiting",
        "done",
        "_group",
        "started",
        "_unstage",
        "packed",
        "unpacked",
    )

    def __init__(
        self, program, comm, inbuf, outbuf, *, op=None, tracer=None, scratch=None, tag=TAG
    ):
        _validate_fits("inbuf", inbuf, program.in_extent)
        _validate_fits("outbuf", outbuf, program.out_extent)
        self._unstage = None
        self.packed = program.arithmetic == "reproducible"
        if self.packed:  # the plan runs on accumulators, its messages packed
            from wacoll.mpi.accumulate import stage

            t0 = tracer.clock() if tracer else 0.0
            # a rank whose program writes no result (rank 0 of an exscan) leaves its
            # receive buffer as it was, as the library does: nothing to unstage
            if outbuf is not None and not any(
                step.dst is not None and step.dst[0] == "out" for step in program.steps
            ):
                outbuf = None
            inbuf, outbuf, self._unstage = stage(inbuf, outbuf, scratch)
            op = _kernels.REPRO_SUM
            if tracer:
                tracer.record("to accumulators", "step", t0, tracer.clock())
        dtype = (
            outbuf.dtype
            if outbuf is not None
            else (inbuf.dtype if inbuf is not None else np.dtype(np.uint8))
        )
        bufs = {"in": inbuf, "out": outbuf}
        for name, n in program.scratch_sizes.items():
            bufs[name] = scratch_array(scratch, name, n, dtype)
        for name in ("in", "out"):
            if bufs[name] is None:
                bufs[name] = np.empty(0, dtype)
        self.steps = program.steps
        self.comm = comm
        self.bufs = bufs
        self.dtype = dtype
        self.op = op
        self.tag = tag
        self.tracer = tracer
        self.readers = {}  # (buffer, start, stop) -> send requests still reading it
        self.sends = []
        self.index = 0
        self.waiting = ()
        self.done = False
        self.started = False  # whether advance() has run (sends may be out)
        self._group = None
        # post every receive up front, in program order; the messages that cannot
        # land in place land in one pool (reused by the blocking calls that follow:
        # fresh pages cost a fault each)
        receiving = [
            (i, step)
            for i, step in enumerate(self.steps)
            if step.kind in ("recv", "recv_combine")
        ]
        packed = self.packed
        # a packed message needs one element more than it carries, for its header
        slot = 1 if packed else 0
        pool = scratch_array(
            scratch,
            _RECV_POOL,
            sum(
                step.elements + slot for _, step in receiving if packed or not step.direct
            ),
            dtype,
        )
        self.unpacked = (
            scratch_array(
                scratch,
                _UNPACKED,
                max((step.elements for _, step in receiving), default=0),
                dtype,
            )
            if packed
            else None
        )
        used = 0
        self.recv_reqs, self.recv_data = {}, {}
        for i, step in receiving:
            dst = step.dst
            if packed:
                target = pool[used : used + step.elements + slot]
                used += step.elements + slot
            elif step.direct and dst[1]:
                start, stop = dst[1][0]
                target = bufs[dst[0]][start:stop]
            elif step.direct:
                target = pool[:0]
            else:
                target = pool[used : used + step.elements]
                used += step.elements
            self.recv_data[i] = target
            self.recv_reqs[i] = comm.Irecv([target, _BYTE], source=step.peer, tag=tag)

    # ------------------------------------------------------------------ helpers
    def _readers_of(self, buf, runs):
        """The send requests still reading any of ``runs`` of ``buf``."""
        if not self.readers:
            return []
        found = []
        for start, stop in _spans(runs):
            for key in [
                k for k in self.readers if k[0] == buf and start < k[2] and k[1] < stop
            ]:
                found.append(key)
        return found

    def _await(self, requests, block):
        """Whether all ``requests`` are complete (waiting for them when blocking)."""
        if block:
            MPI.Request.Waitall(requests)
            return True
        if MPI.Request.Testall(requests):
            return True
        self.waiting = [r for r in requests if r]
        return False

    def _clear_readers(self, buf, runs, block):
        keys = self._readers_of(buf, runs)
        if not keys:
            return True
        if not self._await([r for k in keys for r in self.readers[k]], block):
            return False
        for k in keys:
            del self.readers[k]
        return True

    def _finish_recv(self, i):
        step = self.steps[i]
        data = self.recv_data.pop(i)
        dst = step.dst
        if self.packed:
            data = repro_wire.unpack(data, self.unpacked[: step.elements])
        if step.kind == "recv":
            if self.packed or not step.direct:
                _scatter(data, self.bufs[dst[0]], dst[1], step.dst_index)
            return
        _combine(self.op, data, self.bufs[dst[0]], dst[1], step.side)

    # ------------------------------------------------------------------ running
    def advance(self, block=False):
        """Run steps; return True once the program is done.

        Without ``block``, stop at the first step that must wait and return False
        (:attr:`waiting` then lists what it waits for).
        """
        if self.done:
            return True
        self.started = True
        steps, bufs, tracer = self.steps, self.bufs, self.tracer
        clock = tracer.clock if tracer else None
        while self.index < len(steps):
            i = self.index
            step = steps[i]
            t0 = clock() if clock else 0.0
            kind = step.kind
            if kind == "send":
                src = step.src
                data = _gather(
                    bufs[src[0]], src[1], step.elements, self.dtype, step.src_index
                )
                if self.packed:
                    data = repro_wire.pack(data)
                req = self.comm.Isend([data, _BYTE], dest=step.peer, tag=self.tag)
                self.sends.append(req)
                if not self.packed and len(src[1]) == 1:
                    # a message of one run is sent from the buffer itself (others
                    # are gathered or packed into a copy, which reads no buffer)
                    start, stop = src[1][0]
                    self.readers.setdefault((src[0], start, stop), []).append(req)
            elif kind == "recv_combine" and step.group:
                if self._group is None:
                    j = i
                    while (
                        j < len(steps)
                        and steps[j].kind == "recv_combine"
                        and steps[j].group == step.group
                    ):
                        j += 1
                    self._group = [
                        [k for k in range(i, j)],
                        [self.recv_reqs.pop(k) for k in range(i, j)],
                        j,
                    ]
                members, reqs, end = self._group
                while any(reqs):
                    if block:
                        idx = MPI.Request.Waitany(reqs)
                    else:
                        idx, flag = MPI.Request.Testany(reqs)
                        if not flag:
                            self.waiting = [r for r in reqs if r]
                            return False
                    if not self._clear_readers(
                        steps[members[idx]].dst[0], steps[members[idx]].dst[1], block
                    ):
                        return False  # pragma: no cover - a combine never races a send
                    self._finish_recv(members[idx])
                    reqs[idx] = MPI.REQUEST_NULL
                if tracer:
                    tracer.record(
                        f"group of {len(members)}", "step", t0, clock(), step=step.index
                    )
                self._group = None
                self.index = end
                continue
            elif kind in ("recv", "recv_combine"):
                req = self.recv_reqs[i]
                if not self._await([req], block):
                    return False
                if not (
                    step.kind == "recv" and step.direct and not self.packed
                ) and not self._clear_readers(step.dst[0], step.dst[1], block):
                    return False
                del self.recv_reqs[i]
                self._finish_recv(i)
            else:  # copy or combine
                src, dst = step.src, step.dst
                if not self._clear_readers(dst[0], dst[1], block):
                    return False
                data = _gather(
                    bufs[src[0]], src[1], step.elements, self.dtype, step.src_index
                )
                if kind == "copy":
                    _scatter(
                        data.copy() if src[0] == dst[0] else data,
                        bufs[dst[0]],
                        dst[1],
                        step.dst_index,
                    )
                else:
                    _combine(self.op, data, bufs[dst[0]], dst[1], step.side)
            if tracer:
                tracer.record(
                    step.label,
                    "step",
                    t0,
                    clock(),
                    step=step.index,
                    peer=step.peer,
                    elements=step.elements,
                )
            self.index = i + 1
        if self.sends:
            if not self._await(self.sends, block):
                return False
            self.sends = []
        if self._unstage is not None:  # round the accumulators into the user's buffer
            t0 = clock() if clock else 0.0
            self._unstage()
            self._unstage = None
            if tracer:
                tracer.record("from accumulators", "step", t0, clock())
        self.waiting = ()
        self.done = True
        return True

    def cancel(self):
        """Abandon the run: cancel its pending receives (after a failed agreement)."""
        pending = [r for r in self.recv_reqs.values() if r]
        if self._group is not None:
            pending += [r for r in self._group[1] if r]
        for r in pending:
            r.Cancel()
        try:
            MPI.Request.Waitall(pending)
        except MPI.Exception:  # a receive that failed (e.g. truncated) is done too
            pass
        self.recv_reqs.clear()
        self.done = True
