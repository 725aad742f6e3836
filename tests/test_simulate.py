"""The plan simulator: MagPIe Figure 1, Banikazemi Figure 1, and the link model.

References: Kielmann et al., MagPIe (PPoPP 1999), Section 2 and Figure 1;
Banikazemi, Moorthy and Panda (ICPP 1998), Sections 3 and 5, Figure 1;
Matsuda et al. (Cluster 2006), Sections 2-3 (n simultaneous wide-area senders).
"""

import dataclasses
import random

import pytest

from wacoll import PlanError, Topology, TopologyError, trees
from wacoll.plans import build
from wacoll.plans.builder import PlanBuilder
from wacoll.plans.sim import (
    Event,
    LinkModel,
    SimResult,
    TiniModel,
    TsTrModel,
    simulate,
)

# Banikazemi Figure 1: paper nodes 1..8 are ranks 0..7; nodes 1 and 6 are fast.
FIG1 = [100, 300, 300, 300, 300, 100, 300, 300]
KIB64 = 65536


def tree_bcast(topo, tree, **options):
    return build("bcast", topo, "tree", tree=tree, **options)


def exchange(topo, sends, name="exchange"):
    """An alltoallv whose data flows only as ``sends`` says.

    ``sends`` maps a rank to its ordered ``(destination, bytes)`` messages; every
    other (source, destination) block has 0 bytes and is sent after them, so it
    costs latency only. Every rank posts all its sends before its receives.
    """
    p = topo.size
    counts = [[0] * p for _ in range(p)]
    for i, msgs in sends.items():
        for j, nbytes in msgs:
            counts[i][j] = nbytes
    b = PlanBuilder("alltoallv", topo, counts=counts)
    for i in range(p):
        b.copy(i, [i * p + i], "in", "out")
        first = [j for j, _ in sends.get(i, ())]
        for j in first + [j for j in range(p) if j != i and j not in first]:
            b.send(i, j, [i * p + j], "in")
    for j in range(p):
        for i in range(p):
            if i != j:
                b.recv(j, i, [i * p + j], "out")
    return b.build(family="test", algorithm=name)


def arrival(result, src, dst):
    """When the (only nonzero, or first) message from src to dst arrived."""
    for m, t in zip(result.plan.messages(), result.arrivals):
        if m.src == src and m.dst == dst:
            return t
    raise AssertionError(f"no message {src} -> {dst}")


def random_tree(n, rng):
    kids = {}
    ranks = list(range(1, n))
    rng.shuffle(ranks)
    placed = [0]
    for v in ranks:
        kids.setdefault(rng.choice(placed), []).append(v)
        placed.append(v)
    return trees.from_parents(kids, n, 0, "random")


# ------------------------------------------------------------- TsTr: MagPIe Figure 1
@pytest.mark.parametrize(
    "shape, t_r, expected",
    [
        ("flat", 1000, 1060),
        ("flat", 11, 71),
        ("binomial", 1000, 3000),
        ("binomial", 11, 33),
    ],
)
def test_magpie_figure1(shape, t_r, expected):
    plan = tree_bcast(Topology.single(8), shape)
    assert simulate(plan, TsTrModel(10, t_r)).completion == expected


def test_tstr_flat_tree_receive_times():
    result = simulate(tree_bcast(Topology.single(8), "flat"), TsTrModel(10, 1000))
    # the k-th send starts at 10 k; its receiver has it 1000 later
    assert result.finish == (70.0,) + tuple(1000.0 + 10 * k for k in range(7))


def test_tstr_matches_the_tree_cost_function_on_random_trees():
    rng = random.Random(7)
    for _ in range(30):
        n = rng.randint(1, 12)
        tree = random_tree(n, rng)
        t_s, t_r = rng.randint(1, 20), rng.randint(1, 200)
        plan = tree_bcast(Topology.single(n), tree)
        result = simulate(plan, TsTrModel(t_s, t_r))
        # the tree cost is when the last node has the message; a sender may still be
        # busy with its last send then (t_s > t_r)
        received = max(result.arrivals, default=0)
        assert received == trees.bcast_time_ts_tr(tree, t_s, t_r)
        has = {0: 0.0}
        for m, t in zip(plan.messages(), result.arrivals):
            has[m.dst] = t
        assert result.finish == tuple(has[v] + t_s * len(tree.succ[v]) for v in range(n))


