"""The magpie family: MagPIe's coordinator algorithms for all 16 operations."""

import pytest

from wacoll import PlanError, Topology
from wacoll.plans import OPERATIONS, build
from wacoll.plans.families import magpie
from wacoll.plans.families.magpie_reduce import THRESHOLD, choose_variant
from wacoll.plans.operations import spec
from wacoll.trees import children, parent
from wacoll.trees.basic import validate_tree

REORDERED = Topology.from_clusters([[0, 3, 4], [1, 2], [5]])
TOPOLOGIES = [
    Topology.single(1),
    Topology.single(2),
    Topology.from_sizes([2, 1]),
    Topology.from_sizes([1, 1, 1]),
    Topology.from_sizes([1, 3]),
    Topology.single(5),
    Topology.from_sizes([3, 3]),
    REORDERED,
    Topology.from_clusters([[0, 2, 4, 6], [1, 3, 5]]),
    Topology.from_clusters([[1, 2], [0, 3, 4], [5]]),  # ranges, but not in cluster order
    Topology.from_sizes([4, 1, 2]),
    Topology.single(8),
    Topology.from_sizes([2, 3, 4]),
    Topology.from_sizes([1] * 9),
]
REDUCTIONS = [op for op, s in OPERATIONS.items() if s.kind == "reduction"]
LEVELS = ["strict", "associative", "commutative"]
# (count, itemsize, segments): a short vector and two long ones (by count, by itemsize)
SIZES = [(1, 1, 1), (600, 1, 3), (64, 8, 2)]


def _options(op, topo, count=1, itemsize=1, segments=1):
    """Builder options for ``op``: per-rank counts for v-variants, some of them zero."""
    s, p = spec(op), topo.size
    if op == "barrier":
        return {"itemsize": itemsize}
    opts = {"count": count, "itemsize": itemsize}
    if s.layout == "segments":
        opts["segments"] = segments
    if op in ("scatterv", "gatherv", "allgatherv", "reduce_scatter"):
        opts["counts"] = [count * (r % 3) for r in range(p)]
    if op == "alltoallv":
        opts["counts"] = [[(i + j) % 3 for j in range(p)] for i in range(p)]
    return opts


def _plans(op, topo, count=1, itemsize=1, segments=1, **extra):
    """A plan for every root of a rooted op (one plan otherwise)."""
    roots = range(topo.size) if spec(op).rooted else [None]
    for root in roots:
        opts = dict(_options(op, topo, count, itemsize, segments), **extra)
        if root is not None:
            opts["root"] = root
        yield build(op, topo, "magpie", **opts)


# ------------------------------------------------------------------ every plan
@pytest.mark.parametrize("op", [op for op in OPERATIONS if op not in REDUCTIONS])
@pytest.mark.parametrize("intra", magpie.INTRA)
def test_movement_and_barrier_check_everywhere(op, intra):
    for topo in TOPOLOGIES:
        for count, itemsize, segments in SIZES:
            for plan in _plans(op, topo, count, itemsize, segments, intra=intra):
                report = plan.prove()
                assert (plan.family, plan.param("intra")) == ("magpie", intra)
                assert report.optimality == "yes", (op, topo.clusters, plan.root)


@pytest.mark.parametrize("op", REDUCTIONS)
@pytest.mark.parametrize("level", LEVELS)
def test_reductions_check_everywhere(op, level):
    for topo in TOPOLOGIES:
        for count, itemsize, segments in SIZES:
            for intra in magpie.INTRA:
                for plan in _plans(
                    op, topo, count, itemsize, segments, intra=intra, level=level
                ):
                    report = plan.prove()
                    want = choose_variant(op, topo, level, sum(plan.counts) * itemsize)
                    assert plan.param("variant") == want
                    assert plan.param("threshold") == THRESHOLD
                    where = (op, topo.clusters, plan.root, want)
                    if want != "long":
                        assert report.single_latency, where
                    if want == "associative":
                        assert report.optimality == "yes", where


def test_strict_is_never_coordinator_based():
    for topo in TOPOLOGIES:
        for op in REDUCTIONS:
            plan = build(op, topo, "magpie", level="strict")
            assert plan.algorithm != "coordinator"
            assert plan.param("variant") == "short"


# ------------------------------------------------------- wide-area message counts
MULTI = [t for t in TOPOLOGIES if t.nclusters > 1] + [Topology.from_sizes([5] * 8)]


