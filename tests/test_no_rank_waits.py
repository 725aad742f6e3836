"""No rank left waiting: hostile files, failures where one rank decides for all, and
a communicator freed under a pending request, at 4 ranks in two clusters.

Each case is a small program run in its own ``mpiexec -n 4`` with a timeout (a hang
is one failed test, not a stalled suite), as the hang probes of
``tests/test_mpi_suite.py`` are. Every rank reports its outcome: the same named
wacoll error on every rank, or (``Free`` with a pending request) the right result
on every rank.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from tests.test_mpi_suite import mpiexec, run_group

SIZE = 4
TIMEOUT = 60

HEADER = """
import json, os, sys, tempfile, time
import numpy as np
from mpi4py import MPI
W = MPI.COMM_WORLD
ME, P = W.Get_rank(), W.Get_size()
os.environ["WACOLL_CLUSTERS"] = "0,0,1,1"
SCRATCH = W.bcast(tempfile.mkdtemp() if ME == 0 else None)
import wacoll

def report(fn):
    began = time.perf_counter()
    try:
        detail = fn()
        outcome = "no error" if detail is None else f"no error: {detail}"
    except wacoll.WacollError as exc:
        outcome = f"raised {type(exc).__name__}: {exc}"
    except BaseException as exc:
        outcome = f"unnamed {type(exc).__name__}: {exc}"
    took = time.perf_counter() - began
    outcomes = W.gather((outcome, took), root=0)
    if ME == 0:
        print("OUTCOMES " + json.dumps(outcomes), flush=True)
"""

#: name: (program, the outcome's start on every rank, a phrase every message holds)
CASES = {
    "tuning-file-not-utf8": (
        """
        path = os.path.join(SCRATCH, "t.json")
        if ME == 0:
            open(path, "wb").write(b"\\xff\\xfe{}")
        W.Barrier()
        os.environ["WACOLL_TUNING"] = path
        report(lambda: wacoll.Comm(W))
    """,
        "raised TuningError",
        "is not UTF-8 text",
    ),
    "tuning-file-a-device": (
        """
        path = os.path.join(SCRATCH, "t.json")
        if ME == 0:
            os.symlink("/dev/urandom", path)
        W.Barrier()
        os.environ["WACOLL_TUNING"] = path
        report(lambda: wacoll.Comm(W))
    """,
        "raised TuningError",
        "not a regular file (a character device)",
    ),
    "tuning-file-a-fifo": (
        """
        path = os.path.join(SCRATCH, "t.json")
        if ME == 0:
            os.mkfifo(path)
        W.Barrier()
        os.environ["WACOLL_TUNING"] = path
        report(lambda: wacoll.Comm(W))
    """,
        "raised TuningError",
        "not a regular file (a FIFO)",
    ),
    "tuning-file-too-large": (
        """
        path = os.path.join(SCRATCH, "t.json")
        if ME == 0:
            with open(path, "w") as fh:
                fh.write("[" + ", ".join(["0"] * 700_000) + "]")
        W.Barrier()
        os.environ["WACOLL_TUNING"] = path
        report(lambda: wacoll.Comm(W))
    """,
        "raised TuningError",
        "larger than the limit of 1048576 bytes",
    ),
    "write-tuning-to-a-missing-folder": (
        """
        comm = wacoll.Comm(W, learn="on")
        x = np.ones(4); y = np.zeros(4)
        for _ in range(3):
            comm.Allreduce(x, y)
        path = os.path.join(SCRATCH, "no-such-folder", "tuning.json")
        report(lambda: comm.write_tuning(path))
        assert not os.path.exists(os.path.dirname(path))
        left = os.listdir(SCRATCH)
        assert left == [], left  # nothing partial beside it either
    """,
        "raised TuningError",
        "no-such-folder/tuning.json cannot be written",
    ),
    "free-under-a-pending-request": (
        """
        comm = wacoll.Comm(W)
        x = np.full(100_000, ME + 1.0); y = np.zeros_like(x)
        def free_then_wait():
            r = comm.Iallreduce(x, y)
            comm.Free()
            r.Wait()
            assert np.all(y == P * (P + 1) / 2), y[:4]
        report(free_then_wait)
    """,
        "no error",
        "",
    ),
    "free-under-a-pending-library-request": (
        """
        os.environ["WACOLL_CLUSTERS"] = "0,0,0,0"  # one cluster: the library's route
        comm = wacoll.Comm(W)
        x = np.full(100_000, ME + 1.0); y = np.zeros_like(x)
        def free_then_wait():
            r = comm.Ibcast(x, root=1)
            comm.Free()
            r.Wait()
            assert np.all(x == 2.0), x[:4]
        report(free_then_wait)
    """,
        "no error",
        "",
    ),
}

#: Readers where rank 0 decides and the others wait for its word: an arbitrary
#: exception (not a wacoll error) injected into each must reach every rank as the
#: named error.
INJECTED = {
    "tuning-reader": (
        """
        import wacoll.mpi.comm as where
        os.environ["WACOLL_TUNING"] = "/whatever.json"
        where.read_tuning = boom
        report(lambda: wacoll.Comm(W))
    """,
        "raised TuningError",
    ),
    "topology-file-reader": (
        """
        os.environ["WACOLL_TOPOLOGY"] = "/whatever.toml"
        wacoll.Topology.from_file = boom
        report(lambda: wacoll.Comm(W))
    """,
        "raised TopologyError",
    ),
    "links-record-reader": (
        """
        import wacoll.mpi.links as where
        where._read_record = boom
        report(lambda: wacoll.Comm(W, measure="on"))
    """,
        "raised ConfigurationError",
    ),
    "links-fit": (
        """
        import wacoll.mpi.links as where
        where.measured_topology = boom
        report(lambda: wacoll.Comm(W, measure="fresh"))
    """,
        "raised TopologyError",
    ),
}

BOOM = """
def boom(*args, **kwargs):
    if ME == 0:
        raise ZeroDivisionError("injected")
    return None
"""


def _run(code):
    cmd = [*mpiexec(SIZE), sys.executable, "-c", code]
    try:
        proc = run_group(cmd, TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(
            f"hung: mpiexec -n {SIZE} did not finish in {TIMEOUT} s", pytrace=False
        )
    found = [line for line in proc.stdout.splitlines() if line.startswith("OUTCOMES ")]
    assert proc.returncode == 0 and found, proc.stdout + proc.stderr[-3000:]
    return [outcome for outcome, _took in json.loads(found[0][len("OUTCOMES ") :])]


def _same_everywhere(outcomes, start, phrase):
    shown = "\n".join(f"rank {r}: {o}" for r, o in enumerate(outcomes))
    assert len(outcomes) == SIZE and len(set(outcomes)) == 1, shown
    assert outcomes[0].startswith(start) and phrase in outcomes[0], shown


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_every_rank_ends_alike(name):
    program, start, phrase = CASES[name]
    _same_everywhere(_run(HEADER + textwrap.dedent(program)), start, phrase)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(INJECTED))
def test_a_failure_on_the_deciding_rank_reaches_every_rank(name):
    program, start = INJECTED[name]
    outcomes = _run(HEADER + BOOM + textwrap.dedent(program))
    _same_everywhere(outcomes, start, "ZeroDivisionError: injected")
