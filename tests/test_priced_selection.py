"""The default selection prices long vectors (``Policy.priced_from``): MagPIe's
plan against the modern family's and Matsuda's gridmpi, by the simulator."""

import pytest

from wacoll import PlanError, Topology
from wacoll.plans import Call, Policy, select
from wacoll.plans.select import COMBINE_RATE, predicted_time


def _allreduce(nbytes):
    return Call("allreduce", count=nbytes // 8, itemsize=8, level="commutative")


def _time(selection, topo, call):
    return predicted_time(selection, topo, call, compute_rate=COMBINE_RATE)


def test_two_ranks_as_two_clusters_take_a_bandwidth_optimal_plan():
    # links as fast as memory: MagPIe's exchange of whole vectors loses to
    # Rabenseifner's halves (half the combining, a fraction of the scratch)
    pair = Topology.from_sizes([1, 1], wan_latency=2e-6, wan_bandwidth=5e9)
    call = _allreduce(1 << 31)
    chosen = select(call, pair)
    assert chosen.family == "modern"
    magpie = select(call, pair, family="magpie")
    assert _time(chosen, pair, call) < _time(magpie, pair, call)


def test_magpies_grid_keeps_magpies_broadcast():
    grid = Topology.from_sizes([2, 2, 2, 2])  # 10 ms, 1 MB/s
    call = Call("bcast", count=8192, itemsize=8, root=0)
    assert select(call, grid).family == "magpie"  # a tie with gridmpi: MagPIe's


def test_the_fastest_predicted_wins():
    longfast = Topology.from_sizes([4, 4], wan_latency=5e-3, wan_bandwidth=100e6)
    call = _allreduce(1 << 20)
    chosen = select(call, longfast)
    others = [select(call, longfast, family=f) for f in ("magpie", "modern", "gridmpi")]
    assert _time(chosen, longfast, call) <= min(_time(o, longfast, call)
                                                 for o in others) * 1.03
    assert chosen.family != "magpie"


def test_short_vectors_and_large_communicators_keep_the_rule():
    pair = Topology.from_sizes([1, 1], wan_latency=2e-6, wan_bandwidth=5e9)
    assert select(_allreduce(1024), pair).family == "magpie"
    assert select(_allreduce(1 << 24), pair, policy=Policy(priced_from=0)).family == \
        "magpie"
    big = Topology.from_sizes([2] * 16, wan_latency=2e-6, wan_bandwidth=5e9)
    assert select(_allreduce(1 << 24), big, policy=Policy(priced_up_to=16)).family \
        == "magpie"


@pytest.mark.parametrize("name", ["priced_from", "priced_up_to"])
def test_bad_policy_values_are_refused(name):
    with pytest.raises(PlanError, match=name):
        Policy(**{name: -1})


def test_the_new_families_are_candidates():
    grid = Topology.from_sizes([2, 2, 2, 2])  # MagPIe's: Swing's allreduce wins
    assert dict(select(_allreduce(1 << 20), grid).options).get("algorithm") == "swing"
    # Swing's allreduce keeps level commutative only: an associative call prices
    # without it
    call = Call("allreduce", count=1 << 17, itemsize=8, level="associative")
    assert select(call, grid).family != "recent"


@pytest.mark.parametrize("sizes", [[2, 2, 2, 2], [1, 1], [3, 2, 2], [4, 4]])
def test_every_count_of_a_priced_octave_builds(sizes):
    """The choice is kept per octave of bytes; every count in it builds and proves."""
    topo = Topology.from_sizes(sizes, wan_latency=5e-4, wan_bandwidth=1e8)
    for count in (8192, 8193, 12345, 16383, 131071, 131072, 200001):
        for op, level in (("allreduce", "commutative"), ("allreduce", "associative"),
                          ("bcast", None)):
            call = Call(op, count=count, itemsize=8, level=level,
                        root=len(sizes) - 1 if op == "bcast" else None)
            select(call, topo).build(topo).prove()
