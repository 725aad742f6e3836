"""Discover a communicator's topology: which rank sits in which cluster.

By default each shared-memory node is a cluster (``MPI.COMM_TYPE_SHARED``). The
environment can say otherwise, on every rank alike (the ranks compare these
variables before they use them, see :mod:`wacoll.settings`):

``WACOLL_TOPOLOGY``
    A topology file (``.toml`` or ``.json``, see :meth:`wacoll.Topology.from_file`)
    for this communicator's size, or for ``MPI.COMM_WORLD`` by world rank (then
    restricted to the communicator's members); rank 0 reads it and shares it.
``WACOLL_CLUSTERS``
    Either one cluster label per process of ``MPI.COMM_WORLD`` (by world rank),
    comma-separated (``"0,0,1,1"``), or a mapping
    from host name to cluster label (``"nodeA=east,nodeB=east,nodeC=west"``), applied
    to each rank's ``MPI.Get_processor_name()``.

Each process knows its own label, whatever communicator it discovers (COMM_SELF, a
split, a subset); the members' labels are exchanged, so all ranks build the same
topology; a fault on any rank raises the same error on every rank.
Clusters are numbered by their lowest rank.

Discovery gives no link parameters (MagPIe's defaults stand in);
:class:`wacoll.Comm` measures them where it discovers several clusters
(:mod:`wacoll.mpi.links`).

Examples
--------
>>> from mpi4py import MPI
>>> topology_from_comm(MPI.COMM_SELF).size
1
"""

from __future__ import annotations

from wacoll.errors import TopologyError
from wacoll.settings import agreed_settings
from wacoll.topology import Topology

__all__ = ["topology_from_comm"]


def _label(comm, env):
    """This rank's cluster label, or raise TopologyError."""
    from mpi4py import MPI

    spec = (env.get("WACOLL_CLUSTERS") or "").strip()
    rank = comm.Get_rank()
    if spec:
        items = [x.strip() for x in spec.split(",") if x.strip()]
        if any("=" in x for x in items):
            mapping = {}
            for item in items:
                host, sep, label = item.partition("=")
                if not sep or not host or not label:
                    raise TopologyError(
                        f"WACOLL_CLUSTERS entry {item!r} is not host=label"
                    )
                mapping[host] = label
            host = MPI.Get_processor_name()
            if host not in mapping:
                raise TopologyError(f"WACOLL_CLUSTERS names no cluster for host {host!r}")
            return mapping[host]
        world = MPI.COMM_WORLD
        if len(items) != world.Get_size():
            n = world.Get_size()
            raise TopologyError(
                f"WACOLL_CLUSTERS lists {len(items)} labels for "
                f"{n} process{'es' if n != 1 else ''} of MPI.COMM_WORLD"
                + _launch_hint(len(items), world.Get_size())
            )
        return items[world.Get_rank()]
    node = comm.Split_type(MPI.COMM_TYPE_SHARED, key=rank)
    try:
        leader = node.allreduce(rank, op=MPI.MIN)
    finally:
        node.Free()
    return f"node-of-{leader}"


def _launch_hint(wanted: int, world: int) -> str:
    """For a program started as one process (without ``mpiexec``) that the
    environment describes as several: how to start it.

    Examples
    --------
    >>> _launch_hint(4, 1)
    ': this program runs as 1 process (started without mpiexec?); run it under mpiexec -n 4, e.g. mpiexec -n 4 python app.py'
    >>> _launch_hint(4, 2)
    ''
    """
    if world != 1 or wanted <= 1:
        return ""
    return (
        f": this program runs as 1 process (started without mpiexec?); run it "
        f"under mpiexec -n {wanted}, e.g. mpiexec -n {wanted} python app.py"
    )


def topology_from_comm(comm, *, env=None, **links) -> Topology:
    """The topology of ``comm`` (collective: call it on every rank).

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm
    env : mapping, optional
        The settings to read, the same on every rank (default: this process's
        environment, agreed across the ranks first by
        :func:`wacoll.settings.agreed_settings`).
    **links
        Link parameters for :meth:`Topology.from_clusters` when the topology is
        discovered rather than read from a file.
    """
    env = agreed_settings(comm) if env is None else env
    path = (env.get("WACOLL_TOPOLOGY") or "").strip()
    if path:
        from wacoll.mpi.agreement import from_rank_0

        topo = Topology.from_dict(
            from_rank_0(
                comm,
                lambda: Topology.from_file(path).to_dict(),
                TopologyError,
                f"reading the topology file {path}",
            )
        )
        from mpi4py import MPI

        members = comm.allgather(MPI.COMM_WORLD.Get_rank())
        if topo.size == comm.Get_size():
            return topo
        if topo.size == MPI.COMM_WORLD.Get_size():
            return topo.restrict(members)  # a file for the world, by world rank
        raise TopologyError(
            f"{path} describes {topo.size} ranks; the communicator "
            f"has {comm.Get_size()} and MPI.COMM_WORLD "
            f"{MPI.COMM_WORLD.Get_size()}"
            + _launch_hint(topo.size, MPI.COMM_WORLD.Get_size())
        )
    try:
        mine = ("ok", _label(comm, env))
    except TopologyError as exc:
        mine = ("error", str(exc))
    labels = comm.allgather(mine)
    for r, (status, payload) in enumerate(labels):
        if status == "error":
            raise TopologyError(f"rank {r}: {payload}")
    clusters: dict[str, list[int]] = {}
    for r, (_, label) in enumerate(labels):
        clusters.setdefault(label, []).append(r)
    return Topology.from_clusters(sorted(clusters.values(), key=min), **links)
