"""The plan model: per-rank programs of steps, plain immutable data.

A :class:`Plan` holds everything needed to run one collective operation on one
communicator: for each rank the ordered program of :class:`Step` objects it executes,
the element count of every block, the cluster of every rank, and the reduction level.
It knows nothing of MPI; :mod:`wacoll.plans.prove` proves it and the executor runs it.

Step kinds
----------
``send``
    Send ``blocks`` of buffer ``src`` to ``peer`` (one message).
``recv``
    Receive ``blocks`` from ``peer`` into buffer ``dst``.
``recv_combine``
    Receive ``blocks`` from ``peer`` and combine them into ``dst``: ``side="right"``
    means ``dst = dst (+) incoming`` (the peer's operands follow ours), ``"left"``
    means ``dst = incoming (+) dst``. Consecutive ``recv_combine`` steps with the
    same nonzero ``group`` may complete in arrival order (commutative level only).
``copy``
    Copy ``blocks`` from buffer ``src`` to buffer ``dst``.
``combine``
    Combine ``blocks`` of ``src`` into ``dst`` locally, with ``side`` as above.

The k-th message a rank sends to a peer matches the k-th receive the peer posts from
that rank (MPI's non-overtaking rule), so steps carry no tags.

Examples
--------
>>> from wacoll.plans.plan import Step
>>> str(Step("recv_combine", (0,), peer=13, dst="acc", side="right"))
'recv-combine 13 [0] into acc'
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import networkx as nx

from wacoll.errors import PlanError
from wacoll.plans.blockruns import BlockRuns
from wacoll.plans.operations import ARITHMETICS, LEVELS, spec

if TYPE_CHECKING:
    from wacoll.plans.prove import ProofReport

__all__ = ["Step", "Plan", "Message", "STEP_KINDS"]

STEP_KINDS = ("send", "recv", "recv_combine", "copy", "combine")
_BUFFER = re.compile(r"^[a-z][a-z0-9_]*$")
#: ``(kind, peer is None, src, dst, side, group)`` of steps found valid
_VALID_SHAPES: set[tuple[str, bool, str | None, str | None, str | None, int]] = set()
#: Steps of more blocks than this show only the first half of them in their text.
_SHOWN_BLOCKS = 64


@dataclass(frozen=True, slots=True)
class Step:
    """One step of a rank's program (see the module docstring for the kinds).

    ``blocks`` is a tuple of block ids, or for steps of thousands of regular ids a
    :class:`~wacoll.plans.blockruns.BlockRuns`, which equals and hashes as that
    tuple does.
    """

    kind: str
    blocks: tuple
    peer: int | None = None
    src: str | None = None
    dst: str | None = None
    side: str | None = None
    group: int = 0

    def __post_init__(self):
        # a plan of thousands of ranks makes millions of steps: the fields other
        # than blocks and peer come in a few combinations, each validated once
        peer = self.peer
        shape = None
        runs = type(self.blocks) is BlockRuns  # (its ids were checked when it was made)
        if (runs or isinstance(self.blocks, tuple)) and (
            peer is None or type(peer) is int
        ):
            shape = (self.kind, peer is None, self.src, self.dst, self.side, self.group)
            try:
                known = shape in _VALID_SHAPES
            except TypeError:  # (an unhashable field: the full check names it)
                known, shape = False, None
            if known:
                for b in () if runs else self.blocks:
                    if type(b) is not int or b < 0:
                        break
                else:
                    return
        self._validate()
        if shape is not None and len(_VALID_SHAPES) < 4096:
            _VALID_SHAPES.add(shape)

    def _validate(self):
        kind = self.kind
        if kind not in STEP_KINDS:
            raise PlanError(f"unknown step kind {kind!r}; known: {', '.join(STEP_KINDS)}")
        if not isinstance(self.blocks, (tuple, BlockRuns)):
            object.__setattr__(self, "blocks", tuple(self.blocks))
        for b in () if isinstance(self.blocks, BlockRuns) else self.blocks:
            if isinstance(b, bool) or not isinstance(b, int) or b < 0:
                raise PlanError(f"{kind} step has an invalid block id {b!r}")
        needs_peer = kind in ("send", "recv", "recv_combine")
        if needs_peer != (self.peer is not None):
            raise PlanError(f"{kind} step {'needs' if needs_peer else 'takes no'} peer")
        if needs_peer and (isinstance(self.peer, bool) or not isinstance(self.peer, int)):
            raise PlanError(
                f"{kind} step peer must be an integer rank, got {self.peer!r}"
            )
        need_src = kind in ("send", "copy", "combine")
        need_dst = kind in ("recv", "recv_combine", "copy", "combine")
        for name, needed in (("src", need_src), ("dst", need_dst)):
            value = getattr(self, name)
            if needed and (not isinstance(value, str) or not _BUFFER.match(value)):
                raise PlanError(
                    f"{kind} step needs a buffer name for {name}, got {value!r}"
                )
            if not needed and value is not None:
                raise PlanError(f"{kind} step takes no {name}")
        combining = kind in ("recv_combine", "combine")
        if combining and self.side not in ("left", "right"):
            raise PlanError(
                f"{kind} step side must be 'left' or 'right', got {self.side!r}"
            )
        if not combining and self.side is not None:
            raise PlanError(f"{kind} step takes no side")
        if self.group and kind != "recv_combine":
            raise PlanError(
                "only recv_combine steps may belong to an arrival-order group"
            )

    @property
    def reads(self):
        """The buffers the step reads (besides the network)."""
        if self.kind in ("send", "copy"):
            return (self.src,)
        if self.kind == "combine":
            return (self.src, self.dst)
        if self.kind == "recv_combine":
            return (self.dst,)
        return ()

    def to_row(self) -> dict:
        """The step as a JSON-ready dictionary (the fields it has, no defaults).

        Examples
        --------
        >>> Step("send", (0, 2), peer=1, src="in").to_row()
        {'kind': 'send', 'blocks': [0, 2], 'peer': 1, 'src': 'in'}
        """
        row: dict[str, object] = {"kind": self.kind, "blocks": list(self.blocks)}
        for name in ("peer", "src", "dst", "side"):
            value = getattr(self, name)
            if value is not None:
                row[name] = value
        if self.group:
            row["group"] = self.group
        return row

    def __str__(self):
        """The step as a label: a step of more than 64 blocks shows the first 32."""
        return self.text(full=False)

    def text(self, full=True) -> str:
        """The step as text, every block id listed (``full``) or as :func:`str`.

        Examples
        --------
        >>> step = Step("send", tuple(range(100)), peer=1, src="in")
        >>> str(step)[-29:], len(step.text())
        ('30,31,... 100 blocks] from in', 306)
        """
        n = len(self.blocks)
        if full or n <= _SHOWN_BLOCKS:
            blocks = "[" + ",".join(map(str, self.blocks)) + "]"
        else:  # a label, not a listing: the first few ids and how many in all
            blocks = (
                "["
                + ",".join(map(str, self.blocks[: _SHOWN_BLOCKS // 2]))
                + f",... {n} blocks]"
            )
        if self.kind == "send":
            return f"send {self.peer} {blocks}" + (
                "" if self.src == "out" else f" from {self.src}"
            )
        if self.kind == "recv":
            return f"recv {self.peer} {blocks}" + (
                "" if self.dst == "out" else f" into {self.dst}"
            )
        if self.kind == "recv_combine":
            extra = "" if self.side == "right" else " left"
            extra += f" group {self.group}" if self.group else ""
            return f"recv-combine {self.peer} {blocks} into {self.dst}{extra}"
        verb = "copy" if self.kind == "copy" else "combine"
        extra = " left" if self.side == "left" else ""
        return f"{verb} {blocks} {self.src} -> {self.dst}{extra}"


@dataclass(frozen=True, slots=True)
class Message:
    """One message of a plan: a matched send and receive.

    ``send_step`` and ``recv_step`` are indices into the sender's and receiver's
    programs; ``index`` counts messages from ``src`` to ``dst`` (0 first).
    """

    src: int
    dst: int
    blocks: tuple
    nbytes: int
    send_step: int
    recv_step: int
    index: int
    wide_area: bool


@dataclass(frozen=True)
class Plan:
    """Everything needed to run one collective on one communicator.

    Attributes
    ----------
    op : str
        Operation name (see :data:`wacoll.plans.operations.OPERATIONS`).
    size : int
        Number of ranks.
    root : int or None
        The root of a rooted operation.
    counts : tuple of int
        Element count of each block (its index is the block id).
    programs : tuple of tuple of Step
        The program of each rank (or, for the largest regular plans, an
        :class:`~wacoll.plans.encoded.EncodedPrograms`: the same, held as arrays).
    clusters : tuple of int
        The cluster of each rank.
    level : str or None
        Reduction level of reduction operations: ``"strict"``, ``"associative"`` or
        ``"commutative"``.
    itemsize : int
        Bytes per element, for byte counts and costs.
    family, algorithm : str
        Which builder made the plan, for display.
    params : tuple of (str, object)
        The builder's parameters, sorted by name.
    arithmetic : str
        How combinations are computed (:data:`~wacoll.plans.operations.ARITHMETICS`):
        ``"plain"``, or ``"reproducible"`` (a float SUM on exact accumulators; then
        ``itemsize`` is the accumulator's size and a plan that keeps the commutative
        level proves level ``"strict"``). Reductions only.
    """

    op: str
    size: int
    root: int | None
    counts: tuple
    programs: tuple
    clusters: tuple
    level: str | None = None
    itemsize: int = 1
    family: str = ""
    algorithm: str = ""
    params: tuple = ()
    arithmetic: str = "plain"
    _cache: dict = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )

    def __post_init__(self):
        s = spec(self.op)
        if isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 1:
            raise PlanError(f"plan size must be a positive integer, got {self.size!r}")
        if s.rooted:
            if (
                isinstance(self.root, bool)
                or not isinstance(self.root, int)
                or not (0 <= self.root < self.size)
            ):
                raise PlanError(
                    f"{self.op} needs a root in 0..{self.size - 1}, got {self.root!r}"
                )
        elif self.root is not None:
            raise PlanError(f"{self.op} has no root")
        if s.kind == "reduction":
            if self.level not in LEVELS:
                raise PlanError(
                    f"{self.op} needs a reduction level of {LEVELS}, got {self.level!r}"
                )
        elif self.level is not None:
            raise PlanError(f"{self.op} is not a reduction and takes no level")
        if self.arithmetic not in ARITHMETICS:
            raise PlanError(
                f"arithmetic must be one of {', '.join(ARITHMETICS)}, "
                f"got {self.arithmetic!r}"
            )
        if self.arithmetic != "plain" and s.kind != "reduction":
            raise PlanError(f"{self.op} is not a reduction; its arithmetic is 'plain'")
        if len(self.programs) != self.size:
            raise PlanError(
                f"plan has {len(self.programs)} programs for {self.size} ranks"
            )
        if len(self.clusters) != self.size:
            raise PlanError(
                f"plan has {len(self.clusters)} cluster ids for {self.size} ranks"
            )
        if (
            isinstance(self.itemsize, bool)
            or not isinstance(self.itemsize, int)
            or self.itemsize < 1
        ):
            raise PlanError(f"itemsize must be a positive integer, got {self.itemsize!r}")
        held = getattr(self.programs, "steps", None)
        if held is not None:  # held as arrays (wacoll.plans.encoded): checked there
            if held.size != self.size or held.nblocks != len(self.counts):
                raise PlanError("the programs' arrays are of another size or layout")
            return
        for r, prog in enumerate(self.programs):
            for i, step in enumerate(prog):
                if not isinstance(step, Step):
                    raise PlanError(f"rank {r} step {i} is not a Step", rank=r, step=i)

    # ---------------------------------------------------------------- queries
    @property
    def nblocks(self) -> int:
        """Number of blocks."""
        return len(self.counts)

    @property
    def nsteps(self) -> int:
        """Steps in all programs."""
        held = getattr(self.programs, "steps", None)
        return held.nsteps if held is not None else sum(map(len, self.programs))

    @property
    def nclusters(self) -> int:
        """Number of distinct clusters."""
        return len(set(self.clusters))

    @property
    def kind(self) -> str:
        """``"barrier"``, ``"movement"`` or ``"reduction"``."""
        return spec(self.op).kind

    def nbytes(self, blocks) -> int:
        """Bytes of the given blocks."""
        counts = self.counts
        return sum(counts[b] for b in blocks) * self.itemsize

    @property
    def total_bytes(self) -> int:
        """Bytes of the whole vector (all blocks)."""
        return sum(self.counts) * self.itemsize

    def messages(self) -> tuple:
        """Every message, matching the k-th send from a to b with b's k-th receive from a.

        Raises :class:`PlanError` when sends and receives do not pair up.
        """
        cached = self._cache.get("messages")
        if cached is not None:
            return cached
        programs = self.programs
        if not isinstance(programs, tuple):  # held as arrays: make each program once
            programs = tuple(programs)
        sends: dict[tuple[int, int], list[int]] = {}
        recvs: dict[tuple[int, int], list[int]] = {}
        for r, prog in enumerate(programs):
            for i, step in enumerate(prog):
                if step.kind == "send":
                    sends.setdefault((r, step.peer), []).append(i)
                elif step.kind in ("recv", "recv_combine"):
                    recvs.setdefault((step.peer, r), []).append(i)
        out = []
        for key in sorted(set(sends) | set(recvs)):
            a, b = key
            s_list, r_list = sends.get(key, []), recvs.get(key, [])
            for k in range(max(len(s_list), len(r_list))):
                if k >= len(r_list):
                    raise PlanError(
                        f"rank {a} step {s_list[k]} sends to {b}, which never "
                        f"receives it",
                        rank=a,
                        step=s_list[k],
                    )
                if k >= len(s_list):
                    raise PlanError(
                        f"rank {b} step {r_list[k]} receives from {a}, which "
                        f"never sends it",
                        rank=b,
                        step=r_list[k],
                    )
                sstep = programs[a][s_list[k]]
                rstep = programs[b][r_list[k]]
                if sstep.blocks != rstep.blocks:
                    raise PlanError(
                        f"rank {b} step {r_list[k]} expects blocks {list(rstep.blocks)} "
                        f"from {a}, but its message {k} (step {s_list[k]}) carries "
                        f"{list(sstep.blocks)}",
                        rank=b,
                        step=r_list[k],
                    )
                out.append(
                    Message(
                        a,
                        b,
                        sstep.blocks,
                        self.nbytes(sstep.blocks),
                        s_list[k],
                        r_list[k],
                        k,
                        self.clusters[a] != self.clusters[b],
                    )
                )
        messages = tuple(out)
        self._cache["messages"] = messages
        return messages

    def message_graph(self) -> nx.MultiDiGraph:
        """The plan as a graph: nodes ranks (attribute ``cluster``), an edge per message.

        Edge attributes: ``blocks``, ``bytes``, ``step`` (sender's step index),
        ``recv_step``, ``wide_area``.

        Examples
        --------
        >>> from wacoll import Topology
        >>> from wacoll.plans import build
        >>> g = build("bcast", Topology.from_sizes([3, 3]), "magpie", root=1).message_graph()
        >>> sorted((u, v) for u, v, d in g.edges(data=True) if d["wide_area"])
        [(1, 3)]
        """
        g = nx.MultiDiGraph(
            op=self.op, root=self.root, family=self.family, algorithm=self.algorithm
        )
        for r in range(self.size):
            g.add_node(r, cluster=self.clusters[r])
        for m in self.messages():
            g.add_edge(
                m.src,
                m.dst,
                blocks=m.blocks,
                bytes=m.nbytes,
                step=m.send_step,
                recv_step=m.recv_step,
                wide_area=m.wide_area,
            )
        return g

    def prove(self) -> ProofReport:
        """Prove the plan; return its :class:`~wacoll.plans.prove.ProofReport`.

        The report is cached: a plan is immutable, so it is proved once.
        """
        report = self._cache.get("report")
        if report is None:
            from wacoll.plans.prove import prove_plan

            report = prove_plan(self)
            self._cache["report"] = report
        return report

    @property
    def proved(self) -> bool:
        """Whether :meth:`prove` has already proved this plan."""
        return "report" in self._cache

    def adopt_proof(self, report):
        """Take ``report`` as this plan's proof, without proving it again: the proof
        cache's record of this very plan (:func:`wacoll.plans.proofs.build_proved`
        has compared the plan's digest with the record's)."""
        self._cache["report"] = report

    def derived(self, name, compute):
        """A value derived from the plan alone, computed once by ``compute(plan)``
        and kept with the plan (it is immutable): the simulator's flattened
        structure, for example.

        Examples
        --------
        >>> from wacoll import Topology
        >>> from wacoll.plans import build
        >>> plan = build("bcast", Topology.single(2), "mpich", count=1)
        >>> plan.derived("steps", lambda p: sum(map(len, p.programs)))
        2
        """
        key = ("derived", name)
        if key not in self._cache:
            self._cache[key] = compute(self)
        return self._cache[key]

    def param(self, name, default=None):
        """One builder parameter by name."""
        return dict(self.params).get(name, default)

    def describe(self) -> str:
        """A readable listing of every rank's program.

        Examples
        --------
        >>> from wacoll import Topology
        >>> from wacoll.plans import build
        >>> print(build("bcast", Topology.from_sizes([2, 1]), "magpie").describe())
        bcast on 3 ranks, root 0 (magpie/coordinator)
        rank 0: send 2 [0]; send 1 [0]
        rank 1: recv 0 [0]
        rank 2: recv 0 [0]
        """
        head = f"{self.op} on {self.size} ranks"
        if self.root is not None:
            head += f", root {self.root}"
        if self.level is not None:
            head += f", level {self.level}"
        if self.family:
            head += f" ({self.family}/{self.algorithm})"
        lines = [head]
        for r, prog in enumerate(self.programs):
            lines.append(f"rank {r}: " + "; ".join(step.text() for step in prog))
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """A JSON-ready dictionary (see :mod:`wacoll.plans.scripts` for files)."""
        steps = [[s.to_row() for s in prog] for prog in self.programs]
        return {
            "op": self.op,
            "size": self.size,
            "root": self.root,
            "counts": list(self.counts),
            "clusters": list(self.clusters),
            "level": self.level,
            "itemsize": self.itemsize,
            "family": self.family,
            "algorithm": self.algorithm,
            "params": [[k, v] for k, v in self.params],
            **({} if self.arithmetic == "plain" else {"arithmetic": self.arithmetic}),
            "programs": steps,
        }