def test_tstr_wide_area_values_and_size_functions():
    topo = Topology.from_sizes([2, 2])
    plan = tree_bcast(topo, "flat", count=100)  # 0 -> 1 (local), 2, 3 (wide area)
    result = simulate(plan, TsTrModel(1, 2, wide_area=(5, 50)))
    assert [arrival(result, 0, d) for d in (1, 2, 3)] == [2.0, 51.0, 56.0]
    by_size = simulate(plan, TsTrModel(lambda b: b / 100, lambda b: b / 10))
    assert [arrival(by_size, 0, d) for d in (1, 2, 3)] == [10.0, 11.0, 12.0]


# ------------------------------------------------------ Tini: Banikazemi Figure 1
def test_banikazemi_figure1c_optimal_tree_is_400():
    tree = trees.from_parents({0: [5, 1, 2, 3], 5: [4, 6, 7]}, 8, 0, "fig1c")
    result = simulate(tree_bcast(Topology.single(8), tree), TiniModel(FIG1))
    assert result.completion == 400
    assert arrival(result, 0, 5) == 100  # the fast node first
    assert sorted(result.arrivals) == [100, 200, 200, 300, 300, 400, 400]
    # rank 5 has it at 100 and is busy sending until 400, like the root
    assert (result.finish[0], result.finish[5]) == (400, 400)


def test_banikazemi_binomial_by_numbering_is_700():
    plan = tree_bcast(Topology.single(8), "binomial")
    assert simulate(plan, TiniModel(FIG1)).completion == 700


def test_banikazemi_spoc_tree_is_500():
    tree = trees.spoc(FIG1)
    assert (
        simulate(tree_bcast(Topology.single(8), tree), TiniModel(FIG1)).completion == 500
    )


def test_tini_matches_the_tree_cost_function_on_random_trees():
    rng = random.Random(11)
    for _ in range(30):
        n = rng.randint(1, 12)
        tree = random_tree(n, rng)
        costs = [rng.randint(1, 9) * 50 for _ in range(n)]
        plan = tree_bcast(Topology.single(n), tree)
        assert simulate(plan, TiniModel(costs)).completion == trees.bcast_time(
            tree, costs
        )


def test_tini_from_topology_and_bandwidth():
    topo = Topology.single(8).with_t_ini(FIG1)
    plan = tree_bcast(topo, "binomial", count=1000)
    assert simulate(plan, TiniModel(topo)).completion == 700
    # each of the three sends on the critical path (0 -> 4 -> 6 -> 7 and 4 -> 5)
    # also moves 1000 bytes at 10 bytes per unit
    slow = simulate(plan, TiniModel(topo, bandwidth=10))
    assert slow.completion == 700 + 3 * 100
    with pytest.raises(TopologyError, match="t_ini is set"):
        TiniModel(Topology.single(8))
    with pytest.raises(PlanError, match="t_ini for 4 ranks"):
        simulate(plan, TiniModel([1, 1, 1, 1]))


# ------------------------------------------------------------ general semantics
def test_receive_overhead_and_compute_rate():
    plan = build(
        "reduce", Topology.single(3), "tree", tree="flat", count=100, level="commutative"
    )
    # rank 0: copy in->out, recv-combine 1, recv-combine 2; ranks 1, 2: send
    base = simulate(plan, TsTrModel(1, 5))
    assert base.completion == 5  # both leaves send at 0; t_r later the root has both
    costly = simulate(plan, TsTrModel(1, 5, recv_overhead=2, compute_rate=50))
    # copy 2, then combine 1 arrives at 5: 5 + 2 + 2 = 9; combine 2: 9 + 2 + 2 = 13
    assert costly.completion == 13
    kinds = [(e.kind, e.start, e.end) for e in costly.events if e.rank == 0]
    assert kinds == [("copy", 0, 2), ("recv_combine", 2, 9), ("recv_combine", 9, 13)]


