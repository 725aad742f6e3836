"""The prover as it was before proofs scaled: a test oracle, not used by wacoll.

Every rank's program is run on symbolic values, one dictionary entry per (rank,
buffer, block), in the order of a work queue of ranks. The tests run it beside
:func:`wacoll.plans.prove_plan` on many plans, correct and broken, and require the
same report or the same error (message, rank and step), so that the faster prover
proves exactly what this one proved.
"""

from __future__ import annotations

from collections import deque

from wacoll.errors import PlanError
from wacoll.plans import operations as ops
from wacoll.plans.prove import ProofReport

__all__ = ["prove_plan", "canonical_expression"]


class _Exprs:
    """Interned binary expressions over rank leaves; ids ``0..size-1`` are the leaves."""

    def __init__(self, size):
        self.index = {}
        self.left = [-1] * size
        self.right = [-1] * size
        self.mask = [1 << r for r in range(size)]
        self.lo = list(range(size))
        self.hi = list(range(size))
        self.ordered = [True] * size  # in-order leaves ascend contiguously lo..hi

    def make(self, a, b):
        key = (a, b)
        e = self.index.get(key)
        if e is None:
            e = len(self.left)
            self.index[key] = e
            self.left.append(a)
            self.right.append(b)
            self.mask.append(self.mask[a] | self.mask[b])
            self.lo.append(min(self.lo[a], self.lo[b]))
            self.hi.append(max(self.hi[a], self.hi[b]))
            self.ordered.append(
                self.ordered[a] and self.ordered[b] and self.hi[a] + 1 == self.lo[b]
            )
        return e

    def subexpressions(self, e, into):
        stack = [e]
        while stack:
            x = stack.pop()
            if x in into:
                continue
            into.add(x)
            if self.left[x] >= 0:
                stack.append(self.left[x])
                stack.append(self.right[x])


def canonical_expression(exprs, form, n):
    """The canonical expression id for ``("tree", n)`` or ``("fold", n)``.

    ``tree``: the binomial reduce tree rooted at rank 0, operands in rank order, as
    MPICH builds it for non-commutative operators; for 8 ranks
    ``((x0+x1)+(x2+x3))+((x4+x5)+(x6+x7))``. ``fold``: ``((x0+x1)+x2)+...``, the
    prefix a chain scan computes.
    """
    if form == "fold":
        e = 0
        for r in range(1, n):
            e = exprs.make(e, r)
        return e
    acc = list(range(n))
    mask = 1
    while mask < n:
        for v in range(0, n, 2 * mask):
            if v + mask < n:
                acc[v] = exprs.make(acc[v], acc[v + mask])
        mask *= 2
    return acc[0]


def _ranks(mask):
    out, r = [], 0
    while mask:
        if mask & 1:
            out.append(r)
        mask >>= 1
        r += 1
    return out


def _fmt_ranks(ranks, limit=6):
    text = ", ".join(map(str, ranks[:limit]))
    return text + (", ..." if len(ranks) > limit else "")


