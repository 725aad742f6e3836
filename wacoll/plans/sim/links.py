"""The link model's event loop: wide-area flows sharing directed links max-min fairly.

Used by :class:`wacoll.plans.sim.engine.Engine` under
:class:`~wacoll.plans.sim.LinkModel`. A flow starts when its sender reaches
the send, shares its link with the other flows on it (water-filling, each capped by
its sender's node rate), and finishes when its last byte has crossed; then the
message arrives a latency later, which may wake ranks, which may start flows.

By default (``LinkModel(ordered=True)``) the messages of one pair of ranks cross one
after the other, in the order sent, as on the one connection MPI keeps per pair: a
message whose pair has a flow on the link waits, and starts when that flow's last
byte has crossed. With ``LinkModel(wan_capacity=c)`` the links that carry flows
share ``c`` bytes/s equally (each at most its own bandwidth): their capacities are
set again, and their completions moved, whenever a link starts or stops carrying
flows. With ``LinkModel(window=w)``, a message of at most ``w`` bytes is
one burst: it waits for the link's earlier bursts, whichever pair sent them, and
crosses alone (first come, first served), beside the longer flows.

Events are ``(time, seq, x)``, taken in ``(time, seq)`` order from one
:class:`Events` queue: ``x >= 0`` is the message whose flow starts, ``x < 0`` says
link ``~x`` may have a flow done. ``seq``, from one counter, orders events of equal
time by when they were made, so a run is deterministic and its arithmetic does not
depend on how the queue is kept.

What keeps it fast (the wide-area-heavy plans have thousands of flows per link):

* a start or a finish changes only its own link's rates, and one-cap links (the
  common case) need no water-filling: the fair share is ``min(cap, C / k)``;
* a link's flows of one cap share a virtual clock, so no per-flow state changes,
  and they wait in arrival order in a FIFO while that is finishing order;
* each link has at most one live event: a joining flow only slows the others, so
  the event stays as a lower bound and is renewed when it comes up; flows joining
  a link at one instant set its rates once, when the next needs them;
* events are queued per distinct time (a heap of times, a deque of events each),
  and nearly every event is the newest made, so it goes at the end of its time's
  deque: many events share a time (a sender's flows start together), and the heap
  only orders the times.
"""

from __future__ import annotations

import heapq
from collections import deque

#: For the simulator's engine (:mod:`wacoll.plans.sim.engine`); users call
#: :func:`wacoll.plans.sim.simulate` with a :class:`~wacoll.plans.sim.LinkModel`.
__all__ = ["Events", "run_links"]


class _Class:
    """The flows of one link whose senders have one node rate, ``cap``.

    They always get the same rate, so they share a *virtual clock*: the bytes each
    of them has sent since the class started. A flow that joins when the clock
    reads ``v`` finishes when it reads ``v + nbytes``. The ``n`` flows wait as
    ``(v + nbytes, seq, message)`` in ``fifo`` while they join in finishing order
    (flows of one size do), else in ``heap``; the next to finish heads one of them.
    """

    __slots__ = ("rate", "clock", "cap", "n", "fifo", "heap")

    def __init__(self, cap):
        self.rate = 0.0
        self.clock = 0.0
        self.cap = cap
        self.n = 0
        self.fifo = deque()
        self.heap = []

    def add(self, entry):
        fifo = self.fifo
        if not fifo or entry[0] >= fifo[-1][0]:
            fifo.append(entry)
        else:
            heapq.heappush(self.heap, entry)
        self.n += 1

    def pop(self):
        """Remove the flow that finishes first; return its message."""
        fifo, heap = self.fifo, self.heap
        self.n -= 1
        if heap and (not fifo or heap[0] < fifo[0]):
            return heapq.heappop(heap)[2]
        return fifo.popleft()[2]

    def first(self):
        """The clock reading at which the next flow finishes."""
        fifo, heap = self.fifo, self.heap
        if not fifo:
            return heap[0][0]
        if heap and heap[0][0] < fifo[0][0]:
            return heap[0][0]
        return fifo[0][0]


