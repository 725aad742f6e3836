"""Communication plans: the model, the families, the prover, selection and lowering.

:func:`build` is the one entry point that picks a family's builder by name (it,
:func:`builders`, :func:`options` and :data:`FAMILIES` come from the family registry,
:mod:`wacoll.plans.families`)::

    build(op, topology, family, root=..., count=..., level=..., **family_options)

Families: ``magpie`` (MagPIe's wide-area algorithms), ``mpich`` (the MPICH 1.1
algorithms MagPIe compares against), ``tree`` (any tree, PATHS/LAM), ``gridmpi``
(Matsuda's multi-sender broadcast and allreduce, and an allgather after them),
``combining`` (Plaat's
cluster-combining alltoall) and ``modern`` (the algorithms MPICH 4 and Open MPI 5
select today).

The steps after building, each a plain function over plain data:

- :meth:`Plan.prove` / :func:`prove_plan` (:mod:`~wacoll.plans.prove`) prove a plan;
- :func:`select` (:mod:`~wacoll.plans.select`) is the one selection policy: the
  family and options (or the MPI library's own collective) ``wacoll.Comm`` runs for
  a :class:`Call`;
- :func:`lower` (:mod:`~wacoll.plans.lower`) turns one rank's program into buffer
  element runs, the executor's input;
- :mod:`~wacoll.plans.rank` derives one rank's program alone (a builder focused on
  that rank), for a plan whose proof :mod:`~wacoll.plans.proofs` keeps on disk;
- :mod:`wacoll.plans.sim` predicts a plan's time; :mod:`wacoll.plans.scripts` reads
  and writes plans as PATHS-style scripts and JSON; :mod:`wacoll.plans.goal` writes
  them as GOAL schedules for the LogGOPSim simulator.

Examples
--------
>>> from wacoll import Topology
>>> from wacoll.plans import build
>>> plan = build("reduce", Topology.from_sizes([4, 4]), "tree", tree="lam")
>>> plan.prove().messages
7
"""

from __future__ import annotations

from wacoll.plans.families import FAMILIES, build, builders, options
from wacoll.plans.lower import LoweredProgram, lower
from wacoll.plans.operations import ARITHMETICS, LEVELS, OPERATIONS
from wacoll.plans.plan import Message, Plan, Step
from wacoll.plans.prove import ProofReport, prove_plan
from wacoll.plans.select import Call, Policy, Selection, select

__all__ = [
    "Plan",
    "Step",
    "Message",
    "ProofReport",
    "prove_plan",
    "build",
    "builders",
    "options",
    "FAMILIES",
    "OPERATIONS",
    "LEVELS",
    "ARITHMETICS",
    "Call",
    "Policy",
    "Selection",
    "select",
    "LoweredProgram",
    "lower",
]
