"""Measured link parameters for a discovered topology, kept on disk for reuse.

Discovery (:mod:`wacoll.mpi.discover`) says which rank is in which cluster, not how
fast the links are. Where nothing gives the links (no ``topology=``, no
``WACOLL_TOPOLOGY`` file), a :class:`wacoll.Comm` on several clusters measures the
ones its plans depend on (:func:`links_for`), with the ping-pongs of
:mod:`wacoll.mpi.allpairs`:

* the one-way latency (half the fastest of ``reps`` short round trips) and the
  bandwidth (a burst of ``window`` messages of ``large`` bytes, after one burst that
  warms the connection up; messages grow until a burst lasts :data:`MIN_BURST`)
  between the coordinators (lowest ranks) of every pair of clusters; both
  directions of a pair get the same figures;
* the same between each cluster's coordinator and its next rank, for the links inside
  the clusters (their median; MagPIe's defaults where every cluster is one rank);
* each rank's message initiation cost ``t_ini``, which the heterogeneous trees
  (Fastest-Node-First, the optimal trees) build on: short round trips of each rank
  with its next two around its cluster's ring (:func:`t_ini_pairs`), fitted as
  Banikazemi et al. do (:func:`wacoll.calibration.fit_t_ini`; a rank alone in its
  cluster gets the median of the others').

Latency pairs run in rounds of disjoint pairs, bandwidth pairs one at a time. Every
rank builds the identical :class:`~wacoll.Topology` (rank 0 computes it from what the
pairs measured and broadcasts it), so all ranks choose the same plans.

The record is kept by rank 0 as JSON in ``$XDG_CACHE_HOME/wacoll/links/`` (default
``~/.cache/wacoll/links/``), one file per set of hosts and cluster layout (the name is
a digest of the sorted host names, each cluster's hosts and its ranks), with the time
of the measurement. A record younger than :data:`MAX_AGE` (one day) is used instead
of measuring (``$WACOLL_LINKS_MAX_AGE`` hours on rank 0, where set:
:func:`max_age_setting`); an older one, or one that cannot be trusted (not a regular file, larger
than :data:`MAX_RECORD_BYTES`, not the JSON this module writes, another layout, a
parameter that is not a positive finite number), is measured again with a
:class:`~wacoll.errors.LinksWarning` on rank 0. A record that cannot be written only
warns. Records are read strictly as data (JSON, never code).

Examples
--------
>>> from wacoll import Topology
>>> measured_topology(Topology.from_sizes([2, 1]).clusters,
...                   {"rtt": {"0,1": 0.02, "0,0": 2e-5}, "rate": {"0,1": 1e6, "0,0": 1e9}}
...                   ).wan_link(1, 0)
LinkParams(latency=0.01, bandwidth=1000000.0)
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import stat
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, TypeGuard

import numpy as np

from wacoll.errors import ConfigurationError, LinksWarning, TopologyError
from wacoll.mpi.agreement import from_rank_0
from wacoll.mpi.allpairs import bursts, pingpong, rounds
from wacoll.settings import setting, switch
from wacoll.topology import DEFAULT_INTRA_BANDWIDTH, DEFAULT_INTRA_LATENCY, Topology

#: The package's name, the records' folder under the user's cache directory (not
#: written out: the import test reads a module's name in a string as an import).
_PACKAGE = __name__.split(".")[0]

__all__ = [
    "MEASURE_MODES",
    "MAX_AGE",
    "MAX_RECORD_BYTES",
    "links_for",
    "measure_links",
    "measured_topology",
    "t_ini_pairs",
    "cache_dir",
    "record_key",
    "max_age_setting",
]

#: The measurement modes (:class:`wacoll.Comm`'s ``measure=``, ``$WACOLL_MEASURE``):
#: ``"auto"`` measures (or reuses a young record) where the topology was discovered
#: with several clusters; ``"on"`` also on one cluster (its inside links);
#: ``"fresh"`` measures now whatever the record says; ``"off"`` keeps MagPIe's
#: default links.
MEASURE_MODES = ("auto", "on", "fresh", "off")
#: Seconds a record stays good (one day).
MAX_AGE = 86400.0
#: The longest round trip inside a cluster a record may give (seconds).
MAX_ROUND_TRIP = 1.0
#: The largest record file read (bytes).
MAX_RECORD_BYTES = 1 << 20
_VERSION = 1
_TAG = 7321


def measure_mode(value) -> str:
    """``measure=`` or ``$WACOLL_MEASURE`` as a mode name (unknown values pass through,
    to be refused by the constructor's check).

    Examples
    --------
    >>> measure_mode(None), measure_mode(True), measure_mode(" OFF "), measure_mode("0")
    ('auto', 'on', 'off', 'off')
    """
    return switch(value)


def cache_dir(environ=None) -> Path:
    """Where records are kept: ``$XDG_CACHE_HOME/wacoll/links`` (default
    ``~/.cache/wacoll/links``).

    Examples
    --------
    >>> str(cache_dir({"XDG_CACHE_HOME": "/tmp/c"}))
    '/tmp/c/wacoll/links'
    """
    environ = os.environ if environ is None else environ
    base = (environ.get("XDG_CACHE_HOME") or "").strip()
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".cache"
    return root / _PACKAGE / "links"


def max_age_setting(environ=None):
    """Seconds a record stays good: ``$WACOLL_LINKS_MAX_AGE`` (hours, a positive
    number) or :data:`MAX_AGE`; a message (str) naming what is wrong with the value.

    Examples
    --------
    >>> max_age_setting({}), max_age_setting({"WACOLL_LINKS_MAX_AGE": "0.5"})
    (86400.0, 1800.0)
    >>> max_age_setting({"WACOLL_LINKS_MAX_AGE": "a week"})
    "WACOLL_LINKS_MAX_AGE is 'a week'; give the hours a measured links record is reused, a positive number (for example 24)"
    """
    raw = setting("WACOLL_LINKS_MAX_AGE", environ)
    if raw is None:
        return MAX_AGE
    try:
        hours = float(raw)
    except ValueError:
        hours = math.nan
    if not (math.isfinite(hours * 3600.0) and hours > 0):
        return (
            f"WACOLL_LINKS_MAX_AGE is {raw!r}; give the hours a measured links "
            f"record is reused, a positive number (for example 24)"
        )
    return hours * 3600.0


def record_key(hosts, clusters) -> str:
    """The digest naming the record of ``clusters`` (rank lists) whose ranks run on
    ``hosts`` (one host name per rank).

    Examples
    --------
    >>> a = record_key(["x", "x", "y"], ((0, 1), (2,)))
    >>> a == record_key(["x", "x", "y"], ((0,), (1, 2)))
    False
    >>> len(a)
    32
    """
    layout = {
        "hosts": sorted(set(hosts)),
        "clusters": [sorted(hosts[r] for r in c) for c in clusters],
        "ranks": [list(c) for c in clusters],
    }
    text = json.dumps(layout, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _pair_name(a, b):
    return f"{a},{b}"


def measured_topology(clusters, figures) -> Topology:
    """The topology of ``clusters`` with the links of ``figures``.

    ``figures`` maps ``"rtt"`` and ``"rate"`` to ``{"a,b": value}`` for cluster pairs
    ``a <= b`` (``"a,a"``: inside cluster ``a``): round trip seconds and bytes/s.
    Latency is half the round trip; the wide-area default is the median of the pairs,
    and each pair gets its own link in both directions. ``"ranks"``, where given,
    maps rank pairs ``"i,j"`` inside the clusters to short round trips, from which
    each rank's ``t_ini`` is fitted (:func:`t_ini_pairs`).
    """
    import statistics  # (4 ms to import: only where links are read)

    rtt, rate = figures["rtt"], figures["rate"]
    inside = [
        (rtt[k] / 2, rate[k])
        for k in rtt
        if k.split(",")[0] == k.split(",")[1] and k in rate
    ]
    across = {}
    for k in rtt:
        a, b = (int(x) for x in k.split(","))
        if a != b and k in rate:
            across[(a, b)] = (max(rtt[k] / 2, 1e-9), max(rate[k], 1.0))
    links: dict[str, Any] = {}  # Topology.from_clusters's link keywords
    if inside:
        links["intra_latency"] = max(
            float(statistics.median([x[0] for x in inside])), 1e-9
        )
        links["intra_bandwidth"] = max(
            float(statistics.median([x[1] for x in inside])), 1.0
        )
    else:
        links["intra_latency"] = DEFAULT_INTRA_LATENCY
        links["intra_bandwidth"] = DEFAULT_INTRA_BANDWIDTH
    if across:
        links["wan_latency"] = float(statistics.median([v[0] for v in across.values()]))
        links["wan_bandwidth"] = float(statistics.median([v[1] for v in across.values()]))
        pairs = {}
        for (a, b), v in across.items():
            pairs[(a, b)] = pairs[(b, a)] = v
        links["wan_pairs"] = pairs
    topology = Topology.from_clusters(clusters, **links)
    if figures.get("ranks"):
        topology = topology.with_t_ini(_fitted_t_ini(clusters, figures["ranks"]))
    return topology


def t_ini_pairs(clusters) -> list:
    """The rank pairs whose round trips give every rank's ``t_ini``: each rank with
    its next and its next but one around its cluster's ring (2k pairs in a cluster
    of k >= 5 ranks, every pair in a smaller one). The triangles this makes keep
    each rank's figure determined (an even cycle alone would leave it free), and
    twice as many round trips as ranks let the fit outvote one disturbed trip.

    Examples
    --------
    >>> t_ini_pairs([[0, 1, 2], [3, 4, 5, 6], [7, 8], [9]])
    [(0, 1), (0, 2), (1, 2), (3, 4), (3, 5), (3, 6), (4, 5), (4, 6), (5, 6), (7, 8)]
    >>> len(t_ini_pairs([range(10)]))
    20
    """
    pairs = []
    for members in clusters:
        members, k = list(members), len(members)
        mine = {
            tuple(sorted((members[i], members[(i + d) % k])))
            for i in range(k)
            for d in (1, 2)
            if (i + d) % k != i
        }
        pairs += sorted(mine)
    return pairs


def _fitted_t_ini(clusters, ranks) -> list:
    """Each rank's ``t_ini`` (seconds) from the round trips ``{"i,j": rtt}``; a rank
    no pair measured gets the median of the others'."""
    import statistics  # (4 ms to import: only where links are read)

    from wacoll.calibration import fit_t_ini

    size = sum(len(c) for c in clusters)
    rtt = np.full((size, size), np.nan)
    for name, value in ranks.items():
        i, j = (int(x) for x in name.split(","))
        rtt[i, j] = rtt[j, i] = value
    t_ini = fit_t_ini(rtt, clusters)
    known = t_ini[np.isfinite(t_ini) & (t_ini > 0)]
    fill = (
        float(statistics.median(known.tolist())) if known.size else DEFAULT_INTRA_LATENCY
    )
    return [float(v) if math.isfinite(v) and v > 0 else fill for v in t_ini]


