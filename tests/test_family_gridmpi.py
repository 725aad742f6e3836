"""The gridmpi family: Matsuda et al.'s multi-sender broadcast and allreduce plans,
pipelined, and the allgather after them."""

from dataclasses import replace

import pytest

from wacoll import PlanError, Topology
from wacoll.plans import build, builders
from wacoll.plans.builder import PlanBuilder
from wacoll.plans.families import gridmpi
from wacoll.plans.families.gridmpi_parts import (
    Layout,
    reduce_scatter,
    sender_groups,
    split_points,
)
from wacoll.plans.plan import Step

CONTIGUOUS = [
    [1],
    [2],
    [3],
    [5],
    [8],
    [4, 4],
    [3, 5],
    [2, 7],
    [1, 1, 1],
    [6, 3, 2],
    [2, 3, 4],
]
REORDERED = [
    [[0, 3, 4], [1, 2], [5]],
    [[0, 2, 4, 6], [1, 3, 5, 7]],
    [[1, 4, 5, 7], [0, 2], [3, 6, 8]],
]
TOPOLOGIES = [Topology.from_sizes(s) for s in CONTIGUOUS] + [
    Topology.from_clusters(c) for c in REORDERED
]
COUNTS = (0, 1, 7, 24)


def _id(topo):
    return "|".join(",".join(map(str, c)) for c in topo.clusters)


def _levels(topo):
    return ("associative", "commutative") if topo.is_contiguous else ("commutative",)


# ------------------------------------------------------------------ every plan proves
@pytest.mark.parametrize("topo", TOPOLOGIES, ids=_id)
def test_every_bcast_plan_passes_its_check(topo):
    for count in COUNTS:
        for root in range(topo.size):
            for algorithm in gridmpi.BCAST_ALGORITHMS:
                gridmpi.bcast(topo, root=root, count=count, algorithm=algorithm).prove()
            for n in (1, 2, 3):
                plan = gridmpi.bcast(topo, root=root, count=count, n=n)
                report = plan.prove()
                assert report.max_wide_area_hops <= 1
                assert report.optimality == "yes"


@pytest.mark.parametrize("topo", TOPOLOGIES, ids=_id)
def test_every_allreduce_plan_passes_its_check(topo):
    for count in COUNTS:
        for level in _levels(topo):
            for algorithm in gridmpi.ALLREDUCE_ALGORITHMS:
                gridmpi.allreduce(
                    topo, count=count, level=level, algorithm=algorithm
                ).prove()
            for n in (1, 2, 3):
                report = gridmpi.allreduce(topo, count=count, level=level, n=n).prove()
                assert report.max_wide_area_hops <= 1
                assert report.optimality == "yes"


@pytest.mark.parametrize("topo", TOPOLOGIES, ids=_id)
def test_every_allgather_plan_passes_its_check(topo):
    for count in COUNTS:
        plan = gridmpi.allgather(topo, count=count)
        report = plan.prove()
        assert report.max_wide_area_hops <= 1
        if topo.nclusters > 1 and count:
            # each block crosses to each other cluster once, as in MagPIe's plan,
            # and every rank sends its own
            magpie = build("allgather", topo, "magpie", count=count).prove()
            assert report.wide_area_bytes == magpie.wide_area_bytes
            senders = gridmpi.wide_area_senders(plan)
            assert all(
                senders[c] == tuple(sorted(m)) for c, m in enumerate(topo.clusters)
            )


def test_allgather_beats_magpies_on_a_long_fast_link():
    from wacoll.plans.sim import LinkModel, simulate

    topo = Topology.from_sizes([4, 4], wan_latency=5e-3, wan_bandwidth=100e6)
    model = LinkModel(topo)
    times = {
        f: simulate(build("allgather", topo, f, count=1 << 20), model).completion
        for f in ("gridmpi", "magpie")
    }
    # MagPIe's coordinator sends its cluster's 4 MiB alone, then passes 8 MiB down
    # its tree; here the four ranks share the link and the clusters work meanwhile
    assert times["gridmpi"] < 0.85 * times["magpie"]


def test_build_dispatches_to_the_family():
    topo = Topology.from_sizes([4, 4])
    assert sorted(builders("gridmpi")) == ["allgather", "allreduce", "bcast"]
    plan = build("bcast", topo, "gridmpi", root=5, count=64, n=2)
    assert (plan.family, plan.algorithm, plan.param("n")) == ("gridmpi", "vandegeijn", 2)
    plan = build(
        "allreduce", topo, "gridmpi", count=64, level="associative", algorithm="two-tier"
    )
    assert plan.algorithm == "two-tier" and plan.param("n") is None
    plan.prove()


