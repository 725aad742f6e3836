"""The counts benchmark (``benchmarks/bench_counts.py``) runs end to end: loops
over several counts on two declared clusters, the mixed workload, its table, CSV
files and plot."""

import csv
import doctest
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "bench_counts.py"


def test_its_examples_hold(monkeypatch):
    monkeypatch.syspath_prepend(str(SCRIPT.parent))
    spec = importlib.util.spec_from_file_location("bench_counts", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.slow
def test_a_small_run_reports_every_loop_and_the_mixed_workload(tmp_path):
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--ranks", "2", "--layouts", "two",
         "--ops", "Allreduce,Gather", "--ks", "1,4,40", "--passes", "1",
         "--mixed", "80", "--out", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    with open(tmp_path / "counts.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert {(r["op"], r["K"], r["config"]) for r in rows} == {
        (op, k, who)
        for op in ("Allreduce", "Gather")
        for k in ("1", "4", "40")
        for who in ("default", "library")
    } | {  # the widest loop's counts, each repeated: the same sizes, no new count
        (op, "40", who + ", each count repeated")
        for op in ("Allreduce", "Gather")
        for who in ("default", "library")
    }
    assert all(float(r["ms"]) > 0 for r in rows)
    assert "two cluster(s), 2 ranks" in done.stdout
    assert "Mixed workload (80 calls" in done.stdout
    assert "proof cache" in done.stdout
    assert (tmp_path / "counts.png").stat().st_size > 0
    with open(tmp_path / "counts-mixed.csv", newline="") as fh:
        mixed = list(csv.DictReader(fh))
    assert {r["config"] for r in mixed} == {"default", "library"}
