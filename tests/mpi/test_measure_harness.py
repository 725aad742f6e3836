"""The benchmark harness under mpiexec (wacoll.tools.measure.measure): every rank
gets the same times, a case's own repetitions count, results equal the library's,
and the default's case says which family its timed calls ran."""

import pytest
from mpi4py import MPI

from wacoll.tools.measure import measure

W = MPI.COMM_WORLD


@pytest.mark.mpi(min_size=2)
def test_measure_times_every_implementation_alike(mpi, monkeypatch):
    monkeypatch.setenv("WACOLL_CLUSTERS",
                       ",".join(str(r * 2 // W.Get_size()) for r in range(W.Get_size())))
    spec = {"reps": 2, "validate": True, "margin": 0.01, "cases": [
        {"label": "bcast 8", "op": "bcast", "bytes": 8,
         "impls": ["native", "default", "magpie"], "reps": 3},
        {"label": "allreduce 64", "op": "allreduce", "bytes": 64,
         "impls": ["native", "default", "mpich"]}]}
    results = measure(spec, W)
    everyone = W.allgather({k: v["times"] for k, v in results.items()
                            if not k.startswith("_")})
    mpi.assert_all(all(e == everyone[0] for e in everyone), "times differ by rank")
    bcast, allreduce = results["bcast 8"], results["allreduce 64"]
    mpi.assert_all([len(t) for t in bcast["times"].values()] == [3, 3, 3],
                   bcast["times"])
    mpi.assert_all([len(t) for t in allreduce["times"].values()] == [2, 2, 2],
                   allreduce["times"])
    mpi.assert_all(all(all(case["correct"].values()) for case in (bcast, allreduce)),
                   "results differ from the library's")
    mpi.assert_all(bcast["default_ran"] in ("magpie", "native", "mpich", "modern",
                                            "gridmpi", "recent", "hierarchical"),
                   bcast["default_ran"])
