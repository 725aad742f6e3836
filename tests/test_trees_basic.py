"""Homogeneous, two-level and PATHS trees, and the tree convention."""

import networkx as nx
import pytest

from wacoll import PlanError, Topology, TopologyError, trees
from wacoll.trees import children, parent, validate_tree

SIZES = [1, 2, 3, 5, 6, 7, 8, 13, 32]


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize(
    "make",
    [
        trees.flat,
        trees.chain,
        trees.binary,
        trees.binomial,
        lambda n, root: trees.knomial(n, 3, root),
        lambda n, root: trees.lam(n, root, "reduce"),
        lambda n, root: trees.lam(n, root, "bcast"),
    ],
)
def test_every_builder_follows_the_convention(n, make):
    for root in sorted({0, n - 1, n // 2}):
        tree = make(n, root)
        assert validate_tree(tree, n=n, root=root) == root
        assert tree.graph["root"] == root


def test_binomial_matches_mpich():
    t = trees.binomial(8)
    assert children(t, 0) == [4, 2, 1]
    assert children(t, 4) == [6, 5]
    assert children(t, 6) == [7]
    rotated = trees.binomial(8, root=3)
    assert children(rotated, 3) == [7, 5, 4]


def test_lam_trees_from_the_paths_paper():
    reduce_tree = trees.lam(32)
    assert children(reduce_tree, 12) == [13, 14]
    assert parent(reduce_tree, 12) == 8
    assert children(reduce_tree, 0) == [1, 2, 4, 8, 16]
    bcast_tree = trees.lam(32, operation="bcast")
    assert children(bcast_tree, 0) == [1, 2, 4, 8, 16]
    assert parent(bcast_tree, 12) == 4  # highest bit cleared: the trees differ
    assert sorted(reduce_tree.edges) != sorted(bcast_tree.edges)
    for n in (2, 3, 4):  # linear up to 4 processes
        assert children(trees.lam(n), 0) == list(range(1, n))
    with pytest.raises(PlanError, match="'reduce' or 'bcast'"):
        trees.lam(8, operation="scan")


def test_reduce_order_receives_smallest_subtree_first():
    t = trees.reduce_order(trees.binomial(8, root=2))
    assert children(t, 2) == [3, 4, 6]


def test_invalid_arguments():
    with pytest.raises(PlanError, match="at least one rank"):
        trees.flat(0)
    with pytest.raises(PlanError, match="root 4 is not a rank of 0..3"):
        trees.binomial(4, root=4)
    with pytest.raises(PlanError, match="k >= 2"):
        trees.knomial(4, 1)


def test_validate_tree_rejects_broken_graphs():
    g = nx.DiGraph()
    g.add_edge(0, 1, order=0)
    g.add_edge(0, 2, order=0)
    with pytest.raises(PlanError, match="children of 0 have orders"):
        validate_tree(g, n=3)
    cyc = nx.DiGraph([(0, 1), (1, 0)])
    with pytest.raises(PlanError, match="not a tree"):
        validate_tree(cyc, n=2)
    with pytest.raises(PlanError, match="rank 2 is missing"):
        validate_tree(trees.flat(2), n=3)
    with pytest.raises(PlanError, match="rooted at 0"):
        validate_tree(trees.flat(3), n=3, root=1)


def test_two_level_magpie_shape():
    topo = Topology.from_sizes([3, 3])
    t = trees.two_level(topo, root=1)
    assert children(t, 1) == [3, 0, 2]  # the wide-area message first
    assert children(t, 3) == [4, 5]
    wan_edges = [(u, v) for u, v in t.edges if topo.is_wide_area(u, v)]
    assert wan_edges == [(1, 3)]
    reordered = Topology.from_clusters([[0, 3, 4], [1, 2], [5]])
    t = trees.two_level(reordered, root=4, intra="binomial")
    validate_tree(t, n=6, root=4)
    assert sum(reordered.is_wide_area(u, v) for u, v in t.edges) == 2


def test_paths_schemes():
    topo = Topology.from_sizes([8, 8, 8, 8])
    hier = trees.paths_hierarchical(topo)
    assert children(hier, 0) == list(range(1, 8)) + [8, 16, 24]
    assert children(hier, 8) == list(range(9, 16))
    grouped = trees.paths_grouped(topo, group_size=4)
    assert children(grouped, 0) == [1, 2, 3, 4, 8, 12, 16, 20, 24, 28]
    assert children(grouped, 12) == [13, 14, 15]
    with pytest.raises(PlanError, match="group_size must be a positive integer"):
        trees.paths_grouped(topo, group_size=0)


def test_make_tree_by_name():
    topo = Topology.from_sizes([4, 4], t_ini=[1, 2, 3, 4, 5, 6, 7, 8])
    for name in trees.TREE_NAMES:
        validate_tree(trees.make_tree(name, topo, root=0), n=8, root=0)
    validate_tree(trees.make_tree("knomial4", topo, root=3), n=8, root=3)
    with pytest.raises(PlanError, match="unknown tree 'oak'"):
        trees.make_tree("oak", topo)
    with pytest.raises(TopologyError, match="needs per-rank initiation costs"):
        trees.make_tree("fnf", Topology.single(3))
