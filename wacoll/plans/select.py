"""The selection policy: which plan ``wacoll.Comm`` runs for a call.

One public function, :func:`select`, decides for a collective call (a :class:`Call`:
operation, sizes, root, element size, level) on a topology which family builds its
plan and with which options; :meth:`Selection.build` builds and proves that plan.
``wacoll.Comm``, the ``wacoll plan`` command, the demo and the benchmarks all call it,
so "the plan a user runs" is defined in this one place.

The default choice (no family forced):

- several clusters: the **magpie** family (MagPIe's wide-area optimal algorithms);
- one cluster: the MPI library's own collective (the pseudo-family **native**: the
  network is uniform, wacoll's plans have nothing to add, and the library's
  collectives are tuned C), unless the call is a reduction at level ``strict``,
  which the MPI library does not promise; then the **mpich** family (MPICH 1.1's
  single-level algorithms, which follow the canonical expression).

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
>>> select(Call("bcast", count=8192, itemsize=8, root=0), grid)
Selection(op='bcast', family='magpie', options=(('count', 8192), ('itemsize', 8), ('root', 0), ('segments', 1)))
>>> one = Topology.single(4)
>>> select(Call("allreduce", count=1 << 20, itemsize=8, level="commutative"), one).family
'native'
>>> select(Call("bcast", count=1 << 20, itemsize=8), one, comm_family="mpich").family
'mpich'
>>> plan = select(Call("reduce", count=4, itemsize=8, level="associative"), grid).build(grid)
>>> plan.family, plan.check().wide_area_messages
('magpie', 3)
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from wacoll.errors import PlanError
from wacoll.plans.families import build, builders, options as family_options
from wacoll.plans.operations import LEVELS, OPERATIONS, block_counts, spec

__all__ = ["Call", "Policy", "Selection", "select", "adapt_script", "DEFAULT_POLICY",
           "NATIVE"]

#: The pseudo-family that hands a call to the MPI library's own collective.
NATIVE = "native"


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
    """

    op: str
    count: int | None = None
    counts: tuple | None = None
    root: int | None = None
    itemsize: int = 1
    level: str | None = None

    def __post_init__(self):
        if self.op not in OPERATIONS:
            raise PlanError(f"unknown operation {self.op!r}; known: {', '.join(OPERATIONS)}")
        if self.level is not None and self.level not in LEVELS:
            raise PlanError(f"level must be one of {', '.join(LEVELS)}, got {self.level!r}")

    @property
    def nbytes(self) -> int | None:
        """Bytes of the vector (or per-rank block), when the call has one count."""
        return None if self.count is None else self.count * self.itemsize


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
    """

    threshold: int = 512
    segment_size: int = 262144
    max_segments: int = 8

    def __post_init__(self):
        for name in ("threshold", "segment_size", "max_segments"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise PlanError(f"{name} must be an integer >= 0, got {value!r}")


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
    """

    op: str
    family: str
    options: tuple

    @property
    def native(self) -> bool:
        """Whether the MPI library's own collective runs the call (no plan)."""
        return self.family == NATIVE

    def build(self, topology):
        """Build this plan on ``topology`` and prove it (:meth:`Plan.check`)."""
        if self.native:
            raise PlanError("the native family has no plan: the MPI library runs the "
                            "call")
        plan = build(self.op, topology, self.family, **dict(self.options))
        plan.check()
        return plan


def _default_family(call: Call, topology, policy: Policy):
    """The default family and its extra options (see the module docstring)."""
    if topology.nclusters > 1:
        return "magpie", {}
    if call.level != "strict":
        return NATIVE, {}
    return "mpich", {}


def select(call: Call, topology, *, family=None, options=None, comm_family=None,
           comm_options=None, policy: Policy = DEFAULT_POLICY,
           allow_native=True) -> Selection:
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

    Raises
    ------
    PlanError
        An unknown family, a forced family without this operation, or an option the
        chosen builder does not take.
    """
    options = dict(options or {})
    if family is not None:
        if family != NATIVE and call.op not in builders(family):
            raise PlanError(f"the {family} family has no {call.op} plan")
        chosen, extra = family, {}
    elif comm_family is not None and (comm_family == NATIVE or
                                      call.op in builders(comm_family)):
        chosen, extra = comm_family, {}
    else:
        chosen, extra = _default_family(call, topology, policy)
        if chosen == NATIVE and not allow_native:
            chosen, extra = ("magpie" if topology.nclusters > 1 else "mpich"), {}
    if chosen == NATIVE:
        if options:
            raise PlanError(f"the native family takes no options; got "
                            f"{', '.join(sorted(options))}")
        if call.level == "strict":
            raise PlanError("the native family cannot keep level 'strict': the MPI "
                            "library may combine in any order")
        return Selection(call.op, NATIVE, ())
    accepted = family_options(chosen, call.op)
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise PlanError(f"the {chosen} family's {call.op} takes no option {unknown[0]!r}; "
                        f"it takes {', '.join(accepted)}")
    kwargs = {k: v for k, v in (comm_options or {}).items() if k in accepted}
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
    if (policy.segment_size and "segments" in accepted and call.count
            and chosen != "gridmpi" and "segments" not in options):
        kwargs["segments"] = max(1, min(call.count, policy.max_segments,
                                        math.ceil(call.nbytes / policy.segment_size)))
    return Selection(call.op, chosen, tuple(sorted(kwargs.items())))


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
    adapted = dataclasses.replace(plan, counts=counts,
                                  level=call.level if plan.level else None,
                                  itemsize=call.itemsize)
    adapted.check()
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
