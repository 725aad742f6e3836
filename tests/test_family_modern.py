"""The modern family: MPICH 4's and Open MPI 5's algorithms, proved and counted."""

import math

import pytest

from wacoll import PlanError, Topology
from wacoll.plans import LEVELS, Call, build, builders, select
from wacoll.plans.families import modern
from wacoll.plans.families import tree as tree_family
from wacoll.plans.families.modern_parts import fold, fold_is_canonical, rounds

SIZES = list(range(1, 18)) + [32, 64]
CASES = [(op, name) for op, names in modern.ALGORITHMS.items() for name in names]
REDUCTIONS = ("allreduce", "reduce")


def _build(op, size, name, level=None, root=None, count=None, topology=None, **kw):
    topo = topology or Topology.single(size)
    if op != "barrier":
        kw["count"] = count if count is not None else 3 * size
    if level is not None:
        kw["level"] = level
    if root is not None:
        kw["root"] = root
    return build(op, topo, "modern", algorithm=name, **kw)


def _keeps(op, name, level, size):
    """Whether the docstrings promise ``level`` for this algorithm at ``size``."""
    if (op, name) == ("allreduce", "ring"):
        return level == "commutative"
    if op in REDUCTIONS and name != "binomial" and level == "strict":
        return fold_is_canonical(size)
    return True


def _lowbit(j):
    return j & -j


# ------------------------------------------------------------------ the registry
def test_registered_with_its_operations():
    assert set(builders("modern")) == set(modern.ALGORITHMS)
    assert builders("modern") is modern.BUILDERS


