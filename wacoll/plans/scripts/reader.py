"""Reading the S-expression forms of :mod:`wacoll.plans.scripts`: plans and rank scripts.

:class:`PlanReader` interprets the form that :class:`~wacoll.plans.scripts.sexpr.Source`
parses as a whole ``(plan ...)`` (:meth:`PlanReader.read_plan`, proved by
:func:`~wacoll.plans.scripts.fields.make_plan`) or as one rank's ``(script ...)``
(:meth:`PlanReader.read_script`, a :class:`RankScript`), by the grammar in the
docstring of :mod:`wacoll.plans.scripts`. Every fault is a ScriptError at the line
and column of the offending form.

Examples
--------
>>> s = PlanReader("(script (op barrier) (size 2) (counts) (rank 1) (recv 0))").read_script()
>>> s.rank, [str(step) for step in s.program]
(1, ['recv 0 []'])
"""

from __future__ import annotations

from dataclasses import dataclass

from wacoll.plans.operations import ARITHMETICS, LEVELS, OPERATIONS
from wacoll.plans.plan import Step
from wacoll.plans.scripts.fields import (
    ALL_OPTIONS,
    BUFFER,
    HEADER_FIELDS,
    MAX_SIZE,
    PARAM_NAME,
    PEER_KINDS,
    STEP_NAMES,
    STEP_OPTIONS,
    make_plan,
)
from wacoll.plans.scripts.limits import Budget, cell_budget, plan_cells, step_cost
from wacoll.plans.scripts.sexpr import (
    MAX_CHARS,
    MAX_INT,
    Atom,
    ListNode,
    Source,
    describe,
)

__all__ = ["RankScript", "PlanReader"]


@dataclass(frozen=True)
class RankScript:
    """One rank's script, parsed: what PATHS looks up by rank and size.

    Attributes
    ----------
    rank : int
        The rank that runs the script.
    program : tuple of Step
        Its steps, in order.
    header : dict
        The plan fields the script repeats: ``op``, ``size``, ``root``, ``level``,
        ``itemsize``, ``counts``, ``clusters``, ``family``, ``algorithm``, ``params``.
    """

    rank: int
    program: tuple
    header: dict


