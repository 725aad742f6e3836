"""The example application runs under mpiexec, on one and on two clusters."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent


def mpiexec(size):
    """``mpiexec`` with the flags its MPI needs here, and ``-n size``."""
    from wacoll.tools.launch import mpiexec_command

    try:
        return mpiexec_command(size, [])
    except FileNotFoundError as exc:
        pytest.fail(str(exc))


@pytest.mark.parametrize("clusters", [None, "0,0,1"])
def test_allreduce_app(clusters):
    env = dict(os.environ)
    if clusters:
        env["WACOLL_CLUSTERS"] = clusters
    out = subprocess.run(
        [*mpiexec(3), sys.executable, str(ROOT / "examples" / "allreduce_app.py"), "200"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    families = "magpie" if clusters else "native"
    assert f"({families} family): 200 checked Allreduce calls" in out.stdout


def _readme_mpi4py_snippet():
    """The README's "In an mpi4py application" code block, as a user copies it."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## In an mpi4py application", 1)[1]
    return section.split("```python", 1)[1].split("```", 1)[0]


@pytest.mark.parametrize("clusters", [None, "0,0,1"])
def test_readme_mpi4py_snippet_runs(tmp_path, clusters):
    """The README's swap-one-line example runs to the end (it once waited forever on
    a receive nobody sent) and its Allreduce gives the MPI library's sum."""
    script = tmp_path / "snippet.py"
    script.write_text(
        _readme_mpi4py_snippet() + "\ntotals = comm.allgather(int(total[0]))"
        "\nif comm.Get_rank() == 0:\n    print('totals', totals)\n"
    )
    env = dict(os.environ)
    if clusters:
        env["WACOLL_CLUSTERS"] = clusters
    out = subprocess.run(
        [*mpiexec(3), sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "totals [3, 3, 3]" in out.stdout, out.stdout
