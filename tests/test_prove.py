"""The prover proves correct plans and rejects broken ones, naming rank and step."""

import dataclasses

import pytest

from wacoll import PlanError, Topology
from wacoll.plans import build
from wacoll.plans.builder import PlanBuilder
from wacoll.plans.plan import Plan, Step
from wacoll.plans.prove import Expressions, canonical_expression


def mutate(plan, rank, edit):
    """A copy of ``plan`` whose program of ``rank`` is ``edit(list_of_steps)``."""
    programs = [list(p) for p in plan.programs]
    programs[rank] = edit(programs[rank])
    return dataclasses.replace(plan, programs=tuple(tuple(p) for p in programs))


def lam_reduce(level="associative"):
    return build("reduce", Topology.single(32), "tree", tree="lam", level=level)


def test_correct_plan_passes_and_reports_metrics():
    report = lam_reduce().prove()
    assert report.messages == 31
    assert report.wide_area_messages == 0
    assert report.optimality == "yes"


def test_dropped_step_names_rank_and_step():
    plan = lam_reduce()
    broken = mutate(plan, 12, lambda steps: steps[:1] + steps[2:])  # drop recv from 13
    with pytest.raises(PlanError, match=r"rank 13 step 0 sends to 12, which never") as e:
        broken.prove()
    assert (e.value.rank, e.value.step) == (13, 0)


def test_changed_peer_is_caught():
    plan = lam_reduce()
    broken = mutate(
        plan, 13, lambda steps: steps[:-1] + [dataclasses.replace(steps[-1], peer=14)]
    )
    # rank 13 now sends to 14, which has no receive for it; 12 waits in vain
    with pytest.raises(
        PlanError,
        match=r"rank 12 step 1 receives from 13, which never "
        r"sends it",
    ) as e:
        broken.prove()
    assert (e.value.rank, e.value.step) == (12, 1)


def test_swapped_non_commutative_combines_break_rank_order():
    plan = lam_reduce()
    broken = mutate(plan, 12, lambda s: [s[0], s[2], s[1], s[3]])
    with pytest.raises(PlanError, match=r"rank 12 step 1 .* breaking rank order") as e:
        broken.prove()
    assert (e.value.rank, e.value.step) == (12, 1)
    # the same swap is fine when the operator commutes
    commutative = lam_reduce("commutative")
    mutate(commutative, 12, lambda s: [s[0], s[2], s[1], s[3]]).prove()


def test_block_sent_twice_is_caught_for_reductions_and_movement():
    plan = lam_reduce("commutative")
    twice = mutate(plan, 13, lambda s: s + [s[-1]])
    twice = mutate(twice, 12, lambda s: s[:2] + [s[1]] + s[2:])
    with pytest.raises(
        PlanError, match=r"rank 12 step 2 .* contribution of rank 13 twice"
    ):
        twice.prove()
    bcast = build("bcast", Topology.single(4), "tree", tree="flat")
    again = mutate(bcast, 0, lambda s: s + [s[0]])
    again = mutate(again, 1, lambda s: s + s)
    with pytest.raises(
        PlanError, match=r"rank 1 step 1 .* already holds that data in .out."
    ):
        again.prove()


def test_deadlock_is_detected():
    b = PlanBuilder("allgather", Topology.single(2))
    for r in (0, 1):
        b.copy(r, (r,), "in", "out")
        b.recv(r, 1 - r, (1 - r,), "out")
        b.send(r, 1 - r, (r,), "out")
    with pytest.raises(PlanError, match="deadlock: rank 0 waits at step 1"):
        b.build().prove()


def test_message_contents_must_match():
    b = PlanBuilder("allgather", Topology.single(2))
    for r in (0, 1):
        b.copy(r, (r,), "in", "out")
        b.send(r, 1 - r, (r,), "out")
    b.recv(0, 1, (1,), "out")
    b.recv(1, 0, (1,), "out")
    with pytest.raises(PlanError, match=r"rank 1 step 2 .*expects blocks \[1\] from 0"):
        b.build().prove()


def test_buffers_are_respected():
    b = PlanBuilder("gather", Topology.single(2), root=0)
    b.transfer(1, 0, (1,), "in", "in")
    with pytest.raises(PlanError, match="writes to 'in'"):
        b.build().prove()
    b = PlanBuilder("gather", Topology.single(2), root=0)
    b.copy(0, (0,), "in", "out")
    b.copy(1, (1,), "in", "out")
    with pytest.raises(PlanError, match="rank 1 step 0 .*no place for it on rank 1"):
        b.build().prove()
    b = PlanBuilder("gather", Topology.single(2), root=0)
    b.transfer(1, 0, (0,), "in", "out")
    with pytest.raises(
        PlanError, match="reads block 0 of 'in', which rank 1 does not hold"
    ):
        b.build().prove()