class PlanReader(Source):
    """Interprets the parsed form as a plan or as one rank's script.

    Parameters
    ----------
    text : str
    max_chars : int
        The longest text accepted.
    budget : Budget, optional
        The cells of work the text may ask for (see
        :mod:`~wacoll.plans.scripts.limits`); by default its length's budget.
    """

    def __init__(self, text, max_chars=MAX_CHARS, budget=None):
        super().__init__(text, max_chars)
        self.budget = budget if budget is not None else Budget(cell_budget(len(text)))

    def charge(self, at, cells, what):
        """Spend ``cells`` of the budget, or raise ScriptError at ``at``."""
        if not self.budget.spend(cells):
            self.fail(at, self.budget.refusal(what, cells))

    # ------------------------------------------------------------- header
    def header_field(self, form, name, fields):
        """Check one header field and record ``fields[name] = (value, form)``."""
        if name in fields:
            self.fail(form, f"duplicate field '{name}'")
        if name == "op":
            op = self.symbol(self.one(form, name), "op")
            if op not in OPERATIONS:
                self.fail(
                    form.items[1],
                    f"unknown operation '{op}'; known: {', '.join(OPERATIONS)}",
                )
            value = op
        elif name == "size":
            value = self.integer(self.one(form, name), "size", 1, MAX_SIZE)
        elif name in ("root", "rank"):
            # range checked once the size is known
            value = self.integer(self.one(form, name), name, 0, MAX_INT)
        elif name == "level":
            value = self.symbol(self.one(form, name), "level")
            if value not in LEVELS:
                self.fail(
                    form.items[1], f"unknown level '{value}'; known: {', '.join(LEVELS)}"
                )
        elif name == "arithmetic":
            value = self.symbol(self.one(form, name), "arithmetic")
            if value not in ARITHMETICS:
                self.fail(
                    form.items[1],
                    f"unknown arithmetic '{value}'; known: {', '.join(ARITHMETICS)}",
                )
        elif name == "itemsize":
            value = self.integer(self.one(form, name), "itemsize", 1, MAX_INT)
        elif name in ("counts", "clusters"):
            what = "block count" if name == "counts" else "cluster id"
            value = tuple(self.integer(x, what, 0, MAX_INT) for x in form.items[1:])
        elif name in ("family", "algorithm"):
            value = self.string(self.one(form, name), name)
        else:  # params
            value = self.params(form)
        fields[name] = (value, form)

    def params(self, form):
        """The ``(name value)`` pairs of a params field, as a tuple."""
        seen, out = set(), []
        for item in form.items[1:]:
            if not isinstance(item, ListNode) or len(item.items) != 2:
                self.fail(item, "a parameter is written (name value)")
            name = self.symbol(item.items[0], "a parameter name")
            if not PARAM_NAME.match(name):
                self.fail(
                    item.items[0],
                    f"invalid parameter name '{name}' (a letter, "
                    f"then letters, digits and _)",
                )
            if name in seen:
                self.fail(item, f"duplicate parameter '{name}'")
            seen.add(name)
            out.append((name, self.value(item.items[1])))
        return tuple(out)

    def finish_header(self, form, fields, script):
        """Check required and forbidden fields; return the plan fields as a dict."""
        required = ("op", "size", "counts") + (("rank",) if script else ())
        for name in required:
            if name not in fields:
                self.fail(form, f"missing field '{name}'")
        op = fields["op"][0]
        size = fields["size"][0]
        spec = OPERATIONS[op]
        if spec.rooted and "root" not in fields:
            self.fail(form, f"missing field 'root' ({op} is a rooted operation)")
        if not spec.rooted and "root" in fields:
            self.fail(fields["root"][1], f"{op} has no root; remove the root field")
        if spec.kind == "reduction" and "level" not in fields:
            self.fail(
                form, f"missing field 'level' ({op} is a reduction: {', '.join(LEVELS)})"
            )
        if spec.kind != "reduction" and "level" in fields:
            self.fail(fields["level"][1], f"{op} is not a reduction and takes no level")
        if spec.kind != "reduction" and "arithmetic" in fields:
            self.fail(
                fields["arithmetic"][1],
                f"{op} is not a reduction and takes no arithmetic",
            )
        for name in ("root", "rank"):
            if name in fields:
                self.integer(fields[name][1].items[1], name, 0, size - 1)
        nblocks = len(fields["counts"][0])
        if script:  # one rank's script: its header repeats the plan's clusters
            self.charge(fields["size"][1], size, f"this script of {op} on {size} ranks")
        else:
            self.charge(
                fields["size"][1],
                plan_cells(op, size, nblocks),
                f"this {op} plan on {size} ranks with {nblocks} blocks",
            )
        clusters = fields.get("clusters", ((0,) * size, form))
        if len(clusters[0]) != size:
            self.fail(
                clusters[1],
                f"clusters names {len(clusters[0])} ranks; the size is {size}",
            )
        return {
            "op": op,
            "size": size,
            "root": fields.get("root", (None,))[0],
            "level": fields.get("level", (None,))[0],
            "arithmetic": fields.get("arithmetic", ("plain",))[0],
            "itemsize": fields.get("itemsize", (1,))[0],
            "counts": fields["counts"][0],
            "clusters": clusters[0],
            "family": fields.get("family", ("",))[0],
            "algorithm": fields.get("algorithm", ("",))[0],
            "params": fields.get("params", ((),))[0],
        }

    # -------------------------------------------------------------- steps
    def step(self, form, header):
        """One step form of a program, as a :class:`~wacoll.plans.plan.Step`."""
        word = self.head(form, "step")
        kind = STEP_NAMES.get(word)
        if kind is None:
            if word in HEADER_FIELDS or word == "rank":
                self.fail(
                    form,
                    f"'{word}' is a header field, not a step; header fields come first",
                )
            self.fail(
                form.items[0],
                f"unknown step kind '{word}'; known: {', '.join(STEP_NAMES)}",
            )
        size, nblocks = header["size"], len(header["counts"])
        rest = form.items[1:]
        peer = None
        if kind in PEER_KINDS:
            if not rest or not isinstance(rest[0], Atom):
                self.fail(
                    rest[0] if rest else form,
                    f"{word} needs a peer rank first, as in ({word} 3)",
                )
            peer = self.integer(rest[0], "peer", 0, size - 1)
            rest = rest[1:]
        opts = self.step_options(rest, word, kind)
        named = len(opts["blocks"].items) - 1 if "blocks" in opts else nblocks
        self.charge(
            form, named * step_cost(header["op"], size), f"this step (of {named} blocks)"
        )
        if "blocks" in opts:
            blocks = tuple(
                self.integer(x, "block", 0, nblocks - 1) for x in opts["blocks"].items[1:]
            )
        else:
            blocks = tuple(range(nblocks))
        src = dst = side = None
        group = 0
        if kind in ("send", "copy", "combine"):
            src = self.buffer(opts, "from", form, word, kind == "send")
        if kind != "send":
            dst = self.buffer(opts, "into", form, word, kind in ("recv", "recv_combine"))
        if kind in ("recv_combine", "combine"):
            side = "right"
            if "side" in opts:
                side = self.symbol(self.one(opts["side"], "side"), "side")
                if side not in ("left", "right"):
                    self.fail(
                        opts["side"].items[1], f"side must be left or right, got '{side}'"
                    )
        if "group" in opts:
            group = self.integer(self.one(opts["group"], "group"), "group", 1, MAX_INT)
        return Step(kind, blocks, peer=peer, src=src, dst=dst, side=side, group=group)

    def step_options(self, items, word, kind):
        """The option forms of a step, by name, each allowed and given once."""
        opts = {}
        for item in items:
            if not isinstance(item, ListNode):
                self.fail(
                    item,
                    f"unexpected {describe(item)} in {word}; options are "
                    f"lists like (blocks 0 1)",
                )
            name = self.head(item, "step option")
            if name not in STEP_OPTIONS[kind]:
                if name in ALL_OPTIONS:
                    self.fail(
                        item,
                        f"option '{name}' is not allowed in {word} (allowed: "
                        f"{', '.join(STEP_OPTIONS[kind])})",
                    )
                self.fail(item.items[0], f"unknown option '{name}' in {word}")
            if name in opts:
                self.fail(item, f"duplicate option '{name}' in {word}")
            opts[name] = item
        return opts

    def buffer(self, opts, name, form, word, defaults_to_out):
        """The buffer of option ``name`` (``from``, ``into``), or its default."""
        if name not in opts:
            if defaults_to_out:
                return "out"
            self.fail(form, f"{word} needs a ({name} BUFFER) option")
        node = self.one(opts[name], name)
        buf = self.symbol(node, f"the buffer of '{name}'")
        if not BUFFER.match(buf):
            self.fail(
                node,
                f"invalid buffer name '{buf}' (a lower-case letter, then "
                f"lower-case letters, digits and _)",
            )
        return buf

    # ------------------------------------------------------------ top level
    def top(self, expect):
        """The top-level form, which must be ``(expect ...)``."""
        form = self.parse()
        word = self.head(form, "plan")
        if word not in ("plan", "script"):
            self.fail(
                form.items[0],
                f"unknown form '{word}'; expected (plan ...) or (script ...)",
            )
        if word != expect:
            hint = (
                "this is one rank's script; reassemble a plan with from_rank_scripts"
                if word == "script"
                else "this is a whole plan; read it with from_sexpr"
            )
            self.fail(form.items[0], f"expected ({expect} ...), got ({word} ...): {hint}")
        return form

    def read_plan(self):
        """The whole plan the text holds, proved."""
        form = self.top("plan")
        fields, header, programs = {}, None, None
        for item in form.items[1:]:
            name = self.head(item, "field")
            if name == "rank":
                if header is None:
                    header = self.finish_header(form, fields, False)
                    programs = [None] * header["size"]
                if len(item.items) < 2:
                    self.fail(item, "a program is written (rank R step ...)")
                r = self.integer(item.items[1], "rank", 0, header["size"] - 1)
                if programs[r] is not None:
                    self.fail(item, f"rank {r} is given twice")
                programs[r] = tuple(self.step(s, header) for s in item.items[2:])
            elif name in HEADER_FIELDS:
                if header is not None:
                    self.fail(item, f"field '{name}' must come before the rank programs")
                self.header_field(item, name, fields)
            else:
                self.fail(item.items[0], f"unknown field '{name}'")
        if header is None:
            header = self.finish_header(form, fields, False)
            programs = [None] * header["size"]
        return make_plan(header, [p or () for p in programs])

    def read_script(self):
        """The one rank's script the text holds (its plan is not checked)."""
        form = self.top("script")
        fields, header, steps = {}, None, []
        for item in form.items[1:]:
            name = self.head(item, "field or step")
            if header is None and (name in HEADER_FIELDS or name == "rank"):
                self.header_field(item, name, fields)
                continue
            if header is None:
                if name not in STEP_NAMES:
                    self.fail(item.items[0], f"unknown field or step '{name}'")
                header = self.finish_header(form, fields, True)
            steps.append(self.step(item, header))
        if header is None:
            header = self.finish_header(form, fields, True)
        rank = fields["rank"][0]
        return RankScript(rank, tuple(steps), header)
