"""Generated bad arguments under mpiexec: one rank's argument wrong, every rank answers.

Hypothesis draws a call (a buffer collective, blocking, non-blocking or persistent),
one of its arguments, a way to spoil
it (wrong type, negative, NaN or infinite, one element more or less, a float count,
an out-of-range or different root, another operator, a read-only or overlapping
receive buffer, another dtype) and the rank that gets the spoiled value; the other
ranks pass the right one. The property: every rank either raises the same named
exception (wacoll's, or ``MPI.Exception`` where mpi4py's users catch one) with the
same message (and, in the ``check="first"`` mode, leaves its receive buffers
untouched; beside the call a failed call may have written them, as MPI allows), or
every rank completes with
the MPI library's own result (a "spoiled" value can still be valid, e.g. a root
that happens to be the same). A watchdog dumps every thread's stack and ends the
process if one example takes longer than :data:`HANG_SECONDS`: a hang fails the
run instead of stalling it.

Every rank must draw the same examples, so the generation is derandomised, the
example database is off and shrinking is skipped (a shrinking step that failed on
one rank only would make the ranks draw different examples).
"""

from __future__ import annotations

import faulthandler

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from mpi4py import MPI

import wacoll

W = MPI.COMM_WORLD
P = W.Get_size()
ME = W.Get_rank()
SENTINEL = -7.0
#: Seconds one example may take before the watchdog ends the process.
HANG_SECONDS = 20
N = 3  # elements per rank block

CALLS = (
    "Bcast",
    "Reduce",
    "Allreduce",
    "Gather",
    "Gatherv",
    "Scatter",
    "Allgather",
    "Alltoall",
    "Alltoallv",
    "Reduce_scatter",
)
#: How the call is made: blocking, non-blocking (``I...`` + ``Wait``) or persistent
#: (``..._init`` + ``Start`` + ``Wait``).
FORMS = ("blocking", "non-blocking", "persistent")
SPOILS = (
    "type",
    "negative",
    "nan",
    "inf",
    "more",
    "less",
    "float",
    "root-out",
    "root-other",
    "op-other",
    "op-bad",
    "read-only",
    "overlap",
    "dtype",
)

EXAMPLES = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=list(HealthCheck),
)


def _counts():
    return [N + (r % 2) for r in range(P)]


def _displs(counts):
    return [int(x) for x in np.concatenate(([0], np.cumsum(counts)[:-1]))]


class _Case:
    """One call's arguments, built fresh for each run (wacoll's and MPI's)."""

    def __init__(self, call, spoil, bad_rank, form="blocking"):
        self.call, self.spoil, self.form = call, spoil, form
        self.bad, self.bad_rank = ME == bad_rank, bad_rank
        self.root = min(1, P - 1)
        self.recvs = []

    # -- argument pieces, spoiled on the bad rank ---------------------------------
    def _spoilt(self, what, good):
        """``good``, or its spoiled form when this rank is the bad one and the spoil
        applies to ``what`` (``"count"``, ``"root"``, ``"op"``, ``"recv"``, ...)."""
        if not self.bad:
            return good
        s = self.spoil
        if what == "root":
            return {
                "root-out": P,
                "root-other": (good + 1) % P,
                "type": "0",
                "float": float(good) + 0.5,
                "negative": -1,
            }.get(s, good)
        if what == "op":
            return {"op-other": MPI.MAX, "op-bad": "nosuchop", "type": object()}.get(
                s, good
            )
        if what == "counts":
            bad = list(good)
            i = len(bad) - 1
            change = {
                "negative": -1,
                "nan": float("nan"),
                "inf": float("inf"),
                "more": bad[i] + 1,
                "less": max(0, bad[i] - 1),
                "float": bad[i] + 0.5,
                "type": "x",
            }
            if s in change:
                bad[i] = change[s]
            return bad
        return good

    def _recv(self, n):
        buf = np.full(n, SENTINEL)
        self.recvs.append(buf)
        self.initial.append(buf.tobytes())
        if self.bad and self.spoil == "read-only":
            buf.flags.writeable = False
        if self.bad and self.spoil == "dtype":
            buf = buf.view(np.int64)
        return buf

    def _send(self, n):
        size = (
            n
            + (1 if self.bad and self.spoil == "more" else 0)
            - (1 if self.bad and self.spoil == "less" and n else 0)
        )
        return np.arange(size, dtype=np.float64) + 10 * ME

    def _vrecv(self, counts):
        displs = _displs(counts)
        if self.bad and self.spoil == "overlap" and P > 1:
            displs[-1] = max(0, displs[-1] - 1)
        return [self._recv(sum(counts)), (self._spoilt("counts", counts), displs)]

    # -- the call -----------------------------------------------------------------
    def _call(self, comm, name, *args):
        """``comm.<name>(*args)`` in this case's form (the MPI library's run: blocking)."""
        if self.form == "blocking" or comm is W:
            return getattr(comm, name)(*args)
        if self.form == "non-blocking":
            return getattr(comm, "I" + name[0].lower() + name[1:])(*args).Wait()
        request = getattr(comm, name + "_init")(*args)
        try:
            request.Start()
            request.Wait()
        finally:
            request.Free()

    def run(self, comm):
        """Call the collective on ``comm``; the receive buffers to compare."""
        self.recvs = []
        self.initial = []  # what each receive buffer held before the call
        c, root, counts = self.call, self._spoilt("root", self.root), _counts()
        op = self._spoilt("op", MPI.SUM)
        if c == "Bcast":
            buf = self._recv(N) if ME != self.root else self._send(N)
            if ME == self.root:
                self.recvs.append(buf)
                self.initial.append(buf.tobytes())
            self._call(comm, "Bcast", buf, root)
        elif c == "Reduce":
            self._call(comm, "Reduce", self._send(N), self._recv(N), op, root)
        elif c == "Allreduce":
            self._call(comm, "Allreduce", self._send(N), self._recv(N), op)
        elif c == "Gather":
            self._call(
                comm,
                "Gather",
                self._send(N),
                self._recv(N * P) if ME == self.root else None,
                root,
            )
        elif c == "Gatherv":
            self._call(
                comm,
                "Gatherv",
                self._send(counts[ME]),
                self._vrecv(counts) if ME == self.root else None,
                root,
            )
        elif c == "Scatter":
            send = np.arange(N * P, dtype=np.float64) if ME == self.root else None
            self._call(
                comm,
                "Scatter",
                send,
                self._recv(N + (self.bad and self.spoil == "more")),
                root,
            )
        elif c == "Allgather":
            self._call(comm, "Allgather", self._send(N), self._recv(N * P))
        elif c == "Alltoall":
            self._call(comm, "Alltoall", self._send(N * P), self._recv(N * P))
        elif c == "Alltoallv":
            self._call(
                comm,
                "Alltoallv",
                [self._send(sum(counts)), (counts, _displs(counts))],
                self._vrecv(counts),
            )
        elif c == "Reduce_scatter":
            self._call(
                comm,
                "Reduce_scatter",
                self._send(sum(counts)),
                self._recv(counts[ME]),
                self._spoilt("counts", counts),
                op,
            )
        return [r.copy() for r in self.recvs]


