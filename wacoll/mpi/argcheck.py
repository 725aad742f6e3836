"""A communicator's cross-rank argument check, chosen once when it is made.

Every collective call is checked across ranks (unless ``check="off"``): each rank
contributes its signature digest and whether its own arguments are valid, and one
small all-reduce tells every rank whether to run the call or raise the same error
(:mod:`wacoll.mpi.agreement` says what is exchanged). Which all-reduce it is depends
only on the communicator, never on the call, so :class:`ArgumentCheck` decides it
once:

several clusters
    the topology-aware all-reduce of MagPIe's family, lowered once for this rank
    (one wide-area latency, like the call's own) and compiled for the runner, run
    *beside* the call (``"beside"``) or before any rank sends (``"first"``);
one cluster
    the communicator's blocking check (:func:`~wacoll.mpi.agreement.blocking_check`:
    shared memory on one node, a persistent all-reduce across nodes), run before a
    blocking call; a non-blocking call is published at its start and collected when
    it is waited for, beside its work: on one node in the node's ring of checks
    (:class:`~wacoll.mpi._runner.NodeRing`, shared memory again), across nodes in
    the library's ``Iallreduce``.

Every route of a call takes its check from here: the compiled calls
(:mod:`wacoll.mpi.plancall`, :mod:`wacoll.mpi.fastpath`) its compiled or blocking
form, the Python route :meth:`ArgumentCheck.of_call`, and a failed compiled call
:meth:`ArgumentCheck.failure`.

Examples
--------
>>> from mpi4py import MPI
>>> from wacoll import Topology
>>> from wacoll.mpi.agreement import Signature
>>> check = ArgumentCheck(MPI.COMM_SELF.Dup(), Topology.single(1), "beside")
>>> check.enabled, check.several, check.mode
(True, False, 'beside')
>>> check.of_call(None, Signature("bcast", 0, 4, "<f8"), tag=0, blocking=True).ok
True
>>> check.free()
"""

from __future__ import annotations

import functools

import numpy as np
from mpi4py import MPI

from wacoll.mpi._runner import STREAM_LOG, NodeGate, Verdicts
from wacoll.mpi.agreement import Check, NodeCheck, blocking_check, on_one_node
from wacoll.mpi.engine import wait_request
from wacoll.mpi.runner import compile_program, runner_ready, verdicts_ring
from wacoll.plans import Call, select
from wacoll.plans.builder import PlanBuilder
from wacoll.plans.rank import lower_for_rank, plan_for_rank
from wacoll.settings import setting

__all__ = [
    "ArgumentCheck",
    "CHECK_MODES",
    "DEFERRED_VERDICTS",
    "DIRECT_CHECK_LIMIT",
    "direct_check_plan",
]

#: The check modes (see :class:`wacoll.Comm`'s ``check``).
CHECK_MODES = ("beside", "first", "off")

#: Checks of blocking calls a rank may leave in flight on several clusters: a
#: replayed call returns once its own work is done, as the MPI library's would, its
#: verdict collected at a later call (a call read afresh waits for its own). The
#: checks travel batched, as a stream (:class:`~wacoll.mpi._runner.VerdictStream`,
#: whose log holds this many), up to :data:`DIRECT_CHECK_LIMIT` ranks. 0: every
#: call waits for its verdict. A failure learned after the call returned is raised
#: at the rank's next call, and stops the communicator
#: (:meth:`wacoll.mpi.route.Route.catch_up`).
DEFERRED_VERDICTS = STREAM_LOG

#: The largest communicator whose blocking calls return before their verdicts
#: (:data:`DEFERRED_VERDICTS`: every rank sends its entries of the stream to every
#: other, ``P - 1`` messages a rank a batch); larger ones check each call with
#: MagPIe's all-reduce, whose coordinators forward, so their calls wait for their
#: verdicts.
DIRECT_CHECK_LIMIT = 64


