"""An explicit builder for plans: append steps to rank programs, then freeze.

Plan builders of every family write through a :class:`PlanBuilder`; there is no
global program context. :meth:`PlanBuilder.transfer` appends the send to the sender's
program and the matching receive to the receiver's, so a builder written phase by
phase produces programs whose order follows the phases.

Examples
--------
>>> from wacoll import Topology
>>> from wacoll.plans.builder import PlanBuilder
>>> b = PlanBuilder("bcast", Topology.from_sizes([2]), root=0, count=4)
>>> b.transfer(0, 1, b.all_blocks)
>>> plan = b.build(family="custom", algorithm="by-hand")
>>> plan.check().messages
1
"""

from __future__ import annotations

import numbers

from wacoll.errors import PlanError
from wacoll.plans.operations import block_counts, spec
from wacoll.plans.plan import Plan, Step
from wacoll.topology import Topology

__all__ = ["PlanBuilder"]


class PlanBuilder:
    """Collects the programs of a plan under construction.

    Parameters
    ----------
    op : str
        Operation name.
    topology : Topology
        The ranks and clusters the plan runs on.
    root : int, optional
        Root of a rooted operation.
    count, counts, segments
        The block layout, as :func:`wacoll.plans.operations.block_counts` takes it.
    level : str, optional
        Reduction level (reductions only; default ``"strict"``).
    itemsize : int
        Bytes per element.
    """

    def __init__(self, op, topology: Topology, *, root=None, count=1, counts=None,
                 segments=1, level=None, itemsize=1):
        self.spec = spec(op)
        if not isinstance(topology, Topology):
            raise PlanError("plan builders need a wacoll.Topology")
        self.op = self.spec.name
        self.topology = topology
        self.size = topology.size
        if self.spec.rooted:
            if root is None:
                root = 0
            if isinstance(root, bool) or not isinstance(root, numbers.Integral) or not (
                    0 <= root < self.size):
                raise PlanError(f"root {root!r} is not a rank of 0..{self.size - 1}")
            root = int(root)
        else:
            root = None
        self.root = root
        if self.spec.kind == "reduction":
            level = "strict" if level is None else level
        else:
            level = None
        self.level = level
        self.counts = block_counts(op, self.size, count=count, counts=counts,
                                   segments=segments)
        self.itemsize = itemsize
        self.programs = [[] for _ in range(self.size)]

    # ------------------------------------------------------------ layout helpers
    @property
    def all_blocks(self) -> tuple:
        """Every block id."""
        return tuple(range(len(self.counts)))

    def clusters(self):
        """The rank tuples of the clusters."""
        return self.topology.clusters

    # ------------------------------------------------------------------ steps
    def send(self, rank, peer, blocks, src="out"):
        """Append a send of ``blocks`` of ``src`` to ``peer``."""
        self.programs[rank].append(Step("send", tuple(blocks), peer=peer, src=src))

    def recv(self, rank, peer, blocks, dst="out"):
        """Append a receive of ``blocks`` from ``peer`` into ``dst``."""
        self.programs[rank].append(Step("recv", tuple(blocks), peer=peer, dst=dst))

    def recv_combine(self, rank, peer, blocks, dst, side="right", group=0):
        """Append a receive from ``peer`` combined into ``dst`` on ``side``."""
        self.programs[rank].append(Step("recv_combine", tuple(blocks), peer=peer, dst=dst,
                                        side=side, group=group))

    def copy(self, rank, blocks, src, dst):
        """Append a local copy of ``blocks`` from ``src`` to ``dst``."""
        if blocks:
            self.programs[rank].append(Step("copy", tuple(blocks), src=src, dst=dst))

    def combine(self, rank, blocks, src, dst, side="right"):
        """Append a local combine of ``blocks`` of ``src`` into ``dst`` on ``side``."""
        self.programs[rank].append(Step("combine", tuple(blocks), src=src, dst=dst,
                                        side=side))

    def transfer(self, src_rank, dst_rank, blocks, src="out", dst="out"):
        """Append a send at ``src_rank`` and the matching receive at ``dst_rank``."""
        self.send(src_rank, dst_rank, blocks, src)
        self.recv(dst_rank, src_rank, blocks, dst)

    def transfer_combine(self, src_rank, dst_rank, blocks, src, dst, side="right", group=0):
        """Append a send and the matching receive-and-combine."""
        self.send(src_rank, dst_rank, blocks, src)
        self.recv_combine(dst_rank, src_rank, blocks, dst, side, group)

    # ------------------------------------------------------------------ freeze
    def build(self, *, family="", algorithm="", **params) -> Plan:
        """Freeze the programs into a :class:`~wacoll.plans.plan.Plan`."""
        return Plan(
            op=self.op,
            size=self.size,
            root=self.root,
            counts=self.counts,
            programs=tuple(tuple(p) for p in self.programs),
            clusters=self.topology.cluster_ids,
            level=self.level,
            itemsize=self.itemsize,
            family=family,
            algorithm=algorithm,
            params=tuple(sorted(params.items())),
        )
