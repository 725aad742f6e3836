"""``wacoll.Comm``: an mpi4py intracommunicator whose collectives run wacoll plans.

Swap an mpi4py communicator for wacoll's with one line::

    from mpi4py import MPI
    import wacoll
    comm = wacoll.Comm(MPI.COMM_WORLD)            # topology: one cluster per node
    comm.Allreduce(sendbuf, recvbuf, op=MPI.SUM)  # same names, signatures, semantics

``wacoll.Comm`` *is* an ``MPI.Intracomm`` (a subclass, over a duplicate of the
communicator it is given): point-to-point, windows, ``MPI.Comm.Compare`` and every
method wacoll does not override are the MPI library's own. ``Dup``, ``Clone``,
``Split``, ``Split_type``, ``Create`` and ``Create_group`` return wacoll
communicators whose topology is derived from their members.

Each buffer collective (``Barrier``, ``Bcast``, ``Scatter[v]``, ``Gather[v]``,
``Allgather[v]``, ``Alltoall[v]``, ``Reduce``, ``Allreduce``, ``Scan``, ``Exscan``,
``Reduce_scatter[_block]``):

1. reads its arguments as mpi4py does (:mod:`wacoll.mpi.calls`);
2. checks with the other ranks that every rank's arguments are valid and describe
   the same operation, so bad input raises the same error on every rank instead of
   hanging (:mod:`wacoll.mpi.agreement`); the check runs beside the call, not before
   it (``check="beside"``, :mod:`wacoll.mpi.task`), so on a grid it costs no extra
   wide-area round trip;
3. asks the selection policy (:func:`wacoll.plans.select`) for the plan and this
   rank's lowered program, cached per buffer layout: the whole plan built and proved
   once, or, when the disk proof cache holds its proof, only this rank's part
   (:func:`wacoll.plans.rank.plan_for_rank`); a loop that repeats a call the MPI
   library runs replays it (:mod:`wacoll.mpi.fastpath`);
4. executes it (:mod:`wacoll.mpi.executor`) on a second, private duplicate, so that
   wacoll's messages never meet the application's.

Reductions keep MPI's own promise by default (any grouping, and any order where the
operator commutes), or the level the communicator or the call asks for:
``"strict"`` (bit-for-bit reproducible whatever the topology), ``"associative"`` or
``"commutative"``. Predefined operators that are exact in any order (integer and
boolean operands, MIN, MAX, logical and bitwise operators) run at the commutative
level automatically: their results are the same bits in any order. What each level
costs is measured by ``benchmarks/bench_strict.py`` (``benchmarks/results/strict.txt``).
"""

from __future__ import annotations

import math
import os
import zlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from mpi4py import MPI

from wacoll.errors import TopologyError, WacollError
from wacoll.mpi import calls, objects
from wacoll.mpi._fastcall import VERDICTS_DUE
from wacoll.mpi.agreement import Signature, agree, from_rank_0
from wacoll.mpi.argcheck import CHECK_MODES, ArgumentCheck
from wacoll.mpi.described import UNKEYED, describe, replay_family
from wacoll.mpi.discover import topology_from_comm
from wacoll.mpi.dispatch import Dispatcher
from wacoll.mpi.interrupts import collective_name, interrupted
from wacoll.mpi.learning import Tuning, TuningError, read_tuning, shape_of
from wacoll.mpi.links import MEASURE_MODES, links_for, measure_mode
from wacoll.mpi.route import Route, private_dup
from wacoll.mpi.trace import Tracer
from wacoll.plans import LEVELS, Policy, builders
from wacoll.plans.select import PSEUDO_FAMILIES, SCRIPTS, plain_options
from wacoll.settings import agreed_settings, switch
from wacoll.topology import Topology

if TYPE_CHECKING:  # mpi4py's buffer specifications, for the annotations
    from mpi4py.typing import BufSpec, BufSpecB, BufSpecV, InPlace

    from wacoll.mpi.persistent import Prequest
    from wacoll.plans.plan import Plan

__all__ = ["Comm"]


