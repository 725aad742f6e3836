"""From measured links to a topology: clustering, fits and the calibration report.

This is the plan-world half of calibration (numpy only, no MPI):
:func:`wacoll.mpi.allpairs.measure` times the links of a communicator and hands the
matrices here; the functions also work on any latency matrix a user has.

* :func:`find_clusters` groups ranks by single-linkage clustering of their pair
  latencies, cut at the largest gap (by ratio) in the sorted latencies.
* :func:`fit_t_ini` estimates each rank's message initiation cost as Banikazemi et
  al. measure it: half the round-trip time of a short message between two nodes of
  one kind, generalised to a least-absolute-deviations fit of
  ``rtt[i, j] = t_ini[i] + t_ini[j]`` over the pairs inside each cluster.
* :func:`build_topology` turns clusters, latencies and bandwidths into a
  :class:`wacoll.Topology` (medians per level, per-pair wide-area links where a
  directed cluster pair differs from the others).
* :class:`CalibrationReport` holds it all, prints a table (measured against a
  configured topology when one is given), draws the latency heatmap and saves JSON.

Examples
--------
Two clusters of two ranks, 10 us inside, 10 ms between:

>>> import numpy as np
>>> lat = np.full((4, 4), 0.01)
>>> lat[:2, :2] = lat[2:, 2:] = 1e-5
>>> np.fill_diagonal(lat, np.nan)
>>> find_clusters(lat).clusters
((0, 1), (2, 3))
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from wacoll.errors import TopologyError
from wacoll.topology import LinkParams, Topology

__all__ = [
    "Clustering",
    "find_clusters",
    "fit_t_ini",
    "build_topology",
    "CalibrationReport",
    "compare_topologies",
    "plot_latency_heatmap",
    "DEFAULT_MIN_GAP",
    "DEFAULT_WIDE_AREA",
]

#: A split between fast and slow links needs the slow ones this many times slower.
DEFAULT_MIN_GAP = 3.0
#: Without such a gap, links slower than this (one-way, seconds) are wide-area: every
#: rank is then its own cluster; faster ones make a single cluster.
DEFAULT_WIDE_AREA = 1e-3
#: A directed cluster pair gets its own wide-area link when it differs this much.
DEFAULT_PAIR_TOLERANCE = 0.05


def _square(matrix, name) -> np.ndarray:
    m = np.array(matrix, dtype=float)
    if m.ndim != 2 or m.shape[0] != m.shape[1] or m.shape[0] == 0:
        raise TopologyError(
            f"{name} must be a non-empty square matrix, got shape {m.shape}"
        )
    return m


def _symmetric(matrix) -> np.ndarray:
    """Both directions of a pair combined (their mean; one if the other is missing)."""
    m = np.array(matrix, dtype=float)
    np.fill_diagonal(m, np.nan)
    both = np.stack([m, m.T])
    with np.errstate(invalid="ignore"):
        counts = np.sum(~np.isnan(both), axis=0)
        out = np.where(
            counts > 0, np.nansum(both, axis=0) / np.maximum(counts, 1), np.nan
        )
    return out


@dataclass(frozen=True)
class Clustering:
    """Clusters found in a latency matrix, and why.

    Attributes
    ----------
    clusters : tuple of tuple of int
        The ranks of each cluster, numbered by their lowest rank.
    threshold : float or None
        Links at or below this latency (seconds) join ranks into one cluster; None
        when no gap was found.
    gap : float
        The ratio of the latencies on either side of the largest gap (1.0 if none).
    reason : str
        How the decision was made, in words.
    """

    clusters: tuple
    threshold: float | None
    gap: float
    reason: str

    @property
    def labels(self) -> tuple:
        """The cluster of each rank."""
        out = [0] * sum(len(c) for c in self.clusters)
        for c, members in enumerate(self.clusters):
            for r in members:
                out[r] = c
        return tuple(out)


def _components(n, edges):
    parent = list(range(n))

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for i, j in edges:
        a, b = find(i), find(j)
        if a != b:
            parent[max(a, b)] = min(a, b)
    groups = {}
    for r in range(n):
        groups.setdefault(find(r), []).append(r)
    return tuple(sorted((tuple(g) for g in groups.values()), key=lambda g: g[0]))


def find_clusters(
    latency, *, min_gap: float = DEFAULT_MIN_GAP, wide_area: float = DEFAULT_WIDE_AREA
) -> Clustering:
    """Group ranks into clusters from their pair latencies.

    The pair latencies (both directions of a pair averaged; NaN for pairs not
    measured) are sorted and the largest ratio between neighbours is the candidate
    gap between fast and slow links. If it is at least ``min_gap``, ranks joined by
    a link below the gap are one cluster (single linkage: connected components, so a
    slow outlier inside a cluster does not split it, and sampled matrices work as
    long as each cluster's measured pairs connect it). Without such a gap all links
    are alike: one cluster if they are faster than ``wide_area``, else every rank is
    its own cluster.

    Parameters
    ----------
    latency : (n, n) array_like
        One-way latencies in seconds; the diagonal and NaN entries are ignored.
    min_gap : float
        The least ratio between the slowest fast link and the fastest slow link.
    wide_area : float
        One-way latency in seconds above which uniform links count as wide-area.

    Returns
    -------
    Clustering

    Examples
    --------
    >>> import numpy as np
    >>> find_clusters(np.full((3, 3), 2e-6)).clusters
    ((0, 1, 2),)
    >>> find_clusters(np.full((3, 3), 0.02)).clusters
    ((0,), (1,), (2,))
    """
    lat = _square(latency, "latency")
    n = lat.shape[0]
    if min_gap <= 1:
        raise TopologyError(f"min_gap must be > 1, got {min_gap!r}")
    if n == 1:
        return Clustering(((0,),), None, 1.0, "one rank")
    sym = _symmetric(lat)
    iu = np.triu_indices(n, 1)
    values = sym[iu]
    known = ~np.isnan(values)
    if not known.any():
        raise TopologyError("no pair latency was measured")
    if (values[known] <= 0).any():
        raise TopologyError("pair latencies must be > 0 seconds")
    pairs = list(zip(iu[0][known], iu[1][known]))
    values = values[known]
    order = np.sort(values)
    gap, threshold = 1.0, None
    if len(order) > 1:
        ratios = order[1:] / order[:-1]
        k = int(np.argmax(ratios))
        gap = float(ratios[k])
        if gap >= min_gap:
            threshold = float(math.sqrt(order[k] * order[k + 1]))
    if threshold is not None:
        edges = [p for p, v in zip(pairs, values) if v <= threshold]
        clusters = _components(n, edges)
        reason = (
            f"largest gap x{gap:.3g} between {order[order <= threshold].max():.3g} s "
            f"and {order[order > threshold].min():.3g} s"
        )
        return Clustering(clusters, threshold, gap, reason)
    median = float(statistics.median(np.asarray(values, dtype=float).tolist()))
    if median > wide_area:
        clusters = tuple((r,) for r in range(n))
        reason = (
            f"no gap of x{min_gap:g} (largest x{gap:.3g}); median {median:.3g} s is "
            f"above {wide_area:g} s: every rank is its own cluster"
        )
    else:
        clusters = _components(n, pairs)
        reason = (
            f"no gap of x{min_gap:g} (largest x{gap:.3g}); median {median:.3g} s is "
            f"at most {wide_area:g} s: one cluster"
        )
    return Clustering(clusters, None, gap, reason)


def fit_t_ini(rtt, clusters, self_rtt=None) -> np.ndarray:
    """Per-rank message initiation cost from short-message round trips.

    Banikazemi et al. take a node's ``t_ini`` as half the round-trip time of a short
    message between two nodes of its kind. With several ranks per cluster this is the
    least-absolute-deviations fit of ``rtt[i, j] = t_ini[i] + t_ini[j]`` over the
    measured pairs inside each cluster, so a round trip disturbed by a busy machine
    does not move the estimates while the other pairs determine them. Two ranks alone split their round trip evenly. A rank
    alone in its cluster gets half its round trip to itself (``self_rtt``), or the
    median of the others' when that is not given.

    Parameters
    ----------
    rtt : (n, n) array_like
        Short-message round-trip times in seconds (NaN: not measured).
    clusters : sequence of sequence of int
    self_rtt : sequence of float, optional
        Each rank's round-trip time to itself.

    Returns
    -------
    numpy.ndarray
        ``t_ini`` in seconds, one per rank, each >= 0.

    Examples
    --------
    >>> import numpy as np
    >>> t = np.array([100, 300, 300, 100, 300]) * 1e-6
    >>> rtt = t[:, None] + t[None, :]
    >>> np.round(fit_t_ini(rtt, [range(5)]) * 1e6, 3).tolist()
    [100.0, 300.0, 300.0, 100.0, 300.0]
    >>> rtt[1, 2] = rtt[2, 1] = 5e-3          # one disturbed pair
    >>> np.round(fit_t_ini(rtt, [range(5)]) * 1e6, 3).tolist()
    [100.0, 300.0, 300.0, 100.0, 300.0]
    """
    m = _square(rtt, "rtt")
    n = m.shape[0]
    sym = _symmetric(m)
    t = np.full(n, np.nan)
    for members in clusters:
        members = list(members)
        if len(members) < 2:
            continue
        block = sym[np.ix_(members, members)]
        known = ~np.isnan(block)
        np.fill_diagonal(known, False)
        if not known.any():
            continue
        # Least absolute deviations (iteratively reweighted least squares): a round
        # trip disturbed by a busy machine shifts no rank's estimate, as long as
        # the other pairs determine it.
        rows: list[np.ndarray] | np.ndarray
        rhs: list[float] | np.ndarray
        rows, rhs = [], []
        for a in range(len(members)):
            for b in range(a + 1, len(members)):
                if known[a, b]:
                    row = np.zeros(len(members))
                    row[a] = row[b] = 1.0
                    rows.append(row)
                    rhs.append(block[a, b])
        rows, rhs = np.array(rows), np.array(rhs)
        floor = 1e-6 * float(statistics.median(rhs.tolist())) + 1e-15
        weights = np.ones(len(rhs))
        for _ in range(200):
            sw = np.sqrt(weights)
            est = np.linalg.lstsq(rows * sw[:, None], rhs * sw, rcond=None)[0]
            resid = np.abs(rows @ est - rhs)
            new_weights = 1.0 / np.maximum(resid, floor)
            if np.allclose(new_weights, weights, rtol=1e-6):
                break
            weights = new_weights
        covered = rows.sum(axis=0) > 0
        for a, i in enumerate(members):
            if covered[a]:
                t[i] = max(float(est[a]), 0.0)
    missing = np.isnan(t)
    if missing.any():
        if self_rtt is not None:
            half = np.asarray(self_rtt, dtype=float) / 2
            t[missing] = half[missing]
        missing = np.isnan(t)
        if missing.any():
            t[missing] = (
                float(statistics.median(t[~missing].tolist()))
                if (~missing).any()
                else 0.0
            )
    return t


def _median(values, default):
    values = [v for v in values if v is not None and not math.isnan(v)]
    return float(statistics.median(values)) if values else default


def _close(a: LinkParams, b: LinkParams, tolerance):
    return (
        abs(a.latency - b.latency) <= tolerance * max(b.latency, 1e-12)
        and abs(a.bandwidth - b.bandwidth) <= tolerance * b.bandwidth
    )


def build_topology(
    clusters,
    latency,
    bandwidth=None,
    *,
    t_ini=None,
    pair_tolerance: float = DEFAULT_PAIR_TOLERANCE,
) -> Topology:
    """A topology from clusters and measured one-way latency and bandwidth matrices.

    The intra-cluster link is the median over pairs inside clusters; each directed
    cluster pair's link is the median over its rank pairs; the wide-area default is
    the median over cluster pairs, and a pair that differs from it by more than
    ``pair_tolerance`` (relative, latency or bandwidth) gets its own ``wan_pairs``
    entry. Levels with nothing measured keep :class:`wacoll.Topology`'s defaults.

    Parameters
    ----------
    clusters : sequence of sequence of int
    latency : (n, n) array_like
        One-way latencies in seconds (NaN: not measured).
    bandwidth : (n, n) array_like, optional
        Bandwidths in bytes/s (NaN: not measured).
    t_ini : sequence of float, optional
        Per-rank message initiation costs in seconds.
    pair_tolerance : float

    Returns
    -------
    wacoll.Topology

    Examples
    --------
    >>> import numpy as np
    >>> lat = np.array([[0, 1e-5, 0.01], [1e-5, 0, 0.01], [0.01, 0.01, 0]])
    >>> bw = np.array([[0, 1e9, 1e6], [1e9, 0, 1e6], [1e6, 1e6, 0]])
    >>> topo = build_topology([[0, 1], [2]], lat, bw)
    >>> topo.clusters, topo.wan.latency, topo.intra.bandwidth
    (((0, 1), (2,)), 0.01, 1000000000.0)
    """
    lat = _square(latency, "latency")
    n = lat.shape[0]
    bw = np.full((n, n), np.nan) if bandwidth is None else _square(bandwidth, "bandwidth")
    base = Topology.from_clusters(clusters)
    labels = base.cluster_ids
    intra_lat, intra_bw = [], []
    pair_lat: dict[tuple[int, int], list[float]] = {}
    pair_bw: dict[tuple[int, int], list[float]] = {}
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            a, b = labels[i], labels[j]
            if a == b:
                intra_lat.append(lat[i, j])
                intra_bw.append(bw[i, j])
            else:
                pair_lat.setdefault((a, b), []).append(lat[i, j])
                pair_bw.setdefault((a, b), []).append(bw[i, j])
    intra = LinkParams(
        _median(intra_lat, base.intra.latency), _median(intra_bw, base.intra.bandwidth)
    )
    links = {}
    for key in pair_lat:
        links[key] = (_median(pair_lat[key], None), _median(pair_bw[key], None))
    wan = LinkParams(
        _median([v[0] for v in links.values()], base.wan.latency),
        _median([v[1] for v in links.values()], base.wan.bandwidth),
    )
    wan_pairs = {}
    for key, (pl, pb) in sorted(links.items()):
        link = LinkParams(
            wan.latency if pl is None else pl, wan.bandwidth if pb is None else pb
        )
        if not _close(link, wan, pair_tolerance):
            wan_pairs[key] = (link.latency, link.bandwidth)
    return Topology.from_clusters(
        base.clusters,
        intra_latency=intra.latency,
        intra_bandwidth=intra.bandwidth,
        wan_latency=wan.latency,
        wan_bandwidth=wan.bandwidth,
        wan_pairs=wan_pairs or None,
        t_ini=None if t_ini is None else [float(v) for v in t_ini],
    )


def _same_partition(a: Topology, b: Topology) -> bool:
    return sorted(a.clusters) == sorted(b.clusters)


def compare_topologies(measured: Topology, configured: Topology) -> list:
    """Rows ``(what, configured, measured, ratio)`` comparing two topologies.

    One row for the clusters, one for the intra-cluster link and one per directed
    cluster pair of ``configured`` (latency and bandwidth), and the ``t_ini`` range
    when either has it. Cluster pairs are matched through the ranks, so the
    comparison holds even if the measured clusters are numbered differently.

    Examples
    --------
    >>> t = Topology.from_sizes([1, 1], wan_latency=0.01, wan_bandwidth=1e6)
    >>> compare_topologies(t, t)[1]
    ('wan 0->1 latency', 0.01, 0.01, 1.0)
    """
    if measured.size != configured.size:
        raise TopologyError(
            f"the topologies have {measured.size} and {configured.size} ranks"
        )
    # (what, configured, measured, ratio): clusters, links and t_ini, as they are
    rows: list[tuple[str, object, object, object]] = [
        (
            "clusters",
            [list(c) for c in configured.clusters],
            [list(c) for c in measured.clusters],
            "same" if _same_partition(measured, configured) else "different",
        )
    ]
    for a in range(configured.nclusters):
        for b in range(configured.nclusters):
            if a == b:
                continue
            i, j = configured.clusters[a][0], configured.clusters[b][0]
            want, got = configured.link(i, j), measured.link(i, j)
            rows.append(
                (
                    f"wan {a}->{b} latency",
                    want.latency,
                    got.latency,
                    got.latency / want.latency if want.latency else math.nan,
                )
            )
            rows.append(
                (
                    f"wan {a}->{b} bandwidth",
                    want.bandwidth,
                    got.bandwidth,
                    got.bandwidth / want.bandwidth,
                )
            )
    if any(len(c) > 1 for c in configured.clusters):
        rows.append(
            (
                "intra latency",
                configured.intra.latency,
                measured.intra.latency,
                measured.intra.latency / configured.intra.latency
                if configured.intra.latency
                else math.nan,
            )
        )
        rows.append(
            (
                "intra bandwidth",
                configured.intra.bandwidth,
                measured.intra.bandwidth,
                measured.intra.bandwidth / configured.intra.bandwidth,
            )
        )
    if measured.t_ini is not None or configured.t_ini is not None:

        def span(t):
            return None if t is None else (min(t), max(t))

        rows.append(("t_ini min..max", span(configured.t_ini), span(measured.t_ini), ""))
    return rows


def _fmt(value):
    if value is None:
        return "-"
    if isinstance(value, tuple):
        return "..".join(_fmt(v) for v in value)
    if isinstance(value, list):
        return json.dumps(value).replace(" ", "")
    if isinstance(value, str):
        return value
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return f"{value:.4g}"


def plot_latency_heatmap(latency, *, clusters=None, ax=None, title=None, unit="ms"):
    """Draw a latency matrix as a heatmap (log colour scale) with a colour bar.

    Parameters
    ----------
    latency : (n, n) array_like
        One-way latencies in seconds (NaN: not measured, drawn blank).
    clusters : sequence of sequence of int, optional
        Found clusters, outlined on the matrix.
    ax : matplotlib Axes, optional
    title : str, optional
    unit : {"s", "ms", "us"}
        The colour bar's unit.

    Returns
    -------
    matplotlib.axes.Axes
    """
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm
    from matplotlib.patches import Rectangle
    from matplotlib.ticker import MaxNLocator

    scale = {"s": 1.0, "ms": 1e3, "us": 1e6}[unit]
    lat = _square(latency, "latency").copy()
    np.fill_diagonal(lat, np.nan)
    n = lat.shape[0]
    if ax is None:
        size = min(9.0, 3.5 + 0.25 * n)
        _, ax = plt.subplots(figsize=(size + 1.2, size))
    data = lat * scale
    finite = data[np.isfinite(data) & (data > 0)]
    norm = (
        LogNorm(vmin=finite.min(), vmax=finite.max())
        if finite.size and finite.max() > finite.min()
        else None
    )
    image = ax.imshow(
        np.ma.masked_invalid(data), cmap="viridis", norm=norm, interpolation="nearest"
    )
    bar = ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    bar.set_label(f"one-way latency ({'µs' if unit == 'us' else unit})")
    ax.set_xlabel("destination rank")
    ax.set_ylabel("source rank")
    if n <= 16:
        ax.set_xticks(range(n))
        ax.set_yticks(range(n))
    else:
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_locator(MaxNLocator(integer=True, nbins=16))
    if clusters is not None:
        order = sorted(clusters, key=lambda c: c[0])
        for members in order:
            lo, hi = min(members), max(members)
            if list(members) == list(range(lo, hi + 1)):
                ax.add_patch(
                    Rectangle(
                        (lo - 0.5, lo - 0.5),
                        hi - lo + 1,
                        hi - lo + 1,
                        fill=False,
                        edgecolor="white",
                        linewidth=1.5,
                    )
                )
    ax.set_title(title or f"measured latency, {n} ranks")
    return ax


@dataclass
class CalibrationReport:
    """What a calibration measured and what it made of it.

    Attributes
    ----------
    latency : numpy.ndarray
        One-way short-message latency (round trip / 2) per rank pair, seconds; NaN
        where not measured and on the diagonal.
    rtt : numpy.ndarray
        The short-message round-trip times behind ``latency``, seconds.
    bandwidth : numpy.ndarray
        Bandwidth per directed rank pair in bytes/s; NaN where not measured.
    self_rtt : numpy.ndarray
        Each rank's round trip to itself, seconds.
    t_ini : numpy.ndarray
        Per-rank message initiation cost, seconds (see :func:`fit_t_ini`).
    clustering : Clustering
    topology : wacoll.Topology
    settings : dict
        Message sizes, repetitions and pair counts the measurement used.
    elapsed : float
        Wall-clock seconds the measurement took.
    """

    latency: np.ndarray
    rtt: np.ndarray
    bandwidth: np.ndarray
    self_rtt: np.ndarray
    t_ini: np.ndarray
    clustering: Clustering
    topology: Topology
    settings: dict = field(default_factory=dict)
    elapsed: float = 0.0

    @classmethod
    def from_measurements(
        cls,
        rtt,
        bandwidth,
        self_rtt,
        *,
        settings=None,
        elapsed=0.0,
        min_gap=DEFAULT_MIN_GAP,
        wide_area=DEFAULT_WIDE_AREA,
        pair_tolerance=DEFAULT_PAIR_TOLERANCE,
    ) -> CalibrationReport:
        """Cluster, fit and build the topology from raw measurements.

        Examples
        --------
        >>> import numpy as np
        >>> rtt = np.full((3, 3), 0.02); rtt[0, 1] = rtt[1, 0] = 2e-5
        >>> rep = CalibrationReport.from_measurements(rtt, None, [1e-6] * 3)
        >>> rep.topology.clusters, rep.topology.wan.latency
        (((0, 1), (2,)), 0.01)
        """
        rtt = _square(rtt, "rtt").copy()
        np.fill_diagonal(rtt, np.nan)
        n = rtt.shape[0]
        bw = (
            np.full((n, n), np.nan)
            if bandwidth is None
            else _square(bandwidth, "bandwidth")
        )
        latency = rtt / 2
        clustering = (
            find_clusters(latency, min_gap=min_gap, wide_area=wide_area)
            if n > 1
            else Clustering(((0,),), None, 1.0, "one rank")
        )
        self_rtt = np.asarray(self_rtt, dtype=float)
        t_ini = fit_t_ini(rtt, clustering.clusters, self_rtt)
        topology = build_topology(
            clustering.clusters,
            _symmetric(latency),
            bw,
            t_ini=t_ini,
            pair_tolerance=pair_tolerance,
        )
        return cls(
            latency,
            rtt,
            bw,
            self_rtt,
            t_ini,
            clustering,
            topology,
            dict(settings or {}),
            float(elapsed),
        )

    # ----------------------------------------------------------------- output
    def table(self, configured: Topology | None = None) -> str:
        """A text table: found clusters, links and ``t_ini``; against ``configured``.

        Examples
        --------
        >>> import numpy as np
        >>> rtt = np.full((2, 2), 0.02)
        >>> print(CalibrationReport.from_measurements(rtt, None, [1e-6] * 2).table())
        ... # doctest: +NORMALIZE_WHITESPACE
        calibrated 2 ranks: 2 clusters [[0],[1]]
          no gap of x3 (largest x1); median 0.01 s is above 0.001 s: every rank is its
          own cluster
        link                        latency        bandwidth
        wan (default)              10000.0 us     1e+06 B/s
        t_ini (us): 0.5 0.5
        """
        topo = self.topology
        lines = [
            f"calibrated {topo.size} ranks: {topo.nclusters} "
            f"{'cluster' if topo.nclusters == 1 else 'clusters'} "
            f"{_fmt([list(c) for c in topo.clusters])}",
            f"  {self.clustering.reason}",
        ]
        if configured is not None:
            lines.append(f"{'':28s}{'configured':>18s} {'measured':>18s} {'ratio':>8s}")
            for what, want, got, ratio in compare_topologies(topo, configured):
                if what == "clusters":
                    lines.insert(2, f"  configured clusters {_fmt(want)}: {ratio}")
                    continue
                unit, scale = (
                    ("ms", 1e3)
                    if "latency" in what or "t_ini" in what
                    else ("MB/s", 1e-6)
                )

                def show(v):
                    if v is None:
                        return "-"
                    if isinstance(v, tuple):
                        return "..".join(f"{x * scale:.4g}" for x in v)
                    return f"{v * scale:.4g}"

                ratio_s = f"{ratio:.3f}" if isinstance(ratio, float) else ratio
                lines.append(
                    f"{what + ' (' + unit + ')':28s}{show(want):>18s} "
                    f"{show(got):>18s} {ratio_s:>8s}"
                )
            if topo.t_ini is not None:
                lines.append(_t_ini_line(topo.t_ini))
            return "\n".join(lines)
        lines.append(f"{'link':28s}{'latency':>10s}{'bandwidth':>17s}")
        if any(len(c) > 1 for c in topo.clusters):
            lines.append(
                f"{'intra':26s}{topo.intra.latency * 1e6:>10.1f} us"
                f"{topo.intra.bandwidth:>11.4g} B/s"
            )
        if topo.nclusters > 1:
            lines.append(
                f"{'wan (default)':26s}{topo.wan.latency * 1e6:>10.1f} us"
                f"{topo.wan.bandwidth:>11.4g} B/s"
            )
            for (a, b), link in topo.wan_pairs:
                lines.append(
                    f"{f'wan {a}->{b}':26s}{link.latency * 1e6:>10.1f} us"
                    f"{link.bandwidth:>11.4g} B/s"
                )
        if topo.t_ini is not None:
            lines.append(_t_ini_line(topo.t_ini))
        return "\n".join(lines)

    def heatmap(self, path=None, *, ax=None, title=None):
        """Draw the latency matrix (:func:`plot_latency_heatmap`); save a PNG to ``path``.

        Returns
        -------
        matplotlib.axes.Axes
        """
        unit = "us" if np.nanmax(self.latency) < 1e-3 else "ms"
        ax = plot_latency_heatmap(
            self.latency,
            clusters=self.topology.clusters,
            ax=ax,
            unit=unit,
            title=title
            or (
                f"measured one-way latency, {self.topology.size} ranks, "
                f"{self.topology.nclusters} clusters"
            ),
        )
        if path is not None:
            ax.figure.tight_layout()
            ax.figure.savefig(path, dpi=120)
        return ax

    def to_dict(self) -> dict:
        """A JSON-ready form: matrices as nested lists (null where not measured)."""

        def listify(m):
            return [
                [None if not np.isfinite(v) else float(v) for v in row]
                for row in np.atleast_2d(m)
            ]

        return {
            "topology": self.topology.to_dict(),
            "clusters": [list(c) for c in self.clustering.clusters],
            "threshold": self.clustering.threshold,
            "gap": self.clustering.gap,
            "reason": self.clustering.reason,
            "latency": listify(self.latency),
            "rtt": listify(self.rtt),
            "bandwidth": listify(self.bandwidth),
            "self_rtt": [float(v) for v in self.self_rtt],
            "t_ini": [float(v) for v in self.t_ini],
            "settings": self.settings,
            "elapsed": self.elapsed,
        }

    def save(self, path):
        """Write :meth:`to_dict` as JSON."""
        Path(path).write_text(json.dumps(self.to_dict(), indent=1) + "\n")


def _t_ini_line(t_ini):
    """Each rank's message initiation cost, in microseconds, on one line."""
    return "t_ini (us): " + " ".join(f"{t * 1e6:.3g}" for t in t_ini)
