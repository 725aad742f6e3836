"""bench_networks' physical bounds and its reprint of an earlier run (no testbed)."""

import doctest
import importlib.util
from pathlib import Path

import pytest

PATH = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_networks.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_networks", PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_examples(bench):
    result = doctest.testmod(bench)
    assert result.attempted > 0 and result.failed == 0


def test_bound_is_one_latency_plus_the_bytes_a_cluster_must_receive(bench):
    from wacoll import Topology

    lf = Topology.from_sizes([4, 4], wan_latency=5e-3, wan_bandwidth=100e6)
    assert bench.case_bound("barrier", 8, lf) == pytest.approx(5e-3)
    assert bench.case_bound("bcast", 8, lf) == pytest.approx(5e-3 + 8 / 100e6)
    # four ranks' 1 MiB blocks enter the other cluster
    assert bench.case_bound("allgather", 2**20, lf) == pytest.approx(
        5e-3 + 4 * 2**20 / 100e6
    )
    # 4 x 4 blocks of 1 MiB cross each way
    assert bench.case_bound("alltoall", 2**20, lf) == pytest.approx(
        5e-3 + 16 * 2**20 / 100e6
    )
    # four clusters: a cluster receives over its three incoming links at once
    wan = Topology.from_sizes([2, 2, 2, 2], wan_latency=10e-3, wan_bandwidth=1e6)
    assert bench.case_bound("bcast", 2**16, wan) == pytest.approx(10e-3 + 2**16 / 3e6)


def test_report_reprints_a_run_with_bounds(bench, tmp_path, capsys):
    csv = tmp_path / "run.csv"
    csv.write_text(
        "network,op,bytes,native_s,default_s,ratio,learned\n"
        "longfast,allreduce,16777216,0.24,0.20,0.833,\n"
        "longfast,barrier,8,0.0055,0.0056,1.018,\n"
    )
    assert bench.main(["--report", str(csv)]) == 0
    out = capsys.readouterr().out
    assert "reprinted from" in out and "nothing was timed" in out
    # bounds 172.8 ms and 5 ms: bound / library 0.72 and 0.91, geometric mean 0.81
    assert "172.772" in out and "0.72" in out
    assert "physical bound / library: geometric mean 0.81" in out
    assert "longfast: geometric mean 0.92, worst 1.02 (barrier 8 B)" in out


@pytest.mark.parametrize("text", ["", "network,op\n", "a,b\n1,2\n"])
def test_report_of_a_bad_csv_says_so(bench, tmp_path, capsys, text):
    csv = tmp_path / "bad.csv"
    csv.write_text(text)
    with pytest.raises(SystemExit):
        bench.main(["--report", str(csv)])
    assert "--report" in capsys.readouterr().err


def test_report_gives_the_start_margin_a_run_wrote(bench, tmp_path, capsys):
    csv = tmp_path / "run.csv"
    csv.write_text(
        "network,op,bytes,native_s,default_s,ratio,margin_s,learned\n"
        "lan,barrier,8,0.0006,0.0005,0.833,0.0025,\n"
    )
    assert bench.main(["--report", str(csv)]) == 0
    assert (
        "lan: each call started 2.50 ms after its start instant was sent"
        in capsys.readouterr().out
    )