class ArgumentCheck:
    """The argument check of one communicator's calls.

    Parameters
    ----------
    control : mpi4py.MPI.Intracomm
        The communicator the checks travel on (never a call's own; collective: every
        rank makes its check).
    topology : wacoll.Topology
        The communicator's clusters: one, or several.
    mode : {"beside", "first", "off"}
    node_check : bool, optional
        Several clusters whose ranks all share one node: whether their blocking
        calls' verdicts travel in the node's shared memory
        (:class:`~wacoll.mpi._runner.NodeStream`) rather than as messages
        (:class:`~wacoll.mpi._runner.VerdictStream`). Default: unless
        ``WACOLL_NODE_CHECK=off``. The check is data moved between the ranks, not
        a part of the plan: where the library would move it through memory, a
        message only costs more (4 ranks on one machine in two declared clusters,
        a blocking call the library runs: 2.0-5.2 times the library's own where
        its verdict travels as messages). ``False`` keeps the messages, as across
        nodes (to test or measure the wide-area check on one machine).

    Attributes
    ----------
    mode : str
    enabled : bool
        Whether calls are checked (``mode != "off"``).
    several : bool
        Whether the communicator spans several clusters.
    first : bool
        Whether the check completes before the work (``"first"``).
    compiles : bool
        Several clusters, checked, compiled runner available: calls are checked by
        compiled code (in :attr:`verdicts`, or by :attr:`compiled`).
    blocking : NodeCheck or PersistentCheck or None
        One cluster, checked: the check of blocking calls.
    spare : list
        Runners of the compiled check whose Python-route call is over, for the next
        (each call in flight has its own).
    abandoned : list
        Checks given up while they ran (an interrupt, an MPI error): kept, with their
        runners and buffers, for as long as the communicator lives.
    verdicts : wacoll.mpi._runner.Verdicts or None
        Several clusters, checked beside, compiled runner available: the checks of
        blocking calls, whatever their route, so that every rank numbers them
        alike. With :data:`DEFERRED_VERDICTS` above 0, up to that many in flight
        (a blocking call returns when its work is done, its verdict collected
        later); calls with nothing to move fold into the next check either way.
    """

    def __init__(self, control, topology, mode, node_check=None):
        self.control = control
        self.topology = topology
        self.mode = mode
        self.enabled = mode != "off"
        self.several = topology.nclusters > 1
        self.first = mode == "first"
        deferred = DEFERRED_VERDICTS
        self.blocking = None
        self._program = self._tables = self._compiled = None
        self._ring_tables = None
        self.verdicts = None
        self.spare, self.abandoned = [], []
        self.sent = []  # this rank's errors and notices sent (until delivered)
        self._returned_here = False  # (what this rank's last notice said)
        #: Several clusters, checked, compiled runner available: the compiled
        #: all-reduce exists (made when first asked for: :attr:`compiled`).
        self.compiles = self.several and self.enabled and runner_ready()
        #: Declared clusters on one node: the shared window of their verdicts'
        #: lines (a :class:`~wacoll.mpi.agreement.NodeCheck`), else None.
        self.node = None
        if self.compiles and not self.first:
            rank = control.Get_rank()
            if node_check is None:
                node_check = setting("WACOLL_NODE_CHECK") != "off"
            if node_check and on_one_node(control):  # (collective, alike everywhere)
                self.node = NodeCheck(control, streams=True)
            direct = topology.size <= DIRECT_CHECK_LIMIT or self.node is not None
            defer = deferred > 0 and direct
            # calls that wait for their verdicts check in a ring of one runner:
            # the direct check, or MagPIe's beyond its limit
            self._ring_tables = (
                None
                if defer or self.node is not None
                else compile_program(
                    lower_for_rank(direct_check_plan(topology), rank),
                    np.dtype(np.int64),
                    "max",
                )
                if direct
                else self.tables
            )
            ring_comm = MPI.Intracomm(MPI.Intracomm.Dup(control))
            self.verdicts = verdicts_ring(
                self._ring_tables,
                ring_comm,
                defer=defer,
                regions=None if self.node is None else self.node.stream_regions,
            )
        elif self.enabled and not self.several:
            # blocking calls check first (shared memory on one node)
            self.blocking = blocking_check(control)

    # The wide-area all-reduce of the checks that do not travel in the verdict
    # stream (non-blocking calls, ``check="first"``, the Python route) is built
    # when one first needs it: a communicator whose calls all check in the stream
    # never selects, lowers or compiles it. (Every rank builds it alone, from the
    # proof cache or proving it: no message.)

    @property
    def program(self):
        """Several clusters: this rank's lowered check all-reduce (MagPIe's, of
        four int64 words under MAX); None on one cluster."""
        if self._program is None and self.several:
            selection = select(
                Call("allreduce", count=4, itemsize=8, level="commutative"),
                self.topology,
                family="magpie",
            )
            rank = self.control.Get_rank()
            self._program = lower_for_rank(
                plan_for_rank(selection, self.topology, rank), rank
            )
        return self._program

    @property
    def tables(self):
        """:attr:`program` compiled (:attr:`compiles`), else None."""
        if self._tables is None and self.compiles:
            self._tables = compile_program(self.program, np.dtype(np.int64), "max")
        return self._tables

    @property
    def compiled(self):
        """Several clusters, checked, compiled runner available: a runner of
        :attr:`tables` over the control communicator; else None."""
        if self._compiled is None and self.compiles:
            self._compiled = self.tables.runner(self.control)
        return self._compiled

    def of_call(self, error, sig, *, tag, blocking):
        """The :class:`~wacoll.mpi.agreement.Check` of one call on the Python route
        (``error``: this rank's fault with its arguments, or None), or None when
        calls are not checked. A blocking call on one cluster completes it now, in
        the blocking check; on several clusters it runs in the compiled runner, as
        a compiled call's check does (one of :attr:`spare` runners, or a new one)."""
        if not self.enabled:
            return None
        if blocking and self.verdicts is not None:  # (settled by the caller)
            ring = self.verdicts
            slot, runner, tag, folded = ring.reserve()
            check = Check(
                self.control,
                error,
                sig,
                runner=runner,
                pool=_Reserved(ring, slot, self.abandoned),
                tag=tag,
                folded=folded,
            )
            check.errors_at = (ring.comm, error_tag(ring.comm, tag))
            if error is not None:
                self._send_error(error, *check.errors_at)
            return check
        if self.compiles:
            runner = self.spare.pop() if self.spare else self.tables.runner(self.control)
            return Check(self.control, error, sig, runner=runner, pool=self, tag=tag)
        return Check(
            self.control,
            error,
            sig,
            program=self.program,
            tag=tag,
            persistent=self.blocking if blocking else None,
            ring=None if blocking else self.node_ring,
        )

    @functools.cached_property
    def node_gate(self):
        """Declared clusters on one node: the check of a blocking call the library
        runs where every rank receives (:class:`~wacoll.mpi._runner.NodeGate`,
        in :attr:`verdicts`); else None."""
        return NodeGate(self) if self.node is not None else None

    @property
    def node_ring(self):
        """One node, checked: the ring of its non-blocking calls' checks
        (:class:`~wacoll.mpi._runner.NodeRing`); else None."""
        return getattr(self.blocking, "ring", None)

    @property
    def checks_started(self) -> bool:
        """Whether a compiled non-blocking call can be checked here
        (:meth:`of_started`)."""
        return self.enabled and not self.first and (not self.several or self.compiles)

    def of_started(self):
        """What a compiled non-blocking call's check is made of, for each call in
        flight its own: ``(runner, start, ring)``, a fresh runner of the compiled
        check on several clusters; on one node the node's ring
        (:attr:`node_ring`); on one cluster across nodes ``start(flags)``, which
        starts the library's ``Iallreduce`` in place (MAX) and returns its request.
        None when calls are not checked, or the compiled check is missing (the
        Python route checks them)."""
        if not self.enabled or self.first:
            return None
        if self.several:
            return (
                (self.tables.runner(self.control), None, None) if self.compiles else None
            )
        ring = self.node_ring
        if ring is not None:
            return None, None, ring
        return None, functools.partial(_iallreduce_max, self.control), None

    def gated(self, blocking):
        """Whether the call's work waits for its check: ``"first"``, and a blocking
        call on one cluster (whose check has no latency to hide)."""
        return self.first or (blocking and not self.several)

    def failure(self, sig, flags, exchange=True, tag=None):
        """The error every rank raises after a compiled or replayed call's check
        failed (``flags``: what the check all-reduced; None: the blocking check's).
        ``exchange=False`` for a non-blocking call, or a verdict collected after
        the call returned: no collective, the error named by the flags alone, or
        for a verdict of the ring (its check's ``tag``) the faulty rank's own, as
        it sent it (see :meth:`~wacoll.mpi.agreement.Check.failure`)."""
        if flags is None:
            flags = self.blocking.flags.copy()
        check = Check.completed(self.control, sig, flags)
        if tag is not None:
            comm = self.verdicts.comm
            check.errors_at = (comm, error_tag(comm, tag))
        return check.failure(exchange)

    def _send_error(self, error, comm, tag):
        """Send this rank's own error with its check to every other rank: whoever
        learns of the failure later receives it without a collective, and raises
        what this rank raises."""
        from wacoll.mpi.agreement import portable_error

        data = portable_error(error)
        me = comm.Get_rank()
        self.sent = [r for r in self.sent if not r.Test()]
        self.sent += [
            comm.isend(data, dest=r, tag=tag) for r in range(comm.Get_size()) if r != me
        ]

    def notify(self, returned):
        """After a failed verdict (each rank once, where it learns of it): tell
        every other rank whether this rank's failed call had ``returned`` before
        its verdict, so that it learns of the failure at a later call
        (:meth:`returned_anywhere` collects what every rank says)."""
        comm = self.verdicts.comm
        note = np.array([1 if returned else 0], np.int8)
        me, tag = comm.Get_rank(), notice_tag(comm)
        self._returned_here = bool(returned)
        self.sent = [r for r in self.sent if not r.Test()]
        self.sent += [
            comm.Isend(note, dest=r, tag=tag) for r in range(comm.Get_size()) if r != me
        ]

    def returned_anywhere(self):
        """Whether, on any rank, the call whose verdict failed last had returned
        before its verdict (every rank's :meth:`notify`, waited for: at this rank's
        next call on the communicator, which every rank makes)."""
        comm = self.verdicts.comm
        me, tag = comm.Get_rank(), notice_tag(comm)
        others = [r for r in range(comm.Get_size()) if r != me]
        notes = np.zeros(len(others), np.int8)
        for i, r in enumerate(others):
            wait_request(comm.Irecv(notes[i : i + 1], source=r, tag=tag))
        return self._returned_here or bool(notes.any())

    def renew(self):
        """After a failed verdict (every rank once, each when it learns of it; no
        collective): the checks still in flight are given up and kept, and calls
        check in a fresh ring from now on, whose tags are not the old ring's."""
        old = self.verdicts
        if old is None:
            return
        old.abandon()
        self.abandoned.append(old)
        self.verdicts = verdicts_ring(
            self._ring_tables,
            old.comm,
            after=old,
            defer=old.defer,
            regions=None if self.node is None else self.node.stream_regions,
        )

    def free(self):
        """Release the blocking check's resources (collective; the verdicts in
        flight are settled first by the caller)."""
        if self.blocking is not None:
            self.blocking.free()
            self.blocking = None
        if self.verdicts is not None:
            self.verdicts.close()  # (its last messages received)
            if not any(isinstance(a, Verdicts) for a in self.abandoned):
                self.verdicts.comm.Free()
            # else: the checks given up after a failed verdict may still receive
            # messages, which the MPI library refuses to free a communicator with:
            # it is kept (with them, in abandoned), as a retired wire is
            self.verdicts = None
        if self.node is not None:
            self.node.free()
            self.node = None


