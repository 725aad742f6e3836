"""The mpich family: MPICH 1.1's algorithms, the baseline of MagPIe's Table 1."""

import math

import pytest

from wacoll import PlanError, Topology, trees
from wacoll.plans import LEVELS, OPERATIONS, build, builders
from wacoll.plans.families import mpich
from wacoll.plans.operations import spec

TOPOLOGIES = [Topology.single(n) for n in range(1, 10)] + [
    Topology.from_clusters([[0, 3, 4], [1, 2], [5]]),
    Topology.from_clusters([[0, 2, 4, 6], [1, 3, 5, 7]]),
    Topology.from_sizes([1, 1, 1]),
    Topology.from_sizes([4, 2, 3]),
    Topology.from_sizes([2, 5]),
]
MAGPIE_40 = Topology.from_sizes([5] * 8)  # MagPIe Table 2: 40 ranks on 8 clusters
DAS_32 = Topology.from_sizes([8] * 4)  # Plaat's 4 clusters of 8


def _options(op, size, root=None, level=None, segments=1):
    s = spec(op)
    kw = {}
    if root is not None:
        kw["root"] = root
    if level is not None:
        kw["level"] = level
    if s.layout == "segments":
        kw.update(count=7, segments=segments)
    elif op.endswith("v") or op == "reduce_scatter":
        if s.layout == "pairs":
            kw["counts"] = [[(i + 2 * j) % 3 for j in range(size)] for i in range(size)]
        else:
            kw["counts"] = [i % 3 for i in range(size)]
    elif s.kind != "barrier":
        kw["count"] = 2
    return kw


def _cases(op, size):
    s = spec(op)
    roots = range(size) if s.rooted else [None]
    levels = LEVELS if s.kind == "reduction" else [None]
    segs = (1, 3) if s.layout == "segments" else (1,)
    for root in roots:
        for level in levels:
            for segments in segs:
                yield _options(op, size, root, level, segments)


def test_the_family_builds_every_operation():
    assert set(mpich.BUILDERS) == set(OPERATIONS)
    assert builders("mpich") is mpich.BUILDERS


@pytest.mark.parametrize("op", sorted(OPERATIONS))
def test_every_plan_checks(op):
    for topo in TOPOLOGIES:
        for kw in _cases(op, topo.size):
            plan = build(op, topo, "mpich", **kw)
            assert plan.family == "mpich"
            plan.prove()


# ------------------------------------------------------------------ barrier
@pytest.mark.parametrize("size", range(1, 18))
def test_barrier_message_count(size):
    n2 = 1 << (size.bit_length() - 1)
    report = build("barrier", Topology.single(size), "mpich").prove()
    assert report.messages == n2 * int(math.log2(n2)) + 2 * (size - n2)
    assert report.bytes == 0


def test_barrier_messages_carry_no_blocks():
    plan = build("barrier", Topology.single(6), "mpich")
    assert all(m.blocks == () for m in plan.messages())
    # rank 5 (above the power of two 4) fans in to rank 1 and waits for its release
    assert [str(s) for s in plan.programs[5]] == ["send 1 []", "recv 1 []"]
    assert [str(s) for s in plan.programs[1]] == [
        "recv 5 []",
        "send 0 []",
        "recv 0 []",
        "send 3 []",
        "recv 3 []",
        "send 5 []",
    ]


def test_barrier_chains_wide_area_latencies():
    # MagPIe: up to floor(log2 P) + 2 wide-area latencies
    report = build("barrier", MAGPIE_40, "mpich").prove()
    assert 1 < report.max_wide_area_hops <= int(math.log2(40)) + 2


