r"""Plans as GOAL schedules, the input of the LogGOPSim simulator.

GOAL (Hoefler, Siebert & Lumsdaine, "Group Operation Assembly Language", ICPP 2009)
describes a parallel run as one small program per rank: *send*, *receive* and
*computation* operations with the dependencies between them. LogGOPSim (Hoefler,
Schneider & Lumsdaine, HPDC 2010) simulates such a schedule under the LogGOPS model,
so a plan exported here can be timed against its parameters (``L``, ``o``, ``g``,
``G``, ``O``, ``S``) and compared with the schedules of its own generator. See the
user guide's page *Plans in LogGOPSim* for running the files.

:func:`to_goal` writes every rank's program of a proved plan:

- a ``send`` or ``recv`` per message, ``tag`` ``k`` for the ``k``-th message between
  the two ranks (so LogGOPSim matches exactly the send and receive the plan pairs,
  whatever the arrival order), its size in bytes;
- a ``calc`` per ``combine``, ``copy`` and per combination of a ``recv-combine``,
  whose cost is the bytes it touches times ``combine_ns_per_byte`` or
  ``copy_ns_per_byte`` (rounded up; LogGOPSim's times are nanoseconds with its
  default parameters);
- labels ``sN`` for step ``N`` of the rank's program (``sNc`` for the combination
  of a ``recv-combine``), and dependencies by one of two rules (``order``):

  ``"program"`` (default): as wacoll's executor runs a plan. Receives are posted at
  the start (no dependency); a send starts when the rank reaches it (it
  ``requires`` the steps before it and ``irequires`` a send just before it: that
  send need only have started); a combination or copy waits for the steps before
  it and for the earlier sends that still read the blocks it overwrites.

  ``"data"``: only the blocks' data flow, the most overlap the plan allows: a step
  ``requires`` the last step that wrote each block it reads, and a write waits for
  the earlier writer of its blocks and for the sends that read them.

Messages of no bytes (a barrier's) are written as ``empty_message_bytes`` (default
1: LogGOPSim charges ``(s - 1) G`` on an unsigned size ``s``).

:func:`from_goal` reads GOAL text strictly (data, never evaluated): the grammar
below, every label defined once per rank and before a dependency names it, no cycle
among a rank's dependencies, peers within ``num_ranks``, and, in a schedule without
wildcards, every send matched by a receive of the same size (by source,
destination and tag). A fault raises :class:`~wacoll.errors.ScriptError` with its
line. It keeps comments, labels and the order of every line, so it round-trips what
:func:`to_goal` writes: ``to_goal(from_goal(text)) == text``.

Grammar (one statement per line; blank lines anywhere)::

    file      := comment* "num_ranks" N block+
    block     := comment* "rank" R "{" (statement | comment)* "}"
    statement := [LABEL ":"] "send" SIZE "b" "to" PEER ["tag" TAG] ["cpu" C] ["nic" C]
               | [LABEL ":"] "recv" SIZE "b" "from" SOURCE ["tag" TAG] ["cpu" C] ["nic" C]
               | [LABEL ":"] "calc" TIME ["cpu" C]
               | LABEL ("requires" | "irequires") LABEL
    comment   := "//" text to the end of the line
               | "/*" text, over lines, "*/"      ; nothing after it on its line

``LABEL`` is ``[A-Za-z][A-Za-z0-9_]*`` but not a statement keyword; ``SOURCE`` and a
receive's ``TAG`` may be ``-1`` (any); numbers are decimal, at most 20 digits;
``C`` is at most 255. LogGOPSim's own reader (``txt2bin``) accepts this language and
a few spellings more (``8 b``-style sizes are read here too); every rank
``0 .. num_ranks - 1`` has one block.

Examples
--------
>>> from wacoll import Topology
>>> from wacoll.plans import build
>>> plan = build("allreduce", Topology.single(2), "modern", count=4, itemsize=8)
>>> text = to_goal(plan)
>>> print(text[text.index("num_ranks"):])
num_ranks 2
<BLANKLINE>
rank 0 {
s0: calc 7
s1: send 32b to 1 tag 0
s1 requires s0
s2: recv 32b from 1 tag 0
s2c: calc 10
s2c requires s2
s2c requires s1
}
<BLANKLINE>
rank 1 {
s0: calc 7
s1: send 32b to 0 tag 0
s1 requires s0
s2: recv 32b from 0 tag 0
s2c: calc 10
s2c requires s2
s2c requires s1
}
<BLANKLINE>
>>> schedule = from_goal(text)
>>> schedule.messages, schedule.bytes, to_goal(schedule) == text
(2, 64, True)
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from wacoll.datafile import read_text
from wacoll.errors import PlanError, ScriptError

__all__ = [
    "GoalOp",
    "GoalDep",
    "GoalComment",
    "GoalRank",
    "GoalSchedule",
    "to_goal",
    "goal_schedule",
    "from_goal",
    "save_goal",
    "load_goal",
    "ORDERS",
]

#: The dependency rules of :func:`to_goal`.
ORDERS = ("program", "data")

#: Words that begin a statement: no label may be one of them.
KEYWORDS = frozenset({"send", "recv", "calc", "rank", "num_ranks"})
_MAX_DIGITS = 20
_MAX_U64, _MAX_U32, _MAX_U8 = 2**64 - 1, 2**32 - 2, 255
ANY = -1


@dataclass(frozen=True)
class GoalOp:
    """One operation: ``kind`` ``"send"`` (``size`` bytes to ``peer``), ``"recv"``
    (from ``peer``, -1 for any source) or ``"calc"`` (``size`` time units). ``tag``
    -1 is any tag (receives only); ``tag``, ``cpu`` and ``nic`` None are not
    written. ``line`` is where it was read (0 when made here)."""

    label: str | None
    kind: str
    size: int
    peer: int | None = None
    tag: int | None = None
    cpu: int | None = None
    nic: int | None = None
    line: int = field(default=0, compare=False, repr=False)

    def text(self) -> str:
        head = f"{self.label}: " if self.label is not None else ""
        if self.kind == "calc":
            body = f"calc {self.size}"
        else:
            body = (
                f"{self.kind} {self.size}b {'to' if self.kind == 'send' else 'from'} "
                f"{self.peer}"
            )
            if self.tag is not None:
                body += f" tag {self.tag}"
        if self.cpu is not None:
            body += f" cpu {self.cpu}"
        if self.nic is not None:
            body += f" nic {self.nic}"
        return head + body


@dataclass(frozen=True)
class GoalDep:
    """``label`` ``kind`` (``"requires"``: may start once ``on`` has finished;
    ``"irequires"``: once ``on`` has started) ``on``."""

    label: str
    kind: str
    on: str
    line: int = field(default=0, compare=False, repr=False)

    def text(self) -> str:
        return f"{self.label} {self.kind} {self.on}"


@dataclass(frozen=True)
class GoalComment:
    """A comment as written, delimiters included (a ``/* */`` one may span lines)."""

    body: str

    def text(self) -> str:
        return self.body


@dataclass(frozen=True)
class GoalRank:
    """One rank's block: the comments before it and its items (operations,
    dependencies and comments) in file order."""

    rank: int
    items: tuple
    comments: tuple = ()

    @property
    def ops(self) -> tuple:
        return tuple(x for x in self.items if isinstance(x, GoalOp))

    @property
    def deps(self) -> tuple:
        return tuple(x for x in self.items if isinstance(x, GoalDep))


@dataclass(frozen=True)
class GoalSchedule:
    """A GOAL schedule: ``num_ranks``, the rank blocks in file order, the comments
    before ``num_ranks`` and after the last block."""

    num_ranks: int
    ranks: tuple
    comments: tuple = ()
    trailer: tuple = ()

    def _ops(self, kind):
        return [op for rank in self.ranks for op in rank.ops if op.kind == kind]

    @property
    def messages(self) -> int:
        """Send operations (each one message)."""
        return len(self._ops("send"))

    @property
    def bytes(self) -> int:
        """Bytes of all sends."""
        return sum(op.size for op in self._ops("send"))

    @property
    def calc(self) -> int:
        """Time units of all computation."""
        return sum(op.size for op in self._ops("calc"))

    def text(self) -> str:
        """The schedule as GOAL text (what :func:`to_goal` returns)."""
        lines = [c.text() for c in self.comments]
        lines += [f"num_ranks {self.num_ranks}", ""]
        for block in self.ranks:
            lines += [c.text() for c in block.comments]
            lines.append(f"rank {block.rank} {{")
            lines += [item.text() for item in block.items]
            lines += ["}", ""]
        lines += [c.text() for c in self.trailer]
        return "\n".join(lines) + ("\n" if self.trailer else "")

    __str__ = text


# ---------------------------------------------------------------------- writing
def to_goal(plan, **options) -> str:
    """``plan`` as GOAL text; ``options`` as :func:`goal_schedule` takes them. A
    :class:`GoalSchedule` (say, from :func:`from_goal`) is written as it is.

    Raises
    ------
    PlanError
        If ``plan`` is not a plan wacoll can write, or fails its check.
    """
    if isinstance(plan, GoalSchedule):
        if options:
            raise PlanError(
                f"a GOAL schedule is written as it is; got options "
                f"{', '.join(sorted(options))}"
            )
        return plan.text()
    return goal_schedule(plan, **options).text()


def _rate(name, value):
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
    ):
        raise PlanError(f"{name} must be a finite number >= 0, got {value!r}")
    return value


def goal_schedule(
    plan,
    *,
    order="program",
    combine_ns_per_byte=0.3,
    copy_ns_per_byte=0.2,
    empty_message_bytes=1,
) -> GoalSchedule:
    """The :class:`GoalSchedule` of a proved ``plan`` (see the module docstring).

    Parameters
    ----------
    plan : Plan
        A whole plan (a rank's part of one, :class:`~wacoll.plans.builder.RankPlan`,
        stands for the plan it belongs to); proved first.
    order : {"program", "data"}
        The dependency rule: as the executor runs the program, or the data flow.
    combine_ns_per_byte, copy_ns_per_byte : float
        Cost of a combination and of a copy per byte they write (the defaults are
        about a memory-bound kernel on a current core).
    empty_message_bytes : int
        The size written for a message of no bytes.
    """
    from wacoll.plans.plan import Plan

    if hasattr(plan, "whole") and not isinstance(plan, Plan):
        plan = plan.whole()
    if not isinstance(plan, Plan):
        raise PlanError(f"GOAL export needs a wacoll plan, got {type(plan).__name__}")
    if order not in ORDERS:
        raise PlanError(f"order must be one of {', '.join(ORDERS)}, got {order!r}")
    rates = {
        "combine": _rate("combine_ns_per_byte", combine_ns_per_byte),
        "copy": _rate("copy_ns_per_byte", copy_ns_per_byte),
    }
    if (
        isinstance(empty_message_bytes, bool)
        or not isinstance(empty_message_bytes, int)
        or empty_message_bytes < 0
    ):
        raise PlanError(
            f"empty_message_bytes must be an integer >= 0, got {empty_message_bytes!r}"
        )
    plan.prove()
    tags = {}
    for m in plan.messages():
        tags[("send", m.src, m.send_step)] = m.index
        tags[("recv", m.dst, m.recv_step)] = m.index
    programs = plan.programs
    ranks = tuple(
        GoalRank(
            r, _rank_items(plan, r, programs[r], tags, order, rates, empty_message_bytes)
        )
        for r in range(plan.size)
    )
    return GoalSchedule(
        plan.size, ranks, _header(plan, order, rates, empty_message_bytes)
    )


def _header(plan, order, rates, empty):
    what = f"{plan.op} on {plan.size} ranks"
    if plan.root is not None:
        what += f", root {plan.root}"
    if plan.level is not None:
        what += f", level {plan.level}"
    if plan.family:
        what += f" ({plan.family}/{plan.algorithm})"
    rule = {
        "program": "program order, as wacoll's executor runs the plan "
        "(receives posted at the start)",
        "data": "the blocks' data flow only",
    }[order]
    return tuple(
        GoalComment(f"// {line}")
        for line in (
            f"wacoll plan: {what}; {plan.nblocks} blocks, {plan.total_bytes} bytes",
            f"dependencies: {rule}",
            f"calc: combine {rates['combine']:g}, copy {rates['copy']:g} per byte; "
            f"messages of no bytes written as {empty}b",
            "labels: sN is step N of the rank's program, sNc the combination of a "
            "recv-combine",
        )
    )


def _rank_items(plan, rank, program, tags, order, rates, empty):
    """One rank's operations and dependencies, in program order."""
    items = []
    writer = {}  # (buffer, block) -> the label of its last write
    readers = {}  # (buffer, block) -> the sends that read it since that write
    ahead = {}  # program order: what the next operation waits for (label -> kind)
    program_order = order == "program"

    def size_of(step):
        n = plan.nbytes(step.blocks)
        return n if n else empty

    def add_deps(label, deps):
        for on, kind in deps.items():
            if on != label:
                items.append(GoalDep(label, kind, on))

    def writers_of(buf, blocks, into):
        for b in blocks:
            w = writer.get((buf, b))
            if w is not None:
                into[w] = "requires"

    def war(buf, blocks, into):
        for b in blocks:
            for s in readers.get((buf, b), ()):
                into[s] = "requires"

    def wrote(buf, blocks, label):
        for b in blocks:
            writer[(buf, b)] = label
            readers.pop((buf, b), None)

    for i, step in enumerate(program):
        kind, label, blocks = step.kind, f"s{i}", step.blocks
        if kind == "send":
            items.append(
                GoalOp(label, "send", size_of(step), step.peer, tags[("send", rank, i)])
            )
            deps = dict(ahead) if program_order else {}
            if not program_order:
                writers_of(step.src, blocks, deps)
            add_deps(label, deps)
            for b in blocks:
                readers.setdefault((step.src, b), []).append(label)
            if program_order:
                ahead = {label: "irequires"}
            continue
        if kind in ("recv", "recv_combine"):
            items.append(
                GoalOp(label, "recv", size_of(step), step.peer, tags[("recv", rank, i)])
            )
            if kind == "recv":
                if program_order:  # the step ends when its message is in place
                    ahead[label] = "requires"
                    war(step.dst, blocks, ahead)
                wrote(step.dst, blocks, label)
                continue
            deps = {label: "requires"}
            rate, calc_label = rates["combine"], f"{label}c"
        else:
            deps, rate, calc_label = {}, rates[kind], label
        items.append(GoalOp(calc_label, "calc", math.ceil(plan.nbytes(blocks) * rate)))
        if program_order:
            deps.update(ahead)
        else:
            if kind in ("copy", "combine"):
                writers_of(step.src, blocks, deps)
            writers_of(step.dst, blocks, deps)
        war(step.dst, blocks, deps)
        add_deps(calc_label, deps)
        wrote(step.dst, blocks, calc_label)
        if program_order:
            ahead = {calc_label: "requires"}
    return tuple(items)


