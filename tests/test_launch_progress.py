"""Launching under any MPI (wacoll.tools.launch), the testbed's MPICH-only refusal, progress
lines (wacoll.tools.progress), and the error of a source checkout that shadows the
installed kernels."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from wacoll.emulate import launcher
from wacoll.tools import launch, progress

OPEN_MPI = "mpiexec (Open MPI) 5.0.11\n\nReport bugs to https://www.open-mpi.org/community/help/\n"
HYDRA = "HYDRA build details:\n    Version:                                 5.0.2\n"


def test_vendor_is_read_from_the_version_text():
    assert launch.vendor_of(OPEN_MPI) == "openmpi"
    assert launch.vendor_of(HYDRA) == "mpich"
    assert launch.vendor_of("Open MPI v5.0.11, package: Open MPI ...") == "openmpi"
    assert launch.vendor_of("MPICH Version:      4.2.0") == "mpich"
    assert launch.vendor_of("Intel(R) MPI Library 2021.10 for Linux") == "intel"
    assert launch.vendor_of("") == "unknown"


def test_open_mpi_gets_oversubscribe_and_root_flags():
    assert launch.launch_flags("openmpi", root=False) == ["--oversubscribe"]
    assert launch.launch_flags("openmpi", root=True) == [
        "--oversubscribe",
        "--allow-run-as-root",
    ]
    assert launch.launch_flags("mpich", root=True) == []
    assert launch.mpiexec_command(3, ["python", "x.py"], mpiexec="/m", vendor="openmpi")[
        :2
    ] == ["/m", "--oversubscribe"]


def test_the_installed_mpiexec_is_recognised():
    exe = launch.find_mpiexec()
    if exe is None:
        pytest.skip("no mpiexec here")
    from mpi4py import MPI

    # mpi4py loads the library of the same MPI as the mpiexec beside this Python
    assert launch.mpiexec_vendor(exe) == launch.vendor_of(MPI.Get_library_version())


def _fake_mpiexec(tmp_path, text):
    exe = tmp_path / "mpiexec"
    exe.write_text(f"#!/bin/sh\ncat <<'EOF'\n{text}EOF\n")
    exe.chmod(0o755)
    launch.mpiexec_version.cache_clear()
    return str(exe)


def test_the_testbed_says_it_is_mpich_only(tmp_path):
    exe = _fake_mpiexec(tmp_path, OPEN_MPI)
    reason = launcher.mpich_reason(exe)
    assert "MPICH's process manager (hydra)" in reason and "is Open MPI" in reason
    assert "pip install 'wacoll[mpich]'" in reason
    assert launcher.mpich_reason(_fake_mpiexec(tmp_path, HYDRA)) is None


def test_the_testbed_refuses_to_start_with_open_mpi(tmp_path, monkeypatch):
    from wacoll import Topology
    from wacoll.emulate import Testbed, TestbedUnavailable, netns, testbed

    exe = _fake_mpiexec(tmp_path, OPEN_MPI)
    monkeypatch.setattr(netns, "unavailable_reason", lambda: None)
    monkeypatch.setattr(launcher, "find_mpiexec", lambda: exe)
    assert "is Open MPI" in testbed.unavailable_reason()
    with pytest.raises(TestbedUnavailable, match="the testbed is MPICH-only"):
        Testbed(Topology.from_sizes([1, 1]), name="ompi").start()


def test_progress_lines_only_where_enabled(monkeypatch):
    monkeypatch.delenv(progress.ENV, raising=False)
    assert not progress.enabled(io.StringIO())  # not a terminal: quiet (CI)
    monkeypatch.setenv(progress.ENV, "1")
    assert progress.enabled(io.StringIO()) and progress.child_env() == {progress.ENV: "1"}
    monkeypatch.setenv(progress.ENV, "0")
    assert not progress.enabled() and progress.child_env() == {progress.ENV: "0"}


def test_heartbeat_prints_while_work_runs():
    out = io.StringIO()
    p = progress.Progress("testbed tb", stream=out, enabled=True)
    with p.heartbeat("still running", every=0.02, limit=600):
        import time

        time.sleep(0.1)
    lines = out.getvalue().splitlines()
    assert lines and all(
        line.startswith("[testbed tb 0:00] still running (time limit 10:00)")
        for line in lines
    )
    quiet = io.StringIO()
    with progress.Progress("x", stream=quiet, enabled=False).heartbeat(every=0.01):
        time.sleep(0.05)
    assert quiet.getvalue() == ""


def test_a_source_checkout_shadowing_the_kernels_says_what_to_do(tmp_path):
    # a copy of the package without the compiled modules, first on sys.path, as a
    # checkout is for `python -m` run from its root
    import shutil

    import wacoll

    src = Path(wacoll.__file__).parent
    shutil.copytree(
        src,
        tmp_path / "wacoll",
        ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__"),
    )
    for name in ("meson.build", "pyproject.toml"):
        (tmp_path / name).write_text("")
    code = textwrap.dedent("""
        import sys
        sys.meta_path[:] = [f for f in sys.meta_path
                            if "editable" not in type(f).__module__.lower()]
        import wacoll._kernels
    """)
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0
    assert "ImportError: wacoll's compiled kernels are missing" in proc.stderr
    assert "Run from another directory" in proc.stderr and "-e ." in proc.stderr


def test_the_demo_names_the_files_it_writes():
    from wacoll.tools import demo

    assert demo.MEASURED_FILE == "demo-measured.json"
    source = Path(demo.__file__).read_text()
    assert "'measured.json'" not in source and "speed-up = " in source
