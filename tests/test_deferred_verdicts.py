"""A call whose ranks disagree, inside a loop of back-to-back calls on two clusters:
every rank raises one named error, no rank waits, and no rank's buffer receives
what another rank's arguments describe.

A blocking call returns once its own work is done, before its check's verdict
(:data:`wacoll.mpi.argcheck.DEFERRED_VERDICTS`): a rank still inside the call
raises there, a rank that had returned raises at a later call. Where every rank
raised at the call, the communicator goes on working; where some rank raised
later, the ranks are no longer at the same call, and the communicator stops on
every rank (every later call raises; it can be freed).

Every blocking call's check runs in the communicator's ring of checks
(:class:`wacoll.mpi._runner.Verdicts`), whatever its route, and a plan's messages
carry a tag made of the call's signature digest, so that a rank whose arguments
differ never receives its peers' data. Each case is a loop in which one rank's
arguments differ at one position (first, middle, last; replayed calls before it);
every rank records where it raised, what, and whether its buffer kept what it
held; then a ``Barrier`` and a correct ``Allreduce`` show whether the communicator
goes on working. In ``bcast_late`` the disagreeing rank comes 0.3 s late, so the
others return before the verdict.

All cases run in one ``mpiexec -n 4`` (two clusters of two) under a timeout: a hang
is a failed test. Each runs with both transports of the verdicts: the four ranks
share one node, so they travel in its memory
(:class:`~wacoll.mpi._runner.NodeStream`), and with ``WACOLL_NODE_CHECK=off`` as
messages (:class:`~wacoll.mpi._runner.VerdictStream`), as across nodes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from tests.test_mpi_suite import mpiexec, run_group
from wacoll.mpi._runner import STREAM_BATCH, STREAM_LEAD, STREAM_LOG
from wacoll.mpi.argcheck import DEFERRED_VERDICTS

SIZE = 4
TIMEOUT = 240
#: The verdicts' transports, by their ``WACOLL_NODE_CHECK``.
TRANSPORTS = {"node": "auto", "messages": "off"}
CLUSTERS = 'os.environ["WACOLL_CLUSTERS"] = "0,0,1,1"'


def _over(program, transport):
    """``program`` with its verdicts on ``transport`` (a key of
    :data:`TRANSPORTS`)."""
    assert CLUSTERS in program
    setting = f'os.environ["WACOLL_NODE_CHECK"] = "{TRANSPORTS[transport]}"'
    return program.replace(CLUSTERS, f"{CLUSTERS}\n{setting}")


CALLS = STREAM_LOG + 12  # (past the verdict stream's batch, lead and log)

PROGRAM = """
import json, os, sys
import numpy as np
from mpi4py import MPI
W = MPI.COMM_WORLD
ME = W.Get_rank()
os.environ["WACOLL_CLUSTERS"] = "0,0,1,1"
import wacoll
CALLS = %(calls)d

def bcast(comm, i, bad):
    n = 3 if bad else 6
    buf = np.full(n, -7.0)
    if ME == 0:
        buf[:] = i
    return buf, lambda: comm.Bcast(buf, root=0), lambda: (buf == i).all()

def bcast_late(comm, i, bad):
    # the disagreeing rank comes late: the others' calls return before the
    # verdict, and they learn of it at a later call
    if bad:
        import time
        time.sleep(0.3)
    return bcast(comm, i, bad)

def bcast_root(comm, i, bad):
    buf = np.full(6, -7.0)
    root = 1 if bad else 0
    if ME == root:
        buf[:] = i
    return buf, lambda: comm.Bcast(buf, root=root), lambda: (buf == i).all()

def reduce_op(comm, i, bad):
    src, out = np.full(5, float(ME + i)), np.full(5, -7.0)
    op = MPI.MAX if bad else MPI.SUM
    want = sum(r + i for r in range(4))
    return out, lambda: comm.Reduce(src, out, op=op, root=0), \\
        lambda: ME != 0 or (out == want).all()

def allreduce_type(comm, i, bad):
    dtype = np.int64 if bad else np.float64
    src, out = np.full(4, ME + i, dtype), np.full(4, -7, dtype)
    want = sum(r + i for r in range(4))
    return out, lambda: comm.Allreduce(src, out, op=MPI.SUM), lambda: (out == want).all()

