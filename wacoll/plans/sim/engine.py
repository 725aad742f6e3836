"""The discrete-event engine behind :func:`wacoll.plans.sim.simulate`.

Plans are precompiled once (:func:`structure_of`, cached on the plan): per rank a
list of ``(code, arg, cost)`` rows, and per message the columns the models need.
Each rank then runs ahead through its program as far as its messages allow
(``Engine.advance``). Under the simple models that is the whole simulation. Under
:class:`~wacoll.plans.sim.LinkModel` the wide-area flows, the only shared
resource, are also ordered in time on an event heap
(:func:`wacoll.plans.sim.links.run_links`); a flow's arrival wakes the ranks
waiting for it.
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

from wacoll.errors import PlanError
from wacoll.plans.sim.links import Events, run_links

#: For the other modules of the simulator (:mod:`wacoll.plans.sim.simulator`,
#: :mod:`~wacoll.plans.sim.result`); users call :func:`wacoll.plans.sim.simulate`.
__all__ = ["Structure", "structure_of", "costed_programs", "Engine"]

# Step codes of the precompiled programs (written as literals in the hot loop).
_SEND, _RECV, _LOCAL, _GROUP = 0, 1, 2, 3
_KIND_CODE = {
    "send": _SEND,
    "recv": _RECV,
    "recv_combine": _RECV,
    "copy": _LOCAL,
    "combine": _LOCAL,
}
_CACHE_KEY = "simulate.structure"


# ------------------------------------------------------------- precompilation
class Structure(NamedTuple):
    """What :func:`structure_of` precompiles from a plan (independent of the model).

    Steps are numbered across ranks: rank ``r``'s steps are ``bases[r]`` up to
    ``limits[r]``, and every per-step array uses that flat index.
    """

    rows: list  # per step: (code, arg, 0.0)
    bases: list  # per rank: the flat index of its first step
    limits: list  # per rank: one past its last step
    mids: list  # per rank, per step: the step's message (-1: a local step)
    src: list  # per message: sender,
    dst: list  # receiver,
    nbytes: list  # size,
    wide: list  # whether it crosses clusters,
    send_at: list  # the flat index of its send step,
    flow: list  # its cluster pair (a * m + b) if it is a wide-area flow: it
    m: int  #   crosses clusters and has bytes; else None
    fbytes: list  # and its size as a float
    pairs: set  # the cluster pairs of all wide-area messages


def structure_of(plan, messages):
    """Model-independent precompiled programs, cached on the plan.

    One ``(code, arg, 0.0)`` row per step: ``arg`` is the index of the step's
    message (sends and receives), and for the first step of an arrival-order group
    the tuple of its members' ``(message, flat step, 0.0)``; the other members' rows
    are ``(_GROUP, None, 0.0)`` and are skipped. The last field is the step's local
    cost, filled in by :func:`costed_programs` when the model has one.
    """
    return plan.derived(_CACHE_KEY, lambda p: _flatten(p, messages))


def _flatten(plan, messages):
    """:func:`structure_of`, computed."""
    programs = plan.programs
    mids = [[-1] * len(prog) for prog in programs]
    for k, m in enumerate(messages):
        mids[m.src][m.send_step] = k
        mids[m.dst][m.recv_step] = k
    bases, limits, rows = [], [], []
    code_of = _KIND_CODE
    for prog, mr in zip(programs, mids):
        bases.append(len(rows))
        rows.extend((code_of[s.kind], k, 0.0) for s, k in zip(prog, mr))
        if any(s.group for s in prog):
            _mark_groups(prog, rows, bases[-1])
        limits.append(len(rows))
    src = [m.src for m in messages]
    dst = [m.dst for m in messages]
    nbytes = [m.nbytes for m in messages]
    wide = [m.wide_area for m in messages]
    cl = plan.clusters
    m = max(cl, default=0) + 1
    pair = [cl[s] * m + cl[d] if w else None for s, d, w in zip(src, dst, wide)]
    flow = [j if b > 0 else None for j, b in zip(pair, nbytes)]
    return Structure(
        rows,
        bases,
        limits,
        mids,
        src,
        dst,
        nbytes,
        wide,
        [bases[x.src] + x.send_step for x in messages],
        flow,
        m,
        [float(b) for b in nbytes],
        set(pair) - {None},
    )


def _mark_groups(prog, rows, g):
    """Turn runs of >= 2 consecutive recv_combine steps of one group into a group
    row (the rank's steps start at ``rows[g]``)."""
    i, n = 0, len(prog)
    while i < n:
        group = prog[i].group
        j = i + 1
        if group:
            while j < n and prog[j].group == group:
                j += 1
        if j - i > 1:
            rows[g + i] = (
                _GROUP,
                tuple((rows[g + x][1], g + x, 0.0) for x in range(i, j)),
                0.0,
            )
            for x in range(i + 1, j):
                rows[g + x] = (_GROUP, None, 0.0)
        i = j


def costed_programs(plan, messages, rows, model):
    """The flat list of ``(code, arg, cost)`` the engine executes: the ``rows`` of
    :func:`structure_of` with each step's local cost under ``model`` (its
    :meth:`~wacoll.plans.sim.models.Model.local_costs`)."""
    ro, rate = model.local_costs()
    if ro == 0.0 and rate is None:
        return rows

    def work(nbytes):
        return nbytes / rate if rate else 0.0

    out = []
    steps = (s for prog in plan.programs for s in prog)
    for s, (code, arg, _) in zip(steps, rows):
        if code == _LOCAL:
            cost = work(plan.nbytes(s.blocks))
        elif code == _RECV:
            cost = ro + (work(messages[arg].nbytes) if s.kind == "recv_combine" else 0.0)
        elif code == _GROUP and arg is not None:  # per member (message, step, cost)
            arg = tuple((k, x, ro + work(messages[k].nbytes)) for k, x, _ in arg)
            cost = 0.0
        else:
            cost = 0.0
        out.append((code, arg, cost))
    return out


# --------------------------------------------------------------------- engine
class Engine:
    """The simulation state of one :func:`~wacoll.plans.sim.simulate` call."""

    def __init__(self, plan, model, structure, progs, busy, delay, flows):
        self.plan, self.progs, self.structure = plan, progs, structure
        self.busy, self.delay, self.flows = busy, delay, flows
        size, nmsg, nsteps = plan.size, len(structure.src), len(progs)
        self.time = [0.0] * size
        self.pc = list(structure.bases)  # per rank: the flat index of its next step
        self.arrival = [None] * nmsg
        self.blocked = [False] * nmsg
        self.starts = [0.0] * nsteps
        self.ends = [0.0] * nsteps
        self.events = Events()  # the link model's (see wacoll.plans.sim.links)
        self.seq = itertools.count()  # orders events of equal time by creation
        self.advance = self._runner()

    def run(self):
        """Simulate; return ``(finish, arrivals, starts, ends)``."""
        self.advance(list(range(self.plan.size - 1, -1, -1)))
        if self.events:
            run_links(self)
        pc, limits = self.pc, self.structure.limits
        stuck = [r for r in range(self.plan.size) if pc[r] < limits[r]]
        if stuck:  # the prover rules this out; kept as a guard
            r = stuck[0]
            step = pc[r] - self.structure.bases[r]
            raise PlanError(
                f"simulation stalled: rank {r} waits at step {step}", rank=r, step=step
            )
        return tuple(self.time), tuple(self.arrival), self.starts, self.ends

    def _runner(self):
        """``advance(work)``: run each rank of the list ``work`` (and every rank it
        wakes) until it blocks. A flow's send queues the flow's start instead of
        delivering the message. (A closure: it runs once per delivered flow.)"""
        prog, limits, pcs, times = self.progs, self.structure.limits, self.pc, self.time
        arrival, blocked, dst = self.arrival, self.blocked, self.structure.dst
        busy, delay = self.busy, self.delay
        st, en = self.starts, self.ends
        flows = self.flows
        if flows is None:
            flow, wait, overhead = [None] * len(busy), False, 0.0
        else:
            flow, wait, overhead = self.structure.flow, flows.wait, flows.overhead
        add_event, seq = self.events.add, self.seq

        def advance(work):
            pop, push = work.pop, work.append
            while work:
                r = pop()
                i, n, t = pcs[r], limits[r], times[r]
                while i < n:
                    code, a, c = prog[i]
                    if code == 1:  # _RECV
                        x = arrival[a]
                        if x is None:
                            blocked[a] = True
                            break
                        st[i] = t
                        if x > t:
                            t = x
                        t += c
                        en[i] = t
                    elif code == 0:  # _SEND
                        st[i] = t
                        if flow[a] is None:
                            arrival[a] = t + delay[a]
                            t += busy[a]
                            en[i] = t
                            if blocked[a]:
                                blocked[a] = False
                                push(dst[a])
                        else:  # a flow: the link model delivers it
                            add_event((t + overhead, next(seq), a))
                            if wait:
                                break  # run_links frees the sender
                            t += busy[a]
                            en[i] = t
                    elif code == 2:  # _LOCAL
                        st[i] = t
                        t += c
                        en[i] = t
                    else:  # arrival-order group
                        t, done = _group(a, t, arrival, blocked, st, en)
                        if not done:
                            break
                        i += len(a) - 1
                    i += 1
                pcs[r] = i
                times[r] = t

        return advance


def _group(members, t, arrival, blocked, st, en):
    """Serve a group of receive-and-combines in arrival order, once all are known.

    ``members`` holds ``(message, flat step, cost)`` in program order.
    """
    for m in members:
        if arrival[m[0]] is None:
            blocked[m[0]] = True
            return t, False
    order = sorted(members, key=lambda m: (arrival[m[0]], m[1]))
    for m in order:
        st[m[1]] = t
        x = arrival[m[0]]
        if x > t:
            t = x
        t += m[2]
        en[m[1]] = t
    return t, True
