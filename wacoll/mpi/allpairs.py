"""Measure every pair of a communicator's ranks: a topology from ping-pongs, not
from guesses (the MPI half of calibration; :mod:`wacoll.calibration` fits and
reports, ``wacoll calibrate`` is the command).

:func:`calibrate` returns a :class:`wacoll.Topology`; :func:`measure` returns the
whole :class:`wacoll.calibration.CalibrationReport` (matrices, clustering, heatmap).
Both are collective: every rank calls them and gets the same result.

How it measures (all times from ``MPI.Wtime`` on the rank that starts the exchange,
so no clocks need to agree):

1. **Self round trip**: each rank sends a short message to itself and back.
2. **Latency**: short-message ping-pong (``small`` bytes, the fastest of ``reps``
   round trips after ``warmup``: delays from a busy machine only ever add, so the
   minimum is the estimate that noise disturbs least) between every pair of ranks up to ``all_pairs`` ranks, or
   between sampled pairs beyond (each rank with its ``samples`` next ranks in a ring
   and ``samples`` random ones). Pairs run in rounds of disjoint pairs; every pair
   in a round measures at once. One-way latency is half the round trip.
3. **Clusters** from the latencies (:func:`wacoll.calibration.find_clusters`).
4. **Bandwidth**: one pair at a time (so no two measurements share a link), for up to
   ``bandwidth_pairs`` rank pairs per directed cluster pair and per cluster: the
   sender streams ``window`` messages of ``large`` bytes, the receiver answers with
   one short message; bandwidth is the bytes over the time minus the pair's round
   trip (median of ``bandwidth_reps``). Every rank pair of a directed cluster pair
   is given the median of its measured ones.
5. **t_ini** per rank, as Banikazemi et al. measure it: from the short-message round
   trips inside each cluster (:func:`wacoll.calibration.fit_t_ini`).

With ``progress`` (default: when rank 0's standard error is a terminal) rank 0
shows how many rounds and bandwidth pairs are done.

Examples
--------
>>> from mpi4py import MPI
>>> calibrate(MPI.COMM_SELF).size
1
"""

from __future__ import annotations

import random
import sys
import time

import numpy as np

from wacoll.calibration import (
    DEFAULT_MIN_GAP,
    DEFAULT_PAIR_TOLERANCE,
    DEFAULT_WIDE_AREA,
    CalibrationReport,
)
from wacoll.errors import TopologyError, WacollError
from wacoll.mpi.agreement import from_rank_0

__all__ = ["calibrate", "measure", "latency_pairs", "rounds", "pingpong", "bursts"]

_TAG = 7301


def latency_pairs(
    size: int, *, all_pairs: int = 32, samples: int = 3, seed: int = 0
) -> list:
    """The rank pairs ``(i, j)``, ``i < j``, whose latency is measured.

    Every pair up to ``all_pairs`` ranks; beyond, each rank with its ``samples`` next
    ranks on a ring and ``samples`` random partners (the same on every rank).

    Examples
    --------
    >>> latency_pairs(3)
    [(0, 1), (0, 2), (1, 2)]
    >>> len(latency_pairs(100, all_pairs=32, samples=2)) <= 100 * 4
    True
    """
    if size <= all_pairs:
        return [(i, j) for i in range(size) for j in range(i + 1, size)]
    rng = random.Random(seed)
    pairs = set()
    for i in range(size):
        for d in range(1, samples + 1):
            j = (i + d) % size
            pairs.add((min(i, j), max(i, j)))
        for _ in range(samples):
            j = rng.randrange(size - 1)
            j += j >= i
            pairs.add((min(i, j), max(i, j)))
    return sorted(pairs)


def rounds(pairs) -> list:
    """Split pairs into rounds in which no rank appears twice (greedy matchings).

    Examples
    --------
    >>> rounds([(0, 1), (0, 2), (1, 2), (2, 3)])
    [[(0, 1), (2, 3)], [(0, 2)], [(1, 2)]]
    """
    left = list(pairs)
    out = []
    while left:
        busy: set[int] = set()
        this, rest = [], []
        for i, j in left:
            if i in busy or j in busy:
                rest.append((i, j))
            else:
                busy.update((i, j))
                this.append((i, j))
        out.append(this)
        left = rest
    return out


class _Progress:
    def __init__(self, enabled):
        self.enabled = enabled
        self.last = 0.0

    def show(self, text, final=False):
        if not self.enabled:
            return
        now = time.monotonic()
        if final or now - self.last > 0.2:
            sys.stderr.write(f"\rcalibrate: {text}\033[K" + ("\n" if final else ""))
            sys.stderr.flush()
            self.last = now