def gather_count(comm, i, bad):
    n = 2 if bad else 3
    src, out = np.full(n, float(ME)), np.full(4 * 3, -7.0)
    def check():
        return ME != 0 or (out.reshape(4, 3) == np.arange(4)[:, None]).all()
    return out, lambda: comm.Gather(src, out if ME == 0 else None, root=0), check

def ibcast(comm, i, bad):
    n = 3 if bad else 6
    buf = np.full(n, -7.0)
    if ME == 0:
        buf[:] = i
    return buf, lambda: comm.Ibcast(buf, root=0).Wait(), lambda: (buf == i).all()

CASES = {"bcast": bcast, "bcast_late": bcast_late, "bcast_root": bcast_root, "reduce_op": reduce_op,
         "allreduce_type": allreduce_type, "gather_count": gather_count,
         "ibcast": ibcast}

def run(name, bad_rank, position):
    comm = wacoll.Comm(W)
    make = CASES[name]
    raised_at, message, kept, wrong = None, None, True, []
    for i in range(CALLS + 2):
        bad = ME == bad_rank and i == position
        buf, call, right = make(comm, i, bad)
        before = buf.copy()
        try:
            call()
        except wacoll.WacollError as exc:
            raised_at, message = i, f"{type(exc).__name__}: {exc}"
            # a rank never receives into its buffer what another rank's
            # arguments describe
            kept = bool((buf == before).all()) if bad else kept
            break
        if i < position and not right():
            wrong.append(i)
    try:
        comm.Barrier()
        out = np.zeros(1)
        comm.Allreduce(np.ones(1), out, op=MPI.SUM)
        after = float(out[0])
    except wacoll.WacollError as exc:
        after = None
        if message is None:
            raised_at, message = "Barrier", f"{type(exc).__name__}: {exc}"
    comm.Free()
    return {"raised_at": raised_at, "message": message, "kept": kept,
            "wrong": wrong, "after": after}

results = {}
for name, bad_rank, position in json.loads(sys.argv[1]):
    results[f"{name}-{bad_rank}-{position}"] = run(name, bad_rank, position)
everyone = W.gather(results, root=0)
if ME == 0:
    print("RESULTS " + json.dumps(everyone), flush=True)
"""

#: (case, the rank whose arguments differ, the position in the loop)
CASES = [
    ("bcast", 3, 0),
    ("bcast", 3, 4),
    ("bcast", 1, CALLS - 1),
    ("bcast", 0, 2),
    ("bcast_root", 2, 3),
    ("reduce_op", 1, 5),
    ("allreduce_type", 3, 2),
    ("gather_count", 0, 6),
    ("gather_count", 2, 1),
    ("ibcast", 3, 3),
    ("bcast_late", 3, 2),
    ("bcast", 2, 17),
    ("allreduce_type", 1, 70),
    ("gather_count", 3, 129),
    ("reduce_op", 2, STREAM_LOG + 3),
]


@pytest.fixture(scope="module", params=sorted(TRANSPORTS))
def outcomes(request):
    cmd = [
        *mpiexec(SIZE),
        sys.executable,
        "-c",
        _over(textwrap.dedent(PROGRAM % {"calls": CALLS}), request.param),
        json.dumps(CASES),
    ]
    try:
        done = run_group(cmd, TIMEOUT)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"a rank waited forever: {exc.output}\n{exc.stderr}"[-6000:])
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULTS "))
    return json.loads(line[len("RESULTS ") :])


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_a_disagreeing_call_raises_the_same_error_on_every_rank(outcomes, case):
    name, bad_rank, position = case
    ranks = [everyone[f"{name}-{bad_rank}-{position}"] for everyone in outcomes]
    messages = {r["message"] for r in ranks}
    assert len(messages) == 1 and None not in messages, ranks
    (message,) = messages
    # arguments each valid but different, or one rank's own invalid ones (named,
    # as that rank raised them)
    assert message.startswith("WacollError: the ranks disagree on the call") or (
        f": rank {bad_rank}: " in message
    ), message
    blocking = not name.startswith("i")
    if blocking:  # the rank whose arguments differ keeps its buffer as it was
        assert ranks[bad_rank]["kept"], ranks
    places = [r["raised_at"] for r in ranks]
    for r in ranks:
        assert r["wrong"] == [], ranks  # the calls before it were right
    if not (blocking and DEFERRED_VERDICTS):
        assert places == [position] * SIZE, ranks  # every rank raises at that call
    else:  # inside the call, or (returned before the verdict) at a later one: no
        # more than the verdict stream's log later (a rank that only sends returns
        # before its verdict, and a receiver may match a later call's messages of
        # its own signature from such a rank)
        last = min(CALLS + 1, position + STREAM_LOG)
        assert all(p == "Barrier" or position <= p <= last for p in places), ranks
    late = places != [position] * SIZE
    if name == "bcast_late" and DEFERRED_VERDICTS:
        assert late, ranks  # the others had returned: they raise later
    # a blocking call's communicator works on unless a rank raised later; a failed
    # non-blocking call stops its communicator (its messages may be in flight)
    works_on = blocking and not late
    assert [r["after"] for r in ranks] == [4.0 if works_on else None] * SIZE, ranks


RETURNED = """
import json, os, sys
import numpy as np
import mpi4py
mpi4py.rc.thread_level = sys.argv[2]
from mpi4py import MPI
W = MPI.COMM_WORLD
ME = W.Get_rank()
os.environ["WACOLL_CLUSTERS"] = "0,0,1,1"
import wacoll
comm = wacoll.Comm(W)
calls = int(sys.argv[1])
for i in range(calls):  # replayed: their entries wait in batches
    buf = np.full(6, float(i)) if ME == 0 else np.zeros(6)
    comm.Bcast(buf, root=0)
