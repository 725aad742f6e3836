"""Repeated blocking calls on one cluster: replayed, checked, and the same as MPI's.

A blocking call the MPI library runs is recorded when the same argument objects come
twice in a row, and replayed when they come back unchanged (:mod:`wacoll.mpi.fastpath`). These tests
check that a replay gives the library's result, that it still checks every call
across ranks (one rank changing its root, operator, arrays or their shape raises the
same error everywhere, and no buffer is written), and that a changed array is read
again rather than replayed.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest
from mpi4py import MPI

import wacoll
from wacoll.mpi import fastpath

P = MPI.COMM_WORLD.Get_size()
ME = MPI.COMM_WORLD.Get_rank()
W = MPI.COMM_WORLD
LAST = P - 1


def _single():
    return wacoll.Comm(W, wacoll.Topology.single(P))


def _recorded(comm):
    return len(comm.route.recorded)


@pytest.mark.mpi(min_size=1)
def test_replayed_calls_give_the_libraries_results(mpi):
    comm = _single()
    send = np.arange(5, dtype=np.float64) + ME
    recv, want = np.zeros(5), np.zeros(5)
    buf = np.zeros(3) + (7 if ME == 0 else 0)
    gathered = np.zeros(3 * P)
    part = send[:3]  # one view, passed every time (a new view would be a new object)
    for i in range(4):
        send += 1
        comm.Allreduce(send, recv, op=MPI.SUM)
        W.Allreduce(send, want, op=MPI.SUM)
        mpi.assert_equal(recv, want, f"Allreduce, call {i}")
        comm.Bcast(buf, root=0)
        mpi.assert_equal(buf, np.full(3, 7.0), f"Bcast, call {i}")
        comm.Allgather(part, gathered)
        mpi.assert_equal(
            gathered,
            np.concatenate([np.arange(3.0) + r + i + 1 for r in range(P)]),
            f"Allgather, call {i}",
        )
        comm.Barrier()
        assert comm.last_family == "native"
    # Allreduce, Bcast, Allgather and Barrier each recorded once, then replayed
    mpi.assert_all(_recorded(comm) == 4, f"{_recorded(comm)} calls recorded")
    comm.Free()


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("change", ["root", "operator", "shape", "array", "dtype"])
def test_a_replay_still_checks_every_call(mpi, change):
    """The calls before were identical everywhere; now one rank's differs."""
    comm = _single()
    send, recv = np.ones(4), np.zeros(4)
    for _ in range(3):
        comm.Reduce(send, recv, op=MPI.SUM, root=0)
    mpi.assert_all(_recorded(comm) == 1)
    op, root = MPI.SUM, 0
    if ME == LAST:
        if change == "root":
            root = 1
        elif change == "operator":
            op = MPI.MAX
        elif change == "shape":
            send, recv = np.ones(5), np.zeros(5)
        elif change == "array":
            send = np.ones(4)  # another array, the same description: still fine
        elif change == "dtype":
            send, recv = np.ones(4, np.float32), np.zeros(4, np.float32)
    recv[:] = -7
    if change == "array":
        comm.Reduce(send, recv, op=op, root=root)
        mpi.assert_all(ME != 0 or (recv == P).all(), f"result {recv}")
    else:
        mpi.same_error(
            lambda: comm.Reduce(send, recv, op=op, root=root),
            match="disagree",
            untouched=lambda: (recv == -7).all(),
        )
    # the communicator goes on working, replays included
    send, recv = np.ones(4), np.zeros(4)
    for _ in range(2):
        comm.Allreduce(send, recv, op=MPI.SUM)
        mpi.assert_equal(recv, np.full(4, float(P)))
    comm.Free()


@pytest.mark.mpi(min_size=1)
def test_an_array_changed_in_place_is_read_again(mpi):
    comm = _single()
    buf = np.zeros(6)
    comm.Bcast(buf, root=0)
    buf.shape = (2, 3)  # the same object, another description
    if ME == 0:
        buf[:] = 5
    comm.Bcast(buf, root=0)
    mpi.assert_equal(buf, np.full((2, 3), 5.0))
    if P > 1:  # a read-only buffer is fine at the root, which only sends
        ro = np.zeros(3)
        comm.Bcast(ro, root=0)
        ro.flags.writeable = False  # mpi4py would refuse it: wacoll must say so
        mpi.same_error(lambda: comm.Bcast(ro, root=0), match="read-only")
    comm.Free()