@pytest.mark.parametrize("topo", MULTI, ids=lambda t: str(list(map(len, t.clusters))))
def test_wide_area_messages(topo):
    c = topo.nclusters
    for root in range(topo.size):
        assert (
            build("bcast", topo, "magpie", root=root).prove().wide_area_messages == c - 1
        )
        plan = build("reduce", topo, "magpie", root=root, level="commutative")
        assert plan.prove().wide_area_messages == c - 1
    assert build("barrier", topo, "magpie").prove().wide_area_messages == c * (c - 1)
    for op in ("allgather", "allgatherv"):
        assert build(op, topo, "magpie").prove().wide_area_messages == c * (c - 1)
    for op in ("allreduce", "reduce_scatter", "reduce_scatter_block"):
        plan = build(op, topo, "magpie", level="commutative", count=3)
        assert plan.prove().wide_area_messages == c * (c - 1)
    if topo.is_contiguous:
        for op in ("scan", "exscan"):
            plan = build(op, topo, "magpie", level="associative")
            assert plan.prove().wide_area_messages == c * (c - 1) // 2


def test_bcast_segments_cross_once_each():
    topo = Topology.from_sizes([3, 2, 2])
    plan = build("bcast", topo, "magpie", count=12, segments=3, root=1)
    report = plan.prove()
    assert report.wide_area_messages == 3 * 2
    assert report.wide_area_bytes == 12 * 2
    # the root serves both remote coordinators before its own cluster, per segment
    assert [str(s) for s in plan.programs[1][:4]] == [
        "send 3 [0]",
        "send 5 [0]",
        "send 0 [0]",
        "send 2 [0]",
    ]
    assert [str(s) for s in plan.programs[3]] == [
        "recv 1 [0]",
        "send 4 [0]",
        "recv 1 [1]",
        "send 4 [1]",
        "recv 1 [2]",
        "send 4 [2]",
    ]


def test_short_reduce_sends_every_remote_vector_once():
    topo = Topology.from_sizes([3, 4, 2])
    for root in range(topo.size):
        report = build("reduce", topo, "magpie", root=root, count=4).prove()
        home = len(topo.clusters[topo.cluster_of(root)])
        assert report.wide_area_messages == topo.size - home
        assert report.wide_area_bytes == 4 * (topo.size - home)
        assert report.optimality == "near"


def test_one_rank_per_cluster_short_reductions_are_optimal():
    # with nothing to combine inside a cluster, gathering is all MagPIe can do
    topo = Topology.from_sizes([1] * 5)
    for op in ("reduce", "allreduce", "scan"):
        assert build(op, topo, "magpie").prove().optimality == "yes"


def test_allgather_local_broadcast_sends_only_missing_blocks():
    topo = Topology.from_clusters([[0, 3, 4, 6, 7], [1, 2], [5]])
    plan = build("allgather", topo, "magpie")
    received = {r: [] for r in range(topo.size)}
    for m in plan.messages():
        received[m.dst].extend(m.blocks)
    for r in range(topo.size):
        assert sorted(received[r]) == [b for b in range(topo.size) if b != r]


def test_scan_coordinators_send_only_to_later_clusters():
    topo = Topology.from_sizes([2, 3, 1, 2])
    plan = build("scan", topo, "magpie", level="associative")
    wan = [
        (topo.cluster_of(m.src), topo.cluster_of(m.dst))
        for m in plan.messages()
        if m.wide_area
    ]
    assert sorted(wan) == [(a, b) for a in range(4) for b in range(a + 1, 4)]


# ----------------------------------------------------------- variant selection
@pytest.mark.parametrize(
    "count, variant, algorithm",
    [(511, "short", "gather"), (512, "long", "binomial"), (513, "long", "binomial")],
)
def test_threshold_boundary(count, variant, algorithm):
    topo = Topology.from_sizes([2, 2])
    plan = build("reduce", topo, "magpie", count=count, itemsize=1, segments=4)
    assert (plan.param("variant"), plan.algorithm) == (variant, algorithm)
    plan.prove()
    short = variant == "short"
    for op, name in (
        ("allreduce", "binomial+bcast"),
        ("scan", "chain"),
        ("exscan", "chain"),
    ):
        plan = build(op, topo, "magpie", count=count)
        assert plan.algorithm == ("allgather" if short else name)
    # reduce-scatter's vector is the sum of its blocks
    plan = build("reduce_scatter", topo, "magpie", counts=[count - 3, 1, 1, 1])
    assert plan.algorithm == ("allgather" if short else "binomial+scatterv")


def test_threshold_counts_bytes_and_can_be_changed():
    topo = Topology.from_sizes([2, 2])
    assert (
        build("allreduce", topo, "magpie", count=63, itemsize=8).param("variant")
        == "short"
    )
    assert (
        build("allreduce", topo, "magpie", count=64, itemsize=8).param("variant")
        == "long"
    )
    plan = build("allreduce", topo, "magpie", count=64, itemsize=8, threshold=1024)
    assert (plan.param("variant"), plan.param("threshold")) == ("short", 1024)


