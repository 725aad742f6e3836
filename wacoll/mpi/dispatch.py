"""From a call's description to the one thing that runs it.

A communicator's :class:`Dispatcher` answers one question per call: what runs it? It
asks the selection policy (:func:`wacoll.plans.select`) once per call shape, keeps
the answer and this rank's lowered programs in one bounded cache shared by the
buffer and the object collectives, and hands back an *executable*:

:class:`LibraryCollective`
    the MPI library's own collective (the ``native`` family, or a learned choice);
:class:`PlanRun`
    a proved plan and this rank's lowered program of it for the call's buffers;
:class:`CompositeRun`
    a composed plan (family ``han``): library collectives inside the clusters, a
    plan between them.

The route (:mod:`wacoll.mpi.route`) runs any of them the same way: compiled where
it can, beside the communicator's argument check (:mod:`wacoll.mpi.argcheck`).

Examples
--------
>>> import numpy as np
>>> from wacoll import Topology
>>> from wacoll.plans import Policy
>>> from wacoll.mpi import calls
>>> from wacoll.mpi.described import describe
>>> topology = Topology.from_sizes([2, 2])
>>> dispatcher = Dispatcher(topology, calls.Place(0, 4), Policy(), None, {})
>>> d = describe(calls.bcast, (np.zeros(4), 0), place=calls.Place(0, 4), mode="call")
>>> run = dispatcher.executable(d, None)
>>> type(run).__name__, run.family, run.program.rank
('PlanRun', 'magpie', 0)
>>> dispatcher.executable(d, "native").family
'native'
"""

from __future__ import annotations

import functools
import math

from wacoll.errors import PlanError
from wacoll.mpi.bounded import SHAPES, BoundedCache
from wacoll.mpi.composite import rank_programs
from wacoll.plans import Call, select
from wacoll.plans import operations as ops
from wacoll.plans.composite import Composite
from wacoll.plans.rank import lower_for_rank, plan_for_rank
from wacoll.plans.retarget import (
    count_parts,
    retarget,
    retarget_program,
    retargetable,
    structure_call,
)
from wacoll.plans.select import (
    COMBINE_RATE,
    HAN,
    NATIVE,
    SCRIPTS,
    adapt_script,
    predicted_time,
)

__all__ = [
    "CompositeRun",
    "Dispatcher",
    "LibraryCollective",
    "PlanRun",
    "library_method",
    "library_reduces",
]


class LibraryCollective:
    """The MPI library's own collective runs the call (``reason``: why;
    ``per_count``: the library runs every count of the call's size class)."""

    __slots__ = ("reason", "per_count")
    family = NATIVE
    plan = None

    def __init__(self, reason="", per_count=False):
        self.reason, self.per_count = reason, per_count


class PlanRun:
    """A plan runs the call: ``plan`` and this rank's lowered ``program`` of it
    (``reason``: why this plan; ``per_count``: when not 0, every count of the
    call's size class runs this program with its indices computed from the
    count, the number of parts it is cut into:
    :func:`~wacoll.plans.retarget.count_parts`)."""

    __slots__ = ("plan", "program", "reason", "per_count")

    def __init__(self, plan, program, reason="", per_count=0):
        self.plan, self.program, self.reason = plan, program, reason
        self.per_count = per_count

    @property
    def family(self):
        return self.plan.family


class CompositeRun:
    """A composed plan runs the call: ``composite`` and this rank's lowered program
    of each of its plan phases (:func:`~wacoll.mpi.composite.rank_programs`)."""

    __slots__ = ("plan", "programs", "reason")

    def __init__(self, composite, programs, reason=""):
        self.plan, self.programs, self.reason = composite, programs, reason

    @property
    def family(self):
        return self.plan.family


def library_method(wire, op, kind):
    """The MPI library's collective for ``op`` on ``wire``: ``kind`` is
    ``"blocking"``, ``"nonblocking"`` or ``"persistent"``.

    Examples
    --------
    >>> from mpi4py import MPI
    >>> library_method(MPI.COMM_SELF, "reduce_scatter_block", "persistent").__name__
    'Reduce_scatter_block_init'
    """
    name = op[0].upper() + op[1:]
    name = {"blocking": name, "nonblocking": "I" + op, "persistent": name + "_init"}[kind]
    return getattr(wire, name)


