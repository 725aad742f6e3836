"""The recent family: Swing, Bine trees, NCCL's double binary tree and PAT, proved."""

import pytest

from wacoll import PlanError, Topology
from wacoll.plans import LEVELS, Call, build, builders, select
from wacoll.plans.families import recent
from wacoll.plans.families.recent_nccl import btree, dtree, pat_steps
from wacoll.plans.families.recent_parts import bine_tree, rho, swing_peers
from wacoll.plans.goal import from_goal, to_goal
from wacoll.plans.sim import TsTrModel, simulate

SIZES = list(range(1, 18)) + [32, 64]
CASES = [(op, name) for op, names in recent.ALGORITHMS.items() for name in names]
REDUCTIONS = ("allreduce", "reduce", "reduce_scatter", "reduce_scatter_block")


def _build(op, size, name, level=None, root=None, count=None, topology=None, **kw):
    topo = topology or Topology.single(size)
    if op == "reduce_scatter":
        kw.setdefault("counts", [(r * 5) % 3 for r in range(topo.size)])
    else:
        kw["count"] = count if count is not None else 3 * topo.size
    if level is not None:
        kw["level"] = level
    if root is not None:
        kw["root"] = root
    return build(op, topo, "recent", algorithm=name, **kw)


def test_registered_with_its_operations():
    assert set(builders("recent")) == set(recent.ALGORITHMS)
    assert builders("recent") is recent.BUILDERS


