"""The selection policy: which plan ``wacoll.Comm`` runs for a call.

One public function, :func:`select`, decides for a collective call (a :class:`Call`:
operation, sizes, root, element size, level) on a topology which family builds its
plan and with which options; :meth:`Selection.build` builds and proves that plan.
``wacoll.Comm``, the ``wacoll plan`` command, the demo and the benchmarks all call it,
so "the plan a user runs" is defined in this one place.

The default choice (no family forced):

- several clusters: the **magpie** family (MagPIe's wide-area optimal algorithms);
  long vectors are priced by the simulator against more families
  (:attr:`Policy.priced_from`), every candidate with what a call of it costs on
  this machine (:mod:`wacoll.plans.callcost`, fitted by a benchmark); asked to
  (:attr:`Policy.library_priced`), against the MPI library's own collective too;
- one cluster: the MPI library's own collective (the pseudo-family **native**: the
  network is uniform, wacoll's plans have nothing to add, and the library's
  collectives are tuned C), unless the call is a reduction at level ``strict``,
  which the MPI library does not promise; then the **mpich** family (MPICH 1.1's
  single-level algorithms, which follow the canonical expression).

A strict float SUM can also run on exact accumulators (*reproducible* arithmetic,
:mod:`wacoll._kernels.repro`): each element becomes an accumulator, which travels
in :attr:`Call.accumulator_itemsize` bytes (packed,
:mod:`wacoll._kernels.repro_wire`: 16 for a float64 partial sum of up to 128
values, 2x the data), whose combination is exact in any order, so the plan only needs the commutative
level and may be wide-area optimal. The two arithmetics give different bits (the
canonical expression's rounding errors, or the correctly rounded sum of the
accumulators), so which one a call takes decides its result. :attr:`Policy.arithmetic`:

``"auto"`` (default)
    By the call alone, never the topology: reproducible for vectors of fewer than
    :attr:`Policy.reproducible_below` bytes of values, plain above. So level strict
    keeps its promise (the same bits whatever the topology, root, family or layout)
    while small calls, whose time on a grid is wide-area latency, take one
    wide-area hop. The default threshold, 4 KiB, keeps the calls where the
    simulator predicts accumulators to win on MagPIe's 10 ms, 1 MB/s grids of 4
    clusters (4x1 to 4x4 ranks: a 1 KiB allreduce 33.1 ms plain, 12.1 ms
    reproducible on 4x2; a 4 KiB reduce 28.2 vs 18.2 ms; they win up to 32 KiB
    there), and costs little where they lose: a reduce on 2 clusters, 14.1 vs
    18.2 ms at 4 KiB.
``"fastest"``
    Per call and topology: builds both plans, predicts each one's time with the
    simulator (:func:`wacoll.plans.sim.simulate`, the topology's link model) plus
    the accumulators' conversion and combination work (:func:`predicted_time`), and
    takes the faster. Results are then reproducible for one topology, but two
    topologies that choose differently give different bits.
``"plain"``, ``"reproducible"``
    Force one.

The chosen arithmetic is the selection's (and the built plan's) ``arithmetic``.

A family forced for the call (``family=``) must have a plan for the operation, else
:class:`~wacoll.errors.PlanError`; a communicator-wide family (``comm_family=``) that
has none falls back to the default. Options given for the call must be options of
the chosen builder; communicator-wide options apply where the builder takes them.
Vectors are cut into segments of about :attr:`Policy.segment_size` bytes (at most
:attr:`Policy.max_segments`) that pipeline through the plan's trees.

Examples
--------
>>> from wacoll import Topology
>>> grid = Topology.from_sizes([2, 2, 2, 2])
>>> select(Call("bcast", count=8192, itemsize=8, root=0), grid)  # doctest: +NORMALIZE_WHITESPACE
Selection(op='bcast', family='magpie', options=(('count', 8192), ('itemsize', 8),
          ('root', 0), ('segments', 1)), arithmetic='plain')
>>> one = Topology.single(4)
>>> select(Call("allreduce", count=1 << 20, itemsize=8, level="commutative"), one).family
'native'
>>> select(Call("bcast", count=1 << 20, itemsize=8), one, comm_family="mpich").family
'mpich'
>>> plan = select(Call("reduce", count=4, itemsize=8, level="associative"), grid).build(grid)
>>> plan.family, plan.prove().wide_area_messages
('magpie', 3)

A strict 1 KiB float64 SUM takes the accumulators (on a grid, MagPIe's coordinator
plan); a 1 MiB one keeps the canonical order:

>>> small = Call("allreduce", count=128, itemsize=8, level="strict",
...              accumulator_itemsize=16)
>>> chosen = select(small, grid)
>>> chosen.family, chosen.arithmetic
('magpie', 'reproducible')
>>> report = chosen.build(grid).prove()
>>> report.level, report.arithmetic, report.max_wide_area_hops
('strict', 'reproducible', 1)
>>> big = dataclasses.replace(small, count=1 << 17)
>>> select(big, one).arithmetic
'plain'
>>> fastest = Policy(arithmetic="fastest")
>>> [select(c, grid, policy=fastest).arithmetic for c in (small, big)]
['reproducible', 'plain']
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import networkx as nx
import numpy as np

from wacoll.errors import PlanError
from wacoll.plans.callcost import MEASURED, CallCosts
from wacoll.plans.composite import HAN, HAN_OPS, compose
from wacoll.plans.families import build, builders
from wacoll.plans.families import options as family_options
from wacoll.plans.halving import largest_power_of_two
from wacoll.plans.operations import ARITHMETICS, LEVELS, OPERATIONS, block_counts, spec
from wacoll.trees.frozen import freeze_tree

__all__ = [
    "Call",
    "Policy",
    "Selection",
    "select",
    "adapt_script",
    "DEFAULT_POLICY",
    "NATIVE",
    "HAN",
    "SCRIPTS",
    "PSEUDO_FAMILIES",
    "HIERARCHICAL_PAIRS",
    "PRICED_FAMILIES",
    "PRICED_AFTER",
    "PRICE_TIE",
    "COMBINE_RATE",
    "LIBRARY_MODEL",
    "predicted_time",
    "plain_options",
]

#: The pseudo-family that hands a call to the MPI library's own collective.
NATIVE = "native"
#: The pseudo-family of a communicator's loaded plan scripts (``family="scripts"``).
SCRIPTS = "scripts"
#: The names a communicator or a call may give as a family besides the plan families
#: of :func:`wacoll.plans.builders`.
PSEUDO_FAMILIES = (NATIVE, HAN, SCRIPTS)
#: The hierarchical family's candidates (:attr:`Policy.hierarchical_from`): MPICH
#: 4's choice inside clusters and between coordinators, and MagPIe's trees inside
#: with Matsuda's multi-sender algorithms between.
HIERARCHICAL_PAIRS = (
    {"inner": "modern", "outer": "modern"},
    {"inner": "magpie", "outer": "gridmpi"},
)
#: The families a long vector's default is priced against
#: (:attr:`Policy.priced_from`), in the order that breaks a tie; MagPIe's comes after
#: them.
PRICED_FAMILIES = ("modern",)
#: Priced too, after MagPIe's, as ``(family, options)``: Matsuda's multi-sender
#: algorithms, Swing's algorithms (De Sensi et al. 2024: on MagPIe's grid a 1 MiB
#: allreduce measured 0.51x MPICH's and 0.76x MagPIe's, predicted so) and MagPIe's
#: trees inside clusters with gridmpi between coordinators (on 2 x 4 ranks over
#: 5 ms, 100 MB/s the fastest measured allreduce at 8 B, 64 KiB and 1 MiB: 0.71x
#: MPICH's at 1 MiB; benchmarks/results/recent*.txt). A candidate without a plan
#: for the call, or that cannot keep its level, is left out.
PRICED_AFTER = (
    ("gridmpi", ()),
    ("recent", (("algorithm", "swing"),)),
    ("hierarchical", (("inner", "magpie"), ("outer", "gridmpi"))),
)
#: Predicted times within this share of the fastest are a tie (the simulator sees
#: no memory traffic nor combining work).
PRICE_TIE = 0.03
#: Bytes per second of combining and copying work in a priced selection (a memory
#: bound vector add on one core; a plan that combines half the vector per rank
#: beats one that combines all of it where the links are as fast as memory).
COMBINE_RATE = 2e9
#: The family whose plan models the MPI library's own collective where the selection
#: prices it (:attr:`Policy.library_priced`): today's MPICH and Open MPI algorithms.
LIBRARY_MODEL = "modern"
#: The options of the ``"han"`` pseudo-family (:func:`wacoll.plans.composite.compose`).
HAN_OPTIONS = ("root", "count", "itemsize", "level", "segments", "inter")


@dataclass(frozen=True)
class Call:
    """One collective call as the plan world sees it.

    Attributes
    ----------
    op : str
        The operation (a key of :data:`wacoll.plans.OPERATIONS`).
    count : int, optional
        Elements of the vector (bcast, reductions) or per rank (scatter, gather, ...).
    counts : tuple, optional
        Per-rank counts of the v-variants (a matrix for alltoallv).
    root : int, optional
        The root of a rooted operation.
    itemsize : int
        Bytes per element.
    level : str, optional
        The reduction level the plan must keep.
    accumulator_itemsize : int
        Bytes of one element's exact accumulator on the wire when the call may run
        on reproducible arithmetic (a float SUM:
        :func:`wacoll._kernels.repro_wire.wire_bytes`), else 0.
    user_op : bool
        The reduction's operator is the application's own. The policy then keeps
        plans that cut the vector no finer than its segments (the halving
        algorithms cut it per rank), as MPI libraries keep such algorithms for
        their predefined operators: MPI lets them split at element boundaries, but
        an operator written for whole groups of elements would break.
    """

    op: str
    count: int | None = None
    counts: tuple | None = None
    root: int | None = None
    itemsize: int = 1
    level: str | None = None
    accumulator_itemsize: int = 0
    user_op: bool = False

    def __post_init__(self):
        if self.op not in OPERATIONS:
            raise PlanError(
                f"unknown operation {self.op!r}; known: {', '.join(OPERATIONS)}"
            )
        if self.level is not None and self.level not in LEVELS:
            raise PlanError(
                f"level must be one of {', '.join(LEVELS)}, got {self.level!r}"
            )
        a = self.accumulator_itemsize
        if isinstance(a, bool) or not isinstance(a, int) or a < 0:
            raise PlanError(f"accumulator_itemsize must be an integer >= 0, got {a!r}")

    @property
    def nbytes(self) -> int | None:
        """Bytes of the vector (or per-rank block), when the call has one count."""
        return None if self.count is None else self.count * self.itemsize


#: The values of :attr:`Policy.arithmetic`.
_CHOICES = ("auto", "fastest") + ARITHMETICS


@dataclass(frozen=True)
class Policy:
    """The tunables of the default choice; one per communicator.

    Attributes
    ----------
    threshold : int
        MagPIe's short/long message threshold for non-associative reductions (bytes).
    segment_size : int
        Cut vectors into segments of about this many bytes (0: never cut).
    max_segments : int
        The most segments a vector is cut into: a few segments give most of the
        pipelining; many only add messages.
    arithmetic : {"auto", "fastest", "plain", "reproducible"}
        For a strict call that can run on exact accumulators: choose by the call's
        size, or by predicted time on the topology, or force one arithmetic (see
        the module docstring).
    reproducible_below : int
        ``"auto"``: vectors of fewer bytes (of values) run on accumulators.
    convert_time : float
        Seconds per float64 element to convert a contribution to an accumulator
        and a result back (scaled by value size for the other types).
    combine_time : float
        Seconds per float64 element of one accumulator combination with the packing
        and unpacking of its message, counted once per level of a binary tree over
        the ranks (the critical path).
    stage_time : float
        Seconds per call of staging the accumulators (Python and allocation).
    halving_from : int
        A strict reduce or allreduce on plain arithmetic takes the mpich family's
        ``"halving"`` algorithm (a reduce-scatter whose every block is in the
        canonical order, :mod:`wacoll.plans.halving`, then a gather to the root or
        an allgather) for vectors of at least this
        many bytes, and on one cluster of a power of two of ranks for every vector
        of at least one element per owner; below, the binomial reduce and
        broadcast (one cluster) or MagPIe's canonical plan (several). The
        simulator predicts the halving plan on one cluster (10 us, 1 GB/s) at
        0.39-0.57x the binomial one from 64 KiB (2, 4 and 8 ranks), 0.83-0.89x on
        3 ranks and 1.4-1.5x for 8 B to 1 KiB on 3 ranks; on MagPIe's 4 x 2 grid
        (10 ms, 1 MB/s) at 138 ms against MagPIe's 227 ms for 64 KiB, about equal
        at 8 KiB, and 1.26x for 1 KiB. The halving reduce: 0.25-0.42x the
        binomial one from 64 KiB on 4 and 8 ranks, 0.73-0.78x on 3, 0.42x
        MagPIe's on the grid at 64 KiB.
    hierarchical_from : int
        On several clusters, a bcast, allreduce or allgather of at least this many
        bytes (a rank's, for the allgather),
        whose default is the magpie family, is priced by the simulator
        (:func:`predicted_time`) against the hierarchical family's pairs of
        :data:`HIERARCHICAL_PAIRS`, and the fastest runs (0, the default: never).
        Each candidate is built and proved: such a selection took 6-28 ms on 8
        ranks and 26-121 ms on 64 (4 us without), once per call shape, so the
        default leaves it off. The simulator predicts, for 1 MiB on 8 clusters of
        8 ranks joined by 0.5 ms, 1.25 GB/s links, 8.6 ms for the allreduce
        (Rabenseifner's inside and between coordinators) against MagPIe's 16.1
        ms, and 7.2 against 10.5 ms for the bcast (van de Geijn's scatter and
        ring); on MagPIe's 10 ms, 1 MB/s links 1069 against 1102 ms for the
        allreduce (Matsuda's between coordinators), and MagPIe's bcast.
    priced_from : int
        On several clusters of at most :attr:`priced_up_to` ranks, a bcast,
        allreduce or allgather of at least this many bytes (a rank's, for the
        allgather; 0: never), whose default is the
        magpie family, is priced by the simulator (with combining work at
        :data:`COMBINE_RATE`) against the families that move long vectors well:
        the modern family's choice (:data:`PRICED_FAMILIES`, as MPICH's), then
        Matsuda's multi-sender ``gridmpi``, Swing's algorithms and MagPIe's trees
        under gridmpi (:data:`PRICED_AFTER`); the fastest runs, and within
        :data:`PRICE_TIE` of it the earliest of the modern family, MagPIe's and
        :data:`PRICED_AFTER`. On 2 ranks as 2 declared clusters a 2 GiB
        allreduce by the modern family's Rabenseifner algorithm took 0.70 s with
        10 MiB of scratch; MagPIe's 1.2-5.8 s with 2 GiB; the MPI library's 1.9 s
        with 1 GiB. Each candidate is built and proved, once per call shape.
    priced_up_to : int
        The largest number of ranks :attr:`priced_from` and
        :attr:`library_priced` apply to (pricing builds every candidate).
    library_priced : bool
        On several clusters of at most :attr:`priced_up_to` ranks, the default
        plan of a call with a count (MagPIe's, or the fastest priced) is priced
        against the MPI library's own collective, predicted as the
        :data:`LIBRARY_MODEL` family's plan; the library runs the call where it
        is predicted faster by more than :data:`PRICE_TIE` (a caller that needs a
        plan, ``allow_native=False``, is not offered it). Off by default: the
        prediction misjudged the library where the links cost least. With 2
        ranks on each of 2 clusters of one machine (links measured at a few us)
        it predicted the library's 8 B allreduce at 8.6 us against MagPIe's 13.2,
        while measured with 8 ranks the plan took 44 us and the library 59
        (``benchmarks/results/percall.txt``): there the per-call costs of ranks
        sharing cores decide, which the simulator does not see. The default's
        measurement of repeated calls (:mod:`wacoll.mpi.learning`) runs the
        library's collective where it measures faster instead.
    call_costs : CallCosts
        What a call costs on this machine besides its messages, added to every
        candidate's simulated time (:mod:`wacoll.plans.callcost`; default
        :data:`~wacoll.plans.callcost.MEASURED`).
    """

    threshold: int = 512
    segment_size: int = 262144
    max_segments: int = 8
    arithmetic: str = "auto"
    reproducible_below: int = 4096
    convert_time: float = 5e-9
    combine_time: float = 1.5e-8
    stage_time: float = 3e-5
    halving_from: int = 65536
    hierarchical_from: int = 0
    priced_from: int = 65536
    priced_up_to: int = 256
    library_priced: bool = False
    call_costs: CallCosts = MEASURED

    def __post_init__(self):
        for name in (
            "threshold",
            "segment_size",
            "max_segments",
            "reproducible_below",
            "halving_from",
            "hierarchical_from",
            "priced_from",
            "priced_up_to",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise PlanError(f"{name} must be an integer >= 0, got {value!r}")
        if self.arithmetic not in _CHOICES:
            raise PlanError(
                f"arithmetic must be one of {', '.join(_CHOICES)}, "
                f"got {self.arithmetic!r}"
            )
        for name in ("convert_time", "combine_time", "stage_time"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not value >= 0
            ):
                raise PlanError(f"{name} must be a number of seconds >= 0, got {value!r}")
        if not isinstance(self.library_priced, bool):
            raise PlanError(
                f"library_priced must be True or False, got {self.library_priced!r}"
            )
        if not isinstance(self.call_costs, CallCosts):
            raise PlanError(
                f"call_costs must be a wacoll.plans.callcost.CallCosts, "
                f"got {self.call_costs!r}"
            )


#: The policy wacoll.Comm uses unless told otherwise.
DEFAULT_POLICY = Policy()


@dataclass(frozen=True)
class Selection:
    """The family and builder options chosen for a call.

    Attributes
    ----------
    op, family : str
    options : tuple
        The builder's keyword arguments as sorted ``(name, value)`` pairs.
    arithmetic : str
        ``"plain"``, or ``"reproducible"``: the builder's options then say level
        ``"commutative"`` and the accumulator's itemsize, and :meth:`build` marks
        the plan as a strict plan on reproducible arithmetic.
    """

    op: str
    family: str
    options: tuple
    arithmetic: str = "plain"
    #: Why the policy chose it, in words (a forced family, the default's rule, or
    #: the predicted times of the candidates it was priced against); not part of
    #: what the selection is.
    reason: str = dataclasses.field(default="", compare=False, repr=False)

    @property
    def native(self) -> bool:
        """Whether the MPI library's own collective runs the call (no plan)."""
        return self.family == NATIVE

    def build(self, topology):
        """Build this plan on ``topology`` and prove it (:meth:`Plan.prove`)."""
        if self.native:
            raise PlanError(
                "the native family has no plan: the MPI library runs the call"
            )
        if self.family == HAN:
            composite = compose(self.op, topology, **dict(self.options))
            composite.prove()
            return composite
        plan = self.with_arithmetic(
            build(self.op, topology, self.family, **dict(self.options))
        )
        plan.prove()
        return plan

    def with_arithmetic(self, plan):
        """``plan`` (a whole plan or one rank's part of it, as the family built it)
        marked with this selection's arithmetic: on reproducible arithmetic the plan
        keeps the strict level with a commutative schedule."""
        if self.arithmetic == "reproducible":
            return dataclasses.replace(plan, level="strict", arithmetic="reproducible")
        return plan


def _default_family(call: Call, topology, policy: Policy):
    """The default family, its extra options and why (see the module docstring)."""
    if (
        call.level == "strict"
        and call.op in ("reduce", "allreduce")
        and _halving_pays(call, topology, policy)
    ):
        return (
            "mpich",
            {"algorithm": "halving"},
            "a strict reduction long enough for recursive halving",
        )
    if topology.nclusters > 1:
        return "magpie", {}, "several clusters: MagPIe's wide-area optimal plan"
    if call.level != "strict":
        return NATIVE, {}, "one cluster: the MPI library's own collective"
    return "mpich", {}, "level 'strict' on one cluster: MPICH's canonical order"


def _halving_pays(call: Call, topology, policy: Policy) -> bool:
    """Whether a strict reduce or allreduce takes the halving algorithm (see
    :attr:`Policy.halving_from`)."""
    owners = largest_power_of_two(topology.size)
    if topology.size < 2 or not call.count or call.count < owners or call.user_op:
        return False
    if owners == topology.size and topology.nclusters == 1:
        return True
    assert call.nbytes is not None  # call.count is set
    return call.nbytes >= policy.halving_from


def select(
    call: Call,
    topology,
    *,
    family=None,
    options=None,
    comm_family=None,
    comm_options=None,
    policy: Policy = DEFAULT_POLICY,
    allow_native=True,
) -> Selection:
    """The plan ``wacoll.Comm`` runs for ``call`` on ``topology``.

    Parameters
    ----------
    call : Call
    topology : Topology
    family : str, optional
        A family forced for this call; it must have a plan for the operation.
    options : mapping, optional
        Builder options given for this call; each must be an option of the builder.
    comm_family : str, optional
        The communicator's family; used where it has a plan for the operation.
    comm_options : mapping, optional
        The communicator's builder options; applied where the builder takes them.
    policy : Policy
    allow_native : bool
        Whether the default may hand the call to the MPI library (a caller that
        needs a plan, such as the object collectives, says no).

    Returns
    -------
    Selection
        With ``arithmetic="reproducible"`` when a strict float SUM is better run on
        exact accumulators (see the module docstring).

    Raises
    ------
    PlanError
        An unknown family, a forced family without this operation, or an option the
        chosen builder does not take.
    """
    kwargs = dict(
        family=family,
        options=options,
        comm_family=comm_family,
        comm_options=comm_options,
        policy=policy,
    )
    if not _reproducible_candidate(call, family, comm_family, policy):
        return _select(call, topology, allow_native=allow_native, **kwargs)
    acc_call = dataclasses.replace(
        call, level="commutative", itemsize=call.accumulator_itemsize
    )
    acc_kwargs = dict(kwargs, comm_family=None) if comm_family == HAN else kwargs
    repro = dataclasses.replace(
        _select(acc_call, topology, allow_native=False, **acc_kwargs),
        arithmetic="reproducible",
    )
    if policy.arithmetic == "reproducible":
        return repro
    plain = _select(call, topology, allow_native=allow_native, **kwargs)
    if policy.arithmetic == "auto":
        return repro if _vector_bytes(call) < policy.reproducible_below else plain
    try:
        plain_time = predicted_time(plain, topology, call, policy)
    except PlanError:  # e.g. a forced family that cannot keep 'strict' plainly
        return repro
    if predicted_time(repro, topology, call, policy) < plain_time:
        return repro
    return plain


def _reproducible_candidate(call, family, comm_family, policy):
    """Whether ``call`` may run on exact accumulators under ``policy``."""
    if (
        policy.arithmetic == "plain"
        or call.level != "strict"
        or not call.accumulator_itemsize
        or spec(call.op).kind != "reduction"
    ):
        return False
    # the MPI library's collectives (native, and han's library phases) know no
    # accumulators; a communicator-wide han leaves such calls to the default
    if family is not None:
        return family not in (NATIVE, HAN)
    return comm_family != NATIVE


def predicted_time(
    selection, topology, call, policy=DEFAULT_POLICY, compute_rate=None, *, checked=True
):
    """The predicted seconds of ``selection``'s plan for ``call`` on ``topology``.

    The simulator's completion time (:func:`wacoll.plans.sim.simulate` with the
    topology's :class:`~wacoll.plans.sim.LinkModel`), plus, for reproducible
    arithmetic, the work on accumulators the simulator does not see: converting
    each element there and back, and one combination per level of a binary tree
    over the ranks, and a fixed staging cost per call. ``compute_rate`` (bytes per
    second) charges the copies and combinations (default: free). Every message
    costs its sender, and every call its caller, what ``policy.call_costs`` says
    (:mod:`wacoll.plans.callcost`). The MPI library's collective (a ``native``
    selection) is predicted as the :data:`LIBRARY_MODEL` family's plan for the
    call with the library's call costs. ``checked=False`` prices the plan without
    proving it first (a ranking of candidates whose plan is proved before it runs:
    half of a price's cost is the proof).

    Examples
    --------
    >>> from wacoll import Topology
    >>> grid = Topology.from_sizes([2, 2, 2, 2])
    >>> call = Call("reduce", count=128, itemsize=8, root=0, level="strict",
    ...             accumulator_itemsize=16)
    >>> plain = select(call, grid, policy=Policy(arithmetic="plain"))
    >>> repro = select(call, grid, policy=Policy(arithmetic="reproducible"))
    >>> predicted_time(repro, grid, call) < predicted_time(plain, grid, call)
    True
    """
    from wacoll.plans.sim import LinkModel, simulate

    costs = policy.call_costs

    def plan_of(chosen):
        if checked:
            return chosen.build(topology)
        if chosen.family == HAN:  # (a composite: priced as its parts, checked)
            return chosen.build(topology)
        return chosen.with_arithmetic(
            build(chosen.op, topology, chosen.family, **dict(chosen.options))
        )

    if selection.native:
        model_of = _select(call, topology, family=LIBRARY_MODEL, policy=policy)
        model = LinkModel(
            topology, compute_rate=compute_rate, overhead=costs.library_message
        )
        plan = plan_of(model_of)
        return simulate(plan, model, checked=checked).completion + costs.library(0)
    model = LinkModel(topology, compute_rate=compute_rate, overhead=costs.plan_message)
    plan = plan_of(selection)
    seconds = simulate(plan, model, checked=checked).completion + costs.plan(0)
    if selection.arithmetic == "reproducible":
        elements = _vector_bytes(call) // call.itemsize
        scale = call.itemsize / 8  # the costs are per float64 value
        depth = max(1, math.ceil(math.log2(max(topology.size, 2))))
        seconds += policy.stage_time + elements * scale * (
            policy.convert_time + depth * policy.combine_time
        )
    return seconds


def _vector_bytes(call):
    """Bytes of values the call reduces per rank (its count, or all its counts)."""
    n = call.count if call.count is not None else sum(_flat(call.counts))
    return n * call.itemsize


def _flat(counts):
    for c in counts or ():
        if isinstance(c, (tuple, list)):
            yield from _flat(c)
        else:
            yield c


def plain_options(options) -> dict:
    """Builder options as plain values that compare, print and digest the same on
    every rank: a tree given as a :class:`networkx.DiGraph` becomes a
    :class:`~wacoll.trees.frozen.FrozenTree`, numpy numbers Python ones, lists tuples.

    Examples
    --------
    >>> import numpy as np
    >>> from wacoll.trees import chain
    >>> plain_options({"n": np.int64(4), "tree": chain(3)})["tree"].edges
    ((0, 1, 0), (1, 2, 0))
    >>> plain_options({"sizes": [1, 2]})
    {'sizes': (1, 2)}
    """
    return {name: _plain(value) for name, value in (options or {}).items()}


def _plain(value):
    if isinstance(value, nx.DiGraph):
        return freeze_tree(value)
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, list):
        return tuple(_plain(v) for v in value)
    if isinstance(value, tuple) and type(value) is tuple:
        return tuple(_plain(v) for v in value)
    return value


def _select(
    call: Call,
    topology,
    *,
    family=None,
    options=None,
    comm_family=None,
    comm_options=None,
    policy: Policy = DEFAULT_POLICY,
    allow_native=True,
) -> Selection:
    """:func:`select` for one arithmetic: the family and the builder's options."""
    options = plain_options(options)
    extra: dict[str, object]
    if family is not None:
        if family == HAN and call.op not in HAN_OPS:
            raise PlanError(
                f"the {HAN} family has no {call.op} plan; it has {', '.join(HAN_OPS)}"
            )
        if family not in (NATIVE, HAN) and call.op not in builders(family):
            raise PlanError(f"the {family} family has no {call.op} plan")
        chosen, extra, reason = family, {}, f"family {family!r} asked for by the call"
    elif comm_family is not None and (
        comm_family == NATIVE
        or _composes(call, comm_family)
        or comm_family != HAN
        and call.op in builders(comm_family)
    ):
        chosen, extra, reason = (
            comm_family,
            {},
            f"family {comm_family!r} asked for by the communicator",
        )
    else:
        chosen, extra, reason = _default_family(call, topology, policy)
        if chosen == NATIVE and not allow_native:
            chosen, extra = ("magpie" if topology.nclusters > 1 else "mpich"), {}
            reason = "a call that needs a plan (not the library's collective)"
        if chosen == "magpie" and call.count and not options:
            library = allow_native and _library_priced(call, topology, policy)
            if library or _priced(call, topology, policy):
                return _fastest(call, topology, policy, comm_options, library)
    if chosen == NATIVE:
        if options:
            raise PlanError(
                f"the native family takes no options; got {', '.join(sorted(options))}"
            )
        if call.level == "strict":
            raise PlanError(
                "the native family cannot keep level 'strict': the MPI "
                "library may combine in any order"
            )
        return Selection(call.op, NATIVE, (), reason=reason)
    accepted = HAN_OPTIONS if chosen == HAN else family_options(chosen, call.op)
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise PlanError(
            f"the {chosen} family's {call.op} takes no option {unknown[0]!r}; "
            f"it takes {', '.join(accepted)}"
        )
    kwargs = {k: v for k, v in plain_options(comm_options).items() if k in accepted}
    kwargs.update(extra)
    kwargs.update(options)
    if "threshold" in accepted:
        kwargs.setdefault("threshold", policy.threshold)
    if call.root is not None:
        kwargs["root"] = call.root
    if call.level is not None and "level" in accepted:
        kwargs["level"] = call.level
    if "itemsize" in accepted:
        kwargs["itemsize"] = call.itemsize
    if call.counts is not None:
        kwargs["counts"] = call.counts
    elif call.count is not None and "count" in accepted:
        kwargs["count"] = call.count
    if (
        policy.segment_size
        and "segments" in accepted
        and call.count
        and "segments" not in kwargs
    ):
        assert call.nbytes is not None  # call.count is set
        kwargs["segments"] = max(
            1,
            min(
                call.count,
                policy.max_segments,
                math.ceil(call.nbytes / policy.segment_size),
            ),
        )
    return Selection(call.op, chosen, tuple(sorted(kwargs.items())), reason=reason)


#: The operations whose long vectors are priced against other plan families
#: (:attr:`Policy.priced_from`, :attr:`Policy.hierarchical_from`).
_PRICED_OPS = ("bcast", "allreduce", "allgather")


def _hierarchical_priced(call, policy):
    return (
        call.op in _PRICED_OPS
        and bool(policy.hierarchical_from)
        and call.nbytes >= policy.hierarchical_from
    )


def _families_priced(call, topology, policy):
    return (
        call.op in _PRICED_OPS
        and bool(policy.priced_from)
        and call.nbytes >= policy.priced_from
        and topology.size <= policy.priced_up_to
    )


def _library_priced(call, topology, policy):
    """Whether the default of ``call`` is priced against the MPI library's
    collective (see :attr:`Policy.library_priced`)."""
    return (
        policy.library_priced
        and call.level != "strict"
        and call.counts is None
        and topology.size <= policy.priced_up_to
        and call.op in builders(LIBRARY_MODEL)
    )


def _priced(call, topology, policy):
    """Whether the default of ``call`` is priced against other families (see
    :attr:`Policy.priced_from` and :attr:`Policy.hierarchical_from`)."""
    return _hierarchical_priced(call, policy) or _families_priced(call, topology, policy)


def _fastest(call, topology, policy, comm_options, library=False):
    """The plan the simulator predicts fastest among the :data:`PRICED_FAMILIES`'
    (see :attr:`Policy.priced_from`), MagPIe's and the hierarchical pairs' (see
    :attr:`Policy.hierarchical_from`), and, with ``library``, the MPI library's
    collective (see :attr:`Policy.library_priced`); candidates that cannot keep
    the call's level are left out; on a tie (within :data:`PRICE_TIE`) the
    earlier wins.

    The choice is made per power of two of the vector's bytes, by pricing a call
    of exactly that many bytes, and kept: a call of another count in the same
    octave takes the same family and options, built for its own count. So an
    application that varies its counts prices each octave once, and the choice
    never depends on which count of the octave a process priced first (ranks
    whose earlier calls differed, on communicators of equal topology, still
    choose alike)."""
    rule = dataclasses.replace(
        policy, hierarchical_from=0, priced_from=0, library_priced=False
    )
    comm_options = plain_options(comm_options)
    # which candidates are priced depends on the call's own size too (a threshold
    # need not fall between octaves): part of the key, as every other input
    priced = (
        _families_priced(call, topology, policy),
        _hierarchical_priced(call, policy),
        library,
    )
    octave_bytes = 1 << (call.nbytes.bit_length() - 1)
    representative = dataclasses.replace(
        call, count=max(1, octave_bytes // call.itemsize)
    )
    octave = (representative, topology, rule, tuple(sorted(comm_options.items())), priced)
    known = _PRICED.get(octave)
    if known is None:
        key, priced_choice = _price(representative, topology, rule, comm_options, *priced)
        if len(_PRICED) >= _PRICED_KEPT:
            del _PRICED[next(iter(_PRICED))]
        known = _PRICED[octave] = key, priced_choice.reason
    (family, options), reason = known
    chosen = _select(
        call,
        topology,
        family=family,
        options=dict(options),
        comm_options=comm_options if family is None else None,
        policy=rule,
    )
    return dataclasses.replace(chosen, reason=reason)


#: Priced choices kept (see :func:`_fastest`); the oldest is dropped first.
_PRICED_KEPT = 256
#: octave key -> ((family or None for MagPIe's, options), reason)
_PRICED: dict[tuple, tuple[tuple[str | None, dict], str]] = {}


def _price(call, topology, rule, comm_options, families, hierarchical, library):
    """``((family or None for MagPIe's, options), selection)`` of the fastest
    predicted candidate (see :func:`_fastest`): MagPIe's, and where asked the
    long-vector families, the hierarchical pairs and the library's collective."""
    candidates = [(f, {}) for f in PRICED_FAMILIES] if families else []
    candidates.append((None, {}))  # MagPIe's, with the communicator's options
    if families:
        candidates += [(f, dict(o)) for f, o in PRICED_AFTER]
    if hierarchical:
        candidates += [("hierarchical", pair) for pair in HIERARCHICAL_PAIRS]
    if library:
        candidates.append((NATIVE, {}))
    priced = []
    for family, options in candidates:
        if family not in (None, NATIVE) and call.op not in builders(family):
            continue
        try:
            candidate = _select(
                call,
                topology,
                family=family,
                options=options,
                comm_options=comm_options if family is None else None,
                policy=rule,
            )
            seconds = predicted_time(
                candidate, topology, call, rule, compute_rate=COMBINE_RATE
            )
        except PlanError:
            continue
        priced.append((seconds, (family, tuple(sorted(options.items()))), candidate))
    fastest = min(seconds for seconds, _, _ in priced)
    key, chosen = next(
        (key, c) for seconds, key, c in priced if seconds <= fastest * (1 + PRICE_TIE)
    )
    times = ", ".join(f"{_label(c)} {_shown_time(seconds)}" for seconds, _, c in priced)
    return key, dataclasses.replace(
        chosen, reason=f"predicted fastest of a {call.nbytes}-byte call: {times}"
    )


def _shown_time(seconds):
    """A predicted time as people read it: ``"1.5 ms"``, ``"2.01 s"``, ``"40 us"``."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-6:.3g} us"


def _label(selection):
    """A priced candidate's name: its family, and its algorithm or pair if any."""
    options = dict(selection.options)
    if "inner" in options:
        return f"{selection.family}({options['inner']}/{options['outer']})"
    if "algorithm" in options:
        return f"{selection.family}/{options['algorithm']}"
    return selection.family


def _composes(call: Call, family) -> bool:
    """Whether a communicator-wide ``family`` of ``"han"`` can compose ``call``."""
    return family == HAN and call.op in HAN_OPS and call.level in (None, "commutative")


def adapt_script(plan, call: Call):
    """A loaded script plan fitted to ``call``'s sizes, proved; None if it does not fit.

    A script applies to calls of its operation and size with its own root; its block
    structure is kept and the call's elements are cut into its blocks.

    Examples
    --------
    >>> from wacoll import Topology
    >>> from wacoll.plans import build
    >>> script = build("bcast", Topology.single(4), "tree", tree="lam", segments=2)
    >>> adapt_script(script, Call("bcast", count=9, itemsize=8, root=0)).counts
    (5, 4)
    >>> adapt_script(script, Call("bcast", count=9, itemsize=8, root=1)) is None
    True
    """
    if plan.op != call.op or plan.root != call.root:
        return None
    if call.counts is not None:
        counts = block_counts(plan.op, plan.size, counts=call.counts)
    else:
        counts = _layout_counts(plan, call.count)
    if counts is None:
        return None
    adapted = dataclasses.replace(
        plan,
        counts=counts,
        level=call.level if plan.level else None,
        itemsize=call.itemsize,
    )
    adapted.prove()
    return adapted


def _layout_counts(plan, count):
    """Re-cut ``count`` elements into a script plan's blocks (same block structure)."""
    layout = spec(plan.op).layout
    if layout == "none":
        return ()
    if count is None:
        return None
    if layout == "segments":
        n = plan.nblocks
        base, extra = divmod(count, n)
        return tuple(base + (1 if i < extra else 0) for i in range(n))
    return (count,) * plan.nblocks