def test_results_are_verified():
    b = PlanBuilder("bcast", Topology.single(3), root=0)
    b.transfer(0, 1, (0,))
    with pytest.raises(PlanError, match="rank 2 ends without block 0 in 'out'"):
        b.build().prove()
    b = PlanBuilder("allreduce", Topology.single(3), level="commutative")
    for r in range(3):
        b.copy(r, (0,), "in", "out")
    b.transfer_combine(1, 0, (0,), "in", "out")
    b.transfer(0, 1, (0,), "out", "acc")
    b.copy(1, (0,), "acc", "out")
    b.transfer(0, 2, (0,), "out", "acc")
    b.copy(2, (0,), "acc", "out")
    with pytest.raises(
        PlanError, match="rank 0 block 0 of 'out' lacks the contributions of ranks 2"
    ):
        b.build().prove()


def test_strict_level_needs_the_canonical_expression():
    flat = build("reduce", Topology.single(4), "tree", tree="flat", level="strict")
    with pytest.raises(PlanError, match="not part of the canonical expression"):
        flat.prove()
    build("reduce", Topology.single(8), "tree", tree="lam", level="strict").prove()
    # LAM is linear up to 4 processes, which is not the canonical expression
    with pytest.raises(PlanError, match="canonical"):
        build("reduce", Topology.single(4), "tree", tree="lam", level="strict").prove()


def test_arrival_order_groups_need_commutative():
    plan = build(
        "reduce",
        Topology.single(5),
        "tree",
        tree="flat",
        level="commutative",
        arrival=True,
    )
    plan.prove()
    assert any(s.group for s in plan.programs[0])
    forced = dataclasses.replace(plan, level="associative")
    with pytest.raises(
        PlanError, match="arrival-order combining needs level 'commutative'"
    ):
        forced.prove()


def test_canonical_expressions():
    ex = Expressions(8)

    def show(e):
        if ex.left[e] < 0:
            return str(e)
        return f"({show(ex.left[e])}+{show(ex.right[e])})"

    assert show(canonical_expression(ex, "tree", 8)) == "(((0+1)+(2+3))+((4+5)+(6+7)))"
    assert show(canonical_expression(ex, "tree", 5)) == "(((0+1)+(2+3))+4)"
    assert show(canonical_expression(ex, "fold", 4)) == "(((0+1)+2)+3)"


def test_plan_validates_its_fields():
    with pytest.raises(PlanError, match="bcast needs a root"):
        Plan("bcast", 2, None, (1,), ((), ()), (0, 0))
    with pytest.raises(PlanError, match="needs a reduction level"):
        Plan("reduce", 2, 0, (1,), ((), ()), (0, 0))
    with pytest.raises(PlanError, match="2 programs for 3 ranks"):
        Plan("barrier", 3, None, (), ((), ()), (0, 0, 0))
    with pytest.raises(PlanError, match="unknown step kind"):
        Step("jump", (0,), peer=1)
    with pytest.raises(PlanError, match="side must be 'left' or 'right'"):
        Step("combine", (0,), src="a", dst="b")
    with pytest.raises(PlanError, match="needs a buffer name for src"):
        Step("send", (0,), peer=1, src="Bad Name")
    with pytest.raises(PlanError, match="has 4 blocks; the plan has 1"):
        Plan("gather", 4, 0, (1,), ((),) * 4, (0,) * 4).prove()


def test_message_graph_view():
    topo = Topology.from_sizes([2, 2])
    g = build(
        "bcast", topo, "tree", tree="two-level", count=100, itemsize=8
    ).message_graph()
    assert g.number_of_edges() == 3
    assert {r: d["cluster"] for r, d in g.nodes(data=True)} == {0: 0, 1: 0, 2: 1, 3: 1}
    wan = [(u, v, d["bytes"]) for u, v, d in g.edges(data=True) if d["wide_area"]]
    assert wan == [(0, 2, 800)]


def test_plans_are_comparable_and_cache_their_report():
    a = lam_reduce()
    b = lam_reduce()
    assert a == b and hash(a) == hash(b)
    assert not a.proved
    report = a.prove()
    assert a.proved and a.prove() is report
    assert a == b  # the cache does not take part in equality


def test_block_delivered_again_into_another_buffer_is_caught():
    bcast = build("bcast", Topology.single(3), "tree", tree="flat")
    again = mutate(bcast, 0, lambda s: s + [Step("send", (0,), peer=2, src="out")])
    again = mutate(again, 2, lambda s: s + [Step("recv", (0,), peer=0, dst="tmp")])
    with pytest.raises(
        PlanError,
        match=r"rank 2 step 1 .* already holds that data in "
        r"'out' \(a block sent twice\)",
    ) as e:
        again.prove()
    assert (e.value.rank, e.value.step) == (2, 1)
