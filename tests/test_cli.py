"""The wacoll command line."""

import json
import subprocess
import sys

import pytest

from wacoll.cli import main, parse_clusters


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_version_is_the_package_version(capsys):
    import wacoll

    with pytest.raises(SystemExit) as ended:
        main(["--version"])
    assert ended.value.code == 0
    assert capsys.readouterr().out.strip() == f"wacoll {wacoll.__version__}"


def test_plan_prints_metrics_and_simulated_time(capsys):
    code, out, _ = run(
        capsys,
        "plan",
        "reduce",
        "--family",
        "tree",
        "--tree",
        "lam",
        "--clusters",
        "4x8",
        "--bytes",
        "64",
    )
    assert code == 0
    assert "reduce on 32 ranks in 4 clusters [8, 8, 8, 8] (contiguous)" in out
    lines = dict(
        line.split(None, 1)
        if " " not in line[:20]
        else (line[:20].strip(), line[20:].strip())
        for line in out.splitlines()[2:]
    )
    assert lines["messages"] == "31"
    assert lines["max wide area hops"] == "2"
    assert "simulated completion" in lines


def test_plan_compares_families_side_by_side(capsys):
    code, out, _ = run(
        capsys,
        "plan",
        "bcast",
        "--family",
        "magpie,mpich",
        "--clusters",
        "8x5",
        "--bytes",
        "65536",
    )
    assert code == 0
    row = next(line for line in out.splitlines() if line.startswith("optimality"))
    assert row.split()[1:] == ["yes", "no"]


def test_plan_export_writes_scripts(tmp_path, capsys):
    code, out, _ = run(
        capsys,
        "plan",
        "bcast",
        "--family",
        "tree",
        "--clusters",
        "2x2",
        "--export",
        str(tmp_path),
        "--format",
        "json",
    )
    assert code == 0
    files = list((tmp_path / "tree").glob("*.json"))
    assert len(files) == 1
    assert json.loads(files[0].read_text())["op"] == "bcast"


def test_errors_are_reported_not_raised(capsys):
    code, _, err = run(
        capsys,
        "plan",
        "reduce",
        "--family",
        "tree",
        "--tree",
        "binary",
        "--level",
        "strict",
        "--clusters",
        "1x4",
    )
    assert code == 2
    assert err.startswith("wacoll: error: the reduce tree does not keep rank order")
    code, _, err = run(capsys, "plan", "bcast", "--family", "nope", "--clusters", "2x2")
    assert code == 2 and "unknown plan family 'nope'" in err
    code, _, err = run(capsys, "plan", "bcast", "--bytes", "10", "--itemsize", "4")
    assert code == 2 and "not a multiple" in err


def test_bad_arguments_exit_with_usage(capsys):
    with pytest.raises(SystemExit) as e:
        main(["plan", "bcast", "--clusters", "four"])
    assert e.value.code == 2
    assert "cluster sizes look like 4x8" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["plan", "teleport"])


def test_parse_clusters():
    assert parse_clusters("3x2") == [2, 2, 2]
    assert parse_clusters("1, 2,3") == [1, 2, 3]


def test_console_script_runs():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "wacoll.cli",
            "plan",
            "barrier",
            "--family",
            "mpich",
            "--clusters",
            "2x3",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "barrier on 6 ranks" in out


def test_family_options_are_routed_and_checked(capsys):
    code, out, _ = run(
        capsys,
        "plan",
        "allreduce",
        "--family",
        "gridmpi,magpie",
        "--option",
        "n=2",
        "--clusters",
        "2x4",
        "--level",
        "associative",
        "--bytes",
        "64",
    )
    assert code == 0 and "rabenseifner" in out
    code, out, _ = run(
        capsys,
        "plan",
        "bcast",
        "--family",
        "gridmpi,tree",
        "--option",
        "gridmpi.algorithm=farfirst",
        "--option",
        "tree.tree=lam",
        "--clusters",
        "2x3",
    )
    assert code == 0 and "farfirst" in out and "lam" in out
    code, _, err = run(
        capsys, "plan", "allreduce", "--family", "gridmpi", "--option", "bogus=1"
    )
    assert code == 2 and "no family among gridmpi takes option 'bogus'" in err
    code, _, err = run(capsys, "plan", "allreduce", "--option", "root=3")
    assert code == 2 and "set by the command's own flags" in err
    code, _, err = run(capsys, "plan", "bcast", "--option", "oak.n=3")
    assert code == 2 and "names family 'oak'" in err


def test_nothing_is_printed_before_an_error(capsys):
    code, out, err = run(capsys, "plan", "bcast", "--root", "99", "--clusters", "2x2")
    assert code == 2 and out == ""
    assert "root 99" in err


def test_physical_bound_is_a_lower_bound(capsys):
    code, out, _ = run(
        capsys,
        "plan",
        "allgather",
        "--family",
        "magpie",
        "--clusters",
        "2x2",
        "--bytes",
        "1000000",
    )
    rows = {line[:22].strip(): line[22:].strip() for line in out.splitlines()[2:]}
    sim = float(rows["simulated completion"].split()[0])
    bound = float(rows["physical bound"].split()[0])
    assert bound <= sim


def test_durations_and_rates_take_units(capsys):
    code, out, _ = run(
        capsys,
        "plan",
        "bcast",
        "--clusters",
        "2x2",
        "--wan-latency",
        "10ms",
        "--wan-bandwidth",
        "8Mbit/s",
        "--intra-latency",
        "5us",
    )
    assert code == 0
    assert "wide-area 10.000 ms, 1e+06 B/s" in out and "intra 5.0 us" in out
    # plain numbers stay seconds and bytes per second
    code, out, _ = run(
        capsys, "plan", "bcast", "--clusters", "2x2", "--wan-latency", "0.02"
    )
    assert code == 0 and "wide-area 20.000 ms" in out
    with pytest.raises(SystemExit):
        main(["plan", "--wan-latency", "10 parsecs"])
    assert "unknown duration unit" in capsys.readouterr().err


def test_a_level_the_family_cannot_keep_names_the_flag_that_works(capsys):
    argv = [
        "plan",
        "allreduce",
        "--family",
        "gridmpi",
        "--clusters",
        "2x8",
        "--bytes",
        "65536",
        "--option",
        "n=4",
    ]
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert "cannot keep level 'strict'" in err
    assert "add --level associative or --level commutative" in err
    code, out, _ = run(capsys, *argv, "--level", "associative")
    assert code == 0 and "checked               ok" in out


def test_the_demo_command_runs(tmp_path, capsys):
    # the README's first command ends in ``wacoll demo``: the command must reach the
    # demo (here its simulated table, which needs no testbed)
    assert main(["demo", "--simulate-only", "--out", str(tmp_path / "demo")]) in (0, None)
    assert (tmp_path / "demo" / "demo.txt").is_file()
    assert "wrote" in capsys.readouterr().out