@pytest.mark.mpi(min_size=1)
def test_check_off_replays_the_call_alone(mpi):
    comm = wacoll.Comm(W, wacoll.Topology.single(P), check="off")
    send, recv = np.ones(2), np.zeros(2)
    for _ in range(3):
        comm.Allreduce(send, recv, op=MPI.SUM)
    mpi.assert_equal(recv, np.full(2, float(P)))
    mpi.assert_all(comm.validate is False and _recorded(comm) == 1)
    comm.Free()


def test_what_can_be_recorded():
    a = np.zeros(2)
    key = fastpath.Recordings().key
    assert key(print, None, None, (a, None, 0, "sum", MPI.SUM, MPI.IN_PLACE)) is not None
    assert key(print, None, None, ([a, MPI.DOUBLE],)) is not None
    assert key(print, None, None, ([a, 2, MPI.DOUBLE],)) is not None
    assert key(print, None, None, ([a, (2, 0), MPI.DOUBLE],)) is None
    assert key(print, None, None, ([a, "d"],)) is None
    assert key(print, None, None, (bytearray(3),)) is None


class _AnyCount:
    """A recorded call that takes every count of its class, and runs nothing."""

    def __init__(self):
        self.counts = []

    def recount(self, count):
        self.counts.append(count)
        return True

    def run(self, args):
        return True


def test_a_loop_over_many_counts_of_one_class_leaves_anothers_keys_remembered():
    """The exact keys that replay a size class's call are bounded per class: a
    loop over thousands of counts of other classes does not make a loop over a few
    counts of its own compute two keys a call again."""
    calls = fastpath.Recordings()
    buffer = np.zeros(1 << 14)
    ckey, _ = calls.class_key(print, None, None, (buffer[:1024],))
    recorded = {}
    for size_class in range(1, 18):
        recorded[size_class] = _AnyCount()
        calls.record_class(ckey, (8,), 8, size_class, recorded[size_class])
    few = range(1024, 1024 + 64)  # one class: 8 KiB - 16 KiB
    many = range(2048, 2048 + 6000)  # 16 KiB - 64 KiB: two classes
    for n in few:
        assert calls.replay(print, None, None, (buffer[:n],)) is True
    assert calls.nremembered == 64 and recorded[14].counts == list(few)
    for n in many:
        assert calls.replay(print, None, None, (buffer[:n],)) is True
    assert recorded[15].counts + recorded[16].counts == list(many)
    held = calls.nremembered
    assert held <= 64 + 2 * 1024  # each class's keys bounded
    for n in few:  # remembered: no key made again
        calls.replay(print, None, None, (buffer[:n],))
    assert calls.nremembered == held


@pytest.mark.mpi(min_size=1)
def test_new_arrays_of_the_same_shape_are_replayed(mpi):
    """A loop that brings new arrays every call (``np.full(...)`` as the send buffer)
    replays from its second call, over each call's own arrays."""
    comm = _single()
    for i in range(5):
        send, recv, want = np.full(3, float(ME + i)), np.zeros(3), np.zeros(3)
        comm.Allreduce(send, recv, op="sum")  # an operator by name, too
        W.Allreduce(send, want, op=MPI.SUM)
        mpi.assert_equal(recv, want, f"call {i}")
        buf = np.full(2, 9.0 if ME == 0 else 0.0)
        comm.Bcast(buf, root=0)
        mpi.assert_equal(buf, np.full(2, 9.0), f"Bcast, call {i}")
    mpi.assert_all(_recorded(comm) == 2, f"{_recorded(comm)} calls recorded")
    # the same shapes as another dtype, or with the send buffer as the receive
    # buffer, are other calls: read afresh (and recorded once seen twice)
    comm.Allreduce(np.ones(3, np.int64), np.zeros(3, np.int64), op="sum")
    mpi.assert_all(_recorded(comm) == 2)
    comm.Free()


