"""Prove a plan before it runs, by symbolic execution.

Every rank's program is executed on symbolic values: a block holds either a *leaf*
(one rank's contribution) or a combination of two values. Sends are asynchronous and
receives block, in program order; the k-th send from a to b meets b's k-th receive
from a. The prover proves that

- sends and receives match (peer, blocks, order) and the plan cannot deadlock;
- no step reads a block its rank does not hold, writes the read-only ``"in"`` buffer,
  writes a block the user's ``"out"`` buffer has no place for, or receives data the
  slot already holds (a block sent twice);
- every rank ends with exactly the data the operation promises, block by block;
- every combination is one the reduction level allows: ``strict`` (the one canonical
  expression, so results are bit-for-bit reproducible), ``associative`` (any grouping,
  rank order kept) or ``commutative`` (any grouping and order); each contribution once.

A plan whose ``arithmetic`` is ``"reproducible"`` combines exact accumulators
(:mod:`wacoll._kernels.repro`: a float SUM whose result has the same bits in any
order and grouping), so it proves level ``strict`` by keeping the commutative
level; with ``"plain"`` arithmetic a strict plan must follow the canonical
expression. The report says which arithmetic the proof assumed.

It also measures the plan: messages and bytes in total and across the wide area, the
most wide-area hops on any path from a data item's source to a rank, and MagPIe's two
conditions of wide-area optimality. The second condition depends on the operation's
semantics (MagPIe Section 2): for data movement a block must not enter a cluster that
already has it; for reductions one cluster must not send a block (in any partial
form) to another cluster twice.

Examples
--------
>>> from wacoll import Topology
>>> from wacoll.plans import build
>>> report = build("allreduce", Topology.from_sizes([4, 4]), "magpie",
...                level="associative").prove()
>>> report.wide_area_messages, report.max_wide_area_hops, report.optimality
(2, 1, 'yes')
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING

import numpy as np

from wacoll.errors import BlockProofIncomplete, PlanError, UnevenPiece
from wacoll.plans import operations as ops
from wacoll.plans.prover.encode import encode
from wacoll.plans.prover.flow import analyse
from wacoll.plans.prover.layout import Layout

if TYPE_CHECKING:
    from wacoll.plans.plan import Plan
from wacoll.plans.prover.pairing import pair
from wacoll.plans.prover.pieces import split
from wacoll.plans.prover.results import (
    Verdicts,
    final_out,
    first_failing,
    max_hops,
    measures,
    verify,
)
from wacoll.plans.prover.run import Run
from wacoll.plans.prover.values import (
    BlockReductions,
    Hops,
    Knowledge,
    Reductions,
    Repeats,
)

__all__ = ["ProofReport", "prove_plan", "Expressions", "canonical_expression"]


@dataclass(frozen=True)
class ProofReport:
    """What the prover proved and measured about a plan.

    Attributes
    ----------
    messages, bytes : int
        Messages and bytes in total.
    wide_area_messages, wide_area_bytes : int
        Messages and bytes that cross clusters.
    max_wide_area_hops : int
        The most wide-area links on any path from a data item's source to a rank
        (for a barrier: on the path by which a rank learns of another's arrival).
    single_latency : bool
        MagPIe's first condition: ``max_wide_area_hops <= 1``.
    no_repeated_data : bool
        MagPIe's second condition (see the module docstring).
    repeated : tuple
        Up to 8 examples violating the second condition: ``(block, cluster)`` for
        movement, ``(block, from_cluster, to_cluster)`` for reductions.
    steps : int
        Steps in all programs.
    max_sends : int
        The most messages any one rank sends.
    arithmetic : str
        ``"plain"`` or ``"reproducible"``: the arithmetic the proof assumed (with
        ``"reproducible"``, level ``strict`` is proved by the commutative rules).
    """

    op: str
    level: str | None
    messages: int
    bytes: int
    wide_area_messages: int
    wide_area_bytes: int
    max_wide_area_hops: int
    single_latency: bool
    no_repeated_data: bool
    repeated: tuple
    steps: int
    max_sends: int
    arithmetic: str = "plain"

    @property
    def wide_area_optimal(self) -> bool:
        """Both of MagPIe's conditions hold."""
        return self.single_latency and self.no_repeated_data

    @property
    def optimality(self) -> str:
        """MagPIe Table 1's column: ``"yes"``, ``"near"`` (one latency, data repeated)
        or ``"no"``."""
        if self.wide_area_optimal:
            return "yes"
        return "near" if self.single_latency else "no"

    def as_dict(self) -> dict:
        """The metrics as a plain dictionary (for tables and JSON)."""
        return {
            "messages": self.messages,
            "bytes": self.bytes,
            "wide_area_messages": self.wide_area_messages,
            "wide_area_bytes": self.wide_area_bytes,
            "max_wide_area_hops": self.max_wide_area_hops,
            "wide_area_optimal": self.wide_area_optimal,
            "optimality": self.optimality,
            "steps": self.steps,
            "max_sends": self.max_sends,
            "arithmetic": self.arithmetic,
        }


class Expressions:
    """Interned binary expressions over rank leaves; ids ``0..size-1`` are the leaves.

    The prover's reductions name the value of a block by the id of its expression
    (:mod:`wacoll.plans.prover.values`); :func:`canonical_expression` builds the
    expression a level ``strict`` reduction must compute.

    Attributes
    ----------
    left, right : list of int
        Per expression, its operands' ids (-1 for a leaf).
    mask : list of int
        Per expression, the ranks it combines, as bits.
    lo, hi : list of int
        Per expression, its lowest and highest rank.
    ordered : list of bool
        Per expression, whether its leaves, read in order, ascend contiguously from
        ``lo`` to ``hi`` (the rank order level ``associative`` keeps).
    index : dict
        The id of each combination made, by its ``(left, right)``.

    Examples
    --------
    >>> ex = Expressions(3)
    >>> e = ex.make(ex.make(0, 1), 2)
    >>> e, ex.mask[e], ex.ordered[e], ex.make(0, 1) == ex.left[e]
    (4, 7, True, True)
    """

    def __init__(self, size):
        self.index = {}
        self.left = [-1] * size
        self.right = [-1] * size
        self.mask = [1 << r for r in range(size)]
        self.lo = list(range(size))
        self.hi = list(range(size))
        self.ordered = [True] * size  # in-order leaves ascend contiguously lo..hi

    def make(self, a, b):
        """The id of ``a`` combined with ``b`` (``a`` on the left), made on first use."""
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
        """Add to the set ``into`` the ids of ``e`` and of all its operands, down to
        the leaves (those already in ``into`` are not walked again)."""
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


def _layout_fault(plan):
    """The error of a plan with the wrong number of blocks for its operation, or None."""
    s = ops.spec(plan.op)
    nb = plan.nblocks
    want = {"none": 0, "per_rank": plan.size, "pairs": plan.size * plan.size}.get(
        s.layout
    )
    if want is not None and nb != want:
        return PlanError(
            f"{plan.op} on {plan.size} ranks has {want} blocks; the plan has {nb}"
        )
    if s.layout == "segments" and nb < 1:
        return PlanError(f"{plan.op} needs at least one segment block")
    return None


def _canonical(exprs, forms):
    """The canonical expression of each form and the set of all their parts; the
    folds ``("fold", n)`` are built once, each from the one before."""
    canonical, parts = {}, set()
    top = max((n for kind, n in forms if kind == "fold"), default=0)
    e = 0
    for n in range(1, top + 1):
        if n > 1:
            e = exprs.make(e, n - 1)
        parts.update((e, n - 1))
        if ("fold", n) in forms:
            canonical[("fold", n)] = e
    for form in forms:
        if form[0] != "fold":
            canonical[form] = e = canonical_expression(exprs, *form)
            exprs.subexpressions(e, parts)
    return canonical, parts


def prove_plan(plan: Plan, *, block_pass: bool = True) -> ProofReport:
    """Prove ``plan`` and measure it; raise :class:`PlanError` naming the fault.

    Prefer :meth:`wacoll.plans.Plan.prove`, which caches the report.

    A reduction is first proved block by block by the compiled pass (fast, for a
    correct plan); what that pass does not prove goes to the exact pass, a step at a
    time, which names the fault. ``block_pass=False`` runs the exact pass alone (the
    tests hold the two passes against each other).
    """
    steps = encode(plan)
    pairing = pair(plan, steps)  # pairing errors first: they name both ends
    fault = _layout_fault(plan)
    if fault is not None:
        raise fault
    kind = ops.spec(plan.op).kind
    # exact accumulators make any order and grouping give the strict bits
    level = "commutative" if plan.arithmetic == "reproducible" else plan.level
    cluster_ids, clusters = np.unique(np.asarray(plan.clusters), return_inverse=True)
    clusters = clusters.ravel().astype(np.int64)
    layout = Layout(plan.op, plan.size, plan.root, plan.nblocks)
    cut = split(steps, layout)
    args = (layout, pairing, kind, level, clusters, cluster_ids.tolist())
    if kind == "reduction" and block_pass:
        # the compiled pass proves a correct plan block by block; anything else is
        # left to the exact pass below, which names the fault
        try:
            return _prove(plan, cut, *args, by_blocks=True)
        except (BlockProofIncomplete, PlanError):
            pass
    try:
        return _prove(plan, cut, *args)
    except UnevenPiece:  # a received piece's blocks differ: take every block alone
        return _prove(plan, split(steps, layout, blocks=True), *args)


def _prove(
    plan, steps, layout, pairing, kind, level, clusters, cluster_ids, *, by_blocks=False
):
    """The run and the report of :func:`prove_plan`, on ``steps`` cut into pieces
    (``by_blocks``: a reduction's values kept per block by the compiled pass of
    :class:`~wacoll.plans.prover.values.BlockReductions`, which raises
    :class:`~wacoll.errors.BlockProofIncomplete` where it does not prove the plan)."""
    flow = analyse(plan, steps, layout=layout, level=level)
    verdicts = None
    if kind == "reduction":
        exprs = Expressions(plan.size)
        forms = set()
        if level == "strict" and plan.nblocks:
            expecting = flow.layout.expected_count() > 0
            forms = {flow.layout.form(r) for r in np.flatnonzero(expecting).tolist()}
        canonical, parts = _canonical(exprs, forms)
        values = (BlockReductions if by_blocks else Reductions)(
            steps, flow, exprs, level, parts
        )
        verdicts = Verdicts(exprs, level, canonical)
    elif kind == "barrier":
        values = Knowledge(plan.size)
    else:
        values = Hops(steps, flow)
    repeats = None
    if kind != "barrier":
        repeats = Repeats(
            steps, pairing, flow.layout, clusters, cluster_ids, kind == "reduction"
        )
    Run(plan, steps, pairing, flow, clusters, values, repeats).run()
    final = None if kind == "barrier" else final_out(plan, steps, flow)
    if by_blocks:
        if (
            first_failing(
                plan,
                steps,
                flow,
                SimpleNamespace(expr=values.val),
                verdicts,
                values.final(final),
            )
            is not None
        ):
            raise BlockProofIncomplete(None)
        hops = int(values.hops[final[3]].max()) if len(final[3]) else 0
    else:
        verify(plan, steps, flow, values, verdicts, final=final)
        hops = max_hops(plan, steps, flow, values, final=final)
    found = repeats.items if repeats is not None else []
    return ProofReport(
        op=plan.op,
        level=plan.level,
        **measures(plan, steps, pairing, clusters),
        max_wide_area_hops=hops,
        single_latency=hops <= 1,
        no_repeated_data=not (repeats is not None and repeats.any),
        repeated=tuple(found),
        arithmetic=plan.arithmetic,
    )