buf = np.zeros(3 if ME == 3 else 6)
outcome = {}
try:
    comm.Bcast(buf, root=0)
    outcome["call"] = "returned"
except wacoll.WacollError as exc:
    outcome["call"] = f"{type(exc).__name__}: {exc}"
W.Barrier()  # the application's own: a rank that returned waits here
try:
    comm.Barrier()
    outcome["next"] = "returned"
except wacoll.WacollError as exc:
    outcome["next"] = type(exc).__name__
comm.Free()
everyone = W.gather(outcome, root=0)
if ME == 0:
    print("RESULTS " + json.dumps(everyone), flush=True)
"""


@pytest.mark.slow
@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
@pytest.mark.parametrize("threads", ["multiple", "funneled"])
@pytest.mark.parametrize("calls", [5, STREAM_BATCH + 3, STREAM_LOG + 3])
def test_a_rank_that_returned_leaves_no_peer_waiting(calls, threads, transport):
    """Ranks 0-2 return from a broadcast whose root's part is done and wait in the
    application's own ``Barrier``; rank 3, whose count differs, waits for data that
    never comes. The returned ranks' entries of the verdict stream still reach it
    (sent by :mod:`wacoll.mpi.keeper`'s thread, or without ``MPI_THREAD_MULTIPLE``
    with each call): it raises in its call, the root at its next call (or, past
    the log's length, in its call, where a full log held it)."""
    cmd = [
        *mpiexec(SIZE),
        sys.executable,
        "-c",
        _over(textwrap.dedent(RETURNED), transport),
        str(calls),
        threads,
    ]
    try:
        done = run_group(cmd, 60)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"a rank waited forever: {exc.output}\n{exc.stderr}"[-6000:])
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULTS "))
    ranks = json.loads(line[len("RESULTS ") :])
    error = ranks[3]["call"]
    assert error.startswith("WacollError: the ranks disagree"), ranks
    # a receiver returns once its data is in, or (the library's call writes its
    # buffer) raises with its verdict; the root only sends, and returns unless its
    # log was full (past STREAM_LOG calls it may wait in the call for older verdicts,
    # and learn of this one there)
    assert all(r["call"] in ("returned", error) for r in ranks), ranks
    if calls < STREAM_LOG:
        assert ranks[0]["call"] == "returned", ranks
    if any(r["call"] == "returned" for r in ranks):
        # some rank raised later, so the communicator stops everywhere
        assert {r["next"] for r in ranks} == {"WacollError"}, ranks
    else:  # every rank raised at the call: the communicator works on
        assert {r["next"] for r in ranks} == {"returned"}, ranks