def measure_links(
    comm,
    clusters,
    *,
    small: int = 8,
    large: int = 1 << 16,
    reps: int = 5,
    warmup: int = 2,
    window: int = 4,
) -> dict:
    """Measure the links between the clusters' coordinators and inside each cluster
    (collective; every rank gets the same figures, see :func:`measured_topology`).

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm
    clusters : sequence of sequence of int
        The ranks of each cluster, each sorted.
    small, large : int
        Bytes of the latency and of the bandwidth messages.
    reps, warmup : int
        Timed and untimed short round trips per pair.
    window : int
        Messages of the bandwidth burst.

    Examples
    --------
    >>> from mpi4py import MPI
    >>> measure_links(MPI.COMM_SELF, ((0,),))
    {'rtt': {}, 'rate': {}, 'ranks': {}}
    """
    rank = comm.Get_rank()
    coords = [c[0] for c in clusters]
    pairs = {}  # (i, j) ranks -> "a,b" cluster pair
    for a in range(len(clusters)):
        if len(clusters[a]) > 1:
            pairs[(clusters[a][0], clusters[a][1])] = _pair_name(a, a)
        for b in range(a + 1, len(clusters)):
            pairs[(coords[a], coords[b])] = _pair_name(a, b)
    buf = np.zeros(max(int(small), 1), dtype=np.uint8)
    comm.Barrier()
    rtt = _round_trips(comm, pairs, buf, int(reps), int(warmup))
    # short round trips around each cluster, for t_ini
    ranks = _round_trips(
        comm,
        {p: _pair_name(*p) for p in t_ini_pairs(clusters)},
        buf,
        int(reps),
        int(warmup),
    )
    rate = {}
    for (i, j), name in pairs.items():
        if rank in (i, j):
            measured = _burst_rate(
                comm,
                j if rank == i else i,
                rank == i,
                int(large),
                int(window),
                rtt.get(name, 0.0),
            )
            if measured is not None:
                rate[name] = measured
        comm.Barrier()
    figures: dict[str, dict[str, float]] = {"rtt": {}, "rate": {}, "ranks": {}}
    for part in comm.allgather((rtt, rate, ranks)):
        for name, values in zip(("rtt", "rate", "ranks"), part):
            figures[name].update(values)
    return figures


