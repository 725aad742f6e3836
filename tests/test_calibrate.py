"""Calibration: clusters, t_ini and topologies from measured links (wacoll.calibration),
the MPI measurement under mpiexec, and the whole thing on an emulated testbed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from wacoll import Topology
from wacoll.calibration import (
    CalibrationReport,
    build_topology,
    compare_topologies,
    find_clusters,
    fit_t_ini,
)
from wacoll.errors import TopologyError
from wacoll.mpi.allpairs import latency_pairs, rounds

BIN = Path(sys.executable).parent


def _matrix(topo, rng=None, noise=0.0, intra=5e-6):
    """One-way latencies of ``topo`` (intra link ``intra``), with multiplicative noise."""
    n = topo.size
    lat = np.array(
        [
            [
                topo.link(i, j).latency if topo.is_wide_area(i, j) else intra
                for j in range(n)
            ]
            for i in range(n)
        ]
    )
    if noise:
        lat *= rng.uniform(1 - noise, 1 + noise, size=lat.shape)
    np.fill_diagonal(lat, np.nan)
    return lat


def test_clusters_of_uneven_sizes_reordered_and_noisy():
    rng = np.random.default_rng(3)
    topo = Topology.from_clusters(
        [[0, 4], [1, 2, 5, 7], [3], [6, 8, 9]],
        wan_latency=0.01,
        wan_pairs={
            (0, 1): (0.004, 1e6),
            (1, 0): (0.004, 1e6),
            (2, 3): (0.03, 1e6),
            (3, 2): (0.03, 1e6),
        },
    )
    for _ in range(20):
        lat = _matrix(topo, rng, noise=0.3)
        found = find_clusters(lat)
        assert found.clusters == topo.clusters
        assert 5e-6 * 1.3 < found.threshold < 0.004 * 0.7


def test_a_slow_outlier_inside_a_cluster_does_not_split_it():
    topo = Topology.from_sizes([3, 3], wan_latency=0.01)
    lat = _matrix(topo)
    lat[0, 1] = lat[1, 0] = 0.02  # one disturbed pair: 0 and 1 still meet through 2
    assert find_clusters(lat).clusters == ((0, 1, 2), (3, 4, 5))


def test_one_cluster_and_every_rank_alone():
    rng = np.random.default_rng(0)
    fast = 2e-6 * rng.uniform(0.5, 1.5, size=(6, 6))  # x3 spread, no gap of x3
    one = find_clusters(fast)
    assert one.clusters == ((0, 1, 2, 3, 4, 5),) and one.threshold is None
    slow = 0.02 * rng.uniform(0.8, 1.2, size=(5, 5))
    alone = find_clusters(slow)
    assert (
        alone.clusters == tuple((r,) for r in range(5)) and "own cluster" in alone.reason
    )
    # the absolute bound decides only where there is no gap
    assert find_clusters(slow, wide_area=1.0).clusters == ((0, 1, 2, 3, 4),)
    assert find_clusters(np.zeros((1, 1))).clusters == ((0,),)


def test_every_rank_alone_with_different_pair_latencies():
    # four sites, all wide-area, pair latencies 5..40 ms: a gap among the wide-area
    # links must not be taken for the fast/slow gap when no link is fast
    lat = (
        np.array(
            [[0, 5, 10, 40], [5, 0, 12, 35], [10, 12, 0, 30], [40, 35, 30, 0]],
            dtype=float,
        )
        * 1e-3
    )
    found = find_clusters(lat, min_gap=3)
    # the largest ratio (12 -> 30 ms, x2.5) is below min_gap: all alike and slow
    assert found.clusters == ((0,), (1,), (2,), (3,))


def test_sampled_matrices_cluster_through_measured_pairs():
    topo = Topology.from_sizes([5, 7, 4], wan_latency=0.01)
    lat = _matrix(topo)
    mask = np.full(lat.shape, np.nan)
    for i, j in latency_pairs(16, all_pairs=8, samples=2, seed=1):
        mask[i, j] = mask[j, i] = 1
    assert find_clusters(lat * mask).clusters == topo.clusters
    with pytest.raises(TopologyError):
        find_clusters(np.full((3, 3), np.nan))


def test_pair_schedule_has_disjoint_rounds_covering_every_pair():
    pairs = latency_pairs(7)
    sched = rounds(pairs)
    assert sorted(p for r in sched for p in r) == pairs
    for r in sched:
        ranks = [x for p in r for x in p]
        assert len(ranks) == len(set(ranks))
    big = latency_pairs(200, all_pairs=32, samples=3)
    assert len(big) < 200 * 6 and all(i < j for i, j in big)


def test_t_ini_from_round_trips_banikazemi_figure_1():
    t = np.array([100, 300, 300, 300, 300, 100, 300, 300]) * 1e-6
    rtt = t[:, None] + t[None, :]
    assert fit_t_ini(rtt, [range(8)]) == pytest.approx(t)
    rtt[2, 6] = rtt[6, 2] = 0.01  # disturbed round trips move nothing
    rtt[0, 3] = rtt[3, 0] = 0.02
    assert fit_t_ini(rtt, [range(8)]) == pytest.approx(t, rel=1e-3)
    # clusters are fitted apart; a rank alone uses its round trip to itself
    est = fit_t_ini(np.full((3, 3), 2e-4), [[0, 1], [2]], self_rtt=[0, 0, 6e-5])
    assert est == pytest.approx([1e-4, 1e-4, 3e-5])


def test_topology_from_measurements_with_per_pair_links(tmp_path):
    truth = Topology.from_sizes(
        [2, 1, 3],
        intra_latency=5e-6,
        intra_bandwidth=5e9,
        wan_latency=0.01,
        wan_bandwidth=2e6,
        wan_pairs={(0, 2): (0.02, 1e6), (2, 0): (0.02, 1e6)},
    )
    lat = _matrix(truth)
    bw = np.array([[truth.link(i, j).bandwidth for j in range(6)] for i in range(6)])
    topo = build_topology(truth.clusters, lat, bw)
    assert topo.clusters == truth.clusters and topo.intra == truth.intra
    assert topo.wan == truth.wan and topo.wan_pairs == truth.wan_pairs
    report = CalibrationReport.from_measurements(2 * lat, bw, [1e-6] * 6)
    assert report.topology.clusters == truth.clusters
    for path in (tmp_path / "t.toml", tmp_path / "t.json"):
        report.topology.save(path)
        assert Topology.from_file(path) == report.topology
    rows = {r[0]: r for r in compare_topologies(report.topology, truth)}
    assert rows["clusters"][3] == "same"
    assert rows["wan 0->2 latency"][3] == pytest.approx(1.0)
    text = report.table(truth)
    assert "wan 2->0 latency (ms)" in text and "same" in text
    report.save(tmp_path / "r.json")
    assert json.loads((tmp_path / "r.json").read_text())["clusters"] == [
        [0, 1],
        [2],
        [3, 4, 5],
    ]


def test_heatmap_has_units_labels_and_a_colour_bar(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    truth = Topology.from_sizes([2, 3], wan_latency=0.01)
    report = CalibrationReport.from_measurements(2 * _matrix(truth), None, [1e-6] * 5)
    ax = report.heatmap(tmp_path / "h.png")
    assert (tmp_path / "h.png").stat().st_size > 5000
    assert ax.get_xlabel() == "destination rank" and ax.get_ylabel() == "source rank"
    bar = ax.figure.axes[-1]
    assert "latency (ms)" in bar.get_ylabel()
    assert all(float(t).is_integer() for t in ax.get_xticks())


def test_calibrate_command_under_mpiexec(tmp_path):
    out = tmp_path / "topo.toml"
    cmd = [
        str(BIN / "mpiexec"),
        "-n",
        "3",
        sys.executable,
        "-m",
        "wacoll.cli",
        "calibrate",
        "--out",
        str(out),
        "--report",
        str(tmp_path / "r.json"),
        "--heatmap",
        str(tmp_path / "h.png"),
        "--reps",
        "5",
        "--no-progress",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    topo = Topology.from_file(out)
    assert topo.size == 3 and topo.t_ini is not None
    assert "calibrated 3 ranks" in done.stdout
    assert (tmp_path / "h.png").exists()


# ------------------------------------------------------------- on a testbed
def test_calibration_finds_the_testbeds_clusters_and_latencies(tmp_path):
    from wacoll.emulate import Testbed, TestbedError, launcher, netns

    reason = netns.unavailable_reason()
    if reason:
        pytest.skip(f"no emulated testbed here: {reason}")
    try:
        launcher.mpiexec_path()
    except TestbedError as exc:
        pytest.skip(f"no emulated testbed here: {exc}")
    # three clusters of uneven sizes, a different latency for each pair
    pairs = {(0, 1): (0.004, 4e6), (0, 2): (0.008, 4e6), (1, 2): (0.016, 2e6)}
    topo = Topology.from_clusters(
        [[0, 1], [2], [3, 4, 5]],
        wan_latency=0.01,
        wan_bandwidth=4e6,
        wan_pairs={**pairs, **{(b, a): v for (a, b), v in pairs.items()}},
    )
    out = tmp_path / "measured.toml"
    given = tmp_path / "configured.toml"
    topo.save(given)
    with Testbed(topo, name="cal", netem="relay") as tb:
        result = tb.run(
            [
                sys.executable,
                "-m",
                "wacoll.cli",
                "calibrate",
                "--out",
                str(out),
                "--compare",
                str(given),
                "--reps",
                "10",
                "--no-progress",
            ],
            timeout=240,
        )
    assert result.ok, (result.stdout or "")[-3000:] + (result.stderr or "")[-3000:]
    print(result.stdout)
    found = Topology.from_file(out)
    assert found.clusters == topo.clusters
    for a in range(3):
        for b in range(3):
            if a != b:
                i, j = topo.clusters[a][0], topo.clusters[b][0]
                # (6 ranks and the relay on 2 cores: a rank may wake half a
                # millisecond late, whatever the link's latency)
                assert found.link(i, j).latency == pytest.approx(
                    topo.link(i, j).latency, rel=0.1, abs=6e-4
                ), (a, b, result.stdout)
