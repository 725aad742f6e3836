"""A communicator measures the links it is not told (wacoll.mpi.links): on clusters
discovered without link parameters, every rank gets the same measured topology; a
young record on disk is reused without measuring, a stale or corrupted one is
measured again with a warning; an explicit topology wins; collectives still give the
MPI library's results.

The test session sets ``WACOLL_MEASURE=off`` (tests/conftest.py); these tests turn it
on with ``measure=`` and give the ranks a private ``XDG_CACHE_HOME``.
"""

import json
import math
import shutil
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from mpi4py import MPI

import wacoll
from wacoll import Topology
from wacoll.errors import LinksWarning
from wacoll.mpi import links

from .conftest import RANK, SIZE, WORLD

pytestmark = [
    pytest.mark.mpi(min_size=2),
    pytest.mark.skipif(SIZE < 2, reason="measured links need two clusters"),
]

LABELS = ",".join("0" if r < (SIZE + 1) // 2 else "1" for r in range(SIZE))


@pytest.fixture
def links_env(monkeypatch):
    """Two declared clusters, a private cache directory (the same on every rank)."""
    where = WORLD.bcast(tempfile.mkdtemp(prefix="wacoll-links-") if RANK == 0 else None)
    monkeypatch.setenv("XDG_CACHE_HOME", where)
    monkeypatch.setenv("WACOLL_CLUSTERS", LABELS)
    monkeypatch.delenv("WACOLL_TOPOLOGY", raising=False)
    yield Path(where)
    WORLD.Barrier()
    if RANK == 0:
        shutil.rmtree(where, ignore_errors=True)


def _record(where: Path) -> Path:
    found = sorted((where / "wacoll" / "links").glob("*.json"))
    assert len(found) == 1, found
    return found[0]


def _made(**kwargs):
    """A communicator and the LinksWarnings its construction raised on this rank."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", LinksWarning)
        comm = wacoll.Comm(WORLD, **kwargs)
    return comm, [str(w.message) for w in seen if w.category is LinksWarning]


def _links(topo: Topology) -> list:
    out = [topo.intra.latency, topo.intra.bandwidth, topo.wan.latency, topo.wan.bandwidth]
    for _, link in topo.wan_pairs:
        out += [link.latency, link.bandwidth]
    return out


def test_measured_then_reused_equal_everywhere(mpi, links_env):
    comm, said = _made(measure="on")
    try:
        topo = comm.network
        everyone = WORLD.allgather(topo.to_dict())
        mpi.assert_all(all(d == everyone[0] for d in everyone), "topologies differ")
        mpi.assert_all(comm.links_source == "measured", comm.links_source)
        mpi.assert_all(topo.nclusters == 2 and not said, f"{topo} {said}")
        values = _links(topo)
        mpi.assert_all(all(math.isfinite(v) and v > 0 for v in values), values)
        mpi.assert_all(len(topo.wan_pairs) == 2, topo.wan_pairs)
        mpi.assert_all(topo != Topology.from_clusters(topo.clusters), "the defaults")
        when = comm.links_measured_at
        mpi.assert_all(when is not None and abs(time.time() - when) < 600, when)
        if RANK == 0:
            data = json.loads(_record(links_env).read_text())
            assert data["clusters"] == [list(c) for c in topo.clusters]
            assert data["measured_at"] == when
        WORLD.Barrier()

        begin = time.perf_counter()
        again, said = _made(measure="on")
        took = time.perf_counter() - begin
        try:
            mpi.assert_all(
                again.links_source == "cached" and not said,
                f"{again.links_source} {said}",
            )
            mpi.assert_all(
                again.network == topo and again.links_measured_at == when,
                f"{again.network}",
            )
            mpi.assert_all(took < 30, took)
            dup = again.Dup()
            mpi.assert_all(
                dup.links_source == "cached" and dup.network == topo, dup.links_source
            )
            dup.Free()
        finally:
            again.Free()
        fresh, said = _made(measure="fresh")
        mpi.assert_all(
            fresh.links_source == "measured" and not said, f"{fresh.links_source} {said}"
        )
        mpi.assert_all(fresh.links_measured_at >= when, "not measured again")
        fresh.Free()
    finally:
        comm.Free()


@pytest.mark.parametrize("damage", ["stale", "corrupted", "not-a-file"])
def test_a_bad_record_is_measured_again_with_a_warning(mpi, links_env, damage):
    wacoll.Comm(WORLD, measure="on").Free()
    if RANK == 0:
        path = _record(links_env)
        if damage == "stale":
            data = json.loads(path.read_text())
            data["measured_at"] -= 2 * 86400
            path.write_text(json.dumps(data))
        elif damage == "corrupted":
            path.write_text('{"version": 1, "rtt": NaN')
        else:
            path.unlink()
            path.mkdir()
    WORLD.Barrier()
    comm, said = _made(measure="on")
    try:
        mpi.assert_all(comm.links_source == "measured", comm.links_source)
        want = {
            "stale": "old",
            "corrupted": "not JSON",
            "not-a-file": "not a regular file",
        }[damage]
        if RANK == 0:
            ok = len(said) >= 1 and want in said[0]
        else:
            ok = not said
        mpi.assert_all(ok, said)
    finally:
        comm.Free()


def test_a_cache_that_cannot_be_written_only_warns(mpi, links_env, monkeypatch):
    blocker = links_env / "file"
    if RANK == 0:
        blocker.write_text("not a directory")
    WORLD.Barrier()
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    comm, said = _made(measure="on")
    try:
        mpi.assert_all(comm.links_source == "measured", comm.links_source)
        ok = (
            (len(said) == 1 and "could not be kept" in said[0]) if RANK == 0 else not said
        )
        mpi.assert_all(ok, said)
    finally:
        comm.Free()


def test_given_links_win(mpi, links_env, monkeypatch):
    topo = Topology.from_sizes(
        [(SIZE + 1) // 2, SIZE // 2], wan_latency=0.5, wan_bandwidth=123.0
    )
    comm = wacoll.Comm(WORLD, topo, measure="fresh")
    try:
        mpi.assert_all(
            comm.network == topo and comm.links_source == "given", comm.links_source
        )
    finally:
        comm.Free()
    if RANK == 0:
        topo.save(links_env / "topo.json")
    WORLD.Barrier()
    monkeypatch.setenv("WACOLL_TOPOLOGY", str(links_env / "topo.json"))
    comm = wacoll.Comm(WORLD, measure="on")
    try:
        mpi.assert_all(
            comm.network == topo and comm.links_source == "given", comm.links_source
        )
    finally:
        comm.Free()
    nothing = not (links_env / "wacoll").exists() if RANK == 0 else True
    mpi.assert_all(nothing, "a record was written for given links")


def test_off_keeps_the_defaults(mpi, links_env):
    comm = wacoll.Comm(WORLD, measure="off")
    try:
        mpi.assert_all(
            comm.links_source == "defaults"
            and comm.network == Topology.from_clusters(comm.network.clusters),
            comm.links_source,
        )
    finally:
        comm.Free()
    with pytest.raises(wacoll.WacollError, match="measure must be one of"):
        wacoll.Comm(WORLD, measure="sometimes")


def test_collectives_on_measured_links_equal_the_library(mpi, links_env):
    comm = wacoll.Comm(WORLD, measure="on")
    try:
        wrong = []
        for n in (1, 7, 3000):
            send = mpi.ints(n, seed=n)
            got, want = np.zeros(n, np.int64), np.zeros(n, np.int64)
            comm.Allreduce(send, got)
            WORLD.Allreduce(send, want)
            if not np.array_equal(got, want):
                wrong.append(("Allreduce", n))
            got[:] = want[:] = send if RANK == SIZE - 1 else 0
            comm.Bcast(got, root=SIZE - 1)
            WORLD.Bcast(want, root=SIZE - 1)
            if not np.array_equal(got, want):
                wrong.append(("Bcast", n))
            got, want = np.zeros(n * SIZE, np.int64), np.zeros(n * SIZE, np.int64)
            comm.Allgather(send, got)
            WORLD.Allgather(send, want)
            if not np.array_equal(got, want):
                wrong.append(("Allgather", n))
            got, want = np.zeros(n, np.int64), np.zeros(n, np.int64)
            comm.Reduce(send, got, op=MPI.MAX, root=0)
            WORLD.Reduce(send, want, op=MPI.MAX, root=0)
            if not np.array_equal(got, want):
                wrong.append(("Reduce", n))
        mpi.assert_all(not wrong, wrong)
    finally:
        comm.Free()


def test_t_ini_is_measured_kept_and_used_by_the_heterogeneous_trees(mpi, links_env):
    comm = wacoll.Comm(WORLD, measure="on")
    try:
        t_ini = comm.network.t_ini
        if max(map(len, comm.network.clusters)) < 2:
            # no two ranks share a cluster: nothing to measure t_ini between, and a
            # tree that needs it says so on every rank
            mpi.assert_all(t_ini is None, t_ini)
            buf = np.zeros(3)
            mpi.same_error(
                lambda: comm.Bcast(buf, family="tree", tree="fnf"), match="t_ini"
            )
            return
        mpi.assert_all(
            t_ini is not None
            and len(t_ini) == SIZE
            and all(math.isfinite(t) and 0 < t < 1 for t in t_ini),
            t_ini,
        )
        mpi.assert_all(
            WORLD.allgather(list(t_ini)) == [list(t_ini)] * SIZE,
            "t_ini differs between ranks",
        )
        if RANK == 0:
            data = json.loads(_record(links_env).read_text())
            assert set(data["ranks"]) == {
                f"{i},{j}" for i, j in links.t_ini_pairs(comm.network.clusters)
            }
        again = wacoll.Comm(WORLD, measure="on")
        try:
            mpi.assert_all(
                again.links_source == "cached" and again.network.t_ini == t_ini,
                again.network.t_ini,
            )
        finally:
            again.Free()
        # Fastest-Node-First and the optimal tree build on the measured t_ini
        for tree in ("fnf", "optimal"):
            got = np.arange(6.0) if RANK == SIZE - 1 else np.zeros(6)
            mpi.run(
                lambda: comm.Bcast(got, root=SIZE - 1, family="tree", tree=tree),
                f"Bcast over the {tree} tree",
            )
            mpi.assert_equal(got, np.arange(6.0))
    finally:
        comm.Free()


@pytest.mark.parametrize("ranks", [None, {"0,2": 1e-5}, "huge"])
def test_a_record_without_this_layouts_t_ini_is_measured_again(mpi, links_env, ranks):
    comm = wacoll.Comm(WORLD, measure="on")
    shared = max(map(len, comm.network.clusters)) > 1  # some rank pairs to measure
    comm.Free()
    if RANK == 0:
        path = _record(links_env)
        data = json.loads(path.read_text())
        if ranks is None:
            del data["ranks"]  # written before t_ini was measured
        elif ranks == "huge":
            data["ranks"] = {k: 1e300 for k in data["ranks"]}
        else:
            data["ranks"] = ranks  # pairs across clusters: not this layout's
        path.write_text(json.dumps(data))
    WORLD.Barrier()
    comm, said = _made(measure="on")
    try:
        if shared or ranks == {"0,2": 1e-5}:
            mpi.assert_all(comm.links_source == "measured", comm.links_source)
            mpi.assert_all(RANK != 0 or len(said) == 1, said)
        else:  # one rank per cluster: the record never had rank pairs to give
            mpi.assert_all(
                comm.links_source == "cached" and not said and comm.network.t_ini is None,
                f"{comm.links_source} {said}",
            )
    finally:
        comm.Free()


def test_the_age_limit_comes_from_the_environment(mpi, links_env, monkeypatch):
    wacoll.Comm(WORLD, measure="on").Free()
    time.sleep(0.05)
    # younger than a day, older than a few milliseconds: measured again, saying why
    monkeypatch.setenv("WACOLL_LINKS_MAX_AGE", "0.00001")
    comm, said = _made(measure="on")
    try:
        mpi.assert_all(comm.links_source == "measured", comm.links_source)
        mpi.assert_all(RANK != 0 or any("older than" in s for s in said), said)
    finally:
        comm.Free()
    monkeypatch.setenv("WACOLL_LINKS_MAX_AGE", "a week")
    mpi.same_error(
        lambda: wacoll.Comm(WORLD, measure="on"),
        wacoll.errors.ConfigurationError,
        match="WACOLL_LINKS_MAX_AGE",
    )
