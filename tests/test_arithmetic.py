"""Reproducible arithmetic in the plan world: the prover, plans and the policy."""

from __future__ import annotations

import dataclasses

import pytest

from wacoll import Topology
from wacoll.errors import PlanError
from wacoll.plans import Call, Policy, build, lower, select
from wacoll.plans.select import predicted_time

GRID = Topology.from_sizes([2, 2, 2, 2])
REORDERED = Topology.from_clusters([[0, 3, 6], [1, 4], [2, 5, 7]])
ONE = Topology.single(5)
REDUCTIONS = ("reduce", "allreduce", "reduce_scatter_block", "scan", "exscan")


def commutative_plan(op, topology):
    kw = {"root": 2} if op == "reduce" else {}
    return build(op, topology, "magpie", level="commutative", count=16, itemsize=32, **kw)


@pytest.mark.parametrize("op", REDUCTIONS)
@pytest.mark.parametrize("topology", [GRID, REORDERED], ids=["grid", "reordered"])
def test_checker_proves_strict_only_with_reproducible_arithmetic(op, topology):
    plan = commutative_plan(op, topology)
    if plan.algorithm != "coordinator":
        pytest.skip(
            f"magpie builds no coordinator plan for {op} on this layout (it "
            f"runs {plan.algorithm!r}): no commutative-only plan to check"
        )
    plain = dataclasses.replace(plan, level="strict")
    with pytest.raises(PlanError, match="canonical"):
        plain.prove()
    repro = dataclasses.replace(plan, level="strict", arithmetic="reproducible")
    report = repro.prove()
    assert (report.level, report.arithmetic) == ("strict", "reproducible")
    assert report.as_dict()["arithmetic"] == "reproducible"
    assert lower(repro, 0).arithmetic == "reproducible"
    assert lower(plan, 0).arithmetic == "plain"


def test_reproducible_arithmetic_still_needs_each_contribution_once():
    plan = commutative_plan("allreduce", GRID)
    programs = list(plan.programs)
    programs[0] = programs[0][:-1]  # rank 0 drops its last step
    broken = dataclasses.replace(
        plan, level="strict", arithmetic="reproducible", programs=tuple(programs)
    )
    with pytest.raises(PlanError):
        broken.prove()


def test_plan_arithmetic_validated():
    plan = build("bcast", GRID, "magpie", count=4)
    with pytest.raises(PlanError, match="not a reduction"):
        dataclasses.replace(plan, arithmetic="reproducible")
    with pytest.raises(PlanError, match="arithmetic must be one of"):
        dataclasses.replace(commutative_plan("reduce", GRID), arithmetic="exact")


def call(op="allreduce", count=128, **kw):
    kw.setdefault("level", "strict")
    kw.setdefault("accumulator_itemsize", 16)  # a packed float64 partial sum
    return Call(op, count=count, itemsize=8, root=0 if op == "reduce" else None, **kw)


@pytest.mark.parametrize(
    "topology", [GRID, REORDERED, ONE], ids=["grid", "reordered", "one"]
)
def test_auto_depends_on_the_call_not_the_topology(topology):
    small, big = call(count=511), call(count=512)  # 4 KiB of float64 is the threshold
    assert select(small, topology).arithmetic == "reproducible"
    assert select(big, topology).arithmetic == "plain"
    plan = select(small, topology).build(topology)
    assert (plan.level, plan.arithmetic, plan.itemsize) == ("strict", "reproducible", 16)
    assert select(big, topology).build(topology).arithmetic == "plain"
    lower_threshold = Policy(reproducible_below=1024)
    assert select(small, topology, policy=lower_threshold).arithmetic == "plain"


def test_only_strict_float_sums_take_accumulators():
    assert select(call(level="commutative"), GRID).arithmetic == "plain"
    assert select(call(accumulator_itemsize=0), GRID).arithmetic == "plain"
    assert select(call(level="associative"), GRID).arithmetic == "plain"
    forced = Policy(arithmetic="reproducible")
    assert (
        select(
            Call("bcast", count=4, itemsize=8, root=0, accumulator_itemsize=32),
            GRID,
            policy=forced,
        ).arithmetic
        == "plain"
    )


