"""Processes that miss the proof cache together prove the plan once: one claims it,
the others wait for its proof; a dead, stuck or failed prover never leaves a waiter
hanging."""

import multiprocessing
import os
import threading
import time

import pytest

from wacoll import PlanError, Topology
from wacoll.errors import ProofCacheWarning
from wacoll.plans import Call, Plan, prooflock, proofs, select
from wacoll.plans.rank import plan_for_rank

TOPO = Topology.from_sizes([24, 24, 16])


@pytest.fixture(autouse=True)
def own_key(tmp_path_factory, monkeypatch):
    """A proof key of the test's own (created by the first process that needs it)."""
    monkeypatch.setenv(proofs.KEY_ENV, str(tmp_path_factory.mktemp("key") / "k"))


def _sel():
    return select(Call("allgather", count=4, itemsize=8), TOPO)


def _first_call(directory, rank, start, results):
    start.wait()
    part = plan_for_rank(_sel(), TOPO, rank, directory=directory)
    results.put((rank, type(part).__name__))


def test_processes_that_miss_together_prove_once(tmp_path, short_wait):
    ctx = multiprocessing.get_context("fork")
    ranks = [0, 5, 31, 63]
    start, results = ctx.Barrier(len(ranks)), ctx.Queue()
    procs = [
        ctx.Process(target=_first_call, args=(str(tmp_path), r, start, results))
        for r in ranks
    ]
    for p in procs:
        p.start()
    got = dict(results.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    # exactly one built and proved the whole plan; the others derived their part
    assert sorted(got.values()) == ["Plan", "RankPlan", "RankPlan", "RankPlan"]
    assert [f.suffix for f in tmp_path.iterdir()] == [".json"]  # no lock left


def _hold_and_die(directory, key, held):
    prooflock.Claim.take(directory, key)
    held.set()
    os._exit(0)  # without releasing: the kernel drops the lock with the process


@pytest.fixture
def short_wait(monkeypatch):
    """A failing lock costs seconds, not the default 300."""
    monkeypatch.setenv(prooflock.WAIT_ENV, "20")


def _key():
    return proofs.plan_key(_sel(), TOPO)


def test_a_lock_of_a_dead_process_is_free(tmp_path, short_wait):
    ctx = multiprocessing.get_context("fork")
    held = ctx.Event()
    holder = ctx.Process(target=_hold_and_die, args=(str(tmp_path), _key(), held))
    holder.start()
    assert held.wait(30)
    holder.join(30)
    (tmp_path / f"{_key()}.lock").write_text("garbage left by a crash")
    began = time.monotonic()
    assert type(plan_for_rank(_sel(), TOPO, 3, directory=tmp_path)).__name__ == "Plan"
    assert time.monotonic() - began < 15
    assert proofs.lookup(_sel(), TOPO, directory=tmp_path) is not None
    prooflock.Claim.take(tmp_path, _key()).release()  # free again


def test_a_stuck_prover_is_waited_for_at_most_the_limit(tmp_path, monkeypatch):
    claim = prooflock.Claim.take(tmp_path, _key())  # held, never proved
    try:
        monkeypatch.setenv(prooflock.WAIT_ENV, "0.3")
        began = time.monotonic()
        part = plan_for_rank(_sel(), TOPO, 3, directory=tmp_path)
        assert 0.3 <= time.monotonic() - began < 15
        assert type(part).__name__ == "Plan"
        assert proofs.lookup(_sel(), TOPO, directory=tmp_path) is not None
    finally:
        claim.release()


def _waiter(tmp_path, rank):
    got = []
    thread = threading.Thread(
        daemon=True,
        target=lambda: got.append(plan_for_rank(_sel(), TOPO, rank, directory=tmp_path)),
    )
    thread.start()
    return thread, got


def test_a_waiter_gets_the_proof_the_holder_stores(tmp_path, short_wait):
    claim = prooflock.Claim.take(tmp_path, _key())
    try:
        thread, got = _waiter(tmp_path, 7)
        time.sleep(0.2)
        assert got == []  # waiting
        proofs.store(_sel(), TOPO, _sel().build(TOPO), directory=tmp_path)
    finally:
        claim.release()
    thread.join(timeout=30)
    assert type(got[0]).__name__ == "RankPlan" and got[0].rank == 7


def test_a_claim_given_up_without_a_proof_sends_the_waiter_to_prove(tmp_path, short_wait):
    claim = prooflock.Claim.take(tmp_path, _key())
    try:
        thread, got = _waiter(tmp_path, 7)
        time.sleep(0.2)
    finally:
        claim.release()  # (the holder's proof failed)
    thread.join(timeout=60)
    assert type(got[0]).__name__ == "Plan"


def test_a_failed_proof_releases_the_claim(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise PlanError("broken on purpose")

    monkeypatch.setattr(
        Plan, "prove", refuse
    )  # (the proof plan_for_rank and prove() make)
    with pytest.raises(PlanError, match="broken on purpose"):
        plan_for_rank(_sel(), TOPO, 0, directory=tmp_path)
    prooflock.Claim.take(tmp_path, _key()).release()  # free
    with pytest.raises(PlanError, match="broken on purpose"):
        proofs.prove(_sel(), TOPO, directory=tmp_path)
    prooflock.Claim.take(tmp_path, _key()).release()


def test_a_failed_lookup_after_the_claim_releases_it(tmp_path):
    def broken():
        raise RuntimeError("unreadable")

    with pytest.raises(RuntimeError, match="unreadable"):
        prooflock.await_proof(tmp_path, "k", broken)
    prooflock.Claim.take(tmp_path, "k").release()  # free


def test_a_directory_that_cannot_hold_a_lock_proves_without_one(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.warns(ProofCacheWarning):  # (the proof cannot be stored either)
        part = plan_for_rank(_sel(), TOPO, 0, directory=blocker / "proofs")
    assert type(part).__name__ == "Plan"


def test_a_bad_wait_setting_warns_and_waits_the_default():
    for bad in ("soon", "-1", "inf", "nan"):
        with pytest.warns(ProofCacheWarning, match="WACOLL_PROOF_WAIT"):
            assert prooflock.wait_limit({prooflock.WAIT_ENV: bad}) == 300.0
    assert prooflock.wait_limit({prooflock.WAIT_ENV: "0"}) == 0.0