def save_goal(plan, path, **options) -> Path:
    """Write :func:`to_goal`'s text to ``path``; returns the path."""
    path = Path(path)
    path.write_text(to_goal(plan, **options))
    return path


#: The longest GOAL file :func:`load_goal` reads, in bytes.
MAX_GOAL_BYTES = 1 << 30


def load_goal(path) -> GoalSchedule:
    """:func:`from_goal` of a file's text (a regular file of UTF-8 of at most
    :data:`MAX_GOAL_BYTES`: a FIFO or a device is refused, never waited on)."""
    return from_goal(read_text(path, ScriptError, "the GOAL file", MAX_GOAL_BYTES))


# ---------------------------------------------------------------------- reading
_W = r"[ \t]"
_INT = rf"(-1|\d{{1,{_MAX_DIGITS}}})"
_UINT = rf"(\d{{1,{_MAX_DIGITS}}})"
_LABEL = r"([A-Za-z][A-Za-z0-9_]*)"
_OPTS = (
    rf"(?:{_W}+tag{_W}+{_INT})?(?:{_W}+cpu{_W}+{_UINT})?"
    rf"(?:{_W}+nic{_W}+{_UINT})?"
)
_RE = {
    "blank": re.compile(rf"{_W}*"),
    "num_ranks": re.compile(rf"{_W}*num_ranks{_W}+{_UINT}{_W}*"),
    "rank": re.compile(rf"{_W}*rank{_W}+{_UINT}{_W}*\{{{_W}*"),
    "close": re.compile(rf"{_W}*\}}{_W}*"),
    "comm": re.compile(
        rf"{_W}*(?:{_LABEL}{_W}*:{_W}*)?(send|recv){_W}+{_UINT}{_W}*b"
        rf"{_W}+(to|from){_W}+{_INT}{_OPTS}{_W}*"
    ),
    "calc": re.compile(
        rf"{_W}*(?:{_LABEL}{_W}*:{_W}*)?calc{_W}+{_UINT}"
        rf"(?:{_W}+cpu{_W}+{_UINT})?{_W}*"
    ),
    "dep": re.compile(rf"{_W}*{_LABEL}{_W}+(requires|irequires){_W}+{_LABEL}{_W}*"),
}


