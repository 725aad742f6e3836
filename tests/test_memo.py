"""Records of what a run worked out, kept beside the proofs for the next run
(:mod:`wacoll.plans.memo`), and the candidates a shape explores kept so
(:meth:`wacoll.mpi.dispatch.Dispatcher.explored`). Records are signed with the
test run's own proof key (``tests/conftest.py``)."""

import json
import os

import pytest

from wacoll import Topology
from wacoll.mpi import calls
from wacoll.mpi.dispatch import Dispatcher
from wacoll.mpi.learning import explored
from wacoll.plans import Call, Policy, memo, proofs


def _counting(value):
    seen = []

    def compute():
        seen.append(1)
        return value

    return compute, seen


def test_a_value_is_worked_out_once_per_inputs(tmp_path):
    compute, seen = _counting([None, "native", "modern"])
    for _ in range(3):
        got = memo.remembered("k", {"n": 1}, compute, directory=tmp_path)
        assert got == [None, "native", "modern"]
    assert len(seen) == 1
    memo.remembered("k", {"n": 2}, compute, directory=tmp_path)
    memo.remembered("other kind", {"n": 1}, compute, directory=tmp_path)
    assert len(seen) == 3


def test_without_a_cache_every_call_works_it_out():
    compute, seen = _counting(7)
    for _ in range(2):
        assert memo.remembered("k", {"n": 1}, compute, directory=False) == 7
    assert len(seen) == 2


def test_inputs_that_are_not_json_are_not_remembered(tmp_path):
    compute, seen = _counting(1)
    for _ in range(2):
        assert memo.remembered("k", {"x": object()}, compute, directory=tmp_path) == 1
    assert len(seen) == 2
    assert not list(tmp_path.glob("*.json"))


def test_a_value_the_caller_refuses_is_worked_out_again(tmp_path):
    memo.remember("k", {"n": 1}, ["forged"], directory=tmp_path)
    compute, seen = _counting(["good"])
    got = memo.remembered(
        "k", {"n": 1}, compute, accept=lambda v: v == ["good"], directory=tmp_path
    )
    assert got == ["good"] and len(seen) == 1
    assert memo.recall("k", {"n": 1}, directory=tmp_path) == ["good"]


def test_a_record_not_signed_with_the_users_key_is_not_read(tmp_path):
    memo.remember("k", {"n": 1}, "mine", directory=tmp_path)
    (path,) = tmp_path.glob("*.json")
    record = json.loads(path.read_text())
    record["value"] = "theirs"  # (its code no longer matches)
    path.write_text(json.dumps(record))
    assert memo.recall("k", {"n": 1}, directory=tmp_path) is None
    record.pop("mac")
    path.write_text(json.dumps(record))
    assert memo.recall("k", {"n": 1}, directory=tmp_path) is None


@pytest.mark.parametrize(
    "content", [b"", b"not json", b"[1, 2]", b'{"value": 1}', b"x" * 20000]
)
def test_a_malformed_record_is_not_read(tmp_path, content):
    key = memo.memo_key("k", {"n": 1})
    (tmp_path / f"{key}.json").write_bytes(content)
    assert memo.recall("k", {"n": 1}, directory=tmp_path) is None


def test_a_link_where_a_record_should_be_is_not_followed(tmp_path):
    memo.remember("k", {"n": 2}, "elsewhere", directory=tmp_path)
    (target,) = tmp_path.glob("*.json")
    key = memo.memo_key("k", {"n": 1})
    os.symlink(target, tmp_path / f"{key}.json")
    assert memo.recall("k", {"n": 1}, directory=tmp_path) is None


def _dispatcher(topology):
    return Dispatcher(topology, calls.Place(0, topology.size), Policy(), None, {})


def test_the_candidates_a_shape_explores_are_priced_once_per_network(
    tmp_path, monkeypatch
):
    monkeypatch.setenv(proofs.ENV, str(tmp_path))
    grid = Topology.from_sizes([2, 2, 2, 2])
    call = Call("allreduce", count=128, itemsize=8)
    priced = []
    real = Dispatcher.predicted

    def counting(self, c, family):
        priced.append(family)
        return real(self, c, family)

    monkeypatch.setattr(Dispatcher, "predicted", counting)
    first = _dispatcher(grid).explored(call)
    assert priced, "the first run prices the families"
    # what pricing gives, the same with or without the record
    fresh = _dispatcher(grid)
    assert first == explored("allreduce", lambda f: real(fresh, call, f))
    assert first[:2] == [None, "native"] and len(first) == 3
    priced.clear()
    assert _dispatcher(grid).explored(call) == first  # a later run: read
    assert priced == []
    slower = Topology.from_clusters(grid.clusters, wan_latency=0.05)
    _dispatcher(slower).explored(call)  # another network: priced again
    assert priced