# -------------------------------------------------------------------- bcast
@pytest.mark.parametrize("size", [1, 2, 4, 8, 16, 32])
def test_bcast_tree_is_binomial_for_powers_of_two(size):
    for root in {0, size // 2, size - 1}:
        t, b = mpich.bcast_tree(size, root), trees.binomial(size, root)
        assert {(u, v, d["order"]) for u, v, d in t.edges(data=True)} == {
            (u, v, d["order"]) for u, v, d in b.edges(data=True)
        }


def test_bcast_tree_sends_to_the_ranks_above_the_power_of_two_last():
    t = mpich.bcast_tree(40, root=3)
    trees.validate_tree(t, n=40, root=3)
    for rel in range(32, 40):
        rank = (rel + 3) % 40
        assert trees.parent(t, rank) == (rel - 32 + 3) % 40
        assert trees.children(t, trees.parent(t, rank))[-1] == rank
    assert not trees.children(t, (32 + 3) % 40)
    with pytest.raises(PlanError, match="root 5 is not a rank"):
        mpich.bcast_tree(5, root=5)


@pytest.mark.parametrize("topo", TOPOLOGIES, ids=str)
def test_bcast_sends_one_message_per_rank_and_segment(topo):
    for root in range(topo.size):
        report = build("bcast", topo, "mpich", root=root, count=9, segments=3).prove()
        assert report.messages == 3 * (topo.size - 1)
        assert report.max_sends <= 3 * max(1, topo.size.bit_length())


def test_bcast_reproduces_magpie_table_2_wide_area_traffic():
    # ASP broadcasts from every rank in turn. MagPIe sends C - 1 = 7 wide-area
    # messages per broadcast; Table 2's MPICH/MagPIe ratio of wide-area data is
    # 1272.74 MB / 432.49 MB. A plain binomial tree would give 16 / 7 = 2.29.
    wan = [
        build("bcast", MAGPIE_40, "mpich", root=r).prove().wide_area_messages
        for r in range(40)
    ]
    assert sum(wan) / 40 == pytest.approx(20.6)
    assert (sum(wan) / 40) / 7 == pytest.approx(1272.74 / 432.49, rel=1e-3)


# ------------------------------------------------- flat and ring movement ops
@pytest.mark.parametrize("size", range(1, 10))
def test_movement_message_counts(size):
    topo = Topology.single(size)
    for op in ("scatter", "gather"):
        for root in range(size):
            assert build(op, topo, "mpich", root=root).prove().messages == size - 1
    report = build("allgather", topo, "mpich").prove()
    assert report.messages == size * (size - 1)
    assert report.max_sends == size - 1
    assert build("alltoall", topo, "mpich").prove().messages == size * (size - 1)


def test_allgather_is_a_ring():
    plan = build("allgather", Topology.single(5), "mpich")
    assert {(m.src, m.dst) for m in plan.messages()} == {
        (r, (r + 1) % 5) for r in range(5)
    }
    received = [s.blocks for s in plan.programs[0] if s.kind == "recv"]
    assert received == [(4,), (3,), (2,), (1,)]


def test_scatter_and_gather_use_the_pieces_in_rank_order():
    topo = Topology.single(4)
    plan = build("scatterv", topo, "mpich", root=2, counts=[1, 0, 2, 1])
    assert [str(s) for s in plan.programs[2]] == [
        "send 0 [0] from in",
        "send 1 [1] from in",
        "copy [2] in -> out",
        "send 3 [3] from in",
    ]
    assert [
        s.peer
        for s in build("gather", topo, "mpich", root=1).programs[1]
        if s.kind == "recv"
    ] == [0, 2, 3]


def test_alltoall_send_orders():
    topo = Topology.single(4)
    rank = build("alltoall", topo, "mpich")
    rotated = build(
        "alltoallv", topo, "mpich", order="rotated", counts=[[1] * 4 for _ in range(4)]
    )
    assert [s.peer for s in rank.programs[2] if s.kind == "send"] == [0, 1, 3]
    assert [s.peer for s in rotated.programs[2] if s.kind == "send"] == [3, 0, 1]
    assert [s.peer for s in rotated.programs[2] if s.kind == "recv"] == [1, 0, 3]
    assert rank.param("order") == "rank"
    with pytest.raises(PlanError, match="order must be one of"):
        build("alltoall", topo, "mpich", order="random")


# --------------------------------------------------------------- reductions
@pytest.mark.parametrize("size", range(1, 10))
def test_reduction_message_counts(size):
    topo = Topology.single(size)
    for root in range(size):
        strict = build("reduce", topo, "mpich", root=root, level="strict").prove()
        comm = build("reduce", topo, "mpich", root=root, level="commutative").prove()
        # the non-commutative path reduces to rank 0 and forwards to the root
        assert strict.messages == size - 1 + (root != 0)
        assert comm.messages == size - 1
    assert build(
        "allreduce", topo, "mpich", count=4, segments=2
    ).prove().messages == 4 * (size - 1)
    assert build("reduce_scatter_block", topo, "mpich").prove().messages == 2 * (size - 1)
    assert build("scan", topo, "mpich", count=3, segments=3).prove().messages == 3 * (
        size - 1
    )
    assert build("exscan", topo, "mpich").prove().messages == size - 1


def test_strict_reduce_goes_through_rank_0():
    plan = build("reduce", Topology.single(6), "mpich", root=4)
    assert plan.param("tree_root") == 0
    assert [str(s) for s in plan.programs[4]][-2:] == [
        "send 0 [0] from acc",
        "recv 0 [0]",
    ]
    commutative = build(
        "reduce", Topology.single(6), "mpich", root=4, level="commutative"
    )
    assert commutative.param("tree_root") == 4
    children = [s.peer for s in commutative.programs[4] if s.kind == "recv_combine"]
    assert children == [5, 0, 2]


def test_scan_is_a_chain():
    plan = build(
        "scan", Topology.from_clusters([[0, 2], [1, 3]]), "mpich", level="strict"
    )
    assert [(m.src, m.dst) for m in plan.messages()] == [(0, 1), (1, 2), (2, 3)]
    assert plan.prove().max_wide_area_hops == 3


def test_a_level_the_plan_model_does_not_know_is_rejected():
    with pytest.raises(PlanError, match="reduction level"):
        build("allreduce", Topology.single(3), "mpich", level="loose")


# ---------------------------------------------------------- MagPIe Table 1
TABLE_1_MPICH = {
    "barrier": "no",
    "bcast": "no",
    "scatter": "yes",
    "scatterv": "yes",
    "gather": "yes",
    "gatherv": "yes",
    "allgather": "no",
    "allgatherv": "no",
    "alltoall": "yes",
    "alltoallv": "yes",
    "reduce": "no",
    "allreduce": "no",
    "reduce_scatter": "no",
    "reduce_scatter_block": "no",
    "scan": "no",
    "exscan": "no",
}


@pytest.mark.parametrize("topo", [MAGPIE_40, DAS_32], ids=["8x5", "4x8"])
@pytest.mark.parametrize("op", sorted(TABLE_1_MPICH))
def test_magpie_table_1_optimality_column(topo, op):
    s = spec(op)
    roots = [0, 7, topo.size - 1] if s.rooted else [None]
    levels = LEVELS if s.kind == "reduction" else [None]
    for root in roots:
        for level in levels:
            options = _options(op, topo.size, root, level)
            report = build(op, topo, "mpich", **options).prove()
            assert report.optimality == TABLE_1_MPICH[op], (root, level, report)


@pytest.mark.parametrize("op", ["bcast", "barrier", "allgather"])
def test_latency_chaining_on_8_clusters(op):
    assert build(op, MAGPIE_40, "mpich").prove().max_wide_area_hops > 1


def test_mpich_bcast_repeats_data_into_clusters():
    report = build("bcast", MAGPIE_40, "mpich", root=3).prove()
    assert not report.no_repeated_data
    assert report.wide_area_messages > MAGPIE_40.nclusters - 1


def test_table_1_is_a_worst_case_not_a_law():
    # on two clusters of a power-of-two size the binomial trees happen to cross the
    # wide area once; the ring allgather still does not
    topo = Topology.from_sizes([8, 8])
    assert build("bcast", topo, "mpich").prove().optimality == "yes"
    assert build("reduce", topo, "mpich").prove().optimality == "yes"
    assert build("allgather", topo, "mpich").prove().optimality == "no"
