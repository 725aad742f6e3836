"""wacoll.tools.measure's testbed driver, without a testbed (the live run is in test_testbed)."""

from types import SimpleNamespace

import wacoll.emulate as emulate
from wacoll import Topology
from wacoll.tools.measure import normalise_case, run_on_testbed


class _RecordingTestbed:
    """Stands in for wacoll.emulate.Testbed: records how the measurement is launched."""

    runs = []

    def __init__(self, topology, **options):
        self.topology = topology

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def run(self, argv, **options):
        self.runs.append((argv, options))
        return SimpleNamespace(ok=False, timed_out=False, returncode=3)


def test_measurement_ranks_start_outside_the_working_directory(tmp_path, monkeypatch):
    # `python -m wacoll.tools.measure` puts its working directory first on sys.path: run from
    # a source checkout, the ranks would import its uncompiled wacoll/ instead of the
    # installed package. The driver must start them in its own output folder.
    monkeypatch.setattr(emulate, "unavailable_reason", lambda: None)
    monkeypatch.setattr(emulate, "Testbed", _RecordingTestbed)
    monkeypatch.chdir(tmp_path)
    spec = {"reps": 1, "cases": [{"op": "barrier"}]}
    # a relative folder, as `wacoll demo` passes: every path must still resolve there
    results, reason = run_on_testbed(Topology.from_sizes([1, 1]), spec, "results")
    assert results is None and reason == "the measurement run failed (exit status 3)"
    argv, options = _RecordingTestbed.runs[-1]
    out = tmp_path / "results"
    assert argv[1:3] == ["-m", "wacoll.tools.measure"]
    assert options["cwd"] == out and out.is_dir()
    assert [argv[3], argv[4]] == [
        str(out / "bench-cases.json"),
        str(out / "bench-measured.json"),
    ]
    assert (out / "bench-cases.json").exists()


def test_cases_name_their_implementations():
    case = normalise_case(
        {"op": "bcast", "impls": ["native", {"family": "gridmpi", "n": 2}]}
    )
    assert case["impls"] == [{"family": "native"}, {"family": "gridmpi", "n": 2}]
    assert case["label"] == "bcast 8 B"