def _fail(message, line, body="") -> NoReturn:
    """Raise ScriptError at ``line``; the column is where its statement starts."""
    raise ScriptError(message, line=line, column=len(body) - len(body.lstrip(" \t")) + 1)


def _number(text, limit, what, where, signed=False):
    if text is None:
        return None
    value = int(text)
    if value == ANY and not signed:
        _fail(f"{what} cannot be -1", *where)
    if value > limit:
        _fail(f"{what} {value} is too large (at most {limit})", *where)
    return value


def _label(text, where):
    if text is not None and text in KEYWORDS:
        _fail(f"{text!r} is a keyword, not a label", *where)
    return text


class _Reader:
    """Line by line: each line is matched whole by one of a few anchored patterns,
    so reading takes time linear in the text."""

    def __init__(self, text):
        if not isinstance(text, str):
            raise ScriptError(f"GOAL text must be a str, got {type(text).__name__}")
        self.lines = text.split("\n")
        if self.lines and self.lines[-1] == "":
            self.lines.pop()
        self.at = 0

    def next(self):
        """``(line number, text)`` of the next line that is not blank, or None."""
        while self.at < len(self.lines):
            self.at += 1
            text = self.lines[self.at - 1].rstrip("\r")
            if "\x00" in text:
                _fail("the text holds a NUL character", self.at)
            if not _RE["blank"].fullmatch(text):
                return self.at, text
        return None

    def comment(self, start, text):
        """The comment that starts on this line, or None if it holds none."""
        body = text.lstrip(" \t")
        if body.startswith("//"):
            return GoalComment(body)
        if not body.startswith("/*"):
            return None
        parts = [body]
        while "*/" not in parts[-1][2 if len(parts) == 1 else 0 :]:
            if self.at >= len(self.lines):
                _fail("a /* comment is never closed", start)
            self.at += 1
            parts.append(self.lines[self.at - 1].rstrip("\r"))
        last = parts[-1]
        end = last.index("*/", 2 if len(parts) == 1 else 0) + 2
        if last[end:].strip(" \t"):
            _fail("nothing may follow a */ on its line", self.at)
        return GoalComment("\n".join(parts))


