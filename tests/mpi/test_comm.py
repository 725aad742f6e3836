"""The rest of ``wacoll.Comm``: topology discovery, script plans, tracing, misc."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from mpi4py import MPI

import wacoll
from wacoll.errors import TopologyError
from wacoll.mpi.discover import topology_from_comm
from wacoll.plans import build
from wacoll.plans.scripts import write_scripts

P = MPI.COMM_WORLD.Get_size()
ME = MPI.COMM_WORLD.Get_rank()
W = MPI.COMM_WORLD


# ---------------------------------------------------------------------- discovery
def _labels(k=3):
    """Interleaved cluster labels: rank r is in cluster 'abc'[r % k]."""
    return [("c", "a", "b")[r % k] for r in range(P)]


def _expected_clusters(labels):
    groups = {}
    for r, label in enumerate(labels):
        groups.setdefault(label, []).append(r)
    return tuple(sorted((tuple(g) for g in groups.values()), key=min))


@pytest.mark.mpi(min_size=1)
def test_clusters_from_labels(mpi):
    labels = _labels()
    topo = mpi.run(
        lambda: topology_from_comm(W, env={"WACOLL_CLUSTERS": ",".join(labels)}),
        "topology_from_comm",
    )
    want = _expected_clusters(labels)
    mpi.assert_all(topo.clusters == want, f"{topo.clusters} != {want}")


@pytest.mark.mpi(min_size=1)
def test_clusters_from_host_names(mpi):
    host = MPI.Get_processor_name()
    env = {"WACOLL_CLUSTERS": f"elsewhere=west, {host}=east"}
    topo = mpi.run(lambda: topology_from_comm(W, env=env), "host mapping")
    mpi.assert_all(topo.clusters == (tuple(range(P)),), f"{topo.clusters}")
    mpi.same_error(
        lambda: topology_from_comm(W, env={"WACOLL_CLUSTERS": "nohost=x"}),
        TopologyError,
        match="host",
    )


@pytest.mark.mpi(min_size=1)
def test_bad_cluster_labels_raise_everywhere(mpi):
    labels = ",".join(_labels() + ["extra"])
    mpi.same_error(
        lambda: topology_from_comm(W, env={"WACOLL_CLUSTERS": labels}),
        TopologyError,
        match="labels",
    )
    # only one rank's environment is wrong
    env = {"WACOLL_CLUSTERS": ",".join(_labels()) + (",x" if ME == P - 1 else "")}
    mpi.same_error(
        lambda: topology_from_comm(W, env=env), TopologyError, match=f"rank {P - 1}"
    )


@pytest.mark.mpi(min_size=1)
def test_topology_file(mpi, mpi_tmp_path):
    want = mpi.topology(mpi.multi[0] if mpi.multi else "single")
    path = mpi_tmp_path / "topology.json"
    wrong = mpi_tmp_path / "wrong.json"
    if ME == 0:
        want.save(path)
        wacoll.Topology.single(P + 1).save(wrong)
    W.Barrier()
    topo = mpi.run(
        lambda: topology_from_comm(W, env={"WACOLL_TOPOLOGY": str(path)}),
        "WACOLL_TOPOLOGY",
    )
    mpi.assert_all(topo == want, f"{topo} != {want}")
    mpi.same_error(
        lambda: topology_from_comm(W, env={"WACOLL_TOPOLOGY": str(wrong)}),
        TopologyError,
        match="ranks",
    )
    mpi.same_error(
        lambda: topology_from_comm(
            W, env={"WACOLL_TOPOLOGY": str(mpi_tmp_path / "missing.json")}
        ),
        TopologyError,
    )


@pytest.mark.mpi(min_size=1)
def test_from_comm_and_comm_read_the_environment(mpi, monkeypatch):
    labels = _labels(2)
    monkeypatch.delenv("WACOLL_TOPOLOGY", raising=False)
    monkeypatch.setenv("WACOLL_CLUSTERS", ",".join(labels))
    topo = mpi.run(lambda: wacoll.topology_from_comm(W), "Topology.from_comm")
    want = _expected_clusters(labels)
    mpi.assert_all(topo.clusters == want, f"{topo.clusters} != {want}")
    comm = mpi.run(lambda: wacoll.Comm(W), "Comm(COMM_WORLD)")
    try:
        want_family = "magpie" if len(want) > 1 else "native"
        recv = np.zeros(P, np.int64)
        mpi.run(lambda: comm.Allgather(np.array([ME * 7]), recv), "Allgather")
        mpi.assert_equal(recv, np.arange(P, dtype=np.int64) * 7)
        mpi.assert_all(
            comm.network.clusters == want and comm.last_family == want_family,
            f"{comm.network.clusters}, {comm.last_family}",
        )
    finally:
        comm.Free()


@pytest.mark.mpi(min_size=1)
def test_default_topology_is_one_cluster_per_node(mpi, monkeypatch):
    monkeypatch.delenv("WACOLL_CLUSTERS", raising=False)
    monkeypatch.delenv("WACOLL_TOPOLOGY", raising=False)
    hosts = W.allgather(MPI.Get_processor_name())
    comm = mpi.run(lambda: wacoll.Comm(W), "Comm(COMM_WORLD)")
    try:
        mpi.assert_all(
            comm.network.nclusters == len(set(hosts)),
            f"{comm.network.clusters} for hosts {hosts}",
        )
    finally:
        comm.Free()


# ---------------------------------------------------------------------- scripts
@pytest.fixture(scope="module")
def script_dir(mpi, tmp_path_factory):
    """Script plans written by rank 0: a LAM-tree bcast, a chain reduce and an
    mpich alltoallv."""
    layout = mpi.multi[0] if mpi.multi else "single"
    topo = mpi.topology(layout)
    path = tmp_path_factory.mktemp("scripts") if ME == 0 else None
    path = W.bcast(str(path) if path else None, root=0)
    if ME == 0:
        write_scripts(build("bcast", topo, "tree", tree="lam"), path)
        write_scripts(
            build("reduce", topo, "tree", tree="chain", level="associative"), path
        )
        write_scripts(build("alltoallv", topo, "mpich", order="rotated"), path)
    W.Barrier()
    return layout, path


@pytest.mark.mpi(min_size=1)
def test_script_plans_run(mpi, script_dir):
    layout, path = script_dir
    comm = mpi.run(
        lambda: wacoll.Comm(W, mpi.topology(layout), scripts=path, family="scripts"),
        "Comm(scripts=...)",
    )
    problems = []
    try:
        buf = mpi.ints(5) if ME == 0 else np.zeros(5, np.int64)
        _, exc = mpi.outcome(lambda: comm.Bcast(buf, root=0))
        if exc or (buf != mpi.ints(5, rank=0)).any() or comm.last_plan.algorithm != "lam":
            problems.append(f"Bcast: {exc!r}, {comm.last_plan.algorithm}")
        recv = np.zeros(4) if ME == 0 else None
        want = np.zeros(4) if ME == 0 else None
        W.Reduce(mpi.exact(4), want, op=MPI.SUM, root=0)
        _, exc = mpi.outcome(
            lambda: comm.Reduce(mpi.exact(4), recv, op=MPI.SUM, level="associative")
        )
        if exc or (ME == 0 and (recv != want).any()) or comm.last_plan.family != "tree":
            problems.append(f"Reduce: {exc!r}, {recv}, {comm.last_plan.family}")
        # an operation without a script runs the default family's plan
        got = np.zeros(2 * P, np.int64)
        _, exc = mpi.outcome(lambda: comm.Allgather(mpi.ints(2), got))
        ref = np.zeros(2 * P, np.int64)
        W.Allgather(mpi.ints(2), ref)
        if exc or (got != ref).any():
            problems.append(f"Allgather fallback: {exc!r}")
    finally:
        comm.Free()
    mpi.assert_all(not problems, "; ".join(problems))


@pytest.mark.mpi(min_size=2)
def test_script_plan_with_another_root(mpi, script_dir):
    """The bcast script is rooted at rank 0: Bcast from another root must still
    broadcast the root's data (another plan, or an error on every rank), never
    rank 0's."""
    layout, path = script_dir
    comm = mpi.run(
        lambda: wacoll.Comm(W, mpi.topology(layout), scripts=path, family="scripts"),
        "Comm(scripts=...)",
    )
    root = P - 1
    try:
        buf = mpi.ints(5)
        _, exc = mpi.outcome(lambda: comm.Bcast(buf, root=root))
        outcomes = W.allgather(None if exc is None else str(exc))
        ok = (
            all(o is not None for o in outcomes)
            if exc is not None
            else (buf == mpi.ints(5, rank=root)).all()
        )
        mpi.assert_all(
            ok,
            f"Bcast(root={root}) with a root-0 script: got {buf[:2]}..., "
            f"want {mpi.ints(5, rank=root)[:2]}... ({outcomes[ME]})",
        )
    finally:
        comm.Free()


