"""The growth benchmark (``benchmarks/bench_growth.py``) runs its cases, records every
one in its CSV file, and stops a case over its time or memory budget instead of
waiting for it (the larger sizes of that operation are then recorded, not run)."""

import csv
import doctest
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "bench_growth.py"
TIMES = [
    "build_s",
    "check_s",
    "lower_first_s",
    "lower_last_s",
    "simulate_s",
    "total_s",
    "build_cpu_s",
    "check_cpu_s",
    "lower_first_cpu_s",
    "lower_last_cpu_s",
    "simulate_cpu_s",
    "total_cpu_s",
]
RANK = [
    "rank_first_s",
    "rank_last_s",
    "rank_first_cpu_s",
    "rank_last_cpu_s",
    "rank_first_mib",
    "rank_last_mib",
]


def run_bench(out, *args, timeout=120):
    """Run the benchmark writing to ``out``; return its CSV rows and printed text."""
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *args, "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    with open(out, newline="") as fh:
        return list(csv.DictReader(fh)), done.stdout


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("growth") / "growth-quick.csv"
    rows, text = run_bench(out, "--quick", "--families", "tree,combining")
    return out, rows, text


def test_quick_mode_has_a_row_per_case_with_numeric_times(quick):
    out, rows, text = quick
    expected = set()
    for family, ops in (
        ("tree", ("bcast", "reduce", "allreduce")),
        ("combining", ("alltoall", "alltoallv")),
    ):
        for op in ops:
            sizes = (16, 32, 64, 128) if op in ("bcast", "reduce") else (16, 32, 64)
            expected.update((family, op, ranks) for ranks in sizes)
    assert {(r["family"], r["op"], int(r["ranks"])) for r in rows} == expected
    assert len(rows) == len(expected)
    for row in rows:
        assert row["status"] == "ok", row
        for name in TIMES:
            assert float(row[name]) >= 0, (name, row)
        parts = sum(float(row[n]) for n in TIMES[:5])
        assert float(row["total_s"]) == pytest.approx(parts, rel=1e-3, abs=1e-6)
        assert int(row["steps"]) > 0 and int(row["messages"]) > 0
        assert int(row["clusters"]) == 8
        assert float(row["peak_rss_mib"]) >= float(row["base_rss_mib"]) > 0
        for name in RANK:
            assert float(row[name]) >= 0, (name, row)
    # the files that go with the CSV
    assert out.with_suffix(".png").stat().st_size > 0
    with open(out.with_name(out.stem + "-fit.csv"), newline="") as fh:
        fits = list(csv.DictReader(fh))
    assert {(f["family"], f["op"]) for f in fits} == {(f, o) for f, o, _ in expected}
    report = out.with_suffix(".txt").read_text()
    assert report.startswith("command: ") and "--quick" in report.splitlines()[0]
    assert "growth found" in report
    printed = text.splitlines()
    assert all(line in printed for line in report.splitlines())  # the summary's lines
    assert len(printed) == len(report.splitlines()) + 1 + len(rows)  # + header, cases


def test_a_case_over_budget_is_recorded_and_its_larger_sizes_not_run(tmp_path):
    rows, text = run_bench(
        tmp_path / "g.csv",
        "--families",
        "mpich",
        "--ops",
        "alltoall",
        "--sizes",
        "64,128",
        "--rooted-sizes",
        "",
        "--budget",
        "0.001",
        timeout=60,
    )
    assert [(int(r["ranks"]), r["status"]) for r in rows] == [
        (64, "over budget"),
        (128, "over budget"),
    ]
    assert rows[0]["note"].startswith("stopped after 0.001 s")
    assert rows[1]["note"] == "not run: over budget at 64 ranks"
    assert all(rows[i][n] == "" for i in (0, 1) for n in TIMES)
    assert "alltoall/mpich" in text


def test_a_case_out_of_memory_is_recorded_and_others_go_on(tmp_path):
    rows, _ = run_bench(
        tmp_path / "g.csv",
        "--families",
        "mpich",
        "--ops",
        "alltoall,bcast",
        "--sizes",
        "16,512,1024",
        "--rooted-sizes",
        "",
        "--max-memory",
        "300M",
        "--budget",
        "60",
        timeout=120,
    )
    got = {(r["op"], int(r["ranks"])): r for r in rows}
    assert len(got) == len(rows) == 6
    assert all(got[("bcast", n)]["status"] == "ok" for n in (16, 512, 1024))
    assert got[("alltoall", 16)]["status"] == "ok"
    assert got[("alltoall", 512)]["status"] == "out of memory"
    assert got[("alltoall", 512)]["note"].startswith("over 300 MiB in ")
    assert got[("alltoall", 1024)]["status"] == "out of memory"
    assert got[("alltoall", 1024)]["note"] == "not run: out of memory at 512 ranks"
    # one rank's own program is still derived where the whole plan is out of memory,
    # in a sliver of the memory (a rank's P sends and P receives)
    for n in (512, 1024):
        own = got[("alltoall", n)]
        assert all(float(own[name]) >= 0 for name in RANK), own
        assert 0 < float(own["rank_last_mib"]) < 50
    assert all(got[("alltoall", 1024)][name] == "" for name in TIMES)


def test_module_examples(monkeypatch):
    monkeypatch.syspath_prepend(str(SCRIPT.parent))  # it imports _harness
    spec = importlib.util.spec_from_file_location("bench_growth", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = doctest.testmod(module)
    assert result.attempted > 0
    assert result.failed == 0