def from_goal(text) -> GoalSchedule:
    """Read GOAL ``text`` strictly (see the module docstring).

    Raises
    ------
    ScriptError
        With the line of the first fault.

    Examples
    --------
    >>> schedule = from_goal('''num_ranks 2
    ... rank 0 {
    ... l1: send 8b to 1 tag 0
    ... }
    ... rank 1 {
    ... l1: recv 8b from 0 tag 0
    ... l2: calc 100
    ... l2 requires l1
    ... }''')
    >>> [op.kind for rank in schedule.ranks for op in rank.ops]
    ['send', 'recv', 'calc']
    >>> from_goal("num_ranks 1\\nrank 0 {\\nl1: calc 5\\nl1 requires l2\\n}")
    Traceback (most recent call last):
    ...
    wacoll.errors.ScriptError: l1 requires l2, which is not defined before (line 4, column 1)
    """
    reader = _Reader(text)
    header, num_ranks, blocks, pending = [], None, [], []
    seen: dict[int, int] = {}  # rank -> the line of its block
    while True:
        got = reader.next()
        if got is None:
            break
        line, body = got
        where = (line, body)
        comment = reader.comment(line, body)
        if comment is not None:
            pending.append(comment)
            continue
        m = _RE["num_ranks"].fullmatch(body)
        if m:
            if num_ranks is not None:
                _fail("num_ranks is given twice", *where)
            num_ranks = _number(m.group(1), _MAX_U32, "num_ranks", where)
            if num_ranks < 1:
                _fail("num_ranks must be at least 1", *where)
            header, pending = pending, []
            continue
        m = _RE["rank"].fullmatch(body)
        if m is None:
            _fail("expected 'num_ranks N', 'rank R {' or a comment", *where)
        if num_ranks is None:
            _fail("num_ranks must come before the first rank", *where)
        rank = _number(m.group(1), _MAX_U32, "rank", where)
        if rank >= num_ranks:
            _fail(f"rank {rank} is not below num_ranks {num_ranks}", *where)
        if rank in seen:
            _fail(f"rank {rank} is given twice (first on line {seen[rank]})", *where)
        seen[rank] = line
        blocks.append(
            GoalRank(rank, _read_block(reader, line, num_ranks), tuple(pending))
        )
        pending = []
    if num_ranks is None:
        _fail("no num_ranks line", max(1, len(reader.lines)))
    if len(seen) < num_ranks:
        missing = next(r for r in range(num_ranks) if r not in seen)
        _fail(
            f"rank {missing} has no block (num_ranks is {num_ranks})",
            max(1, len(reader.lines)),
        )
    schedule = GoalSchedule(num_ranks, tuple(blocks), tuple(header), tuple(pending))
    _validate_matching(schedule)
    return schedule


