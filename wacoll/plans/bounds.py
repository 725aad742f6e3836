"""Physical lower bounds on a collective's completion time across the wide area.

Whatever the algorithm, every byte a cluster needs from other clusters must enter it
through its incoming wide-area links, and the first of them arrives no sooner than the
smallest incoming latency. So for each cluster ``d``::

    bound(d) = min latency into d + bytes d needs from outside / sum of bandwidths into d

and no plan can finish before ``max(bound(d))``. A cluster *needs* a moved block that
some rank of it must hold and whose source is elsewhere, and a reduced block whose
result involves a contribution from elsewhere (at least one combined partial must
enter). A barrier needs no bytes but still one latency. Intra-cluster costs are
ignored, so this is a bound, not a prediction: MagPIe's algorithms come close to it.

Examples
--------
>>> from wacoll import Topology
>>> from wacoll.plans import build
>>> topo = Topology.from_sizes([4, 4], wan_latency=0.01, wan_bandwidth=1e6)
>>> physical_bound(build("bcast", topo, "magpie", count=10000), topo)
0.02
"""

from __future__ import annotations

from wacoll.plans import operations as ops

__all__ = ["physical_bound", "needed_bytes"]


def needed_bytes(plan) -> dict:
    """Bytes each cluster must receive from other clusters, by cluster id.

    Examples
    --------
    >>> from wacoll import Topology
    >>> from wacoll.plans import build
    >>> needed_bytes(build("gather", Topology.from_sizes([2, 2]), "mpich", count=3))
    {0: 6, 1: 0}
    """
    size, nb, root = plan.size, plan.nblocks, plan.root
    clusters = plan.clusters
    source = {}
    for r in range(size):
        for (_buf, b), src in ops.initial(plan.op, size, root, nb, r).items():
            source[b] = src
    needed: dict[int, set[int]] = {c: set() for c in set(clusters)}
    for r in range(size):
        d = clusters[r]
        for (_buf, b), want in ops.expected(plan.op, size, root, nb, r).items():
            if plan.kind == "movement":
                if clusters[source[b]] != d:
                    needed[d].add(b)
            elif any(clusters[x] != d for x in range(want[1])):
                needed[d].add(b)
    return {c: plan.nbytes(sorted(blocks)) for c, blocks in sorted(needed.items())}


def physical_bound(plan, topology) -> float:
    """A lower bound, in seconds, on the completion time of ``plan``'s operation.

    Parameters
    ----------
    plan : Plan
        Supplies the operation, root and block sizes.
    topology : Topology
        Supplies the wide-area links (per cluster pair where given).
    """
    n = topology.nclusters
    if n < 2:
        return 0.0
    need = needed_bytes(plan)
    bound = 0.0
    for d in range(n):
        links = [topology.wan_link(c, d) for c in range(n) if c != d]
        nbytes = need.get(d, 0)
        if nbytes == 0 and plan.kind != "barrier":
            continue
        latency = min(link.latency for link in links)
        bandwidth = sum(link.bandwidth for link in links)
        bound = max(bound, latency + nbytes / bandwidth)
    return bound
