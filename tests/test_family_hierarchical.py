"""The hierarchical family: flat plans composed inside clusters and between
coordinators, proved as one plan by the prover."""

import pytest

from wacoll import PlanError, Topology
from wacoll.plans import LEVELS, Call, build, builders, options, select
from wacoll.plans.bounds import physical_bound
from wacoll.plans.builder import focus
from wacoll.plans.families import hierarchical
from wacoll.plans.families.hierarchical import composes_canonically
from wacoll.plans.sim import LinkModel, simulate

TOPOLOGIES = {
    "uneven": Topology.from_sizes([1, 5, 2]),
    "one-cluster": Topology.single(6),
    "ones": Topology.from_sizes([1] * 5),
    "2x4": Topology.from_sizes([4, 4]),
    "3x3": Topology.from_sizes([3, 3, 3]),
    "4x2": Topology.from_sizes([2, 2, 2, 2]),
    "reordered": Topology.from_clusters([[0, 3, 5], [1, 2], [4, 6]]),
}
#: (inner, inner_algorithm, outer, outer_algorithm): the papers' trees inside, the
#: modern flat algorithms between coordinators, and the other way round.
PAIRS = [
    ("magpie", None, "modern", None),
    (
        "modern",
        (("bcast", "knomial"), ("reduce", "binomial")),
        "modern",
        (("allreduce", "recursive_doubling"), ("bcast", "binomial")),
    ),
    ("mpich", None, "magpie", None),
    ("tree", None, "mpich", None),
    ("modern", (("bcast", "scatter_ring"),), "gridmpi", None),
]
OPS = sorted(hierarchical.BUILDERS)


def _kwargs(op, topo, pair, level=None, root=None, count=5, segments=2):
    inner, inner_algorithm, outer, outer_algorithm = pair
    parts = {"inner": inner, "outer": outer}
    if inner_algorithm is not None:
        parts["inner_algorithm"] = inner_algorithm
    if outer_algorithm is not None:
        parts["outer_algorithm"] = outer_algorithm
    kw = {
        k: v
        for k, v in dict(
            parts, count=count, segments=segments, level=level, root=root
        ).items()
        if k in options("hierarchical", op) and v is not None
    }
    # a per-operation algorithm names only the phases this operation has
    for key in ("inner_algorithm", "outer_algorithm"):
        if isinstance(kw.get(key), tuple):
            phases = {o for o, lv in hierarchical.PHASES[op] if lv == key[:5]}
            kw[key] = tuple(p for p in kw[key] if p[0] in phases) or None
            if kw[key] is None:
                del kw[key]
    return kw


def _levels(topo):
    """The levels the composition keeps on ``topo`` (parts that keep every level)."""
    if topo.nclusters > 1 and not topo.is_contiguous:
        return ("commutative",)
    if not composes_canonically(topo):
        return ("associative", "commutative")
    return LEVELS


# ------------------------------------------------------------------ the registry
def test_registered_with_its_operations():
    assert builders("hierarchical") is hierarchical.BUILDERS
    assert set(OPS) == {"barrier", "bcast", "reduce", "allreduce", "allgather"}
    assert set(hierarchical.PHASES) == set(OPS)
    assert "inner_options" in options("hierarchical", "allreduce")