def _read_block(reader, opened, num_ranks):
    items, labels = [], {}
    while True:
        got = reader.next()
        if got is None:
            _fail("the rank block opened here is never closed", opened)
        line, body = got
        where = (line, body)
        comment = reader.comment(line, body)
        if comment is not None:
            items.append(comment)
            continue
        if _RE["close"].fullmatch(body):
            break
        m = _RE["comm"].fullmatch(body)
        if m:
            label, kind = _label(m.group(1), where), m.group(2)
            if (kind == "send") != (m.group(4) == "to"):
                _fail(f"a {kind} takes '{'to' if kind == 'send' else 'from'}'", *where)
            peer = _number(m.group(5), _MAX_U32, "peer", where, signed=kind == "recv")
            if peer >= num_ranks:
                _fail(f"peer {peer} is not below num_ranks {num_ranks}", *where)
            op = GoalOp(
                label,
                kind,
                _number(m.group(3), _MAX_U64, "size", where),
                peer,
                _number(m.group(6), _MAX_U32, "tag", where, signed=kind == "recv"),
                _number(m.group(7), _MAX_U8, "cpu", where),
                _number(m.group(8), _MAX_U8, "nic", where),
                line,
            )
        else:
            m = _RE["calc"].fullmatch(body)
            if m:
                op = GoalOp(
                    _label(m.group(1), where),
                    "calc",
                    _number(m.group(2), _MAX_U64, "time", where),
                    cpu=_number(m.group(3), _MAX_U8, "cpu", where),
                    line=line,
                )
            else:
                m = _RE["dep"].fullmatch(body)
                if m is None:
                    _fail(
                        "expected a send, recv or calc, a dependency, a comment or '}'",
                        *where,
                    )
                first, kind, on = m.groups()
                if first not in labels:
                    _fail(f"{first} is not defined before this dependency", *where)
                if on not in labels:
                    _fail(f"{first} {kind} {on}, which is not defined before", *where)
                items.append(GoalDep(first, kind, on, line))
                continue
        if op.label is not None:
            if op.label in labels:
                _fail(
                    f"label {op.label} is defined twice in this rank (first on line "
                    f"{labels[op.label]})",
                    *where,
                )
            labels[op.label] = line
        items.append(op)
    _validate_acyclic(items)
    return tuple(items)