FINALIZED = """
import os
import mpi4py
mpi4py.rc.finalize = False
from mpi4py import MPI
import numpy as np
os.environ["WACOLL_CLUSTERS"] = "0,0,1,1"
import wacoll
ME = MPI.COMM_WORLD.Get_rank()
comm = wacoll.Comm(MPI.COMM_WORLD)
for i in range(5):
    buf = np.full(6, float(i)) if ME == 0 else np.zeros(6)
    comm.Bcast(buf, root=0)
buf = np.zeros(3 if ME == 3 else 6)
try:
    comm.Bcast(buf, root=0)
    print("RETURNED", flush=True)
except wacoll.WacollError as exc:
    print("RAISED", exc, flush=True)
MPI.Finalize()  # the application's own, right away
print("FINALIZED", flush=True)
"""


@pytest.mark.slow
@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
def test_an_application_that_finalizes_mpi_itself_leaves_no_peer_waiting(transport):
    """The root returns from a call whose ranks disagree and calls ``MPI.Finalize()``
    at once: ``MPI_Finalize`` settles every communicator's verdicts first, so the
    rank whose count differs raises in its call, and every rank that had returned
    reports the failure on standard error (no call is left to raise it in)."""
    cmd = [
        *mpiexec(SIZE),
        sys.executable,
        "-c",
        _over(textwrap.dedent(FINALIZED), transport),
    ]
    try:
        done = run_group(cmd, 60)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"a rank waited forever: {exc.output}\n{exc.stderr}"[-6000:])
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
    out = done.stdout  # (the ranks' lines may interleave)
    assert out.count("FINALIZED") == SIZE, out
    raised, returned = out.count("RAISED"), out.count("RETURNED")
    assert raised and returned and raised + returned == SIZE, out
    reported = done.stderr.count("failed after this rank had returned from it")
    assert reported == returned, done.stderr[-3000:]


PACED = """
import json, os, sys, time
import numpy as np
from mpi4py import MPI
W = MPI.COMM_WORLD
ME = W.Get_rank()
os.environ["WACOLL_CLUSTERS"] = "0,0,1,1"
import wacoll
comm = wacoll.Comm(W)
calls = int(sys.argv[1])
src, out = np.full(3, float(ME)), np.zeros(12)
results = []
for i in range(calls):
    if ME == 0:
        time.sleep(0.002)  # a slow root: the others could run far ahead
    src[:] = ME + i
    comm.Gather(src, out, root=0)
    if ME == 0:
        results.append(bool((out.reshape(4, 3) == np.arange(4)[:, None] + i).all()))
stream = comm._route.argcheck.verdicts
outcome = {"stalls": stream.stalls, "right": all(results), "family": comm.last_family}
comm.Free()
everyone = W.gather(outcome, root=0)
if ME == 0:
    print("RESULTS " + json.dumps(everyone), flush=True)
"""


@pytest.mark.slow
@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
def test_a_rank_that_only_sends_to_a_root_is_paced_by_it(transport):
    """A gather's senders return once their sends are out; where the root is slow
    they wait once they are :data:`~wacoll.mpi._runner.STREAM_LEAD` calls past
    its entries (the stream's log alone would let them run further ahead), and
    every call's result is right."""
    calls = STREAM_LEAD + 2 * STREAM_BATCH + 8  # (fewer than the log: STREAM_LOG)
    cmd = [
        *mpiexec(SIZE),
        sys.executable,
        "-c",
        _over(textwrap.dedent(PACED), transport),
        str(calls),
    ]
    done = run_group(cmd, 120)
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULTS "))
    ranks = json.loads(line[len("RESULTS ") :])
    assert ranks[0]["right"], ranks
    assert ranks[0]["family"] != "native", ranks  # (a plan ran, in the stream)
    # the senders waited for the root's entries; the root itself never did
    assert all(r["stalls"] > 0 for r in ranks[1:]), ranks
    assert ranks[0]["stalls"] == 0, ranks