class Comm(MPI.Intracomm):
    """An mpi4py intracommunicator whose collectives run wacoll plans.

    Every setting below an argument can give is also read from its ``WACOLL_*``
    variable (:mod:`wacoll.settings`); an argument given here beats the variable.

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm
        The communicator to wrap; wacoll works on duplicates of it.
    topology : Topology, optional
        Which rank is in which cluster, and its links (used as given); by default
        :func:`wacoll.topology_from_comm` (a ``WACOLL_TOPOLOGY`` file is used as
        given too).
    family : str, optional
        Plan family for every call (default ``$WACOLL_FAMILY``, else the selection
        policy's choice, see
        :mod:`wacoll.plans.select`); ``"scripts"`` selects loaded script plans.
    level : {"strict", "associative", "commutative"}, optional
        Reduction level asserted for the whole communicator (default
        ``$WACOLL_LEVEL``, else MPI's own promise).
    threshold, segment_size : int
        The selection policy's tunables (:class:`wacoll.plans.Policy`).
    arithmetic : {"auto", "fastest", "plain", "reproducible"}
        For strict float sums: whether to run on exact accumulators
        (:attr:`wacoll.plans.Policy.arithmetic`): ``"auto"`` below 4 KiB of values,
        whatever the topology; ``"fastest"`` by predicted time on this topology; or
        forced.
    scripts : str or path, optional
        A plan script file or a directory of them (default ``$WACOLL_SCRIPTS``).
    check : {"beside", "first", "off"}, optional
        The cross-rank argument check of every call (default ``$WACOLL_CHECK``, else
        ``"beside"``): a small all-reduce of each rank's argument digest and error
        flag, so that bad input raises the same error on every rank instead of
        leaving some waiting. ``"beside"`` runs it at the same time as the call (no
        extra wide-area round trip; a failed call may have written receive buffers,
        which MPI leaves undefined after an error); ``"first"`` completes it before
        any rank sends (a failed call touches no buffer: for debugging); ``"off"``
        trusts the arguments, as MPI does (a bad argument on one rank can leave the
        others waiting).
    validate : bool
        ``validate=False`` is ``check="off"``.
    trace : bool
        Record every operation and step (:attr:`tracer`); write them with
        :meth:`write_trace`.
    learn : {"auto", "on", "off"} or bool, optional
        Whether repeated blocking calls try their candidates (the selection's plan,
        the MPI library's collective, the other family the cost model ranks
        first) and keep the fastest measured (:mod:`wacoll.mpi.learning`; :attr:`tuning` says what was
        learned). Default ``$WACOLL_LEARN``, else ``"auto"``: on several clusters.
        ``$WACOLL_TUNING`` names a file of choices learned before
        (:meth:`write_tuning`).
    measure : {"auto", "on", "fresh", "off"} or bool, optional
        Whether a discovered topology (no ``topology``, no ``WACOLL_TOPOLOGY``)
        gets measured links instead of MagPIe's defaults (:mod:`wacoll.mpi.links`):
        the coordinators' latency and bandwidth per cluster pair and the links
        inside the clusters, measured once and kept on disk for a day. Default
        ``$WACOLL_MEASURE``, else ``"auto"``: on several clusters; ``"on"`` on one
        too; ``"fresh"`` measures now even where a young record exists; ``"off"``:
        the defaults. :attr:`links_source` says where the links came from.
    **options
        Family options, e.g. ``tree="lam"`` or ``n=4``.
    """

    def __new__(
        cls, comm: MPI.Intracomm | None = None, *args: Any, **kwargs: Any
    ) -> Comm:
        if comm is None:  # mpi4py's Dup and Clone make the object, then _adopt fills it
            return super().__new__(cls)
        if not isinstance(comm, MPI.Comm) or comm == MPI.COMM_NULL:
            raise WacollError("wacoll.Comm wraps an mpi4py intracommunicator")
        if comm.Is_inter():
            raise WacollError(
                "wacoll.Comm needs an intracommunicator; this one is an "
                "inter-communicator"
            )
        return super().__new__(cls, comm.Dup())

    def __init__(
        self,
        comm: MPI.Intracomm | None = None,
        topology: Topology | None = None,
        *,
        family: str | None = None,
        level: str | None = None,
        threshold: int = 512,
        segment_size: int = 262144,
        scripts: str | os.PathLike[str] | None = None,
        check: str | None = None,
        validate: bool = True,
        trace: bool | str | os.PathLike[str] = False,
        arithmetic: str = "auto",
        learn: str | bool | None = None,
        measure: str | bool | None = None,
        **options: Any,
    ):
        if comm is None:
            return
        error = None
        wire = private_dup(self)
        try:  # first, before anything depends on them: the ranks' settings agree
            settings = agreed_settings(wire)
        except WacollError:
            wire.Free()
            MPI.Intracomm.Free(self)
            raise
        # an argument given in the code beats the environment
        family = settings["WACOLL_FAMILY"] if family is None else family
        level = settings["WACOLL_LEVEL"] if level is None else level
        if check is None:
            check = "off" if not validate else settings["WACOLL_CHECK"] or "beside"
        learn = switch(settings["WACOLL_LEARN"] if learn is None else learn)
        measure = measure_mode(settings["WACOLL_MEASURE"] if measure is None else measure)
        given = topology is not None or bool(settings["WACOLL_TOPOLOGY"])
        try:
            if measure not in MEASURE_MODES:
                raise WacollError(
                    f"measure must be one of {MEASURE_MODES} (or True, "
                    f"False), got {measure!r}"
                )
            if learn not in LEARN_MODES:
                raise WacollError(
                    f"learn must be one of {LEARN_MODES} (or True, False), got {learn!r}"
                )
            if level is not None and level not in LEVELS:
                raise WacollError(f"level must be one of {LEVELS}, got {level!r}")
            if check not in CHECK_MODES:
                raise WacollError(f"check must be one of {CHECK_MODES}, got {check!r}")
            policy = Policy(
                threshold=threshold, segment_size=segment_size, arithmetic=arithmetic
            )
            if topology is not None and not isinstance(topology, Topology):
                raise TopologyError("topology must be a wacoll.Topology")
            if family is not None and family not in PSEUDO_FAMILIES:
                builders(family)
        except WacollError as exc:
            error, policy = exc, None
        # discovery is collective: every rank takes part, even one whose own
        # arguments are already known to be bad or that was given a topology
        discovered: Topology | WacollError
        try:
            discovered = topology_from_comm(wire, env=settings)
        except WacollError as exc:
            discovered = exc
        if topology is None and error is None:
            if isinstance(discovered, WacollError):
                error = discovered
            else:
                topology = discovered
        try:
            options = plain_options(options)
        except WacollError as exc:
            error = error or exc
        fixed = _tuning_choices(wire, settings["WACOLL_TUNING"])
        if isinstance(fixed, WacollError):
            error, fixed = error or fixed, None
        # the plan scripts are read here, so that the ranks agree on them in the
        # constructor's one agreement (their text's digest is one of its fields)
        scripts = scripts or settings["WACOLL_SCRIPTS"]
        found, digest = {}, ()
        if scripts:
            try:
                found, digest = _read_scripts(scripts)
            except WacollError as exc:
                error = error or exc
        size = self.Get_size()
        if error is None and topology is not None and topology.size != size:
            error = TopologyError(
                f"the topology has {topology.size} ranks; the communicator has {size}"
            )
        fields = (
            (
                "topology",
                repr(topology.to_dict()) if isinstance(topology, Topology) else None,
            ),
            ("family", family),
            ("level", level),
            ("threshold", threshold),
            ("segment_size", segment_size),
            ("arithmetic", arithmetic),
            ("options", repr(sorted(options.items()))),
            ("check", check),
            ("learn", learn),
            ("measure", measure),
            ("trace", bool(trace)),
            ("scripts", digest),
        )
        try:
            agree(wire, error, Signature("constructor", options=fields), validate=True)
        except WacollError:
            wire.Free()
            MPI.Intracomm.Free(self)
            raise
        # collective, after the agreement: every rank has the same topology and mode
        source, measured_at = "given", None
        assert topology is not None  # no rank had an error: each has its topology
        if not given:
            try:
                topology, source, measured_at = links_for(wire, topology, measure)
            except WacollError:  # raised on every rank alike
                wire.Free()
                MPI.Intracomm.Free(self)
                raise
        self._setup(
            wire,
            topology,
            family,
            level,
            policy,
            options,
            check,
            trace,
            learn=learn,
            tuning=fixed,
            links=(source, measured_at),
        )
        self._dispatch.scripts = found
        if self.family == SCRIPTS and not self._dispatch.scripts:
            raise WacollError("family 'scripts' needs scripts= or $WACOLL_SCRIPTS")

    def _setup(
        self,
        wire,
        topology,
        family,
        level,
        policy,
        options,
        check,
        trace,
        scripts=None,
        learn="auto",
        tuning=None,
        links=("given", None),
    ):
        #: Where :attr:`network`'s links came from: ``"given"`` (``topology=`` or a
        #: ``WACOLL_TOPOLOGY`` file), ``"measured"`` (by this constructor),
        #: ``"cached"`` (a young record of an earlier measurement) or ``"defaults"``
        #: (MagPIe's); see ``measure=``.
        self.links_source = links[0]
        #: When the links were measured (seconds since the epoch), or None.
        self.links_measured_at = links[1]
        control = private_dup(wire)
        self._learn, self._fixed_tuning = learn, tuning
        # on several clusters, repeated calls learn their fastest candidate
        # (wacoll.mpi.learning); the ranks agree on it over the control communicator
        learning = learn == "on" or (learn == "auto" and topology.nclusters > 1)
        self._tuning = (
            Tuning(control, fixed=tuning) if learning and family is None else None
        )
        #: The :class:`~wacoll.Topology` (clusters and links) wacoll plans for;
        #: ``topology`` is mpi4py's own (the MPI virtual topology kind).
        self.network = topology
        #: The family forced for every call, or None: the selection policy chooses.
        self.family = family
        #: The reduction level asserted for every call, or None: MPI's own promise
        #: (any grouping; any order where the operator commutes).
        self.level = level
        self.policy = policy
        self.options = dict(options)
        #: The cross-rank check mode: ``"beside"``, ``"first"`` or ``"off"``.
        self.check = check
        #: Whether calls are checked across ranks (``check != "off"``).
        self.validate = check != "off"
        #: The trace of this rank's calls (a :class:`~wacoll.mpi.trace.Tracer`), or None.
        self.tracer = Tracer() if trace else None
        place = calls.Place(wire.Get_rank(), wire.Get_size())
        self._dispatch = Dispatcher(topology, place, policy, family, options, scripts)
        self._route = Route(
            wire,
            ArgumentCheck(control, topology, check),
            self._dispatch,
            self.tracer,
            tuning=self._tuning,
        )

    def _adopt(self, parent, topology):
        """Fill a communicator mpi4py made (Dup, Clone) or one derived from ``parent``."""
        wire = private_dup(self)
        self._setup(
            wire,
            topology,
            parent.family,
            parent.level,
            parent.policy,
            parent.options,
            parent.check,
            parent.tracer is not None,
            {
                k: v
                for k, v in parent._dispatch.scripts.items()
                if k[1] == wire.Get_size()
            },
            learn=parent._learn,
            tuning=parent._fixed_tuning,
            links=(parent.links_source, parent.links_measured_at),
        )
        return self

    # ------------------------------------------------------------ communicators
    @property
    def mpi_comm(self) -> MPI.Intracomm | None:
        """The private duplicate wacoll's plans run on (None once freed)."""
        route = getattr(self, "_route", None)
        return None if route is None else route.wire

    @property
    def route(self) -> Route:
        """How this communicator runs its calls (:class:`wacoll.mpi.route.Route`):
        its caches, its argument check, its wire; for wacoll's own modules and for
        inspection."""
        return self._route

    @property
    def last_plan(self) -> Plan | None:
        """The plan the most recent collective ran (for inspection and drawing), or
        None when the MPI library's own collective ran it (see :attr:`last_family`)."""
        return self._route.last_plan

    @property
    def last_family(self) -> str | None:
        """The family that ran the most recent collective (``"native"``: the MPI
        library's own)."""
        return self._route.last_family

    @property
    def last_reason(self) -> str:
        """Why the most recent collective ran what it ran, in words: the selection's
        rule, the predicted times of the candidates it priced, a family asked for,
        what learning tried or chose, or a repeated call run as recorded."""
        return self._route.last_reason

    @property
    def last_route(self) -> str | None:
        """How the most recent blocking collective ran: ``"compiled"`` (read afresh
        and run from C: a plan in the compiled runner, or the MPI library's
        collective, each with its check), ``"replayed"`` (a repeated call, found by
        what its arguments look like and run without reading them again),
        ``"python"`` (the Python executor: tracing, reproducible arithmetic, a
        user-defined operator, a composite), ``"library"`` (the MPI library's
        collective beside a check driven from Python) or ``"folded"`` (a count of
        0 on every rank: nothing to move, its digest checked with the next
        call's; unchecked, nothing done)."""
        return self._route.last_route

    def Free(self) -> None:
        """Free this communicator and wacoll's private duplicate (twice is harmless)."""
        route = getattr(self, "_route", None)
        if route is None or route.wire is None:
            return
        route.free()
        route.control.Free()
        MPI.Intracomm.Free(self)

    def _settled(self, flush=True):
        """Collect the verdicts of calls still in flight before a collective outside
        the calls (a new communicator, a file written): a failed one raises here,
        on every rank. Without ``flush`` (a collective of some ranks only:
        ``Create_group``) the calls folded into the next check stay there."""
        route = getattr(self, "_route", None)
        if route is not None and route.wire is not None and route.broken is None:
            route.settle(flush=flush)

    def Dup(self, info: MPI.Info | None = None) -> Comm:
        """A duplicate with the same topology and settings (collective)."""
        self._settled()
        new = super().Dup() if info is None else super().Dup(info)
        return new._adopt(self, self.network)

    def Clone(self) -> Comm:
        """A duplicate with the same topology and settings (collective)."""
        self._settled()
        return super().Clone()._adopt(self, self.network)

    def _derive(self, comm):
        """Wrap a new sub-communicator of this one, with its members' topology."""
        if comm == MPI.COMM_NULL:
            return comm
        members = comm.allgather(self.Get_rank())
        new = MPI.Intracomm.__new__(type(self), comm)
        return new._adopt(self, self.network.restrict(members))

    def Split(self, color: int = 0, key: int = 0) -> MPI.Comm:
        """Split by ``color``; each part is a wacoll communicator (collective)."""
        self._settled()
        return self._derive(super().Split(color, key))

    def Split_type(
        self, split_type: int, key: int = 0, info: MPI.Info = MPI.INFO_NULL
    ) -> MPI.Comm:
        """Split by type (e.g. shared memory); each part is a wacoll communicator."""
        self._settled()
        return self._derive(super().Split_type(split_type, key, info))

    def Create(self, group: MPI.Group) -> MPI.Comm:
        """A wacoll communicator over ``group`` (collective over this one)."""
        self._settled()
        return self._derive(super().Create(group))

    def Create_group(self, group: MPI.Group, tag: int = 0) -> MPI.Intracomm:
        """A wacoll communicator over ``group`` (collective over its members)."""
        self._settled(flush=False)
        return self._derive(super().Create_group(group, tag))

    # ------------------------------------------------------------- collectives
    def Barrier(self, *, family: str | None = None, **options: Any) -> None:
        """Synchronise all ranks."""
        self._collective(calls.barrier, (), family, options)

    def Bcast(
        self, buf: BufSpec, root: int = 0, *, family: str | None = None, **options: Any
    ) -> None:
        """Broadcast ``buf`` from ``root`` to every rank."""
        self._collective(calls.bcast, (buf, root), family, options)

    def Scatter(
        self,
        sendbuf: BufSpecB | None,
        recvbuf: BufSpec | InPlace,
        root: int = 0,
        *,
        family: str | None = None,
        **options: Any,
    ) -> None:
        """Send block ``i`` of the root's ``sendbuf`` to rank ``i``."""
        self._collective(calls.scatter, (sendbuf, recvbuf, root), family, options)

    def Scatterv(
        self,
        sendbuf: BufSpecV | None,
        recvbuf: BufSpec | InPlace,
        root: int = 0,
        *,
        family: str | None = None,
        **options: Any,
    ) -> None:
        """Send ``counts[i]`` elements at ``displs[i]`` of the root's buffer to rank i."""
        self._collective(calls.scatterv, (sendbuf, recvbuf, root), family, options)

    def Gather(
        self,
        sendbuf: BufSpec | InPlace,
        recvbuf: BufSpecB | None,
        root: int = 0,
        *,
        family: str | None = None,
        **options: Any,
    ) -> None:
        """Collect every rank's ``sendbuf`` in rank order at ``root``."""
        self._collective(calls.gather, (sendbuf, recvbuf, root), family, options)

    def Gatherv(
        self,
        sendbuf: BufSpec | InPlace,
        recvbuf: BufSpecV | None,
        root: int = 0,
        *,
        family: str | None = None,
        **options: Any,
    ) -> None:
        """Collect ``counts[i]`` elements from rank ``i`` at ``displs[i]`` at the root."""
        self._collective(calls.gatherv, (sendbuf, recvbuf, root), family, options)

    def Allgather(
        self,
        sendbuf: BufSpec | InPlace,
        recvbuf: BufSpecB,
        *,
        family: str | None = None,
        **options: Any,
    ) -> None:
        """Every rank collects every rank's ``sendbuf`` in rank order."""
        self._collective(calls.allgather, (sendbuf, recvbuf), family, options)

    def Allgatherv(
        self,
        sendbuf: BufSpec | InPlace,
        recvbuf: BufSpecV,
        *,
        family: str | None = None,
        **options: Any,
    ) -> None:
        """Every rank collects ``counts[i]`` elements of rank ``i`` at ``displs[i]``."""
        self._collective(calls.allgatherv, (sendbuf, recvbuf), family, options)

    def Alltoall(
        self,
        sendbuf: BufSpecB | InPlace,
        recvbuf: BufSpecB,
        *,
        family: str | None = None,
        **options: Any,
    ) -> None:
        """Rank ``i`` sends its ``j``-th block to rank ``j``, which stores it ``i``-th."""
        self._collective(calls.alltoall, (sendbuf, recvbuf), family, options)

    def Alltoallv(
        self,
        sendbuf: BufSpecV | InPlace,
        recvbuf: BufSpecV,
        *,
        family: str | None = None,
        **options: Any,
    ) -> None:
        """Rank ``i`` sends ``sendcounts[j]`` elements to ``j`` (vector all-to-all)."""
        self._collective(calls.alltoallv, (sendbuf, recvbuf), family, options)

    def Reduce(
        self,
        sendbuf: BufSpec | InPlace,
        recvbuf: BufSpec | None,
        op: MPI.Op = MPI.SUM,
        root: int = 0,
        *,
        family: str | None = None,
        level: str | None = None,
        **options: Any,
    ) -> None:
        """Combine every rank's ``sendbuf`` with ``op`` into the root's ``recvbuf``."""
        self._collective(
            calls.reduce, (sendbuf, recvbuf, op, root), family, options, level
        )

    def Allreduce(
        self,
        sendbuf: BufSpec | InPlace,
        recvbuf: BufSpec,
        op: MPI.Op = MPI.SUM,
        *,
        family: str | None = None,
        level: str | None = None,
        **options: Any,
    ) -> None:
        """Combine every rank's ``sendbuf`` with ``op`` into every ``recvbuf``."""
        self._collective(calls.allreduce, (sendbuf, recvbuf, op), family, options, level)

    def Scan(
        self,
        sendbuf: BufSpec | InPlace,
        recvbuf: BufSpec,
        op: MPI.Op = MPI.SUM,
        *,
        family: str | None = None,
        level: str | None = None,
        **options: Any,
    ) -> None:
        """Rank ``i`` receives the combination of ranks ``0..i``."""
        self._collective(calls.scan, (sendbuf, recvbuf, op), family, options, level)

    def Exscan(
        self,
        sendbuf: BufSpec | InPlace,
        recvbuf: BufSpec,
        op: MPI.Op = MPI.SUM,
        *,
        family: str | None = None,
        level: str | None = None,
        **options: Any,
    ) -> None:
        """Rank ``i > 0`` receives the combination of ranks ``0..i-1``."""
        self._collective(calls.exscan, (sendbuf, recvbuf, op), family, options, level)

    def Reduce_scatter_block(
        self,
        sendbuf: BufSpecB | InPlace,
        recvbuf: BufSpec | BufSpecB,
        op: MPI.Op = MPI.SUM,
        *,
        family: str | None = None,
        level: str | None = None,
        **options: Any,
    ) -> None:
        """Combine, then give rank ``i`` the ``i``-th block of ``recvbuf``'s size."""
        self._collective(
            calls.reduce_scatter_block, (sendbuf, recvbuf, op), family, options, level
        )

    def Reduce_scatter(
        self,
        sendbuf: BufSpec | InPlace,
        recvbuf: BufSpec,
        recvcounts: Sequence[int] | None = None,
        op: MPI.Op = MPI.SUM,
        *,
        family: str | None = None,
        level: str | None = None,
        **options: Any,
    ) -> None:
        """Combine, then give rank ``i`` ``recvcounts[i]`` elements of the result."""
        self._collective(
            calls.reduce_scatter,
            (sendbuf, recvbuf, recvcounts, op),
            family,
            options,
            level,
        )

    # ------------------------------------------------ non-blocking collectives
    def Ibarrier(self, *, family: str | None = None, **options: Any) -> MPI.Request:
        """Non-blocking synchronise all ranks: returns an ``MPI.Request`` (:class:`~wacoll.mpi.persistent.Request`, or on one node the library's own: :class:`~wacoll.mpi.startcall.NodeRequest`)."""
        return self._collective(calls.barrier, (), family, options, mode="start")

    def Ibcast(
        self, buf: BufSpec, root: int = 0, *, family: str | None = None, **options: Any
    ) -> MPI.Request:
        """Non-blocking broadcast ``buf`` from ``root``: returns an ``MPI.Request`` (:class:`~wacoll.mpi.persistent.Request`, or on one node the library's own: :class:`~wacoll.mpi.startcall.NodeRequest`)."""
        return self._collective(calls.bcast, (buf, root), family, options, mode="start")

    def Iscatter(
        self,
        sendbuf: BufSpecB | None,
        recvbuf: BufSpec | InPlace,
        root: int = 0,
        *,
        family: str | None = None,
        **options: Any,
    ) -> MPI.Request:
        """Non-blocking scatter: returns an ``MPI.Request`` (:class:`~wacoll.mpi.persistent.Request`, or on one node the library's own: :class:`~wacoll.mpi.startcall.NodeRequest`)."""
        return self._collective(
            calls.scatter, (sendbuf, recvbuf, root), family, options, mode="start"
        )

    def Iscatterv(
        self,
        sendbuf: BufSpecV | None,
        recvbuf: BufSpec | InPlace,
        root: int = 0,
        *,
        family: str | None = None,
        **options: Any,
    ) -> MPI.Request:
        """Non-blocking vector scatter: returns an ``MPI.Request`` (:class:`~wacoll.mpi.persistent.Request`, or on one node the library's own: :class:`~wacoll.mpi.startcall.NodeRequest`)."""
        return self._collective(
            calls.scatterv, (sendbuf, recvbuf, root), family, options, mode="start"
        )

    def Igather(
        self,
        sendbuf: BufSpec | InPlace,
        recvbuf: BufSpecB | None,
        root: int = 0,
        *,
        family: str | None = None,
        **options: Any,
    ) -> MPI.Request:
        """Non-blocking gather: returns an ``MPI.Request`` (:class:`~wacoll.mpi.persistent.Request`, or on one node the library's own: :class:`~wacoll.mpi.startcall.NodeRequest`)."""
        return self._collective(
            calls.gather, (sendbuf, recvbuf, root), family, options, mode="start"
        )

    def Igatherv(
        self,
        sendbuf: BufSpec | InPlace,
        recvbuf: BufSpecV | None,
        root: int = 0,
        *,
        family: str | None = None,
        **options: Any,
    ) -> MPI.Request:
        """Non-blocking vector gather: returns an ``MPI.Request`` (:class:`~wacoll.mpi.persistent.Request`, or on one node the library's own: :class:`~wacoll.mpi.startcall.NodeRequest`)."""
        return self._collective(
            calls.gatherv, (sendbuf, recvbuf, root), family, options, mode="start"
        )

    def Iallgather(
        self,
        sendbuf: BufSpec | InPlace,
        recvbuf: BufSpecB,
        *,
        family: str | None = None,
        **options: Any,
    ) -> MPI.Request:
        """Non-blocking all-gather: returns an ``MPI.Request`` (:class:`~wacoll.mpi.persistent.Request`, or on one node the library's own: :class:`~wacoll.mpi.startcall.NodeRequest`)."""
        return self._collective(
            calls.allgather, (sendbuf, recvbuf), family, options, mode="start"
        )

    def Iallgatherv(
        self,
        sendbuf: BufSpec | InPlace,
        recvbuf: BufSpecV,
        *,
        family: str | None = None,
        **options: Any,
    ) -> MPI.Request:
        """Non-blocking vector all-gather: returns an ``MPI.Request`` (:class:`~wacoll.mpi.persistent.Request`, or on one node the library's own: :class:`~wacoll.mpi.startcall.NodeRequest`)."""
        return self._collective(
            calls.allgatherv, (sendbuf, recvbuf), family, options, mode="start"
        )

    def Ialltoall(
        self,
        sendbuf: BufSpecB | InPlace,
        recvbuf: BufSpecB,
        *,
        family: str | None = None,
        **options: Any,
    ) -> MPI.Request:
        """Non-blocking all-to-all: returns an ``MPI.Request`` (:class:`~wacoll.mpi.persistent.Request`, or on one node the library's own: :class:`~wacoll.mpi.startcall.NodeRequest`)."""
        return self._collective(
            calls.alltoall, (sendbuf, recvbuf), family, options, mode="start"
        )

    def Ialltoallv(
        self,
        sendbuf: BufSpecV | InPlace,
        recvbuf: BufSpecV,
        *,
        family: str | None = None,
        **options: Any,
    ) -> MPI.Request:
        """Non-blocking vector all-to-all: returns an ``MPI.Request`` (:class:`~wacoll.mpi.persistent.Request`, or on one node the library's own: :class:`~wacoll.mpi.startcall.NodeRequest`)."""
        return self._collective(
            calls.alltoallv, (sendbuf, recvbuf), family, options, mode="start"
        )

    def Ireduce(
        self,
        sendbuf: BufSpec | InPlace,
        recvbuf: BufSpec | None,
        op: MPI.Op = MPI.SUM,
        root: int = 0,
        *,
        family: str | None = None,
        level: str | None = None,
        **options: Any,
    ) -> MPI.Request:
        """Non-blocking reduce: returns an ``MPI.Request`` (:class:`~wacoll.mpi.persistent.Request`, or on one node the library's own: :class:`~wacoll.mpi.startcall.NodeRequest`)."""
        return self._collective(
            calls.reduce,
            (sendbuf, recvbuf, op, root),
            family,
            options,
            level,
            mode="start",
        )

    def Iallreduce(
        self,
        sendbuf: BufSpec | InPlace,
        recvbuf: BufSpec,
        op: MPI.Op = MPI.SUM,
        *,
        family: str | None = None,
        level: str | None = None,
        **options: Any,
    ) -> MPI.Request:
        """Non-blocking all-reduce: returns an ``MPI.Request`` (:class:`~wacoll.mpi.persistent.Request`, or on one node the library's own: :class:`~wacoll.mpi.startcall.NodeRequest`)."""
        return self._collective(
            calls.allreduce, (sendbuf, recvbuf, op), family, options, level, mode="start"
        )

    def Iscan(
        self,
        sendbuf: BufSpec | InPlace,
        recvbuf: BufSpec,
        op: MPI.Op = MPI.SUM,
        *,
        family: str | None = None,
        level: str | None = None,
        **options: Any,
    ) -> MPI.Request:
        """Non-blocking inclusive scan: returns an ``MPI.Request`` (:class:`~wacoll.mpi.persistent.Request`, or on one node the library's own: :class:`~wacoll.mpi.startcall.NodeRequest`)."""
        return self._collective(
            calls.scan, (sendbuf, recvbuf, op), family, options, level, mode="start"
        )

    def Iexscan(
        self,
        sendbuf: BufSpec | InPlace,
        recvbuf: BufSpec,
        op: MPI.Op = MPI.SUM,
        *,
        family: str | None = None,
        level: str | None = None,
        **options: Any,
    ) -> MPI.Request:
        """Non-blocking exclusive scan: returns an ``MPI.Request`` (:class:`~wacoll.mpi.persistent.Request`, or on one node the library's own: :class:`~wacoll.mpi.startcall.NodeRequest`)."""
        return self._collective(
            calls.exscan, (sendbuf, recvbuf, op), family, options, level, mode="start"
        )

    def Ireduce_scatter_block(
        self,
        sendbuf: BufSpecB | InPlace,
        recvbuf: BufSpec | BufSpecB,
        op: MPI.Op = MPI.SUM,
        *,
        family: str | None = None,
        level: str | None = None,
        **options: Any,
    ) -> MPI.Request:
        """Non-blocking reduce-scatter with equal blocks: returns an ``MPI.Request`` (:class:`~wacoll.mpi.persistent.Request`, or on one node the library's own: :class:`~wacoll.mpi.startcall.NodeRequest`)."""
        return self._collective(
            calls.reduce_scatter_block,
            (sendbuf, recvbuf, op),
            family,
            options,
            level,
            mode="start",
        )

    def Ireduce_scatter(
        self,
        sendbuf: BufSpec | InPlace,
        recvbuf: BufSpec,
        recvcounts: Sequence[int] | None = None,
        op: MPI.Op = MPI.SUM,
        *,
        family: str | None = None,
        level: str | None = None,
        **options: Any,
    ) -> MPI.Request:
        """Non-blocking reduce-scatter: returns an ``MPI.Request`` (:class:`~wacoll.mpi.persistent.Request`, or on one node the library's own: :class:`~wacoll.mpi.startcall.NodeRequest`)."""
        return self._collective(
            calls.reduce_scatter,
            (sendbuf, recvbuf, recvcounts, op),
            family,
            options,
            level,
            mode="start",
        )

    # -------------------------------------------- persistent collectives (MPI-4)
    def Barrier_init(
        self, info: MPI.Info = MPI.INFO_NULL, *, family: str | None = None, **options: Any
    ) -> Prequest:
        """Persistent synchronise all ranks: returns a :class:`~wacoll.mpi.persistent.Prequest`."""
        return self._collective(calls.barrier, (), family, options, mode="bind")

    def Bcast_init(
        self,
        buf: BufSpec,
        root: int = 0,
        info: MPI.Info = MPI.INFO_NULL,
        *,
        family: str | None = None,
        **options: Any,
    ) -> Prequest:
        """Persistent broadcast ``buf`` from ``root``: returns a :class:`~wacoll.mpi.persistent.Prequest`."""
        return self._collective(calls.bcast, (buf, root), family, options, mode="bind")

    def Scatter_init(
        self,
        sendbuf: BufSpecB | None,
        recvbuf: BufSpec | InPlace,
        root: int = 0,
        info: MPI.Info = MPI.INFO_NULL,
        *,
        family: str | None = None,
        **options: Any,
    ) -> Prequest:
        """Persistent scatter: returns a :class:`~wacoll.mpi.persistent.Prequest`."""
        return self._collective(
            calls.scatter, (sendbuf, recvbuf, root), family, options, mode="bind"
        )

    def Scatterv_init(
        self,
        sendbuf: BufSpecV | None,
        recvbuf: BufSpec | InPlace,
        root: int = 0,
        info: MPI.Info = MPI.INFO_NULL,
        *,
        family: str | None = None,
        **options: Any,
    ) -> Prequest:
        """Persistent vector scatter: returns a :class:`~wacoll.mpi.persistent.Prequest`."""
        return self._collective(
            calls.scatterv, (sendbuf, recvbuf, root), family, options, mode="bind"
        )

    def Gather_init(
        self,
        sendbuf: BufSpec | InPlace,
        recvbuf: BufSpecB | None,
        root: int = 0,
        info: MPI.Info = MPI.INFO_NULL,
        *,
        family: str | None = None,
        **options: Any,
    ) -> Prequest:
        """Persistent gather: returns a :class:`~wacoll.mpi.persistent.Prequest`."""
        return self._collective(
            calls.gather, (sendbuf, recvbuf, root), family, options, mode="bind"
        )

    def Gatherv_init(
        self,
        sendbuf: BufSpec | InPlace,
        recvbuf: BufSpecV | None,
        root: int = 0,
        info: MPI.Info = MPI.INFO_NULL,
        *,
        family: str | None = None,
        **options: Any,
    ) -> Prequest:
        """Persistent vector gather: returns a :class:`~wacoll.mpi.persistent.Prequest`."""
        return self._collective(
            calls.gatherv, (sendbuf, recvbuf, root), family, options, mode="bind"
        )

    def Allgather_init(
        self,
        sendbuf: BufSpec | InPlace,
        recvbuf: BufSpecB,
        info: MPI.Info = MPI.INFO_NULL,
        *,
        family: str | None = None,
        **options: Any,
    ) -> Prequest:
        """Persistent all-gather: returns a :class:`~wacoll.mpi.persistent.Prequest`."""
        return self._collective(
            calls.allgather, (sendbuf, recvbuf), family, options, mode="bind"
        )

    def Allgatherv_init(
        self,
        sendbuf: BufSpec | InPlace,
        recvbuf: BufSpecV,
        info: MPI.Info = MPI.INFO_NULL,
        *,
        family: str | None = None,
        **options: Any,
    ) -> Prequest:
        """Persistent vector all-gather: returns a :class:`~wacoll.mpi.persistent.Prequest`."""
        return self._collective(
            calls.allgatherv, (sendbuf, recvbuf), family, options, mode="bind"
        )

    def Alltoall_init(
        self,
        sendbuf: BufSpecB | InPlace,
        recvbuf: BufSpecB,
        info: MPI.Info = MPI.INFO_NULL,
        *,
        family: str | None = None,
        **options: Any,
    ) -> Prequest:
        """Persistent all-to-all: returns a :class:`~wacoll.mpi.persistent.Prequest`."""
        return self._collective(
            calls.alltoall, (sendbuf, recvbuf), family, options, mode="bind"
        )

    def Alltoallv_init(
        self,
        sendbuf: BufSpecV | InPlace,
        recvbuf: BufSpecV,
        info: MPI.Info = MPI.INFO_NULL,
        *,
        family: str | None = None,
        **options: Any,
    ) -> Prequest:
        """Persistent vector all-to-all: returns a :class:`~wacoll.mpi.persistent.Prequest`."""
        return self._collective(
            calls.alltoallv, (sendbuf, recvbuf), family, options, mode="bind"
        )

    def Reduce_init(
        self,
        sendbuf: BufSpec | InPlace,
        recvbuf: BufSpec | None,
        op: MPI.Op = MPI.SUM,
        root: int = 0,
        info: MPI.Info = MPI.INFO_NULL,
        *,
        family: str | None = None,
        level: str | None = None,
        **options: Any,
    ) -> Prequest:
        """Persistent reduce: returns a :class:`~wacoll.mpi.persistent.Prequest`."""
        return self._collective(
            calls.reduce,
            (sendbuf, recvbuf, op, root),
            family,
            options,
            level,
            mode="bind",
        )

    def Allreduce_init(
        self,
        sendbuf: BufSpec | InPlace,
        recvbuf: BufSpec,
        op: MPI.Op = MPI.SUM,
        info: MPI.Info = MPI.INFO_NULL,
        *,
        family: str | None = None,
        level: str | None = None,
        **options: Any,
    ) -> Prequest:
        """Persistent all-reduce: returns a :class:`~wacoll.mpi.persistent.Prequest`."""
        return self._collective(
            calls.allreduce, (sendbuf, recvbuf, op), family, options, level, mode="bind"
        )

    def Scan_init(
        self,
        sendbuf: BufSpec | InPlace,
        recvbuf: BufSpec,
        op: MPI.Op = MPI.SUM,
        info: MPI.Info = MPI.INFO_NULL,
        *,
        family: str | None = None,
        level: str | None = None,
        **options: Any,
    ) -> Prequest:
        """Persistent inclusive scan: returns a :class:`~wacoll.mpi.persistent.Prequest`."""
        return self._collective(
            calls.scan, (sendbuf, recvbuf, op), family, options, level, mode="bind"
        )

    def Exscan_init(
        self,
        sendbuf: BufSpec | InPlace,
        recvbuf: BufSpec,
        op: MPI.Op = MPI.SUM,
        info: MPI.Info = MPI.INFO_NULL,
        *,
        family: str | None = None,
        level: str | None = None,
        **options: Any,
    ) -> Prequest:
        """Persistent exclusive scan: returns a :class:`~wacoll.mpi.persistent.Prequest`."""
        return self._collective(
            calls.exscan, (sendbuf, recvbuf, op), family, options, level, mode="bind"
        )

    def Reduce_scatter_block_init(
        self,
        sendbuf: BufSpecB | InPlace,
        recvbuf: BufSpec | BufSpecB,
        op: MPI.Op = MPI.SUM,
        info: MPI.Info = MPI.INFO_NULL,
        *,
        family: str | None = None,
        level: str | None = None,
        **options: Any,
    ) -> Prequest:
        """Persistent reduce-scatter with equal blocks: returns a :class:`~wacoll.mpi.persistent.Prequest`."""
        return self._collective(
            calls.reduce_scatter_block,
            (sendbuf, recvbuf, op),
            family,
            options,
            level,
            mode="bind",
        )

    def Reduce_scatter_init(
        self,
        sendbuf: BufSpec | InPlace,
        recvbuf: BufSpec,
        recvcounts: Sequence[int] | None = None,
        op: MPI.Op = MPI.SUM,
        info: MPI.Info = MPI.INFO_NULL,
        *,
        family: str | None = None,
        level: str | None = None,
        **options: Any,
    ) -> Prequest:
        """Persistent reduce-scatter: returns a :class:`~wacoll.mpi.persistent.Prequest`."""
        return self._collective(
            calls.reduce_scatter,
            (sendbuf, recvbuf, recvcounts, op),
            family,
            options,
            level,
            mode="bind",
        )

    # ------------------------------------------------------------- object collectives
    # mpi4py's lower-case (pickle-based) collectives, run over wacoll plans: see
    # wacoll.mpi.objects for the frames, the reduction order and the error flags.
    # They always run a plan (never the MPI library's own, which would leave the
    # other ranks waiting when one rank cannot pickle its object).
    def barrier(self, *, family: str | None = None, **options: Any) -> None:
        """Synchronise all ranks (mpi4py's ``barrier``)."""
        return objects.barrier(self, family=family, **options)

    def bcast(
        self, obj: Any, root: int = 0, *, family: str | None = None, **options: Any
    ) -> Any:
        """The root's ``obj`` on every rank (mpi4py's ``bcast``)."""
        return objects.bcast(self, obj, root, family=family, **options)

    def gather(
        self, sendobj: Any, root: int = 0, *, family: str | None = None, **options: Any
    ) -> list[Any] | None:
        """Every rank's ``sendobj`` in a list at the root (mpi4py's ``gather``)."""
        return objects.gather(self, sendobj, root, family=family, **options)

    def scatter(
        self,
        sendobj: Sequence[Any] | None,
        root: int = 0,
        *,
        family: str | None = None,
        **options: Any,
    ) -> Any:
        """Item ``i`` of the root's ``sendobj`` on rank ``i`` (mpi4py's ``scatter``)."""
        return objects.scatter(self, sendobj, root, family=family, **options)

    def allgather(
        self, sendobj: Any, *, family: str | None = None, **options: Any
    ) -> list[Any]:
        """Every rank's ``sendobj`` in a list on every rank (mpi4py's ``allgather``)."""
        return objects.allgather(self, sendobj, family=family, **options)

    def alltoall(
        self, sendobj: Sequence[Any], *, family: str | None = None, **options: Any
    ) -> list[Any]:
        """Item ``j`` of rank ``i``'s ``sendobj`` as item ``i`` on rank ``j``."""
        return objects.alltoall(self, sendobj, family=family, **options)

    def reduce(
        self,
        sendobj: Any,
        op: MPI.Op | Callable[[Any, Any], Any] = MPI.SUM,
        root: int = 0,
        *,
        family: str | None = None,
        level: str | None = None,
        **options: Any,
    ) -> Any | None:
        """``op`` over every rank's ``sendobj`` at the root (mpi4py's ``reduce``)."""
        return objects.reduce(
            self, sendobj, op, root, family=family, level=level, **options
        )

    def allreduce(
        self,
        sendobj: Any,
        op: MPI.Op | Callable[[Any, Any], Any] = MPI.SUM,
        *,
        family: str | None = None,
        level: str | None = None,
        **options: Any,
    ) -> Any:
        """``op`` over every rank's ``sendobj`` on every rank (mpi4py's ``allreduce``)."""
        return objects.allreduce(self, sendobj, op, family=family, level=level, **options)

    def scan(
        self,
        sendobj: Any,
        op: MPI.Op | Callable[[Any, Any], Any] = MPI.SUM,
        *,
        family: str | None = None,
        level: str | None = None,
        **options: Any,
    ) -> Any:
        """On rank ``i``, ``op`` over ranks ``0..i`` (mpi4py's ``scan``)."""
        return objects.scan(self, sendobj, op, family=family, level=level, **options)

    def exscan(
        self,
        sendobj: Any,
        op: MPI.Op | Callable[[Any, Any], Any] = MPI.SUM,
        *,
        family: str | None = None,
        level: str | None = None,
        **options: Any,
    ) -> Any:
        """On rank ``i > 0``, ``op`` over ranks ``0..i-1`` (mpi4py's ``exscan``)."""
        return objects.exscan(self, sendobj, op, family=family, level=level, **options)

    # ------------------------------------------------------------- tracing
    def write_trace(self, path: str | os.PathLike[str]) -> None:
        """Gather every rank's trace records; rank 0 writes a Chrome trace file.

        Collective. Open the file in Perfetto or chrome://tracing: one track per rank.
        """
        from wacoll.mpi.trace import write_chrome_trace

        if self.tracer is None:
            raise WacollError("tracing is off: create the Comm with trace=True")
        records = self._route.wire.gather(self.tracer.records, root=0)
        if self.Get_rank() == 0:
            write_chrome_trace(records, path)

    # ------------------------------------------------------------- the machinery
    def _collective(self, reader, args, family, options, level=None, mode="call"):
        """Run one collective call on the communicator's route
        (:mod:`wacoll.mpi.route`): replay it, or describe, dispatch and run it.

        ``mode`` is ``"call"`` (blocking), ``"start"`` (non-blocking: returns a
        request) or ``"bind"`` (persistent: returns a :class:`Prequest`).
        """
        route = self._route
        replays = route.replays  # (the progress thread may stop the route meanwhile)
        # a call that gives options is replayed too, keyed by them (plain values)
        keyed = None if family is None and not options else replay_family(family, options)
        if replays is not None and keyed is not UNKEYED:
            if mode == "call":  # straight to the recordings, in C
                try:
                    outcome = replays.replay(reader, keyed, level, args)
                    while outcome is VERDICTS_DUE:  # (a request the library completed)
                        # a failed verdict: the call fails through its check
                        outcome = (
                            replays.replay(reader, keyed, level, args)
                            if route.collect_due()
                            else None
                        )
                    if outcome is True:
                        return None
                    if outcome is not None:  # its check failed
                        route.failed(outcome)  # (raises)
                except BaseException as exc:  # an interrupt ends the job (by default)
                    interrupted(exc, collective_name(reader.__name__), route)
                    raise
            elif mode == "start":
                try:
                    request = route.start_replayed(reader, keyed, level, args)
                except BaseException as exc:  # an interrupt ends the job (by default)
                    interrupted(exc, collective_name(reader.__name__, mode), route)
                    raise
                if request is not None:
                    return request
        bad_options = None
        if options:  # a tree given as a graph, numpy numbers: as plain values
            try:
                options = plain_options(options)
            except WacollError as exc:  # raised on every rank by the check
                options, bad_options = {}, exc
        try:
            return self._afresh(reader, args, family, options, level, mode, bad_options)
        except BaseException as exc:  # an interrupt ends the job (by default)
            interrupted(exc, collective_name(reader.__name__, mode), route)
            raise

    def _afresh(self, reader, args, family, options, level, mode, bad_options):
        """Describe, dispatch and run a call that is not replayed.

        With tracing on, each stage is recorded as a ``phase`` event (``arguments``,
        ``plan and lower``, ``execute``; ``execute`` includes waiting for the
        cross-rank check) inside the call's ``operation`` event: the public way to
        see where a call's time goes.
        """
        route = self._route
        if (
            not route.broken_everywhere
            or route.wire is None
            or not route.argcheck.enabled
        ):
            route.usable()
        elif bad_options is None:
            # stopped on every rank, each when it learns of it: the call fails
            # through its check, so that every rank raises at this same call (a rank
            # that has not learned yet of the failure, too), instead of one refusing
            # it alone while the others wait for it
            bad_options = WacollError(route.broken)
        if route.broken is None:
            route.settle()  # what is read afresh may agree across ranks (collectives)
            if route.broken_everywhere and bad_options is None:
                # a verdict collected there failed: this call fails through its check
                bad_options = WacollError(route.broken)
        tracer = self.tracer
        t0 = tracer.clock() if tracer else 0.0
        desc = describe(
            reader,
            args,
            place=route.place,
            mode=mode,
            family=family,
            options=options,
            level=level,
            default_level=self.level,
            bad_options=bad_options,
            control=route.control,
            recordings=route.replays,
        )
        t1 = tracer.clock() if tracer else 0.0
        chosen, why = self._learned_family(desc)
        exe = counted_out = None
        if desc.error is None:
            try:
                exe = self._dispatch.executable(desc, chosen, why)
            except WacollError as exc:  # raised on every rank by the check
                if desc.shape is not None and chosen is not None:
                    # a candidate that cannot plan this call: every rank finds the
                    # same, counts it out (once the check has passed: a rank whose
                    # call differs must not count alone) and runs the selection's
                    # choice instead
                    counted_out, desc.shape = desc.shape, None
                    desc.explore_key = None
                    try:
                        exe = self._dispatch.executable(
                            desc, None, f"learning: {chosen} cannot run this call"
                        )
                    except WacollError as again:
                        desc.fail(again)
                else:
                    desc.fail(exc)
        t2 = tracer.clock() if tracer else 0.0
        result = route.run(desc, exe)
        if desc.shape is not None or counted_out is not None:
            # learning agrees on what it observed (collectives): the call's verdict
            # first, so that a rank that raises it never meets a peer in them
            route.settle(entering=False)
        if counted_out is not None:
            self._tuning.observe(counted_out, math.inf, self._candidates(desc))
        if desc.shape is not None:
            # an explored call's time is its run's (Route.run_seconds): reading it
            # afresh, dispatching it and building its compiled call cost alike for
            # every candidate, and a repeated call of the chosen one is replayed
            # without them where it runs compiled
            self._tuning.observe(desc.shape, route.run_seconds, self._candidates(desc))
        if tracer and mode == "call":
            t3 = tracer.clock()
            for name, start, end in (
                ("arguments", t0, t1),
                ("plan and lower", t1, t2),
                ("execute", t2, t3),
            ):
                tracer.record(name, "phase", start, end)
            label = (
                "native"
                if exe.plan is None
                else f"{exe.plan.family}/{exe.plan.algorithm}"
            )
            if exe.plan is not None and exe.plan.arithmetic != "plain":
                label += f", {exe.plan.arithmetic} arithmetic"
            tracer.record(f"{desc.op} ({label})", "operation", t0, t3, reason=exe.reason)
        return result

    def _learned_family(self, desc):
        """``(family, why)`` of a call: its own family (None: the selection's, which
        says why), or, where this communicator learns (:mod:`wacoll.mpi.learning`),
        the one learned for its shape or the candidate its exploration tries next
        (then ``desc.shape`` is set, and the call is not recorded as itself: its
        candidate's compiled call is kept for the shape's counted calls,
        :mod:`wacoll.mpi.exploring`)."""
        if (
            self._tuning is None
            or desc.error is not None
            or not desc.blocking
            or desc.family is not None
            or desc.options
            or desc.vector
        ):
            return desc.family, None
        shape = shape_of(desc.prepared)
        if shape is None:
            return desc.family, None
        chosen, explore = self._tuning.family_for(shape, self._candidates(desc))
        name = chosen or "the selection's choice"
        if explore:
            desc.shape, desc.candidate = shape, chosen
            desc.explore_key, desc.replay_key = desc.replay_key, None
            return chosen, f"learning: trying {name}"
        return chosen, f"learned: {name} measured fastest"

    def _candidates(self, desc):
        """The candidates a call's shape explores, as a function that prices them
        (:func:`~wacoll.mpi.learning.explored`: the cost model ranks the families,
        the same on every rank), called by learning only for a shape it has not
        seen: a loop over many counts of a size class prices them once."""

        def priced():
            return self._dispatch.explored(desc.selection_call(self.Get_size()))

        return priced

    @property
    def tuning(self) -> list[dict[str, Any]]:
        """What this communicator learned (:mod:`wacoll.mpi.learning`): per call
        shape, the candidates, the median time of each one's calls (seconds, each
        call's run on the rank that took longest over it), their spread
        (half the interquartile range) and the one chosen; empty where nothing is
        learned (one cluster, a family forced, ``learn="off"``)."""
        return [] if self._tuning is None else list(self._tuning.table)

    def write_tuning(self, path: str | os.PathLike[str]) -> None:
        """Write the choices learned so far to ``path`` (collective: rank 0 writes;
        read back with ``WACOLL_TUNING``).

        The file is written whole or not at all. Where it cannot be written (no
        such folder, no permission, a full disk), every rank raises the same
        :class:`~wacoll.errors.TuningError`, naming ``path`` and the cause.
        """
        self._route.usable()
        self._settled()
        tuning = self._tuning
        from_rank_0(
            self._route.wire,
            lambda: tuning is None or tuning.dump(path),
            TuningError,
            f"writing the tuning file {path}",
        )


#: The learning modes (see :class:`Comm`'s ``learn``).
LEARN_MODES = ("auto", "on", "off")


def _read_scripts(path):
    """The plan scripts at ``path`` by ``(op, size)``, and their digest (each one's
    name and the CRC-32 of its text), which the ranks compare: the same plans
    everywhere, not just the same names. Raises the scripts' error."""
    from wacoll.plans import scripts

    found = {(plan.op, plan.size): plan for plan in scripts.load_all(path)}
    digest = tuple(
        (f"{op}/{size}", zlib.crc32(scripts.to_sexpr(plan).encode()))
        for (op, size), plan in sorted(found.items())
    )
    return found, digest


def _tuning_choices(wire, path):
    """The choices of the tuning file ``path`` (read on rank 0 and shared), None
    without one, or the TuningError every rank raises (whatever failed on rank 0)."""
    if not path:
        return None
    try:
        return from_rank_0(
            wire,
            lambda: read_tuning(path),
            TuningError,
            f"reading the tuning file {path}",
        )
    except WacollError as exc:
        return exc
