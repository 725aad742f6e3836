"""Heterogeneous broadcast trees (SPOC, FNF, optimal) and the t_ini / MagPIe cost models.

Reference: Banikazemi, Moorthy and Panda, ICPP 1998 (Figure 1, Table 2, Section 6.4);
Kielmann et al., MagPIe, PPoPP 1999 (Figure 1).
"""

import math
import random
from functools import cache
from itertools import combinations

import numpy as np
import pytest

from wacoll.errors import PlanError, TopologyError
from wacoll.trees import (
    bcast_time,
    bcast_time_ts_tr,
    binomial,
    children,
    flat,
    fnf,
    from_parents,
    optimal,
    receive_times,
    spoc,
    validate_tree,
)
from wacoll.trees.optimal import MAX_PARTICIPANTS

BUILDERS = {"spoc": spoc, "fnf": fnf, "optimal": optimal}

# Banikazemi Figure 1: paper nodes 1..8 are ranks 0..7; nodes 1 and 6 are fast.
FIG1 = [100, 300, 300, 300, 300, 100, 300, 300]


# --- cost models ------------------------------------------------------------------


def test_magpie_figure1():
    assert bcast_time_ts_tr(flat(8), 10, 1000) == 1060
    assert bcast_time_ts_tr(flat(8), 10, 11) == 71
    assert bcast_time_ts_tr(binomial(8), 10, 1000) == 3000
    assert bcast_time_ts_tr(binomial(8), 10, 11) == 33


def test_single_node_costs_nothing():
    lone = from_parents({}, 1, 0, "lone")
    assert bcast_time(lone, [7]) == 0
    assert bcast_time_ts_tr(lone, 1, 1) == 0
    assert receive_times(lone, [7]) == {0: 0}


def test_receive_times_follow_send_order():
    t = from_parents({0: [2, 1], 2: [3]}, 4, 0, "custom")
    assert receive_times(t, [10, 1, 5, 1]) == {0: 0, 1: 20, 2: 10, 3: 15}


def test_cost_errors():
    with pytest.raises(PlanError, match="has no cost"):
        bcast_time(binomial(4), [1, 1, 1])
    with pytest.raises(
        TopologyError, match="cost of rank 1 must be a finite number >= 0"
    ):
        bcast_time(binomial(2), [1, -1])
    with pytest.raises(TopologyError, match="t_s must be a finite number >= 0"):
        bcast_time_ts_tr(binomial(2), math.inf, 1)
    with pytest.raises(PlanError, match="not a tree"):
        import networkx as nx

        bcast_time(nx.DiGraph([(0, 1), (1, 0)]), [1, 1])


# --- Banikazemi Figure 1 ----------------------------------------------------------


def test_figure1_latencies():
    assert bcast_time(binomial(8, root=0), FIG1) == 700
    assert bcast_time(spoc(FIG1, root=0), FIG1) == 500
    assert bcast_time(optimal(FIG1, root=0), FIG1) == 400
    assert bcast_time(fnf(FIG1, root=0), FIG1) == 400


def test_figure1b_spoc_puts_fast_node_under_root():
    t = spoc(FIG1)
    # Positions by descendants: v4 (3), v2, v6 (1 each), then leaves; ranks by cost:
    # 5 (fast), then the slow ranks 1, 2, 3, 4, 6, 7 in rank order.
    assert children(t, 0) == [
        5,
        1,
        3,
    ]  # rank 5 (paper node 6) takes the 3-descendant slot
    assert children(t, 5) == [2, 6] and children(t, 2) == [7] and children(t, 1) == [4]


# --- validity, members, errors ----------------------------------------------------


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_trees_are_valid_and_span_members(name):
    rng = random.Random(7)
    build = BUILDERS[name]
    for _ in range(40):
        n = rng.randint(1, 11)
        costs = [rng.choice([1, 2.5, 3, 10, 40]) for _ in range(n)]
        members = rng.sample(range(n), rng.randint(1, n))
        root = rng.choice(members)
        t = build(costs, root=root, members=members)
        assert validate_tree(t, root=root, members=members) == root
        assert set(t.nodes) == set(members)
        assert t.graph["root"] == root and t.graph["name"] == name
    t = build(np.array([3.0, 1.0, 2.0]), root=2)
    assert validate_tree(t, n=3, root=2) == 2


@pytest.mark.parametrize("name", sorted(BUILDERS))
@pytest.mark.parametrize(
    "costs, root, members, error, message",
    [
        (
            [1, -2, 3],
            0,
            None,
            TopologyError,
            "cost of rank 1 must be a finite number >= 0",
        ),
        (
            [1, math.nan],
            0,
            None,
            TopologyError,
            "cost of rank 1 must be a finite number >= 0",
        ),
        (
            [1, math.inf],
            0,
            None,
            TopologyError,
            "cost of rank 1 must be a finite number >= 0",
        ),
        ([1, "2"], 0, None, TopologyError, "cost of rank 1 must be a finite number >= 0"),
        (
            [1, True],
            0,
            None,
            TopologyError,
            "cost of rank 1 must be a finite number >= 0",
        ),
        (
            np.array([1.0, -1.0]),
            0,
            None,
            TopologyError,
            "cost of rank 1 must be a finite number >= 0",
        ),
        ("12", 0, None, TopologyError, "costs must be a sequence"),
        (5, 0, None, TopologyError, "costs must be a sequence"),
        ([], 0, None, TopologyError, "costs is empty"),
        ([1, 2, 3], 3, None, PlanError, "root 3 is not a rank of 0..2"),
        ([1, 2, 3], -1, None, PlanError, "root -1 is not a rank of 0..2"),
        ([1, 2, 3], 0, [1, 2], PlanError, "root 0 is not in members"),
        ([1, 2, 3], 0, [0, 1, 1], PlanError, "member 1 appears more than once"),
        ([1, 2, 3], 0, [0, 5], PlanError, "member 5 is not a rank of 0..2"),
        ([1, 2, 3], 0, [0, -1], PlanError, "member -1 is not a rank of 0..2"),
        ([1, 2, 3], 0, 7, PlanError, "members must be a collection of ranks"),
    ],
)
def test_invalid_input(name, costs, root, members, error, message):
    # a bad cost describes the network (TopologyError); a bad root or member set
    # is the tree's own fault (PlanError)
    with pytest.raises(error, match=message):
        BUILDERS[name](costs, root=root, members=members)


