"""One rank's program derived alone equals the whole plan's lowering of that rank.

Every family's every operation, the selection policy's options and some forced ones,
on generated topologies (contiguous, reordered, uneven), every rank and root."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wacoll import PlanError, Topology
from wacoll.plans import FAMILIES, Call, builders, lower, select
from wacoll.plans.builder import PlanBuilder, RankPlan, focus, focused_rank
from wacoll.plans.operations import spec
from wacoll.plans.rank import rank_plan, rank_program

LEVELS = ("strict", "associative", "commutative")


def _lowered(program):
    """A lowered program as plain comparable data (its index arrays as tuples)."""
    steps = []
    for s in program.steps:
        row = [
            s.kind,
            s.peer,
            s.elements,
            s.src,
            s.dst,
            s.direct,
            s.group,
            s.side,
            s.index,
            s.label,
        ]
        for idx in (s.src_index, s.dst_index):
            row.append(
                None if idx is None else tuple(tuple(np.asarray(a).tolist()) for a in idx)
            )
        steps.append(tuple(row))
    return (
        program.rank,
        tuple(steps),
        sorted(program.scratch_sizes.items()),
        program.in_extent,
        program.out_extent,
    )


@st.composite
def topologies(draw):
    """1..12 ranks in 1..4 clusters, contiguous or shuffled (a reordered communicator)."""
    size = draw(st.integers(1, 12))
    nclusters = draw(st.integers(1, min(4, size)))
    cuts = (
        sorted(
            draw(
                st.lists(
                    st.integers(1, size - 1),
                    min_size=nclusters - 1,
                    max_size=nclusters - 1,
                    unique=True,
                )
            )
        )
        if size > 1
        else []
    )
    ranks = list(range(size))
    if draw(st.booleans()):
        ranks = draw(st.permutations(ranks))
    bounds = [0, *cuts, size]
    clusters = [ranks[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]
    return Topology.from_clusters(clusters)


def _call(draw, op, size):
    s = spec(op)
    root = draw(st.integers(0, size - 1)) if s.rooted else None
    level = draw(st.sampled_from(LEVELS)) if s.kind == "reduction" else None
    count = draw(st.integers(1, 70))
    counts = None
    if op == "alltoallv":
        counts = tuple(
            tuple(draw(st.lists(st.integers(0, 3), min_size=size, max_size=size)))
            for _ in range(size)
        )
    elif op.endswith("v") or op == "reduce_scatter":
        counts = tuple(draw(st.lists(st.integers(0, 3), min_size=size, max_size=size)))
    return Call(
        op,
        count=None if counts else count,
        counts=counts,
        root=root,
        itemsize=draw(st.sampled_from((1, 8))),
        level=level,
    )


def _assert_same(selection, topo):
    whole = selection.build(topo)
    for rank in range(topo.size):
        part = rank_plan(selection, topo, rank)
        assert part.program == whole.programs[rank], (selection, rank)
        assert (part.family, part.algorithm, part.params, part.counts, part.level) == (
            whole.family,
            whole.algorithm,
            whole.params,
            whole.counts,
            whole.level,
        )
        assert _lowered(rank_program(selection, topo, rank, proof=True)) == _lowered(
            lower(whole, rank)
        ), (selection, rank)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), topo=topologies(), op=st.sampled_from(sorted(builders("magpie"))))
def test_default_selection_rank_programs_equal_the_whole_plans(data, topo, op):
    call = _call(data.draw, op, topo.size)
    selection = select(call, topo, allow_native=False)
    _assert_same(selection, topo)


MAGPIE_VARIANTS = [
    (op, v, intra)
    for op in (
        "reduce",
        "allreduce",
        "reduce_scatter",
        "reduce_scatter_block",
        "scan",
        "exscan",
    )
    for v in ("short", "long", "associative")
    for intra in ("binary", "binomial")
]


@pytest.mark.parametrize("op,variant,intra", MAGPIE_VARIANTS)
@pytest.mark.parametrize("sizes", [[3, 1, 4], [5], [2, 2, 2, 3]])
def test_every_magpie_reduction_variant(op, variant, intra, sizes):
    topo = Topology.from_sizes(sizes)
    counts = tuple(range(1, topo.size + 1)) if op == "reduce_scatter" else None
    call = Call(
        op,
        count=None if counts else 6,
        counts=counts,
        itemsize=8,
        level="commutative" if variant == "associative" else "strict",
        root=topo.size - 1 if op == "reduce" else None,
    )
    selection = select(
        call, topo, family="magpie", options={"variant": variant, "intra": intra}
    )
    _assert_same(selection, topo)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), topo=topologies(), family=st.sampled_from(sorted(FAMILIES)))
def test_every_family_rank_programs_equal_the_whole_plans(data, topo, family):
    op = data.draw(st.sampled_from(sorted(builders(family))))
    call = _call(data.draw, op, topo.size)
    try:
        selection = select(call, topo, family=family)
        selection.build(topo)
    except PlanError:  # a plan the family refuses (a level, a topology)
        return
    _assert_same(selection, topo)


EVERY_BUILDER = [(f, op) for f in sorted(FAMILIES) for op in sorted(builders(f))]
FIXED = [
    Topology.from_clusters([[0, 3, 5], [1, 2], [4, 6]]),
    Topology.from_sizes([4, 1]),
    Topology.single(5),
]


@pytest.mark.parametrize("family,op", EVERY_BUILDER)
def test_every_builder_on_fixed_topologies(family, op):
    """Each family's each builder at least once, on every level it accepts."""
    ran = 0
    for topo in FIXED:
        for level in LEVELS if spec(op).kind == "reduction" else (None,):
            counts = None
            if op == "alltoallv":
                counts = tuple(
                    tuple((i + j) % 3 for j in range(topo.size)) for i in range(topo.size)
                )
            elif op.endswith("v") or op == "reduce_scatter":
                counts = tuple(i % 3 for i in range(topo.size))
            call = Call(
                op,
                count=None if counts else 5,
                counts=counts,
                itemsize=8,
                level=level,
                root=topo.size - 1 if spec(op).rooted else None,
            )
            try:
                selection = select(call, topo, family=family)
                selection.build(topo)
            except PlanError:
                continue
            _assert_same(selection, topo)
            ran += 1
    assert ran, (family, op)


