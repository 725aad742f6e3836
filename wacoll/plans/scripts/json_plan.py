"""The JSON form of a plan: :func:`to_json` and the strict reader behind ``from_json``.

The shape is that of :meth:`wacoll.plans.plan.Plan.to_dict`, one step a line.
:func:`read_json` checks every field (unknown or missing fields, duplicate keys,
``NaN`` and ``Infinity`` are errors) and names the path of the faulty field, as in
``programs[2][0].peer``; :func:`wacoll.plans.scripts.from_json` is its public face.
"""

from __future__ import annotations

import json
import math

from wacoll.errors import ScriptError
from wacoll.plans.operations import ARITHMETICS, LEVELS, OPERATIONS
from wacoll.plans.plan import STEP_KINDS, Plan, Step
from wacoll.plans.scripts.fields import (
    BUFFER,
    MAX_SIZE,
    PARAM_NAME,
    PEER_KINDS,
    make_plan,
    validate_params,
)
from wacoll.plans.scripts.limits import Budget, cell_budget, plan_cells, step_cost
from wacoll.plans.scripts.sexpr import MAX_CHARS, MAX_DEPTH, MAX_INT
from wacoll.strict_json import loads_strict

__all__ = ["to_json", "read_json"]

_JSON_KEYS = (
    "op",
    "size",
    "root",
    "counts",
    "clusters",
    "level",
    "itemsize",
    "family",
    "algorithm",
    "params",
    "programs",
)
#: Keys written only when they differ from their default ("arithmetic": "plain").
_OPTIONAL = ("arithmetic",)
_JSON_STEP_KEYS = ("kind", "blocks", "peer", "src", "dst", "side", "group")


def to_json(plan: Plan) -> str:
    """The plan as JSON text, in the shape of :meth:`Plan.to_dict`, one step a line.

    Examples
    --------
    >>> from wacoll import Topology
    >>> from wacoll.plans import build
    >>> plan = build("bcast", Topology.single(2), "tree", tree="flat")
    >>> print(to_json(plan), end="")
    {
      "op": "bcast",
      "size": 2,
      "root": 0,
      "counts": [1],
      "clusters": [0, 0],
      "level": null,
      "itemsize": 1,
      "family": "tree",
      "algorithm": "flat",
      "params": [["segments", 1], ["tree", "flat"]],
      "programs": [
        [{"kind": "send", "blocks": [0], "peer": 1, "src": "out"}],
        [{"kind": "recv", "blocks": [0], "peer": 0, "dst": "out"}]
      ]
    }
    >>> from wacoll.plans.scripts import from_json
    >>> from_json(to_json(plan)) == plan
    True
    """
    validate_params(plan)
    data = plan.to_dict()
    dump = lambda v: json.dumps(v, allow_nan=False)  # noqa: E731
    lines = ["{"]
    lines += [
        f"  {dump(k)}: {dump(data[k])}," for k in _JSON_KEYS[:-1] + _OPTIONAL if k in data
    ]
    lines.append('  "programs": [')
    for r, steps in enumerate(data["programs"]):
        comma = "," if r + 1 < len(data["programs"]) else ""
        lines.append("    [" + ",\n     ".join(dump(s) for s in steps) + "]" + comma)
    lines += ["  ]", "}"]
    return "\n".join(lines) + "\n"


def _show(value):
    """A short description of a decoded JSON value, for messages (never recursive)."""
    if isinstance(value, list):
        return f"an array of {len(value)} items"
    if isinstance(value, dict):
        return f"an object of {len(value)} fields"
    if isinstance(value, str) and len(value) > 40:
        value = value[:37] + "..."
    return json.dumps(value)


