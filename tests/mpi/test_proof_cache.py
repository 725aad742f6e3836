"""A forged proof in the cache does not change what ``wacoll.Comm`` computes.

A record that vouches for the wrong plan (another plan's per-rank digests, a made-up
authentication code) is planted where a Bcast's proof is kept; a new communicator's
Bcast ignores it (:mod:`wacoll.plans.proofs`: records count only when signed with the
user's proof key), proves the plan again, and gives MPI's result.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import warnings

import pytest
from mpi4py import MPI

import wacoll
from wacoll.errors import ProofCacheWarning
from wacoll.plans import proofs

W = MPI.COMM_WORLD
ME = W.Get_rank()


def _bcast_records(folder):
    """The proof records of broadcasts in ``folder``: {path: record}."""
    found = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".json"):
            with open(os.path.join(folder, name)) as fh:
                record = json.load(fh)
            if record["report"]["op"] == "bcast":
                found[os.path.join(folder, name)] = record
    return found


def _forge(record):
    """The record with the wrong plan's rank digests (each rank gets another rank's)
    and an authentication code that no key made; report and report digest intact."""
    ranks = record["ranks"]
    return {**record, "ranks": ranks[1:] + ranks[:1], "mac": "5a" * 32}


@pytest.mark.mpi(min_size=2)
def test_a_forged_bcast_proof_changes_nothing(mpi):
    where = W.bcast(
        tempfile.mkdtemp(prefix="wacoll-forged-") if ME == 0 else None, root=0
    )
    cache = os.path.join(where, "proofs")
    saved = {name: os.environ.get(name) for name in (proofs.ENV, proofs.KEY_ENV)}
    os.environ[proofs.ENV] = cache
    os.environ[proofs.KEY_ENV] = os.path.join(where, "key", "proof-key")
    topo = mpi.topology(mpi.multi[0])
    n, root = 1000, mpi.size - 1
    comms = []
    try:
        first = wacoll.Comm(W, topo, family="magpie")
        comms.append(first)
        buf = mpi.ints(n, seed=1)
        mpi.run(lambda: first.Bcast(buf, root=root), "first Bcast")  # proves, stores
        mpi.assert_all(first.last_family == "magpie", f"ran {first.last_family}")
        W.Barrier()
        if ME == 0:
            genuine = _bcast_records(cache)
            for path, record in genuine.items():
                with open(path, "w") as fh:
                    json.dump(_forge(record), fh)
        else:
            genuine = None
        genuine = W.bcast(genuine, root=0)
        mpi.assert_all(len(genuine) == 1, f"bcast records: {sorted(genuine)}")

        second = wacoll.Comm(W, topo, family="magpie")  # (no plans of its own yet)
        comms.append(second)
        got = mpi.ints(n, seed=2)
        want = got.copy()
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            mpi.run(lambda: second.Bcast(got, root=root), "Bcast over a forged proof")
        W.Bcast(want, root=root)
        mpi.assert_equal(got, want, "Bcast with a forged proof in the cache")
        said = [str(w.message) for w in seen if w.category is ProofCacheWarning]
        # the forgery was refused for its code (by the ranks that met it: the first to
        # prove the plan again replaces it), never compared with a rank's program
        met = W.allgather(any("not trusted" in m for m in said))
        mpi.assert_all(any(met), "no rank refused the forged record")
        mpi.assert_all(not any("derived alone" in m for m in said), said)
        mpi.assert_all(second.last_family == "magpie", f"ran {second.last_family}")
        W.Barrier()
        mpi.assert_equal(
            _bcast_records(cache) == genuine,
            True,
            "the genuine proof replaced the forgery",
        )
    finally:
        for comm in comms:
            comm.Free()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        W.Barrier()
        if ME == 0:
            shutil.rmtree(where, ignore_errors=True)
