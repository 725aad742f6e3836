"""The cold-start benchmark (``benchmarks/bench_cold.py``) runs end to end: a fresh
process per case, cold and warm proofs, its table and its call-by-call CSV."""

import csv
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "bench_cold.py"


@pytest.mark.slow
def test_a_small_run_times_the_communicator_and_every_call(tmp_path):
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--ranks", "2", "--layouts", "two",
         "--ops", "Bcast", "--calls", "28", "--out", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    with open(tmp_path / "cold.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["proofs"], int(r["call"])) for r in rows] == [
        (proofs, k) for proofs in ("cold", "warm") for k in range(1, 29)
    ]
    for row in rows:
        assert float(row["default_ms"]) > 0 and float(row["library_ms"]) > 0
        assert float(row["comm_ms"]) > 0 and float(row["dup_ms"]) > 0
    table = (tmp_path / "cold.txt").read_text()
    assert "two | 2 | cold | Bcast" in table and "two | 2 | warm | Bcast" in table


def test_too_few_calls_for_the_steady_figure_is_refused():
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--calls", "10"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--calls must be at least 28" in done.stderr