class _Link:
    """One directed wide-area link: its flows, by cap, and their max-min fair rates.

    ``classes`` maps a cap to its :class:`_Class`, in the order they appeared;
    ``single`` is the class when there is just one. ``(key_t, key_s)`` is the
    link's next completion as an event key (``key_s`` -1: none); ``rep_s`` is its
    one live entry on the heap (-1: none), whose key ``(rep_t, rep_s)`` is never
    later than the completion's. ``stale``: flows joined at ``last`` since the
    rates and ``key_t`` were last set (see :meth:`refresh`).
    """

    __slots__ = (
        "capacity",
        "latency",
        "classes",
        "single",
        "last",
        "tag",
        "key_t",
        "key_s",
        "rep_t",
        "rep_s",
        "stale",
    )

    def __init__(self, capacity, latency, tag):
        self.capacity = capacity
        self.latency = latency
        self.classes = {}
        self.single = None
        self.last = 0.0
        self.tag = tag  # ~index: the x of its heap entries
        self.key_t, self.key_s = 0.0, -1
        self.rep_t, self.rep_s = 0.0, -1
        self.stale = False

    def refresh(self):
        """Set the rates and ``key_t`` for the flows joined at ``last``: the same
        numbers as if they had been set at each join, from the same state."""
        self.key_t = self.settle()
        self.stale = False

    def advance(self, now):
        """Run the classes' clocks up to ``now``."""
        dt = now - self.last
        if dt > 0.0:
            for c in self.classes.values():
                c.clock += c.rate * dt
        self.last = now

    def add(self, mid, nbytes, cap, seq):
        """A flow of ``nbytes`` from a sender of node rate ``cap`` joins (at ``last``)."""
        c = self.classes.get(cap)
        if c is None:
            c = self.classes[cap] = _Class(cap)
            self.single = c if len(self.classes) == 1 else None
        c.add((c.clock + nbytes, seq, mid))

    def pop(self):
        """Remove the flow that finishes first (at ``last``); return its message."""
        c = self.single or self.next_finish()[1]
        mid = c.pop()
        if not c.n:
            classes = self.classes
            del classes[c.cap]
            self.single = next(iter(classes.values())) if len(classes) == 1 else None
        return mid

    def settle(self):
        """Set the rates (water-filling); return when the next flow finishes, or
        None without flows."""
        c = self.single
        if c is not None:
            share = self.capacity / c.n
            c.rate = c.cap if c.cap <= share else share
            left = c.first() - c.clock
            return self.last + (left if left > 0.0 else 0.0) / c.rate
        if not self.classes:
            return None
        classes = self.classes
        left = self.capacity
        k = sum(c.n for c in classes.values())
        for cap in sorted(classes):  # the lowest caps are served in full
            c = classes[cap]
            share = left / k
            c.rate = cap if cap <= share else share
            left -= c.rate * c.n
            k -= c.n
        t = self.next_finish()[0]
        return t if t >= self.last else self.last  # rounding can leave left < 0

    def next_finish(self):
        """(time, class) of the flow that finishes first."""
        best = None
        for c in self.classes.values():
            left = c.first() - c.clock
            t = self.last + (left if left > 0.0 else 0.0) / c.rate
            if best is None or t < best[0]:
                best = (t, c)
        return best