class _Checker:
    def __init__(self, plan):
        self.plan = plan
        self.size = size = plan.size
        self.spec = ops.spec(plan.op)
        self.kind = self.spec.kind
        # exact accumulators make any order and grouping give the strict bits
        self.level = "commutative" if plan.arithmetic == "reproducible" else plan.level
        self.clusters = plan.clusters
        nb = plan.nblocks
        self._validate_layout(nb)
        self.exprs = _Exprs(size)
        self.out_allowed = [
            frozenset(ops.out_blocks(plan.op, size, plan.root, nb, r))
            for r in range(size)
        ]
        self.expected = [
            ops.expected(plan.op, size, plan.root, nb, r) for r in range(size)
        ]
        self.state = []
        for r in range(size):
            init = ops.initial(plan.op, size, plan.root, nb, r)
            self.state.append({key: (src, 0) for key, src in init.items()})
        self.canonical = {}
        self.canonical_set = set()
        if self.kind == "reduction" and self.level == "strict":
            for exp in self.expected:
                for form in exp.values():
                    if form not in self.canonical:
                        e = canonical_expression(self.exprs, *form)
                        self.canonical[form] = e
                        self.exprs.subexpressions(e, self.canonical_set)
        # where each moved block already is, for MagPIe's second condition
        self.visited = {}
        if self.kind == "movement":
            for r in range(size):
                for _buf, b in self.state[r]:
                    self.visited.setdefault(b, set()).add(self.clusters[r])
        self.buffers = [{buf for buf, _ in self.state[r]} for r in range(size)]
        self.sent_pairs = set()
        self.repeated = []
        self.any_repeat = False
        self.knowledge = None
        if self.kind == "barrier":
            self.knowledge = [{r: 0} for r in range(size)]
        self.messages = self.bytes = self.wan_messages = self.wan_bytes = 0
        self.sends = [0] * size

    def _validate_layout(self, nb):
        plan, s = self.plan, self.spec
        want = {"none": 0, "per_rank": plan.size, "pairs": plan.size * plan.size}.get(
            s.layout
        )
        if want is not None and nb != want:
            raise PlanError(
                f"{plan.op} on {plan.size} ranks has {want} blocks; the plan has {nb}"
            )
        if s.layout == "segments" and nb < 1:
            raise PlanError(f"{plan.op} needs at least one segment block")

    # ------------------------------------------------------------- errors
    def fail(self, r, i, text):
        step = self.plan.programs[r][i]
        raise PlanError(f"rank {r} step {i} ({step}): {text}", rank=r, step=i)

    # ------------------------------------------------------------ values
    def read(self, r, i, buf, b):
        if b >= self.plan.nblocks:
            self.fail(
                r, i, f"block {b} does not exist (the plan has {self.plan.nblocks})"
            )
        value = self.state[r].get((buf, b))
        if value is None:
            self.fail(r, i, f"reads block {b} of {buf!r}, which rank {r} does not hold")
        return value

    def write(self, r, i, buf, b, value):
        if b >= self.plan.nblocks:
            self.fail(
                r, i, f"block {b} does not exist (the plan has {self.plan.nblocks})"
            )
        if buf == "in":
            self.fail(r, i, "writes to 'in', the user's read-only send buffer")
        if buf == "out" and b not in self.out_allowed[r]:
            self.fail(
                r, i, f"writes block {b} to 'out', which has no place for it on rank {r}"
            )
        self.buffers[r].add(buf)
        self.state[r][(buf, b)] = value

    def combine(self, r, i, acc, incoming, side):
        if self.kind != "reduction":
            self.fail(r, i, f"{self.plan.op} moves data and cannot combine it")
        a, b = (acc, incoming) if side == "right" else (incoming, acc)
        ex = self.exprs
        overlap = ex.mask[a[0]] & ex.mask[b[0]]
        if overlap:
            self.fail(
                r,
                i,
                f"combines the contribution of rank {_fmt_ranks(_ranks(overlap))} twice",
            )
        e = ex.make(a[0], b[0])
        if self.level == "associative" and not ex.ordered[e]:
            self.fail(
                r,
                i,
                f"puts ranks {ex.lo[a[0]]}..{ex.hi[a[0]]} before ranks "
                f"{ex.lo[b[0]]}..{ex.hi[b[0]]}, breaking rank order (level "
                f"'associative' keeps operands in rank order)",
            )
        if self.level == "strict" and e not in self.canonical_set:
            self.fail(
                r,
                i,
                "computes a combination that is not part of the canonical "
                "expression (level 'strict' needs the one fixed expression)",
            )
        return (e, max(a[1], b[1]))

    # ----------------------------------------------------------- execution
    def run(self):
        plan, size = self.plan, self.size
        programs = plan.programs
        pc = [0] * size
        channels = {}
        waiting = {}  # rank -> peer it waits for
        work = deque(range(size))
        queued = set(range(size))
        while work:
            r = work.popleft()
            queued.discard(r)
            prog = programs[r]
            while pc[r] < len(prog):
                i = pc[r]
                step = prog[i]
                kind = step.kind
                if kind in ("send", "recv", "recv_combine"):
                    p = step.peer
                    if not (0 <= p < size) or p == r:
                        self.fail(r, i, f"peer {p} is not another rank of 0..{size - 1}")
                if step.group and self.level != "commutative":
                    self.fail(r, i, "arrival-order combining needs level 'commutative'")
                if kind == "send":
                    self.do_send(r, i, step, channels)
                    q = step.peer
                    if waiting.get(q) == r and q not in queued:
                        del waiting[q]
                        work.append(q)
                        queued.add(q)
                elif kind in ("recv", "recv_combine"):
                    chan = channels.get((step.peer, r))
                    if not chan:
                        waiting[r] = step.peer
                        break
                    self.do_recv(r, i, step, chan.popleft())
                elif kind == "copy":
                    for b in step.blocks:
                        self.write(r, i, step.dst, b, self.read(r, i, step.src, b))
                else:  # combine
                    for b in step.blocks:
                        value = self.combine(
                            r,
                            i,
                            self.read(r, i, step.dst, b),
                            self.read(r, i, step.src, b),
                            step.side,
                        )
                        self.write(r, i, step.dst, b, value)
                pc[r] += 1
        stuck = [r for r in range(size) if pc[r] < len(programs[r])]
        if stuck:
            self.deadlock(stuck, pc)
        for (a, b), chan in sorted(channels.items()):
            if chan:
                msg = chan[0]
                raise PlanError(
                    f"rank {a} step {msg[0]} sends to {b}, which never receives it",
                    rank=a,
                    step=msg[0],
                )
        self.verify_results()
        return self.report()

    def do_send(self, r, i, step, channels):
        plan = self.plan
        values = [self.read(r, i, step.src, b) for b in step.blocks]
        dst = step.peer
        c_src, c_dst = self.clusters[r], self.clusters[dst]
        nbytes = plan.nbytes(step.blocks)
        self.messages += 1
        self.bytes += nbytes
        self.sends[r] += 1
        know = None
        if self.knowledge is not None:
            know = self.knowledge[r]
        if c_src != c_dst:
            self.wan_messages += 1
            self.wan_bytes += nbytes
            values = [(e, h + 1) for e, h in values]
            if know is not None:
                know = {k: h + 1 for k, h in know.items()}
            self.account_wide_area(step.blocks, c_src, c_dst)
        elif know is not None:
            know = dict(know)
        channels.setdefault((r, dst), deque()).append((i, step.blocks, values, know))

    def account_wide_area(self, blocks, c_src, c_dst):
        if self.kind == "movement":
            for b in blocks:
                seen = self.visited.setdefault(b, set())
                if c_dst in seen:
                    self._repeat((b, c_dst))
                seen.add(c_dst)
        elif self.kind == "reduction":
            for b in blocks:
                key = (b, c_src, c_dst)
                if key in self.sent_pairs:
                    self._repeat(key)
                self.sent_pairs.add(key)

    def _repeat(self, item):
        self.any_repeat = True
        if len(self.repeated) < 8:
            self.repeated.append(item)

    def do_recv(self, r, i, step, msg):
        send_index, blocks, values, know = msg
        if blocks != step.blocks:
            self.fail(
                r,
                i,
                f"expects blocks {list(step.blocks)} from {step.peer}, but the "
                f"message (rank {step.peer} step {send_index}) carries "
                f"{list(blocks)}",
            )
        if know is not None:
            mine = self.knowledge[r]
            for k, h in know.items():
                if k not in mine or h < mine[k]:
                    mine[k] = h
        for b, value in zip(blocks, values):
            if step.kind == "recv":
                held = self.holder(r, b, value[0])
                if held is not None:
                    self.fail(
                        r,
                        i,
                        f"receives block {b} into {step.dst!r}, but rank {r} "
                        f"already holds that data in {held!r} (a block sent "
                        f"twice)",
                    )
                self.write(r, i, step.dst, b, value)
            else:
                acc = self.read(r, i, step.dst, b)
                self.write(r, i, step.dst, b, self.combine(r, i, acc, value, step.side))

    def holder(self, r, b, expr):
        """The buffer in which rank ``r`` already holds ``expr`` for block ``b``, if any."""
        for buf in sorted(self.buffers[r]):  # (a set: in name order, to be deterministic)
            held = self.state[r].get((buf, b))
            if held is not None and held[0] == expr:
                return buf
        return None

    def deadlock(self, stuck, pc):
        programs = self.plan.programs
        parts = []
        for r in stuck[:4]:
            step = programs[r][pc[r]]
            parts.append(f"rank {r} waits at step {pc[r]} ({step})")
        more = f" and {len(stuck) - 4} more" if len(stuck) > 4 else ""
        r = stuck[0]
        raise PlanError(
            "deadlock: " + "; ".join(parts) + more + " for messages that are never sent",
            rank=r,
            step=pc[r],
        )

    # ------------------------------------------------------------ results
    def verify_results(self):
        ex = self.exprs
        for r in range(self.size):
            state = self.state[r]
            for key, want in sorted(self.expected[r].items()):
                buf, b = key
                got = state.get(key)
                if got is None:
                    raise PlanError(f"rank {r} ends without block {b} in {buf!r}", rank=r)
                e = got[0]
                if self.kind == "movement":
                    if e != want:
                        raise PlanError(
                            f"rank {r} block {b} of {buf!r} holds the data of "
                            f"rank {e}, expected rank {want}",
                            rank=r,
                        )
                    continue
                form, n = want
                full = (1 << n) - 1
                mask = ex.mask[e]
                if mask != full:
                    lacking = _ranks(full & ~mask)
                    extra = _ranks(mask & ~full)
                    what = (
                        f"lacks the contributions of ranks {_fmt_ranks(lacking)}"
                        if lacking
                        else f"has extra contributions of ranks {_fmt_ranks(extra)}"
                    )
                    raise PlanError(f"rank {r} block {b} of {buf!r} {what}", rank=r)
                if self.level == "strict" and e != self.canonical[want]:
                    raise PlanError(
                        f"rank {r} block {b} of {buf!r} is not the canonical "
                        f"expression of level 'strict'",
                        rank=r,
                    )
                if self.level == "associative" and not ex.ordered[e]:
                    raise PlanError(
                        f"rank {r} block {b} of {buf!r} is not in rank order", rank=r
                    )
        if self.knowledge is not None:
            for r in range(self.size):
                if len(self.knowledge[r]) != self.size:
                    missing = sorted(set(range(self.size)) - set(self.knowledge[r]))
                    raise PlanError(
                        f"rank {r} leaves the barrier without hearing from "
                        f"ranks {_fmt_ranks(missing)}",
                        rank=r,
                    )

    def max_hops(self):
        if self.knowledge is not None:
            return max((max(k.values()) for k in self.knowledge), default=0)
        hops = 0
        for r in range(self.size):
            for key in self.expected[r]:
                hops = max(hops, self.state[r][key][1])
        return hops

    def report(self):
        hops = self.max_hops()
        return ProofReport(
            op=self.plan.op,
            level=self.plan.level,
            messages=self.messages,
            bytes=self.bytes,
            wide_area_messages=self.wan_messages,
            wide_area_bytes=self.wan_bytes,
            max_wide_area_hops=hops,
            single_latency=hops <= 1,
            no_repeated_data=not self.any_repeat,
            repeated=tuple(self.repeated),
            steps=sum(len(p) for p in self.plan.programs),
            max_sends=max(self.sends),
            arithmetic=self.plan.arithmetic,
        )


def prove_plan(plan) -> ProofReport:
    """Prove ``plan`` and measure it; raise :class:`PlanError` naming the fault.

    Unlike :meth:`wacoll.plans.Plan.prove`, nothing is cached on the plan.
    """
    plan.messages()  # pairing errors first: they name both ends
    return _Checker(plan).run()