@pytest.mark.mpi(min_size=1)
def test_script_plan_for_a_vector_all_to_all(mpi, script_dir):
    """An alltoallv script runs with the call's counts (a P x P matrix)."""
    layout, path = script_dir
    comm = mpi.run(
        lambda: wacoll.Comm(W, mpi.topology(layout), scripts=path, family="scripts"),
        "Comm(scripts=...)",
    )
    scounts = [(ME + j) % 3 for j in range(P)]
    rcounts = [(j + ME) % 3 for j in range(P)]
    send = mpi.ints(sum(scounts))
    got = np.full(sum(rcounts), -1, np.int64)
    want = got.copy()
    W.Alltoallv([send, scounts], [want, rcounts])
    try:
        _, exc = mpi.outcome(lambda: comm.Alltoallv([send, scounts], [got, rcounts]))
    finally:
        comm.Free()
    mpi.assert_all(
        exc is None and got.tobytes() == want.tobytes(),
        f"Alltoallv with a script plan: {exc!r}, got {got}, want {want}",
    )


@pytest.mark.mpi(min_size=1)
def test_scripts_from_the_environment(mpi, script_dir, monkeypatch):
    layout, path = script_dir
    monkeypatch.setenv("WACOLL_SCRIPTS", path)
    comm = mpi.run(
        lambda: wacoll.Comm(W, mpi.topology(layout), family="scripts"),
        "Comm with $WACOLL_SCRIPTS",
    )
    try:
        buf = mpi.ints(3) if ME == 0 else np.zeros(3, np.int64)
        mpi.run(lambda: comm.Bcast(buf), "Bcast")
        mpi.assert_all(
            (buf == mpi.ints(3, rank=0)).all() and comm.last_plan.algorithm == "lam",
            "script Bcast",
        )
    finally:
        comm.Free()
    monkeypatch.delenv("WACOLL_SCRIPTS")
    mpi.same_error(
        lambda: wacoll.Comm(W, mpi.topology(layout), family="scripts"), match="scripts"
    )


