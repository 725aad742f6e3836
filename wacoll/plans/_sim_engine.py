"""The discrete-event engine behind :func:`wacoll.plans.simulate.simulate`.

Each rank runs ahead through its precompiled program as far as its messages allow
(:meth:`_Engine.advance`). Under the simple models that is the whole simulation.
Under :class:`~wacoll.plans.simulate.LinkModel` the wide-area flows, the only shared
resource, are also ordered in time on one event heap (:meth:`_Engine.run_links`):
a flow starts, shares its directed link max-min fairly with the others on it, and
finishes; its arrival wakes the ranks waiting for it.

The heap holds ``(time, seq, x)`` entries: ``x >= 0`` is the message whose flow
starts, ``x < 0`` the link ``~x``'s next completion. ``seq`` orders entries of
equal time by when they were made, which keeps the simulation deterministic.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque

from wacoll.errors import PlanError

__all__: list = []  # private; see wacoll.plans.simulate

# Step codes of the precompiled programs.
_SEND, _RECV, _LOCAL, _GROUP = 0, 1, 2, 3
_KIND_CODE = {"send": _SEND, "recv": _RECV, "recv_combine": _RECV, "copy": _LOCAL,
              "combine": _LOCAL}
_CACHE_KEY = "simulate.structure"


# ------------------------------------------------------------- precompilation
def _structure(plan, messages):
    """Model-independent precompiled programs, cached on the plan.

    Per rank a list of ``(code, arg, 0.0)`` rows, one per step: ``arg`` is the index
    of the step's message (sends and receives), and for the first step of an
    arrival-order group the tuple of its members' ``(message, step, 0.0)``; the
    other members' rows are ``(_GROUP, None, 0.0)`` and are skipped. The last field
    is the step's local cost, filled in by :func:`_programs` when the model has one.
    Also returns each rank's offset in the flat per-step arrays, their length, and
    per rank the message index of each step (-1 for local steps).
    """
    cached = plan._cache.get(_CACHE_KEY)
    if cached is not None:
        return cached
    programs = plan.programs
    mids = [[-1] * len(prog) for prog in programs]
    for k, m in enumerate(messages):
        mids[m.src][m.send_step] = k
        mids[m.dst][m.recv_step] = k
    code_of = _KIND_CODE
    rows = [[(code_of[s.kind], k, 0.0) for s, k in zip(prog, mr)]
            for prog, mr in zip(programs, mids)]
    for r, prog in enumerate(programs):
        if any(s.group for s in prog):
            _mark_groups(prog, rows[r])
    bases, g = [], 0
    for prog in programs:
        bases.append(g)
        g += len(prog)
    cached = (rows, bases, g, mids)
    plan._cache[_CACHE_KEY] = cached
    return cached


def _mark_groups(prog, row):
    """Turn runs of >= 2 consecutive recv_combine steps of one group into a group row."""
    i, n = 0, len(prog)
    while i < n:
        group = prog[i].group
        j = i + 1
        if group:
            while j < n and prog[j].group == group:
                j += 1
        if j - i > 1:
            row[i] = (_GROUP, tuple((row[x][1], x, 0.0) for x in range(i, j)), 0.0)
            for x in range(i + 1, j):
                row[x] = (_GROUP, None, 0.0)
        i = j


def _programs(plan, messages, rows, model):
    """Per rank the list of ``(code, arg, cost)`` the engine executes."""
    ro, rate = model._local_costs()
    if ro == 0.0 and rate is None:
        return rows

    def work(nbytes):
        return nbytes / rate if rate else 0.0

    progs = []
    for prog, row in zip(plan.programs, rows):
        out = []
        for s, (code, arg, _) in zip(prog, row):
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
        progs.append(out)
    return progs


# ---------------------------------------------------------------------- links
class _Class:
    """The flows of one link whose senders have one node rate, ``cap``.

    They always get the same rate, so they share a *virtual clock*: the bytes each
    of them has sent since the class started. A flow that joins when the clock
    reads ``v`` finishes when it reads ``v + nbytes``; a start or finish changes the
    class's rate, never per-flow state. The flows wait as ``(v + nbytes, seq,
    message)`` in ``fifo`` while they come in finishing order (flows of one size
    do), else in ``heap``; the next to finish heads one of them.
    """

    __slots__ = ("rate", "clock", "cap", "n", "fifo", "heap")

    def __init__(self, cap):
        self.rate = 0.0
        self.clock = 0.0
        self.cap = cap
        self.n = 0
        self.fifo = deque()
        self.heap = []

    def first(self):
        """The virtual time at which the next flow finishes."""
        fifo, heap = self.fifo, self.heap
        if not fifo:
            return heap[0][0]
        if heap and heap[0][0] < fifo[0][0]:
            return heap[0][0]
        return fifo[0][0]


class _Link:
    """One directed wide-area link: its flows and their max-min fair rates.

    ``classes`` maps a cap to its :class:`_Class`, in the order the classes
    appeared; ``single`` is the class when there is just one (the common case,
    served without water-filling).

    ``(key_t, key_s)`` is the link's next completion as an event key (``key_s``
    -1: none). The heap holds at most one live entry for the link, ``rep_s``,
    whose key is never later than that: a flow joining the link only slows the
    others, so the entry usually stays and is renewed when it comes up.
    """

    __slots__ = ("capacity", "latency", "classes", "single", "last", "tag",
                 "key_t", "key_s", "rep_t", "rep_s")

    def __init__(self, capacity, latency, tag):
        self.capacity = capacity
        self.latency = latency
        self.classes = {}
        self.single = None
        self.last = 0.0
        self.tag = tag  # ~index: its entries on the event heap
        self.key_t, self.key_s = 0.0, -1
        self.rep_t, self.rep_s = 0.0, -1

    def add_class(self, cap):
        c = self.classes[cap] = _Class(cap)
        self.single = c if len(self.classes) == 1 else None
        return c

    def drop_class(self, cap):
        classes = self.classes
        del classes[cap]
        self.single = next(iter(classes.values())) if len(classes) == 1 else None

    def rebalance(self):
        """Water-filling over several classes: the lowest caps are served in full,
        the rest share equally."""
        classes = self.classes
        left = self.capacity
        k = sum(c.n for c in classes.values())
        for cap in sorted(classes):
            c = classes[cap]
            share = left / k
            c.rate = cap if cap <= share else share
            left -= c.rate * c.n
            k -= c.n

    def next_finish(self):
        """(time, class) of the flow that finishes first, or None without flows."""
        best = None
        for c in self.classes.values():
            left = c.first() - c.clock
            t = self.last + (left if left > 0 else 0.0) / c.rate
            if best is None or t < best[0]:
                best = (t, c)
        return best


# --------------------------------------------------------------------- engine
class _Engine:
    """The simulation state of one :func:`~wacoll.plans.simulate.simulate` call."""

    def __init__(self, plan, model, messages, progs, bases, nsteps, busy, delay, flows):
        self.plan, self.model, self.messages = plan, model, messages
        self.progs, self.bases = progs, bases
        self.busy, self.delay = busy, delay
        size, nmsg = plan.size, len(messages)
        self.time = [0.0] * size
        self.pc = [0] * size
        self.arrival = [None] * nmsg
        self.blocked = [False] * nmsg
        self.dst = [m.dst for m in messages]
        self.starts = [0.0] * nsteps
        self.ends = [0.0] * nsteps
        self.flows = flows
        # 0: the model gives the arrival; 1: a flow the sender waits for; 2: a flow
        # the network buffers (the sender goes on after its busy time)
        if flows is None:
            self.is_flow = [0] * nmsg
        else:
            kind = 2 if model.buffered else 1
            self.is_flow = [0 if j < 0 else kind for j in flows.link]
        # Flow starts, (time, seq, message). A rank makes its starts in time order,
        # so only its first is on the heap and the others wait in its queue: the
        # heap stays small, and small heaps are fast.
        self.events = []
        self.queued = [False] * size
        self.queues = [None] * size
        self.seq = itertools.count()  # orders events of equal time by creation
        self.advance = self._runner()

    def run(self):
        """Simulate; return ``(finish, arrivals, starts, ends)``."""
        self.advance(list(range(self.plan.size - 1, -1, -1)))
        if self.events:
            self.run_links()
        pc, progs = self.pc, self.progs
        stuck = [r for r in range(self.plan.size) if pc[r] < len(progs[r])]
        if stuck:  # the checker rules this out; kept as a guard
            r = stuck[0]
            raise PlanError(f"simulation stalled: rank {r} waits at step {pc[r]}",
                            rank=r, step=pc[r])
        return tuple(self.time), tuple(self.arrival), self.starts, self.ends

    def _runner(self):
        """``advance(work)``: run each rank of the list ``work`` (and every rank it
        wakes) until it blocks. A flow's send queues the flow's start instead of
        delivering the message. (A closure: it runs once per delivered flow.)"""
        progs, bases, pcs, times = self.progs, self.bases, self.pc, self.time
        arrival, blocked, dst = self.arrival, self.blocked, self.dst
        busy, delay, is_flow = self.busy, self.delay, self.is_flow
        st, en = self.starts, self.ends
        heap, queued, queues, seq = self.events, self.queued, self.queues, self.seq
        overhead = getattr(self.model, "overhead", 0.0)
        hpush = heapq.heappush

        def advance(work):
            pop, push = work.pop, work.append
            while work:
                r = pop()
                prog = progs[r]
                i, n, t, g = pcs[r], len(prog), times[r], bases[r]
                while i < n:
                    code, a, c = prog[i]
                    if code == _RECV:
                        x = arrival[a]
                        if x is None:
                            blocked[a] = True
                            break
                        st[g + i] = t
                        if x > t:
                            t = x
                        t += c
                        en[g + i] = t
                    elif code == _SEND:
                        st[g + i] = t
                        f = is_flow[a]
                        if f:
                            if queued[r]:
                                q = queues[r]
                                if q is None:
                                    q = queues[r] = deque()
                                q.append((t + overhead, next(seq), a))
                            else:
                                queued[r] = True
                                hpush(heap, (t + overhead, next(seq), a))
                            if f == 1:
                                break  # run_links frees the sender
                            t += busy[a]
                            en[g + i] = t
                            i += 1
                            continue
                        arrival[a] = t + delay[a]
                        t += busy[a]
                        en[g + i] = t
                        if blocked[a]:
                            blocked[a] = False
                            push(dst[a])
                    elif code == _LOCAL:
                        st[g + i] = t
                        t += c
                        en[g + i] = t
                    else:  # arrival-order group
                        t, done = _group(a, t, g, arrival, blocked, st, en)
                        if not done:
                            break
                        i += len(a) - 1
                    i += 1
                pcs[r] = i
                times[r] = t

        return advance

    def run_links(self):
        """Event loop of the link model: flows start, share links and finish in time.

        Two heaps of ``(time, seq, x)`` events: flow starts (``x`` the message) and
        link completions (``x`` the link), merged by key. A start or finish changes
        only its own link's rates, so only that link's next completion is
        recomputed; it goes on the heap only when it is earlier than the link's
        entry already there (see :class:`_Link`).
        """
        flows, seq, heap = self.flows, self.seq, self.events
        links = [_Link(wl.bandwidth, wl.latency, ~j) for j, wl in enumerate(flows.links)]
        link_of, fbytes, fcap = flows.link, flows.nbytes, flows.cap
        arrival, blocked, dst, advance = self.arrival, self.blocked, self.dst, self.advance
        queued, queues, msgs = self.queued, self.queues, self.messages
        src = [m.src for m in msgs]
        wait = not self.model.buffered
        send_step = [m.send_step for m in msgs] if wait else None
        bases, ends, times, pcs = self.bases, self.ends, self.time, self.pc
        hpush, hpop = heapq.heappush, heapq.heappop

        while heap:
            now, s, x = hpop(heap)
            if x < 0:  # link ~x may have a flow done
                link = links[~x]
                if s != link.rep_s:
                    continue  # superseded by an earlier entry for this link
                link.rep_s = -1
                if s != link.key_s:  # the rates changed: renew the entry, if any
                    if link.key_s >= 0:
                        link.rep_t, link.rep_s = link.key_t, link.key_s
                        hpush(heap, (link.key_t, link.key_s, x))
                    continue
                dt = now - link.last
                link.last = now
                c = link.single
                if c is not None:
                    if dt > 0:
                        c.clock += c.rate * dt
                else:
                    if dt > 0:
                        for c in link.classes.values():
                            c.clock += c.rate * dt
                    c = link.next_finish()[1]
                fifo, h = c.fifo, c.heap
                if h and (not fifo or h[0] < fifo[0]):
                    done = hpop(h)[2]
                else:
                    done = fifo.popleft()[2]
                c.n -= 1
                if not c.n:
                    link.drop_class(c.cap)
            else:  # the flow of message x joins its link
                r = src[x]
                q = queues[r]
                if q:
                    hpush(heap, q.popleft())
                else:
                    queued[r] = False
                link = links[link_of[x]]
                dt = now - link.last
                link.last = now
                cap = fcap[x]
                c = link.single
                if c is not None and c.cap == cap:
                    if dt > 0:
                        c.clock += c.rate * dt
                else:
                    classes = link.classes
                    if dt > 0:
                        for c in classes.values():
                            c.clock += c.rate * dt
                    c = classes.get(cap)
                    if c is None:
                        c = link.add_class(cap)
                e = (c.clock + fbytes[x], next(seq), x)
                fifo = c.fifo
                if not fifo or e[0] >= fifo[-1][0]:
                    fifo.append(e)
                else:
                    hpush(c.heap, e)
                c.n += 1
                done = -1
            # the link's new rates and next completion
            c = link.single
            if c is not None:
                share = link.capacity / c.n
                cap = c.cap
                rate = c.rate = cap if cap <= share else share
                fifo, h = c.fifo, c.heap
                if not fifo or (h and h[0][0] < fifo[0][0]):
                    left = h[0][0] - c.clock
                else:
                    left = fifo[0][0] - c.clock
                t = now + (left if left > 0 else 0.0) / rate
            elif link.classes:
                link.rebalance()
                t = link.next_finish()[0]
                if t < now:  # guards against rounding; one-class links cannot
                    t = now
            else:
                t = None
            if t is None:
                link.key_s = -1
            else:
                k = link.key_s = next(seq)
                link.key_t = t
                if link.rep_s < 0 or t < link.rep_t:
                    link.rep_t, link.rep_s = t, k
                    hpush(heap, (t, k, link.tag))
            if done < 0:
                continue
            # the last byte of message `done` crossed at `now`: deliver it, and free
            # its sender unless the network buffered the message
            arrival[done] = now + link.latency
            if wait:
                r = src[done]
                i = send_step[done]
                ends[bases[r] + i] = now
                times[r] = now
                pcs[r] = i + 1
                if blocked[done]:
                    blocked[done] = False
                    advance([r, dst[done]])
                else:
                    advance([r])
            elif blocked[done]:
                blocked[done] = False
                advance([dst[done]])


def _group(members, t, g, arrival, blocked, st, en):
    """Serve a group of receive-and-combines in arrival order, once all are known.

    ``members`` holds ``(message, step, cost)`` in program order.
    """
    for m in members:
        if arrival[m[0]] is None:
            blocked[m[0]] = True
            return t, False
    order = sorted(members, key=lambda m: (arrival[m[0]], m[1]))
    for m in order:
        st[g + m[1]] = t
        x = arrival[m[0]]
        if x > t:
            t = x
        t += m[2]
        en[g + m[1]] = t
    return t, True
