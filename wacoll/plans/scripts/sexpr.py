"""S-expression text: the tokenizer and reader under :mod:`wacoll.plans.scripts`.

The lexical syntax is the one :mod:`wacoll.plans.scripts` documents: parentheses,
integers, floats, symbols and double-quoted strings, ``;`` comments. :class:`Source`
turns text into nested :class:`ListNode` and :class:`Atom` (each with its position
in the text), within the limits :data:`MAX_CHARS`, :data:`MAX_DEPTH` and
:data:`MAX_INT`, and reports every fault as a :class:`~wacoll.errors.ScriptError`
with the line and column. It evaluates nothing and knows nothing of plans; its
typed accessors (:meth:`Source.integer`, :meth:`Source.symbol`, ...) let a reader of
some grammar check each atom where it uses it.

Examples
--------
>>> form = Source("(rank 3 (send 1)) ; a comment").parse()
>>> [describe(node) for node in form.items]
["symbol 'rank'", 'integer 3', 'a list']
>>> Source("(rank 03)").parse()
Traceback (most recent call last):
...
wacoll.errors.ScriptError: integer 03 has a leading zero (line 1, column 7)
"""

from __future__ import annotations

import json
import math
import re

from wacoll.errors import ScriptError

__all__ = [
    "MAX_CHARS",
    "MAX_DEPTH",
    "MAX_INT",
    "Atom",
    "ListNode",
    "Source",
    "describe",
    "quote",
    "relocate",
]

#: Longest script or JSON text accepted, in characters.
MAX_CHARS = 1 << 25
#: Deepest nesting of parentheses accepted (a plan needs 4; parameter lists add).
MAX_DEPTH = 16
#: Largest integer accepted (counts, item sizes, groups, parameter values).
MAX_INT = (1 << 63) - 1

_END = r"(?=[ \t\r\n();]|\Z)"
_TOKEN = re.compile(
    r"(?P<skip>[ \t\r\n]+|;[^\n]*)"
    r"|(?P<open>\()|(?P<close>\))"
    r"|(?P<num>-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)"
    + _END
    + r"|(?P<sym>[A-Za-z_][A-Za-z0-9_-]*)"
    + _END
    + r'|(?P<str>"(?:[^"\\\x00-\x1f\x7f]|\\["\\ntr])*")'
    + _END
)
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n", "t": "\t", "r": "\r"}
_UNESCAPES = {v: "\\" + k for k, v in _ESCAPES.items()}
_CONSTANTS = {"true": True, "false": False, "none": None}


class Atom:
    """An integer, float, symbol or string (``kind`` ``"int"``, ``"float"``,
    ``"sym"``, ``"str"``) and where it starts in the text."""

    __slots__ = ("kind", "value", "pos")

    def __init__(self, kind, value, pos):
        self.kind, self.value, self.pos = kind, value, pos


class ListNode:
    """A parenthesised list: its ``items`` and where its ``(`` stands."""

    __slots__ = ("items", "pos")

    def __init__(self, pos):
        self.items, self.pos = [], pos


def describe(node):
    """What ``node`` is, for error messages: ``"a list"``, ``"integer 3"``, ..."""
    if isinstance(node, ListNode):
        return "a list"
    return {"int": "integer", "float": "number", "sym": "symbol", "str": "string"}[
        node.kind
    ] + f" {_show(node)}"


def _show(node):
    if node.kind == "str":
        return json.dumps(node.value)
    return str(node.value) if node.kind != "sym" else f"'{node.value}'"


def quote(text, what):
    """``text`` as a double-quoted string atom; ScriptError if it holds a control
    character (``what`` names it in the message)."""
    out = []
    for ch in text:
        if ch in _UNESCAPES:
            out.append(_UNESCAPES[ch])
        elif ch < " " or ch == "\x7f":
            raise ScriptError(
                f"{what} holds the control character {ch!r}, which scripts cannot hold"
            )
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def relocate(err, prefix):
    """``err`` with ``prefix: `` in front of its message, same line and column."""
    message = str(err)
    if err.line is not None:
        message = message[: -len(f" (line {err.line}, column {err.column})")]
    return ScriptError(f"{prefix}: {message}", line=err.line, column=err.column)