# --------------------------------------------------------------------- block layout
@pytest.mark.parametrize("count", [0, 1, 5, 12, 97])
@pytest.mark.parametrize("sizes", [[4], [3, 5], [2, 7, 4], [1, 6]])
def test_blocks_are_the_common_refinement(count, sizes):
    lay = Layout.refine(count, sizes)
    assert sum(lay.counts) == count
    assert all(c > 0 for c in lay.counts) or count == 0
    for p in sizes:
        ranges = lay.ranges(p)
        assert [x for r in ranges for x in r] == list(range(lay.nblocks))
        points = split_points(count, p)
        for j, blocks in enumerate(ranges):
            assert sum(lay.counts[x] for x in blocks) == points[j + 1] - points[j]
    # no cut beyond what some cluster needs
    cuts = {s for p in sizes for s in split_points(count, p)}
    assert set(lay.starts) <= cuts


@pytest.mark.parametrize("count", [0, 1, 5, 12, 97])
@pytest.mark.parametrize("sizes", [[4], [3, 5], [2, 7, 4]])
@pytest.mark.parametrize("segments", [1, 2, 3, 8])
def test_pipelined_layout_splits_each_segment_for_every_cluster(count, sizes, segments):
    lay = Layout.pipelined(count, sizes, segments)
    assert sum(lay.counts) == count
    assert all(c > 0 for c in lay.counts) or count == 0
    if count == 0:
        return
    # no segment is shorter than the largest group: every rank owns a range in each
    edges = split_points(count, max(1, min(segments, count // max(sizes))))
    assert lay.segments == tuple(zip(edges, edges[1:]))
    seen = []
    for lo, hi in lay.segments:
        for p in sizes:
            ranges = lay.ranges(p, within=(lo, hi))
            flat = [x for r in ranges for x in r]
            points = split_points(hi - lo, p)
            for j, blocks in enumerate(ranges):
                assert sum(lay.counts[x] for x in blocks) == points[j + 1] - points[j]
            assert all(lo <= lay.starts[x] < hi for x in flat)
        seen += flat
    assert seen == list(range(lay.nblocks))  # the segments' blocks cover the vector once


def test_plan_counts_are_the_refinement_not_even_segments():
    topo = Topology.from_sizes([2, 3])
    plan = gridmpi.bcast(topo, count=12)
    assert plan.counts == (4, 2, 2, 4)
    plan = gridmpi.bcast(topo, count=12, segments=4, algorithm="farfirst")
    assert plan.counts == (3, 1, 2, 2, 1, 3)  # adds cuts at 3 and 9
    plan.prove()
    # pipelined, each segment of 3 is cut for both clusters: [1, 2] and [1, 1, 1]
    plan = gridmpi.bcast(topo, count=12, segments=4)
    assert plan.counts == (1, 1, 1) * 4
    plan.prove()
    with pytest.raises(PlanError, match="segments"):
        gridmpi.bcast(topo, count=12, segments=0)


def test_recursive_halving_owns_bit_reversed_ranges_and_keeps_rank_order():
    b = PlanBuilder(
        "allreduce", Topology.single(8), count=8, segments=8, level="associative"
    )
    ranges = tuple((j,) for j in range(8))
    assert reduce_scatter(b, tuple(range(8)), ranges) == (0, 4, 2, 6, 1, 5, 3, 7)
    # the first exchange is between neighbours, so every partial is a rank range
    assert [s.peer for s in b.programs[0] if s.kind == "send"] == [1, 2, 4]


def test_sender_groups_are_contiguous_and_cover_all_ranges():
    for parts in range(1, 10):
        for n in range(1, parts + 1):
            groups = sender_groups(parts, n)
            assert len(groups) == n and all(groups)
            assert [j for g in groups for j in g] == list(range(parts))


# ------------------------------------------------------------------ the n-sender effect
@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_bcast_n_selects_the_wide_area_senders(n):
    topo = Topology.from_sizes([8, 8])
    plan = gridmpi.bcast(topo, count=1 << 16, n=n)
    report = plan.prove()
    senders = gridmpi.wide_area_senders(plan)
    assert list(senders) == [0] and len(senders[0]) == n
    # the same data crosses once, one message per destination rank, whatever n
    assert report.wide_area_bytes == 1 << 16
    assert report.wide_area_messages == 8
    wide = gridmpi.bcast(topo, count=1 << 16, n=n, itemsize=8).prove().wide_area_bytes
    assert wide == 8 << 16
    # each sender's group is its binomial subtree of the scatter: nothing is forwarded
    full = gridmpi.bcast(topo, count=1 << 16, n=8).prove()
    assert (report.messages, report.bytes) == (full.messages, full.bytes)


def test_bcast_n_changes_wide_area_messages_into_a_smaller_cluster():
    topo = Topology.from_sizes([8, 2])
    counts = {
        n: gridmpi.bcast(topo, count=80, n=n).prove().wide_area_messages
        for n in (1, 2, 4, 8)
    }
    assert counts == {1: 2, 2: 2, 4: 4, 8: 8}


def test_bcast_forwards_what_a_sender_lacks():
    topo = Topology.from_sizes([6, 6])
    full = gridmpi.bcast(topo, count=60, n=6).prove()
    two = gridmpi.bcast(topo, count=60, n=2)
    report = two.prove()
    assert gridmpi.wide_area_senders(two) == {0: (0, 3)}
    # rank 3 leads group {3, 4, 5} but the binomial scatter gave 4 and 5 their own
    # subtrees: both forward their 10 elements to 3
    forwards = [m for m in two.messages() if m.dst == 3 and m.src in (4, 5)]
    assert [(m.src, m.nbytes) for m in forwards] == [(4, 10), (5, 10)]
    assert report.wide_area_bytes == full.wide_area_bytes == 60
    # the allgather then skips what rank 3 holds: forwarding moves no extra bytes
    assert report.bytes == full.bytes


@pytest.mark.parametrize("n", [1, 2, 4])
def test_allreduce_n_senders_forward_their_partials(n):
    topo = Topology.from_sizes([4, 4])
    plan = gridmpi.allreduce(topo, count=64, level="associative", n=n)
    report = plan.prove()
    senders = gridmpi.wide_area_senders(plan)
    assert [len(s) for s in senders.values()] == [n, n]
    assert report.wide_area_bytes == 2 * 64  # each cluster's partials cross once
    assert report.wide_area_messages == 8
    base = gridmpi.allreduce(topo, count=64, level="associative", n=4).prove()
    # every non-selected owner forwards its 16-element partial inside its cluster
    assert report.bytes - base.bytes == 2 * (4 - n) * 16


# ------------------------------------------------------------ the pipelined allreduce
@pytest.mark.parametrize("topo", TOPOLOGIES, ids=_id)
def test_every_pipelined_bcast_plan_passes_its_check(topo):
    for count in COUNTS:
        for root in range(topo.size):
            for segments in (2, 3, 5):
                for n in (1, 2, None):
                    report = gridmpi.bcast(
                        topo, root=root, count=count, n=n, segments=segments
                    ).prove()
                    assert report.max_wide_area_hops <= 1
                    assert report.optimality == "yes"


def test_pipelined_bcast_scatters_and_sends_a_segment_before_the_next():
    plan = gridmpi.bcast(Topology.from_sizes([2, 2]), count=8, segments=2)
    # the root scatters segment 0 (blocks 0, 1) and sends its block across, then
    # segment 1 (blocks 2, 3); its allgather with rank 1 comes last
    assert [str(s) for s in plan.programs[0]] == [
        "send 1 [1]",
        "send 2 [0]",
        "send 1 [3]",
        "send 2 [2]",
        "send 1 [0]",
        "send 1 [2]",
    ]
    assert plan.prove().wide_area_bytes == 8


@pytest.mark.parametrize("topo", TOPOLOGIES, ids=_id)
def test_every_pipelined_allreduce_plan_passes_its_check(topo):
    for count in COUNTS:
        for level in _levels(topo):
            for segments in (2, 3, 5):
                for n in (1, 2, None):
                    report = gridmpi.allreduce(
                        topo, count=count, level=level, n=n, segments=segments
                    ).prove()
                    assert report.max_wide_area_hops <= 1


def test_short_segments_keep_every_rank_a_wide_area_sender():
    # 8 elements of 256 KiB in 8 segments would leave ranks 1-3 of each cluster
    # without a range: the pipeline takes 2 segments of 4 elements instead
    topo = Topology.from_sizes([4, 4])
    for plan in (
        gridmpi.allreduce(
            topo, count=8, itemsize=1 << 18, level="associative", segments=8
        ),
        gridmpi.bcast(topo, count=8, itemsize=1 << 18, segments=8),
    ):
        assert plan.param("segments") == 2
        assert [len(s) for s in gridmpi.wide_area_senders(plan).values()][0] == 4
        plan.prove()


def test_pipelined_allreduce_moves_the_same_wide_area_bytes_in_more_messages():
    topo = Topology.from_sizes([4, 4])
    one = gridmpi.allreduce(topo, count=64, level="associative").prove()
    four = gridmpi.allreduce(topo, count=64, level="associative", segments=4).prove()
    assert four.wide_area_bytes == one.wide_area_bytes == 2 * 64
    assert four.wide_area_messages == 4 * one.wide_area_messages


def test_pipelined_allreduce_sends_a_segment_before_reducing_the_next():
    topo = Topology.from_sizes([2, 2])
    plan = gridmpi.allreduce(topo, count=8, level="associative", segments=2)
    assert plan.param("segments") == 2
    # rank 0 reduce-scatters segment 0 (blocks 0, 1) with rank 1 and sends its
    # partial to its owner in the other cluster, then does the same for segment 1
    # (blocks 2, 3); the wide-area partials are combined and allgathered last
    assert [str(s) for s in plan.programs[0]] == [
        "send 1 [1] from in",
        "copy [0] in -> out",
        "recv-combine 1 [0] into out",
        "send 2 [0]",
        "send 1 [3] from in",
        "copy [2] in -> out",
        "recv-combine 1 [2] into out",
        "send 2 [2]",
        "recv-combine 2 [0] into out",
        "send 1 [0]",
        "recv 1 [1]",
        "recv-combine 2 [2] into out",
        "send 1 [2]",
        "recv 1 [3]",
    ]


def test_pipelines_hide_the_clusters_stages_on_a_long_fast_link():
    from wacoll.plans.bounds import physical_bound
    from wacoll.plans.sim import simulate
    from wacoll.plans.sim.models import LinkModel

    topo = Topology.from_sizes([4, 4], wan_latency=5e-3, wan_bandwidth=100e6)
    model = LinkModel(topo)
    for make in (
        lambda s: gridmpi.allreduce(
            topo, count=1 << 21, itemsize=8, level="commutative", segments=s
        ),
        lambda s: gridmpi.bcast(topo, count=1 << 21, itemsize=8, segments=s),
    ):
        times = {s: simulate(make(s), model).completion for s in (1, 2, 4, 8)}
        bound = physical_bound(make(1), topo)
        assert times[1] > times[2] > times[4] > times[8]
        # unpipelined, the clusters' two stages add 25 ms to the 173 ms bound
        assert times[1] > 1.12 * bound and times[8] < 1.03 * bound


def test_allreduce_unequal_clusters_wide_area_messages():
    topo = Topology.from_sizes([8, 2])
    one = gridmpi.allreduce(topo, count=80, level="associative", n=1).prove()
    eight = gridmpi.allreduce(topo, count=80, level="associative", n=8).prove()
    # n=1: 8 -> 2 ranks and 1 sender -> 8 owners; n=8 (2 in the small cluster): 8 + 8
    assert (one.wide_area_messages, eight.wide_area_messages) == (10, 16)
    assert one.wide_area_bytes == eight.wide_area_bytes == 160


def test_n_is_clamped_to_each_cluster():
    topo = Topology.from_sizes([4, 2])
    big = gridmpi.allreduce(topo, count=16, level="associative", n=100)
    four = gridmpi.allreduce(topo, count=16, level="associative", n=4)
    assert big.programs == four.programs
    assert gridmpi.wide_area_senders(big) == {0: (0, 1, 2, 3), 1: (4, 5)}
    default = gridmpi.bcast(topo, count=16)
    assert default.param("n") == 4
    assert default.programs == gridmpi.bcast(topo, count=16, n=4).programs


# ---------------------------------------------------------------- the other algorithms
def test_farfirst_sends_the_whole_message_to_each_coordinator_first():
    topo = Topology.from_sizes([3, 2, 4])
    plan = gridmpi.bcast(topo, root=1, count=30, algorithm="farfirst")
    report = plan.prove()
    assert report.wide_area_messages == 2 and report.wide_area_bytes == 60
    first = plan.programs[1][:2]
    assert [(s.kind, s.peer, s.blocks) for s in first] == [
        ("send", 3, tuple(range(plan.nblocks))),
        ("send", 5, tuple(range(plan.nblocks))),
    ]


def test_flat_vandegeijn_ignores_clusters():
    topo = Topology.from_sizes([4, 4])
    report = gridmpi.bcast(topo, count=64, algorithm="flat-vandegeijn").prove()
    assert report.max_wide_area_hops == 2
    assert report.wide_area_bytes > 64
    assert report.optimality == "no"


def test_two_tier_exchanges_between_coordinators_only():
    topo = Topology.from_sizes([3, 4, 2])
    plan = gridmpi.allreduce(topo, count=24, level="associative", algorithm="two-tier")
    report = plan.prove()
    assert gridmpi.wide_area_senders(plan) == {0: (0,), 1: (3,), 2: (7,)}
    assert report.wide_area_messages == 6 and report.wide_area_bytes == 6 * 24


def test_flat_rabenseifner_keeps_rank_order_on_reordered_clusters():
    topo = Topology.from_clusters(REORDERED[0])
    plan = gridmpi.allreduce(
        topo, count=12, level="associative", algorithm="flat-rabenseifner"
    )
    assert plan.prove().max_wide_area_hops >= 1


# ------------------------------------------------------------------------------ errors
@pytest.mark.parametrize("n", [0, -1, True, 1.5, "2"])
def test_bad_n_is_refused(n):
    topo = Topology.from_sizes([2, 2])
    with pytest.raises(PlanError, match="n \\(wide-area senders"):
        gridmpi.bcast(topo, n=n)
    with pytest.raises(PlanError, match="n \\(wide-area senders"):
        gridmpi.allreduce(topo, n=n, level="commutative")


def test_n_is_refused_where_it_means_nothing():
    topo = Topology.from_sizes([2, 2])
    with pytest.raises(PlanError, match="not 'farfirst'"):
        gridmpi.bcast(topo, algorithm="farfirst", n=1)
    with pytest.raises(PlanError, match="not 'two-tier'"):
        gridmpi.allreduce(topo, algorithm="two-tier", n=1, level="associative")


def test_unknown_algorithm():
    topo = Topology.from_sizes([2, 2])
    with pytest.raises(PlanError, match="unknown gridmpi bcast algorithm 'rabenseifner'"):
        gridmpi.bcast(topo, algorithm="rabenseifner")
    with pytest.raises(PlanError, match="known: rabenseifner, two-tier"):
        gridmpi.allreduce(topo, algorithm="ring", level="associative")


@pytest.mark.parametrize("algorithm", gridmpi.ALLREDUCE_ALGORITHMS)
def test_strict_is_refused_with_the_alternative(algorithm):
    topo = Topology.from_sizes([4, 4])
    for level in (None, "strict"):
        with pytest.raises(PlanError, match="'strict'.*magpie or mpich"):
            gridmpi.allreduce(topo, algorithm=algorithm, level=level)


def test_associative_needs_contiguous_clusters():
    topo = Topology.from_clusters(REORDERED[0])
    for algorithm in ("rabenseifner", "two-tier"):
        with pytest.raises(PlanError, match="cluster 0 \\[0, 3, 4\\].*'commutative'"):
            gridmpi.allreduce(topo, algorithm=algorithm, level="associative")
        gridmpi.allreduce(topo, algorithm=algorithm, level="commutative").prove()
    with pytest.raises(PlanError, match="unknown reduction level"):
        gridmpi.allreduce(topo, level="sloppy")


def test_the_checker_would_catch_a_swapped_cluster_order():
    """Cluster partials must be combined in cluster order at level 'associative'."""
    topo = Topology.from_sizes([2, 2])
    plan = gridmpi.allreduce(topo, count=4, level="associative")
    programs = [list(p) for p in plan.programs]
    for r, prog in enumerate(programs):
        for i, s in enumerate(prog):
            if s.kind == "recv_combine" and plan.clusters[s.peer] != plan.clusters[r]:
                prog[i] = Step(
                    "recv_combine",
                    s.blocks,
                    peer=s.peer,
                    dst=s.dst,
                    side="left" if s.side == "right" else "right",
                )
    broken = replace(plan, programs=tuple(tuple(p) for p in programs))
    with pytest.raises(PlanError, match="rank order"):
        broken.prove()
