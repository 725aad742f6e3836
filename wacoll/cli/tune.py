"""``wacoll tune``: learn a communicator's choices ahead of time, into a tuning file.

::

    mpiexec -n 8 wacoll tune --ops allreduce,bcast --sizes 8,64K,1M --out tuning.json
    WACOLL_TUNING=tuning.json mpiexec -n 8 python app.py      # explores nothing

On an emulated network: ``wacoll testbed run -- wacoll tune ...``. Every rank runs
it. A learning communicator over ``MPI.COMM_WORLD`` (its topology discovered as
``wacoll.Comm`` discovers it: ``WACOLL_TOPOLOGY``, ``WACOLL_CLUSTERS`` or the nodes)
calls each named operation at each size until its shape is decided
(:mod:`wacoll.mpi.learning`: the candidates the cost model cannot rule out, timed in
turns), with a progress line on rank 0; then rank 0 writes the choices as a tuning
file (:meth:`wacoll.Comm.write_tuning`) and prints them. A run with
``WACOLL_TUNING`` naming that file starts from those choices: its calls of those
shapes explore nothing. Sizes are bytes per rank (a broadcast's or reduction's
vector, each rank's block of a gather, scatter, all-gather or all-to-all), of
float64 where they are a multiple of 8, of bytes otherwise.

This is what MPICH's and Open MPI's own tuning files do for their collectives
(``MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE``; the ``coll_tuned`` dynamic rules
file): a choice of algorithm per operation and size, measured once, read at start.
"""

from __future__ import annotations

import argparse

__all__ = ["add_tune_parser", "run_tune", "TUNED_OPS", "parse_sizes"]

#: The operations ``wacoll tune`` learns (their learned shapes are keyed by size).
TUNED_OPS = ("allreduce", "bcast", "reduce", "allgather", "gather", "scatter", "alltoall")
#: Calls of a shape beyond its exploration, at most, before giving up on a decision.
SPARE_CALLS = 8


def parse_sizes(text: str) -> list[int]:
    """Sizes in bytes from ``"8,64K,1M"`` (K, M, G: powers of 1024; ``B``, ``KiB``
    also read).

    Examples
    --------
    >>> parse_sizes("8,64K,1MiB")
    [8, 65536, 1048576]
    >>> parse_sizes("0")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: a size must be at least 1 byte: '0'
    """
    out = []
    for word in (w.strip() for w in text.split(",")):
        if not word:
            continue
        t = word.upper().removesuffix("B").removesuffix("I")
        scale = 1
        for suffix, factor in (("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30)):
            if t.endswith(suffix):
                t, scale = t[:-1], factor
                break
        try:
            value = int(float(t) * scale)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a size: {word!r}") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"a size must be at least 1 byte: {word!r}")
        out.append(value)
    if not out:
        raise argparse.ArgumentTypeError("no sizes given")
    return out


def _ops(text: str) -> list[str]:
    ops = [w.strip().lower() for w in text.split(",") if w.strip()]
    unknown = [op for op in ops if op not in TUNED_OPS]
    if unknown or not ops:
        raise argparse.ArgumentTypeError(
            f"unknown operation(s) {unknown}; wacoll tune learns {', '.join(TUNED_OPS)}"
        )
    return ops


def add_tune_parser(sub):
    """Add the ``tune`` subcommand to an ``argparse`` subparsers object."""
    p = sub.add_parser(
        "tune",
        help="learn the choices of named operations and sizes; write a tuning file",
        description="Run under mpiexec (or wacoll testbed run). Explore each "
        "operation at each size as a learning wacoll.Comm does, and write what it "
        "chose as a tuning file for WACOLL_TUNING.",
    )
    p.add_argument(
        "--ops",
        type=_ops,
        default=list(TUNED_OPS),
        help=f"operations, separated by commas (default all: {','.join(TUNED_OPS)})",
    )
    p.add_argument(
        "--sizes",
        type=parse_sizes,
        default=parse_sizes("8,64K,1M"),
        help="bytes per rank, separated by commas: 8,64K,1M (the default)",
    )
    p.add_argument(
        "--out", default="tuning.json", help="the tuning file (default tuning.json)"
    )
    p.set_defaults(run=run_tune)


def run_tune(args) -> int:
    """Learn ``args.ops`` at ``args.sizes`` on ``MPI.COMM_WORLD``; write the file."""
    from mpi4py import MPI

    import wacoll
    from wacoll.mpi.learning import exploration_calls
    from wacoll.tools.measure import case_buffers, case_caller
    from wacoll.tools.progress import Progress

    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    comm = wacoll.Comm(world, learn="on")
    cases = [(op, nbytes) for op in args.ops for nbytes in args.sizes]
    show = Progress("tune", len(cases), enabled=rank == 0)
    if comm.network.nclusters < 2:
        show.note("one cluster: the MPI library's collectives run; nothing to learn")
    undecided = []
    for op, nbytes in cases:
        send, recv = case_buffers(op, nbytes, size, rank)
        call = case_caller(op, comm, send, recv, None)
        learned = len(comm.tuning)
        # every rank decides at the same call: the same number of calls everywhere
        for _ in range(exploration_calls(op) + SPARE_CALLS):
            call()
            if len(comm.tuning) > learned:
                break
        if comm.network.nclusters > 1 and len(comm.tuning) == learned:
            undecided.append(f"{op} {nbytes} B")
        chosen = comm.tuning[-1]["chosen"] if len(comm.tuning) > learned else "-"
        show.step(f"{op} {nbytes} B: {chosen}")
    comm.write_tuning(args.out)  # collective; raises the same error on every rank
    if rank == 0:
        print(f"{'op':<10} {'size class':>10} {'chosen':<10} candidates (median ms)")
        for row in comm.tuning:
            shown = ", ".join(
                f"{name} {seconds * 1e3:.3g}"
                for name, seconds in zip(row["candidates"], row["seconds"])
            )
            print(f"{row['op']:<10} {row['size_class']:>10} {row['chosen']:<10} {shown}")
        print(
            f"wrote {args.out}: {len(comm.tuning)} choice(s) on {size} ranks in "
            f"{comm.network.nclusters} cluster(s)"
        )
        if undecided:
            print(f"not decided (no choice written): {', '.join(undecided)}")
    comm.Free()
    return 0
