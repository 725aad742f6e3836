"""The combining all-to-all with its messages held as runs runs as MPI's own.

On the small communicators of these tests every message is short, so the plans hold
tuples; here the thresholds are lowered so that every regular message is a
:class:`~wacoll.plans.blockruns.BlockRuns` and every step of several element runs an
:class:`~wacoll.plans.lower.ElementRuns`, the form a coordinator of thousands of ranks
uses, and the executor's gathers, scatters and reader tracking run on them.
"""

import importlib

import numpy as np
import pytest
from mpi4py import MPI

import wacoll
from wacoll.plans import blockruns

W = MPI.COMM_WORLD
P, ME = W.Get_size(), W.Get_rank()
lower_module = importlib.import_module("wacoll.plans.lower")


def _regular(clusters):
    """Layouts whose coordinators relay messages of several blocks (the others' are
    single blocks, never held as runs)."""
    return len(clusters) > 1 and max(map(len, clusters)) > 1


@pytest.mark.mpi(min_size=3)  # (below 3 ranks no layout's coordinator relays runs)
def test_combining_all_to_all_on_runs_matches_mpi(mpi, monkeypatch):
    for layout, clusters in mpi.layouts.items():
        if _regular(clusters):
            _validate_layout(mpi, layout, monkeypatch)


def _validate_layout(mpi, layout, monkeypatch):
    monkeypatch.setattr(blockruns, "COMPACT_FROM", 1)
    monkeypatch.setattr(blockruns, "IDS_PER_RUN", 0)
    monkeypatch.setattr(lower_module, "ELEMENT_RUNS_FROM", 1)
    comm = mpi.run(
        lambda: wacoll.Comm(W, mpi.topology(layout), family="combining"),
        "Comm(family='combining')",
    )
    try:
        send = np.arange(3 * P, dtype=np.int64) + 1000 * ME
        got, want = np.full(3 * P, -1, np.int64), np.empty(3 * P, np.int64)
        W.Alltoall(send, want)
        _, exc = mpi.outcome(lambda: comm.Alltoall(send, got))
        mpi.assert_all(
            exc is None and np.array_equal(got, want),
            f"Alltoall: {exc!r}, got {got}, want {want}",
        )
        scounts = [(ME + j) % 3 for j in range(P)]
        rcounts = [(j + ME) % 3 for j in range(P)]
        vsend = np.arange(sum(scounts), dtype=np.int64) + 100 * ME
        vgot = np.full(sum(rcounts), -1, np.int64)
        vwant = vgot.copy()
        W.Alltoallv([vsend, scounts], [vwant, rcounts])
        _, exc = mpi.outcome(lambda: comm.Alltoallv([vsend, scounts], [vgot, rcounts]))
        mpi.assert_all(
            exc is None and np.array_equal(vgot, vwant),
            f"Alltoallv: {exc!r}, got {vgot}, want {vwant}",
        )
        plan = comm.last_plan
        mpi.assert_all(plan.family == "combining", plan.family)
        mine = plan.program if hasattr(plan, "program") else plan.programs[ME]
        held = W.allreduce(sum(isinstance(s.blocks, blockruns.BlockRuns) for s in mine))
        mpi.assert_all(held > 0, f"{layout}: no message was held as runs")
    finally:
        comm.Free()
