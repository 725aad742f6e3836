"""Processes that miss the proof cache together prove the plan once: one claims it,
the others wait for its proof; a dead, stuck or failed prover never leaves a waiter
hanging."""

import multiprocessing
import os
import threading
import time

import pytest

from wacoll import PlanError, Topology
from wacoll.plans import Call, prooflock, proofs, select
from wacoll.plans.rank import plan_for_rank

TOPO = Topology.from_sizes([24, 24, 16])


def _sel():
    return select(Call("allgather", count=4, itemsize=8), TOPO)


def _first_call(directory, rank, start, results):
    start.wait()
    part = plan_for_rank(_sel(), TOPO, rank, directory=directory)
    results.put((rank, type(part).__name__))


def test_processes_that_miss_together_prove_once(tmp_path):
    ctx = multiprocessing.get_context("fork")
    ranks = [0, 5, 31, 63]
    start, results = ctx.Barrier(len(ranks)), ctx.Queue()
    procs = [ctx.Process(target=_first_call, args=(str(tmp_path), r, start, results))
             for r in ranks]
    for p in procs:
        p.start()
    got = dict(results.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    # exactly one built and proved the whole plan; the others derived their part
    assert sorted(got.values()) == ["Plan", "RankPlan", "RankPlan", "RankPlan"]
    assert [f.suffix for f in tmp_path.iterdir()] == [".json"]  # no lock left


def _dead_pid():
    proc = multiprocessing.get_context("fork").Process(target=int)
    proc.start()
    proc.join()
    return proc.pid


def _lock(tmp_path, holder):
    key = proofs.plan_key(_sel(), TOPO)
    path = tmp_path / f"{key}.lock"
    path.write_text(holder)
    return path


def test_a_lock_of_a_dead_process_is_taken_over(tmp_path):
    import socket
    lock = _lock(tmp_path, f"{socket.gethostname()} {_dead_pid()}\n")
    began = time.monotonic()
    assert type(plan_for_rank(_sel(), TOPO, 3, directory=tmp_path)).__name__ == "Plan"
    assert time.monotonic() - began < 30
    assert not lock.exists()
    assert proofs.lookup(_sel(), TOPO, directory=tmp_path) is not None


def test_a_stuck_prover_is_waited_for_at_most_the_limit(tmp_path, monkeypatch):
    import socket
    lock = _lock(tmp_path, f"{socket.gethostname()} {os.getpid()}\n")  # alive
    monkeypatch.setenv(prooflock.WAIT_ENV, "0.3")
    began = time.monotonic()
    assert type(plan_for_rank(_sel(), TOPO, 3, directory=tmp_path)).__name__ == "Plan"
    assert 0.3 <= time.monotonic() - began
    assert lock.exists()  # the holder's to release, not ours
    assert proofs.lookup(_sel(), TOPO, directory=tmp_path) is not None


def test_a_waiter_gets_the_proof_the_holder_stores(tmp_path):
    key = proofs.plan_key(_sel(), TOPO)
    claim = prooflock.Claim.take(tmp_path, key)
    got = []
    waiter = threading.Thread(
        target=lambda: got.append(plan_for_rank(_sel(), TOPO, 7, directory=tmp_path)))
    waiter.start()
    time.sleep(0.2)
    assert got == []  # waiting
    plan = _sel().build(TOPO)
    proofs.store(_sel(), TOPO, plan, directory=tmp_path)
    claim.release()
    waiter.join(timeout=30)
    assert type(got[0]).__name__ == "RankPlan" and got[0].rank == 7


def test_a_claim_released_without_a_proof_sends_the_waiter_to_prove(tmp_path):
    key = proofs.plan_key(_sel(), TOPO)
    claim = prooflock.Claim.take(tmp_path, key)
    got = []
    waiter = threading.Thread(
        target=lambda: got.append(plan_for_rank(_sel(), TOPO, 7, directory=tmp_path)))
    waiter.start()
    time.sleep(0.2)
    claim.release()  # (the holder's proof failed)
    waiter.join(timeout=60)
    assert type(got[0]).__name__ == "Plan"


def test_a_failed_proof_releases_the_claim(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise PlanError("broken on purpose")

    monkeypatch.setattr(proofs, "store", refuse)
    with pytest.raises(PlanError, match="broken on purpose"):
        plan_for_rank(_sel(), TOPO, 0, directory=tmp_path)
    assert list(tmp_path.glob("*.lock")) == []
    with pytest.raises(PlanError, match="broken on purpose"):
        proofs.prove(_sel(), TOPO, directory=tmp_path)
    assert list(tmp_path.glob("*.lock")) == []


def test_a_directory_that_cannot_hold_a_lock_proves_without_one(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.warns(Warning):  # (the proof cannot be stored either)
        part = plan_for_rank(_sel(), TOPO, 0, directory=blocker / "proofs")
    assert type(part).__name__ == "Plan"