@pytest.mark.parametrize("op,name", CASES)
def test_every_algorithm_proves_at_every_size_and_level(op, name):
    """Sizes 1..17, 32 and 64; the levels :func:`recent.keeps` claims, and a PlanError
    naming the level at the others."""
    for size in SIZES:
        levels = LEVELS if op in REDUCTIONS else (None,)
        roots = sorted({0, size - 1, size // 2}) if op in ("bcast", "reduce") else [None]
        for level in levels:
            for root in roots:
                if recent.keeps(op, name, size, level):
                    plan = _build(op, size, name, level, root)
                    report = plan.prove()
                    assert (plan.family, plan.algorithm) == ("recent", name)
                    assert report.level == level
                else:
                    with pytest.raises(PlanError, match="level"):
                        _build(op, size, name, level, root)


def test_segments_and_other_topologies():
    """The family ignores clusters; segments only refine the blocks."""
    for topo in (
        Topology.from_sizes([3, 2, 4]),
        Topology.from_clusters([[0, 3], [1, 4], [2]]),
    ):
        for op, name in CASES:
            kw = {"segments": 3} if "segments" in recent.OPTIONS[op] else {}
            level = "commutative" if op in REDUCTIONS else None
            root = topo.size - 1 if op in ("bcast", "reduce") else None
            _build(
                op, topo.size, name, level, root, count=10, topology=topo, **kw
            ).prove()


# ------------------------------------------------------------------ Swing's pairs
def test_swing_distances_and_matchings():
    assert [rho(s) for s in range(8)] == [1, -1, 3, -5, 11, -21, 43, -85]
    for m in (2, 6, 8, 10, 12, 64):
        for s in range((m - 1).bit_length()):
            peer = swing_peers(m, s)
            assert (peer[peer] == range(m)).all()  # a matching on an even m
            assert ((peer - range(m)) % 2 == 1).all()  # even ranks with odd ones


@pytest.mark.parametrize("size", [2, 4, 6, 8, 10, 12, 16, 32, 64])
def test_butterflies_are_bandwidth_optimal_on_even_sizes(size):
    """ceil(log2 P) exchanges per rank each way; every rank gets every other chunk
    once in each half: 2 (P - 1) chunks per rank."""
    steps = (size - 1).bit_length()
    n = 4 * size
    for name in ("swing", "bine"):
        report = _build("allreduce", size, name, "commutative", count=n).prove()
        assert report.max_sends == 2 * steps
        assert report.bytes == 2 * (size - 1) * n
        report = _build("allgather", size, name, count=2).prove()
        assert (report.max_sends, report.bytes) == (steps, 2 * size * (size - 1))
        report = _build(
            "reduce_scatter_block", size, name, "commutative", count=2
        ).prove()
        assert (report.max_sends, report.bytes) == (steps, 2 * size * (size - 1))


@pytest.mark.parametrize("size", SIZES)
def test_swing_latency_rounds(size):
    p = 1 << (size.bit_length() - 1)
    report = _build("allreduce", size, "swing_latency", "commutative", count=5).prove()
    # log2 p exchanges of whole vectors, and the fold's two messages per extra rank
    assert report.messages == p * (p.bit_length() - 1) + 2 * (size - p)
    assert report.bytes == 5 * report.messages


@pytest.mark.parametrize("size", SIZES)
def test_bine_tree_is_a_spanning_tree_of_near_edges(size):
    for root in sorted({0, size - 1, size // 3}):
        tree = bine_tree(size, root)
        assert sorted(tree.nodes) == list(range(size))
        assert tree.number_of_edges() == size - 1
        assert all(tree.in_degree(v) == (0 if v == root else 1) for v in tree)
    if size & (size - 1) == 0 and size > 1:
        # on 2**L ranks a node's farthest child is at |rho(L - 1)| < 2**(L-1) + 1
        far = max(
            min((u - v) % size, (v - u) % size) for u, v in bine_tree(size, 0).edges
        )
        assert far == abs(rho((size - 1).bit_length() - 1))


# ------------------------------------------------------------------ NCCL
@pytest.mark.parametrize("size", list(range(1, 40)) + [64, 100])
def test_nccl_trees_are_trees_and_complementary(size):
    for tree in dtree(size):
        roots = [r for r, (up, _) in tree.items() if up is None]
        assert len(roots) == 1 and sorted(tree) == list(range(size))
        for r, (_up, kids) in tree.items():
            assert len(kids) <= 2
            for c in kids:
                assert tree[c][0] == r
    first, second = dtree(size)
    if size % 2 == 0 and size > 2:
        # a rank is an inner node in at most one of the two trees
        assert all(not (first[r][1] and second[r][1]) for r in range(size))
    assert btree(14)[0] == (None, (8,)) and btree(14)[12] == (8, (10, 13))


@pytest.mark.parametrize("size", SIZES)
def test_double_binary_tree_messages(size):
    segments = 4  # two per tree
    plan = _build(
        "allreduce", size, "double_binary_tree", "commutative", count=8, segments=segments
    )
    report = plan.prove()
    # each tree: P - 1 edges, a segment up and down each
    assert report.messages == 2 * (size - 1) * segments
    assert plan.nblocks == segments


@pytest.mark.parametrize("size", SIZES)
def test_pat_steps_and_aggregation(size):
    steps = (size - 1).bit_length()
    report = _build("allgather", size, "pat", count=1).prove()
    assert (report.messages, report.max_sends) == (size * steps, steps)
    assert report.bytes == size * (size - 1)
    # the first step sends one block to the farthest rank
    if size > 1:
        assert pat_steps(size)[0] == (1 << (steps - 1), (0,))
    report = _build("allgather", size, "pat", count=1, aggregation=1).prove()
    assert report.messages == size * (size - 1)  # one block per message
    report = _build("reduce_scatter_block", size, "pat", "commutative", count=3).prove()
    assert report.bytes == 3 * size * (size - 1)


# --------------------------------------------------------- choices, errors, export
def test_auto_and_bad_options():
    topo = Topology.single(6)
    assert build("allreduce", topo, "recent", level="commutative").algorithm == "swing"
    assert (
        build("allreduce", topo, "recent", level="associative").algorithm
        == "double_binary_tree"
    )
    with pytest.raises(
        PlanError,
        match="no recent allreduce algorithm keeps level 'associative' on 5 ranks",
    ):
        build("allreduce", Topology.single(5), "recent", level="associative")
    with pytest.raises(PlanError, match="must be 'auto' or one of swing"):
        build("allgather", topo, "recent", algorithm="ring")
    with pytest.raises(PlanError, match="aggregation bounds PAT's messages"):
        build("allgather", topo, "recent", algorithm="swing", aggregation=2)
    with pytest.raises(PlanError, match="aggregation must be an integer >= 1"):
        build("allgather", topo, "recent", algorithm="pat", aggregation=0)
    with pytest.raises(PlanError, match="keeps level 'commutative' only"):
        build("reduce", topo, "recent", level="associative", algorithm="bine")


def test_selection_runs_the_family_by_name_without_changing_defaults():
    one = Topology.single(6)
    call = Call("allreduce", count=1 << 12, itemsize=8, level="commutative")
    assert select(call, one).family == "native"
    plan = select(call, one, family="recent", options={"algorithm": "bine"}).build(one)
    assert (plan.family, plan.algorithm, plan.prove().level) == (
        "recent",
        "bine",
        "commutative",
    )


@pytest.mark.parametrize("op,name", CASES)
def test_goal_export_and_simulation(op, name):
    level = "commutative" if op in REDUCTIONS else None
    plan = _build(op, 6, name, level, 5 if op in ("bcast", "reduce") else None)
    report = plan.prove()
    text = to_goal(plan)
    schedule = from_goal(text)
    assert to_goal(schedule) == text and schedule.messages == report.messages
    assert simulate(plan, TsTrModel(1e-5, 1e-9)).completion > 0
