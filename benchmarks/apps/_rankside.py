"""What the benchmarks' MPI programs share on the ranks: starting, timing and checking runs.

The programs in this directory run under ``mpiexec`` (on an emulated testbed or not)
as ``python benchmarks/apps/x.py``, so this directory is ``sys.path[0]`` and they
``import _rankside``; the drivers with MPI code of their own (``bench_collectives.py``
and the workers of ``bench_sim_vs_testbed.py``) add it to ``sys.path``.

The timing protocol is :func:`wacoll.tools.measure.timed`'s (a common start instant on
the machine's shared clock; a run in which a rank started late does not count).
:func:`common_start` and :func:`timed` hand over to it, importing wacoll only when
called, that is after :func:`import_wacoll`: the programs import wacoll rank after
rank, since an editable install may rebuild on import. Nothing here imports
``mpi4py.MPI`` at import time either: a driver may import a program's module for its
helpers without starting MPI.

Examples
--------
>>> t = now()
>>> now() >= t
True
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import time
import traceback

import numpy as np

__all__ = [
    "now",
    "idle_barrier",
    "abort_on_error",
    "import_wacoll",
    "make_comms",
    "start_impls",
    "impl_comm",
    "start_with_spec",
    "common_start",
    "timed",
    "timed_runs",
    "digest",
    "digests_match",
    "round_trips",
    "run_meta",
]


def now():
    """The machine's monotonic clock, which every rank and namespace shares.

    Returns
    -------
    float
        Seconds.
    """
    return time.clock_gettime(time.CLOCK_MONOTONIC)


def idle_barrier(world, poll=0.002):
    """A barrier that sleeps instead of busy-polling, leaving the cores to ranks
    that still work.

    Parameters
    ----------
    world : mpi4py.MPI.Comm
    poll : float, optional
        Seconds between tests of the barrier.
    """
    req = world.Ibarrier()
    while not req.Test():
        time.sleep(poll)


@contextlib.contextmanager
def abort_on_error():
    """Abort the whole MPI job when the block raises, after printing the traceback.

    Without it, a rank that fails leaves the others waiting in their next collective
    until the run times out. ``SystemExit`` passes: every rank exits alike (argparse's
    ``--help`` and usage errors).
    """
    try:
        yield
    except SystemExit:
        raise
    except BaseException:
        from mpi4py import MPI

        traceback.print_exc()
        sys.stderr.flush()
        MPI.COMM_WORLD.Abort(1)


def import_wacoll(world):
    """Import wacoll on rank 0 first, then on the others.

    The editable install rebuilds the extension modules on import when they are out
    of date, and ranks importing at once would race on the build. The other ranks
    sleep meanwhile; an import failure aborts the job.

    Parameters
    ----------
    world : mpi4py.MPI.Comm

    Returns
    -------
    module
        ``wacoll``.
    """
    with abort_on_error():
        if world.Get_rank() == 0:
            import wacoll  # noqa: F401
        idle_barrier(world)
        import wacoll
    return wacoll


def make_comms(world, impls):
    """One communicator per implementation name, after :func:`import_wacoll`.

    Parameters
    ----------
    world : mpi4py.MPI.Comm
    impls : list of str
        ``"native"`` (the MPI library's collectives, on a duplicate of ``world``) or a
        wacoll plan family, run by ``wacoll.Comm(world, family=..., validate=False)``
        (arguments trusted, as MPI does).

    Returns
    -------
    dict
        ``{impl: communicator}``.
    """
    import_wacoll(world)
    return {impl: impl_comm(world, {"family": impl}) for impl in impls}


def start_impls(text):
    """What a program timing several implementations starts with.

    Parameters
    ----------
    text : str
        The implementations, comma-separated (its ``--impls``).

    Returns
    -------
    world : mpi4py.MPI.Comm
        ``COMM_WORLD``.
    impls : list of str
        The names, in order.
    comms : dict
        ``{impl: communicator}`` (:func:`make_comms`).
    """
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    impls = [s for s in text.split(",") if s]
    return world, impls, make_comms(world, impls)


def impl_comm(world, impl, topology=None, **kwargs):
    """The communicator of one implementation, after :func:`import_wacoll`.

    Parameters
    ----------
    world : mpi4py.MPI.Comm
    impl : dict
        ``{"family": ...}`` and the family's options; a ``"name"`` is left out.
        ``"native"`` is the MPI library's collectives, on a duplicate of ``world``;
        a wacoll plan family is run by ``wacoll.Comm(world, topology, family=...,
        validate=False)`` (arguments trusted, as MPI does).
    topology : wacoll.Topology, optional
        The clusters (default: what ``wacoll.Comm`` finds).
    **kwargs
        More arguments of ``wacoll.Comm``.

    Returns
    -------
    mpi4py.MPI.Comm or wacoll.Comm
    """
    if impl["family"] == "native":
        return world.Dup()
    import wacoll

    options = {k: v for k, v in impl.items() if k not in ("name", "family")}
    return wacoll.Comm(
        world, topology, family=impl["family"], validate=False, **kwargs, **options
    )


def start_with_spec(path):
    """What a program run with a JSON file of settings starts with.

    Parameters
    ----------
    path : str
        The settings' file.

    Returns
    -------
    world : mpi4py.MPI.Comm
        ``COMM_WORLD``.
    wacoll : module
        Imported rank after rank (:func:`import_wacoll`).
    spec : dict
        The settings.
    """
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    wacoll = import_wacoll(world)
    with open(path) as fh:
        return world, wacoll, json.load(fh)


def common_start(world, margin):
    """:func:`wacoll.tools.measure.common_start`: ``(start, late)``, after waiting for it."""
    from wacoll.tools.measure import common_start as agree_and_wait

    return agree_and_wait(world, margin)


def timed(world, margin, fn):
    """:func:`wacoll.tools.measure.timed`: seconds to the last rank's finish, or None."""
    from wacoll.tools.measure import timed as time_collectively

    return time_collectively(world, margin, fn)


def timed_runs(world, impls, reps, margin, prepare, expected, label):
    """Time every implementation ``reps`` times, interleaved, and check every run.

    Round ``rep`` takes the implementations in turn starting with the ``rep``-th, so
    that load drift hits them alike; each run is :func:`timed`, then its result is
    checked with :func:`digests_match`. Rank 0 prints a line per run.

    Parameters
    ----------
    world : mpi4py.MPI.Comm
    impls : list of str
        The implementations, keys of the program's communicators.
    reps : int
        Runs per implementation.
    margin : float
        As for :func:`common_start`.
    prepare : callable
        ``prepare(impl) -> (work, result)``: fresh input for one run; ``work()`` is the
        timed kernel and ``result()`` this rank's :func:`digest` of its output after it.
    expected : list of str or None
        On rank 0, every rank's digest of the right output (rank by rank).
    label : str
        The program's name in the progress lines.

    Returns
    -------
    times : dict
        ``{impl: [seconds or None, ...]}``, None for a run that does not count.
    correct : dict
        ``{impl: bool}``: whether every run's output was right, the same on every rank.
    """
    me = world.Get_rank()
    times = {impl: [] for impl in impls}
    correct = {impl: True for impl in impls}
    for rep in range(reps):
        for j in range(len(impls)):
            impl = impls[(rep + j) % len(impls)]
            work, result = prepare(impl)
            t = timed(world, margin, work)
            ok = digests_match(world, result(), expected)
            correct[impl] = correct[impl] and ok
            times[impl].append(t)
            if me == 0:
                shown = "late start" if t is None else f"{t:.3f} s"
                print(
                    f"  {label} rep {rep + 1}/{reps} {impl:7s} {shown}"
                    f"{'' if ok else '  WRONG RESULT'}",
                    flush=True,
                )
    return times, correct


def digest(*arrays):
    """A digest of the arrays' bytes, in C order, one after the other.

    Parameters
    ----------
    *arrays : numpy.ndarray

    Returns
    -------
    str
        The SHA-1, hexadecimal.
    """
    h = hashlib.sha1()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def digests_match(world, mine, expected):
    """Whether every rank's digest is the expected one.

    Parameters
    ----------
    world : mpi4py.MPI.Comm
    mine : str
        This rank's digest.
    expected : list of str or None
        On rank 0, one digest per rank (ignored on the others).

    Returns
    -------
    bool
        The same on every rank.
    """
    got = world.gather(mine, root=0)
    return bool(world.bcast(got == expected if world.Get_rank() == 0 else None, root=0))


def round_trips(comm, peer, buf, reps):
    """Bounce ``buf`` between rank 0 and ``peer`` with blocking Send and Recv.

    Only ranks 0 and ``peer`` take part; the others return at once.

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
    peer : int
        The other rank, not 0.
    buf : numpy.ndarray
        The message; overwritten by the echo.
    reps : int
        Round trips.

    Returns
    -------
    list of float
        On rank 0, the seconds of each round trip; elsewhere empty.
    """
    times = []
    if comm.Get_rank() == 0:
        for _ in range(reps):
            t = now()
            comm.Send(buf, dest=peer, tag=7)
            comm.Recv(buf, source=peer, tag=7)
            times.append(now() - t)
    elif comm.Get_rank() == peer:
        for _ in range(reps):
            comm.Recv(buf, source=0, tag=7)
            comm.Send(buf, dest=0, tag=7)
    return times


def run_meta(world):
    """The run's size and what the testbed's launcher tells the ranks.

    Parameters
    ----------
    world : mpi4py.MPI.Comm

    Returns
    -------
    dict
        ``size``; ``clusters``, ``transport`` and ``testbed`` from the environment
        (``WACOLL_CLUSTERS``, ``WACOLL_TRANSPORT``, ``WACOLL_TESTBED``).
    """
    return {
        "size": world.Get_size(),
        "clusters": os.environ.get("WACOLL_CLUSTERS", ""),
        "transport": os.environ.get("WACOLL_TRANSPORT", "default"),
        "testbed": os.environ.get("WACOLL_TESTBED"),
    }