def test_focus_is_scoped_and_checked():
    topo = Topology.from_sizes([2, 2])
    assert focused_rank() is None
    with focus(2):
        assert focused_rank() == 2
        b = PlanBuilder("bcast", topo)
        assert b.keeps(2) and not b.keeps(0)
        b.transfer(0, 2, b.all_blocks)
        part = b.build(family="custom", algorithm="x")
    assert focused_rank() is None
    assert isinstance(part, RankPlan) and [str(s) for s in part.program] == ["recv 0 [0]"]
    with pytest.raises(PlanError, match="focus needs a rank"):
        with focus(-1):
            pass
    with focus(9), pytest.raises(PlanError, match="rank 9 is not a rank"):
        PlanBuilder("bcast", topo)


def test_rank_program_without_a_proof_proves_the_whole_plan(monkeypatch):
    topo = Topology.from_sizes([2, 3])
    selection = select(Call("allgather", count=2, itemsize=4), topo)
    built = []
    real = type(selection).build
    monkeypatch.setattr(
        type(selection), "build", lambda self, t: built.append(1) or real(self, t)
    )
    rank_program(selection, topo, 1)
    rank_program(selection, topo, 1, proof=lambda s, t: None)
    assert built == [1, 1]
    rank_program(selection, topo, 1, proof=lambda s, t: "proved")
    assert built == [1, 1]


def test_a_rank_plan_builds_the_whole_plan_only_when_asked(monkeypatch):
    topo = Topology.from_sizes([2, 3])
    selection = select(Call("alltoall", count=2, itemsize=4), topo)
    part = rank_plan(selection, topo, 4)
    assert part._whole == []
    whole = selection.build(topo)
    assert part.programs == whole.programs and part.prove() == whole.prove()
    assert part.whole() is part.whole()
    with focus(1):
        bare = PlanBuilder("bcast", topo).build()
    with pytest.raises(PlanError, match="does not know its selection"):
        _ = bare.programs


def test_rank_plan_refuses_native_and_bad_ranks():
    topo = Topology.single(3)
    native = select(Call("bcast", count=4, root=0), topo)
    assert native.native
    with pytest.raises(PlanError, match="native family has no plan"):
        rank_plan(native, topo, 0)
    sel = select(Call("bcast", count=4, root=0), topo, family="mpich")
    for bad in (3, -1, True, 1.0):
        with pytest.raises(PlanError, match="is not a rank"):
            rank_program(sel, topo, bad, proof=True)