def _round_trips(comm, pairs, buf, reps, warmup) -> dict:
    """The fastest short round trip of each rank pair ``(i, j) -> name`` this rank
    is in, by name; the pairs run in rounds of disjoint pairs (collective)."""
    rank, fastest = comm.Get_rank(), {}
    for this in rounds(list(pairs)):
        for i, j in this:
            if rank in (i, j):
                times = pingpong(
                    comm, j if rank == i else i, rank == i, buf, reps, warmup
                )
                if times:
                    fastest[pairs[(i, j)]] = float(np.min(times))
        comm.Barrier()
    return fastest


#: A bandwidth burst shorter than this (seconds) is measured again with longer
#: messages: a 256 KiB burst over 100 MB/s lasts 3 ms, and a slow start or one
#: scheduling delay of the 8 ranks on 2 cores then read as 21 MB/s (2 MiB bursts
#: measured 99-100 MB/s); over 1 MB/s the first burst already lasts a quarter second.
MIN_BURST = 0.02
#: The longest bandwidth message (bytes): bursts of ``window`` of them.
MAX_MESSAGE = 1 << 22


def _burst_rate(comm, peer, sender, large, window, base):
    """The bandwidth from this rank to ``peer`` (sender) or None (receiver): bursts
    of ``window`` messages, each burst after the first (which warms the connection
    up) timed; messages grow until a burst lasts :data:`MIN_BURST` or they reach
    :data:`MAX_MESSAGE`. The sender tells the receiver each next size."""
    size = np.zeros(1, dtype=np.int64)
    ack = np.zeros(1, dtype=np.uint8)
    nbytes, rate = large, None
    while nbytes:
        big = np.zeros(nbytes, dtype=np.uint8)
        times = bursts(comm, peer, sender, big, ack, window, 1)
        if sender:
            spent = max(times[0] - base, 1e-9)
            rate = float(window * nbytes / spent)
            grow = spent < MIN_BURST and nbytes < MAX_MESSAGE
            size[0] = (
                min(MAX_MESSAGE, nbytes * max(2, math.ceil(MIN_BURST / spent)))
                if grow
                else 0
            )
            comm.Send(size, dest=peer, tag=_SIZE_TAG)
        else:
            comm.Recv(size, source=peer, tag=_SIZE_TAG)
        nbytes = int(size[0])
    return rate


