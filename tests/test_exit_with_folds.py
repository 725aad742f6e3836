"""The end of a process where calls with nothing to move are folded into a check
still to come: the checks are flushed at exit, where MPI is still up, and a
communicator the application dropped is left alone on every rank alike.

Each case is one ``mpiexec -n 2`` under a timeout: a hang is a failed test.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.test_mpi_suite import mpiexec, run_group

TIMEOUT = 120

PREAMBLE = """
import gc, os, sys, time
import numpy as np
from mpi4py import MPI
W = MPI.COMM_WORLD
ME = W.Get_rank()
os.environ["WACOLL_CLUSTERS"] = %(clusters)r
import wacoll
"""

CASES = {
    # the application finalizes MPI itself, a fold pending, one rank slower
    "finalized": """
comm = wacoll.Comm(W)
comm.Bcast(np.zeros(0), root=0)
MPI.Finalize()
if ME == 1:
    time.sleep(0.3)
print("done", ME, flush=True)
""",
    # a communicator dropped in a function, its last call folded, collected on one
    # rank only
    "dropped": """
def work():
    comm = wacoll.Comm(W)
    comm.Bcast(np.zeros(0), root=0)
work()
if ME == 0:
    gc.collect()
W.Barrier()
print("done", ME, flush=True)
""",
    # folded calls left at the end: checked at exit, every rank alike
    "pending": """
comm = wacoll.Comm(W)
for _ in range(3):
    comm.Bcast(np.zeros(0), root=0)
print("done", ME, flush=True)
""",
}


@pytest.mark.parametrize("clusters", ["0,0", "0,1"], ids=["one cluster", "two"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_process_with_folded_calls_ends_cleanly(case, clusters):
    program = textwrap.dedent(PREAMBLE % {"clusters": clusters} + CASES[case])
    cmd = [*mpiexec(2), sys.executable, "-c", program]
    try:
        done = run_group(cmd, TIMEOUT)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"a rank waited forever: {exc.output}\n{exc.stderr}"[-4000:])
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert done.stdout.count("done") == 2, out[-4000:]
    assert "wacoll:" not in done.stderr, out[-4000:]
