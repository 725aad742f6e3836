"""The disk proof cache: keys, hits, misses, corrupt files, and the environment.

(Attacks by other users on the cache, its locks and the key:
``test_proof_cache_security.py``.)"""

import json
import os
import warnings

import pytest

from wacoll import Topology
from wacoll.errors import ProofCacheWarning
from wacoll.plans import Call, lower, proofs, select
from wacoll.plans.rank import rank_program

TOPO = Topology.from_sizes([3, 2, 3])


def _sel(op="allgather", **kw):
    kw.setdefault("count", 4)
    kw.setdefault("itemsize", 8)
    return select(Call(op, **kw), TOPO)


@pytest.fixture(autouse=True)
def own_key(tmp_path_factory, monkeypatch):
    """A proof key of the test's own, not the user's."""
    path = tmp_path_factory.mktemp("key") / "proof-key"
    monkeypatch.setenv(proofs.KEY_ENV, str(path))
    return path


def _sign(record):
    """``record`` (a dict, its ``mac`` dropped) signed with the test's key, as JSON."""
    record = {k: v for k, v in record.items() if k != "mac"}
    return json.dumps(proofs.signed_record(proofs.proof_key(), record)).encode()


@pytest.fixture
def builds(monkeypatch):
    """Count whole-plan builds by the proof module."""
    seen = []
    real = proofs.build

    def counting(*args, **kwargs):
        seen.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(proofs, "build", counting)
    return seen


def test_cache_dir_follows_the_environment(tmp_path):
    for off in ("off", "OFF", "0", "no", "false", " off "):
        assert proofs.cache_dir({proofs.ENV: off}) is None
    assert proofs.cache_dir({proofs.ENV: str(tmp_path)}) == tmp_path
    assert proofs.cache_dir({"XDG_CACHE_HOME": "/x"}) == proofs.Path("/x/wacoll/proofs")
    home = proofs.cache_dir({proofs.ENV: ""})
    assert home.parts[-3:] == (".cache", "wacoll", "proofs") or home.parts[-2:] == (
        "wacoll",
        "proofs",
    )


def test_miss_proves_and_stores_then_hit_builds_nothing(tmp_path, builds):
    sel = _sel()
    first = proofs.prove(sel, TOPO, directory=tmp_path)
    assert not first.cached and first.plan is not None and first.plan.proved
    assert builds == ["allgather"]
    files = list(tmp_path.iterdir())
    assert [f.name for f in files] == [f"{first.key}.json"]
    record = json.loads(files[0].read_text())
    assert record["plan"] == proofs.plan_digest(first.plan)
    again = proofs.prove(sel, TOPO, directory=tmp_path)
    assert again.cached and again.plan is None and builds == ["allgather"]
    assert again.report == first.report and again.plan_digest == first.plan_digest


def test_off_means_no_files(tmp_path, monkeypatch, builds):
    monkeypatch.setenv(proofs.ENV, "off")
    sel = _sel()
    assert not proofs.prove(sel, TOPO).cached
    assert not proofs.prove(sel, TOPO).cached
    assert builds == ["allgather", "allgather"]
    monkeypatch.setenv(proofs.ENV, str(tmp_path / "c"))
    proofs.prove(sel, TOPO)
    assert proofs.prove(sel, TOPO).cached
    assert len(list((tmp_path / "c").iterdir())) == 1


def test_every_determinant_changes_the_key(monkeypatch):
    base = proofs.plan_key(_sel(), TOPO)
    others = [
        proofs.plan_key(_sel(count=5), TOPO),
        proofs.plan_key(_sel(itemsize=4), TOPO),
        proofs.plan_key(_sel("allgatherv", counts=(1,) * 8, count=None), TOPO),
        proofs.plan_key(_sel("allreduce", level="strict"), TOPO),
        proofs.plan_key(
            select(
                Call("allgather", count=4, itemsize=8),
                TOPO,
                options={"intra": "binomial"},
            ),
            TOPO,
        ),
        proofs.plan_key(
            select(Call("allgather", count=4, itemsize=8), TOPO, family="mpich"), TOPO
        ),
    ]
    other_topo = Topology.from_clusters([[0, 1, 2], [3, 4], [5, 6, 7]], wan_latency=0.02)
    others.append(
        proofs.plan_key(
            select(Call("allgather", count=4, itemsize=8), other_topo), other_topo
        )
    )
    monkeypatch.setattr(proofs, "code_digest", lambda: "changed code")
    others.append(proofs.plan_key(_sel(), TOPO))
    assert len({base, *others}) == len(others) + 1
    assert proofs.plan_key(_sel("allreduce", level="strict"), TOPO) != proofs.plan_key(
        _sel("allreduce", level="commutative"), TOPO
    )