def _validate_acyclic(items):
    """No cycle among a rank's dependencies (LogGOPSim would never start them)."""
    after = {}
    for dep in items:
        if isinstance(dep, GoalDep):
            after.setdefault(dep.on, []).append(dep)
    need = {}
    for dep in items:
        if isinstance(dep, GoalDep):
            need[dep.label] = need.get(dep.label, 0) + 1
    ready = [
        x.label
        for x in items
        if isinstance(x, GoalOp) and x.label is not None and not need.get(x.label)
    ]
    while ready:
        label = ready.pop()
        for dep in after.get(label, ()):
            need[dep.label] -= 1
            if not need[dep.label]:
                ready.append(dep.label)
    stuck = [dep for dep in items if isinstance(dep, GoalDep) and need.get(dep.label)]
    if stuck:
        _fail(f"the dependencies of {stuck[0].label} form a cycle", stuck[0].line)


def _validate_matching(schedule):
    """Without wildcards, every send meets a receive of its size (source,
    destination and tag; in order)."""
    sends, recvs = {}, {}
    for block in schedule.ranks:
        for op in block.ops:
            if op.kind == "calc":
                continue
            if op.peer == ANY or op.tag == ANY:
                return
            tag = op.tag or 0
            if op.kind == "send":
                sends.setdefault((block.rank, op.peer, tag), []).append(op)
            else:
                recvs.setdefault((op.peer, block.rank, tag), []).append(op)
    for key in sorted(set(sends) | set(recvs)):
        out, into = sends.get(key, []), recvs.get(key, [])
        for s, r in zip(out, into):
            if s.size != r.size:
                _fail(
                    f"rank {key[1]} receives {r.size}b from {key[0]} (tag {key[2]}), "
                    f"whose matching send carries {s.size}b (line {s.line})",
                    r.line,
                )
        if len(out) > len(into):
            _fail(
                f"rank {key[0]} sends to {key[1]} (tag {key[2]}), which never "
                f"receives it",
                out[len(into)].line,
            )
        if len(into) > len(out):
            _fail(
                f"rank {key[1]} receives from {key[0]} (tag {key[2]}), which never "
                f"sends it",
                into[len(out)].line,
            )