def pingpong(comm, peer, first, buf, reps, warmup, min_time=0.0, most=None):
    """Round trips of ``buf`` with ``peer``; ``first`` sends first and times them.

    At least ``reps`` timed round trips after ``warmup`` untimed ones, and more until
    ``min_time`` seconds have passed (at most ``most``): the first byte of each
    message tells the peer whether it is the last. Both ranks call it; the one that
    sends first gets the times in seconds, the other an empty list.
    :func:`measure` and :func:`wacoll.mpi.links.measure_links` time latencies with it.
    """
    most = max(reps, most or 50 * reps)
    times = []
    if first:
        begin = _wtime()
        k = 0
        while True:
            last = (
                k + 1 >= warmup + reps and _wtime() - begin >= min_time
            ) or k + 1 >= warmup + most
            buf[0] = 1 if last else 0
            t0 = _wtime()
            comm.Send(buf, dest=peer, tag=_TAG)
            comm.Recv(buf, source=peer, tag=_TAG)
            if k >= warmup:
                times.append(_wtime() - t0)
            k += 1
            if last:
                return times
    while True:
        comm.Recv(buf, source=peer, tag=_TAG)
        last = buf[0] == 1
        comm.Send(buf, dest=peer, tag=_TAG)
        if last:
            return times


def bursts(comm, peer, sender, buf, ack, window, reps):
    """Bursts of ``window`` messages (``buf``) to ``peer``, each answered by one short
    message (``ack``): ``reps`` timed bursts after one that warms the connection up.
    Both ranks call it (``sender`` on the one that sends); the sender gets the time
    of each burst in seconds, the receiver an empty list. :func:`measure` and
    :func:`wacoll.mpi.links.measure_links` time bandwidths with it.
    """
    from mpi4py import MPI

    times = []
    for k in range(reps + 1):  # the first burst warms the connection up
        if sender:
            t0 = _wtime()
            reqs = [comm.Isend(buf, dest=peer, tag=_TAG + 1) for _ in range(window)]
            MPI.Request.Waitall(reqs)
            comm.Recv(ack, source=peer, tag=_TAG + 2)
            if k:
                times.append(_wtime() - t0)
        else:
            for _ in range(window):
                comm.Recv(buf, source=peer, tag=_TAG + 1)
            comm.Send(ack, dest=peer, tag=_TAG + 2)
    return times


def _wtime():
    from mpi4py import MPI

    return MPI.Wtime()


