"""wacoll.costs: one cost model for the tree cost functions and the simulator."""

import math

import pytest

from wacoll import Topology, TopologyError, trees
from wacoll.costs import (
    arrival,
    ts_tr_message,
    validate_rate,
    validate_t_ini,
    validate_time,
)
from wacoll.plans import build
from wacoll.plans.sim import LinkModel, TiniModel, TsTrModel, simulate

FIG1 = [100, 300, 300, 300, 300, 100, 300, 300]  # Banikazemi Figure 1


@pytest.mark.parametrize("t_ini", [[1, -1], [1, math.nan], [1, "2"], [], "12"])
def test_a_bad_t_ini_is_a_topology_error_everywhere(t_ini):
    for use in (
        trees.fnf,
        trees.spoc,
        trees.optimal,
        TiniModel,
        lambda c: trees.bcast_time(trees.flat(2), c),
    ):
        with pytest.raises(TopologyError):
            use(t_ini)


@pytest.mark.parametrize("t_s, t_r", [(-1, 1), (1, math.inf), ("1", 1), (True, 1)])
def test_a_bad_t_s_or_t_r_is_a_topology_error_everywhere(t_s, t_r):
    with pytest.raises(TopologyError):
        trees.bcast_time_ts_tr(trees.flat(2), t_s, t_r)
    with pytest.raises(TopologyError):
        TsTrModel(t_s, t_r)


def test_a_bad_size_function_result_is_a_topology_error():
    plan = build("bcast", Topology.single(2), "tree", tree="flat")
    with pytest.raises(TopologyError, match=r"t_r\(nbytes\)"):
        simulate(plan, TsTrModel(1, lambda nbytes: -1.0))


def test_a_missing_t_ini_is_a_topology_error_everywhere():
    with pytest.raises(TopologyError, match="t_ini"):
        trees.make_tree("fnf", Topology.single(3))
    with pytest.raises(TopologyError, match="t_ini"):
        TiniModel(Topology.single(3))


@pytest.mark.parametrize("tree", ["flat", "binomial", "chain", "fnf", "spoc"])
def test_tree_costs_and_simulator_agree(tree):
    topo = Topology.single(8).with_t_ini(FIG1)
    t = trees.make_tree(tree, topo)
    plan = build("bcast", topo, "tree", tree=t)
    assert simulate(plan, TiniModel(FIG1)).completion == trees.bcast_time(t, FIG1)
    assert simulate(plan, TsTrModel(10, 1000)).completion == trees.bcast_time_ts_tr(
        t, 10, 1000
    )


def test_parameter_checks():
    assert validate_time("t", 3) == 3 and isinstance(validate_time("t", 3), int)
    assert validate_rate("b", 2) == 2.0 and validate_rate("b", None) is None
    with pytest.raises(TopologyError, match="bytes/s"):
        validate_rate("b", None, optional=False)
    with pytest.raises(TopologyError, match="bandwidth"):
        TiniModel(FIG1, bandwidth=-1.0)
    with pytest.raises(TopologyError, match="overhead"):
        LinkModel(Topology.single(2), overhead=math.nan)
    assert validate_t_ini((1, 2.5)) == [1, 2.5]
    assert ts_tr_message(lambda nbytes: nbytes // 2, 2, nbytes=6) == (3, 2)
    assert arrival(5, 0, 10, 1) == 6