@pytest.mark.parametrize("op,name", CASES)
def test_every_algorithm_proves_at_every_size_and_level(op, name):
    """Sizes 1..17, 32 and 64; the levels each docstring claims, and a PlanError
    (before any step is built) at the others."""
    for size in SIZES:
        levels = LEVELS if op in REDUCTIONS else (None,)
        roots = sorted({0, size - 1, size // 2}) if op in ("bcast", "reduce") else [None]
        for level in levels:
            for root in roots:
                if _keeps(op, name, level, size):
                    plan = _build(op, size, name, level, root)
                    report = plan.prove()
                    assert (plan.family, plan.algorithm) == ("modern", name)
                    assert report.level == level
                else:
                    with pytest.raises(PlanError, match="level"):
                        _build(op, size, name, level, root)


def test_strict_sizes_of_the_fold():
    """MPICH's fold is the canonical expression exactly on 2**a (2**b - 1) ranks."""
    assert [n for n in range(1, 33) if fold_is_canonical(n)] == [
        1,
        2,
        3,
        4,
        6,
        7,
        8,
        12,
        14,
        15,
        16,
        24,
        28,
        30,
        31,
        32,
    ]
    assert fold(7) == (4, 3, (1, 3, 5, 6)) and fold(7, "even") == (4, 3, (0, 2, 4, 6))
    for size in (5, 9, 10, 11, 13):
        assert (
            _build("allreduce", size, "recursive_doubling", "associative").prove().level
            == "associative"
        )


def test_segments_and_other_topologies():
    """The family ignores clusters; segments only refine the blocks."""
    for topo in (
        Topology.from_sizes([3, 2, 4]),
        Topology.from_clusters([[0, 3], [1, 4], [2]]),
    ):
        for op, name in CASES:
            kw = {"segments": 3} if "segments" in modern.OPTIONS[op] else {}
            level = "commutative" if op in REDUCTIONS else None
            root = topo.size - 1 if op in ("bcast", "reduce") else None
            _build(
                op, topo.size, name, level, root, count=10, topology=topo, **kw
            ).prove()


# ------------------------------------------------------------ message counts
@pytest.mark.parametrize("size", SIZES)
def test_barrier_and_bruck_take_ceil_log2_rounds(size):
    k = rounds(size)
    assert k == math.ceil(math.log2(size))
    report = _build("barrier", size, "dissemination").prove()
    assert (report.messages, report.max_sends, report.bytes) == (size * k, k, 0)
    report = _build("allgather", size, "bruck", count=2).prove()
    assert (report.messages, report.max_sends) == (size * k, k)
    assert report.bytes == size * (size - 1) * 2  # each rank receives P - 1 blocks once
    report = _build("alltoall", size, "bruck", count=1).prove()
    assert (report.messages, report.max_sends) == (size * k, k)
    # round d carries the blocks whose distance 1..P-1 has bit d set
    per_round = [sum(1 for dist in range(1, size) if dist & (1 << i)) for i in range(k)]
    assert report.bytes == size * sum(per_round)


@pytest.mark.parametrize("size", SIZES)
def test_recursive_doubling_rounds(size):
    p, rem, _ = fold(size)
    log = p.bit_length() - 1
    n = 5
    report = _build("allgather", size, "recursive_doubling", count=n).prove()
    assert report.messages == p * log + 2 * rem
    if rem == 0:  # P = 2**k: k rounds, each rank receives the other P - 1 blocks
        assert report.max_sends == log and report.bytes == size * (size - 1) * n
    report = _build(
        "allreduce", size, "recursive_doubling", "commutative", count=n
    ).prove()
    assert report.messages == p * log + 2 * rem
    assert report.bytes == report.messages * n  # whole vectors
    assert report.max_sends == log + (1 if rem else 0)


@pytest.mark.parametrize("size", SIZES)
def test_ring_formulas(size):
    n = 6 * size  # P chunks of n / P
    report = _build("allreduce", size, "ring", "commutative", count=n).prove()
    assert report.messages == 2 * size * (size - 1)
    assert report.max_sends == 2 * (size - 1)
    assert report.bytes == report.messages * n // size
    report = _build("allgather", size, "ring", count=2).prove()
    assert (report.messages, report.max_sends) == (size * (size - 1), size - 1)


@pytest.mark.parametrize("size", SIZES)
def test_rabenseifner_formulas(size):
    p, rem, _ = fold(size)
    log = p.bit_length() - 1
    n = 4 * p  # p shares of n / p
    report = _build("allreduce", size, "rabenseifner", "commutative", count=n).prove()
    # reduce-scatter and allgather: log2 p exchanges each, 2 (p-1)/p of the vector
    # per participant; the fold and the result of each sitting-out rank: a vector
    assert report.messages == 2 * p * log + 2 * rem
    assert report.bytes == 2 * (p - 1) * n + 2 * rem * n
    for root in sorted({0, size - 1, 1 % size}):
        report = _build(
            "reduce", size, "rabenseifner", "commutative", root=root, count=n
        ).prove()
        stand_in = root not in fold(size, "even")[2]
        # reduce-scatter, a binomial gather of p - 1 messages carrying n/2 per level
        assert report.messages == p * log + (p - 1) + rem + stand_in
        assert report.bytes == (p - 1) * n + log * n // 2 + rem * n + stand_in * n


@pytest.mark.parametrize("size", SIZES)
def test_pairwise_and_scattered_alltoall(size):
    for name in ("pairwise", "scattered"):
        report = _build("alltoall", size, name, count=3).prove()
        assert report.messages == size * (size - 1)
        assert report.bytes == 3 * size * (size - 1)
        assert report.max_sends == size - 1
    plan = _build("alltoall", size, "pairwise", count=1)
    if size & (size - 1) == 0:  # XOR partners: round i pairs r with r ^ i
        for r in range(size):
            peers = [s.peer for s in plan.programs[r] if s.kind == "send"]
            assert peers == [r ^ i for i in range(1, size)]


@pytest.mark.parametrize("size", SIZES)
def test_scatter_allgather_broadcasts(size):
    root = size // 3
    tree_sizes = [size] + [min(_lowbit(j), size - j) for j in range(1, size)]
    for name in ("scatter_ring", "scatter_doubling"):
        plan = _build("bcast", size, name, root=root, count=10 * size)
        report = plan.prove()
        assert plan.nblocks == size  # one chunk per rank
        if name == "scatter_ring":
            # a binomial scatter (P - 1 messages), then the ring, where relative
            # rank j gets the P - t_j chunks its scatter subtree did not give it
            assert report.messages == (size - 1) + sum(size - t for t in tree_sizes)
        # every rank but the root receives each chunk it lacked exactly once
        assert report.bytes == (size - 1) * 10 * size


@pytest.mark.parametrize("size", SIZES)
def test_tree_broadcasts_are_the_tree_familys(size):
    """chain, k-nomial and binomial broadcasts with segments are the tree family's
    plans (reused, not rebuilt)."""
    for name, tree in (
        ("binomial", "binomial"),
        ("chain", "chain"),
        ("knomial", "knomial4"),
    ):
        plan = _build("bcast", size, name, root=size - 1, count=12, segments=3)
        same = tree_family.bcast(
            Topology.single(size), tree=tree, root=size - 1, count=12, segments=3
        )
        assert plan.programs == same.programs and plan.algorithm == name
        assert plan.prove().messages == 3 * (size - 1)
    plan = _build("bcast", size, "knomial", count=2, radix=3)
    assert plan.param("radix") == 3 and plan.prove().messages == size - 1


@pytest.mark.parametrize("size", [1, 2, 5, 8, 13])
def test_binomial_reduce_is_mpichs(size):
    for level in LEVELS:
        plan = _build(
            "reduce", size, "binomial", level, root=size - 1, count=6, segments=2
        )
        same = build(
            "reduce",
            Topology.single(size),
            "mpich",
            root=size - 1,
            count=6,
            segments=2,
            level=level,
        )
        assert plan.programs == same.programs and plan.family == "modern"


# ------------------------------------------------------------- choices and errors
def test_auto_follows_mpich_selection_file():
    c = modern.choose
    assert c("bcast", 7, count=1 << 20) == "binomial"  # fewer than 8 ranks
    assert c("bcast", 16, count=12288) == "binomial"
    assert c("bcast", 16, count=524288) == "scatter_doubling"
    assert c("bcast", 16, count=524289) == "scatter_ring"
    assert c("bcast", 12, count=20000) == "scatter_ring"
    assert c("allgather", 8, count=65535) == "recursive_doubling"
    assert c("allgather", 8, count=65536) == "ring"
    assert c("allgather", 9, count=9100) == "bruck"
    assert c("allgather", 9, count=9103) == "ring"
    assert c("alltoall", 8, count=256) == "bruck"
    assert c("alltoall", 7, count=256) == "scattered"
    assert c("alltoall", 8, count=32769) == "pairwise"
    assert (
        c("allreduce", 8, count=1, itemsize=8, level="commutative")
        == "recursive_doubling"
    )
    assert (
        c("allreduce", 8, count=7, itemsize=8, level="commutative")
        == "recursive_doubling"
    )  # fewer elements than owners
    assert c("allreduce", 8, count=8, itemsize=8, level="commutative") == "rabenseifner"
    assert c("reduce", 8, count=256, itemsize=8, level="commutative") == "binomial"
    assert c("reduce", 8, count=257, itemsize=8, level="commutative") == "rabenseifner"
    assert c("reduce", 8, count=257, itemsize=8, level="strict") == "binomial"
    plan = build("allgather", Topology.single(6), "modern", count=4, itemsize=8)
    assert plan.algorithm == "bruck" and plan.param("algorithm") is None


def test_bad_algorithms_and_options():
    topo = Topology.single(4)
    with pytest.raises(PlanError, match="must be 'auto' or one of bruck"):
        build("allgather", topo, "modern", algorithm="tree")
    with pytest.raises(PlanError, match="keeps level 'commutative' only"):
        build("allreduce", topo, "modern", algorithm="ring", level="associative")
    with pytest.raises(PlanError, match="radix >= 2"):
        build("bcast", topo, "modern", algorithm="knomial", radix=1)
    with pytest.raises(PlanError, match="the modern family has no scan plan"):
        select(Call("scan", count=4), topo, family="modern")


def test_selection_runs_the_family_by_name_without_changing_defaults():
    one = Topology.single(6)
    call = Call("allreduce", count=1 << 12, itemsize=8, level="commutative")
    assert select(call, one).family == "native"  # the default is unchanged
    chosen = select(call, one, family="modern", options={"algorithm": "ring"})
    plan = chosen.build(one)
    assert (plan.family, plan.algorithm, plan.prove().level) == (
        "modern",
        "ring",
        "commutative",
    )
    grid = Topology.from_sizes([3, 3])
    assert select(call, grid).family == "magpie"
    plan = select(
        Call("bcast", count=1 << 20, itemsize=1, root=2), grid, family="modern"
    ).build(grid)
    assert plan.algorithm == "binomial" and plan.prove().messages == 5 * plan.nblocks