@pytest.mark.mpi(min_size=1)
def test_a_recorded_user_operator_stays_alive(mpi):
    comm = _single()
    op = MPI.Op.Create(
        lambda a, b, t: np.add(np.frombuffer(a), np.frombuffer(b), out=np.frombuffer(b)),
        commute=True,
    )
    send, recv = np.ones(2), np.zeros(2)
    for _ in range(3):
        comm.Allreduce(send, recv, op=op)
        mpi.assert_equal(recv, np.full(2, float(P)))
    mpi.assert_all(_recorded(comm) == 1)
    old = id(op)
    del op  # the recorded call keeps it alive: its identity is part of the key
    gc.collect()
    fresh = MPI.Op.Create(lambda a, b, t: None, commute=True)
    mpi.assert_all(id(fresh) != old, "a new operator took a recorded one's identity")
    fresh.Free()
    comm.Free()


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("alias", ["same object", "another view"])
def test_a_send_buffer_that_is_the_receive_buffer_raises_everywhere(mpi, alias):
    """MPI forbids it and the library refuses it on that rank alone (the others
    would wait for it): wacoll raises on every rank, a replayed shape included."""
    comm = _single()
    send, recv = np.ones(4), np.zeros(4)
    for _ in range(3):
        comm.Allreduce(send, recv, op=MPI.SUM)  # recorded, then replayed
    if ME == LAST:
        send = recv if alias == "same object" else recv[:]
    mpi.same_error(lambda: comm.Allreduce(send, recv, op=MPI.SUM), match="same memory")
    comm.Free()


@pytest.mark.mpi(min_size=1)
def test_buffer_specifications_are_replayed(mpi):
    """``[array, MPI.DOUBLE]`` and ``[array, count, MPI.DOUBLE]``, as mpi4py's
    tutorial writes them, replay; a changed count is another call."""
    comm = _single()
    for i in range(3):
        buf = np.full(4, 3.0 if ME == 0 else 0.0)
        comm.Bcast([buf, MPI.DOUBLE], root=0)
        mpi.assert_equal(buf, np.full(4, 3.0), f"call {i}")
        send, recv = np.full(4, 1.0), np.zeros(4)
        comm.Allreduce([send, 2, MPI.DOUBLE], [recv, 2, MPI.DOUBLE], op=MPI.SUM)
        mpi.assert_equal(recv, np.array([P, P, 0, 0], float), f"call {i}")
    mpi.assert_all(_recorded(comm) == 2, f"{_recorded(comm)} calls recorded")
    recv[:] = 0
    comm.Allreduce([send, 3, MPI.DOUBLE], [recv, 3, MPI.DOUBLE], op=MPI.SUM)
    mpi.assert_equal(recv, np.array([P, P, P, 0], float))
    comm.Free()


@pytest.mark.mpi(min_size=2)
def test_calls_that_give_options_are_replayed_and_still_checked(mpi):
    """A call that names a family and options is recorded under them: repeated, it
    is replayed; one rank's options changed, every rank raises the same error."""
    layout = mpi.multi[0] if mpi.multi else "single"
    comm = wacoll.Comm(W, mpi.topology(layout))
    buf = np.zeros(6)
    routes = []
    for i in range(3):
        buf[:] = i if ME == 0 else -1
        comm.Bcast(buf, root=0, family="mpich", segments=2)
        mpi.assert_equal(buf, np.full(6, float(i)), f"call {i}")
        routes.append(comm.last_route)
    mpi.assert_all(routes[1:] == ["replayed", "replayed"], f"routes {routes}")
    segments = 3 if ME == LAST else 2
    mpi.same_error(
        lambda: comm.Bcast(buf, root=0, family="mpich", segments=segments),
        match="disagree",
    )
    # equal values, other options: 2.0 is no segment count (a key, a cached plan or
    # a digest that took it for 2 let it through)
    again = wacoll.Comm(W, mpi.topology(layout))
    for _ in range(2):
        again.Bcast(buf, root=0, family="mpich", segments=2)
    segments = 2.0 if ME == LAST else 2
    mpi.same_error(
        lambda: again.Bcast(buf, root=0, family="mpich", segments=segments),
        match="positive integer",
    )
    again.Free()
    comm.Free()


