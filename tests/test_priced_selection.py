"""The default selection prices long vectors (``Policy.priced_from``): MagPIe's
plan against the modern family's and Matsuda's gridmpi, by the simulator; and every
call with a count against the MPI library's own collective
(``Policy.library_priced``), with what a call of each costs on this machine
(``wacoll.plans.callcost``)."""

import pytest

from wacoll import PlanError, Topology
from wacoll.plans import Call, Policy, select
from wacoll.plans.callcost import FREE, CallCosts
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
    assert (
        _time(chosen, longfast, call)
        <= min(_time(o, longfast, call) for o in others) * 1.03
    )
    assert chosen.family != "magpie"


def test_matsudas_allreduce_is_pipelined_on_a_long_fast_link():
    # Matsuda's setting: the pipelined modified Rabenseifner hides the clusters'
    # stages behind the wide-area transfer, so it beats every other plan and the
    # library; the pipelined van de Geijn ties with the modern family's broadcast
    longfast = Topology.from_sizes([4, 4], wan_latency=5e-3, wan_bandwidth=100e6)
    chosen = select(_allreduce(1 << 24), longfast)
    assert chosen.family == "gridmpi"
    assert dict(chosen.options)["segments"] == Policy().max_segments
    bcast = Call("bcast", count=1 << 21, itemsize=8, root=0)
    gridmpi = select(bcast, longfast, family="gridmpi")
    assert dict(gridmpi.options)["segments"] == Policy().max_segments
    assert _time(gridmpi, longfast, bcast) <= _time(
        select(bcast, longfast), longfast, bcast
    )


def test_a_long_allgather_is_priced_too():
    # every rank of a cluster sends its own block across (gridmpi) instead of the
    # coordinator alone (MagPIe): on a long-and-fast link that wins; a short one,
    # below Policy.priced_from, keeps the rule (MagPIe's plan)
    longfast = Topology.from_sizes([4, 4], wan_latency=5e-3, wan_bandwidth=100e6)
    call = Call("allgather", count=1 << 17, itemsize=8)
    chosen = select(call, longfast)
    assert chosen.family == "gridmpi"
    assert "predicted fastest" in chosen.reason
    assert _time(chosen, longfast, call) < 0.85 * _time(
        select(call, longfast, family="magpie"), longfast, call
    )
    assert select(Call("allgather", count=1, itemsize=8), longfast).family == "magpie"


def test_a_priced_choice_does_not_depend_on_the_count_priced_first():
    # two counts of one octave that, priced each for itself, choose differently:
    # ranks whose earlier calls differed (communicators of equal topology) must
    # still choose alike, so the octave is priced at its own size
    one8 = Topology.from_sizes([1, 8], wan_latency=5e-4, wan_bandwidth=1.25e9)
    # priced each for itself, 32768 elements choose modern, 40960 gridmpi
    calls = [Call("bcast", count=n, itemsize=8, root=0) for n in (32768, 40960)]
    # two policies that price these broadcasts alike, each its own cache
    # entries: one prices the octave's first count first, the other the second
    policies = (Policy(), Policy(reproducible_below=4097))
    firsts = [
        select(calls[0], one8, policy=policies[0]).family,
        select(calls[1], one8, policy=policies[1]).family,
    ]
    seconds = [
        select(calls[1], one8, policy=policies[0]).family,
        select(calls[0], one8, policy=policies[1]).family,
    ]
    assert len(set(firsts + seconds)) == 1, (firsts, seconds)


def test_short_vectors_and_large_communicators_keep_the_rule():
    pair = Topology.from_sizes([1, 1], wan_latency=2e-6, wan_bandwidth=5e9)
    plans_only = Policy(library_priced=False)
    assert select(_allreduce(1024), pair, policy=plans_only).family == "magpie"
    assert (
        select(
            _allreduce(1 << 24), pair, policy=Policy(priced_from=0, library_priced=False)
        ).family
        == "magpie"
    )
    big = Topology.from_sizes([2] * 16, wan_latency=2e-6, wan_bandwidth=5e9)
    assert (
        select(_allreduce(1 << 24), big, policy=Policy(priced_up_to=16)).family
        == "magpie"
    )


def _costs(plan_call, library_call):
    return CallCosts(
        plan_call=plan_call,
        plan_message=0.0,
        library_call=library_call,
        library_message=0.0,
    )


@pytest.mark.parametrize("op", ["bcast", "reduce", "allreduce", "allgather"])
def test_where_no_plan_can_win_the_library_runs(op):
    assert not Policy().library_priced  # asked for: see its docstring
    # 4 x 2 ranks over links as fast as the library's: a plan saves no wide-area
    # latency, and a call of a plan costs more than the library's
    fast = Topology.from_sizes(
        [4, 4], wan_latency=5e-6, wan_bandwidth=5e9, intra_latency=5e-6
    )
    call = Call(op, count=1, itemsize=8, root=0 if op in ("bcast", "reduce") else None)
    dear_plans = Policy(
        call_costs=_costs(plan_call=50e-6, library_call=1e-6), library_priced=True
    )
    chosen = select(call, fast, policy=dear_plans)
    assert chosen.native
    assert "native" in chosen.reason and "magpie" in chosen.reason
    # a caller that needs a plan is never handed the library
    assert select(call, fast, policy=dear_plans, allow_native=False).family == "magpie"


