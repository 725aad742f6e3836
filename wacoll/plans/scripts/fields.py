"""What the S-expression and JSON forms of a plan share: names, limits, checks.

The header fields and step vocabulary of :mod:`wacoll.plans.scripts`, the check that
a plan's parameters are plain data both forms can hold (:func:`validate_params`), and
the last step of every reader: freeze the parts into a plan and prove it
(:func:`make_plan`).

Examples
--------
>>> STEP_NAMES["recv-combine"], STEP_OPTIONS["send"]
('recv_combine', ('blocks', 'from'))
"""

from __future__ import annotations

import math
import re

from wacoll.errors import ScriptError
from wacoll.plans.plan import Plan
from wacoll.plans.scripts.sexpr import MAX_DEPTH, MAX_INT, quote

__all__ = [
    "MAX_SIZE",
    "HEADER_FIELDS",
    "STEP_NAMES",
    "STEP_WORDS",
    "PEER_KINDS",
    "STEP_OPTIONS",
    "ALL_OPTIONS",
    "BUFFER",
    "PARAM_NAME",
    "validate_params",
    "make_plan",
]

#: Largest communicator size accepted.
MAX_SIZE = 1 << 20

#: Header fields, in the order the writers put them.
HEADER_FIELDS = (
    "op",
    "size",
    "root",
    "level",
    "arithmetic",
    "itemsize",
    "counts",
    "clusters",
    "family",
    "algorithm",
    "params",
)
#: Step keyword -> :class:`~wacoll.plans.plan.Step` kind.
STEP_NAMES = {
    "send": "send",
    "recv": "recv",
    "recv-combine": "recv_combine",
    "copy": "copy",
    "combine": "combine",
}
#: Step kind -> keyword.
STEP_WORDS = {kind: word for word, kind in STEP_NAMES.items()}
#: Step kinds that name a peer rank.
PEER_KINDS = ("send", "recv", "recv_combine")
#: The options each step kind takes.
STEP_OPTIONS = {
    "send": ("blocks", "from"),
    "recv": ("blocks", "into"),
    "recv_combine": ("blocks", "into", "side", "group"),
    "copy": ("blocks", "from", "into"),
    "combine": ("blocks", "from", "into", "side"),
}
ALL_OPTIONS = ("blocks", "from", "into", "side", "group")
#: A buffer name.
BUFFER = re.compile(r"[a-z][a-z0-9_]*\Z")
#: A parameter name.
PARAM_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")


def _validate_value(value, what, depth=0):
    """Raise ScriptError unless ``value`` is plain data both formats can hold."""
    if depth > MAX_DEPTH - 4:
        raise ScriptError(f"{what} is nested too deeply")
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, str):
        quote(value, what)  # (a control character a script cannot hold: refused)
        return
    if isinstance(value, int):
        if abs(value) > MAX_INT:
            raise ScriptError(f"{what} {value} is too large for a script")
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ScriptError(f"{what} {value} is not a finite number")
        return
    if isinstance(value, (tuple, list)):
        for item in value:
            _validate_value(item, what, depth + 1)
        return
    raise ScriptError(
        f"{what} has a value of type {type(value).__name__}, which scripts "
        f"cannot hold (integers, numbers, strings, booleans, None, tuples)"
    )


def validate_params(plan):
    """Raise ScriptError unless the plan's parameters are (name, plain data) pairs
    with distinct names that both forms can write."""
    seen = set()
    for item in plan.params:
        if not isinstance(item, tuple) or len(item) != 2:
            raise ScriptError(f"plan parameter {item!r} is not a (name, value) pair")
        name, value = item
        if not isinstance(name, str) or not PARAM_NAME.match(name):
            raise ScriptError(
                f"plan parameter name {name!r} is not a name scripts can hold"
            )
        if name in seen:
            raise ScriptError(f"plan parameter {name!r} is given twice")
        seen.add(name)
        _validate_value(value, f"plan parameter {name!r}")


def make_plan(header, programs):
    """Freeze the parts into a Plan and prove it.

    ``header`` maps the names of :data:`HEADER_FIELDS` to checked values; a plan
    that fails :meth:`~wacoll.plans.plan.Plan.prove` raises PlanError.
    """
    plan = Plan(
        op=header["op"],
        size=header["size"],
        root=header["root"],
        counts=tuple(header["counts"]),
        programs=tuple(map(tuple, programs)),
        clusters=tuple(header["clusters"]),
        level=header["level"],
        itemsize=header["itemsize"],
        family=header["family"],
        algorithm=header["algorithm"],
        params=tuple(header["params"]),
        arithmetic=header.get("arithmetic", "plain"),
    )
    # what one form reads, the other can write: the same refusals for both
    validate_params(plan)
    for name in ("family", "algorithm"):
        quote(header[name], name)
    plan.prove()
    return plan