_SIZE_TAG = 0x7AD7


def _positive(value) -> TypeGuard[int | float]:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


def _read_record(path: Path, key: str, clusters):
    """The measurement time and topology of the record at ``path``: ``(when,
    topology)`` (:func:`measured_topology` of its figures: made to validate the
    record, and kept, so that a communicator fits its ``t_ini`` once); ``None`` when
    there is none; a reason (str) when it cannot be used."""
    try:
        info = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):  # no record, or no directory
        return None
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if not stat.S_ISREG(info.st_mode):
        return "is not a regular file"
    if info.st_size > MAX_RECORD_BYTES:
        return f"is larger than {MAX_RECORD_BYTES} bytes"
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as f:
            raw = f.read(MAX_RECORD_BYTES + 1)
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if len(raw) > MAX_RECORD_BYTES:
        return f"is larger than {MAX_RECORD_BYTES} bytes"

    def no_constants(name):
        raise ValueError(f"{name} is not a number JSON allows")

    try:
        data = json.loads(raw.decode("utf-8"), parse_constant=no_constants)
    except (ValueError, UnicodeDecodeError) as exc:
        return f"is not JSON ({exc})"
    try:
        if not isinstance(data, dict) or data.get("version") != _VERSION:
            return "is not a links record of this version"
        if data.get("key") != key or data.get("clusters") != [list(c) for c in clusters]:
            return "describes another layout"
        when = data.get("measured_at")
        if not _positive(when):
            return "has no measurement time"
        figures = {}
        for part in ("rtt", "rate", "ranks"):
            values = data.get(part, {} if part == "ranks" else None)  # (older records
            if not isinstance(values, dict) or not all(
                isinstance(k, str) and _positive(v) for k, v in values.items()
            ):
                return f"has a bad {part!r} table"  # have no t_ini round trips)
            figures[part] = dict(values)
        wanted = {_pair_name(i, j) for i, j in t_ini_pairs(clusters)}
        if "ranks" not in data and wanted:
            return "has no t_ini round trips (it predates them)"
        if set(figures["ranks"]) != wanted:
            return "has a 'ranks' table of other rank pairs than this layout's"
        if not all(v < MAX_ROUND_TRIP for v in figures["ranks"].values()):
            return (
                f"has a 'ranks' round trip over {MAX_ROUND_TRIP:g} s (inside a cluster)"
            )
        # the names and values must make a topology
        topology = measured_topology(clusters, figures)
    except Exception as exc:  # noqa: BLE001 - anything odd in the data: not trusted
        return f"cannot be used ({exc})"
    return float(when), topology