class Events:
    """The pending events ``(time, seq, x)``, taken in ``(time, seq)`` order.

    ``times`` is a heap of the distinct later times, ``buckets`` their events, each
    a deque in ``seq`` order; ``now`` is the time being taken and ``cur`` the rest
    of its events.

    Examples
    --------
    >>> q = Events()
    >>> q.add((2.0, 0, 7)); q.add((1.0, 1, 8)); q.insert((2.0, -1, 9))
    >>> [q.pop() for _ in range(3)], q.pop(), q.now
    ([(1.0, 1, 8), (2.0, -1, 9), (2.0, 0, 7)], None, 2.0)
    """

    __slots__ = ("times", "buckets", "now", "cur")

    def __init__(self):
        self.times, self.buckets = [], {}
        self.now, self.cur = None, deque()

    def __bool__(self):
        return bool(self.cur or self.times)

    def add(self, e):
        """Queue the newest event (no event made later is queued yet)."""
        t = e[0]
        if t == self.now:
            self.cur.append(e)
            return
        b = self.buckets.get(t)
        if b is None:
            self.buckets[t] = deque((e,))
            heapq.heappush(self.times, t)
        else:
            b.append(e)

    def insert(self, e):
        """Queue an event made earlier than some queued ones, in its place."""
        t = e[0]
        if t == self.now:
            b = self.cur
        else:
            b = self.buckets.get(t)
            if b is None:
                self.buckets[t] = deque((e,))
                heapq.heappush(self.times, t)
                return
        i = len(b)
        while i and b[i - 1][1] > e[1]:
            i -= 1
        b.insert(i, e)

    def pop(self):
        """The next event, or None when none is left; sets ``now`` to its time."""
        cur = self.cur
        if not cur:
            if not self.times:
                return None
            t = self.now = heapq.heappop(self.times)
            cur = self.cur = self.buckets.pop(t)
        return cur.popleft()


def _queue_key(ordered, window, src, dst, flow, fbytes):
    """``key(message)``: the queue a flow waits in before it joins its link (see
    :func:`run_links`), or None when no flow waits."""
    if window is None:
        if not ordered:
            return None
        return lambda x: (src[x], dst[x])
    if not ordered:
        return lambda x: flow[x] if fbytes[x] <= window else ~x
    return lambda x: flow[x] if fbytes[x] <= window else (src[x], dst[x])