def direct_check_plan(topology):
    """The check all-reduce of a ring whose calls return before their verdicts
    (MAX of four int64, level ``"commutative"``): every rank sends its flags to
    every other rank at once and combines what it receives.

    No rank forwards anything, so a rank's part of a check is over once its sends
    are posted: a rank that returned from its call, and went on to the
    application's own MPI calls, leaves no peer waiting for it (MagPIe's all-reduce,
    one wide-area latency too, has coordinators that forward). Every rank combines
    every rank's flags, so every rank reaches the same verdict. ``P - 1`` messages
    a rank, hence :data:`DIRECT_CHECK_LIMIT`.

    Examples
    --------
    >>> from wacoll import Topology
    >>> report = direct_check_plan(Topology.from_sizes([2, 2])).prove()
    >>> report.messages, report.level
    (12, 'commutative')
    """
    b = PlanBuilder("allreduce", topology, count=4, level="commutative", itemsize=8)
    size, blocks = b.size, b.all_blocks
    for r in range(size):  # every send first: none waits for a receive
        b.copy(r, blocks, "in", "out")
        for k in range(1, size):
            b.send(r, (r + k) % size, blocks, "in")
    for r in range(size):
        for k in range(1, size):
            b.recv_combine(r, (r - k) % size, blocks, "out")
    return b.build(family="check", algorithm="direct")