# ------------------------------------------------------------------ proofs
@pytest.mark.parametrize("name", sorted(TOPOLOGIES))
@pytest.mark.parametrize("op", OPS)
def test_proved_on_every_topology(op, name):
    """Every operation, every pair whose families have its phases, every root and
    level the parts accept: proved by the prover, and a rank's part derived alone
    is that rank's program."""
    topo = TOPOLOGIES[name]
    proved = 0
    roots = sorted({0, 1, topo.size - 1}) if op in ("bcast", "reduce") else [None]
    levels = ("commutative", "associative", "strict") if op.endswith("reduce") else [None]
    for pair in PAIRS:
        for root in roots:
            for level in levels:
                kw = _kwargs(op, topo, pair, level=level, root=root)
                try:
                    plan = build(op, topo, "hierarchical", **kw)
                except PlanError:
                    continue
                report = plan.prove()
                assert plan.family == "hierarchical"
                assert report.level == level
                if op != "barrier":
                    assert sum(plan.counts) == (5 * topo.size if op == "allgather" else 5)
                for rank in {0, topo.size - 1, topo.size // 2}:
                    with focus(rank):
                        part = build(op, topo, "hierarchical", **kw)
                    assert part.program == plan.programs[rank]
                    assert (part.algorithm, part.counts) == (plan.algorithm, plan.counts)
                proved += 1
    assert proved >= 2  # (two pairs have an inner gather)


@pytest.mark.parametrize("name", sorted(TOPOLOGIES))
@pytest.mark.parametrize("op", ["reduce", "allreduce"])
def test_levels_are_the_weakest_of_the_parts_and_the_composition(op, name):
    """With parts that keep every level (the mpich family's binomial trees), the
    composite keeps exactly the levels its composition does; with a part that keeps
    'commutative' only (the ring allreduce), it keeps that only."""
    topo = TOPOLOGIES[name]
    root = {"root": topo.size - 1} if op == "reduce" else {}
    for level in LEVELS:
        kw = dict(inner="mpich", outer="mpich", level=level, count=4, **root)
        if level in _levels(topo):
            assert build(op, topo, "hierarchical", **kw).prove().level == level
        else:
            with pytest.raises(PlanError, match="level"):
                build(op, topo, "hierarchical", **kw)
    if op == "allreduce" and topo.nclusters > 1:
        ring = dict(inner="mpich", outer="modern", outer_algorithm="ring", count=4)
        assert build(op, topo, "hierarchical", level="commutative", **ring).prove()
        with pytest.raises(PlanError, match="'commutative'"):
            build(op, topo, "hierarchical", level="associative", **ring)


def test_canonical_composition():
    assert composes_canonically(Topology.from_sizes([4] * 16))
    assert composes_canonically(Topology.from_sizes([4, 2]))
    assert composes_canonically(Topology.from_sizes([2, 2, 2, 1]))
    assert not composes_canonically(Topology.from_sizes([4, 2, 1, 1]))
    assert not composes_canonically(Topology.from_sizes([2, 4]))
    assert not composes_canonically(Topology.from_sizes([3, 3]))
    assert composes_canonically(Topology.single(7))


def test_strict_on_sixteen_clusters_of_four():
    """Swing-like sizes: a k-nomial tree inside, recursive doubling between 16
    coordinators; level strict, since 4 is a power of two."""
    topo = Topology.from_sizes([4] * 16)
    plan = build(
        "allreduce",
        topo,
        "hierarchical",
        level="strict",
        count=64,
        inner="modern",
        inner_algorithm=(("bcast", "knomial"), ("reduce", "binomial")),
        inner_options={"radix": 4},
        outer="modern",
        outer_algorithm="recursive_doubling",
    )
    report = plan.prove()
    assert report.level == "strict"
    assert plan.algorithm == (
        "inner:modern/binomial+outer:modern/recursive_doubling+inner:modern/knomial"
    )
    # recursive doubling: 4 rounds of one message each way per coordinator
    assert report.wide_area_messages == 16 * 4
    assert dict(plan.params)["inner_options"] == (("radix", 4),)
    bcast = build(
        "bcast",
        topo,
        "hierarchical",
        root=5,
        inner="modern",
        inner_algorithm="knomial",
        outer="modern",
        outer_algorithm="binomial",
    )
    assert bcast.prove().wide_area_messages == 15


def test_the_root_need_not_be_a_coordinator():
    """MagPIe's rule: the root coordinates its own cluster, so its cluster's
    partial ends there without a detour through the cluster's lowest rank."""
    topo = Topology.from_sizes([3, 3, 3])
    plan = build(
        "reduce",
        topo,
        "hierarchical",
        root=4,
        level="commutative",
        inner="modern",
        outer="modern",
        outer_algorithm="binomial",
    )
    report = plan.prove()
    assert report.wide_area_messages == 2  # one partial per other cluster
    assert all(m.dst == 4 for m in plan.messages() if m.wide_area)
    bcast = build("bcast", topo, "hierarchical", root=4, outer_algorithm="binomial")
    assert all(m.src == 4 or m.dst == 4 for m in bcast.messages() if m.wide_area)


def test_segments_refined_where_the_parts_cut_differently():
    """The Rabenseifner reduce rounds segments up to a multiple of the largest
    power of two <= the cluster's ranks: clusters of 3, 4 and 6 ranks cut the
    vector in 2, 4 and 4 pieces; the plan's blocks refine them all."""
    topo = Topology.from_sizes([3, 4, 6])
    plan = build(
        "allreduce",
        topo,
        "hierarchical",
        count=24,
        segments=1,
        level="commutative",
        inner="modern",
        inner_algorithm=(("reduce", "rabenseifner"),),
        outer="modern",
        outer_algorithm="ring",
    )
    assert plan.prove().level == "commutative"
    assert sum(plan.counts) == 24 and plan.nblocks > 1
    tiny = build(
        "allreduce",
        topo,
        "hierarchical",
        count=1,
        segments=1,
        level="commutative",
        inner="modern",
        inner_algorithm=(("reduce", "rabenseifner"),),
    )
    assert tiny.prove() and tiny.counts == (1,)


def test_allgather_sends_no_rank_its_own_block():
    topo = Topology.from_sizes([3, 2, 4])
    plan = build(
        "allgather",
        topo,
        "hierarchical",
        count=2,
        inner="mpich",
        outer="modern",
        outer_algorithm="bruck",
    )
    plan.prove()  # (the prover refuses a block a rank already holds)
    for m in plan.messages():
        assert m.dst not in m.blocks or m.wide_area


def test_one_cluster_and_clusters_of_one_rank_leave_a_level_out():
    one = build(
        "allreduce", Topology.single(4), "hierarchical", level="strict", inner="mpich"
    )
    assert one.algorithm == "inner:mpich/binomial+inner:mpich/binomial"
    ones = build(
        "allreduce",
        Topology.from_sizes([1] * 4),
        "hierarchical",
        level="strict",
        outer_algorithm="recursive_doubling",
    )
    assert ones.algorithm == "outer:modern/recursive_doubling"
    assert (
        ones.nsteps
        == build(
            "allreduce", Topology.single(4), "modern", algorithm="recursive_doubling"
        ).nsteps
    )
    assert build("bcast", Topology.single(1), "hierarchical").algorithm == "local"


def test_priced_by_the_simulator():
    topo = Topology.from_sizes([4, 4, 4, 4], wan_latency=0.01, wan_bandwidth=1e6)
    for op in OPS:
        kw = {"level": "commutative"} if op.endswith("reduce") else {}
        if op != "barrier":
            kw["count"] = 1000
        plan = build(op, topo, "hierarchical", **kw)
        seconds = simulate(plan, LinkModel(topo)).completion
        assert seconds >= physical_bound(plan, topo) - 1e-12 and seconds > 0


def test_selected_by_name():
    topo = Topology.from_sizes([2, 2, 2])
    call = Call("allreduce", count=1 << 12, itemsize=8, level="commutative")
    sel = select(
        call,
        topo,
        family="hierarchical",
        options={"inner": "modern", "outer_algorithm": "ring"},
    )
    plan = sel.build(topo)
    assert plan.family == "hierarchical" and "outer:modern/ring" in plan.algorithm
    assert select(call, topo).family != "hierarchical"  # not a default


# ------------------------------------------------------------------ errors
@pytest.mark.parametrize(
    "kw,match",
    [
        ({"inner": "oak"}, "inner must be one of gridmpi, magpie, modern, mpich, tree"),
        ({"outer": "hierarchical"}, "composes flat families"),
        ({"outer": "combining"}, "outer must be one of"),
        ({"outer": "mpich", "outer_algorithm": "ring"}, "mpich allreduce algorithm must"),
        ({"inner_algorithm": (("allreduce", "ring"),)}, "not among the inner phases"),
        ({"inner_algorithm": (("bcast", 3),)}, "must be a string"),
        ({"inner_algorithm": "knomial"}, "magpie family's reduce takes no algorithm"),
        (
            {"inner": "modern", "inner_algorithm": "knomial"},
            "modern reduce algorithm must be",
        ),
        ({"inner_options": {"radix": 2}}, "the magpie family takes no option 'radix'"),
        ({"outer_options": {"count": 2}}, "may not set 'count'"),
        ({"outer_options": {"algorithm": "ring"}}, "outer_algorithm sets it"),
        ({"outer_options": 5}, "pairs or a mapping"),
        ({"outer_options": (("a", 1), ("a", 2))}, "twice"),
        ({"level": "loose"}, "level must be one of"),
        ({"segments": 0}, "segments must be a positive integer"),
    ],
)
def test_bad_options(kw, match):
    with pytest.raises(PlanError, match=match):
        build(
            "allreduce",
            Topology.from_sizes([2, 2]),
            "hierarchical",
            **dict({"level": "commutative"}, **kw),
        )


def test_options_apply_where_a_builder_takes_them():
    """One set of options serves every operation: the k-nomial radix reaches the
    broadcasts and is no error for a reduce, which has none."""
    topo = Topology.from_sizes([5, 5])
    kw = dict(
        inner="modern",
        inner_algorithm=(("bcast", "knomial"),),
        inner_options={"radix": 2},
    )
    assert build(
        "reduce",
        topo,
        "hierarchical",
        inner="modern",
        level="commutative",
        inner_options={"radix": 2},
    ).prove()
    binary = build("allreduce", topo, "hierarchical", level="commutative", **kw)
    quad = build(
        "allreduce",
        topo,
        "hierarchical",
        level="commutative",
        **dict(kw, inner_options={"radix": 4}),
    )
    assert binary.prove().max_sends < quad.prove().max_sends  # wider tree, more children


def test_bad_options_of_other_operations():
    topo = Topology.from_sizes([3, 3])
    with pytest.raises(PlanError, match="needs the inner family's gather plan"):
        build("allgather", topo, "hierarchical", inner="modern")
    with pytest.raises(PlanError, match="root 6 is not a rank"):
        build("bcast", topo, "hierarchical", root=6)
    with pytest.raises(PlanError, match="reordered communicator"):
        build("reduce", TOPOLOGIES["reordered"], "hierarchical", level="associative")
    with pytest.raises(PlanError, match="takes no option 'intra'"):
        build("barrier", topo, "hierarchical", intra="binary")


# ------------------------------------------------------------------ the policy
def test_a_candidate_of_the_policy_when_asked():
    """Policy.hierarchical_from prices the pairs against MagPIe's plan; off by
    default, and below the threshold the rule alone decides."""
    from wacoll.plans import Policy
    from wacoll.plans.select import HIERARCHICAL_PAIRS, predicted_time

    topo = Topology.from_sizes([2, 2, 2, 2], wan_latency=5e-4, wan_bandwidth=1.25e9)
    call = Call("allreduce", count=1 << 17, itemsize=8, level="commutative")
    rule = Policy(priced_from=0)  # (the other families' pricing: see test_select)
    assert select(call, topo, policy=rule).family == "magpie"
    on = Policy(hierarchical_from=1 << 16, priced_from=0)
    chosen = select(call, topo, policy=on)
    assert chosen.family == "hierarchical"
    assert {
        k: v for k, v in chosen.options if k in ("inner", "outer")
    } in HIERARCHICAL_PAIRS
    assert predicted_time(chosen, topo, call) < predicted_time(
        select(call, topo, policy=rule), topo, call
    )
    small = Call("allreduce", count=16, itemsize=8, level="commutative")
    assert select(small, topo, policy=on) == select(small, topo, policy=rule)
    strict = Call("allreduce", count=1 << 17, itemsize=8, level="strict")
    assert select(strict, topo, policy=on) == select(strict, topo, policy=rule)
