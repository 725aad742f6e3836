"""Trees given as ``networkx.DiGraph`` objects: the same tree on every rank is the same
call (a graph compares by identity and prints its address, and once made the ranks
"disagree" or the proof cache fail to key it), with the proof cache on and off."""

import networkx as nx
import numpy as np
import pytest
from mpi4py import MPI

import wacoll
from wacoll import Topology

from .conftest import RANK, SIZE, WORLD

pytestmark = pytest.mark.mpi(min_size=1)


def _star_then_chain(n, root=0):
    """A tree no builder names: ``root`` sends to the odd ranks, each odd rank to the
    next even one (a fresh object on every call)."""
    tree = nx.DiGraph(name="star-then-chain")
    tree.add_nodes_from(range(n))
    others = [r for r in range(n) if r != root]
    heads, tails = others[::2], others[1::2]
    for i, h in enumerate(heads):
        tree.add_edge(root, h, order=np.int64(i))  # numpy numbers are welcome
    for h, t in zip(heads, tails):
        tree.add_edge(h, t, order=0)
    return tree


@pytest.fixture(params=["cache", "no-cache"])
def comm(request, monkeypatch):
    if request.param == "no-cache":
        monkeypatch.setenv("WACOLL_PROOF_CACHE", "off")
    sizes = [SIZE // 2, SIZE - SIZE // 2] if SIZE > 1 else [1]
    c = wacoll.Comm(WORLD, Topology.from_sizes(sizes))
    yield c
    c.Free()


def test_bcast_reduce_allreduce_over_a_graph(mpi, comm):
    root = SIZE - 1
    buf = np.arange(5.0) if RANK == root else np.zeros(5)
    mpi.run(
        lambda: comm.Bcast(
            buf, root=root, family="tree", tree=_star_then_chain(SIZE, root)
        ),
        "Bcast",
    )
    mpi.assert_equal(buf, np.arange(5.0), "Bcast")

    send = mpi.ints(7)
    want = np.zeros(7, np.int64)
    WORLD.Allreduce(send, want)
    got = np.zeros(7, np.int64)
    mpi.run(
        lambda: comm.Allreduce(
            send,
            got,
            family="tree",
            tree=_star_then_chain(SIZE),
            bcast_tree=_star_then_chain(SIZE),
        ),
        "Allreduce",
    )
    mpi.assert_equal(got, want, "Allreduce")
    mpi.assert_all(comm.last_family == "tree", comm.last_family)

    got = np.zeros(7, np.int64)
    want = np.zeros(7, np.int64)
    WORLD.Reduce(send, want, op=MPI.MAX, root=0)
    mpi.run(
        lambda: comm.Reduce(
            send, got, op=MPI.MAX, root=0, family="tree", tree=_star_then_chain(SIZE)
        ),
        "Reduce",
    )
    if RANK == 0:
        mpi.assert_equal(got, want, "Reduce")
    else:
        mpi.assert_all(True)


def test_an_equal_graph_finds_the_plan_already_made(mpi, comm):
    buf = np.zeros(4)  # (a count its size class is planned for: one plan)
    for _ in range(3):
        comm.Bcast(buf, root=0, family="tree", tree=_star_then_chain(SIZE))
    plans = [k for k in comm.route.dispatcher.plans if k[1] == "tree"]
    mpi.assert_all(len(plans) == 1, f"{len(plans)} plans kept for one tree")


def test_a_graph_that_is_not_a_tree_raises_everywhere(mpi, comm):
    if SIZE < 2:
        pytest.skip("needs an edge")
    bad = nx.DiGraph([(0, 1)])  # no 'order' on the edge, and ranks missing at size > 2
    mpi.same_error(
        lambda: comm.Bcast(np.zeros(2), root=0, family="tree", tree=bad), wacoll.PlanError
    )


def test_a_communicator_wide_graph_agrees(mpi):
    c = wacoll.Comm(
        WORLD, Topology.from_sizes([SIZE]), family="tree", tree=_star_then_chain(SIZE)
    )
    try:
        buf = np.arange(4.0) if RANK == 0 else np.zeros(4)
        c.Bcast(buf, root=0)
        mpi.assert_equal(buf, np.arange(4.0), "Bcast")
    finally:
        c.Free()
