"""A plan planned once for its size class runs every count of the class.

:mod:`wacoll.plans.retarget` gives the plan built for a class's canonical count the
block counts of another count. These tests hold it to what that must mean: for
every family and operation with a uniform count, on clusters of unequal sizes, the
retargeted plan *is* the plan the same builder, with the same options, makes for
that count (same programs, same blocks, the same proof figures), so the prover's
proof of the one is the proof of the other.
"""

from __future__ import annotations

import dataclasses

import pytest

from wacoll import Topology
from wacoll.errors import PlanError
from wacoll.plans import Call, builders, select
from wacoll.plans import operations as ops
from wacoll.plans.builder import RankPlan
from wacoll.plans.lower import lower
from wacoll.plans.rank import plan_for_rank
from wacoll.plans.retarget import (
    canonical_count,
    count_linear,
    retarget,
    retarget_program,
    retargetable,
    structure_call,
)

FAMILIES = (
    "magpie",
    "mpich",
    "tree",
    "gridmpi",
    "combining",
    "modern",
    "hierarchical",
    "recent",
)
UNIFORM = [
    op
    for op in ops.OPERATIONS
    if ops.spec(op).layout != "none" and not op.endswith("v") and op != "reduce_scatter"
]
#: Families some of whose plans cut blocks otherwise than the plain layout.
_OWN_CUTS = ("gridmpi",)
TOPOLOGIES = {"2+3": Topology.from_sizes([2, 3]), "3x2": Topology.from_sizes([2, 2, 2])}


def _call(op, count, itemsize=8):
    s = ops.spec(op)
    return Call(
        op,
        count=count,
        root=1 if s.rooted else None,
        itemsize=itemsize,
        level="commutative" if s.kind == "reduction" else None,
    )


def _with_count(selection, count):
    options = dict(selection.options)
    options["count"] = count
    return dataclasses.replace(selection, options=tuple(sorted(options.items())))


@pytest.mark.parametrize("name", sorted(TOPOLOGIES))
@pytest.mark.parametrize("family", FAMILIES)
def test_a_retargeted_plan_is_the_plan_built_for_that_count(name, family):
    topo = TOPOLOGIES[name]
    tried, changed = 0, set()
    for op in UNIFORM:
        if op not in builders(family):
            continue
        for base_count in (1, 2, 8, 64, 1024, 65536):
            base = _call(op, base_count)
            assert structure_call(base) is base  # canonical counts plan themselves
            try:
                selection = select(base, topo, family=family)
            except PlanError:
                continue  # (no plan of this family for this call)
            plan = selection.build(topo)
            if not retargetable(plan, base_count):
                # blocks cut otherwise than the plain layout (gridmpi's
                # van de Geijn bcast): such calls are planned for their own count
                assert family in _OWN_CUTS, (op, family, base_count)
                continue
            for count in {
                base_count,
                min(base_count + 1, 2 * base_count - 1),
                2 * base_count - 1,
            }:
                assert structure_call(_call(op, count)).count == base_count
                moved = retarget(plan, count)
                # proved afresh, the retargeted plan holds what its adopted proof
                # says (the prover reasons on blocks: any counts of the layout)
                assert dataclasses.replace(moved).prove() == moved.prove()
                built = _with_count(selection, count).build(topo)
                if (len(built.counts), built.algorithm) != (
                    len(moved.counts),
                    moved.algorithm,
                ):
                    # a builder that cuts a vector (gridmpi's segments) or picks
                    # its algorithm (modern's, by bytes) by the count: the class
                    # keeps its canonical count's
                    changed.add((op, family))
                    continue
                assert moved.counts == built.counts, (op, family, count)
                assert moved.programs == built.programs, (op, family, count)
                assert moved.prove() == built.prove(), (op, family, count)
                tried += 1
    assert tried
    assert {f for _, f in changed} <= {"gridmpi", "modern", "recent", "hierarchical"}


def test_canonical_counts_are_the_least_of_their_byte_class():
    for itemsize in (1, 4, 8, 12):
        for count in range(1, 3000, 7):
            c = canonical_count(count, itemsize)
            assert c <= count
            nbytes = (count * itemsize).bit_length()
            assert (c * itemsize).bit_length() == nbytes
            assert c == 1 or ((c - 1) * itemsize).bit_length() < nbytes


def test_calls_of_their_own_count_are_not_retargeted():
    assert structure_call(Call("gatherv", counts=(1, 2), root=0)) is None
    assert structure_call(Call("barrier")) is None
    assert structure_call(_call("bcast", 0)) is None


def test_a_rank_part_is_retargeted_with_its_whole_plan(tmp_path):
    topo = TOPOLOGIES["2+3"]
    selection = select(_call("allreduce", 1024), topo)
    plan_for_rank(selection, topo, 3, directory=tmp_path)  # proves, records
    part = plan_for_rank(selection, topo, 3, directory=tmp_path)
    assert isinstance(part, RankPlan)
    moved = retarget(part, 1500)
    assert sum(moved.counts) == 1500 and moved.program == part.program
    whole = moved.whole()
    assert sum(whole.counts) == 1500 and whole.programs[3] == part.program
    assert whole.prove().bytes == _with_count(selection, 1500).build(topo).prove().bytes


def test_a_plan_of_another_block_layout_is_not_retargetable():
    topo = TOPOLOGIES["2+3"]
    plan = select(_call("bcast", 64), topo).build(topo)
    odd = dataclasses.replace(
        plan,
        counts=(60, 4) + (0,) * (len(plan.counts) - 2)
        if len(plan.counts) > 2
        else (60, 4),
    )
    assert not retargetable(odd, 64)


def _steps(program):
    """A lowered program's steps as plain values (runs listed whole)."""
    return [
        (s.kind, s.peer, s.elements, s.direct, s.group, s.side, s.index,
         None if s.src is None else (s.src[0], list(map(tuple, s.src[1]))),
         None if s.dst is None else (s.dst[0], list(map(tuple, s.dst[1]))))
        for s in program.steps
    ]  # fmt: skip


@pytest.mark.parametrize("family", FAMILIES)
def test_a_count_linear_program_scales_as_lowering_gives_it(family):
    topo = TOPOLOGIES["2+3"]
    scaled = 0
    for op in UNIFORM:
        if op not in builders(family):
            continue
        for base_count in (1, 8, 1024):
            try:
                plan = select(_call(op, base_count), topo, family=family).build(topo)
            except PlanError:
                continue
            if not count_linear(plan, base_count):
                continue
            for count in (base_count, 2 * base_count - 1, base_count + 3):
                moved = retarget(plan, count)
                for rank in range(topo.size):
                    got = retarget_program(lower(plan, rank), base_count, count)
                    want = lower(moved, rank)
                    assert _steps(got) == _steps(want), (op, family, count, rank)
                    assert (got.scratch_sizes, got.in_extent, got.out_extent) == (
                        want.scratch_sizes,
                        want.in_extent,
                        want.out_extent,
                    )
                scaled += 1
    assert scaled
