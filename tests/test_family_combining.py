"""The combining family: Plaat's per-cluster message combining for all-to-all."""

import random

import pytest

from wacoll import PlanError, Topology
from wacoll.plans import build, builders

TOPOLOGIES = [Topology.single(n) for n in range(1, 10)] + [
    Topology.from_clusters([[0, 3, 4], [1, 2], [5]]),
    Topology.from_clusters([[0, 2, 4, 6], [1, 3, 5, 7]]),
    Topology.from_clusters([[1, 4, 5, 7], [0, 2], [3, 6, 8]]),
    Topology.from_sizes([1, 1, 1]),
    Topology.from_sizes([4, 2, 3]),
    Topology.from_sizes([1, 6]),
    Topology.from_sizes([8, 8, 8, 8]),
    Topology.from_sizes([5] * 8),
]


def _random_counts(size, seed):
    rng = random.Random(seed)
    return [[rng.choice([0, 0, 1, 2, 5]) for _ in range(size)] for _ in range(size)]


def _variants(topo):
    size = topo.size
    yield "alltoall", {"count": 3}
    yield "alltoallv", {"counts": _random_counts(size, size)}
    yield "alltoallv", {"counts": [[0] * size for _ in range(size)]}


def test_the_family_builds_alltoall_only():
    assert set(builders("combining")) == {"alltoall", "alltoallv"}
    with pytest.raises(PlanError, match="the combining family has no bcast plan"):
        build("bcast", Topology.single(2), "combining")


@pytest.mark.parametrize("topo", TOPOLOGIES, ids=str)
def test_one_wide_area_message_per_ordered_pair_of_clusters(topo):
    c = topo.nclusters
    for op, kw in _variants(topo):
        combined = build(op, topo, "combining", **kw).prove()
        flat = build(op, topo, "mpich", **kw).prove()
        assert combined.wide_area_messages == c * (c - 1)
        assert combined.wide_area_bytes == flat.wide_area_bytes
        assert combined.max_wide_area_hops == (1 if c > 1 else 0)
        assert combined.no_repeated_data


@pytest.mark.parametrize("topo", TOPOLOGIES, ids=str)
def test_every_ordered_pair_of_ranks_exchanges_at_most_one_message(topo):
    plan = build("alltoall", topo, "combining")
    pairs = [(m.src, m.dst) for m in plan.messages()]
    assert len(pairs) == len(set(pairs))
    intra = sum(len(c) * (len(c) - 1) for c in topo.clusters)
    assert plan.prove().messages - plan.prove().wide_area_messages == intra


def test_far_fewer_wide_area_messages_than_the_flat_exchange():
    topo = Topology.from_sizes([5] * 8)
    combined = build("alltoall", topo, "combining").prove()
    flat = build("alltoall", topo, "mpich").prove()
    assert (combined.wide_area_messages, flat.wide_area_messages) == (56, 1400)
    # the price: remote blocks also travel to and from the coordinators
    assert combined.bytes > flat.bytes


def test_wide_area_messages_join_the_coordinators_of_reordered_clusters():
    topo = Topology.from_clusters([[1, 4, 5, 7], [0, 2], [3, 6, 8]])
    plan = build("alltoall", topo, "combining")
    wide = {(m.src, m.dst) for m in plan.messages() if m.wide_area}
    coordinators = {1, 0, 3}
    assert wide == {(a, b) for a in coordinators for b in coordinators if a != b}
    # rank 5 sends one message to its coordinator with all blocks that leave its
    # cluster plus its block for rank 1
    first = next(s for s in plan.programs[5] if s.kind == "send")
    assert first.peer == 1
    assert first.blocks == tuple(sorted(5 * 9 + j for j in (0, 1, 2, 3, 6, 8)))


def test_one_cluster_is_a_pairwise_exchange():
    plan = build("alltoall", Topology.single(4), "combining")
    assert plan.prove().messages == 12
    assert all(len(m.blocks) == 1 for m in plan.messages())
    assert all(s.src != "tmp" and s.dst != "tmp" for p in plan.programs for s in p)
    assert [str(s) for s in plan.programs[1]] == [
        "copy [5] in -> out",
        "send 2 [6] from in",
        "send 3 [7] from in",
        "send 0 [4] from in",
        "recv 0 [1]",
        "recv 3 [13]",
        "recv 2 [9]",
    ]


def test_zero_counts_move_no_bytes():
    topo = Topology.from_sizes([2, 3])
    counts = [[0] * 5 for _ in range(5)]
    counts[0][4] = 7  # one block crosses from cluster 0 to cluster 1
    report = build("alltoallv", topo, "combining", counts=counts).prove()
    # 0 (coordinator) -> 2 (coordinator) -> 4
    assert (report.bytes, report.wide_area_bytes) == (14, 7)
    # every block still reaches its rank, so the plan keeps its shape
    assert report.wide_area_messages == 2


def test_itemsize_scales_bytes():
    topo = Topology.from_sizes([2, 2])
    one = build("alltoall", topo, "combining", count=2).prove()
    eight = build("alltoall", topo, "combining", count=2, itemsize=8).prove()
    assert eight.wide_area_bytes == 8 * one.wide_area_bytes == 8 * 2 * 8