class _JsonReader:
    """Strict validation of the JSON shape; errors name the field's path."""

    def __init__(self, budget):
        self.budget = budget

    def fail(self, where, message):
        raise ScriptError(f"{where}: {message}")

    def charge(self, where, cells, what):
        if not self.budget.spend(cells):
            self.fail(where, self.budget.refusal(what, cells))

    def integer(self, value, where, lo, hi):
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(where, f"must be an integer, got {_show(value)}")
        if not lo <= value <= hi:
            self.fail(where, f"{value} is out of range {lo}..{hi}")
        return value

    def string(self, value, where):
        if not isinstance(value, str):
            self.fail(where, f"must be a string, got {_show(value)}")
        return value

    def array(self, value, where):
        if not isinstance(value, list):
            self.fail(where, f"must be an array, got {_show(value)}")
        return value

    def keys(self, obj, where, allowed, required):
        if not isinstance(obj, dict):
            self.fail(where, f"must be an object, got {_show(obj)}")
        for k in obj:
            if k not in allowed:
                self.fail(where, f"unknown field {k!r}")
        for k in required:
            if k not in obj:
                self.fail(where, f"missing field {k!r}")

    def value(self, value, where, depth=0):
        if depth > MAX_DEPTH:
            self.fail(where, "nested too deeply")
        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, float):
            if not math.isfinite(value):
                self.fail(where, f"{value} is not a finite number")
            return value
        if isinstance(value, int):
            return self.integer(value, where, -MAX_INT, MAX_INT)
        if isinstance(value, list):
            return tuple(
                self.value(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)
            )
        self.fail(where, "must be an integer, number, string, boolean, null or array")

    def header(self, data):
        self.keys(data, "plan", _JSON_KEYS + _OPTIONAL, _JSON_KEYS)
        op = self.string(data["op"], "op")
        if op not in OPERATIONS:
            self.fail("op", f"unknown operation {op!r}")
        spec = OPERATIONS[op]
        size = self.integer(data["size"], "size", 1, MAX_SIZE)
        root = data["root"]
        if spec.rooted:
            self.integer(root, "root", 0, size - 1)
        elif root is not None:
            self.fail("root", f"{op} has no root; it must be null")
        level = data["level"]
        if spec.kind == "reduction":
            if level not in LEVELS:
                self.fail(
                    "level", f"must be one of {', '.join(LEVELS)}, got {_show(level)}"
                )
        elif level is not None:
            self.fail("level", f"{op} is not a reduction; it must be null")
        counts = tuple(
            self.integer(c, f"counts[{i}]", 0, MAX_INT)
            for i, c in enumerate(self.array(data["counts"], "counts"))
        )
        clusters = tuple(
            self.integer(c, f"clusters[{i}]", 0, MAX_INT)
            for i, c in enumerate(self.array(data["clusters"], "clusters"))
        )
        if len(clusters) != size:
            self.fail("clusters", f"names {len(clusters)} ranks; the size is {size}")
        self.charge(
            "size",
            plan_cells(op, size, len(counts)),
            f"this {op} plan on {size} ranks with {len(counts)} blocks",
        )
        params, seen = [], set()
        for i, pair in enumerate(self.array(data["params"], "params")):
            where = f"params[{i}]"
            if not isinstance(pair, list) or len(pair) != 2:
                self.fail(where, "must be a [name, value] pair")
            name = self.string(pair[0], where)
            if not PARAM_NAME.match(name) or name in seen:
                self.fail(where, f"invalid or repeated parameter name {name!r}")
            seen.add(name)
            params.append((name, self.value(pair[1], f"{where}[1]")))
        arithmetic = data.get("arithmetic", "plain")
        if arithmetic not in ARITHMETICS:
            self.fail(
                "arithmetic",
                f"must be one of {', '.join(ARITHMETICS)}, got {_show(arithmetic)}",
            )
        if arithmetic != "plain" and level is None:
            self.fail("arithmetic", f"{op} is not a reduction; it must be 'plain'")
        return {
            "op": op,
            "size": size,
            "root": root,
            "level": level,
            "arithmetic": arithmetic,
            "itemsize": self.integer(data["itemsize"], "itemsize", 1, MAX_INT),
            "counts": counts,
            "clusters": clusters,
            "family": self.string(data["family"], "family"),
            "algorithm": self.string(data["algorithm"], "algorithm"),
            "params": tuple(params),
        }

    def step(self, obj, where, size, nblocks):
        self.keys(obj, where, _JSON_STEP_KEYS, ("kind", "blocks"))
        kind = obj["kind"]
        if kind not in STEP_KINDS:
            self.fail(
                f"{where}.kind",
                f"unknown step kind {_show(kind)}; known: {', '.join(STEP_KINDS)}",
            )
        named = self.array(obj["blocks"], f"{where}.blocks")
        self.charge(where, len(named) * self.cost, f"this step (of {len(named)} blocks)")
        blocks = tuple(
            self.integer(b, f"{where}.blocks[{i}]", 0, nblocks - 1)
            for i, b in enumerate(named)
        )
        wanted = {
            "peer": kind in PEER_KINDS,
            "src": kind in ("send", "copy", "combine"),
            "dst": kind != "send",
            "side": kind in ("recv_combine", "combine"),
        }
        values = {}
        for name, needed in wanted.items():
            if needed and name not in obj:
                self.fail(where, f"{kind} step needs field {name!r}")
            if not needed and name in obj:
                self.fail(where, f"{kind} step takes no field {name!r}")
            if not needed:
                continue
            value = obj[name]
            if name == "peer":
                value = self.integer(value, f"{where}.peer", 0, size - 1)
            elif name == "side":
                if value not in ("left", "right"):
                    self.fail(
                        f"{where}.side", f"must be 'left' or 'right', got {_show(value)}"
                    )
            elif not isinstance(value, str) or not BUFFER.match(value):
                self.fail(f"{where}.{name}", f"invalid buffer name {_show(value)}")
            values[name] = value
        group = 0
        if "group" in obj:
            if kind != "recv_combine":
                self.fail(where, f"{kind} step takes no field 'group'")
            group = self.integer(obj["group"], f"{where}.group", 1, MAX_INT)
        return Step(kind, blocks, group=group, **values)

    def plan(self, data):
        header = self.header(data)
        size, nblocks = header["size"], len(header["counts"])
        self.cost = step_cost(header["op"], size)
        programs = self.array(data["programs"], "programs")
        if len(programs) != size:
            self.fail("programs", f"has {len(programs)} programs for {size} ranks")
        steps = [
            [
                self.step(s, f"programs[{r}][{i}]", size, nblocks)
                for i, s in enumerate(self.array(prog, f"programs[{r}]"))
            ]
            for r, prog in enumerate(programs)
        ]
        return make_plan(header, steps)


def read_json(
    text: str, max_chars: int = MAX_CHARS, budget: Budget | None = None
) -> Plan:
    """Read, check and prove a plan from JSON text of at most ``max_chars`` characters,
    within ``budget`` cells of work (by default its length's, see
    :mod:`~wacoll.plans.scripts.limits`)."""
    if not isinstance(text, str):
        raise TypeError(f"JSON text must be a str, not {type(text).__name__}")
    if len(text) > max_chars:
        raise ScriptError(
            f"JSON text is too long ({len(text)} characters; the limit is {max_chars})"
        )
    try:
        data = loads_strict(text, ScriptError)
    except json.JSONDecodeError as e:
        raise ScriptError(
            f"invalid JSON: {e.msg}", line=e.lineno, column=e.colno
        ) from None
    except RecursionError:
        raise ScriptError("JSON nested too deeply") from None
    except ScriptError:
        raise
    except ValueError as e:  # an integer of more digits than Python converts
        reason = str(e).split(":")[0]
        raise ScriptError(f"invalid JSON: a number too long to read ({reason})") from None
    if budget is None:
        budget = Budget(cell_budget(len(text)))
    return _JsonReader(budget).plan(data)
