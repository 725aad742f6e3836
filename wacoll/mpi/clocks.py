"""Each rank's clock read as rank 0's, so that times taken on different ranks can
be compared: when the last rank started a call, and when the last one finished it.

A rank's time after a barrier includes how much earlier than the last rank it left
the barrier: up to a wide-area latency, as long as a short call itself. Times put
on one clock instead give a call's duration from the moment every rank had started
it to the moment every rank had finished it, as the benchmarks measure from a
common start instant (:mod:`wacoll.tools.measure`).

:func:`offset_to_root` estimates the offset the classic way (Cristian's): rank 0
sends its clock to every rank at once, each answers with its own, and rank 0 takes
the midpoint of its send and the answer's arrival as the moment the answer's time
was read. Of a few rounds, the one with the shortest round trip is kept (its error
is at most half of it, and nothing where the two directions take equally long). The
cost: :data:`ROUNDS` round trips between rank 0 and every rank, all at once, and
one scatter. Where every rank runs on one system (:func:`machine_identity`) they
read one monotonic clock, and the offset is 0.

Examples
--------
>>> from mpi4py import MPI
>>> offset_to_root(MPI.COMM_SELF)
0.0
"""

from __future__ import annotations

from time import perf_counter

import numpy as np

__all__ = ["ROUNDS", "TAG", "machine_identity", "offset_to_root", "now"]

#: Round trips per rank; the shortest decides.
ROUNDS = 3
#: The tag of the exchange's messages (on the communicator it is given): below the
#: tags of the calls' plans and checks (:data:`wacoll.mpi.executor.BLOCKING_TAG` and
#: up), which may be in flight there at the same time.
TAG = 16381


def now() -> float:
    """This process's clock (seconds): ``time.perf_counter``, the clock the route
    times its calls with."""
    return perf_counter()


def machine_identity():
    """What identifies the running system whose monotonic clock this process reads
    (Linux's boot identifier), or None where it cannot be told."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            return fh.read().strip() or None
    except OSError:
        return None


def offset_to_root(comm, rounds: int = ROUNDS) -> float:
    """Seconds to add to this rank's :func:`now` to read rank 0's clock: 0 when
    every rank runs on one system (one monotonic clock: the emulated testbed, one
    node), else estimated as the module docstring says.

    Collective over ``comm`` (every rank calls it).
    """
    rank, size = comm.Get_rank(), comm.Get_size()
    if size == 1:
        return 0.0
    machines = set(comm.allgather(machine_identity()))
    if len(machines) == 1 and None not in machines:
        # one clock: an estimate could only add its error (with ranks sharing
        # cores, a round trip's delay on one rank put whole milliseconds into the
        # explored calls' times)
        return 0.0
    stamp = np.zeros(1)
    if rank != 0:
        for _ in range(rounds):
            comm.Recv(stamp, source=0, tag=TAG)
            stamp[0] = now()
            comm.Send(stamp, dest=0, tag=TAG)
        return float(comm.scatter(None, root=0))
    from mpi4py import MPI

    best = np.full(size, np.inf)  # shortest round trip per rank
    offsets = np.zeros(size)
    answers = np.zeros((size, 1))
    for _ in range(rounds):
        receives = [comm.Irecv(answers[r], source=r, tag=TAG) for r in range(1, size)]
        sent = now()
        sends = [comm.Isend(np.array([sent]), dest=r, tag=TAG) for r in range(1, size)]
        for _ in range(size - 1):
            index = MPI.Request.Waitany(receives)
            arrived = now()
            r = index + 1
            trip = arrived - sent
            if trip < best[r]:
                best[r] = trip
                offsets[r] = (sent + arrived) / 2 - answers[r, 0]
        MPI.Request.Waitall(sends)
    return float(comm.scatter([float(x) for x in offsets], root=0))