def _record_path(tmp_path, sel):
    return tmp_path / f"{proofs.plan_key(sel, TOPO)}.json"


CORRUPTIONS = {  # (signed with the user's key, unless said: each check on its own)
    "not json": lambda r: b"{not json",
    "not utf-8": lambda r: b"\xff\xfe",
    "a list": lambda r: b"[]",
    "deeply nested": lambda r: b"[" * 60000,
    "unsigned": lambda r: json.dumps({k: v for k, v in r.items() if k != "mac"}).encode(),
    "tampered after signing": lambda r: json.dumps(
        {**r, "ranks": list(reversed(r["ranks"]))}
    ).encode(),
    "mac not a string": lambda r: json.dumps({**r, "mac": 0}).encode(),
    "extra field": lambda r: _sign({**r, "eval": "__import__('os')"}),
    "other key": lambda r: _sign({**r, "key": "0" * 64}),
    "other format": lambda r: _sign({**r, "format": proofs.FORMAT + 1}),
    "bad digest": lambda r: _sign({**r, "plan": "xyz"}),
    "tampered report": lambda r: _sign(
        {**r, "report": {**r["report"], "max_wide_area_hops": 0}}
    ),
    "report types": lambda r: _sign({**r, "report": {**r["report"], "messages": "many"}}),
    "huge": lambda r: b" " * 70000 + _sign(r),
    "ranks short": lambda r: _sign({**r, "ranks": r["ranks"][:-1]}),
    "ranks not digests": lambda r: _sign({**r, "ranks": ["zz" * 32] * len(r["ranks"])}),
}


@pytest.mark.parametrize("how", sorted(CORRUPTIONS))
def test_a_corrupt_file_is_ignored_with_a_warning_and_replaced(tmp_path, builds, how):
    sel = _sel()
    proofs.prove(sel, TOPO, directory=tmp_path)
    path = _record_path(tmp_path, sel)
    good = json.loads(path.read_text())
    path.write_bytes(CORRUPTIONS[how](good))
    with pytest.warns(ProofCacheWarning, match="ignored"):
        proof = proofs.prove(sel, TOPO, directory=tmp_path)
    assert not proof.cached and len(builds) == 2
    assert json.loads(path.read_text()) == good  # the new proof replaced it
    assert proofs.prove(sel, TOPO, directory=tmp_path).cached


def test_build_proved_takes_the_cached_report_only_for_the_same_plan(
    tmp_path, monkeypatch
):
    sel = _sel()
    proofs.prove(sel, TOPO, directory=tmp_path)
    proofs_run = []
    from wacoll.plans import plan as plan_module

    real = plan_module.Plan.prove
    monkeypatch.setattr(
        plan_module.Plan, "prove", lambda self: proofs_run.append(1) or real(self)
    )
    plan = proofs.build_proved(sel, TOPO, directory=tmp_path)
    assert plan.proved and proofs_run == []
    # a record whose (valid) plan digest is another plan's: not trusted
    path = _record_path(tmp_path, sel)
    record = json.loads(path.read_text())
    path.write_bytes(_sign({**record, "plan": "0" * 64}))  # (the user's own record)
    with pytest.warns(ProofCacheWarning, match="digest mismatch"):
        plan = proofs.build_proved(sel, TOPO, directory=tmp_path)
    assert plan.proved and proofs_run == [1]
    assert json.loads(path.read_text())["plan"] == record["plan"]


def test_the_record_holds_each_ranks_program_digest(tmp_path):
    sel = _sel("reduce_scatter_block", level="commutative")
    proof = proofs.prove(sel, TOPO, directory=tmp_path)
    assert proof.rank_digests == tuple(
        proofs.program_digest(p) for p in proof.plan.programs
    )
    assert proofs.lookup(sel, TOPO, directory=tmp_path).rank_digests == proof.rank_digests