def measure(
    comm,
    *,
    small: int = 8,
    large: int = 1 << 16,
    reps: int = 20,
    warmup: int = 3,
    min_time: float = 0.01,
    window: int = 4,
    bandwidth_reps: int = 3,
    bandwidth_pairs: int = 1,
    all_pairs: int = 32,
    samples: int = 3,
    min_gap: float = DEFAULT_MIN_GAP,
    wide_area: float = DEFAULT_WIDE_AREA,
    pair_tolerance: float = DEFAULT_PAIR_TOLERANCE,
    progress: bool | None = None,
    seed: int = 0,
) -> CalibrationReport:
    """Measure ``comm``'s links and find its topology (collective; see the module doc).

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm
    small : int
        Bytes of the latency ping-pong messages.
    large : int
        Bytes of each bandwidth message.
    reps, warmup : int
        Timed and untimed round trips per latency pair.
    min_time : float
        Seconds each latency pair keeps going beyond ``reps`` round trips (up to
        ``50 * reps``), so that fast links are sampled across scheduler time slices.
    window : int
        Messages per bandwidth burst.
    bandwidth_reps : int
        Timed bursts per bandwidth pair.
    bandwidth_pairs : int
        Rank pairs measured per directed cluster pair and per cluster (0: none).
    all_pairs : int
        Measure every pair up to this many ranks, sampled pairs beyond.
    samples : int
        Ring and random partners per rank when sampling.
    min_gap, wide_area : float
        Clustering parameters (:func:`wacoll.calibration.find_clusters`).
    pair_tolerance : float
        When a directed cluster pair gets its own wide-area link.
    progress : bool, optional
        Show progress on rank 0's standard error (default: if it is a terminal).
    seed : int
        Seed of the pair sampling.

    Returns
    -------
    wacoll.calibration.CalibrationReport
        The same on every rank.
    """
    from mpi4py import MPI

    if int(small) < 1:
        raise WacollError("calibrate: small must be >= 1 byte (it carries a flag)")
    for name, value in (
        ("small", small),
        ("large", large),
        ("reps", reps),
        ("window", window),
        ("bandwidth_reps", bandwidth_reps),
    ):
        if int(value) < 1:
            raise WacollError(f"calibrate: {name} must be >= 1, got {value!r}")
    rank, size = comm.Get_rank(), comm.Get_size()
    if progress is None:
        progress = rank == 0 and sys.stderr.isatty()
    show = _Progress(bool(progress) and rank == 0)
    start = _wtime()
    buf = np.zeros(int(small), dtype=np.uint8)

    # 1. round trip to itself
    echo = np.zeros_like(buf)
    self_times = []
    for k in range(warmup + reps):
        t0 = _wtime()
        for _ in range(2):
            r = comm.Irecv(echo, source=rank, tag=_TAG + 3)
            comm.Send(buf, dest=rank, tag=_TAG + 3)
            r.Wait()
        if k >= warmup:
            self_times.append(_wtime() - t0)
    self_rtt = np.array(comm.allgather(float(np.min(self_times))))

    # 2. short-message round trips, in rounds of disjoint pairs
    pairs = latency_pairs(size, all_pairs=all_pairs, samples=samples, seed=seed)
    schedule = rounds(pairs)
    mine = {}
    comm.Barrier()
    for k, this in enumerate(schedule):
        for i, j in this:
            if rank in (i, j):
                peer = j if rank == i else i
                times = pingpong(comm, peer, rank == i, buf, reps, warmup, min_time)
                if times:
                    mine[(i, j)] = float(np.min(times))
        comm.Barrier()
        show.show(f"latency: round {k + 1}/{len(schedule)} ({len(pairs)} pairs)")
    rtt = np.full((size, size), np.nan)
    for part in comm.allgather(mine):
        for (i, j), t in part.items():
            rtt[i, j] = rtt[j, i] = t

    # 3. clusters (rank 0 decides; everyone gets its answer)
    labels = from_rank_0(
        comm,
        lambda: (
            CalibrationReport.from_measurements(
                rtt,
                None,
                self_rtt,
                min_gap=min_gap,
                wide_area=wide_area,
                pair_tolerance=pair_tolerance,
            ).clustering.labels
        ),
        TopologyError,
        "clustering the measured latencies",
    )

    # 4. bandwidth, one pair at a time
    members: dict[int, list[int]] = {}
    for r, c in enumerate(labels):
        members.setdefault(c, []).append(r)
    bw_pairs = []
    if bandwidth_pairs > 0 and size > 1:
        for a in sorted(members):
            for b in sorted(members):
                if a == b:
                    cand = [
                        (x, y)
                        for n, x in enumerate(members[a])
                        for y in members[a][n + 1 :]
                    ]
                else:
                    cand = list(zip(members[a], members[b]))
                    cand += [
                        (x, y)
                        for x in members[a]
                        for y in members[b]
                        if (x, y) not in cand
                    ]
                bw_pairs += cand[:bandwidth_pairs]
    big = np.zeros(int(large), dtype=np.uint8)
    ack = np.zeros(1, dtype=np.uint8)
    measured = {}
    for n, (i, j) in enumerate(bw_pairs):
        if rank in (i, j):
            times = bursts(
                comm,
                j if rank == i else i,
                rank == i,
                big,
                ack,
                int(window),
                int(bandwidth_reps),
            )
            if times:
                base = rtt[i, j] if np.isfinite(rtt[i, j]) else 0.0
                rates = [window * large / max(t - base, 1e-9) for t in times]
                measured[(i, j)] = float(np.median(rates))
        comm.Barrier()
        show.show(f"bandwidth: pair {n + 1}/{len(bw_pairs)}")
    gathered = comm.gather(measured, root=0)
    elapsed = _wtime() - start

    def fit():  # rank 0: the report of every measurement
        per_group = {}
        for part in gathered:
            for (i, j), v in part.items():
                per_group.setdefault((labels[i], labels[j]), []).append(v)
        bandwidth = np.full((size, size), np.nan)
        for i in range(size):
            for j in range(size):
                values = per_group.get((labels[i], labels[j]))
                if i != j and values:
                    bandwidth[i, j] = float(np.median(values))
        settings = dict(
            small=int(small),
            large=int(large),
            reps=int(reps),
            warmup=int(warmup),
            min_time=float(min_time),
            window=int(window),
            bandwidth_reps=int(bandwidth_reps),
            bandwidth_pairs=int(bandwidth_pairs),
            latency_pairs=len(pairs),
            rounds=len(schedule),
            bandwidth_measurements=len(bw_pairs),
            sampled=size > all_pairs,
            size=size,
            library=MPI.Get_library_version().splitlines()[0].strip(),
        )
        report = CalibrationReport.from_measurements(
            rtt,
            bandwidth,
            self_rtt,
            settings=settings,
            elapsed=elapsed,
            min_gap=min_gap,
            wide_area=wide_area,
            pair_tolerance=pair_tolerance,
        )
        show.show(
            f"done in {elapsed:.1f} s: {report.topology.nclusters} clusters", final=True
        )
        return report

    return from_rank_0(comm, fit, TopologyError, "fitting the calibration")


def calibrate(comm, **options):
    """The measured :class:`wacoll.Topology` of ``comm`` (collective).

    Takes the options of :func:`measure`; use :func:`measure` for the report
    (matrices, clustering, heatmap) as well.

    Examples
    --------
    >>> from mpi4py import MPI
    >>> calibrate(MPI.COMM_SELF, reps=2).clusters
    ((0,),)
    """
    return measure(comm, **options).topology
