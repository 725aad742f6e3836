"""Topologies: which rank sits in which cluster, and what the links cost.

A :class:`Topology` is plain, immutable data. It says which ranks of a communicator
form each cluster (contiguous rank ranges or any permutation, clusters of unequal
sizes), the latency and bandwidth of intra-cluster and wide-area links (optionally per
directed cluster pair), an optional per-rank message initiation cost ``t_ini``
(Banikazemi et al.) and an optional per-rank link rate (Matsuda et al.).

Files and limits
----------------
:meth:`Topology.from_file` reads TOML or JSON as data (never evaluated), strictly:
unknown fields, duplicated keys or wide-area pairs, booleans where numbers belong,
fractional cluster ids and non-finite numbers raise :class:`~wacoll.errors.TopologyError`
naming the file and the field, as does a file that is not UTF-8 or is longer than
:data:`MAX_FILE_BYTES`. Latencies are finite and >= 0, bandwidths finite and > 0 (an
unlimited bandwidth is written as a large finite number), so whatever :meth:`save`
writes, :meth:`from_file` reads back to an equal topology.

A ``sizes`` list is the one place a few characters can ask for many ranks, so
:meth:`from_sizes` (and ``sizes`` in a file) builds at most ``max_ranks`` ranks:
:data:`MAX_RANKS` by default, raised by the keyword or the module constant for a
genuinely large topology. In a file the limit is at least the file's length, so a file
that lists its ranks is never refused for its size.

Examples
--------
>>> from wacoll import Topology
>>> topo = Topology.from_sizes([3, 3], wan_latency=0.01, wan_bandwidth=1e6)
>>> topo.size, topo.nclusters, topo.cluster_of(4)
(6, 2, 1)
>>> topo.coordinators(root=1)
(1, 3)
>>> topo.link(0, 4).latency
0.01
"""

from __future__ import annotations

import json
import math
import numbers
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wacoll.datafile import read_text
from wacoll.errors import TopologyError
from wacoll.strict_json import loads_strict

__all__ = ["LinkParams", "Topology", "MAX_RANKS", "MAX_FILE_BYTES"]

#: The most ranks :meth:`Topology.from_sizes` builds unless given ``max_ranks=``.
MAX_RANKS = 1 << 16
#: The longest topology file read, in bytes.
MAX_FILE_BYTES = 1 << 24

#: Defaults: a fast cluster interconnect, and MagPIe's wide-area setting (10 ms, 1 MB/s).
DEFAULT_INTRA_LATENCY = 1e-5
DEFAULT_INTRA_BANDWIDTH = 1e9
DEFAULT_WAN_LATENCY = 1e-2
DEFAULT_WAN_BANDWIDTH = 1e6


@dataclass(frozen=True)
class LinkParams:
    """One link level: one-way latency in seconds, bandwidth in bytes per second.

    Examples
    --------
    >>> LinkParams(0.01, 1e6).transfer_time(1000)
    0.011
    """

    latency: float
    bandwidth: float

    def __post_init__(self):
        _validate_latency("latency", self.latency)
        _validate_bandwidth("bandwidth", self.bandwidth)

    def transfer_time(self, nbytes: float) -> float:
        """Latency plus ``nbytes`` over the bandwidth, in seconds."""
        return self.latency + nbytes / self.bandwidth


