"""MagPIe Table 1, the optimality columns, reproduced by the plan prover.

Kielmann et al. (PPoPP 1999) rate each algorithm as wide-area optimal ("yes"),
single-latency but sending data into a cluster more than once ("near") or neither
("no"). :attr:`wacoll.plans.ProofReport.optimality` measures the same on a plan; the
rows are checked on Table 2's setting (8 clusters of 5 ranks) and on 4 clusters of 8.
Short messages are 1 byte and long ones 64 KByte, as in Figures 4-6.
"""

from dataclasses import dataclass

import pytest

from wacoll import Topology
from wacoll.plans import build
from wacoll.plans.operations import spec

SHORT = {"count": 1, "level": "strict"}
LONG = {"count": 64 * 1024, "level": "strict"}
ASSOCIATIVE = {"count": 64 * 1024, "level": "associative"}


@dataclass(frozen=True)
class Row:
    """One line of Table 1: operations, options, and both optimality columns."""

    name: str
    ops: tuple
    options: dict
    magpie: str
    mpich: str
    algorithm: str = ""  # MagPIe's building block ("Implementation" column), if any


def _reduction_rows(title, ops, short_algorithm, long_algorithm):
    return [
        Row(f"{title} short msg", ops, SHORT, "near", "no", short_algorithm),
        Row(f"{title} long msg", ops, LONG, "no", "no", long_algorithm),
        Row(f"{title} associative", ops, ASSOCIATIVE, "yes", "no", "coordinator"),
    ]


ROWS = [
    Row("Barrier", ("barrier",), {}, "yes", "no"),
    Row("Bcast", ("bcast",), {"count": 1}, "yes", "no"),
    Row("Scatter/Scatterv", ("scatter", "scatterv"), {"count": 1}, "yes", "yes"),
    Row("Gather/Gatherv", ("gather", "gatherv"), {"count": 1}, "yes", "yes"),
    Row("Allgather/Allgatherv", ("allgather", "allgatherv"), {"count": 1}, "yes", "no"),
    Row("Alltoall/Alltoallv", ("alltoall", "alltoallv"), {"count": 1}, "yes", "yes"),
    *_reduction_rows("Reduce", ("reduce",), "gather", "binomial"),
    *_reduction_rows("Allreduce", ("allreduce",), "allgather", "binomial+bcast"),
    *_reduction_rows(
        "Reduce_scatter",
        ("reduce_scatter", "reduce_scatter_block"),
        "allgather",
        "binomial+scatterv",
    ),
    *_reduction_rows("Scan", ("scan", "exscan"), "allgather", "chain"),
]
TOPOLOGIES = {
    "8x5": Topology.from_sizes([5] * 8),
    "4x8": Topology.from_sizes([8] * 4),
}


def _options(op, topo, options):
    """Row options for ``op``; v-variants get the same count for every rank."""
    opts = dict(options)
    if op == "barrier":
        return opts
    p, count = topo.size, opts.pop("count")
    if op in ("scatterv", "gatherv", "allgatherv", "reduce_scatter"):
        opts["counts"] = [count] * p
    elif op == "alltoallv":
        opts["counts"] = [[count] * p for _ in range(p)]
    else:
        opts["count"] = count
    return opts


def _plans(family, row, topo):
    """The row's plans on ``topo``: rooted operations from rank 0 and from a rank in
    the middle of the last cluster."""
    for op in row.ops:
        roots = (0, topo.size - 2) if spec(op).rooted else (None,)
        for root in roots:
            opts = _options(op, topo, row.options)
            if root is not None:
                opts["root"] = root
            yield op, root, build(op, topo, family, **opts)


@pytest.mark.parametrize("topo_name", TOPOLOGIES)
@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.name)
def test_magpie_column(row, topo_name):
    topo = TOPOLOGIES[topo_name]
    for op, root, plan in _plans("magpie", row, topo):
        report = plan.prove()
        assert report.optimality == row.magpie, (op, root, report.as_dict())
        if row.algorithm:
            assert plan.algorithm == row.algorithm, (op, root)
        # MagPIe's wide-area shape is flat wherever Table 1 calls it optimal or near
        if row.magpie != "no":
            assert report.max_wide_area_hops == 1, (op, root)


@pytest.mark.parametrize("topo_name", TOPOLOGIES)
@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.name)
def test_mpich_column(row, topo_name):
    topo = TOPOLOGIES[topo_name]
    for op, root, plan in _plans("mpich", row, topo):
        assert plan.prove().optimality == row.mpich, (op, root)


@pytest.mark.parametrize("topo_name", TOPOLOGIES)
def test_magpie_beats_mpich_on_the_wide_area(topo_name):
    """Where MPICH is not optimal, MagPIe chains fewer wide-area latencies and sends no
    more wide-area messages (Table 2's story, per operation)."""
    topo = TOPOLOGIES[topo_name]
    for op in ("barrier", "bcast", "allgather"):
        opts = {} if op == "barrier" else {"count": 1}
        ours = build(op, topo, "magpie", **opts).prove()
        theirs = build(op, topo, "mpich", **opts).prove()
        assert ours.wide_area_messages <= theirs.wide_area_messages
        assert ours.max_wide_area_hops < theirs.max_wide_area_hops