class Source:
    """The text being read: positions to (line, column), the scanner, typed accessors.

    Parameters
    ----------
    text : str
    max_chars : int
        The longest text :meth:`parse` accepts.
    """

    def __init__(self, text, max_chars=MAX_CHARS):
        if not isinstance(text, str):
            raise TypeError(f"script text must be a str, not {type(text).__name__}")
        self.text = text
        self.max_chars = max_chars

    def where(self, pos):
        """The (line, column) of a text position, both from 1."""
        line = self.text.count("\n", 0, pos) + 1
        return line, pos - self.text.rfind("\n", 0, pos)

    def fail(self, at, message):
        """Raise ScriptError at a position or a node."""
        pos = at if isinstance(at, int) else at.pos
        line, column = self.where(pos)
        raise ScriptError(message, line=line, column=column)

    # ------------------------------------------------------------- scanning
    def parse(self):
        """The one top-level form, as nested :class:`ListNode` and :class:`Atom`."""
        text = self.text
        if len(text) > self.max_chars:
            self.fail(
                0,
                f"script is too long ({len(text)} characters; the limit is "
                f"{self.max_chars})",
            )
        stack, top, pos, n = [], None, 0, len(text)
        while pos < n:
            m = _TOKEN.match(text, pos)
            if m is None:
                self._diagnose(pos)
            kind = m.lastgroup
            if kind == "skip":
                pos = m.end()
                continue
            if top is not None:
                self.fail(pos, "unexpected text after the end of the script form")
            if kind == "open":
                if len(stack) >= MAX_DEPTH:
                    self.fail(pos, f"nesting deeper than {MAX_DEPTH} levels")
                node = ListNode(pos)
                if stack:
                    stack[-1].items.append(node)
                stack.append(node)
            elif kind == "close":
                if not stack:
                    self.fail(pos, "unexpected ')' with no '(' open")
                node = stack.pop()
                if not stack:
                    top = node
            else:
                atom = self._atom(kind, m.group(), pos)
                if not stack:
                    self.fail(
                        pos, f"expected '(' to start the script, got {describe(atom)}"
                    )
                stack[-1].items.append(atom)
            pos = m.end()
        if stack:
            self.fail(stack[-1], "unclosed '(': this parenthesis is never closed")
        if top is None:
            self.fail(n, "empty script: expected a (plan ...) or (script ...) form")
        return top

    def _atom(self, kind, token, pos):
        if kind == "sym":
            return Atom("sym", token, pos)
        if kind == "str":
            return Atom(
                "str", re.sub(r"\\(.)", lambda m: _ESCAPES[m.group(1)], token[1:-1]), pos
            )
        digits = token.lstrip("-")
        if "." in token or "e" in token or "E" in token:
            value = float(token)
            if not math.isfinite(value):
                self.fail(pos, f"number {token} is out of range")
            return Atom("float", value, pos)
        if len(digits) > 1 and digits[0] == "0":
            self.fail(pos, f"integer {token} has a leading zero")
        if len(digits) > 19 or int(digits) > MAX_INT:
            self.fail(pos, f"integer {token} is too large (the limit is 2**63 - 1)")
        return Atom("int", int(token), pos)

    def _diagnose(self, pos):
        """Raise the most specific error for text no token matches at ``pos``."""
        text = self.text
        c = text[pos]
        if c == '"':
            self._diagnose_string(pos)
        end = pos
        while end < len(text) and text[end] not in " \t\r\n();":
            end += 1
        word = text[pos:end]
        if c.isdigit() or c == "-":
            self.fail(pos, f"malformed number {word!r}")
        if c.isalpha() or c == "_":
            bad = next(
                (
                    i
                    for i in range(pos, end)
                    if not (text[i].isascii() and (text[i].isalnum() or text[i] in "_-"))
                ),
                pos,
            )
            self.fail(bad, f"unexpected character {text[bad]!r} in symbol")
        self.fail(pos, f"unexpected character {c!r}")

    def _diagnose_string(self, pos):
        text = self.text
        i = pos + 1
        while i < len(text):
            ch = text[i]
            if ch == '"':
                self.fail(i + 1, "expected a space or parenthesis after the string")
            if ch == "\\":
                if i + 1 >= len(text) or text[i + 1] not in _ESCAPES:
                    esc = text[i : i + 2]
                    self.fail(
                        i,
                        f"unknown escape {esc!r} in string (known: "
                        f"\\\\ \\\" \\n \\t \\r)",
                    )
                i += 2
                continue
            if ch < " " or ch == "\x7f":
                self.fail(
                    i, f"control character {ch!r} in string (write \\n, \\t or \\r)"
                )
            i += 1
        self.fail(pos, "unterminated string")

    # -------------------------------------------------------------- atoms
    def symbol(self, node, what):
        """The name of symbol ``node``; ScriptError naming ``what`` otherwise."""
        if not isinstance(node, Atom) or node.kind != "sym":
            self.fail(node, f"{what} must be a symbol, got {describe(node)}")
        return node.value

    def string(self, node, what):
        """The value of string ``node``."""
        if not isinstance(node, Atom) or node.kind != "str":
            self.fail(
                node, f"{what} must be a double-quoted string, got {describe(node)}"
            )
        return node.value

    def integer(self, node, what, lo, hi):
        """The value of integer ``node``, checked to lie in ``lo..hi``."""
        if not isinstance(node, Atom) or node.kind != "int":
            self.fail(node, f"{what} must be an integer, got {describe(node)}")
        value = node.value
        if value < 0 and lo >= 0:
            self.fail(node, f"{what} must not be negative, got {value}")
        if not lo <= value <= hi:
            if hi < lo:
                self.fail(node, f"{what} {value} is out of range (there are none)")
            self.fail(node, f"{what} {value} is out of range {lo}..{hi}")
        return value

    def one(self, form, name):
        """The single argument of field ``(name x)``."""
        args = form.items[1:]
        if len(args) != 1:
            self.fail(form, f"field '{name}' takes exactly one value, got {len(args)}")
        return args[0]

    def head(self, node, what):
        """The keyword that starts a list form."""
        if not isinstance(node, ListNode):
            self.fail(node, f"expected a {what} like (name ...), got {describe(node)}")
        if not node.items:
            self.fail(node, f"empty list where a {what} was expected")
        first = node.items[0]
        if not isinstance(first, Atom) or first.kind != "sym":
            self.fail(first, f"expected a {what} name, got {describe(first)}")
        return first.value

    def value(self, node):
        """A data value: a number, string, ``true``, ``false``, ``none``, or a list of
        values (as a tuple)."""
        if isinstance(node, ListNode):
            return tuple(self.value(item) for item in node.items)
        if node.kind == "sym":
            if node.value not in _CONSTANTS:
                self.fail(
                    node,
                    f"unknown constant '{node.value}' (values are integers, "
                    f"numbers, \"strings\", true, false, none or lists)",
                )
            return _CONSTANTS[node.value]
        return node.value
