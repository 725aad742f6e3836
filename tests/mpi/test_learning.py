"""Repeated calls learn their fastest candidate (wacoll.mpi.learning): every rank
explores the same candidates in the same order, agrees on the same choice, and every
call, explored or not, gives the MPI library's result."""

import json

import numpy as np
import pytest
from mpi4py import MPI

import wacoll
from wacoll import Topology
from wacoll.mpi.learning import ROUNDS, TuningError, candidates, exploration_calls

from .conftest import RANK, SIZE, WORLD

pytestmark = [
    pytest.mark.mpi(min_size=2),
    pytest.mark.skipif(SIZE < 2, reason="learning needs two clusters: two ranks"),
]


def _two_clusters(**kwargs):
    return wacoll.Comm(
        WORLD, Topology.from_sizes([SIZE // 2, SIZE - SIZE // 2]), **kwargs
    )


def _family(name, default):
    return default if name == "default" else name


@pytest.mark.parametrize("op", ["Allreduce", "Bcast", "Reduce"])
def test_exploration_then_one_choice_everywhere(mpi, op):
    comm = _two_clusters(learn="on")
    try:
        n = 3
        calls = exploration_calls(op.lower())
        ran, wrong = [], []
        for i in range(calls + 4):
            send = mpi.ints(n, seed=i)
            got, want = np.zeros(n, np.int64), np.zeros(n, np.int64)
            if op == "Allreduce":
                comm.Allreduce(send, got)
                WORLD.Allreduce(send, want)
            elif op == "Bcast":
                got[:] = want[:] = send if RANK == SIZE - 1 else 0
                comm.Bcast(got, root=SIZE - 1)
                WORLD.Bcast(want, root=SIZE - 1)
            else:
                comm.Reduce(send, got, op=MPI.MAX, root=0)
                WORLD.Reduce(send, want, op=MPI.MAX, root=0)
            ran.append(comm.last_family)
            if not np.array_equal(got, want):
                wrong.append(i)
        mpi.assert_all(not wrong, f"calls {wrong} differ from the library's")
        table = comm.tuning
        mpi.assert_all(len(table) == 1, f"tuning {table}")
        tried = table[0]["candidates"]
        mpi.assert_all(
            tried[:2] == ["default", "native"]
            and len(tried) * ROUNDS == calls
            and set(tried[2:]) <= set(candidates(op.lower())),
            f"candidates {tried}",
        )
        explored = ran[:calls]
        default = explored[0]
        # each candidate's first call, then the counted ones in turns
        want_order = [_family(c, default) for _ in range(ROUNDS) for c in tried]
        mpi.assert_all(explored == want_order, f"explored {explored}")
        chosen = _family(table[0]["chosen"], default)
        later = set(ran[calls:])
        mpi.assert_all(later == {chosen}, f"chose {chosen}, then ran {later}")
        everyone = WORLD.allgather((table[0]["chosen"], table[0]["seconds"]))
        mpi.assert_all(
            all(e == everyone[0] for e in everyone), f"ranks differ: {everyone}"
        )
    finally:
        comm.Free()


def test_a_tuning_file_is_used_without_exploring(mpi, monkeypatch, tmp_path_factory):
    comm = _two_clusters(learn="on")
    path = None
    try:
        got = np.zeros(2)
        for _ in range(exploration_calls("allreduce")):
            comm.Allreduce(np.ones(2), got)
        chosen = comm.tuning[0]["chosen"]
        where = tmp_path_factory.mktemp("tuning") if RANK == 0 else None
        path = WORLD.bcast(None if where is None else str(where / "tuning.json"))
        comm.write_tuning(path)
        WORLD.Barrier()
    finally:
        comm.Free()
    monkeypatch.setenv("WACOLL_TUNING", path)
    again = _two_clusters(learn="on")
    try:
        got = np.zeros(2)
        again.Allreduce(np.ones(2), got)
        first = again.last_family
        mpi.assert_all(np.all(got == SIZE), str(got))
        mpi.assert_all(
            chosen == "default" or first == chosen,
            f"the file chose {chosen}; the first call ran {first}",
        )
        mpi.assert_all(again.tuning == [], "a shape from the file was explored again")
    finally:
        again.Free()


def test_a_bad_tuning_file_raises_everywhere(mpi, monkeypatch, tmp_path_factory):
    where = tmp_path_factory.mktemp("bad") if RANK == 0 else None
    path = WORLD.bcast(None if where is None else str(where / "tuning.json"))
    if RANK == 0:
        with open(path, "w") as fh:
            json.dump({"format": 1, "choices": [{"op": "allreduce"}]}, fh)
    WORLD.Barrier()
    monkeypatch.setenv("WACOLL_TUNING", path)
    mpi.same_error(lambda: _two_clusters(learn="on"), TuningError, match="choice 0")


def test_a_bad_learn_mode_raises_everywhere(mpi):
    mpi.same_error(
        lambda: _two_clusters(learn="sometimes"),
        wacoll.WacollError,
        match="learn must be one of",
    )


def test_what_is_not_learned(mpi):
    comm = _two_clusters(learn="on")
    try:
        got = np.zeros(4)
        for _ in range(12):
            comm.Allreduce(np.ones(4), got, level="strict")  # the library cannot
            comm.Allreduce(np.ones(4), got, family="magpie")  # forced
        mpi.assert_all(
            comm.tuning == [] and comm.last_family == "magpie",
            f"{comm.tuning}, {comm.last_family}",
        )
    finally:
        comm.Free()
    one = wacoll.Comm(WORLD, Topology.from_sizes([SIZE]), learn="auto")
    try:
        for _ in range(12):
            one.Allreduce(np.ones(4), got)
        mpi.assert_all(
            one.tuning == [] and one.last_family == "native", "one cluster learned"
        )
    finally:
        one.Free()


def test_a_rank_local_error_leaves_every_rank_exploring_alike(mpi, monkeypatch):
    """A call that fails on one rank's own arguments does not make the ranks' learned
    shapes differ: with room for two shapes, the next calls still explore the same
    candidate everywhere (they would wait for each other forever otherwise)."""
    from wacoll.mpi import learning

    monkeypatch.setattr(learning, "SHAPES", 2)
    comm = _two_clusters(learn="on")
    try:

        def call(count, bad=False):
            a, b = np.ones(count), np.zeros(count // 2 if bad else count)
            comm.Allreduce(a, b, op=MPI.SUM)
            return b

        for _ in range(ROUNDS):
            call(4)  # the first shape: part way through its exploration
        with pytest.raises(wacoll.WacollError):
            call(64, bad=RANK == 1)  # another shape; one rank's arguments are bad
        call(1024)  # a third shape
        got = call(4)
        families = WORLD.allgather(comm.last_family)
        mpi.assert_all(
            len(set(families)) == 1 and (got == SIZE).all(), f"ranks ran {families}"
        )
    finally:
        comm.Free()


def test_ranks_must_agree_on_tracing(mpi):
    with pytest.raises(wacoll.WacollError, match="trace"):
        _two_clusters(trace=RANK == 0)
    mpi.assert_all(True)


def test_counted_explored_calls_replay_their_candidate(mpi):
    """A candidate's first call is read afresh (it builds and compiles its plan);
    its counted calls replay it (wacoll.mpi.exploring), timed as a loop runs it,
    with the library's results; once decided, the chosen call replays."""
    comm = _two_clusters(learn="on")
    try:
        send, got, want = (
            mpi.ints(5, seed=1),
            np.zeros(5, np.int64),
            np.zeros(5, np.int64),
        )
        calls = exploration_calls("allreduce")
        routes = []
        for _ in range(calls + 3):
            comm.Allreduce(send, got)
            routes.append(comm.last_route)
        WORLD.Allreduce(send, want)
        mpi.assert_all(np.array_equal(got, want), f"{got} != {want}")
        many = len(comm.tuning[0]["candidates"])
        explored = routes[:calls]
        mpi.assert_all(
            explored[:many] == ["compiled"] * many
            and explored[many:] == ["replayed"] * (calls - many),
            f"explored calls ran {explored}",
        )
        # after the decision the chosen candidate's compiled call is replayed
        mpi.assert_all(routes[calls:] == ["replayed"] * 3, f"then {routes[calls:]}")
        kinds = {type(v).__name__ for v in comm.route.recorded.values()}
        mpi.assert_all("ExploringCall" not in kinds, f"still recorded: {kinds}")
    finally:
        comm.Free()


@pytest.mark.parametrize("at", [4, 9, 17])
def test_a_disagreeing_explored_call_raises_everywhere(mpi, at):
    """A counted explored call replayed may return before its verdict: a call on
    which one rank disagrees raises the same error on every rank, at the call or
    at the next (here a Barrier), wherever it falls in the exploration (17: the
    call whose agreement decides the shape)."""
    comm = _two_clusters(learn="on")
    try:
        send, got = np.ones(4), np.zeros(4)
        for _ in range(at):
            comm.Allreduce(send, got)

        def disagree_then_barrier():
            op = MPI.MAX if RANK == SIZE - 1 else MPI.SUM
            comm.Allreduce(send, got, op=op)
            comm.Barrier()

        mpi.same_error(disagree_then_barrier, match="disagree")
    finally:
        comm.Free()
