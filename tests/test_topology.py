"""Topology construction, validation, file forms and queries."""

import json

import pytest

from wacoll import LinkParams, Topology, TopologyError


def test_from_sizes_contiguous_and_coordinators():
    topo = Topology.from_sizes([4, 4, 8])
    assert topo.size == 16
    assert topo.nclusters == 3
    assert topo.clusters[2] == tuple(range(8, 16))
    assert topo.is_contiguous
    assert topo.coordinators() == (0, 4, 8)
    assert topo.coordinators(root=10) == (0, 4, 10)
    assert topo.cluster_ids == (0,) * 4 + (1,) * 4 + (2,) * 8


def test_reordered_clusters_any_permutation():
    topo = Topology.from_clusters([[5, 0, 3], [1, 2], [4]])
    assert topo.clusters == ((0, 3, 5), (1, 2), (4,))
    assert not topo.is_contiguous
    assert [topo.cluster_of(r) for r in range(6)] == [0, 1, 1, 0, 2, 0]


def test_links_per_level_and_per_pair():
    topo = Topology.from_sizes(
        [2, 2, 2],
        intra_latency=1e-6,
        intra_bandwidth=1e9,
        wan_latency=0.01,
        wan_bandwidth=1e6,
        wan_pairs={(0, 2): (0.05, 2e6)},
    )
    assert topo.link(0, 1) == LinkParams(1e-6, 1e9)
    assert topo.link(0, 2) == LinkParams(0.01, 1e6)
    assert topo.link(1, 4) == LinkParams(0.05, 2e6)
    assert topo.link(4, 1) == LinkParams(0.01, 1e6)  # pairs are directed
    assert topo.is_wide_area(1, 2) and not topo.is_wide_area(2, 3)


@pytest.mark.parametrize(
    "clusters, message",
    [
        ([[0, 1], [1, 2]], "rank 1 appears twice"),
        ([[0, 2]], "rank 1 is missing"),
        ([[0], []], "cluster 1 is empty"),
        ([[0, -1]], "negative rank"),
        ([[0, "1"]], "integer"),
        ([], "at least one cluster"),
    ],
)
def test_invalid_clusters_name_the_problem(clusters, message):
    with pytest.raises(TopologyError, match=message):
        Topology.from_clusters(clusters)


@pytest.mark.parametrize(
    "links, message",
    [
        ({"wan_latency": -1.0}, "wan latency must be finite and >= 0"),
        ({"wan_bandwidth": 0}, "wan bandwidth must be > 0"),
        ({"intra_bandwidth": -5}, "intra bandwidth must be > 0"),
        ({"intra_latency": float("nan")}, "intra latency must be finite"),
        ({"t_ini": [1.0]}, "t_ini has 1 entries for 2 ranks"),
        ({"t_ini": [1.0, -2.0]}, r"t_ini\[1\] must be finite and >= 0"),
        ({"node_bandwidth": [1.0, 0.0]}, r"node_bandwidth\[1\] must be > 0"),
        ({"wan_pairs": {(0, 0): (1, 1)}}, "joins a cluster to itself"),
        ({"wan_pairs": {(0, 5): (1, 1)}}, "cluster 5, which does not exist"),
    ],
)
def test_invalid_links_name_the_problem(links, message):
    with pytest.raises(TopologyError, match=message):
        Topology.from_sizes([1, 1], **links)


def test_bad_sizes():
    with pytest.raises(TopologyError, match="cluster 1 must have at least one rank"):
        Topology.from_sizes([2, 0])


def test_rank_queries_validate():
    topo = Topology.from_sizes([2])
    with pytest.raises(TopologyError, match="rank 2 is not in 0..1"):
        topo.cluster_of(2)
    with pytest.raises(TopologyError, match="rank 7 is not in 0..1"):
        topo.coordinators(root=7)


@pytest.mark.parametrize("suffix", [".json", ".toml"])
def test_file_round_trip(tmp_path, suffix):
    topo = Topology.from_clusters(
        [[0, 2], [1, 3, 4]],
        wan_latency=0.02,
        wan_bandwidth=5e5,
        wan_pairs={(1, 0): (0.03, 1e6)},
        t_ini=[1e-4, 3e-4, 3e-4, 1e-4, 2e-4],
    )
    path = tmp_path / f"topo{suffix}"
    topo.save(path)
    assert Topology.from_file(path) == topo


def test_file_rejects_unknown_fields_and_bad_syntax(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"sizes": [2], "latency": 1}))
    with pytest.raises(TopologyError, match="unknown topology field 'latency'"):
        Topology.from_file(path)
    path.write_text("{not json")
    with pytest.raises(TopologyError, match="t.json"):
        Topology.from_file(path)
    toml = tmp_path / "t.toml"
    toml.write_text("sizes = [2\n")
    with pytest.raises(TopologyError, match="t.toml"):
        Topology.from_file(toml)
    other = tmp_path / "t.yaml"
    other.write_text("sizes: [2]")
    with pytest.raises(TopologyError, match="end in .toml or .json"):
        Topology.from_file(other)
    with pytest.raises(TopologyError, match="give exactly one of 'clusters' and 'sizes'"):
        Topology.from_dict({"sizes": [1], "clusters": [[0]]})
    with pytest.raises(
        TopologyError, match="the topology file .*missing.json: no such file"
    ):
        Topology.from_file(tmp_path / "missing.json")


def test_file_is_data_not_code(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"sizes": "__import__('os').system('false')"}))
    with pytest.raises(TopologyError):
        Topology.from_file(path)


def test_str_mentions_shape():
    text = str(Topology.from_clusters([[0, 2], [1]]))
    assert "3 ranks in 2 reordered clusters [2, 1]" in text