def test_a_rank_whose_program_is_not_the_proved_one_proves_the_whole_plan(tmp_path):
    from wacoll.plans.plan import Plan
    from wacoll.plans.rank import plan_for_rank

    sel = _sel("allgather")
    first = plan_for_rank(sel, TOPO, 5, directory=tmp_path)  # a miss: the whole plan
    assert isinstance(first, Plan)
    assert type(plan_for_rank(sel, TOPO, 5, directory=tmp_path)).__name__ == "RankPlan"
    path = _record_path(tmp_path, sel)
    record = json.loads(path.read_text())
    record["ranks"][5] = "0" * 64  # a valid digest of some other program
    path.write_bytes(_sign(record))  # (signed: the user's own record, of other code)
    with pytest.warns(ProofCacheWarning, match="rank 5's program derived alone"):
        again = plan_for_rank(sel, TOPO, 5, directory=tmp_path)
    assert isinstance(again, Plan) and again.proved
    # the new proof replaced the record; other ranks were never affected
    assert type(plan_for_rank(sel, TOPO, 5, directory=tmp_path)).__name__ == "RankPlan"


def test_unwritable_cache_warns_and_still_proves(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.warns(ProofCacheWarning, match="cannot be created"):
        proof = proofs.prove(_sel(), TOPO, directory=blocker / "sub")
    assert not proof.cached and proof.report.messages > 0


def test_a_cached_proof_lets_a_rank_derive_its_program_alone(tmp_path, builds):
    sel = _sel("alltoall", count=2)
    whole = proofs.prove(sel, TOPO, directory=tmp_path).plan
    want = [lower(whole, r) for r in range(TOPO.size)]
    del builds[:]
    proof = lambda s, t: proofs.prove(s, t, directory=tmp_path)  # noqa: E731
    for r in range(TOPO.size):
        got = rank_program(sel, TOPO, r, proof=proof)
        assert [s.label for s in got.steps] == [s.label for s in want[r].steps]
    assert builds == []  # every proof came from the cache: no whole plan built
    assert not any(name.startswith(".proof-") for name in os.listdir(tmp_path))


def test_a_proof_of_reproducible_arithmetic_is_of_the_plan_that_runs(tmp_path):
    # a strict float sum on accumulators: the proof is of the plan marked with its
    # arithmetic (level strict), the one build_proved and the ranks run
    sel = select(
        Call("allreduce", count=128, itemsize=8, level="strict", accumulator_itemsize=32),
        TOPO,
    )
    assert sel.arithmetic == "reproducible"
    proof = proofs.prove(sel, TOPO, directory=tmp_path)
    assert (proof.report.level, proof.report.arithmetic) == ("strict", "reproducible")
    with warnings.catch_warnings():
        warnings.simplefilter("error", ProofCacheWarning)  # no digest mismatch
        plan = proofs.build_proved(sel, TOPO, directory=tmp_path)
    assert plan.prove() == proof.report


def test_the_cache_is_bounded_and_evicts_the_least_recently_used(tmp_path, monkeypatch):
    """Past MAX_RECORDS (or MAX_CACHE_BYTES) a store removes the records used least
    recently; a lookup that trusts a record counts as a use."""
    monkeypatch.setattr(proofs, "MAX_RECORDS", 3)
    sels = [_sel("bcast", count=n, root=0) for n in (2, 3, 4, 5, 6)]
    keys = [proofs.plan_key(s, TOPO) for s in sels]
    stamp = 1_000_000_000
    for i, sel in enumerate(sels[:3]):
        proofs.prove(sel, TOPO, directory=tmp_path)
        path = tmp_path / f"{keys[i]}.json"
        os.utime(path, (stamp + i, stamp + i))  # written in this order
    assert proofs.lookup(sels[0], TOPO, directory=tmp_path) is not None  # used again
    proofs.prove(sels[3], TOPO, directory=tmp_path)  # the 4th: the oldest use goes
    kept = sorted(p.name[:-5] for p in tmp_path.glob("*.json"))
    assert kept == sorted([keys[0], keys[2], keys[3]])
    monkeypatch.setattr(proofs, "MAX_CACHE_BYTES", 1)  # bytes bound: only the new one
    proofs.prove(sels[4], TOPO, directory=tmp_path)
    assert [p.name[:-5] for p in tmp_path.glob("*.json")] == [keys[4]]
    (tmp_path / "notes.json").write_text("{}")  # not a record: never removed
    proofs.prove(sels[0], TOPO, directory=tmp_path)
    assert (tmp_path / "notes.json").exists()
