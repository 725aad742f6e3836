"""What a newcomer's first mistakes print: each says what happened and what to do."""

import os
import subprocess
import sys

import pytest

from wacoll.cli import main


def test_a_run_without_mpiexec_that_declares_clusters_says_to_use_mpiexec():
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PMI_", "PMIX_", "HYDRA_", "OMPI_", "WACOLL_"))
    }
    env["WACOLL_CLUSTERS"] = "0,0,1,1"
    if os.environ.get("WACOLL_PROOF_CACHE"):
        env["WACOLL_PROOF_CACHE"] = os.environ["WACOLL_PROOF_CACHE"]
    code = "from mpi4py import MPI\nimport wacoll\nwacoll.Comm(MPI.COMM_WORLD)\n"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode != 0
    last = out.stderr.strip().splitlines()[-1]
    assert "WACOLL_CLUSTERS lists 4 labels for 1 process of MPI.COMM_WORLD" in last, last
    assert "run it under mpiexec -n 4" in last, last
    assert "rank 0: rank 0:" not in out.stderr


def test_durations_and_rates_may_be_two_words(capsys):
    assert (
        main(
            [
                "plan",
                "bcast",
                "--clusters",
                "2x2",
                "--wan-latency",
                "25",
                "ms",
                "--wan-bandwidth",
                "2",
                "MB/s",
            ]
        )
        == 0
    )
    links = capsys.readouterr().out.splitlines()[1]
    assert "wide-area 25.000 ms, 2e+06 B/s" in links, links


def test_a_duration_with_an_unknown_unit_is_refused_with_the_right_form(capsys):
    with pytest.raises(SystemExit):
        main(["plan", "--wan-latency", "10msec"])
    err = capsys.readouterr().err
    assert "unknown duration unit 'msec'" in err and "ms" in err, err


def test_testbed_list_says_when_none_is_up(monkeypatch, capsys):
    import wacoll.emulate

    monkeypatch.setattr(wacoll.emulate, "list_testbeds", lambda: [])
    assert main(["testbed", "list"]) == 0
    out = capsys.readouterr().out
    assert "no wacoll testbed on this machine" in out and "wacoll testbed up" in out
