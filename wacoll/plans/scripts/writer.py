"""Writing plans as the S-expression scripts of :mod:`wacoll.plans.scripts`.

:func:`to_sexpr` writes a whole ``(plan ...)``, :func:`rank_scripts` one
``(script ...)`` per rank; both leave out what the reader fills in by default (all
blocks, ``from out`` of a send, ``into out`` of a receive, ``side right``). Both are
importable from :mod:`wacoll.plans.scripts`, whose docstring gives the grammar.
"""

from __future__ import annotations

from wacoll.plans.plan import Plan
from wacoll.plans.scripts.fields import STEP_WORDS, validate_params
from wacoll.plans.scripts.sexpr import quote

__all__ = ["to_sexpr", "rank_scripts"]


def _value_text(value, what):
    if value is None:
        return "none"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return quote(value, what)
    if isinstance(value, (tuple, list)):
        return "(" + " ".join(_value_text(v, what) for v in value) + ")"
    return repr(value)


def _int_lines(name, values, indent="  ", width=96):
    lines, line = [], f"{indent}({name}"
    for v in values:
        word = f" {v}"
        if len(line) + len(word) > width and line.strip() != f"({name}":
            lines.append(line)
            line = indent + "  "
            word = word.lstrip()
        line += word
    lines.append(line + ")")
    return lines


def _header_lines(plan, head, rank=None):
    validate_params(plan)
    first = f"({head} (op {plan.op}) (size {plan.size})"
    if rank is not None:
        first += f" (rank {rank})"
    if plan.root is not None:
        first += f" (root {plan.root})"
    if plan.level is not None:
        first += f" (level {plan.level})"
    if plan.arithmetic != "plain":
        first += f" (arithmetic {plan.arithmetic})"
    lines = [first + f" (itemsize {plan.itemsize})"]
    lines += _int_lines("counts", plan.counts)
    lines += _int_lines("clusters", plan.clusters)
    names = []
    if plan.family:
        names.append(f"(family {quote(plan.family, 'the family name')})")
    if plan.algorithm:
        names.append(f"(algorithm {quote(plan.algorithm, 'the algorithm name')})")
    if names:
        lines.append("  " + " ".join(names))
    if plan.params:
        lines.append(
            "  (params "
            + " ".join(
                f"({k} {_value_text(v, f'plan parameter {k!r}')})" for k, v in plan.params
            )
            + ")"
        )
    return lines


def _step_text(step, all_blocks):
    parts = [STEP_WORDS[step.kind]]
    if step.peer is not None:
        parts.append(str(step.peer))
    if step.blocks != all_blocks:
        parts.append("(blocks" + "".join(f" {b}" for b in step.blocks) + ")")
    if step.src is not None and not (step.kind == "send" and step.src == "out"):
        parts.append(f"(from {step.src})")
    if step.dst is not None and not (
        step.kind in ("recv", "recv_combine") and step.dst == "out"
    ):
        parts.append(f"(into {step.dst})")
    if step.side == "left":
        parts.append("(side left)")
    if step.group:
        parts.append(f"(group {step.group})")
    return "(" + " ".join(parts) + ")"


def to_sexpr(plan: Plan) -> str:
    """The whole plan as one S-expression script (see :mod:`wacoll.plans.scripts`).

    The plan is not checked here; :func:`~wacoll.plans.scripts.from_sexpr` checks
    what it reads.

    Raises
    ------
    ScriptError
        If a parameter or name holds a value scripts cannot hold (for example a dict).

    Examples
    --------
    >>> from wacoll import Topology
    >>> from wacoll.plans import build
    >>> print(to_sexpr(build("bcast", Topology.single(3), "tree", tree="chain")), end="")
    ; bcast on 3 ranks, written by wacoll.plans.scripts
    (plan (op bcast) (size 3) (root 0) (itemsize 1)
      (counts 1)
      (clusters 0 0 0)
      (family "tree") (algorithm "chain")
      (params (segments 1) (tree "chain"))
      (rank 0 (send 1))
      (rank 1
        (recv 0)
        (send 2))
      (rank 2 (recv 1)))
    """
    all_blocks = tuple(range(plan.nblocks))
    lines = [f"; {plan.op} on {plan.size} ranks, written by wacoll.plans.scripts"]
    lines += _header_lines(plan, "plan")
    for r, program in enumerate(plan.programs):
        steps = [_step_text(s, all_blocks) for s in program]
        if len(steps) <= 1:
            lines.append(f"  (rank {r}" + "".join(" " + s for s in steps) + ")")
        else:
            lines.append(f"  (rank {r}")
            lines += ["    " + s for s in steps]
            lines[-1] += ")"
    lines[-1] += ")"
    return "\n".join(lines) + "\n"


def rank_scripts(plan: Plan) -> dict:
    """One script per rank, ``{rank: text}``, each repeating the plan's header.

    Examples
    --------
    >>> from wacoll import Topology
    >>> from wacoll.plans import build
    >>> scripts = rank_scripts(build("bcast", Topology.single(2), "tree", tree="flat"))
    >>> print(scripts[1], end="")
    ; rank 1 of bcast on 2 ranks
    (script (op bcast) (size 2) (rank 1) (root 0) (itemsize 1)
      (counts 1)
      (clusters 0 0)
      (family "tree") (algorithm "flat")
      (params (segments 1) (tree "flat"))
      (recv 0))
    """
    all_blocks = tuple(range(plan.nblocks))
    out = {}
    for r, program in enumerate(plan.programs):
        lines = [f"; rank {r} of {plan.op} on {plan.size} ranks"]
        lines += _header_lines(plan, "script", rank=r)
        lines += ["  " + _step_text(s, all_blocks) for s in program]
        lines[-1] += ")"
        out[r] = "\n".join(lines) + "\n"
    return out