def _direct_calls(comm, dtype, root, n):
    """Each operation the library's collective runs, over fresh arrays of ``n``
    elements: ``(name, run(comm), run(library))``, each run returning what the
    call wrote on this rank."""
    rng = np.random.default_rng(ME + 17 * n)

    def fresh(k):
        return (rng.integers(-50, 50, k) + ME).astype(dtype)

    def bcast(c):
        buf = fresh(n) if ME == root else np.zeros(n, dtype)
        if ME == root:
            buf[:] = np.arange(n) + n
        c.Bcast(buf, root=root)
        return buf

    def reduce(c):
        out = np.zeros(n, dtype) if ME == root else None
        c.Reduce(np.arange(n, dtype=dtype) + ME, out, op=MPI.SUM, root=root)
        return out

    def allreduce(c):
        out = np.zeros(n, dtype)
        c.Allreduce((np.arange(n) % 3 + ME % 2 + 1).astype(dtype), out, op=MPI.PROD)
        return out

    def gather(c):
        out = np.zeros(n * P, dtype) if ME == root else None
        c.Gather(np.full(n, ME + 1, dtype), out, root=root)
        return out

    def scatter(c):
        src = np.arange(n * P, dtype=dtype) if ME == root else None
        out = np.zeros(n, dtype)
        c.Scatter(src, out, root=root)
        return out

    def allgather(c):
        out = np.zeros(n * P, dtype)
        c.Allgather(np.full(n, 2 * ME, dtype), out)
        return out

    def alltoall(c):
        out = np.zeros(n * P, dtype)
        c.Alltoall(np.arange(n * P, dtype=dtype) + 100 * ME, out)
        return out

    return [bcast, reduce, allreduce, gather, scatter, allgather, alltoall]


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.complex128])
def test_a_replay_calls_the_library_itself_with_each_calls_buffers(mpi, dtype):
    """A replayed one-cluster call passes its own arrays' addresses and counts to
    the library's collective (``NativeCall.kind``), for new arrays every call and
    for every count of a recorded size class, with the library's results."""
    comm = _single()
    root = LAST
    for n in (5, 5, 5, 6, 7, 5):  # (6 and 7: counts of the class 5 is in)
        for make in _direct_calls(comm, dtype, root, n):
            got, want = make(comm), make(W)
            if got is None:
                mpi.assert_all(want is None, make.__name__)
                continue
            mpi.assert_equal(got, want, f"{make.__name__}, {n} elements")
    directs = {
        type(call).__name__: getattr(call, "kind", None)
        for call in [comm.route.replays.last]
    }
    mpi.assert_all(directs == {"NativeCall": 7} or P == 1 and directs, directs)
    comm.Free()


@pytest.mark.mpi(min_size=1)
def test_a_replay_of_arguments_the_library_reads_otherwise_goes_through_mpi4py(mpi):
    """``MPI.IN_PLACE`` or a buffer specification is passed to the library by
    mpi4py, as given: replayed, with the library's results."""
    comm = _single()
    for i in range(4):
        inplace, want = np.full(4, ME + i, np.int64), np.zeros(4, np.int64)
        W.Allreduce(inplace, want, op=MPI.SUM)
        comm.Allreduce(MPI.IN_PLACE, inplace, op=MPI.SUM)
        mpi.assert_equal(inplace, want, "in-place Allreduce")
        if i >= 2:  # recorded, and replayed: through mpi4py
            mpi.assert_all(
                comm.route.replays.last.kind == 0, "in place, replayed directly"
            )
        spec = np.full(3, ME + i, np.float32)
        got = np.zeros(3 * P, np.float32)
        comm.Allgather([spec, MPI.FLOAT], [got, MPI.FLOAT])
        mpi.assert_equal(got, np.repeat(np.arange(P) + i, 3).astype(np.float32))
        if i >= 2:
            mpi.assert_all(comm.route.replays.last.kind == 0, "a spec, replayed directly")
    comm.Free()
