"""The halving allreduce: every block in the canonical order, proved by the prover,
with Rabenseifner's traffic, chosen by the policy for strict allreduces."""

import pytest

from wacoll import PlanError, Topology
from wacoll.plans import Call, build, lower, select
from wacoll.plans.halving import largest_power_of_two
from wacoll.plans.rank import rank_plan, rank_program
from wacoll.plans.select import Policy


def _halving(topo, count, segments=1, level="strict", op="allreduce", **kw):
    return build(
        op,
        topo,
        "mpich",
        count=count,
        segments=segments,
        itemsize=8,
        level=level,
        algorithm="halving",
        **kw,
    )


TOPOLOGIES = [Topology.single(n) for n in range(1, 17)] + [
    Topology.from_sizes([2, 2, 2, 2]),
    Topology.from_sizes([3, 1, 4]),
    Topology.from_clusters([[0, 3, 5], [1, 2], [4, 6]]),
]


@pytest.mark.parametrize("topo", TOPOLOGIES, ids=repr)
def test_every_block_is_the_canonical_expression(topo):
    """The prover proves level strict (the binomial expression in rank order, block
    by block) for any number of ranks, blocks and elements, any cluster layout."""
    for segments in (1, 2, 3, 5, 8, 9):
        for count in (1, 7, 64):
            report = _halving(topo, count, segments).prove()
            assert report.level == "strict", (topo, segments, count)
            for root in {0, topo.size - 1, topo.size // 2}:
                report = _halving(topo, count, segments, op="reduce", root=root).prove()
                assert report.level == "strict", (topo, segments, count, root)


@pytest.mark.parametrize("size", [2, 4, 8, 16])
def test_power_of_two_moves_rabenseifners_volume(size):
    """Each rank sends 2 (P-1)/P of the vector in 2 log2 P messages: half the
    binomial reduce-and-broadcast's critical path already at 4 ranks."""
    count = 64 * size
    plan = _halving(Topology.single(size), count, segments=size)
    for rank, program in enumerate(plan.programs):
        sends = [s for s in program if s.kind == "send"]
        sent = sum(plan.counts[b] for s in sends for b in s.blocks)
        assert sent == 2 * (size - 1) * count // size, rank
        assert len(sends) == 2 * (size.bit_length() - 1), rank


@pytest.mark.parametrize("size", [3, 5, 6, 7, 12])
def test_other_sizes_hand_the_remainder_to_the_owners(size):
    """Ranks above the largest power of two reduce among themselves, hand their
    partials to the owners, and receive the whole result from one owner last."""
    owners = largest_power_of_two(size)
    plan = _halving(Topology.single(size), 1000, segments=owners)
    for rank in range(owners, size):
        last = plan.programs[rank][-1]
        assert (last.kind, last.peer, last.blocks) == (
            "recv",
            rank - owners,
            tuple(range(plan.nblocks)),
        )
        assert not any(
            s.kind == "recv" and s.dst == "out" for s in plan.programs[rank][:-1]
        )


@pytest.mark.parametrize("size", [2, 4, 8, 16])
def test_no_copies_and_scratch_below_the_vector(size):
    """Each halving receives in place and combines there: scratch of
    ``1/2 + 1/4 + ... + 2/P`` of the vector (none on two ranks), no copy, nothing
    staged."""
    count = 1 << 12
    plan = _halving(Topology.single(size), count, segments=size)
    for rank in range(size):
        program = lower(plan, rank)
        assert sum(program.scratch_sizes.values()) == count - 2 * count // size
        assert all(s.direct for s in program.steps if s.kind == "recv")
        assert not any(s.kind == "copy" for s in program.steps)


def test_blocks_are_rounded_up_to_a_multiple_of_the_owners():
    assert _halving(Topology.single(6), 100, segments=1).nblocks == 4
    assert _halving(Topology.single(8), 100, segments=9).nblocks == 16
    assert _halving(Topology.single(3), 100, segments=3).nblocks == 4


def test_unknown_algorithm_is_refused():
    for op in ("reduce", "allreduce"):
        with pytest.raises(
            PlanError, match=f"mpich {op} algorithm must be one of.*'binomial', 'halving'"
        ):
            build(op, Topology.single(4), "mpich", algorithm="ring")


@pytest.mark.parametrize("size", [2, 5, 8])
def test_the_reduce_gathers_the_shares_at_the_root(size):
    """Each owner sends its share to the root once; the root receives the vector
    less its own share."""
    owners = largest_power_of_two(size)
    count = 64 * owners
    plan = _halving(
        Topology.single(size), count, segments=owners, op="reduce", root=size - 1
    )
    root = size - 1
    sent = [
        b
        for program in plan.programs
        for s in program
        if s.kind == "send" and s.peer == root and s.src == "part"
        for b in s.blocks
    ]
    kept = [
        b
        for s in plan.programs[root]
        if s.kind == "copy" and s.dst == "out"
        for b in s.blocks
    ]
    assert sorted(sent + kept) == list(range(owners))
    assert len(kept) == (1 if root < owners else 0)


@pytest.mark.parametrize("size", [1, 3, 5, 6, 8])
def test_rank_programs_derived_alone_equal_the_whole_plan(size):
    topo = Topology.single(size)
    selection = select(
        Call("allreduce", count=4096, itemsize=8, level="strict"),
        topo,
        family="mpich",
        options={"algorithm": "halving"},
    )
    whole = selection.build(topo)
    for rank in range(size):
        assert rank_plan(selection, topo, rank).program == whole.programs[rank]
        assert (
            rank_program(selection, topo, rank, proof=True).steps
            == lower(whole, rank).steps
        )


def _chosen(topo, nbytes, level="strict", **policy):
    call = Call("allreduce", count=nbytes // 8, itemsize=8, level=level)
    selection = select(call, topo, policy=Policy(**policy))
    return selection.family, dict(selection.options).get("algorithm")


def test_the_policy_takes_halving_for_strict_reduces_too():
    call = Call("reduce", count=1 << 13, itemsize=8, level="strict", root=2)
    for topo in (Topology.single(3), Topology.from_sizes([2, 2, 2, 2])):
        assert dict(select(call, topo).options).get("algorithm") == "halving"
    small = Call("reduce", count=16, itemsize=8, level="strict", root=0)
    assert dict(select(small, Topology.single(4)).options)["algorithm"] == "halving"
    assert select(small, Topology.from_sizes([2, 2])).family == "magpie"


def test_the_policy_takes_halving_for_strict_allreduces():
    one4, one3 = Topology.single(4), Topology.single(3)
    grid = Topology.from_sizes([2, 2, 2, 2])
    assert _chosen(one4, 8) == ("mpich", None)  # fewer elements than owners
    assert _chosen(one4, 64) == ("mpich", "halving")  # a power of two: always
    assert _chosen(one3, 1024) == ("mpich", None)  # 3 ranks, small: binomial
    assert _chosen(one3, 65536) == ("mpich", "halving")
    assert _chosen(grid, 1024) == ("magpie", None)  # a grid, small: MagPIe's
    assert _chosen(grid, 65536) == ("mpich", "halving")
    assert _chosen(grid, 65536, halving_from=1 << 20) == ("magpie", None)
    assert _chosen(one4, 1 << 20, level="commutative") == ("native", None)
    # (a long commutative vector is priced: Swing's allreduce on MagPIe's grid,
    # see tests/test_priced_selection.py)
    assert _chosen(grid, 1 << 20, level="commutative") == ("recent", "swing")


def test_an_applications_own_operator_keeps_whole_segments():
    """The halving cuts the vector per rank; an application's operator keeps the
    binomial plan (MPI libraries keep their cutting algorithms for predefined
    operators too)."""
    call = Call("allreduce", count=1 << 17, itemsize=8, level="strict", user_op=True)
    assert select(call, Topology.single(4)).options == (
        ("count", 1 << 17),
        ("itemsize", 8),
        ("level", "strict"),
        ("segments", 4),
    )


def test_a_forced_mpich_family_keeps_its_binomial_algorithm():
    call = Call("allreduce", count=1 << 17, itemsize=8, level="strict")
    assert select(call, Topology.single(4), family="mpich").options == (
        ("count", 1 << 17),
        ("itemsize", 8),
        ("level", "strict"),
        ("segments", 4),
    )


def test_policy_checks_halving_from():
    with pytest.raises(PlanError, match="halving_from must be an integer >= 0"):
        Policy(halving_from=-1)