def _is_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _show(value):
    """``repr(value)``, shortened for a message."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _as_float(name, value, unit):
    if not _is_real(value):
        raise TopologyError(f"{name} must be a number of {unit}, got {_show(value)}")
    try:
        return float(value)
    except (OverflowError, ValueError):
        raise TopologyError(f"{name} is too large, got {_show(value)}") from None


def _validate_latency(name, value):
    f = _as_float(name, value, "seconds")
    if not math.isfinite(f) or f < 0:
        raise TopologyError(f"{name} must be finite and >= 0, got {_show(value)}")


def _validate_bandwidth(name, value):
    f = _as_float(name, value, "bytes/s")
    if math.isnan(f) or f <= 0:
        raise TopologyError(f"{name} must be > 0 bytes/s, got {_show(value)}")
    if math.isinf(f):
        raise TopologyError(
            f"{name} must be finite (give a large number for an "
            f"unlimited link), got {_show(value)}"
        )


def _cluster_id(name, value):
    if not _is_int(value):
        raise TopologyError(f"{name} must be an integer cluster id, got {_show(value)}")
    return int(value)


@dataclass(frozen=True)
class Topology:
    """Clusters of ranks and the cost of the links between them.

    Build one with :meth:`from_clusters`, :meth:`from_sizes`, :meth:`single`,
    :meth:`from_dict` or :meth:`from_file` rather than calling the class directly.

    Attributes
    ----------
    clusters : tuple of tuple of int
        The ranks of each cluster, each cluster sorted. Together they are ``0..size-1``.
    intra : LinkParams
        Links between ranks of the same cluster.
    wan : LinkParams
        Wide-area links between clusters, unless ``wan_pairs`` overrides a pair.
    wan_pairs : tuple of ((int, int), LinkParams)
        Per directed cluster pair overrides of ``wan``.
    t_ini : tuple of float or None
        Per-rank message initiation cost in seconds (Banikazemi et al.).
    node_bandwidth : tuple of float or None
        Per-rank link rate in bytes/s: a rank sends at most this fast on any link.
    """

    clusters: tuple
    intra: LinkParams = LinkParams(DEFAULT_INTRA_LATENCY, DEFAULT_INTRA_BANDWIDTH)
    wan: LinkParams = LinkParams(DEFAULT_WAN_LATENCY, DEFAULT_WAN_BANDWIDTH)
    wan_pairs: tuple = ()
    t_ini: tuple | None = None
    node_bandwidth: tuple | None = None
    _cluster_of: tuple = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self):
        clusters = self.clusters
        if not isinstance(clusters, tuple) or not clusters:
            raise TopologyError("a topology needs at least one cluster")
        seen = {}
        for c, members in enumerate(clusters):
            if len(members) == 0:
                raise TopologyError(f"cluster {c} is empty")
            for r in members:
                if not _is_int(r):
                    raise TopologyError(
                        f"cluster {c} has a rank that is not an integer: {r!r}"
                    )
                if r < 0:
                    raise TopologyError(f"cluster {c} has a negative rank {r}")
                if r in seen:
                    raise TopologyError(
                        f"rank {r} appears twice (clusters {seen[r]} and {c})"
                    )
                seen[r] = c
        size = len(seen)
        missing = sorted(set(range(size)) - set(seen))
        if missing:
            beyond = max(seen)
            raise TopologyError(
                f"ranks must be 0..{size - 1}; rank {missing[0]} is missing"
                + (f" and rank {beyond} is out of range" if beyond >= size else "")
            )
        object.__setattr__(self, "_cluster_of", tuple(seen[r] for r in range(size)))
        pairs = {}
        for key, link in self.wan_pairs:
            a, b = key
            for c in (a, b):
                if not (0 <= c < len(clusters)):
                    raise TopologyError(
                        f"wide-area pair {key} names cluster {c}, which does not exist"
                    )
            if a == b:
                raise TopologyError(f"wide-area pair {key} joins a cluster to itself")
            if not isinstance(link, LinkParams):
                raise TopologyError(f"wide-area pair {key} needs LinkParams")
            pairs[(a, b)] = link
        object.__setattr__(self, "wan_pairs", tuple(sorted(pairs.items())))
        for name in ("t_ini", "node_bandwidth"):
            values = getattr(self, name)
            if values is None:
                continue
            if len(values) != size:
                raise TopologyError(f"{name} has {len(values)} entries for {size} ranks")
            check = _validate_latency if name == "t_ini" else _validate_bandwidth
            for r, v in enumerate(values):
                check(f"{name}[{r}]", v)
            object.__setattr__(self, name, tuple(float(v) for v in values))

    # ----------------------------------------------------------------- constructors
    @classmethod
    def from_clusters(
        cls,
        clusters: Iterable[Iterable[int]],
        *,
        intra_latency: float = DEFAULT_INTRA_LATENCY,
        intra_bandwidth: float = DEFAULT_INTRA_BANDWIDTH,
        wan_latency: float = DEFAULT_WAN_LATENCY,
        wan_bandwidth: float = DEFAULT_WAN_BANDWIDTH,
        wan_pairs: Mapping | None = None,
        t_ini: Sequence[float] | None = None,
        node_bandwidth: Sequence[float] | None = None,
    ) -> Topology:
        """A topology from the rank lists of its clusters.

        Parameters
        ----------
        clusters : iterable of iterable of int
            The ranks of each cluster; every rank ``0..size-1`` exactly once.
        intra_latency, intra_bandwidth : float
            Intra-cluster link: seconds and bytes/s.
        wan_latency, wan_bandwidth : float
            Wide-area link: seconds and bytes/s.
        wan_pairs : mapping of (int, int) to (latency, bandwidth), optional
            Per directed cluster pair overrides.
        t_ini : sequence of float, optional
            Per-rank message initiation cost in seconds.
        node_bandwidth : sequence of float, optional
            Per-rank link rate in bytes/s.

        Examples
        --------
        >>> Topology.from_clusters([[0, 2], [1, 3]]).is_contiguous
        False
        >>> Topology.from_clusters([[0, 1], [1]])
        Traceback (most recent call last):
        ...
        wacoll.errors.TopologyError: rank 1 appears twice (clusters 0 and 1)
        """
        try:
            cl = tuple(
                tuple(sorted(int(r) if _is_int(r) else r for r in members))
                for members in clusters
            )
        except TypeError as exc:
            raise TopologyError(
                f"clusters must be lists of integer ranks: {exc}"
            ) from None
        pairs: tuple[tuple[tuple[int, int], LinkParams], ...] = ()
        if wan_pairs:
            if not isinstance(wan_pairs, Mapping):
                raise TopologyError(
                    "wan_pairs must map (from, to) cluster pairs to (latency, bandwidth)"
                )
            found: list[tuple[tuple[int, int], LinkParams]] = []
            for key, v in wan_pairs.items():
                if not isinstance(key, tuple) or len(key) != 2:
                    raise TopologyError(
                        f"wan_pairs key {_show(key)} is not a (from, to) pair of clusters"
                    )
                a = _cluster_id(f"wan_pairs key {_show(key)}: from", key[0])
                b = _cluster_id(f"wan_pairs key {_show(key)}: to", key[1])
                found.append(((a, b), _link(v, f"wan_pairs[{a},{b}]")))
            pairs = tuple(found)
        return cls(
            clusters=cl,
            intra=_link((intra_latency, intra_bandwidth), "intra"),
            wan=_link((wan_latency, wan_bandwidth), "wan"),
            wan_pairs=pairs,
            t_ini=_per_rank("t_ini", t_ini),
            node_bandwidth=_per_rank("node_bandwidth", node_bandwidth),
        )

    @classmethod
    def from_sizes(
        cls, sizes: Sequence[int], *, max_ranks: int | None = None, **links: Any
    ) -> Topology:
        """Clusters of the given sizes over contiguous rank ranges.

        Parameters
        ----------
        sizes : sequence of int
            The number of ranks of each cluster, each >= 1.
        max_ranks : int, optional
            The most ranks allowed in all (default :data:`MAX_RANKS`).
        **links
            As for :meth:`from_clusters`.

        Examples
        --------
        >>> Topology.from_sizes([2, 3]).clusters
        ((0, 1), (2, 3, 4))
        >>> Topology.from_sizes([2**62])
        Traceback (most recent call last):
        ...
        wacoll.errors.TopologyError: sizes ask for 4611686018427387904 ranks or more (clusters 0..0), more than max_ranks=65536; pass max_ranks= or raise wacoll.topology.MAX_RANKS for a larger topology
        """
        limit = MAX_RANKS if max_ranks is None else max_ranks
        if isinstance(sizes, (str, bytes, Mapping, set, frozenset)) or not hasattr(
            sizes, "__iter__"
        ):
            raise TopologyError(
                f"sizes must be a list of cluster sizes, got {_show(sizes)}"
            )
        sizes = list(sizes)
        total = 0
        for c, n in enumerate(sizes):
            if not _is_int(n) or n < 1:
                raise TopologyError(
                    f"cluster {c} must have at least one rank, got {_show(n)}"
                )
            total += int(n)
            if total > limit:
                raise TopologyError(
                    f"sizes ask for {total} ranks or more (clusters 0..{c}), more than "
                    f"max_ranks={limit}; pass max_ranks= or raise "
                    f"wacoll.topology.MAX_RANKS for a larger topology"
                )
        clusters, start = [], 0
        for n in sizes:
            clusters.append(range(start, start + int(n)))
            start += int(n)
        return cls.from_clusters(clusters, **links)

    @classmethod
    def single(cls, size: int, **links: Any) -> Topology:
        """One cluster of ``size`` ranks (``max_ranks=`` as for :meth:`from_sizes`).

        Examples
        --------
        >>> Topology.single(4).nclusters
        1
        """
        return cls.from_sizes([size], **links)

    @classmethod
    def from_dict(cls, data: Mapping, *, max_ranks: int | None = None) -> Topology:
        """A topology from its dictionary form (see :meth:`to_dict`).

        The form is checked strictly, so that a typo does not pass silently: unknown
        keys, a wide-area pair given twice, booleans or fractions where integers
        belong and values of the wrong shape raise TopologyError naming the field.
        ``max_ranks`` limits ``sizes`` as in :meth:`from_sizes`.

        Examples
        --------
        >>> Topology.from_dict({"clusters": [[0, 1], [2]], "wan": {"latency": 0.02}}).wan.latency
        0.02
        >>> Topology.from_dict({"sizes": [1, 1], "wan_pairs": [
        ...     {"from": 0.7, "to": 1, "latency": 0.1, "bandwidth": 1e6}]})
        Traceback (most recent call last):
        ...
        wacoll.errors.TopologyError: wan_pairs[0].from must be an integer cluster id, got 0.7
        """
        if not isinstance(data, Mapping):
            raise TopologyError("a topology description must be a mapping")
        known = {
            "clusters",
            "sizes",
            "intra",
            "wan",
            "wan_pairs",
            "t_ini",
            "node_bandwidth",
        }
        unknown = sorted(set(data) - known, key=str)
        if unknown:
            raise TopologyError(
                f"unknown topology field {unknown[0]!r}; "
                f"known fields: {', '.join(sorted(known))}"
            )
        if ("clusters" in data) == ("sizes" in data):
            raise TopologyError("give exactly one of 'clusters' and 'sizes'")
        links = {}
        for level in ("intra", "wan"):
            spec = data.get(level, {})
            if not isinstance(spec, Mapping):
                raise TopologyError(
                    f"{level!r} must be a table with latency and bandwidth"
                )
            bad = sorted(set(spec) - {"latency", "bandwidth"}, key=str)
            if bad:
                raise TopologyError(f"unknown field {bad[0]!r} in {level!r}")
            if "latency" in spec:
                links[f"{level}_latency"] = spec["latency"]
            if "bandwidth" in spec:
                links[f"{level}_bandwidth"] = spec["bandwidth"]
        pairs: dict[tuple[int, int], tuple[Any, Any]] = {}
        entries = data.get("wan_pairs", [])
        if not _is_list(entries):
            raise TopologyError(
                "wan_pairs must be a list of tables with from, to, latency and bandwidth"
            )
        for i, entry in enumerate(entries):
            where = f"wan_pairs[{i}]"
            fields = ("from", "to", "latency", "bandwidth")
            if not isinstance(entry, Mapping) or set(entry) != set(fields):
                extra = (
                    sorted(set(entry) - set(fields), key=str)
                    if isinstance(entry, Mapping)
                    else []
                )
                lacking = [
                    k for k in fields if isinstance(entry, Mapping) and k not in entry
                ]
                detail = (
                    f"; unknown field {extra[0]!r}"
                    if extra
                    else f"; it lacks {lacking[0]!r}"
                    if lacking
                    else ""
                )
                raise TopologyError(
                    f"{where} needs exactly from, to, latency and bandwidth{detail}"
                )
            key = (
                _cluster_id(f"{where}.from", entry["from"]),
                _cluster_id(f"{where}.to", entry["to"]),
            )
            if key in pairs:
                raise TopologyError(
                    f"{where}: the wide-area pair {key} is given twice "
                    f"(also wan_pairs[{pairs[key][0]}])"
                )
            pairs[key] = (i, (entry["latency"], entry["bandwidth"]))
        links["wan_pairs"] = {key: link for key, (_, link) in pairs.items()} or None
        for name in ("t_ini", "node_bandwidth"):
            values = data.get(name)
            if values is not None and not _is_list(values):
                raise TopologyError(f"{name} must be a list of numbers, one per rank")
            links[name] = values
        if "sizes" in data:
            if not _is_list(data["sizes"]):
                raise TopologyError(
                    f"'sizes' must be a list of cluster sizes, got {_show(data['sizes'])}"
                )
            return cls.from_sizes(list(data["sizes"]), max_ranks=max_ranks, **links)
        clusters = data["clusters"]
        if not _is_list(clusters):
            raise TopologyError("'clusters' must be a list of rank lists")
        for c, members in enumerate(clusters):
            if not _is_list(members):
                raise TopologyError(
                    f"clusters[{c}] must be a list of ranks, got {_show(members)}"
                )
        return cls.from_clusters(clusters, **links)

    @classmethod
    def from_file(
        cls, path: str | os.PathLike[str], *, max_ranks: int | None = None
    ) -> Topology:
        """Read a topology from a ``.json`` or ``.toml`` file (data only, never run).

        The file must be UTF-8 of at most :data:`MAX_FILE_BYTES` bytes; JSON must be
        strict (no ``NaN`` or ``Infinity``, no key twice). ``max_ranks`` limits
        ``sizes`` as in :meth:`from_sizes`; by default it is the larger of
        :data:`MAX_RANKS` and the file's length. Every error is a TopologyError that
        names the file.

        Examples
        --------
        >>> import tempfile, os
        >>> p = os.path.join(tempfile.mkdtemp(), "t.toml")
        >>> _ = open(p, "w").write('sizes = [2, 2]\\n[wan]\\nlatency = 0.005\\n')
        >>> Topology.from_file(p).wan.latency
        0.005
        >>> _ = open(p, "w").write('sizes = [2, 2]\\n[wan]\\nlatency = true\\n')
        >>> Topology.from_file(p)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        wacoll.errors.TopologyError: .../t.toml: wan latency must be a number of seconds, got True
        """
        path = Path(path)
        if path.suffix not in (".toml", ".json"):
            raise TopologyError(f"{path}: topology files end in .toml or .json")
        # a FIFO or a device could block or never end: refused before it is read
        text = read_text(path, TopologyError, "the topology file", MAX_FILE_BYTES)
        try:
            data = _parse(text, path.suffix)
        except TopologyError as exc:
            raise TopologyError(f"{path}: {exc}") from None
        except RecursionError:
            raise TopologyError(f"{path}: nested too deeply") from None
        except ValueError as exc:  # TOMLDecodeError, JSONDecodeError, int digit limit
            reason = str(exc)
            if "integer string conversion" in reason:
                reason = "a number has too many digits to read"
            raise TopologyError(f"{path}: {reason[:200]}") from None
        limit = max(MAX_RANKS, len(text)) if max_ranks is None else max_ranks
        try:
            return cls.from_dict(data, max_ranks=limit)
        except TopologyError as exc:
            raise TopologyError(f"{path}: {exc}") from None

    def to_dict(self) -> dict:
        """The JSON-ready dictionary form, read back by :meth:`from_dict`.

        Examples
        --------
        >>> t = Topology.from_sizes([1, 2])
        >>> Topology.from_dict(t.to_dict()) == t
        True
        """
        data: dict[str, Any] = {
            "clusters": [list(c) for c in self.clusters],
            "intra": {"latency": self.intra.latency, "bandwidth": self.intra.bandwidth},
            "wan": {"latency": self.wan.latency, "bandwidth": self.wan.bandwidth},
        }
        if self.wan_pairs:
            data["wan_pairs"] = [
                {"from": a, "to": b, "latency": link.latency, "bandwidth": link.bandwidth}
                for (a, b), link in self.wan_pairs
            ]
        if self.t_ini is not None:
            data["t_ini"] = list(self.t_ini)
        if self.node_bandwidth is not None:
            data["node_bandwidth"] = list(self.node_bandwidth)
        return data

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the topology as JSON (``.json``) or TOML (``.toml``), in a form
        :meth:`from_file` reads back to an equal topology.

        Examples
        --------
        >>> import tempfile, os
        >>> t = Topology.from_sizes([2, 1], wan_pairs={(1, 0): (0.05, 2e6)},
        ...                         node_bandwidth=[1e8, 1e8, 5e7])
        >>> d = tempfile.mkdtemp()
        >>> all(Topology.from_file(os.path.join(d, name)) == t for name in ("t.toml", "t.json")
        ...     if t.save(os.path.join(d, name)) is None)
        True
        """
        path = Path(path)
        data = self.to_dict()
        if path.suffix == ".json":
            text = json.dumps(data, indent=2, allow_nan=False) + "\n"
        elif path.suffix == ".toml":
            text = _to_toml(data)
        else:
            raise TopologyError(f"{path}: topology files end in .toml or .json")
        path.write_text(text, encoding="utf-8")

    # ------------------------------------------------------------------- queries
    @property
    def size(self) -> int:
        """The number of ranks."""
        return len(self._cluster_of)

    @property
    def nclusters(self) -> int:
        """The number of clusters."""
        return len(self.clusters)

    @property
    def cluster_ids(self) -> tuple:
        """The cluster of each rank, as a tuple indexed by rank."""
        return self._cluster_of

    def cluster_of(self, rank: int) -> int:
        """The cluster that holds ``rank``."""
        self._validate_rank(rank)
        return self._cluster_of[rank]

    @property
    def is_contiguous(self) -> bool:
        """Whether cluster 0 holds the lowest ranks, cluster 1 the next, and so on.

        MagPIe calls a communicator whose clusters are not such ranges *reordered*.
        """
        return all(
            self._cluster_of[r] <= self._cluster_of[r + 1] for r in range(self.size - 1)
        )

    def coordinators(self, root: int | None = None) -> tuple:
        """The coordinator of each cluster: its lowest rank, or ``root`` in root's cluster.

        Examples
        --------
        >>> Topology.from_sizes([2, 2]).coordinators(root=1)
        (1, 2)
        """
        coords = [members[0] for members in self.clusters]
        if root is not None:
            self._validate_rank(root)
            coords[self._cluster_of[root]] = root
        return tuple(coords)

    def wan_link(self, a: int, b: int) -> LinkParams:
        """The wide-area link from cluster ``a`` to cluster ``b``."""
        for key, link in self.wan_pairs:
            if key == (a, b):
                return link
        return self.wan

    def link(self, src: int, dst: int) -> LinkParams:
        """The link a message from rank ``src`` to rank ``dst`` travels on."""
        self._validate_rank(src)
        self._validate_rank(dst)
        a, b = self._cluster_of[src], self._cluster_of[dst]
        return self.intra if a == b else self.wan_link(a, b)

    def is_wide_area(self, src: int, dst: int) -> bool:
        """Whether a message from ``src`` to ``dst`` crosses clusters."""
        return self._cluster_of[src] != self._cluster_of[dst]

    def with_t_ini(self, t_ini: Sequence[float]) -> Topology:
        """The same topology with per-rank message initiation costs."""
        return Topology(
            self.clusters,
            self.intra,
            self.wan,
            self.wan_pairs,
            tuple(t_ini),
            self.node_bandwidth,
        )

    def restrict(self, members: Sequence[int]) -> Topology:
        """The topology of a sub-communicator whose rank ``i`` is ``members[i]`` here.

        Clusters keep their links (wide-area pairs included) and are numbered by
        their lowest new rank.

        Examples
        --------
        >>> Topology.from_sizes([2, 2, 2]).restrict([5, 0, 4]).clusters
        ((0, 2), (1,))
        """
        members = [int(m) for m in members]
        for m in members:
            self._validate_rank(m)
        if len(set(members)) != len(members):
            raise TopologyError("a sub-communicator lists a rank twice")
        groups: dict[int, list[int]] = {}
        for new, old in enumerate(members):
            groups.setdefault(self._cluster_of[old], []).append(new)
        order = sorted(groups, key=lambda c: groups[c][0])
        renumber = {old: new for new, old in enumerate(order)}
        pairs = tuple(
            ((renumber[a], renumber[b]), link)
            for (a, b), link in self.wan_pairs
            if a in renumber and b in renumber
        )
        pick = lambda values: (
            None if values is None else tuple(values[m] for m in members)
        )
        return Topology(
            tuple(tuple(groups[c]) for c in order),
            self.intra,
            self.wan,
            pairs,
            pick(self.t_ini),
            pick(self.node_bandwidth),
        )

    def _validate_rank(self, rank):
        if not _is_int(rank) or not (0 <= rank < self.size):
            raise TopologyError(f"rank {rank!r} is not in 0..{self.size - 1}")

    def __str__(self):
        sizes = [len(c) for c in self.clusters]
        kind = "contiguous" if self.is_contiguous else "reordered"
        return (
            f"Topology({self.size} ranks in {self.nclusters} {kind} clusters {sizes}; "
            f"intra {self.intra.latency:g} s, {self.intra.bandwidth:g} B/s; "
            f"wide-area {self.wan.latency:g} s, {self.wan.bandwidth:g} B/s)"
        )