# ---------------------------------------------------------------------- tracing
@pytest.mark.mpi(min_size=1)
def test_trace_file_has_one_track_per_rank(mpi, mpi_tmp_path):
    layout = mpi.multi[0] if mpi.multi else "single"
    comm = wacoll.Comm(W, mpi.topology(layout), trace=True)
    path = mpi_tmp_path / "trace.json"
    try:
        buf = np.arange(4.0) if ME == 0 else np.zeros(4)
        mpi.run(lambda: comm.Bcast(buf), "Bcast")
        out = np.zeros(4)
        mpi.run(lambda: comm.Allreduce(buf, out, op=MPI.SUM), "Allreduce")
        mpi.run(lambda: comm.write_trace(str(path)), "write_trace")
    finally:
        comm.Free()
    ok, detail = True, ""
    if ME == 0:
        try:
            events = json.loads(path.read_text())["traceEvents"]
            tracks = {e["tid"] for e in events if e.get("ph") == "M"}
            busy = {e["tid"] for e in events if e.get("ph") == "X"}
            ops = {
                e["name"].split(" ")[0]
                for e in events
                if e.get("ph") == "X" and e.get("cat") == "operation"
            }
            ok = (
                tracks == set(range(P))
                and busy == set(range(P))
                and {"bcast", "allreduce"} <= ops
            )
            detail = f"tracks {sorted(tracks)}, busy {sorted(busy)}, operations {ops}"
        except (OSError, ValueError, KeyError) as exc:
            ok, detail = False, repr(exc)
    mpi.assert_all(ok, detail)
    untraced = mpi.comm("single")
    mpi.same_error(lambda: untraced.write_trace(str(path)), match="trace")


# ---------------------------------------------------------------------- misc
@pytest.mark.mpi(min_size=1)
def test_size_rank_and_private_communicator(mpi):
    comm = mpi.comm("single")
    dup = comm.mpi_comm
    ok = (
        comm.Get_size() == P
        and comm.Get_rank() == ME
        and dup != W
        and MPI.Comm.Compare(dup, W) == MPI.CONGRUENT
    )
    mpi.assert_all(ok, "size, rank or private duplicate")


