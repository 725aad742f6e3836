"""wacoll.plans.sim.simgrid: plans on SimGrid, held against wacoll's LinkModel.

The tests that run SimGrid skip, saying why, where its Python bindings are not
installed (``tools/install_simgrid.sh``); the platform's description and the error
without SimGrid are tested everywhere.
"""

import os

import pytest

from wacoll import Topology
from wacoll.errors import PlanError, SimGridUnavailable
from wacoll.plans import build
from wacoll.plans.sim import LinkModel, TsTrModel, simulate
from wacoll.plans.sim import simgrid as sgsim

REASON = sgsim.simgrid_unavailable()
needs_simgrid = pytest.mark.skipif(REASON is not None, reason=f"needs SimGrid: {REASON}")


def test_platform_description_has_the_topologys_links():
    topo = Topology.from_sizes(
        [2, 3],
        intra_latency=2e-5,
        intra_bandwidth=5e8,
        wan_latency=0.005,
        wan_bandwidth=1e8,
        node_bandwidth=[1e8, 2e8, 1e8, 1e8, 3e8],
    )
    p = sgsim.platform_description(topo)
    assert p["clusters"] == [[0, 1], [2, 3, 4]]
    assert p["up"] == [1e8, 2e8, 1e8, 1e8, 3e8]  # node rates cap each rank
    # a LAN carries its ranks' node rates and the wide-area links in: never the bottleneck
    assert p["lan"] == [[2e-5, 2 * (3e8 + 1e8)], [2e-5, 2 * (5e8 + 1e8)]]
    # the wide-area link's latency plus the receiver's LAN is the topology's
    assert [w[:2] for w in p["wan"]] == [[0, 1], [1, 0]]
    for a, b, lat, bw in p["wan"]:
        assert lat + 2e-5 == pytest.approx(topo.wan_link(a, b).latency)
        assert bw == topo.wan_link(a, b).bandwidth


def test_errors_name_the_fault():
    topo = Topology.from_sizes([2, 2])
    plan = build("bcast", topo, "magpie", count=8)
    with pytest.raises(PlanError, match="needs a LinkModel"):
        sgsim.simulate_simgrid(plan, TsTrModel(1, 2))
    with pytest.raises(PlanError, match="needs a wacoll Plan"):
        sgsim.simulate_simgrid("plan")
    with pytest.raises(PlanError, match="other clusters"):
        sgsim.simulate_simgrid(plan, LinkModel(Topology.from_sizes([1, 3])))


@pytest.fixture
def without_simgrid(monkeypatch, tmp_path):
    """Child processes that cannot import SimGrid (a ``simgrid`` module first on their
    path that refuses), and the cached answer of simgrid_unavailable() forgotten
    before and after."""
    (tmp_path / "simgrid.py").write_text('raise ImportError("no SimGrid here")\n')
    monkeypatch.setenv(
        "PYTHONPATH",
        os.pathsep.join(
            [str(tmp_path)] + [p for p in [os.environ.get("PYTHONPATH")] if p]
        ),
    )
    sgsim.simgrid_unavailable.cache_clear()
    yield
    sgsim.simgrid_unavailable.cache_clear()


def test_without_simgrid_the_error_says_how_to_install(without_simgrid):
    # as a child process without SimGrid answers
    reason = sgsim.simgrid_unavailable()
    assert "tools/install_simgrid.sh" in reason and "pip install simgrid" in reason
    plan = build("bcast", Topology.from_sizes([1, 1]), "magpie", count=8)
    with pytest.raises(SimGridUnavailable, match="install_simgrid"):
        sgsim.simulate_simgrid(plan)
    assert isinstance(SimGridUnavailable("x"), ImportError)


@needs_simgrid
@pytest.mark.parametrize("wide", [False, True])
def test_one_message_takes_latency_plus_size_over_bandwidth(wide):
    topo = Topology.from_sizes(
        [1, 1] if wide else [2],
        intra_latency=3e-5,
        intra_bandwidth=2e8,
        wan_latency=0.01,
        wan_bandwidth=1e6,
    )
    plan = build("bcast", topo, "tree", tree="flat", count=50_000)
    link = topo.link(0, 1)
    result = sgsim.simulate_simgrid(plan, LinkModel(topo))
    assert result.finish[1] == pytest.approx(
        link.latency + 50_000 / link.bandwidth, rel=1e-9
    )
    assert result.finish[0] == pytest.approx(50_000 / 2e8)  # the sender's node rate
    assert result.messages == 1 and result.version


@needs_simgrid
def test_the_platform_routes_have_the_topologys_links():
    topo = Topology.from_sizes([2, 1, 1], wan_latency=0.02, wan_bandwidth=3e6)
    got = sgsim.routes(topo, [(0, 1), (1, 3), (3, 2)])
    assert got[0, 1] == (["up0", "lan0"], pytest.approx(1e-5), 1e9)  # the node rate
    assert got[1, 3] == (["up1", "wan0-2", "lan2"], pytest.approx(0.02), 3e6)
    assert got[3, 2] == (["up3", "wan2-1", "lan1"], pytest.approx(0.02), 3e6)


@needs_simgrid
@pytest.mark.parametrize(
    "op,family",
    [
        ("bcast", "magpie"),
        ("allreduce", "mpich"),
        ("alltoall", "magpie"),
        ("allreduce", "gridmpi"),
    ],
)
def test_a_small_plan_matches_wacolls_simulator(op, family):
    topo = Topology.from_sizes([2, 2, 2], wan_latency=0.01, wan_bandwidth=1e6)
    level = {"level": "commutative"} if "reduce" in op else {}
    plan = build(op, topo, family, count=4096, **level)
    model = LinkModel(topo, overhead=2e-5)
    ours = simulate(plan, model).completion
    theirs = sgsim.simulate_simgrid(plan, model).completion
    assert theirs == pytest.approx(ours, rel=0.02)


@needs_simgrid
def test_wide_area_flows_share_their_link():
    # both ranks of a cluster send 1e5 bytes to each rank of the other at once: the
    # 1 MB/s link in each direction carries four messages
    topo = Topology.from_sizes([2, 2], wan_latency=0.01, wan_bandwidth=1e6)
    plan = build("alltoall", topo, "mpich", count=100_000)
    ours = simulate(plan, LinkModel(topo))
    theirs = sgsim.simulate_simgrid(plan, LinkModel(topo))
    assert theirs.completion == pytest.approx(ours.completion, rel=1e-3)
    assert ours.completion > 0.4  # the link was shared