def _is_list(value):
    return isinstance(value, (list, tuple))


def _per_rank(name, values):
    """``values`` as a tuple, or None; a clear error for a value that is no sequence."""
    if values is None:
        return None
    if (
        isinstance(values, (str, bytes, Mapping, set, frozenset))
        or not hasattr(values, "__len__")
        or not hasattr(values, "__iter__")
    ):
        raise TopologyError(
            f"{name} must be a list of numbers, one per rank, got {_show(values)}"
        )
    return tuple(values)


def _parse(text, suffix):
    """The data of a TOML or JSON topology file."""
    if suffix == ".toml":
        try:
            import tomllib
        except ModuleNotFoundError:  # Python 3.10
            import tomli as tomllib
        return tomllib.loads(text)
    return loads_strict(text, TopologyError)


def _link(value, name) -> LinkParams:
    if isinstance(value, LinkParams):
        return value
    try:
        latency, bandwidth = value
    except (TypeError, ValueError):
        raise TopologyError(f"{name} must be (latency, bandwidth)") from None
    _validate_latency(f"{name} latency", latency)
    _validate_bandwidth(f"{name} bandwidth", bandwidth)
    return LinkParams(float(latency), float(bandwidth))


def _to_toml(data) -> str:
    """A minimal TOML writer for the flat shapes :meth:`Topology.to_dict` produces."""
    lines = [f"clusters = {json.dumps(data['clusters'])}"]
    for key in ("t_ini", "node_bandwidth"):
        if key in data:
            lines.append(f"{key} = {json.dumps(data[key])}")
    for level in ("intra", "wan"):
        lines += [
            "",
            f"[{level}]",
            f"latency = {data[level]['latency']!r}",
            f"bandwidth = {data[level]['bandwidth']!r}",
        ]
    for entry in data.get("wan_pairs", []):
        lines += ["", "[[wan_pairs]]"] + [f"{k} = {v!r}" for k, v in entry.items()]
    return "\n".join(lines) + "\n"