def test_arrival_order_group_is_served_as_messages_arrive():
    topo = Topology.single(4)
    costs = [100, 300, 100, 100]  # rank 1's message comes last
    kwargs = dict(tree="flat", level="commutative", count=10)
    fixed = build("reduce", topo, "tree", arrival=False, **kwargs)
    free = build("reduce", topo, "tree", arrival=True, **kwargs)
    assert any(s.group for s in free.programs[0])
    model = TiniModel(costs, compute_rate=1)  # each combine takes 10
    # program order: the copy (10), wait for rank 1 (300), then three combines
    assert simulate(fixed, model).completion == 300 + 3 * 10
    result = simulate(free, model)
    assert result.completion == 300 + 10
    ends = {e.peer: e.end for e in result.events if e.rank == 0 and e.peer is not None}
    assert ends == {2: 110, 3: 120, 1: 310}


def test_finish_and_events_follow_the_programs():
    topo = Topology.from_sizes([3, 2])
    plan = build("allreduce", topo, "tree", tree="binomial", count=12, segments=3)
    result = simulate(plan, TiniModel([1, 2, 3, 4, 5]))
    assert isinstance(result, SimResult)
    assert len(result.events) == sum(len(p) for p in plan.programs)
    assert result.completion == max(result.finish)
    for r, prog in enumerate(plan.programs):
        mine = [e for e in result.events if e.rank == r]
        assert [e.kind for e in mine] == [s.kind for s in prog]
        assert mine[-1].end == result.finish[r]
        for a, b in zip(mine, mine[1:]):
            assert a.end == b.start  # one step after the other, no gaps
    msgs = plan.messages()
    for m, t in zip(msgs, result.arrivals):
        send = result.events[sum(len(p) for p in plan.programs[: m.src]) + m.send_step]
        recv = result.events[sum(len(p) for p in plan.programs[: m.dst]) + m.recv_step]
        assert (send.rank, send.step, recv.rank, recv.step) == (
            m.src,
            m.send_step,
            m.dst,
            m.recv_step,
        )
        assert send.arrival == recv.arrival == t == send.start + [1, 2, 3, 4, 5][m.src]
        assert recv.end == max(recv.start, t)
        assert send.wide_area == recv.wide_area == m.wide_area
        assert send.nbytes == m.nbytes == 4
        assert (send.peer, recv.peer) == (m.dst, m.src)
    assert isinstance(result.events[0], Event)


def test_a_plan_that_fails_its_check_is_not_simulated():
    b = PlanBuilder("bcast", Topology.single(3), root=0)
    b.transfer(0, 1, b.all_blocks)  # rank 2 never gets the data
    plan = b.build(family="test", algorithm="broken")
    with pytest.raises(PlanError):
        simulate(plan, TsTrModel(1, 1))
    unpaired = dataclasses.replace(plan, programs=(plan.programs[0], (), ()))
    with pytest.raises(PlanError, match="never receives"):
        simulate(unpaired, TsTrModel(1, 1))


def test_bad_models_and_parameters_are_refused():
    plan = tree_bcast(Topology.single(2), "flat")
    with pytest.raises(PlanError, match="TsTrModel, TiniModel or LinkModel"):
        simulate(plan, "fast")
    with pytest.raises(PlanError, match="Plan"):
        simulate("plan", TsTrModel(1, 1))
    with pytest.raises(TopologyError, match="t_s"):
        TsTrModel(-1, 1)
    with pytest.raises(TopologyError, match="compute_rate"):
        TsTrModel(1, 1, compute_rate=0)
    with pytest.raises(TopologyError, match="t_ini"):
        TiniModel([1, float("nan")])
    with pytest.raises(TopologyError, match="overhead"):
        LinkModel(Topology.single(2), overhead=-1)
    with pytest.raises(TopologyError, match="buffered"):
        LinkModel(Topology.single(2), buffered="yes")
    with pytest.raises(TopologyError, match="ordered"):
        LinkModel(Topology.single(2), ordered=1)
    with pytest.raises(TopologyError, match="window"):
        LinkModel(Topology.single(2), window=0)
    with pytest.raises(TopologyError, match="wan_capacity"):
        LinkModel(Topology.single(2), wan_capacity=-1)
    with pytest.raises(PlanError, match="3 ranks"):
        simulate(plan, LinkModel(Topology.single(3)))
    with pytest.raises(PlanError, match="other clusters"):
        simulate(plan, LinkModel(Topology.from_sizes([1, 1])))


