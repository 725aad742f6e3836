"""The example application runs under mpiexec, on one and on two clusters."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent


def mpiexec(size):
    """``mpiexec`` with the flags its MPI needs here, and ``-n size``."""
    from wacoll.launch import mpiexec_command

    try:
        return mpiexec_command(size, [])
    except FileNotFoundError as exc:
        pytest.fail(str(exc))


@pytest.mark.parametrize("clusters", [None, "0,0,1"])
def test_allreduce_app(clusters):
    env = dict(os.environ)
    if clusters:
        env["WACOLL_CLUSTERS"] = clusters
    out = subprocess.run([*mpiexec(3), sys.executable,
                          str(ROOT / "examples" / "allreduce_app.py"), "200"],
                         capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    families = "magpie" if clusters else "native"
    assert f"({families} family): 200 checked Allreduce calls" in out.stdout
