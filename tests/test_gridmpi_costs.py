"""Matsuda et al.'s Table 1 against the link-model simulation of the gridmpi plans.

Setting (the paper's Section 3, two clusters joined by a long-and-fast link): node
rate ``B`` = 1 Gbit/s, wide-area capacity 10 ``B`` (>= n ``B`` for every n), wide-area
latency ``L`` = 10 ms, intra-cluster latency 0.1 us, message ``M`` = 32 MiB, so
``T = M / B`` is about 0.27 s and the bandwidth terms dominate, as in the paper's
32 MB measurements.

Table 1 (``T = M/B``)::

    van de Geijn (modified)   L + T/n + T + T
    farfirst                  L + T + (T + T)
    Rabenseifner (modified)   L + T/n + T + T
    two-tier                  L + T + (T + T) + (T + T)

What the simulation shows, and why it differs from Table 1
-----------------------------------------------------------
The simulated times match, to 0.1 %, Table 1 with each in-cluster ``T`` replaced by
``(p - 1)/p * T``: a binomial scatter, a recursive-halving reduce-scatter, a binomial
gather or a recursive-doubling allgather over ``p`` ranks moves
``M/2 + M/4 + ... + M/p = (p - 1)/p * M`` through its busiest node. The paper says
so ("accumulates to M/B asymptotically") and drops the factor. That is the only
discrepancy: Table 1 is ``2T/p`` too high for the modified algorithms and farfirst,
``4T/p`` for two-tier, so within 15 % for ``p = 8`` (at most 11.6 %) but 16-22 %
off for ``p = 4``; the tests state both.

Table 1 also ignores the intra-cluster forwarding to the ``n`` selected senders. In
this model that is right, not an approximation: a sender first sends its own
blocks (``M/p`` each, at its full rate), while its group forwards theirs over other
nodes' links in parallel, so forwards always arrive before the sender needs them
(receiving is not a bottleneck in the model; the paper notes that it can be, on the
forwarding node's incoming link, but saw no effect). Nor does Table 1 model
wide-area capacity: with capacity ``W < n B`` the ``T/n`` term becomes ``M/W``
(:func:`test_wide_area_capacity_caps_the_n_sender_gain`).
"""

import pytest

from wacoll import Topology
from wacoll.plans.families import gridmpi
from wacoll.plans.sim import LinkModel, simulate

B = 125e6  # node rate: 1 Gbit/s in bytes/s
L = 0.010  # wide-area latency
M = 32 * 2**20  # message bytes (itemsize 1)
T = M / B
TOLERANCE = 0.15  # Table 1 vs simulation, p = 8
EXACT = 1e-3  # refined formula vs simulation


def _topology(sizes, *, latency=L, capacity=10 * B):
    return Topology.from_sizes(
        sizes,
        intra_latency=1e-7,
        intra_bandwidth=B,
        wan_latency=latency,
        wan_bandwidth=capacity,
    )


def _time(topo, op, **options):
    if op == "allreduce":
        options.setdefault("level", "associative")
    plan = gridmpi.BUILDERS[op](topo, count=M, **options)
    return simulate(plan, LinkModel(topo)).completion


# (op, algorithm) -> Table 1's formula, and the same with the (p-1)/p factor
def _table1(algorithm, n):
    return {
        "vandegeijn": L + T / n + T + T,
        "farfirst": L + T + (T + T),
        "rabenseifner": L + T / n + T + T,
        "two-tier": L + T + (T + T) + (T + T),
    }[algorithm]


def _refined(algorithm, n, p, clusters=2):
    f = (p - 1) / p * T
    wide = (clusters - 1) * T  # one-to-all (bcast) / all-to-all (allreduce), per sender
    return {
        "vandegeijn": L + wide / n + f + f,
        "farfirst": L + wide + (f + f),
        "rabenseifner": L + wide / n + f + f,
        "two-tier": L + wide + (f + f) + (f + f),
    }[algorithm]


CASES = [
    ("bcast", "vandegeijn"),
    ("bcast", "farfirst"),
    ("allreduce", "rabenseifner"),
    ("allreduce", "two-tier"),
]


def _simulated(p, n):
    topo = _topology([p, p])
    out = {}
    for op, algorithm in CASES:
        options = {"algorithm": algorithm}
        if algorithm in ("vandegeijn", "rabenseifner"):
            options["n"] = n
        out[algorithm] = _time(topo, op, **options)
    return out


