"""wacoll's pytest plugin (``wacoll.tools.pytest_plugin``): a users' test file run under
``mpiexec`` at 2-4 ranks, with and without the plugin's options.

Each case writes a small test file, as a wacoll user would, and runs
``mpiexec -n N python -m pytest`` on it (every rank runs pytest). The ranks' outputs
arrive mixed through one pipe, so each rank also writes what it saw and its outcome
counts to files of its own (``RANK_FILES``), which the checks read.
"""

from __future__ import annotations

import sys

import pytest

pytest_plugins = ["pytester"]

TIMEOUT = 240

USER_TESTS = '''
import numpy as np
import pytest
from mpi4py import MPI


def test_allreduce(wacoll_comm):
    total = np.zeros(3)
    wacoll_comm.Allreduce(np.full(3, wacoll_comm.Get_rank() + 1.0), total, op=MPI.SUM)
    n = wacoll_comm.Get_size()
    assert np.array_equal(total, np.full(3, n * (n + 1) / 2))
    with open(f"layout-{wacoll_comm.Get_rank()}.txt", "w") as fh:
        fh.write(f"{[list(c) for c in wacoll_comm.network.clusters]} "
                 f"{wacoll_comm.last_family}")


@pytest.mark.wacoll(clusters="0,1,1")   # 3 ranks; skipped at other sizes
def test_marker_layout(wacoll_comm, wacoll_topology):
    assert [list(c) for c in wacoll_topology.clusters] == [[0], [1, 2]]
    buf = np.arange(4.0) if wacoll_comm.Get_rank() == 0 else np.zeros(4)
    wacoll_comm.Bcast(buf, root=0)
    assert np.array_equal(buf, np.arange(4.0))
'''

REJECTED = '''
import numpy as np
from mpi4py import MPI


def test_strict_allreduce(wacoll_comm):
    # 8 KiB: above 4 KiB a strict float sum keeps the canonical order (a smaller
    # one runs on exact accumulators, which every family's plan may combine)
    out = np.zeros(1024)
    wacoll_comm.Allreduce(np.ones(1024), out, op=MPI.SUM)
'''


#: Test infrastructure, not the user's: each rank's outcome counts in a file.
RANK_FILES = '''
def pytest_terminal_summary(terminalreporter):
    from mpi4py import MPI

    counts = {key: len(terminalreporter.stats.get(key, []))
              for key in ("passed", "failed", "skipped", "error")}
    with open(f"outcome-{MPI.COMM_WORLD.Get_rank()}.txt", "w") as fh:
        fh.write(repr(counts))
'''


@pytest.fixture
def user_project(pytester, monkeypatch):
    for name in ("WACOLL_CLUSTERS", "WACOLL_TOPOLOGY", "WACOLL_SCRIPTS"):
        monkeypatch.delenv(name, raising=False)
    pytester.makepyfile(test_user=USER_TESTS, test_rejected=REJECTED)
    pytester.makeconftest(RANK_FILES)
    return pytester


def run_ranks(pytester, n, *args):
    from wacoll.tools.launch import mpiexec_command

    try:
        cmd = mpiexec_command(
            n,
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-s", *args],
        )
    except FileNotFoundError as exc:
        pytest.fail(str(exc))
    result = pytester.run(*cmd, timeout=TIMEOUT)
    return result, result.stdout.str() + result.stderr.str()


def per_rank(pytester, prefix, n):
    """The ``prefix-<rank>.txt`` files of ``n`` ranks (the previous run's removed)."""
    found = []
    for rank in range(n):
        path = pytester.path / f"{prefix}-{rank}.txt"
        found.append(path.read_text() if path.exists() else None)
        path.unlink(missing_ok=True)
    return found


def assert_each_rank(pytester, n, output, **want):
    """Every one of ``n`` ranks reported ``want`` (e.g. passed=1, skipped=1)."""
    full = {k: want.get(k, 0) for k in ("passed", "failed", "skipped", "error")}
    got = per_rank(pytester, "outcome", n)
    assert got == [repr(full)] * n, f"{got}\n{output[-3000:]}"


@pytest.mark.slow
def test_fixture_without_options_discovers_one_cluster(user_project):
    # two ranks of one machine: one cluster, the MPI library's own; the marked test is
    # written for 3 ranks and skips
    result, out = run_ranks(user_project, 2, "test_user.py")
    assert result.ret == 0, out[-4000:]
    assert per_rank(user_project, "layout", 2) == ["[[0, 1]] native"] * 2, out[-3000:]
    assert_each_rank(user_project, 2, out, passed=1, skipped=1)


@pytest.mark.slow
def test_options_choose_layout_family_and_level(user_project):
    # the options give two clusters and the magpie family; the marker's layout wins
    # for the test that has one
    result, out = run_ranks(
        user_project,
        3,
        "test_user.py",
        "--wacoll-clusters",
        "0,0,1",
        "--wacoll-family",
        "magpie",
        "--wacoll-level",
        "associative",
    )
    assert result.ret == 0, out[-4000:]
    assert per_rank(user_project, "layout", 3) == ["[[0, 1], [2]] magpie"] * 3, out[
        -3000:
    ]
    assert_each_rank(user_project, 3, out, passed=2)


@pytest.mark.slow
def test_a_plan_the_checker_rejects_fails_the_test(user_project):
    # gridmpi's allreduce cannot keep the strict level: every rank's test fails with
    # the prover's message (and none waits for the others)
    result, out = run_ranks(
        user_project,
        4,
        "test_rejected.py",
        "--wacoll-clusters",
        "0,0,1,1",
        "--wacoll-family",
        "gridmpi",
        "--wacoll-level",
        "strict",
    )
    assert result.ret == 1, out[-4000:]
    assert "PlanError" in out and "cannot keep level 'strict'" in out, out[-4000:]
    assert_each_rank(user_project, 4, out, failed=1)
    # at a level it can keep, the same test passes
    result, out = run_ranks(
        user_project,
        4,
        "test_rejected.py",
        "--wacoll-clusters",
        "0,0,1,1",
        "--wacoll-family",
        "gridmpi",
        "--wacoll-level",
        "commutative",
    )
    assert result.ret == 0, out[-4000:]
    assert_each_rank(user_project, 4, out, passed=1)


@pytest.mark.slow
def test_option_for_another_size_fails_clearly(user_project):
    result, out = run_ranks(
        user_project,
        2,
        "test_user.py",
        "-k",
        "test_allreduce",
        "--wacoll-clusters",
        "0,0,1",
    )
    assert result.ret != 0
    assert_each_rank(user_project, 2, out, error=1)
    assert "--wacoll-clusters gives 3 cluster labels (0,0,1); this run has 2 ranks" in out


def test_plugin_is_inert_without_its_fixture(pytester):
    # loaded through the entry point, but nothing of MPI is imported for tests that
    # do not ask for wacoll_comm
    pytester.makepyfile(
        test_plain='''
        import sys

        def test_plain(request):
            assert request.config.pluginmanager.has_plugin("wacoll")
            assert "mpi4py.MPI" not in sys.modules
            assert "wacoll.mpi" not in sys.modules
    '''
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:mpi")
    result.assert_outcomes(passed=1)


def test_options_are_listed_in_help(pytester):
    result = pytester.runpytest_subprocess("--help")
    result.stdout.fnmatch_lines(
        [
            "*--wacoll-clusters=LABELS*",
            "*--wacoll-family=FAMILY*",
            "*--wacoll-level=LEVEL*",
        ]
    )