def test_where_a_plan_saves_wide_area_latency_it_runs():
    grid = Topology.from_sizes([2, 2, 2, 2])  # 10 ms, 1 MB/s
    call = Call("allreduce", count=1, itemsize=8)
    chosen = select(
        call, grid, policy=Policy(call_costs=_costs(1e-3, 0.0), library_priced=True)
    )
    assert chosen.family == "magpie"
    magpie = _time(chosen, grid, call)
    library = _time(select(call, grid, family="native"), grid, call)
    assert magpie < library / 1.9  # one wide-area crossing against two


def test_the_library_is_predicted_as_the_modern_family_with_its_call_costs():
    pair = Topology.from_sizes([1, 1], wan_latency=1e-3, wan_bandwidth=1e9)
    call = _allreduce(8)
    costs = _costs(plan_call=0.0, library_call=7e-6)
    library = predicted_time(
        select(call, pair, family="native"), pair, call, Policy(call_costs=costs)
    )
    modern = predicted_time(
        select(call, pair, family="modern"), pair, call, Policy(call_costs=FREE)
    )
    assert library == pytest.approx(modern + 7e-6)


def test_a_strict_call_never_goes_to_the_library():
    fast = Topology.from_sizes([4, 4], wan_latency=5e-6, wan_bandwidth=5e9)
    call = Call("allreduce", count=1, itemsize=8, level="strict")
    dear_plans = Policy(
        call_costs=_costs(plan_call=1.0, library_call=0.0),
        arithmetic="plain",
        library_priced=True,
    )
    assert not select(call, fast, policy=dear_plans).native


@pytest.mark.parametrize("name", ["priced_from", "priced_up_to"])
def test_bad_policy_values_are_refused(name):
    with pytest.raises(PlanError, match=name):
        Policy(**{name: -1})


@pytest.mark.parametrize("bad", [{"library_priced": "yes"}, {"call_costs": 1e-6}])
def test_bad_library_pricing_values_are_refused(bad):
    with pytest.raises(PlanError, match=next(iter(bad))):
        Policy(**bad)


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
        for op, level in (
            ("allreduce", "commutative"),
            ("allreduce", "associative"),
            ("bcast", None),
        ):
            call = Call(
                op,
                count=count,
                itemsize=8,
                level=level,
                root=len(sizes) - 1 if op == "bcast" else None,
            )
            select(call, topo).build(topo).prove()


def test_a_communicators_segments_are_kept():
    # the policy cuts long vectors into segments only where no one asked for a number
    grid = Topology.from_sizes([2, 2])
    call = Call("bcast", count=16, itemsize=8, root=0)
    given = select(call, grid, family="mpich", comm_options={"segments": 4})
    assert dict(given.options)["segments"] == 4
    assert dict(select(call, grid, family="mpich").options)["segments"] == 1


def test_a_priced_choice_is_kept_only_for_calls_priced_alike():
    # a threshold inside an octave: the call below it prices MagPIe's plan against
    # the library only; the call above it, in the same octave, prices the long-vector
    # families too and must not reuse the first call's choice
    pair = Topology.from_sizes([2, 2], wan_latency=2e-6, wan_bandwidth=5e9)
    policy = Policy(library_priced=True, priced_from=100000)
    below = select(_allreduce(70000), pair, policy=policy)
    above = select(_allreduce(120000), pair, policy=policy)
    assert below.native and above.family == "modern", (below.reason, above.reason)
    # the octave is priced at its own size, with the candidates of the call's size
    assert "65536-byte" in above.reason and "gridmpi" in above.reason


@pytest.mark.parametrize("family", [None, "native", "modern", "gridmpi", "recent"])
@pytest.mark.parametrize(
    "call",
    [
        Call("allreduce", count=1, itemsize=8, level="commutative"),
        Call("bcast", count=8192, itemsize=8, root=2),
        Call("allgather", count=64, itemsize=4),
    ],
)
def test_a_price_without_the_proof_is_the_same_price(family, call):
    """Learning ranks candidates by their price without proving their plans
    (``checked=False``: half a price's cost); the figure is the same."""
    topo = Topology.from_sizes([2, 3], wan_latency=1e-3, wan_bandwidth=1e8)
    try:
        chosen = select(call, topo, family=family)
    except PlanError:
        pytest.skip(f"{family} has no plan for {call.op}")
    checked = predicted_time(chosen, topo, call, compute_rate=COMBINE_RATE)
    unchecked = predicted_time(
        chosen, topo, call, compute_rate=COMBINE_RATE, checked=False
    )
    assert unchecked == checked


def test_an_unchecked_simulation_still_refuses_a_plan_whose_messages_do_not_pair():
    from wacoll.plans.builder import PlanBuilder
    from wacoll.plans.sim import simulate

    b = PlanBuilder("bcast", Topology.single(2), count=4, root=0)
    b.send(0, 1, b.all_blocks)  # rank 1 never receives it
    with pytest.raises(PlanError, match="never receives"):
        simulate(b.build(), checked=False)
