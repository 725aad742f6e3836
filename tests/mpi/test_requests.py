"""Non-blocking and persistent collectives, derived communicators, the environment.

Every result is compared with the MPI library's own collective on COMM_WORLD, on the
suite's layouts (one cluster, several, reordered, uneven), for the default family
and forced families. Runs at any size.
"""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

import wacoll
from wacoll.errors import WacollError

W = MPI.COMM_WORLD
P, ME = W.Get_size(), W.Get_rank()
N = 6


def _layouts(mpi):
    return ["single"] + list(mpi.multi[:2])


def _cases():
    """(name, wacoll call, native call, result) over fresh buffers, per operation."""

    def bcast(c, start):
        buf = np.arange(N, dtype=np.float64) if ME == 0 else np.zeros(N)
        return (c.Ibcast if start else c.Bcast_init)(buf, root=0), buf

    def allreduce(c, start):
        out = np.zeros(N)
        send = np.arange(N, dtype=np.float64) * (ME + 1)
        return (c.Iallreduce if start else c.Allreduce_init)(send, out, op=MPI.SUM), out

    def allgather(c, start):
        out = np.zeros(N * P)
        send = np.full(N, ME + 0.5)
        return (c.Iallgather if start else c.Allgather_init)(send, out), out

    def reduce(c, start):
        out = np.zeros(N)
        send = np.arange(N, dtype=np.float64) + ME
        return (c.Ireduce if start else c.Reduce_init)(
            send, out, op=MPI.MAX, root=P - 1
        ), out

    def alltoall(c, start):
        out = np.zeros(2 * P, np.int64)
        send = np.arange(2 * P, dtype=np.int64) + 100 * ME
        return (c.Ialltoall if start else c.Alltoall_init)(send, out), out

    def barrier(c, start):
        return (c.Ibarrier if start else c.Barrier_init)(), None

    return {
        "bcast": bcast,
        "allreduce": allreduce,
        "allgather": allgather,
        "reduce": reduce,
        "alltoall": alltoall,
        "barrier": barrier,
    }