def run_links(engine):
    """Run the link model's events until no flow is left (see the module notes)."""
    events, seq = engine.events, engine.seq
    add, pop = events.add, events.pop
    flows, structure = engine.flows, engine.structure
    links = {j: _Link(p.bandwidth, p.latency, ~j) for j, p in flows.links.items()}
    flow, fbytes, rates = structure.flow, structure.fbytes, flows.rates
    src, dst, send_at = structure.src, structure.dst, structure.send_at
    arrival, blocked, advance = engine.arrival, engine.blocked, engine.advance
    wait, ends, pcs, clocks = flows.wait, engine.ends, engine.pc, engine.time
    prog, limits, st, overhead = (
        engine.progs,
        structure.limits,
        engine.starts,
        flows.overhead,
    )
    hpop = heapq.heappop
    # ordered: a pair of ranks has one flow on its link at a time; the others wait
    # in ``queued[(sender, receiver)]`` (present while the pair has a flow), and a
    # message let go when its predecessor has crossed is in ``granted``. A burst (a
    # message of at most ``window`` bytes) waits for the link's earlier bursts
    # instead, in ``queued[link]``.
    ordered, window = flows.ordered, flows.window
    queue_of = _queue_key(ordered, window, src, dst, flow, fbytes)
    queued, granted = {}, set()
    # wan_capacity: the links with flows share it equally (each at most its own
    # bandwidth); ``busy`` holds them, ``full`` their own bandwidths
    total = flows.wan_capacity
    busy, full = set(), {link: link.capacity for link in links.values()}

    def rebalance(now):
        """Give every busy link its share of ``total`` from ``now`` on."""
        share = total / len(busy) if busy else total
        for link in busy:
            capacity = min(full[link], share)
            if capacity == link.capacity:
                continue
            if link.stale:
                link.refresh()
            link.advance(now)
            link.capacity = capacity
            t = link.key_t = link.settle()
            k = link.key_s = next(seq)
            if link.rep_s < 0 or t < link.rep_t:  # earlier: a new entry
                link.rep_t, link.rep_s = t, k
                add((t, k, link.tag))
        for link in links.values():
            if link not in busy:
                link.capacity = min(full[link], share)

    while True:
        e = pop()
        if e is None:
            return
        now, s, x = e
        if x >= 0:  # the flow of message x joins its link
            if queue_of is not None:
                if x in granted:
                    granted.discard(x)
                else:
                    key = queue_of(x)
                    q = queued.get(key)
                    if q is not None:
                        q.append(x)
                        continue
                    queued[key] = deque()
            link = links[flow[x]]
            c = link.single
            cap = rates[src[x]]
            if c is not None and now == link.last and c.cap == cap:
                fifo = c.fifo
                v = c.clock + fbytes[x]
                if fifo and v >= fifo[-1][0]:
                    # The clock stands still and the flow is not the next to finish:
                    # the completion can only move later, so the heap entry stays
                    # valid as a lower bound, and the new rates can wait.
                    fifo.append((v, next(seq), x))
                    c.n += 1
                    link.key_s = next(seq)
                    link.stale = True
                    continue
            if link.stale:
                link.refresh()
            link.advance(now)
            idle = not link.classes
            link.add(x, fbytes[x], cap, next(seq))
            t = link.key_t = link.settle()
            link.stale = False
            k = link.key_s = next(seq)
            if link.rep_s < 0 or t < link.rep_t:
                link.rep_t, link.rep_s = t, k
                add((t, k, link.tag))
            if total is not None and idle:
                busy.add(link)
                rebalance(now)
            continue

        link = links[~x]
        if s != link.rep_s:
            continue  # superseded by an earlier entry for this link
        if s != link.key_s:  # a lower bound: renew it for the completion, if any
            k = link.rep_s = link.key_s
            if k >= 0:
                if link.stale:
                    link.refresh()
                link.rep_t = link.key_t
                events.insert((link.key_t, k, x))
            continue
        c = link.single
        if c is not None:  # one class: no water-filling
            dt = now - link.last
            if dt > 0.0:
                c.clock += c.rate * dt
            link.last = now
            fifo, h = c.fifo, c.heap
            if h and (not fifo or h[0] < fifo[0]):
                done = hpop(h)[2]
            else:
                done = fifo.popleft()[2]
            n = c.n = c.n - 1
            if n:
                share = link.capacity / n
                cap = c.cap
                rate = c.rate = cap if cap <= share else share
                if fifo:
                    v = fifo[0][0]
                    if h and h[0][0] < v:
                        v = h[0][0]
                else:
                    v = h[0][0]
                left = v - c.clock
                t = now + (left if left > 0.0 else 0.0) / rate
            else:
                del link.classes[c.cap]
                link.single = None
                t = None
        else:
            link.advance(now)
            done = link.pop()
            t = link.settle()
        if t is None:
            link.key_s = link.rep_s = -1
            if total is not None:
                busy.discard(link)
                rebalance(now)
        else:
            k = link.key_s = link.rep_s = next(seq)
            link.key_t = link.rep_t = t
            add((t, k, x))
        # the last byte of message `done` crossed at `now`: deliver it, and free
        # its sender unless the network buffered the message
        arrival[done] = now + link.latency
        if queue_of is not None:  # the pair's (or the link's) next message starts
            key = queue_of(done)
            q = queued[key]
            if q:
                x = q.popleft()
                granted.add(x)
                add((now, next(seq), x))
            else:
                del queued[key]
        if wait:
            if blocked[done]:
                blocked[done] = False
                advance([dst[done]])
            # the sender goes on (after the receiver, as in advance([sender, receiver]));
            # when its next step is a flow, it just waits again
            r = src[done]
            i = send_at[done]
            ends[i] = now
            clocks[r] = now
            i = pcs[r] = i + 1
            if i < limits[r]:
                code, a, _ = prog[i]
                if code == 0 and flow[a] is not None:
                    st[i] = now
                    add((now + overhead, next(seq), a))
                    continue
            advance([r])
        elif blocked[done]:
            blocked[done] = False
            advance([dst[done]])