def test_default_model_is_the_link_model_on_default_links():
    topo = Topology.from_clusters([[0, 3, 4], [1, 2], [5]])
    plan = build("bcast", topo, "tree", tree="binomial", count=1000, root=2)
    assert simulate(plan).completion == simulate(plan, LinkModel(topo)).completion
    # binomial from 2 crosses the wide area twice in a row somewhere: > 2 latencies
    assert simulate(plan).completion > 2 * topo.wan.latency


# -------------------------------------------------------------------- link model
@pytest.mark.parametrize("node, wan", [(5e5, 1e6), (4e6, 1e6)])
def test_one_wide_area_message(node, wan):
    topo = Topology.from_sizes(
        [1, 1], wan_latency=0.01, wan_bandwidth=wan, node_bandwidth=[node, node]
    )
    plan = tree_bcast(topo, "flat", count=KIB64)
    assert simulate(plan, LinkModel(topo)).completion == pytest.approx(
        0.01 + KIB64 / min(node, wan), rel=1e-12
    )
    with_overhead = simulate(plan, LinkModel(topo, overhead=0.002))
    assert with_overhead.completion == pytest.approx(0.012 + KIB64 / min(node, wan))


def test_intra_cluster_message_at_the_sender_rate():
    topo = Topology.single(
        3, intra_latency=1e-5, intra_bandwidth=1e9, node_bandwidth=[1e8, 1e9, 1e9]
    )
    plan = tree_bcast(topo, "flat", count=10**6)  # rank 0 sends at 100 MB/s
    result = simulate(plan, LinkModel(topo))
    assert arrival(result, 0, 1) == pytest.approx(0.01 + 1e-5)
    assert arrival(result, 0, 2) == pytest.approx(0.02 + 1e-5)
    assert result.finish[0] == pytest.approx(0.02)


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_simultaneous_senders_fill_the_wide_area_link(n):
    """Matsuda's counter-copy: n ranks of A each send M/n bytes to their counterpart.

    Each flow is capped by its node rate B and the n flows share the link's C, so
    the transfer takes M / min(n B, C): it shrinks as 1/n until n B reaches C.
    """
    B, C, L, M = 1e8, 2.5e8, 0.01, 12_000_000
    topo = Topology.from_sizes(
        [4, 4], intra_latency=0.0, wan_latency=L, wan_bandwidth=C, node_bandwidth=[B] * 8
    )
    plan = exchange(topo, {i: [(4 + i, M // n)] for i in range(n)})
    for buffered in (True, False):
        result = simulate(plan, LinkModel(topo, buffered=buffered))
        assert result.completion == pytest.approx(L + M / min(n * B, C), rel=1e-9)
        for i in range(n):
            assert arrival(result, i, 4 + i) == pytest.approx(L + M / min(n * B, C))
        # a sender is free after injecting its share, or once it has crossed
        busy = M / n / B if buffered else M / min(n * B, C)
        assert result.finish[0] == pytest.approx(max(busy, L))


def test_water_filling_with_unequal_node_rates():
    # caps 1 and 3 MB/s on a 3 MB/s link: the slow sender keeps 1, the other gets 2
    topo = Topology.from_sizes(
        [2, 2],
        intra_latency=0.0,
        wan_latency=0.0,
        wan_bandwidth=3e6,
        node_bandwidth=[1e6, 3e6, 1e6, 1e6],
    )
    plan = exchange(topo, {0: [(2, 10**6)], 1: [(3, 4 * 10**6)]})
    result = simulate(plan, LinkModel(topo))
    assert arrival(result, 0, 2) == pytest.approx(1.0)
    # rank 1 sent 2 MB in the first second, then the link is all its own: 2/3 s
    assert arrival(result, 1, 3) == pytest.approx(1.0 + 2 / 3)


@pytest.mark.parametrize("buffered", [True, False])
def test_rates_are_recomputed_when_flows_end_and_start(buffered):
    C = 1e6
    topo = Topology.from_clusters(
        [[0, 1, 2], [3, 4]],
        intra_latency=0.0,
        wan_latency=0.005,
        wan_bandwidth=C,
        node_bandwidth=[C] * 5,
    )
    # rank 0 sends 3000 bytes at once; rank 1 first spends 1 ms on a local message,
    # then joins with 4000 bytes: both at C/2 until rank 0 is done at 5 ms
    plan = exchange(topo, {0: [(3, 3000)], 1: [(2, 1000), (4, 4000)]})
    result = simulate(plan, LinkModel(topo, buffered=buffered))
    assert arrival(result, 1, 2) == pytest.approx(0.001)
    assert arrival(result, 0, 3) == pytest.approx(0.005 + 0.005)
    assert arrival(result, 1, 4) == pytest.approx(0.007 + 0.005)
    assert result.completion == pytest.approx(0.012)
    sends = {(e.rank, e.peer): e for e in result.events if e.kind == "send"}
    if buffered:
        # the sender pushed its 4000 bytes at its node rate and went on at 5 ms
        assert (sends[1, 4].start, sends[1, 4].end) == pytest.approx((0.001, 0.005))
        assert result.finish[1] == pytest.approx(0.005)  # its zero-byte messages: L
    else:
        # the sender was busy until its last byte had crossed the link
        assert (sends[1, 4].start, sends[1, 4].end) == pytest.approx((0.001, 0.007))
        assert result.finish[1] == pytest.approx(0.007)


def reference_fluid(topo, sends, buffered):
    """A naive fluid simulation of back-to-back wide-area sends, for comparison.

    Recomputes every rate from scratch (water-filling per directed link) and steps
    from one event (a flow starts or ends) to the next. A rank's next flow starts
    when its previous one has crossed, or, buffered, when its bytes were injected.
    """
    cl, rates = topo.cluster_ids, topo.node_bandwidth
    queue = {r: list(msgs) for r, msgs in sends.items()}
    waiting = {r: 0.0 for r in queue}  # rank -> when its next flow starts
    active, arrivals, now = {}, {}, 0.0  # (rank, dst) -> remaining bytes
    while active or waiting:
        for r, t in list(waiting.items()):
            if t <= now:
                del waiting[r]
                d, b = queue[r].pop(0)
                active[(r, d)] = float(b)
                if buffered and queue[r]:
                    waiting[r] = now + b / rates[r]
        by_link, rate = {}, {}
        for r, d in active:
            by_link.setdefault((cl[r], cl[d]), []).append((r, d))
        for key, flows in by_link.items():
            left, k = topo.wan_link(*key).bandwidth, len(flows)
            for f in sorted(flows, key=lambda f: rates[f[0]]):
                rate[f] = min(rates[f[0]], left / k)
                left -= rate[f]
                k -= 1
        step = min(
            [rem / rate[f] for f, rem in active.items()]
            + [t - now for t in waiting.values()]
        )
        now += step
        for (r, d), rem in list(active.items()):
            active[(r, d)] = rem - rate[(r, d)] * step
            if active[(r, d)] <= 1e-6:
                arrivals[(r, d)] = now + topo.wan_link(cl[r], cl[d]).latency
                del active[(r, d)]
                if not buffered and queue[r]:
                    waiting[r] = now
    return arrivals


@pytest.mark.parametrize("buffered", [True, False])
def test_link_model_matches_a_naive_fluid_simulation(buffered):
    rng = random.Random(3)
    for trial in range(12):
        sizes = [rng.randint(1, 3) for _ in range(rng.randint(2, 4))]
        n = sum(sizes)
        pairs = {
            (a, b): (rng.choice([0.0, 0.01]), rng.choice([1e6, 2e6, 5e6]))
            for a in range(len(sizes))
            for b in range(len(sizes))
            if a != b
        }
        topo = Topology.from_sizes(
            sizes,
            intra_latency=0.0,
            wan_pairs=pairs,
            node_bandwidth=[rng.choice([1e6, 2e6, 3e6]) for _ in range(n)],
        )
        sends = {}
        for r in range(n):
            remote = [d for d in range(n) if topo.is_wide_area(r, d)]
            for d in rng.sample(remote, min(len(remote), rng.randint(0, 3))):
                sends.setdefault(r, []).append((d, rng.randint(1, 50) * 10**5))
        if not sends:
            continue
        result = simulate(exchange(topo, sends), LinkModel(topo, buffered=buffered))
        expected = reference_fluid(topo, sends, buffered)
        got = {key: arrival(result, *key) for key in expected}
        assert got == pytest.approx(expected, rel=1e-9), trial


@pytest.mark.parametrize("ordered", [True, False])
def test_messages_of_one_pair_cross_in_order(ordered):
    # two 1000-byte segments from rank 0 to rank 1 over 1 MB/s, 10 ms: on one
    # connection the first arrives after 1 ms of transfer, the second after 2 ms;
    # shared at once, both after 2 ms (the first a byte's time earlier)
    topo = Topology.from_sizes(
        [1, 1], intra_latency=0.0, wan_latency=0.01, wan_bandwidth=1e6
    )
    plan = build("bcast", topo, "tree", tree="flat", count=2000, itemsize=1, segments=2)
    result = simulate(plan, LinkModel(topo, ordered=ordered))
    first = 0.011 if ordered else 0.012 - 1e-6
    assert result.arrivals == pytest.approx((first, 0.012), abs=1e-12)


@pytest.mark.parametrize(
    "window, expected",
    [(None, (0.026, 0.026)), (10_000, (0.018, 0.026)), (5_000, (0.026, 0.026))],
)
def test_bursts_cross_first_come_first_served(window, expected):
    # ranks 0 and 1 send 8000 bytes each over one 1 MB/s link at once: as bursts
    # (at most `window` bytes) the link serves them one after the other; else they
    # share it and both take 16 ms
    topo = Topology.from_sizes(
        [2, 2], intra_latency=0.0, wan_latency=0.01, wan_bandwidth=1e6
    )
    plan = exchange(topo, {0: [(2, 8000)], 1: [(3, 8000)]})
    result = simulate(plan, LinkModel(topo, window=window))
    assert (arrival(result, 0, 2), arrival(result, 1, 3)) == pytest.approx(expected)


def test_busy_links_share_the_wide_area_capacity():
    # three 1 MB/s links that carry 1.5 MB/s together: while two carry flows, each
    # gets 0.75 MB/s; the second flow, alone after 1 s, gets its link's 1 MB/s
    topo = Topology.from_sizes(
        [1, 1, 1], intra_latency=0.0, wan_latency=0.0, wan_bandwidth=1e6
    )
    plan = exchange(topo, {0: [(1, 750_000)], 2: [(0, 1_500_000)]})
    shared = simulate(plan, LinkModel(topo, wan_capacity=1.5e6))
    assert (arrival(shared, 0, 1), arrival(shared, 2, 0)) == pytest.approx((1.0, 1.75))
    ample = simulate(plan, LinkModel(topo, wan_capacity=1e9))
    assert (arrival(ample, 0, 1), arrival(ample, 2, 0)) == pytest.approx((0.75, 1.5))


def test_a_link_that_starts_later_slows_the_busy_ones():
    # rank 0 sends 1 MB alone at 1 MB/s; after 0.5 s rank 1 (a 0.5 s local message
    # first) joins on another link, and from then on each has 0.75 MB/s
    topo = Topology.from_clusters(
        [[0, 1, 2], [3], [4]],
        intra_latency=0.0,
        wan_latency=0.0,
        wan_bandwidth=1e6,
        node_bandwidth=[1e6] * 5,
    )
    plan = exchange(topo, {0: [(3, 1_000_000)], 1: [(2, 500_000), (4, 1_000_000)]})
    result = simulate(plan, LinkModel(topo, wan_capacity=1.5e6))
    assert arrival(result, 0, 3) == pytest.approx(0.5 + 0.5 / 0.75)
    # rank 1's flow: 0.75 MB/s until rank 0's is done, then 1 MB/s
    left = 1.0 - 0.75 * (0.5 / 0.75)
    assert arrival(result, 1, 4) == pytest.approx(0.5 + 0.5 / 0.75 + left)


@pytest.mark.parametrize(
    "family, op", [("magpie", "allgather"), ("mpich", "allreduce"), ("modern", "bcast")]
)
def test_an_ample_wide_area_capacity_changes_nothing(family, op):
    topo = Topology.from_sizes([2, 2, 2, 2], wan_latency=0.01, wan_bandwidth=1e6)
    plan = build(op, topo, family, count=4096)
    free = simulate(plan, LinkModel(topo))
    ample = simulate(plan, LinkModel(topo, wan_capacity=1e12))
    assert ample.arrivals == pytest.approx(free.arrivals, rel=1e-12)
    tight = simulate(plan, LinkModel(topo, wan_capacity=1e6))
    assert tight.completion > free.completion


def test_distinct_links_do_not_share():
    C = 1e6
    topo = Topology.from_sizes(
        [2, 1, 1, 2], intra_latency=0.0, wan_latency=0.0, wan_bandwidth=C
    )
    # 0 -> cluster 1 and 1 -> cluster 2 leave the same cluster on different links;
    # 4 -> 0 runs the other way: all three at the full rate
    plan = exchange(topo, {0: [(2, 10**6)], 1: [(3, 10**6)], 4: [(0, 10**6)]})
    result = simulate(plan, LinkModel(topo))
    assert [arrival(result, *p) for p in ((0, 2), (1, 3), (4, 0))] == pytest.approx(
        [1.0, 1.0, 1.0]
    )


def test_wide_area_pair_overrides():
    topo = Topology.from_sizes(
        [1, 1, 1], wan_latency=0.01, wan_bandwidth=1e6, wan_pairs={(0, 2): (0.05, 2e6)}
    )
    plan = tree_bcast(topo, "flat", count=10**6)  # 0 -> 1 then 0 -> 2
    result = simulate(plan, LinkModel(topo))
    assert arrival(result, 0, 1) == pytest.approx(1.01)
    # the second message leaves once the first is injected (1 ms at 1 GB/s)
    assert arrival(result, 0, 2) == pytest.approx(0.001 + 0.5 + 0.05)
    waiting = simulate(plan, LinkModel(topo, buffered=False))
    assert arrival(waiting, 0, 2) == pytest.approx(1.0 + 0.5 + 0.05)


def test_magpie_shaped_flat_wide_area_broadcast():
    """64 KiB from rank 0 to three remote coordinators over 10 ms, 1 MB/s links.

    Each message takes 65.536 ms on its own wide-area link, plus 10 ms latency. The
    sender injects one message after the other at its node rate (1 GB/s, 65.5 us
    each), and the network buffers what the wide-area links cannot take yet: the
    k-th message arrives at k * b/node_rate + b/wan_bw + latency, so the three
    links work in parallel. If the sender must instead wait for each message to
    cross (buffered=False), the wide-area rate paces it: (k + 1) * b/wan_bw + latency.
    """
    topo = Topology.from_sizes([1, 1, 1, 1], wan_latency=0.01, wan_bandwidth=1e6)
    plan = tree_bcast(topo, "flat", count=KIB64)
    inject, cross = KIB64 / 1e9, KIB64 / 1e6

    result = simulate(plan, LinkModel(topo))
    assert list(result.arrivals) == pytest.approx(
        [k * inject + cross + 0.01 for k in range(3)], rel=1e-12
    )
    assert result.completion == pytest.approx(2 * inject + cross + 0.01)
    sends = [e for e in result.events if e.kind == "send"]
    assert all(e.wide_area for e in sends)
    assert [e.end - e.start for e in sends] == pytest.approx([inject] * 3)
    assert result.finish[0] == pytest.approx(3 * inject)

    waiting = simulate(plan, LinkModel(topo, buffered=False))
    assert list(waiting.arrivals) == pytest.approx(
        [(k + 1) * cross + 0.01 for k in range(3)], rel=1e-12
    )
    assert waiting.completion == pytest.approx(0.206608)
    sends = [e for e in waiting.events if e.kind == "send"]
    assert [e.end - e.start for e in sends] == pytest.approx([cross] * 3)


def test_magpie_bcast_beats_a_binomial_tree_on_the_wide_area():
    # clusters of 4; the binomial tree by numbering chains wide-area latencies
    topo = Topology.from_clusters(
        [[0, 4, 8, 12], [1, 5, 9, 13], [2, 6, 10, 14], [3, 7, 11, 15]],
        wan_latency=0.01,
        wan_bandwidth=1e6,
    )
    b = PlanBuilder("bcast", topo, root=0, count=1024)
    coordinators = topo.coordinators(0)
    for c in coordinators[1:]:
        b.transfer(0, c, b.all_blocks)
    for members in topo.clusters:
        for r in members[1:]:
            b.transfer(members[0], r, b.all_blocks)
    magpie = b.build(family="test", algorithm="two-level")
    binomial = tree_bcast(topo, "binomial", count=1024)
    model = LinkModel(topo)
    assert (
        simulate(magpie, model).completion < 0.02 < simulate(binomial, model).completion
    )


@pytest.mark.parametrize(
    "topo",
    [
        Topology.single(5),
        Topology.from_sizes([3, 1, 4]),
        Topology.from_clusters([[0, 3, 4], [1, 2], [5]]),
        Topology.from_sizes([1] * 6),
        Topology.from_sizes([2, 2], node_bandwidth=[1e6, 2e6, 3e6, 4e6]),
    ],
)
@pytest.mark.parametrize("op", ["bcast", "reduce", "allreduce"])
def test_link_model_timelines_are_consistent(topo, op):
    options = dict(count=3000, segments=3, tree="binomial")
    if op != "bcast":
        options["level"] = "commutative"
    for root in range(topo.size) if op != "allreduce" else (None,):
        kw = dict(options) if root is None else dict(options, root=root)
        plan = build(op, topo, "tree", **kw)
        result = simulate(plan, LinkModel(topo, overhead=1e-6, compute_rate=1e9))
        by_rank = {}
        for e in result.events:
            assert e.end >= e.start >= 0
            by_rank.setdefault(e.rank, []).append(e)
        for _r, events in by_rank.items():
            for a, b in zip(events, events[1:]):
                assert b.start == a.end
        for m, t in zip(plan.messages(), result.arrivals):
            send = by_rank[m.src][m.send_step]
            recv = by_rank[m.dst][m.recv_step]
            assert t >= send.end > send.start
            assert recv.end >= t
        assert result.completion == max(result.finish)
        # no faster than the latency of the longest chain of one message per hop
        assert result.completion >= topo.intra.latency * (topo.size > 1)


def test_repeated_runs_give_identical_results():
    topo = Topology.from_clusters(
        [[r for r in range(32) if r % 4 == c] for c in range(4)],
        node_bandwidth=[1e6 * (1 + r % 3) for r in range(32)],
    )
    plan = build(
        "allreduce",
        topo,
        "tree",
        tree="binomial",
        count=4096,
        segments=4,
        level="commutative",
        arrival=True,
    )
    first = simulate(plan, LinkModel(topo))
    second = simulate(plan, LinkModel(topo))
    assert first.finish == second.finish and first.arrivals == second.arrivals


# ------------------------------------------------------------------------- plot
def test_plot_draws_one_bar_per_timed_step():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    topo = Topology.from_sizes([1, 1, 1, 1], wan_latency=0.01, wan_bandwidth=1e6)
    result = simulate(tree_bcast(topo, "flat", count=KIB64), LinkModel(topo))
    fig, ax = plt.subplots()
    assert result.plot(ax=ax) is ax
    red = matplotlib.colors.to_rgba("tab:red")
    wide = [p for p in ax.patches if p.get_facecolor() == red]
    assert len(wide) == 3  # the three wide-area sends
    assert ax.get_ylim() == (3.5, -0.5)
    plt.close(fig)
