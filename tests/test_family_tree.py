"""The tree family: broadcast, reduce and allreduce over any tree."""

import pytest

from wacoll import PlanError, Topology, trees
from wacoll.plans import build
from wacoll.plans.families import tree as tree_family

TOPOLOGIES = [
    Topology.single(1),
    Topology.single(2),
    Topology.single(7),
    Topology.from_sizes([3, 3]),
    Topology.from_sizes([1, 1, 1]),
    Topology.from_sizes([4, 2, 3]),
    Topology.from_sizes([8, 8, 8, 8]),
]


@pytest.mark.parametrize("topo", TOPOLOGIES, ids=str)
@pytest.mark.parametrize(
    "name",
    [
        "flat",
        "chain",
        "binary",
        "binomial",
        "lam",
        "two-level",
        "paths-hierarchical",
        "paths-grouped",
    ],
)
def test_bcast_every_tree_every_root(topo, name):
    for root in range(topo.size):
        plan = build("bcast", topo, "tree", tree=name, root=root, count=6, segments=2)
        report = plan.prove()
        assert report.messages == 2 * (topo.size - 1)


@pytest.mark.parametrize("topo", TOPOLOGIES, ids=str)
@pytest.mark.parametrize(
    "name", ["flat", "chain", "lam", "paths-hierarchical", "paths-grouped"]
)
def test_rank_ordered_reduce_trees_at_associative_level(topo, name):
    plan = build("allreduce", topo, "tree", tree=name, level="associative", count=3)
    assert plan.prove().messages == 2 * (topo.size - 1)


@pytest.mark.parametrize("topo", TOPOLOGIES, ids=str)
@pytest.mark.parametrize("name", ["binary", "binomial", "two-level", "knomial3"])
def test_any_tree_any_root_when_commutative(topo, name):
    for root in range(topo.size):
        plan = build(
            "reduce",
            topo,
            "tree",
            tree=name,
            root=root,
            level="commutative",
            arrival=True,
            count=2,
            segments=2,
        )
        plan.prove()


def test_lam_reduce_is_the_canonical_strict_expression():
    for n in (5, 8, 13, 32):
        build("allreduce", Topology.single(n), "tree", tree="lam", level="strict").prove()


def test_lam_allreduce_uses_both_lam_trees():
    plan = tree_family.allreduce(Topology.single(32), tree="lam")
    steps = [str(s) for s in plan.programs[12]]
    assert steps[:4] == [
        "copy [0] in -> acc",
        "recv-combine 13 [0] into acc",
        "recv-combine 14 [0] into acc",
        "send 8 [0] from acc",
    ]
    # LAM's broadcast tree: 12 hears from 4 (highest bit cleared)
    assert steps[4] == "recv 4 [0]"
    assert plan.algorithm == "lam"


def test_paths_hierarchical_sends_one_partial_per_node():
    topo = Topology.from_sizes([4] * 8)
    report = build(
        "reduce", topo, "tree", tree="paths-hierarchical", level="associative"
    ).prove()
    assert report.wide_area_messages == 7


def test_paths_grouped_by_name_takes_group_size():
    topo = Topology.from_sizes([4] * 4)
    report = build(
        "reduce", topo, "tree", tree="paths-grouped", group_size=2, level="associative"
    ).prove()
    assert report.wide_area_messages == 6


def test_paths_grouped_doubles_internode_messages():
    topo = Topology.from_sizes([8, 8, 8, 8])
    t = trees.paths_grouped(topo, group_size=4)
    report = tree_family.reduce(topo, tree=t, level="associative").prove()
    assert report.wide_area_messages == 6  # two groups per remote node
    assert report.max_wide_area_hops == 1


def test_segments_pipeline_through_the_tree():
    plan = build("bcast", Topology.single(4), "tree", tree="chain", count=9, segments=3)
    assert [str(s) for s in plan.programs[1]] == [
        "recv 0 [0]",
        "send 2 [0]",
        "recv 0 [1]",
        "send 2 [1]",
        "recv 0 [2]",
        "send 2 [2]",
    ]
    assert plan.counts == (3, 3, 3)


def test_heterogeneous_trees_by_name():
    topo = Topology.single(8).with_t_ini([100, 300, 300, 300, 300, 100, 300, 300])
    for name in ("fnf", "spoc", "optimal"):
        build("bcast", topo, "tree", tree=name).prove()


def test_bad_trees_are_rejected():
    topo = Topology.single(4)
    with pytest.raises(PlanError, match="rooted at 0, but the operation's root is 2"):
        tree_family.bcast(topo, tree=trees.flat(4), root=2)
    with pytest.raises(PlanError, match="rank 3 is missing"):
        tree_family.bcast(topo, tree=trees.flat(3))
    with pytest.raises(PlanError, match="does not keep rank order at rank 0"):
        tree_family.reduce(topo, tree=trees.binary(4), level="associative")
    with pytest.raises(PlanError, match="the tree family has no scan plan"):
        build("scan", topo, "tree")
    with pytest.raises(PlanError, match="unknown plan family 'oak'"):
        build("bcast", topo, "oak")