def test_optimal_refuses_too_many_participants():
    costs = list(range(1, MAX_PARTICIPANTS + 2))
    with pytest.raises(PlanError, match=f"at most {MAX_PARTICIPANTS} participants"):
        optimal(costs)
    # The limit counts participants, not ranks.
    assert optimal(costs, members=[0, 1, 2]).number_of_nodes() == 3


def test_fnf_order_is_send_order():
    t = fnf(FIG1)
    assert children(t, 0) == [5, 1, 3, 6] and children(t, 5) == [2, 4, 7]
    times = receive_times(t, FIG1)
    for p in t.nodes:
        kids = children(t, p)
        assert [times[c] for c in kids] == sorted(times[c] for c in kids)


# --- optimal is exact ---------------------------------------------------------------


def brute_force_latency(costs, root, members):
    """The literal Section 5 recurrence: enumerate j in A and every split B + C."""

    @cache
    def L(i, A):
        if not A:
            return 0
        best = math.inf
        for j in A:
            rest = A - {j}
            items = sorted(rest)
            for r in range(len(items) + 1):
                for B in combinations(items, r):
                    B = frozenset(B)
                    best = min(best, costs[i] + max(L(i, B), L(j, rest - B)))
        return best

    return L(root, frozenset(m for m in members if m != root))


def test_optimal_matches_brute_force():
    rng = random.Random(2024)
    for trial in range(150):
        n = rng.randint(1, 6)
        if trial % 3 == 0:
            costs = [rng.randint(1, 4) * 100 for _ in range(n)]  # many ties
        else:
            costs = rng.sample(range(1, 1000), n)  # distinct
        members = rng.sample(range(n), rng.randint(1, n))
        root = rng.choice(members)
        t = optimal(costs, root=root, members=members)
        assert bcast_time(t, costs) == brute_force_latency(tuple(costs), root, members)


def test_optimal_exhaustive_small_trees():
    """For 4 participants, no tree (all 16 ordered trees) beats optimal()."""
    costs = [3, 1, 4, 2]

    def ordered_trees(placed, pending):
        if not pending:
            yield dict(placed)
            return
        v = pending[0]
        for p in placed:
            for pos in range(len(placed[p]) + 1):
                new = {q: list(k) for q, k in placed.items()}
                new[p].insert(pos, v)
                new[v] = []
                yield from ordered_trees(new, pending[1:])

    best = min(
        bcast_time(from_parents(ch, 4, 0, "x"), costs)
        for ch in ordered_trees({0: []}, [1, 2, 3])
    )
    assert bcast_time(optimal(costs), costs) == best


# --- Table 2: FNF against optimal ---------------------------------------------------


def table2_instances(participants, count, seed):
    rng = random.Random(seed * 100 + participants)
    for _ in range(count):
        costs = [rng.randrange(100, 900, 100) for _ in range(9)]
        members = rng.sample(range(9), participants)
        yield costs, rng.choice(members), members


@pytest.mark.parametrize("participants", range(2, 10))
def test_table2_fnf_versus_optimal(participants):
    # For 8 participants the mean relative gap is about 0.89% (sd 2.85% per instance,
    # measured over 40,000 instances), so 1% needs ~2,000 instances to be a stable check.
    count = 400 if participants <= 5 else 2000
    lat = {"fnf": [], "optimal": [], "spoc": []}
    for costs, root, members in table2_instances(participants, count, seed=1998):
        for name, build in BUILDERS.items():
            lat[name].append(bcast_time(build(costs, root=root, members=members), costs))
    fnf_l, opt_l, spoc_l = (
        np.array(lat[k], dtype=float) for k in ("fnf", "optimal", "spoc")
    )
    assert (opt_l <= fnf_l).all() and (opt_l <= spoc_l).all()
    if participants <= 5:
        assert (fnf_l == opt_l).all()  # the paper's Table 2: 0.00% up to 5 nodes
    else:
        gap = np.mean((fnf_l - opt_l) / opt_l)
        assert 0 <= gap < 0.01  # the paper reports 0.19% .. 0.99%
    if participants == 2:
        # Optimal is the source's cost, uniform on 100..800 (the paper: 453.37).
        assert abs(opt_l.mean() - 450) < 25


# --- Section 6.4: homogeneous costs ------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13, 16, 31, 64, 100])
def test_homogeneous_costs_match_binomial(n):
    costs = [7] * n
    root = n // 3
    expected = bcast_time(binomial(n, root), costs)
    assert expected == 7 * math.ceil(math.log2(n)) if n > 1 else expected == 0
    assert bcast_time(fnf(costs, root=root), costs) == expected
    assert bcast_time(spoc(costs, root=root), costs) == expected
    if n <= 13:
        assert bcast_time(optimal(costs, root=root), costs) == expected


def test_half_fast_spoc_equals_fnf():
    """Section 6.4: with half the nodes (source included) fast, SPOC is as good as FNF."""
    for n in (4, 8, 16, 32):
        costs = [100 if r < n // 2 else 400 for r in range(n)]
        assert bcast_time(spoc(costs), costs) == bcast_time(fnf(costs), costs)