def _outcome(fn):
    try:
        return fn(), None
    except Exception as exc:  # noqa: BLE001 - compared across ranks below
        return None, exc


def _then_barrier(result, comm):
    comm.Barrier()
    return result


def _check(comm, case):
    """The property, collectively: one error everywhere, or MPI's result everywhere."""
    faulthandler.dump_traceback_later(HANG_SECONDS, exit=True)
    try:
        # a rank that returned before the call's verdict raises the failure at
        # its next call of the communicator: the Barrier here
        got, exc = _outcome(lambda: _then_barrier(case.run(comm), comm))
        spoilt_recvs = list(zip(case.recvs, case.initial))
    finally:
        faulthandler.cancel_dump_traceback_later()
    named = exc is None or isinstance(exc, (wacoll.WacollError, MPI.Exception))
    untouched = (
        exc is None
        or comm.check != "first"
        or all(r.tobytes() == before for r, before in spoilt_recvs)
    )
    everyone = W.allgather(
        (None if exc is None else (type(exc).__name__, str(exc)), named, untouched)
    )
    what = f"{case.form} {case.call} with {case.spoil!r} on rank {case.bad_rank}"
    assert all(e[1] for e in everyone), f"{what}: not a named error: {everyone}"
    assert all(e[2] for e in everyone), f"{what}: a buffer written before raising"
    errors = {e[0] for e in everyone}
    assert len(errors) == 1, f"{what}: ranks answered differently: {everyone}"
    if errors == {None}:  # the spoiled value was valid after all: MPI's result
        want, wexc = _outcome(lambda: case.run(W))
        same = (
            wexc is None
            and len(got) == len(want)
            and all(g.tobytes() == w.tobytes() for g, w in zip(got, want))
        )
        assert all(W.allgather(same)), f"{what}: result differs from the MPI library's"


def _fuzz(make_comm):
    comm = make_comm()

    @EXAMPLES
    @given(
        st.sampled_from(CALLS),
        st.sampled_from(SPOILS),
        st.integers(0, P - 1),
        st.sampled_from(FORMS),
    )
    def prop(call, spoil, bad_rank, form):
        if form == "blocking":
            _check(comm, _Case(call, spoil, bad_rank, form))
            return
        # a failed non-blocking call retires its communicator: a fresh one each time
        fresh = make_comm()
        try:
            _check(fresh, _Case(call, spoil, bad_rank, form))
        finally:
            fresh.Free()

    prop()


@pytest.mark.mpi(min_size=2)
def test_one_bad_argument_on_one_rank_default_comm():
    """The communicator the README tells users to write."""
    _fuzz(lambda: wacoll.Comm(W))


@pytest.mark.mpi(min_size=2)
def test_one_bad_argument_on_one_rank_two_clusters():
    """Two clusters: wacoll's plans run the calls."""
    _fuzz(lambda: wacoll.Comm(W, wacoll.Topology.from_sizes([P // 2, P - P // 2])))


@pytest.mark.mpi(min_size=2)
def test_one_bad_argument_on_one_rank_check_first():
    """The debugging mode: a failed call leaves every receive buffer untouched."""
    _fuzz(
        lambda: wacoll.Comm(
            W, wacoll.Topology.from_sizes([P // 2, P - P // 2]), check="first"
        )
    )