@pytest.mark.mpi(min_size=1)
def test_free(mpi):
    comm = wacoll.Comm(W, mpi.topology("single"))
    comm.Free()
    comm.Free()  # a second Free is harmless
    mpi.assert_all(comm.mpi_comm is None, "not freed")


@pytest.mark.mpi(min_size=1)
def test_barrier_families(mpi):
    layout = mpi.multi[0] if mpi.multi else "single"
    comm = mpi.comm(layout)
    for family in (None, "magpie", "mpich"):
        mpi.run(lambda: comm.Barrier(family=family), f"Barrier family={family}")


@pytest.mark.mpi(min_size=1)
def test_last_plan_names_the_family_used(mpi):
    layout = mpi.multi[0] if mpi.multi else "single"
    comm = mpi.comm(layout)
    out = np.zeros(2)
    seen = []
    for family in ("mpich", "tree", "magpie"):
        mpi.run(
            lambda: comm.Allreduce(np.ones(2), out, op=MPI.SUM, family=family),
            f"Allreduce family={family}",
        )
        seen.append(comm.last_plan.family)
    mpi.assert_all(seen == ["mpich", "tree", "magpie"], f"last_plan families {seen}")


@pytest.mark.mpi(min_size=1)
def test_check_modes_and_their_environment_variable(mpi, monkeypatch):
    """``check=`` chooses the mode, else ``WACOLL_CHECK`` (an argument beats the
    environment); ``validate=False`` is ``check="off"``; every mode gives the
    library's results."""
    topo = wacoll.Topology.from_sizes([P - P // 2, P // 2] if P > 1 else [1])
    send, want = np.arange(4.0) + ME, np.zeros(4)
    W.Allreduce(send, want, op=MPI.SUM)
    for kwargs, env, mode in (
        ({}, None, "beside"),
        ({"check": "first"}, None, "first"),
        ({"validate": False}, None, "off"),
        ({}, "first", "first"),
        ({"check": "beside"}, "first", "beside"),
        ({"validate": False}, "first", "off"),
    ):
        if env is None:
            monkeypatch.delenv("WACOLL_CHECK", raising=False)
        else:
            monkeypatch.setenv("WACOLL_CHECK", env)
        comm = wacoll.Comm(W, topo, **kwargs)
        recv = np.zeros(4)
        comm.Allreduce(send, recv, op=MPI.SUM)
        mpi.assert_all(
            comm.check == mode and comm.validate == (mode != "off"),
            f"{kwargs} with WACOLL_CHECK={env}: mode {comm.check}",
        )
        mpi.assert_equal(recv, want)
        comm.Free()


@pytest.mark.mpi(min_size=2)
def test_last_reason_says_why_each_call_ran_what_it_ran(mpi, tmp_path_factory):
    """``comm.last_reason`` and the trace say why: the selection's rule, the
    predicted times of the priced candidates, a forced family, a replayed call."""
    comm = wacoll.Comm(W, wacoll.Topology.from_sizes([P - P // 2, P // 2]), trace=True)
    try:
        small, out = np.ones(2), np.zeros(2)
        comm.Allreduce(small, out)
        first = comm.last_reason
        big = np.ones(1 << 17)
        comm.Allreduce(big, np.zeros_like(big))
        priced = comm.last_reason
        comm.Allreduce(small, out, family="mpich")
        forced = comm.last_reason
        traced = [
            r["args"].get("reason")
            for r in comm.tracer.records
            if r["cat"] == "operation"
        ]
        mpi.assert_all("MagPIe" in first, f"small call: {first!r}")
        mpi.assert_all(
            priced.startswith("predicted fastest")
            and re.search(r"magpie [\d.]+ (us|ms|s)\b", priced) is not None,
            f"1 MiB call: {priced!r}",
        )
        mpi.assert_all("'mpich' asked for by the call" in forced, f"forced: {forced!r}")
        mpi.assert_all(traced == [first, priced, forced], f"trace: {traced}")
    finally:
        comm.Free()
    plain = wacoll.Comm(W, wacoll.Topology.single(P))
    try:
        for _ in range(3):
            plain.Allreduce(np.ones(2), np.zeros(2))
        mpi.assert_all(
            plain.last_route == "replayed"
            and plain.last_reason == "a repeated call, run as recorded",
            f"{plain.last_route}: {plain.last_reason!r}",
        )
        plain.Bcast(np.zeros(3), root=0)
        mpi.assert_all(
            plain.last_reason == "one cluster: the MPI library's own collective",
            plain.last_reason,
        )
    finally:
        plain.Free()