def library_reduces(prepared):
    """Whether the MPI library's collectives can combine the call's elements (the
    library phases of a composed plan): not a reduction, or one of numpy's own
    element types (not MINLOC/MAXLOC pairs, nor the packed elements of a derived
    datatype)."""
    dtype = prepared.dtype
    return (
        ops.spec(prepared.op).kind != "reduction"
        or dtype is None
        or (dtype.fields is None and dtype.kind in "biufc")
    )


class Dispatcher:
    """A communicator's plans: chosen once per call shape, kept in one bounded
    cache for its buffer and object collectives.

    Parameters
    ----------
    network : wacoll.Topology
    place : wacoll.mpi.calls.Place
        This rank's place.
    policy : wacoll.plans.Policy
    family : str or None
        The family the communicator forces (``"scripts"``: its loaded scripts).
    options : dict
        The communicator's family options.
    scripts : dict, optional
        Loaded script plans by ``(operation, size)``.
    """

    def __init__(self, network, place, policy, family, options, scripts=None):
        self.network, self.place, self.policy = network, place, policy
        self.family, self.options = family, dict(options)
        self.scripts = dict(scripts or {})
        #: Plans (or NATIVE, or composites) by call shape; lowered programs by plan
        #: and buffer layout. Both bounded (:data:`~wacoll.mpi.bounded.SHAPES`).
        self.plans = BoundedCache(SHAPES)
        self.programs = BoundedCache(SHAPES)
        #: Retargeted plans of a class whose indices follow the count: ``(plan,
        #: the class's plan, its count, the plan's count, its parts)`` by
        #: ``id(plan)`` (one part: the program is the class's scaled).
        self.origins = BoundedCache(SHAPES)
        #: Size classes' plans by ``id(plan)``: ``(plan, retargetable, parts)``
        #: (:func:`wacoll.plans.retarget.count_parts`).
        self.classes = BoundedCache(SHAPES)

    # ------------------------------------------------------------ buffer calls
    def executable(self, desc, family, reason=None):
        """What runs the call described by ``desc`` with ``family`` (the call's
        own, or the one a learning communicator tries; None: the selection's), and
        why (``reason``, else the selection's own)."""
        prepared = desc.prepared
        call = desc.selection_call(self.place.size)
        exact = bool(desc.family or desc.options or self.family or self.options)
        found, why = self.chosen(
            call,
            family,
            desc.options,
            blocking=desc.blocking,
            reducible=library_reduces(prepared),
            exact=exact,
        )
        why = why if reason is None else reason
        if found == NATIVE:
            # the library runs every count of a class alike: a class's calls share
            # one recording, unless an exact family might plan some counts itself
            alike = not exact or (desc.family or self.family) == NATIVE
            return LibraryCollective(why, alike and structure_call(call) is not None)
        if isinstance(found, Composite):
            if not library_reduces(prepared):
                raise PlanError(
                    f"the {HAN} family runs the MPI library's reductions "
                    f"on numpy's own element types; this call's are "
                    f"{prepared.dtype}"
                )
            return CompositeRun(found, self.composite_programs(found), why)
        return PlanRun(
            found,
            self.program(found, prepared.in_offsets, prepared.out_offsets),
            why,
            0
            if exact
            or prepared.in_offsets is not None
            or prepared.out_offsets is not None
            else self.count_parts(found),
        )

    def chosen(
        self,
        call,
        family,
        options,
        *,
        blocking=True,
        reducible=True,
        objects=False,
        exact=True,
    ):
        """The plan of ``call`` (a script's, or the selection policy's, proved and
        cached; a :class:`~wacoll.plans.composite.Composite` for family ``"han"``),
        or NATIVE when the MPI library runs it.

        Composites run blocking calls only (concurrent non-blocking calls could start
        their library collectives in different orders on different ranks), and
        reductions the library can combine (``reducible``): such a call forced to
        ``"han"`` raises, and a communicator-wide ``"han"`` leaves it to the
        default. Object calls (``objects``) run whole plans: never the library's
        collective, a composite or a script (scripts are written for buffers).

        A call of a size class whose plan is made already runs that plan
        retargeted (:mod:`wacoll.plans.retarget`) unless ``exact`` (the call or
        the communicator forces a family or options: a researcher asking for a
        family gets what its builder makes for this very count, which may cut
        the vector or pick its algorithm by the count).

        Returns ``(plan, reason)``: why the selection chose it, in words."""
        if not objects and (family or self.family) == SCRIPTS:
            script = self.scripts.get((call.op, self.place.size))
            if script is not None:
                key = (SCRIPTS, call)
                if key not in self.plans:
                    self.plans[key] = adapt_script(script, call), "a loaded plan script"
                if self.plans[key][0] is not None:
                    return self.plans[key]
        if family == HAN and objects:
            raise PlanError(
                f"the {HAN} family composes the MPI library's buffer "
                f"collectives; object collectives run whole plans"
            )
        if family == HAN and not blocking:
            raise PlanError(
                f"the {HAN} family runs blocking calls only: concurrent "
                f"non-blocking calls could start its library collectives in "
                f"different orders on different ranks"
            )
        comm_family = (
            None
            if self.family == SCRIPTS
            or (self.family == HAN and not (blocking and reducible and not objects))
            else self.family
        )
        # (the options as text: 2, 2.0 and True are equal values, and a builder
        # takes only some of them)
        key = (family, repr(tuple(sorted(options.items()))), comm_family, objects)
        found = self.plans.get((call,) + key)
        if found is None:
            select_for = functools.partial(
                self._selected, family, options, comm_family, objects
            )
            found = None if exact else self._retargeted(call, key, select_for)
            if found is None:
                found = select_for(call)
            self.plans[(call,) + key] = found
        return found

    def _selected(self, family, options, comm_family, objects, call):
        """``(plan, reason)`` of the selection policy for ``call`` itself."""
        selection = select(
            call,
            self.network,
            family=None if family == SCRIPTS else family,
            options=options,
            comm_family=comm_family,
            comm_options=self.options,
            policy=self.policy,
            allow_native=not objects,
        )
        if selection.native:
            plan = NATIVE
        elif selection.family == HAN:
            plan = selection.build(self.network)
        else:
            plan = plan_for_rank(selection, self.network, self.place.rank)
        return plan, selection.reason

    def _retargeted(self, call, key, select_for):
        """``(plan, reason)`` of ``call`` made from its size class's plan
        (:mod:`wacoll.plans.retarget`: chosen, built and proved once for the class,
        the same on every rank whatever counts came first; ``key``: the cache key
        besides the call; ``select_for``: the selection of a call), or None when the
        call is planned for its own count: a class whose plan is a composite, or
        whose selection fails (the call's own names the fault)."""
        base = structure_call(call)
        if base is None:
            return None
        found = self.plans.get((base,) + key)
        if found is None:
            try:
                found = self.plans[(base,) + key] = select_for(base)
            except PlanError:
                if base is call:  # (the call's own selection names the fault)
                    raise
                return None
        plan, why = found
        if plan is NATIVE:
            return found
        if isinstance(plan, Composite):
            return found if base is call else None
        # what the class's plan allows, found once per class (a P x P layout's
        # counts are read whole)
        kind = self.classes.get(id(plan))
        if kind is None or kind[0] is not plan:
            ok = retargetable(plan, base.count)
            kind = self.classes[id(plan)] = (
                plan,
                ok,
                count_parts(plan, base.count) if ok else 0,
            )
        _, ok, parts = kind
        if base is call:  # the class's own count
            return found
        if not ok:
            return None
        moved = retarget(plan, call.count)
        if parts:
            self.origins[id(moved)] = (moved, plan, base.count, call.count, parts)
        return moved, why

    def count_parts(self, plan) -> int:
        """How the lowered indices of ``plan`` (one this dispatcher chose: its size
        class's plan, or made from it) follow the count, for a runner that takes
        every count of the class (:func:`wacoll.plans.retarget.count_parts`): 1
        when they scale with it, the plan's segments when they are sums of whole
        segments, 0 when each count is lowered on its own."""
        origin = self.origins.get(id(plan))
        if origin is not None and origin[0] is plan:
            return origin[4]
        kind = self.classes.get(id(plan))
        return kind[2] if kind is not None and kind[0] is plan else 0

    def explored(self, call):
        """The candidates a repeated call like ``call`` explores
        (:func:`wacoll.mpi.learning.explored`, priced by :meth:`predicted`),
        remembered across runs (:mod:`wacoll.plans.memo`): a later run of the same
        program on the same network reads them instead of building and simulating
        a plan per family (most of a shape's first call)."""
        import dataclasses

        from wacoll import costs
        from wacoll.mpi import dispatch, learning
        from wacoll.plans.memo import remembered, source_stamp

        inputs = {
            "call": dataclasses.asdict(call),
            "network": self.network.to_dict(),
            "options": self.options,
            "policy": dataclasses.asdict(self.policy),
            "code": source_stamp(learning, dispatch, costs),
        }
        return remembered(
            "explored",
            inputs,
            lambda: learning.explored(
                call.op, lambda f: self.predicted(call, f), self.selected_family(call)
            ),
            accept=lambda found: (  # (without importing every family's builders)
                isinstance(found, list)
                and found[:2] == [None, NATIVE]
                and len(found) <= 2 + learning.EXPLORED_FAMILIES
                and all(f in learning.LEARNED_FAMILIES for f in found[2:])
                and len(set(found[2:])) == len(found[2:])
            ),
        )

    def selected_family(self, call):
        """The family of the selection policy's choice for ``call`` (``"native"``
        for the library's collective), without pricing its plan."""
        try:
            selection = select(
                call, self.network, comm_options=self.options, policy=self.policy
            )
        except PlanError:
            return None  # (explored then asks predicted, which says so)
        return NATIVE if selection.native else selection.family

    def predicted(self, call, family):
        """The cost model's seconds for ``family``'s plan of ``call`` (None: the
        selection policy's choice), and that plan's family; ``inf`` when the family
        has no plan for it, or the communicator has more ranks than the model
        prices (:attr:`wacoll.plans.Policy.priced_up_to`). Cached per call."""
        key = ("predicted", call, family)
        found = self.plans.get(key)
        if found is None:
            found = math.inf, family
            if self.network.size <= self.policy.priced_up_to:
                try:
                    selection = select(
                        call,
                        self.network,
                        family=family,
                        comm_options=self.options,
                        policy=self.policy,
                    )
                    found = (
                        predicted_time(
                            selection,
                            self.network,
                            call,
                            self.policy,
                            compute_rate=COMBINE_RATE,
                            checked=False,  # (a ranking: a plan that runs is proved)
                        ),
                        NATIVE if selection.native else selection.family,
                    )
                except PlanError:
                    pass
            self.plans[key] = found
        return found

    def program(self, plan, in_offsets=None, out_offsets=None):
        """This rank's lowered program of ``plan`` for a buffer layout (where each
        block sits in the input and output; None: packed in block order), cached."""
        key = (id(plan), _layout_key(in_offsets), _layout_key(out_offsets))
        entry = self.programs.get(key)
        if entry is None or entry[0] is not plan:
            origin = self.origins.get(id(plan))
            if (
                origin is not None
                and origin[0] is plan
                and origin[4] == 1
                and in_offsets is None
                and out_offsets is None
            ):  # a count of a class whose blocks all hold the count
                _, base, count, new_count, _ = origin
                program = retarget_program(self.program(base), count, new_count)
            else:
                program = lower_for_rank(plan, self.place.rank, in_offsets, out_offsets)
            entry = self.programs[key] = (plan, program)
        return entry[1]

    def composite_programs(self, composite):
        """This rank's lowered programs of a composite's plan phases (cached)."""
        key = ("composite", id(composite))
        entry = self.programs.get(key)
        if entry is None or entry[0] is not composite:
            entry = self.programs[key] = (
                composite,
                rank_programs(composite, self.place.rank),
            )
        return entry[1]

    # ------------------------------------------------------------ object calls
    def object_run(self, op, root, level, family, options):
        """The :class:`PlanRun` of an object collective (mpi4py's lower-case
        methods): always a whole plan, one block per rank, never the library's."""
        call = Call(
            op, count=None if op == "barrier" else 1, root=root, itemsize=1, level=level
        )
        plan, reason = self.chosen(call, family, options, objects=True)
        rank, size, nb = self.place.rank, plan.size, plan.nblocks
        ins = {b: b for b in ops.in_blocks(op, size, root, nb, rank)}
        outs = {b: b for b in ops.out_blocks(op, size, root, nb, rank)}
        return PlanRun(plan, self.program(plan, ins, outs), reason)


def _layout_key(offsets):
    return None if offsets is None else tuple(sorted(offsets.items()))