@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_table1_within_15_percent_for_clusters_of_8(n):
    sim = _simulated(8, n)
    for algorithm, t in sim.items():
        formula = _table1(algorithm, n)
        assert t == pytest.approx(formula, rel=TOLERANCE), algorithm
        assert t < formula  # Table 1's asymptotic in-cluster stage costs are upper bounds


@pytest.mark.parametrize("p", [4, 8])
@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_simulation_matches_table1_with_the_exact_stage_costs(p, n):
    sim = _simulated(p, n)
    n_eff = min(n, p)  # n is clamped to the cluster size
    for algorithm, t in sim.items():
        assert t == pytest.approx(_refined(algorithm, n_eff, p), rel=EXACT), algorithm


@pytest.mark.parametrize("n", [1, 2, 4])
def test_table1_misses_clusters_of_4_by_exactly_the_stage_factor(n):
    """For p = 4 Table 1 is 16-22 % high: the (p-1)/p factor, nothing else."""
    sim = _simulated(4, n)
    for algorithm, t in sim.items():
        stages = 4 if algorithm == "two-tier" else 2
        gap = _table1(algorithm, n) - t
        assert gap == pytest.approx(stages * T / 4, rel=EXACT), algorithm
        assert gap / _table1(algorithm, n) > TOLERANCE, algorithm  # beyond 15 %: stated


def test_modified_algorithms_beat_the_grid_mpi_baselines():
    """The paper's claims at 32 MB: allreduce 3.2x and bcast 1.6x faster (measured)."""
    sim = _simulated(8, 8)
    assert sim["two-tier"] / sim["rabenseifner"] >= 2.0  # model: 2.37x
    assert sim["farfirst"] / sim["vandegeijn"] >= 1.4  # model: 1.46x
    one = _simulated(8, 1)
    # "farfirst bcast behaves similarly to the modified van de Geijn for n = 1"
    assert one["vandegeijn"] == pytest.approx(one["farfirst"], rel=0.01)
    # "the modified Rabenseifner allreduce outperforms two-tier, even at n = 1"
    assert one["rabenseifner"] < 0.7 * one["two-tier"]
    # and more senders help, up to n = 8
    times = [_simulated(8, n)["vandegeijn"] for n in (1, 2, 4, 8)]
    assert times == sorted(times, reverse=True) and times[0] > times[-1]


@pytest.mark.parametrize("op, algorithm", CASES)
def test_one_wide_area_latency(op, algorithm):
    """L appears once in every formula: each plan crosses the wide area once in depth."""
    options = {"algorithm": algorithm}
    near = _time(_topology([8, 8], latency=0.01), op, **options)
    far = _time(_topology([8, 8], latency=0.05), op, **options)
    assert far - near == pytest.approx(0.04, rel=EXACT)


@pytest.mark.parametrize("capacity", [1, 2, 4])
def test_wide_area_capacity_caps_the_n_sender_gain(capacity):
    """With a link of W < nB the senders share it fairly: T/n becomes M/W."""
    topo = _topology([8, 8], capacity=capacity * B)
    f = 7 / 8 * T
    for n in (1, 2, 4, 8):
        want = L + T / min(n, capacity) + f + f
        for op in ("bcast", "allreduce"):
            assert _time(topo, op, n=n) == pytest.approx(want, rel=EXACT), (op, n)


def test_three_clusters_one_to_all_and_all_to_all():
    """Section 2.5: each sender sends its M/n to every other cluster."""
    topo = _topology([8, 8, 8])
    for n in (1, 2, 8):
        assert _time(topo, "bcast", n=n) == pytest.approx(
            _refined("vandegeijn", n, 8, clusters=3), rel=EXACT
        )
        assert _time(topo, "allreduce", n=n) == pytest.approx(
            _refined("rabenseifner", n, 8, clusters=3), rel=EXACT
        )
    assert _time(topo, "bcast", algorithm="farfirst") == pytest.approx(
        _refined("farfirst", 1, 8, clusters=3), rel=EXACT
    )
    assert _time(topo, "allreduce", algorithm="two-tier") == pytest.approx(
        _refined("two-tier", 1, 8, clusters=3), rel=EXACT
    )


def test_flat_van_de_geijn_overloads_a_narrow_link():
    """Section 3.6: the unmodified algorithm crosses the bottleneck link repeatedly."""
    topo = _topology([8, 8], latency=0.0, capacity=B)
    flat = _time(topo, "bcast", algorithm="flat-vandegeijn")
    modified = _time(topo, "bcast", n=8)
    assert flat > 1.5 * modified