def _want(name):
    """What the MPI library gives for the case."""
    if name == "bcast":
        return np.arange(N, dtype=np.float64)
    if name == "allreduce":
        return np.arange(N, dtype=np.float64) * (P * (P + 1) // 2)
    if name == "allgather":
        return np.repeat(np.arange(P) + 0.5, N)
    if name == "reduce":
        out = np.zeros(N)
        W.Reduce(np.arange(N, dtype=np.float64) + ME, out, op=MPI.MAX, root=P - 1)
        return out if ME == P - 1 else np.zeros(N)
    if name == "alltoall":
        out = np.zeros(2 * P, np.int64)
        W.Alltoall(np.arange(2 * P, dtype=np.int64) + 100 * ME, out)
        return out
    return None


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("name", sorted(_cases()))
def test_nonblocking_mixed_with_application_requests(mpi, name):
    """``I*`` calls return requests that ``MPI.Request.Waitall`` completes together
    with the application's own point-to-point requests."""
    problems = []
    for layout in _layouts(mpi):
        comm = mpi.comm(layout, level=None)
        want = _want(name)
        req, out = _cases()[name](comm, True)
        token = bytearray(1)
        app = [
            W.Irecv(token, source=(ME - 1) % P, tag=77),
            W.Isend(b"t", dest=(ME + 1) % P, tag=77),
        ]
        _, exc = mpi.outcome(lambda: MPI.Request.Waitall([req] + app))
        if exc is not None:
            problems.append(f"{layout}: {exc!r}")
        elif want is not None and out.tobytes() != want.tobytes():
            problems.append(f"{layout}: got {out}, want {want}")
    mpi.assert_all(not problems, "; ".join(problems[:2]))


@pytest.mark.mpi(min_size=1)
def test_many_nonblocking_calls_in_flight(mpi):
    """Several non-blocking calls in flight at once keep their messages apart."""
    for layout in _layouts(mpi):
        comm = mpi.comm(layout, family="magpie" if layout != "single" else None)
        outs = [np.zeros(N) for _ in range(5)]
        reqs = [
            comm.Iallreduce(np.full(N, float(k + ME)), outs[k], op=MPI.SUM)
            for k in range(5)
        ]
        mpi.run(lambda: [r.Wait() for r in reversed(reqs)], f"{layout} waits")
        for k in range(5):
            mpi.assert_equal(
                outs[k], np.full(N, float(k * P + P * (P - 1) // 2)), f"{layout} call {k}"
            )


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("name", sorted(_cases()))
def test_persistent_starts(mpi, name):
    """A persistent request bound once gives MPI's result on every start, the
    in-place operand re-read at each start."""
    problems = []
    for layout in _layouts(mpi):
        comm = mpi.comm(layout, level=None)
        req, out = _cases()[name](comm, False)
        want = _want(name)
        for start in range(3):
            if out is not None and name != "bcast":
                out[...] = 0
            _, exc = mpi.outcome(lambda: (req.Start(), req.Wait()))
            if exc is not None:
                problems.append(f"{layout} start {start}: {exc!r}")
            elif want is not None and out.tobytes() != want.tobytes():
                problems.append(f"{layout} start {start}: got {out}, want {want}")
        req.Free()
    mpi.assert_all(not problems, "; ".join(problems[:2]))


@pytest.mark.mpi(min_size=1)
def test_persistent_in_place_reads_the_buffer_at_each_start(mpi):
    for layout in _layouts(mpi):
        comm = mpi.comm(layout, family="magpie" if layout != "single" else "mpich")
        buf = np.zeros(N)
        req = comm.Allreduce_init(MPI.IN_PLACE, buf, op=MPI.SUM)
        for k in range(3):
            buf[...] = k + ME
            req.Start()
            req.Wait()
            mpi.assert_equal(
                buf, np.full(N, float(k * P + P * (P - 1) // 2)), f"{layout} start {k}"
            )
        wacoll.mpi.persistent.Prequest.Startall([req])
        wacoll.mpi.persistent.Prequest.Waitall([req])
        req.Free()


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("where", ["single", "multi"])
@pytest.mark.parametrize("replayed", [False, True])
def test_nonblocking_error_raises_on_every_rank(mpi, where, replayed):
    """A non-blocking call whose ranks disagree raises from ``Wait`` everywhere, and
    the communicator then refuses further collectives instead of mixing messages;
    so does one after the same call was recorded (the ranks that replay it check
    it too)."""
    comm = wacoll.Comm(
        W, mpi.topology(mpi.multi[0] if mpi.multi and where == "multi" else "single")
    )
    for _ in range(2 if replayed else 0):
        comm.Iallreduce(np.ones(4), np.zeros(4), op=MPI.SUM).Wait()
    if replayed:
        mpi.assert_all(comm.last_route == "replayed", comm.last_route)
    n = 4 + (ME == P - 1)
    req = comm.Iallreduce(np.ones(n), np.zeros(n), op=MPI.SUM)
    mpi.same_error(req.Wait, WacollError, match="disagree")
    mpi.same_error(comm.Barrier, WacollError, match="Free it")
    comm.Free()


@pytest.mark.mpi(min_size=1)
def test_derived_communicators_keep_wacoll_and_topology(mpi):
    """Dup, Clone, Split, Split_type, Create and Create_group give wacoll
    communicators whose topology is their members' part of the parent's."""
    layout = mpi.multi[0] if mpi.multi else "single"
    comm = mpi.comm(layout)
    topo = comm.network
    subs = {
        "Dup": comm.Dup(),
        "Clone": comm.Clone(),
        "Split": comm.Split(ME % 2, key=-ME),
        "Split_type": comm.Split_type(MPI.COMM_TYPE_SHARED),
        "Create": comm.Create(comm.Get_group()),
        "Create_group": comm.Create_group(comm.Get_group().Incl([ME])),
    }
    problems = []
    for name, sub in subs.items():
        if not isinstance(sub, wacoll.Comm):
            problems.append(f"{name} gave {type(sub).__name__}")
            continue
        members = sub.allgather(ME)
        want = [topo.cluster_of(m) for m in members]
        got = [sub.network.cluster_of(r) for r in range(sub.Get_size())]
        if [want.index(c) for c in want] != [got.index(c) for c in got]:
            problems.append(f"{name}: clusters {got} for members {members}")
        out = np.zeros(1)
        _, exc = mpi.outcome(lambda: sub.Allreduce(np.ones(1), out, op=MPI.SUM))
        if exc is not None or out[0] != sub.Get_size():
            problems.append(f"{name}: Allreduce gave {out[0]} ({exc!r})")
        sub.Free()
    mpi.assert_all(not problems, "; ".join(problems[:3]))


@pytest.mark.mpi(min_size=1)
def test_is_an_mpi_intracomm(mpi):
    comm = mpi.comm("single")
    ok = isinstance(comm, MPI.Intracomm) and MPI.Comm.Compare(comm, W) == MPI.CONGRUENT
    win = MPI.Win.Create(np.zeros(4), comm=comm)
    win.Free()
    # point-to-point on the communicator itself never meets wacoll's messages
    req = comm.Irecv(bytearray(1), source=(ME - 1) % P, tag=3)
    comm.Send(b"x", dest=(ME + 1) % P, tag=3)
    out = np.zeros(1)
    comm.Allreduce(np.ones(1), out, op=MPI.SUM)
    req.Wait()
    mpi.assert_all(ok and out[0] == P, "Intracomm behaviour")


@pytest.mark.mpi(min_size=1)
def test_comm_self_with_clusters_in_the_environment(mpi, monkeypatch):
    """With WACOLL_CLUSTERS set for the world, COMM_SELF and a split still work:
    each process knows its own cluster and a communicator's topology comes from
    its members."""
    labels = ",".join(str(r % 2) for r in range(P))
    monkeypatch.setenv("WACOLL_CLUSTERS", labels)
    monkeypatch.delenv("WACOLL_TOPOLOGY", raising=False)
    self_comm = mpi.run(lambda: wacoll.Comm(MPI.COMM_SELF), "Comm(COMM_SELF)")
    out = np.zeros(2)
    self_comm.Allreduce(np.ones(2), out, op=MPI.SUM)
    split = W.Split(ME % 2, key=ME)
    part = mpi.run(lambda: wacoll.Comm(split), "Comm(split)")
    mpi.assert_all(
        self_comm.network.size == 1 and part.network.nclusters == 1 and (out == 1).all(),
        "topologies of COMM_SELF and a split",
    )
    self_comm.Free()
    part.Free()
    split.Free()


@pytest.mark.mpi(min_size=1)
def test_family_and_level_from_the_environment(mpi, monkeypatch):
    monkeypatch.setenv("WACOLL_FAMILY", "tree")
    monkeypatch.setenv("WACOLL_LEVEL", "strict")
    comm = wacoll.Comm(W, mpi.topology("single"))
    out = np.zeros(3)
    comm.Allreduce(np.ones(3), out, op=MPI.SUM)
    mpi.assert_all(
        comm.family == "tree"
        and comm.level == "strict"
        and comm.last_family == "tree"
        and (out == P).all(),
        f"{comm.family} {comm.level} {comm.last_family}",
    )
    comm.Free()


@pytest.mark.mpi(min_size=1)
def test_default_configuration(mpi):
    """``wacoll.Comm(world)`` with no options: the MPI library's own collectives on
    one cluster, MagPIe's plans on several, reductions at MPI's own level."""
    for layout in ["single"] + list(mpi.multi[:1]):
        comm = mpi.comm(layout, level=None)
        out = np.zeros(4)
        comm.Allreduce(np.arange(4.0) + ME, out, op=MPI.SUM)
        want = np.zeros(4)
        W.Allreduce(np.arange(4.0) + ME, want, op=MPI.SUM)
        expect = "native" if layout == "single" else "magpie"
        mpi.assert_all(
            comm.last_family == expect
            and np.allclose(out, want)
            and (comm.last_plan is None or comm.last_plan.level == "commutative"),
            f"{layout}: ran {comm.last_family}",
        )