def test_forced_arithmetics_and_families():
    big = call(count=1 << 16)
    assert (
        select(big, GRID, policy=Policy(arithmetic="reproducible")).arithmetic
        == "reproducible"
    )
    assert select(call(), GRID, policy=Policy(arithmetic="plain")).arithmetic == "plain"
    # a family that cannot keep 'strict' plainly runs it on accumulators
    sel = select(call(), GRID, family="gridmpi")
    assert (sel.family, sel.arithmetic) == ("gridmpi", "reproducible")
    sel.build(GRID).prove()
    # the MPI library knows no accumulators: native stays plain (and refuses strict)
    with pytest.raises(PlanError, match="native family cannot keep level 'strict'"):
        select(call(), GRID, family="native")


def test_fastest_weighs_the_topology():
    fastest = Policy(arithmetic="fastest")
    reduce_1k = call("reduce")
    assert select(reduce_1k, GRID, policy=fastest).arithmetic == "reproducible"
    assert select(call(count=1 << 14), GRID, policy=fastest).arithmetic == "plain"
    assert select(call(count=1 << 14), ONE, policy=fastest).arithmetic == "plain"
    two = Topology.from_sizes([2, 2])
    # a reduce to rank 0 crosses the wide area once in either arithmetic: plain wins
    assert select(reduce_1k, two, policy=fastest).arithmetic == "plain"


def test_predicted_time_counts_the_accumulator_work():
    c = call(count=1 << 12)
    repro = select(c, ONE, policy=Policy(arithmetic="reproducible"))
    cheap = predicted_time(
        repro, ONE, c, Policy(convert_time=0, combine_time=0, stage_time=0)
    )
    dear = predicted_time(repro, ONE, c, Policy(convert_time=1e-6))
    assert dear - cheap == pytest.approx((1 << 12) * (1e-6 + 3 * 1.5e-8) + 3e-5)


@pytest.mark.parametrize(
    "bad",
    [
        dict(arithmetic="fast"),
        dict(convert_time=-1.0),
        dict(stage_time="1"),
        dict(reproducible_below=-1),
    ],
)
def test_policy_validation(bad):
    with pytest.raises(PlanError):
        Policy(**bad)


def test_call_validation():
    with pytest.raises(PlanError, match="accumulator_itemsize"):
        Call("allreduce", count=1, accumulator_itemsize=-32)


def test_scripts_keep_the_arithmetic():
    from wacoll.plans import scripts

    plan = select(call(), GRID).build(GRID)
    assert plan.arithmetic == "reproducible"
    text = scripts.to_sexpr(plan)
    assert "(arithmetic reproducible)" in text
    assert scripts.from_sexpr(text) == plan
    assert '"arithmetic": "reproducible"' in scripts.to_json(plan)
    assert scripts.from_json(scripts.to_json(plan)) == plan
    plain = select(call(count=1 << 12), GRID).build(GRID)
    assert "arithmetic" not in scripts.to_sexpr(plain)
    assert "arithmetic" not in scripts.to_json(plain)
    with pytest.raises(Exception, match="unknown arithmetic 'exact'"):
        scripts.from_sexpr(
            text.replace("(arithmetic reproducible)", "(arithmetic exact)")
        )
    # without the field the plan is a plain strict plan, which the prover refuses
    with pytest.raises(PlanError):
        scripts.from_sexpr(text.replace(" (arithmetic reproducible)", ""))
    bcast = scripts.to_sexpr(build("bcast", GRID, "magpie", count=4))
    with pytest.raises(Exception, match="takes no arithmetic"):
        scripts.from_sexpr(bcast.replace("(size 8)", "(size 8) (arithmetic plain)", 1))
