"""No plan beats the physical lower bound; MagPIe's broadcast comes close to it."""

import pytest

from wacoll import Topology
from wacoll.plans import FAMILIES, build, builders
from wacoll.plans.bounds import needed_bytes, physical_bound
from wacoll.plans.sim import LinkModel, simulate

TOPOLOGIES = [
    Topology.from_sizes([3, 2, 4], wan_latency=0.01, wan_bandwidth=1e6),
    Topology.from_clusters(
        [[0, 3], [1, 4], [2, 5]],
        wan_latency=0.005,
        wan_bandwidth=5e5,
        wan_pairs={(0, 1): (0.02, 2e6)},
    ),
]


def _plans(topo):
    for family in FAMILIES:
        for op, _fn in builders(family).items():
            kwargs = (
                {"level": "commutative"}
                if op
                in (
                    "reduce",
                    "allreduce",
                    "reduce_scatter",
                    "reduce_scatter_block",
                    "scan",
                    "exscan",
                )
                else {}
            )
            if op != "barrier":
                kwargs["count"] = 3000
            yield family, op, build(op, topo, family, **kwargs)


@pytest.mark.parametrize("topo", TOPOLOGIES, ids=["contiguous", "reordered"])
def test_simulated_time_never_beats_the_bound(topo):
    checked = 0
    for family, op, plan in _plans(topo):
        bound = physical_bound(plan, topo)
        sim = simulate(plan, LinkModel(topo)).completion
        assert sim >= bound - 1e-12, (family, op, sim, bound)
        checked += 1
    assert checked >= 39


def test_needed_bytes_per_operation():
    topo = Topology.from_sizes([2, 2])
    assert needed_bytes(build("bcast", topo, "magpie", count=5)) == {0: 0, 1: 5}
    assert needed_bytes(build("allgather", topo, "magpie", count=5)) == {0: 10, 1: 10}
    assert needed_bytes(build("reduce", topo, "magpie", count=5, root=3)) == {0: 0, 1: 5}
    assert needed_bytes(build("scan", topo, "mpich", count=5)) == {0: 0, 1: 5}


def test_magpie_bcast_is_within_a_few_percent_of_the_bound():
    topo = Topology.from_sizes([8, 8, 8, 8], wan_latency=0.01, wan_bandwidth=1e6)
    plan = build("bcast", topo, "magpie", count=1)
    bound = physical_bound(plan, topo)
    assert bound == pytest.approx(0.01 + 1 / 3e6)  # 1 byte over three incoming links
    assert simulate(plan, LinkModel(topo)).completion < 1.01 * bound
    barrier = build("barrier", topo, "magpie")
    assert physical_bound(barrier, topo) == 0.01
