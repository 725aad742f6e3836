"""The MPI suite's core cases at 32 and 64 ranks (oversubscribed), under ``mpiexec``.

Slow (a minute or more on 2 cores), so skipped unless ``WACOLL_TEST_SCALE=1`` is set
in the environment of the test run::

    WACOLL_TEST_SCALE=1 .venv/bin/python -m pytest -q tests/test_mpi_scale.py

Each run starts with an empty proof cache of its own. On a first communicator one
rank proves each plan (the whole plan) and stores its proof while the others wait
for it (:mod:`wacoll.plans.prooflock`), then derive their parts; a second one, after
a barrier, finds the proofs and every rank derives only its programs (``last_plan``
is then a ``RankPlan``). Both must give the MPI library's results, checked on every rank and
agreed on before rank 0 reports.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
import textwrap

import pytest


def _suite():
    """tests/test_mpi_suite.py, for its launcher helpers (the tests are no package)."""
    path = os.path.join(os.path.dirname(__file__), "test_mpi_suite.py")
    spec = importlib.util.spec_from_file_location("wacoll_test_mpi_suite", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_SUITE = _suite()
ROOT, TAIL, _clean_env, mpiexec = (
    _SUITE.ROOT,
    _SUITE.TAIL,
    _SUITE._clean_env,
    _SUITE.mpiexec,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("WACOLL_TEST_SCALE") != "1",
        reason="set WACOLL_TEST_SCALE=1 to run the 32- and 64-rank runs",
    ),
]

SCRIPT = """
import numpy as np
from mpi4py import MPI
import wacoll

W = MPI.COMM_WORLD
ME, P = W.Get_rank(), W.Get_size()
TOPO = wacoll.Topology.from_sizes([P // 4] * 4)
problems = []


def same(name, got, want):
    if not np.array_equal(got, want):
        problems.append(f"rank {ME} {name}: {got[:6]} != {want[:6]}")


def core(comm, round):
    x = np.arange(3, dtype=np.int64) + 10 * ME
    buf = np.arange(5, dtype=np.int64) if ME == P - 1 else np.zeros(5, np.int64)
    comm.Bcast(buf, root=P - 1)
    same("Bcast", buf, np.arange(5))
    for level in ("commutative", "strict"):
        out = np.zeros(3, np.int64)
        comm.Allreduce(x, out, level=level)
        want = np.zeros(3, np.int64)
        W.Allreduce(x, want)
        same(f"Allreduce/{level}", out, want)
    out = np.zeros(3 * P, np.int64)
    comm.Allgather(x, out)
    want = np.zeros(3 * P, np.int64)
    W.Allgather(x, want)
    same("Allgather", out, want)
    send = np.arange(2 * P, dtype=np.int64) + 1000 * ME
    out, want = np.zeros(2 * P, np.int64), np.zeros(2 * P, np.int64)
    comm.Alltoall(send, out)
    W.Alltoall(send, want)
    same("Alltoall", out, want)
    out, want = np.zeros(2, np.int64), np.zeros(2, np.int64)
    comm.Reduce_scatter_block(send, out, level="commutative")
    W.Reduce_scatter_block(send, want)
    same("Reduce_scatter_block", out, want)
    out, want = np.zeros(3, np.int64), np.zeros(3, np.int64)
    comm.Scan(x, out, level="associative")
    W.Scan(x, want)
    same("Scan", out, want)
    return type(comm.last_plan).__name__


first = core(wacoll.Comm(W, TOPO), 1)
W.Barrier()  # every proof stored
second = core(wacoll.Comm(W, TOPO), 2)
if second != "RankPlan":
    problems.append(f"rank {ME}: the second communicator ran a {second}, not its part")
everything = W.gather(problems, root=0)
firsts = W.gather(first, root=0)
if ME == 0:
    flat = [p for ps in everything for p in ps]
    print("PROBLEMS", len(flat))
    print("PROVED BY", firsts.count("Plan"), "RANKS")
    for p in flat[:20]:
        print(p)
"""


@pytest.mark.parametrize("size", [32, 64])
def test_core_cases_at_scale(size):
    env = _clean_env()
    with tempfile.TemporaryDirectory(prefix="wacoll-proofs-") as cache:
        env["WACOLL_PROOF_CACHE"] = cache
        cmd = [*mpiexec(size), sys.executable, "-c", textwrap.dedent(SCRIPT)]
        try:
            proc = subprocess.run(
                cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
            )
        except subprocess.TimeoutExpired as exc:
            pytest.fail(
                f"mpiexec -n {size} did not finish in 900 s: {str(exc.stdout)[-TAIL:]}",
                pytrace=False,
            )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-TAIL:]
    assert "PROBLEMS 0" in proc.stdout, out[-TAIL:]
    # the ranks share the cache: one of them proved the last plan, the others waited
    # for its proof and derived their parts
    assert "PROVED BY 1 RANKS" in proc.stdout, out[-TAIL:]