@pytest.mark.parametrize("op", REDUCTIONS)
def test_reordered_communicators(op):
    scan = op in ("scan", "exscan")
    for count in (1, 1000):
        size_variant = "short" if count == 1 else "long"
        # associativity alone does not allow the coordinator algorithm here ...
        plan = build(op, REORDERED, "magpie", level="associative", count=count)
        assert plan.param("variant") == size_variant
        plan.prove()
        # ... commutativity does, except for scan
        plan = build(op, REORDERED, "magpie", level="commutative", count=count)
        assert plan.param("variant") == (size_variant if scan else "associative")
        report = plan.prove()
        if not scan:
            assert (report.optimality, plan.algorithm) == ("yes", "coordinator")
    contiguous = Topology.from_sizes([3, 2, 1])
    plan = build(op, contiguous, "magpie", level="associative", count=1000)
    assert plan.algorithm == "coordinator"


def test_forced_variants():
    topo = Topology.from_sizes([3, 3])
    plan = build("allreduce", topo, "magpie", variant="long")
    assert plan.algorithm == "binomial+bcast"
    plan.prove()
    with pytest.raises(PlanError, match="coordinator scan needs a communicator"):
        build("scan", REORDERED, "magpie", level="commutative", variant="associative")
    with pytest.raises(PlanError, match="coordinator reduce needs level"):
        build("reduce", topo, "magpie", variant="associative")


@pytest.mark.parametrize(
    "options, message",
    [
        ({"intra": "chain"}, "intra must be one of"),
        ({"level": "loose"}, "level must be one of"),
        ({"threshold": -1}, "threshold must be an integer"),
        ({"threshold": 1.5}, "threshold must be an integer"),
        ({"variant": "fast"}, "variant must be one of"),
    ],
)
def test_bad_options(options, message):
    with pytest.raises(PlanError, match=message):
        build("allreduce", Topology.from_sizes([2, 2]), "magpie", **options)


def test_bad_intra_for_movement():
    with pytest.raises(PlanError, match="intra must be one of"):
        build("scatter", Topology.from_sizes([2, 2]), "magpie", intra="flat")


# ------------------------------------------------------------------- shapes
def test_design_example_bcast_from_1():
    plan = build("bcast", Topology.from_sizes([3, 3]), "magpie", root=1)
    programs = [[str(s) for s in p] for p in plan.programs]
    assert programs[1] == ["send 3 [0]", "send 0 [0]", "send 2 [0]"]
    assert programs[3] == ["recv 1 [0]", "send 4 [0]", "send 5 [0]"]
    assert programs[0] == programs[2] == ["recv 1 [0]"]
    assert programs[4] == programs[5] == ["recv 3 [0]"]
    assert plan.algorithm == "coordinator"


def test_reordered_bcast_uses_each_clusters_lowest_rank():
    plan = build("bcast", REORDERED, "magpie", root=3)
    wan = sorted((m.src, m.dst) for m in plan.messages() if m.wide_area)
    assert wan == [(3, 1), (3, 5)]


@pytest.mark.parametrize("intra", magpie.INTRA)
def test_ordered_tree_subtrees_are_runs(intra):
    for n in range(1, 12):
        members = list(range(10, 10 + 2 * n, 2))
        for coord in members:
            tree = magpie.ordered_tree(members, coord, intra)
            validate_tree(tree, members=members, root=coord)
            for v in tree.nodes:
                kids = children(tree, v)
                assert len(kids) <= (2 if intra == "binary" else n)
                below = sorted(_subtree(tree, v))
                run = members[members.index(below[0]) : members.index(below[-1]) + 1]
                assert below == run
                if parent(tree, v) is not None and v != coord:
                    assert v == below[0]  # every non-coordinator heads its run


def _subtree(tree, v):
    out, stack = [], [v]
    while stack:
        x = stack.pop()
        out.append(x)
        stack.extend(tree.succ[x])
    return out


def test_intra_binomial_changes_local_trees_only():
    topo = Topology.from_sizes([8, 8])
    binary = build("bcast", topo, "magpie", intra="binary")
    binom = build("bcast", topo, "magpie", intra="binomial")
    assert binary.prove().wide_area_messages == binom.prove().wide_area_messages == 1
    assert [str(s) for s in binom.programs[0]] == [
        "send 8 [0]",
        "send 4 [0]",
        "send 2 [0]",
        "send 1 [0]",
    ]
    assert [str(s) for s in binary.programs[0]] == [
        "send 8 [0]",
        "send 1 [0]",
        "send 2 [0]",
    ]


def test_builders_cover_every_operation():
    assert sorted(magpie.BUILDERS) == sorted(OPERATIONS)
    for op, fn in magpie.BUILDERS.items():
        assert (
            fn(Topology.single(1), **({} if op == "barrier" else {"count": 2})).op == op
        )
