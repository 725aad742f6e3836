"""The parts of the plan prover (:func:`wacoll.plans.prove_plan`), one purpose each.

The prover proves a plan with arrays, not with a dictionary entry per (rank,
buffer, block): a plan of an all-to-all on 4096 ranks has 33.5 million steps, and
any work per step or block in Python is already too slow there. The stages, in the
order :func:`wacoll.plans.prove.prove_plan` runs them:

- :mod:`~wacoll.plans.prover.encode`: every rank's program as arrays, one row per
  step and one per block of a step (an *entry*);
- :mod:`~wacoll.plans.prover.pairing`: the k-th send from ``a`` to ``b`` matched
  with ``b``'s k-th receive from ``a``, with the errors of
  :meth:`wacoll.plans.Plan.messages`;
- :mod:`~wacoll.plans.prover.layout`: what each operation holds before and promises
  after, as functions of (rank, block) arrays;
- :mod:`~wacoll.plans.prover.flow`: what a rank holds when, from its own program
  alone: for every read, the write it reads (or the initial value, or nothing), and
  the faults that need no values;
- :mod:`~wacoll.plans.prover.run`: the ranks run in the order of the work queue of
  ranks the prover always used, a stretch of a rank's program at a time, carrying
  values (wide-area hops, reduction expressions, a barrier's knowledge) from send to
  receive; it stops at the first fault or deadlock;
- :mod:`~wacoll.plans.prover.results`: the final values against the operation's
  promise, and the report's measures.

Because the run keeps the order of the work queue, a broken plan is refused with the
same error (message, rank and step) as before, and MagPIe's repeated data is
reported with the same examples.

The passes over every step or entry are compiled (``_encode``, ``_pairing``,
``_pieces``, ``_flow`` and ``_values``, beside the module each serves), and each
exists once: there is no numpy twin for a build without them. wacoll cannot be
installed without a C compiler (its reduction kernels, :mod:`wacoll._kernels`, are
Cython, and the build makes every compiled module of the package), so such a twin
would never run in an installed wacoll, and would be a second prover to keep equal
to the first and to test beside it. The combining all-to-all on 4096 ranks cuts
into 48 million pieces, and its proof takes about 8 s of one core. A reduction's
expressions are carried by one compiled pass too (``_values.reductions_in_order``,
a value per block, after the run): it proves a correct plan, and leaves any other
to the Python pass a step at a time, which names the fault.
"""

from wacoll.errors import compiled_missing

try:  # a source checkout shadowing the installed package has none of them
    from wacoll.plans.prover import _encode, _flow, _pairing, _pieces, _values  # type: ignore[attr-defined]  # noqa: F401  # compiled (Cython) module
except ImportError as _exc:
    raise compiled_missing(_exc, __file__) from None