def error_tag(comm, tag):
    """The tag of a faulty rank's error sent with its check (whose messages carry
    ``tag`` on ``comm``): in the upper half of the tags ``comm`` allows, which the
    checks' own never reach."""
    return (comm.Get_attr(MPI.TAG_UB) or 32767) // 2 + tag


def notice_tag(comm):
    """The tag of the notices of :meth:`ArgumentCheck.notify`: the largest
    ``comm`` allows, above every check's (:func:`verdicts_ring`) and every error's
    (:func:`error_tag`)."""
    return comm.Get_attr(MPI.TAG_UB) or 32767


class _Reserved:
    """Where a Python-route check's runner goes back to: its slot of the ring
    (:meth:`~wacoll.mpi._runner.Verdicts.release`) once complete, or with the
    whole check to ``abandoned`` when given up (see
    :class:`~wacoll.mpi.agreement.Check`'s ``pool``)."""

    __slots__ = ("ring", "slot", "abandoned")

    def __init__(self, ring, slot, abandoned):
        self.ring, self.slot, self.abandoned = ring, slot, abandoned

    @property
    def spare(self):
        return self

    def append(self, runner):
        self.ring.release(self.slot)


def _iallreduce_max(control, flags):
    """Start the MAX all-reduce of a check's flags, in place, on ``control``."""
    return control.Iallreduce(MPI.IN_PLACE, flags, op=MPI.MAX)
