"""``wacoll tune``: choices learned ahead of time, so that a run explores nothing.

At 4 ranks declared as two clusters: ``mpiexec -n 4 wacoll tune`` writes a tuning
file with a choice per operation and size; a program started with
``WACOLL_TUNING`` naming it runs its first call of those shapes with the learned
choice (no exploration), and one started without it explores.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.test_mpi_suite import mpiexec

PROGRAM = """
import numpy as np
from mpi4py import MPI
import wacoll
comm = wacoll.Comm(MPI.COMM_WORLD)
for nbytes in (8, 65536):
    x = np.ones(nbytes // 8); y = np.zeros(nbytes // 8)
    comm.Allreduce(x, y)
    if comm.Get_rank() == 0:
        print("REASON", nbytes, comm.last_reason.split(":")[0], flush=True)
comm.Free()
"""


def _env(tmp_path, **extra):
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PMI_", "PMIX_", "HYDRA_", "OMPI_", "WACOLL_"))
    }
    env.update(WACOLL_CLUSTERS="0,0,1,1", WACOLL_PROOF_CACHE=str(tmp_path / "proofs"))
    env.update(extra)
    return env


def _run(cmd, env):
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


@pytest.mark.slow
def test_a_tuned_run_explores_nothing(tmp_path):
    out = tmp_path / "tuning.json"
    wacoll_cmd = [sys.executable, "-m", "wacoll.cli"]
    tuned = _run(
        [
            *mpiexec(4),
            *wacoll_cmd,
            "tune",
            "--ops",
            "allreduce,bcast",
            "--sizes",
            "8,64K",
            "--out",
            str(out),
        ],
        _env(tmp_path),
    )
    assert "wrote" in tuned.stdout and "[tune 4/4" in tuned.stderr, tuned.stderr
    choices = json.loads(out.read_text())["choices"]
    assert sorted((c["op"], c["size_class"]) for c in choices) == [
        ("allreduce", 4),
        ("allreduce", 17),
        ("bcast", 4),
        ("bcast", 17),
    ]
    program = [*mpiexec(4), sys.executable, "-c", PROGRAM]
    with_file = _run(program, _env(tmp_path, WACOLL_TUNING=str(out))).stdout
    assert with_file.count("REASON") == 2 and "learning" not in with_file, with_file
    assert "REASON 8 learned" in with_file and "REASON 65536 learned" in with_file
    without = _run(program, _env(tmp_path)).stdout
    assert "REASON 8 learning" in without, without


def test_bad_arguments_are_refused_before_anything_runs(capsys):
    from wacoll.cli import main

    for argv in (["tune", "--ops", "allreduce,fft"], ["tune", "--sizes", "8,0"]):
        with pytest.raises(SystemExit) as ended:
            main(argv)
        assert ended.value.code == 2
    said = capsys.readouterr().err
    assert "unknown operation(s) ['fft']" in said and "at least 1 byte" in said
