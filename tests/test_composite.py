"""Composed plans (family "han"): phases, the composite proof, and its refusals."""

import dataclasses

import pytest

from wacoll import PlanError, Topology
from wacoll.plans import Call, select
from wacoll.plans.composite import HAN_OPS, Composite, LibraryPhase, PlanPhase, compose

TOPOLOGIES = [
    Topology.from_sizes([3, 3]),
    Topology.from_sizes([4, 1, 2]),
    Topology.from_clusters([[0, 3, 5], [1, 2], [4, 6]]),
    Topology.from_sizes([2, 2, 2, 2]),
]


@pytest.mark.parametrize("topo", TOPOLOGIES, ids=str)
@pytest.mark.parametrize("op", HAN_OPS)
def test_every_composite_is_proved_at_every_root(topo, op):
    roots = range(topo.size) if op in ("bcast", "reduce") else [None]
    for root in roots:
        c = compose(op, topo, root=root, count=10, itemsize=8)
        report = c.prove()
        assert report.level == ("commutative" if op in ("reduce", "allreduce") else None)
        # MagPIe's plan between coordinators: each item crosses the wide area once
        coords = topo.coordinators(root)
        plans = [p for p in c.phases if isinstance(p, PlanPhase)]
        assert [p.ranks for p in plans] == [coords]
        if root is not None:
            assert coords[topo.cluster_of(root)] == root
        if op == "bcast":
            assert report.wide_area_messages == topo.nclusters - 1


def test_the_phases_of_allreduce():
    c = compose("allreduce", Topology.from_sizes([2, 3]), count=4, itemsize=8)
    assert [type(p).__name__ for p in c.phases] == [
        "LibraryPhase",
        "PlanPhase",
        "LibraryPhase",
    ]
    assert (c.phases[0].op, c.phases[0].src, c.phases[0].dst) == ("reduce", "in", "acc")
    assert (c.phases[2].op, c.phases[2].src) == ("bcast", "out")
    assert c.algorithm == "library reduce ; magpie/coordinator ; library bcast"


def _spoil(c, index, **changes):
    phases = list(c.phases)
    phases[index] = dataclasses.replace(phases[index], **changes)
    return dataclasses.replace(c, phases=tuple(phases))


def test_the_proof_refuses_broken_composites():
    topo = Topology.from_sizes([3, 3])
    c = compose("allreduce", topo, count=4, itemsize=8)
    # the final broadcast missing: ranks 1, 2, 4, 5 end with nothing
    with pytest.raises(PlanError, match="rank 1 ends without every rank's part"):
        dataclasses.replace(c, phases=c.phases[:2]).prove()
    # the cluster reduce into a buffer the plan does not read
    with pytest.raises(PlanError, match="reads buffer 'acc', which holds nothing"):
        _spoil(c, 0, dst="tmp").prove()
    # a root outside its cluster
    with pytest.raises(PlanError, match="root 3 is not in cluster"):
        _spoil(c, 0, roots=(3, 3)).prove()
    # one contribution combined twice: the cluster sums spread, then reduced again
    roots = c.phases[0].roots
    twice = dataclasses.replace(
        c,
        phases=(
            c.phases[0],
            LibraryPhase("bcast", roots, "acc", "acc"),
            LibraryPhase("reduce", roots, "acc", "tmp"),
        ),
    )
    with pytest.raises(PlanError, match="contribution of rank 0 combined twice"):
        twice.prove()
    # a barrier whose second cluster barrier is missing: members leave too early
    b = compose("barrier", topo)
    with pytest.raises(PlanError, match="has not entered"):
        dataclasses.replace(b, phases=b.phases[:2]).prove()


def test_refusals_name_the_problem():
    topo = Topology.from_sizes([2, 2])
    with pytest.raises(PlanError, match="has no gather plan; it has barrier, bcast"):
        compose("gather", topo)
    with pytest.raises(PlanError, match="keeps level 'commutative' only"):
        compose("allreduce", topo, level="strict")
    with pytest.raises(PlanError, match="root 9 is not a rank"):
        compose("bcast", topo, root=9)
    with pytest.raises(PlanError, match="the han family's allreduce takes no option"):
        select(
            Call("allreduce", count=4, itemsize=8, level="commutative"),
            topo,
            family="han",
            options={"tree": "lam"},
        )


def test_selection_forces_han_and_a_communicator_wide_han_falls_back():
    topo = Topology.from_sizes([2, 2])
    call = Call("allreduce", count=4, itemsize=8, level="commutative")
    chosen = select(call, topo, family="han")
    assert chosen.family == "han" and isinstance(chosen.build(topo), Composite)
    assert select(call, topo, comm_family="han").family == "han"
    strict = dataclasses.replace(call, level="strict")
    assert select(strict, topo, comm_family="han").family == "magpie"
    assert (
        select(Call("gather", count=4, root=0), topo, comm_family="han").family
        == "magpie"
    )
    # a small strict float sum keeps its reproducible arithmetic under a han default
    small = dataclasses.replace(strict, accumulator_itemsize=32)
    assert select(small, topo, comm_family="han").arithmetic == "reproducible"
    # the default never composes: measured slower than MagPIe's whole plans here
    assert select(call, topo).family == "magpie"


def test_describe_lists_the_phases():
    c = compose("reduce", Topology.from_sizes([2, 2]), root=3, count=2)
    lines = c.describe().splitlines()
    assert lines[0] == f"reduce on 4 ranks, level commutative (han: {c.algorithm})"
    assert (
        lines[1]
        == "  library reduce in every cluster to its coordinator (0, 3): in -> acc"
    )
    assert lines[2].startswith("  plan over ranks (0, 3): magpie/")
    assert lines[2].endswith("reduce, acc -> out, 1 wide-area messages")
    assert isinstance(
        compose("barrier", Topology.from_sizes([2, 2])).phases[0], LibraryPhase
    )
