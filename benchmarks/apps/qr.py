"""QR: Householder QR with column pivoting, columns cyclic (MagPIe's Section 4 kernel).

An MPI program (run under ``mpiexec``, on a testbed or not)::

    mpiexec -n 8 python benchmarks/apps/qr.py --m 2048 --n 128 --reps 7 --out qr.json

An ``m x n`` float64 matrix (fixed seed) has its columns distributed cyclically
(column ``j`` on rank ``j % P``). Each of the ``--steps`` steps (default ``n``):

1. pivot search: every rank finds its remaining column of largest norm below row
   ``k`` and the ranks agree on the largest with one 28-byte ``Allreduce`` (seven
   int32, ``MPI.MAX``), as MagPIe's QR does ("8192 calls to MPI_Allreduce with
   messages of size 28 bytes for the pivot phase"). Element 0 is the pivot key: the
   squared norm as float32 bits (non-negative floats order like integers) with its
   low 12 bits replaced by ``4095 - column``, so the maximum picks a column within
   0.05 % of the largest norm, the lowest such column on ties; elements 1-2 carry
   the step and the most columns any rank still holds (its load), 3-6 are padding;
2. the pivot column's owner computes its Householder vector and broadcasts it
   (``beta`` and ``v``: ``(m - k + 1) * 8`` bytes; MagPIe's averaged 32 KByte);
3. every rank applies the reflection to its remaining columns.

Pivot columns are not moved: the owner of step ``k``'s broadcast is whoever holds
the pivot, so roots vary as in the paper. Both collectives move or combine exact
bits, so every implementation computes bit-identical results: the digest of every
rank's columns and the pivot order must agree across implementations and runs. The
first run is also checked numerically on rank 0: with ``R`` the computed factor on
the pivoted columns, ``R^T R`` must equal ``A_p^T A_p`` and ``|diag R|`` numpy's.

Each implementation first runs once untimed (connections, and wacoll's plans: one
per broadcast length, cached); then timing and output as in ``asp.py``: interleaved
implementations, common start instant, the latest finish; rank 0 writes ``--out``
(JSON). Every timed run's digests are compared with the reference run's.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np
from _rankside import (
    digest,
    digests_match,
    idle_barrier,
    run_meta,
    start_impls,
    timed_runs,
)

LOW = 12
MASK = (1 << LOW) - 1
RECORD = 7  # int32 elements: 28 bytes


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--m", type=int, default=2048, help="rows (default 2048)")
    p.add_argument("--n", type=int, default=128, help="columns (default 128)")
    p.add_argument("--steps", type=int, help="elimination steps (default n)")
    p.add_argument("--reps", type=int, default=7, help="runs per implementation")
    p.add_argument(
        "--impls",
        default="native,magpie,mpich",
        help="comma-separated: native and/or wacoll plan families",
    )
    p.add_argument("--seed", type=int, default=1999)
    p.add_argument(
        "--margin",
        type=float,
        default=0.2,
        help="seconds between announcing a start instant and it",
    )
    p.add_argument("--out", help="JSON file for the results (rank 0)")
    args = p.parse_args(argv)
    args.steps = min(args.n, args.m - 1) if args.steps is None else args.steps
    if not 1 <= args.steps <= min(args.n, args.m - 1):
        p.error("--steps must be 1..min(n, m-1)")
    if args.n > MASK + 1:
        p.error(f"--n must be at most {MASK + 1} (the pivot key holds the column)")
    return args


# ------------------------------------------------------------------ the kernel
def make_matrix(m, n, seed):
    """The input: standard normal entries, columns scaled so that norms differ."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, n))
    return a * rng.uniform(0.5, 2.0, size=n)[None, :]


def pivot_key(norm2, col):
    """The int32 key of a candidate: float32 bits of its squared norm, then the column."""
    bits = int(np.float32(norm2).view(np.int32))
    return (bits & ~MASK) | (MASK - col)


class Columns:
    """This rank's columns (``j % P == rank``) and which are still to be eliminated."""

    def __init__(self, a, rank, size):
        self.cols = np.arange(rank, a.shape[1], size)
        self.a = np.asfortranarray(a[:, self.cols])
        self.remaining = np.ones(self.cols.size, dtype=bool)


