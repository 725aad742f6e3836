"""How much work a plan reader may do: a budget of *cells*, scaled by the input's length.

A short script can describe a plan whose proof is expensive: ``(plan (op barrier)
(size 1048576) (counts))`` is 43 characters, yet proving it keeps per-rank state for
a million ranks, and ``(send 1)`` in a plan of a million blocks names every one of
them. So every reader of :mod:`wacoll.plans.scripts` charges the work a text asks for
to a :class:`Budget` before doing it, and refuses, with a
:class:`~wacoll.errors.ScriptError` at the offending field or step, a text that asks
for more than its budget. A *cell* is one entry of the prover's per-rank state or one
block named by a step (about 100 bytes of memory and a microsecond of time at most):

- the header of a plan of ``size`` ranks and ``nblocks`` blocks costs
  :func:`plan_cells` (``size * (size + per-rank blocks)``: the prover's tables);
- each step costs one cell per block it names (``(send 1)`` names every block), times
  ``1 + size // 64`` in a reduction (the contributions a partial result records).

The budget of a text of ``n`` characters is ``max(MIN_CELLS, CELLS_PER_CHAR * n)``,
so memory and time stay proportional to the input; every reader takes ``max_cells=``
to set the budget explicitly for a genuinely large plan, and the module constants of
:mod:`wacoll.plans.scripts` (which re-exports these) can be raised for a whole program.

Examples
--------
>>> budget = Budget(cell_budget(43))
>>> budget.limit == MIN_CELLS
True
>>> plan_cells("barrier", 1 << 20, 0) > budget.limit
True
>>> plan_cells("allgather", 4, 4), step_cost("allreduce", 128)
(32, 3)
"""

from __future__ import annotations

from wacoll.plans.operations import OPERATIONS

__all__ = [
    "MIN_CELLS",
    "CELLS_PER_CHAR",
    "cell_budget",
    "plan_cells",
    "step_cost",
    "Budget",
]

#: Cells every text may use, however short (about a plan of 1024 ranks).
MIN_CELLS = 1 << 20
#: Further cells per character of input.
CELLS_PER_CHAR = 8


def cell_budget(nchars, max_cells=None, *, min_cells=None, per_char=None):
    """The cells a text of ``nchars`` characters may use: ``max_cells`` if given,
    else ``max(min_cells, per_char * nchars)`` (by default :data:`MIN_CELLS` and
    :data:`CELLS_PER_CHAR`).

    Examples
    --------
    >>> cell_budget(10), cell_budget(10**6), cell_budget(10, max_cells=5)
    (1048576, 8000000, 5)
    """
    if max_cells is not None:
        if isinstance(max_cells, bool) or not isinstance(max_cells, int) or max_cells < 0:
            raise TypeError(f"max_cells must be an integer >= 0, got {max_cells!r}")
        return max_cells
    min_cells = MIN_CELLS if min_cells is None else min_cells
    per_char = CELLS_PER_CHAR if per_char is None else per_char
    return max(min_cells, per_char * nchars)


def plan_cells(op, size, nblocks):
    """The cells of the prover's per-rank tables for a plan of ``op`` on ``size``
    ranks with ``nblocks`` blocks (an upper bound)."""
    layout = OPERATIONS[op].layout
    per_rank = size if layout == "pairs" else nblocks
    return size * (size + per_rank)


def step_cost(op, size):
    """The cells each block a step names costs in a plan of ``op`` on ``size`` ranks."""
    return 1 + size // 64 if OPERATIONS[op].kind == "reduction" else 1


class Budget:
    """Cells left to spend; :meth:`spend` says whether a charge still fits.

    Parameters
    ----------
    limit : int
        The cells the text may use (see :func:`cell_budget`).
    """

    __slots__ = ("limit", "used")

    def __init__(self, limit):
        self.limit = limit
        self.used = 0

    def spend(self, cells):
        """Charge ``cells``; False (and nothing charged) if they would exceed the limit."""
        if self.used + cells > self.limit:
            return False
        self.used += cells
        return True

    def refusal(self, what, cells):
        """The message for a charge of ``cells`` for ``what`` that does not fit."""
        return (
            f"{what} needs {cells} cells of checking work, more than the "
            f"{self.limit - self.used} left of this text's budget of {self.limit} "
            f"(max(MIN_CELLS, CELLS_PER_CHAR * length)); pass max_cells= or raise "
            f"wacoll.plans.scripts.MIN_CELLS for a genuinely large plan"
        )