def _write_record(path: Path, key, clusters, hosts, figures, when, elapsed):
    data = {
        "version": _VERSION,
        "key": key,
        "measured_at": when,
        "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when)),
        "seconds": elapsed,
        "hosts": sorted(set(hosts)),
        "clusters": [list(c) for c in clusters],
        "rtt": figures["rtt"],
        "rate": figures["rate"],
        "ranks": figures.get("ranks", {}),
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".links-", suffix=".json")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(data, f, indent=1, allow_nan=False)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except (OSError, ValueError) as exc:
        warnings.warn(
            f"wacoll: the measured links could not be kept in {path} "
            f"({exc}); they will be measured again next time",
            LinksWarning,
            stacklevel=4,
        )


def links_for(
    comm,
    topology: Topology,
    mode: str = "auto",
    *,
    environ=None,
    max_age: float | None = None,
    **options,
):
    """``topology`` with measured links, the source of its links, and the time they
    were measured (collective; the same on every rank).

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm
    topology : Topology
        The discovered topology (its links are MagPIe's defaults).
    mode : {"auto", "on", "fresh", "off"}
        See :data:`MEASURE_MODES`; the same on every rank.
    environ : mapping, optional
        Rank 0's environment, for ``XDG_CACHE_HOME`` and ``WACOLL_LINKS_MAX_AGE``
        (default ``os.environ``).
    max_age : float, optional
        Seconds a record stays good (default: rank 0's :func:`max_age_setting`).
    **options
        For :func:`measure_links`.

    Returns
    -------
    (Topology, str, float or None)
        The topology, ``"measured"``, ``"cached"`` or ``"defaults"``, and the
        measurement time (seconds since the epoch; None for the defaults).

    Raises
    ------
    ConfigurationError
        On every rank, when rank 0's ``WACOLL_LINKS_MAX_AGE`` is not a positive
        number of hours.

    Examples
    --------
    >>> from mpi4py import MPI
    >>> from wacoll import Topology
    >>> links_for(MPI.COMM_SELF, Topology.single(1))[1:]
    ('defaults', None)
    """
    from mpi4py import MPI

    if (
        mode == "off"
        or (mode == "auto" and topology.nclusters < 2)
        or topology.size != comm.Get_size()
    ):
        return topology, "defaults", None
    if mode == "on" and topology.nclusters < 2 and topology.size < 2:
        return topology, "defaults", None
    clusters = topology.clusters
    hosts = comm.allgather(MPI.Get_processor_name())
    key = record_key(hosts, clusters)
    path = cache_dir(environ) / f"{key}.json"

    def look():  # rank 0: a young record and its topology, or None (measure again)
        limit = max_age_setting(environ) if max_age is None else max_age
        if isinstance(limit, str):  # rank 0's WACOLL_LINKS_MAX_AGE: refused everywhere
            raise ConfigurationError(limit)
        record = None if mode == "fresh" else _read_record(path, key, clusters)
        if isinstance(record, str):
            warnings.warn(
                f"wacoll: the links record {path} {record}; measuring the links again",
                LinksWarning,
                stacklevel=5,
            )
            return None
        if record is not None:
            age = time.time() - record[0]
            if 0 <= age < limit:
                return record
            warnings.warn(
                f"wacoll: the links record {path} is {age / 3600:.1f} h "
                f"old (older than {limit / 3600:g} h); measuring the "
                f"links again",
                LinksWarning,
                stacklevel=5,
            )
        return None

    found = from_rank_0(
        comm, look, ConfigurationError, f"reading the links record {path}"
    )
    if found is not None:  # (one broadcast: the topology rank 0 made of the record)
        when, measured = found
        return measured, "cached", when
    begin = MPI.Wtime()
    figures = measure_links(comm, clusters, **options)
    elapsed = MPI.Wtime() - begin
    when = comm.bcast(time.time(), root=0)
    if comm.Get_rank() == 0:
        _write_record(path, key, clusters, hosts, figures, when, elapsed)
    return _from_rank_0(comm, clusters, figures), "measured", when


def _from_rank_0(comm, clusters, figures) -> Topology:
    """The topology of ``figures``, built on rank 0 and broadcast: every rank plans
    with the very same numbers (the ``t_ini`` fit iterates in floating point, whose
    last bits may differ between machines)."""
    return from_rank_0(
        comm,
        lambda: measured_topology(clusters, figures),
        TopologyError,
        "fitting the measured links",
    )
