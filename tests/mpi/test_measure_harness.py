"""The benchmark harness under mpiexec (wacoll.tools.measure.measure): every rank
gets the same times, a case's own repetitions count, results equal the library's,
and the default's case says which family its timed calls ran."""

import pytest
from mpi4py import MPI

from wacoll.plans.families import FAMILIES
from wacoll.tools.measure import measure

W = MPI.COMM_WORLD


def _two_clusters(monkeypatch):
    """The world declared as two clusters, its first half and the rest."""
    monkeypatch.setenv(
        "WACOLL_CLUSTERS",
        ",".join(str(r * 2 // W.Get_size()) for r in range(W.Get_size())),
    )


@pytest.mark.mpi(min_size=2)
def test_measure_times_every_implementation_alike(mpi, monkeypatch):
    _two_clusters(monkeypatch)
    spec = {
        "reps": 2,
        "validate": True,
        "margin": "auto",
        "cases": [
            {
                "label": "bcast 8",
                "op": "bcast",
                "bytes": 8,
                "impls": ["native", "default", "magpie"],
                "reps": 3,
            },
            {
                "label": "allreduce 64",
                "op": "allreduce",
                "bytes": 64,
                "impls": ["native", "default", "mpich"],
            },
        ],
    }
    results = measure(spec, W)
    everyone = W.allgather(
        {k: v["times"] for k, v in results.items() if not k.startswith("_")}
    )
    mpi.assert_all(all(e == everyone[0] for e in everyone), "times differ by rank")
    bcast, allreduce = results["bcast 8"], results["allreduce 64"]
    mpi.assert_all([len(t) for t in bcast["times"].values()] == [3, 3, 3], bcast["times"])
    mpi.assert_all(
        [len(t) for t in allreduce["times"].values()] == [2, 2, 2], allreduce["times"]
    )
    mpi.assert_all(
        all(all(case["correct"].values()) for case in (bcast, allreduce)),
        "results differ from the library's",
    )
    mpi.assert_all(bcast["default_ran"] in (*FAMILIES, "native"), bcast["default_ran"])


@pytest.mark.mpi(min_size=1)
def test_the_start_margin_is_agreed_and_bounded(mpi):
    from wacoll.tools.measure import start_margin

    margin = start_margin(W)
    mpi.assert_all(
        W.allgather(margin) == [margin] * W.Get_size() and 1e-3 <= margin < 1.0, margin
    )


@pytest.mark.mpi(min_size=1)
def test_a_late_start_is_timed_again_with_a_longer_margin(mpi, monkeypatch):
    from wacoll.tools import measure as harness

    margins, real = [], harness.timed

    def late_twice(world, margin, fn):  # every rank late, as timed says together
        margins.append(margin)
        return None if len(margins) <= 2 else real(world, margin, fn)

    monkeypatch.setattr(harness, "timed", late_twice)
    seconds = harness.timed_on_time(W, 0.05, lambda: None)
    mpi.assert_all(seconds is not None and margins[:3] == [0.05, 0.1, 0.2], margins)
    margins.clear()
    monkeypatch.setattr(harness, "timed", lambda world, margin, fn: margins.append(1))
    mpi.same_error(
        lambda: harness.timed_on_time(W, 0.001, lambda: None, tries=3),
        RuntimeError,
        match="started late 3 times",
    )


@pytest.mark.mpi(min_size=2)
def test_a_default_under_another_name_explores_before_it_is_timed(mpi, monkeypatch):
    # the harness used to warm up only the impl named "default": a default
    # communicator named otherwise was timed during its exploration, running the
    # library's collective in some repetitions and a plan in others
    import wacoll

    _two_clusters(monkeypatch)
    made = []

    class Recorded(wacoll.Comm):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(wacoll, "Comm", Recorded)
    spec = {
        "reps": 2,
        "margin": "auto",
        "cases": [
            {
                "label": "allgather 64",
                "op": "allgather",
                "bytes": 64,
                "impls": [
                    "native",
                    {
                        "family": "default",
                        "check": "off",
                        "learn": "on",
                        "name": "unchecked",
                    },
                ],
            }
        ],
    }
    measure(spec, W)
    (renamed,) = made
    mpi.assert_all([row["op"] for row in renamed.tuning] == ["allgather"], renamed.tuning)


@pytest.mark.mpi(min_size=2)
def test_a_cases_first_calls_are_timed_one_by_one(mpi, monkeypatch):
    _two_clusters(monkeypatch)
    spec = {
        "reps": 2,
        "cold": 4,
        "warmup": 2,
        "margin": "auto",
        "cases": [
            {
                "label": "bcast 8",
                "op": "bcast",
                "bytes": 8,
                "impls": ["native", "default"],
            }
        ],
    }
    case = measure(spec, W)["bcast 8"]
    first = case["first"]
    mpi.assert_all(sorted(first) == ["default", "native"], first)
    mpi.assert_all([len(t) for t in first.values()] == [4, 4], first)
    mpi.assert_all(all(t > 0 for ts in first.values() for t in ts), first)
    everyone = W.allgather(first)
    mpi.assert_all(all(e == everyone[0] for e in everyone), "first calls differ by rank")
    mpi.assert_all([len(t) for t in case["times"].values()] == [2, 2], case["times"])
    mpi.assert_all(all(case["correct"].values()), "results differ from the library's")
    without = measure({**spec, "cold": 0}, W)["bcast 8"]
    mpi.assert_all(without["first"] is None, without["first"])