def qr(comm, local, steps, m, size, vec, record, result, pivots, calls=None):
    """Eliminate ``steps`` columns of the distributed matrix in place."""
    from mpi4py import MPI

    me = comm.Get_rank()
    a = local.a
    for k in range(steps):
        rem = np.flatnonzero(local.remaining)
        key = -1
        if rem.size:
            norms = np.einsum("ij,ij->j", a[k:, rem], a[k:, rem])
            best = int(np.argmax(norms))  # the first of equal norms: lowest column
            key = pivot_key(norms[best], int(local.cols[rem[best]]))
        record[:] = (key, k, rem.size, 0, 0, 0, 0)
        comm.Allreduce(record, result, op=MPI.MAX)
        p = MASK - (int(result[0]) & MASK)
        root = p % size
        pivots[k] = p
        count = m - k + 1
        buf = vec[:count]
        if root == me:
            j = p // size
            x = a[k:, j]
            alpha = -np.copysign(np.sqrt(x @ x), x[0])
            v = buf[1:]
            v[:] = x
            v[0] -= alpha
            vv = v @ v
            buf[0] = 2.0 / vv if vv > 0 else 0.0
            a[k, j] = alpha
            a[k + 1 :, j] = 0.0
            local.remaining[j] = False
        comm.Bcast(buf, root=root)
        rem = np.flatnonzero(local.remaining)
        if rem.size:
            beta, v = buf[0], buf[1:]
            c = a[k:, rem]
            c -= beta * np.outer(v, v @ c)
            a[k:, rem] = c
        if calls is not None:
            for name in (f"allreduce:-:{RECORD}:4", f"bcast:{root}:{count}:8"):
                calls[name] = calls.get(name, 0) + 1


def validate_numerics(a0, r_top, pivots, steps):
    """Relative errors of ``R^T R`` vs ``A_p^T A_p`` and of ``|diag R|`` vs numpy."""
    ap = a0[:, pivots[:steps]]
    r = np.triu(r_top[:steps, pivots[:steps]])
    gram = ap.T @ ap
    err = np.abs(r.T @ r - gram).max() / np.abs(gram).max()
    ref = np.abs(np.diag(np.linalg.qr(ap, mode="r")))
    derr = np.abs(np.abs(np.diag(r)) - ref).max() / ref.max()
    return float(err), float(derr)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    world, impls, comms = start_impls(args.impls)
    me, size = world.Get_rank(), world.Get_size()
    m, n, steps = args.m, args.n, args.steps
    a0 = make_matrix(m, n, args.seed)  # every rank makes the same one
    template = Columns(a0, me, size)
    vec = np.empty(m + 1)
    record = np.zeros(RECORD, dtype=np.int32)
    result = np.zeros(RECORD, dtype=np.int32)
    pivots = np.zeros(steps, dtype=np.int64)
    if me == 0:
        print(
            f"qr: {m} x {n}, {steps} steps, {size} ranks; Householder vectors "
            f"{(m - steps + 2) * 8}-{(m + 1) * 8} B, pivot allreduce {RECORD * 4} B",
            flush=True,
        )
    # One untimed run per implementation first: it opens the connections and builds
    # the plans (one per broadcast length: wacoll caches them for the timed runs);
    # the first one's result is the reference, checked numerically on rank 0.
    warm_ok = {}
    reference, call_log, numerics = None, None, None
    for impl in impls:
        local = Columns(a0, me, size)
        log = {} if call_log is None else None
        qr(comms[impl], local, steps, m, size, vec, record, result, pivots, log)
        if reference is None:
            call_log = log
            reference = world.bcast(world.gather(digest(local.a, pivots), root=0), root=0)
            numerics = first_check(world, local, template, a0, pivots, steps)
            ok = numerics["ok"]
        else:
            ok = digests_match(world, digest(local.a, pivots), reference)
        warm_ok[impl] = bool(ok)
        if me == 0:
            print(f"  qr warm-up {impl:7s} {'ok' if ok else 'WRONG RESULT'}", flush=True)

    def prepare(impl):
        local = Columns(a0, me, size)
        return (
            lambda: qr(comms[impl], local, steps, m, size, vec, record, result, pivots),
            lambda: digest(local.a, pivots),
        )

    times, timed_ok = timed_runs(
        world, impls, args.reps, args.margin, prepare, reference, "qr"
    )
    correct = {impl: warm_ok[impl] and timed_ok[impl] for impl in impls}
    if me == 0 and args.out:
        with open(args.out, "w") as fh:
            json.dump(
                {
                    "app": "qr",
                    "m": m,
                    "n": n,
                    "steps": steps,
                    "reps": args.reps,
                    "times": times,
                    "correct": correct,
                    "calls": call_log,
                    "numerics": numerics,
                    "meta": run_meta(world),
                },
                fh,
                indent=1,
            )
    idle_barrier(world)
    return 0


def first_check(world, local, template, a0, pivots, steps):
    """Gather the top ``steps`` rows (the factor R) to rank 0 and check them there."""
    parts = world.gather((template.cols, local.a[:steps].copy()), root=0)
    out = None
    if world.Get_rank() == 0:
        r_top = np.zeros((steps, a0.shape[1]))
        for cols, rows in parts:
            r_top[:, cols] = rows
        gram_err, diag_err = validate_numerics(a0, r_top, pivots, steps)
        ok = gram_err < 1e-10 and diag_err < 1e-10
        print(
            f"qr: first run checked on rank 0: R^T R vs A_p^T A_p {gram_err:.1e}, "
            f"|diag R| vs numpy {diag_err:.1e} -> {'ok' if ok else 'WRONG'}",
            flush=True,
        )
        out = {"gram_rel_err": gram_err, "diag_rel_err": diag_err, "ok": ok}
    return world.bcast(out, root=0)


if __name__ == "__main__":
    sys.exit(main())
