"""A selection that learns from the calls it runs.

The cost model that chooses a call's plan (:func:`wacoll.plans.select`) is only as
good as the link parameters and per-call costs it is given. So, on several clusters,
a communicator also *measures*: for a repeated call of one **shape** (operation,
size class, element type, operator, level and root), its first calls try the
candidates in turn (the selection policy's choice, the MPI library's own collective,
and the family the cost model ranks first among the others that have a plan for
the operation: :func:`explored`), each :data:`ROUNDS` times: every candidate's
first call, then the counted calls in turns, one of each candidate after another
(a disturbance of the machine for a while slows them alike). Each call runs as the
application calls it, with no scheduled start, barrier or agreement of its own, and
each rank times its own run of it: a candidate's first call is read afresh
(:attr:`wacoll.mpi.route.Route.run_seconds`), and its counted calls replay its
compiled call (:mod:`wacoll.mpi.exploring`), as the chosen one's repeated calls
will. After the shape's last
explored call the ranks agree, in one ``Allreduce``, on each call's time on the
slowest rank (a replayed call may return before its check's verdict, as any
repeated call does, and the ranks' skew each call starts with is then what the
loop leaves, alike for every candidate); a candidate's first call, which also proves and compiles its plan,
is not counted, and the fastest median runs the shape's later calls, unless the
selection policy's own choice is within :data:`MARGIN`, :data:`NOISE_FLOOR` or the
spread of the two candidates' calls of it (then that stays).

- The size class of a call of ``n`` bytes per rank is ``n.bit_length()``: counts
  within a factor of two share what was learned (a loop whose counts vary still
  converges).
- Exploration is bounded (:func:`exploration_calls`: 18 calls per shape) and
  visible: :attr:`Tuning.table` lists, per shape, the candidates, the times
  measured, their spread and the choice (``comm.tuning``), and traced calls say
  which family ran.
- Every rank explores in the same order and decides at the same call, from the
  same agreed figures, so all run the same plan.
- The choices can be written to a file (:meth:`Tuning.dump`, ``comm.write_tuning``)
  and read back (``WACOLL_TUNING``, :func:`read_tuning`), so a production run starts
  from what a test run learned: a shape found there is not explored.

Not learned: calls with a family or options forced (by the call or the
communicator), strict reductions (the library does not keep the canonical order),
vector variants, and non-blocking or persistent calls (they run the selection
policy's choice).

Examples
--------
>>> tuning = Tuning(None, rounds=1)
>>> shape = ("allreduce", 4, "<f8", "SUM", None, None)
>>> [tuning.family_for(shape, [None, "native"]) for _ in range(1)]
[(None, True)]
>>> tuning.observe(shape, 0.003, [None, "native"])
>>> tuning.family_for(shape, [None, "native"])
('native', True)
>>> tuning.observe(shape, 0.001)      # one rank: its own figures decide
>>> tuning.family_for(shape, [None, "native"])
('native', False)
>>> tuning.table[0]["chosen"]
'native'
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections import OrderedDict

import numpy as np

from wacoll.errors import TuningError
from wacoll.mpi.bounded import SHAPES, BoundedCache
from wacoll.strict_json import read_strict

__all__ = [
    "ROUNDS",
    "MARGIN",
    "NOISE_FLOOR",
    "DEFAULT",
    "LEARNED_FAMILIES",
    "EXPLORED_FAMILIES",
    "Tuning",
    "TuningError",
    "candidates",
    "explored",
    "exploration_calls",
    "shape_of",
    "read_tuning",
]

#: How many calls of each candidate a shape's exploration makes (the first is not
#: counted: it also proves and compiles the plan).
ROUNDS = 6
#: How much faster (a fraction) another candidate must measure than the selection
#: policy's choice to replace it: candidates within a few per cent of each other are
#: a toss-up, and the cost model's choice wins a toss-up. So does one within the
#: spread of the two candidates' calls (the sum of their half interquartile
#: ranges): on the metro testbed, 8-byte Alltoalls explored MagPIe's plan and the
#: library's collective at medians 1.27-1.45 and 1.28-1.49 ms, and six fresh
#: communicators chose the library three times; timed from a common start, the
#: library's route then took 1.21 ms a call, the plan 1.02-1.06. (It was 0.1 while explored
#: calls started from a barrier, whose skew they counted; from a scheduled start
#: that kept the model's choice on the long-and-fast testbed's 16 MiB Allreduce at
#: 214 ms against gridmpi's 199, 7.5 % slower for every later call.)
MARGIN = 0.03
#: How much faster (seconds) another candidate must also measure than the selection
#: policy's choice to replace it: an explored call's time includes how long its
#: rank waited for the others to come, which on one machine with ranks sharing
#: cores is microseconds to tens of microseconds (measured when explored calls
#: still started from a barrier: 2 ranks on 2 declared clusters with no network,
#: explored calls measured 4-11 us where the replayed calls take 2-4 us, and the
#: library's collective won such explorations by chance, 3.8 us a call in a loop
#: against the plan's 2.6).
NOISE_FLOOR = 50e-6
#: The candidate "the selection policy's choice", as written in tables and files.
DEFAULT = "default"
#: Families a repeated call explores beside the selection's choice and the library's
#: collective, where they have a plan for the operation: today's flat algorithms
#: (MPICH's and Open MPI's choices, and the 2019-2025 ones), Matsuda's wide-area
#: multi-sender algorithms, and a modern family composed inside and between
#: clusters, whose costs the model may misjudge on a network it measured.
LEARNED_FAMILIES = ("modern", "gridmpi", "recent", "hierarchical")
#: How many of the :data:`LEARNED_FAMILIES` a shape explores beside the selection's
#: choice and the library's collective: the ones the cost model ranks first. The
#: model knows the links (measured, or told); what it may misjudge is close calls
#: and this machine's costs, which the few candidates it ranks first settle.
EXPLORED_FAMILIES = 1


def explored(op, predict, own=None):
    """The candidates a repeated call of ``op`` explores, in order: the selection
    policy's choice (None), the MPI library's collective (``"native"``), and the
    :data:`EXPLORED_FAMILIES` of the :func:`candidates` the cost model predicts
    fastest, other than the selection's own family (``own``, default
    ``predict(None)[1]``; ``predict(family)`` gives ``(seconds, family of the
    plan)``; ``inf`` seconds: no plan).

    Examples
    --------
    >>> seconds = {None: 2.0, "native": 3.0, "modern": 5.0, "gridmpi": 1.0,
    ...            "recent": 4.0, "hierarchical": float("inf")}
    >>> explored("allreduce", lambda f: (seconds[f], f or "magpie"))
    [None, 'native', 'gridmpi']
    """
    from wacoll.plans.select import NATIVE

    if own is None:
        own = predict(None)[1]
    others = [f for f in candidates(op)[2:] if f != own]
    priced = sorted((predict(f)[0], i, f) for i, f in enumerate(others))
    return [None, NATIVE] + [
        f for seconds, _, f in priced[:EXPLORED_FAMILIES] if math.isfinite(seconds)
    ]


def _listed(candidates):
    """A shape's candidates, given as a list or as a function that gives them."""
    return candidates() if callable(candidates) else candidates


def candidates(op):
    """The candidates a repeated call of ``op`` may explore, in order: the selection
    policy's choice (None), the MPI library's own collective (``"native"``), and the
    :data:`LEARNED_FAMILIES` with a plan for ``op`` (:func:`explored` picks those
    the cost model ranks first).

    Examples
    --------
    >>> candidates("allreduce")
    [None, 'native', 'modern', 'gridmpi', 'recent', 'hierarchical']
    >>> candidates("alltoall")
    [None, 'native', 'modern']
    """
    from wacoll.plans import builders
    from wacoll.plans.select import NATIVE

    return [None, NATIVE] + [f for f in LEARNED_FAMILIES if op in builders(f)]


def exploration_calls(op: str) -> int:
    """At most how many calls of a shape of ``op`` are explored before its choice
    runs (:data:`ROUNDS` of each of at most ``2 + EXPLORED_FAMILIES`` candidates).

    Examples
    --------
    >>> exploration_calls("allreduce"), exploration_calls("alltoall")
    (18, 18)
    """
    return min(len(candidates(op)), 2 + EXPLORED_FAMILIES) * ROUNDS


_FORMAT = 1
_FIELDS = ("op", "size_class", "dtype", "operator", "level", "root")


def shape_of(prepared):
    """The shape a call's choice is learned for, or None when it is not learned
    (a strict reduction, a vector variant, a call without a count or with count
    0, which moves nothing whatever runs it)."""
    if prepared.level == "strict" or prepared.counts is not None or not prepared.count:
        return None
    from wacoll.mpi.calls import operator_name
    from wacoll.plans.retarget import size_class

    itemsize = 1 if prepared.dtype is None else prepared.dtype.itemsize
    return (
        prepared.op,
        size_class(int(prepared.count), itemsize),
        None if prepared.dtype is None else prepared.dtype.str,
        operator_name(prepared.reduce_op),
        prepared.level,
        prepared.root,
    )


class _Exploration:
    __slots__ = ("candidates", "seconds", "calls", "chosen")

    def __init__(self, candidates):
        self.candidates = list(candidates)
        #: Per candidate, this rank's time (seconds) of each of its explored calls.
        self.seconds = [[] for _ in self.candidates]
        self.calls = 0
        self.chosen = None


class Tuning:
    """A communicator's learned choices.

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm or None
        Where the ranks agree on the measured times (None: this process alone).
    rounds : int
        Calls of each candidate before choosing.
    fixed : mapping, optional
        Shape to family: choices read from a tuning file, not explored.
    """

    def __init__(self, comm, *, rounds: int = ROUNDS, fixed=None):
        self._comm = comm
        self.rounds = rounds
        self._fixed = dict(fixed or {})
        #: Shapes being explored (bounded: every rank explores, and evicts, the same
        #: shapes at the same calls), and the choice of each decided one.
        self._shapes = BoundedCache(SHAPES)
        self._decided: dict[tuple, str] = {}
        #: One row per decided shape: the shape's fields, ``candidates``,
        #: ``seconds`` (the median of each's calls, each on the rank that took
        #: longest over it), ``spread``
        #: (half the interquartile range of each's calls; infinite where some call
        #: could not run) and ``chosen``.
        self.table: list[dict[str, object]] = []

    def family_for(self, shape, candidates):
        """``(family, exploring)`` for the next call of ``shape``: the family to run
        (None: the selection policy's choice) and whether the call is explored
        (its time is then wanted: :meth:`observe`). ``candidates``: the shape's
        candidates, or a function that gives them, the selection's choice (None)
        first, as :func:`explored` does (called once, by :meth:`observe`, for a
        shape not seen before: pricing them builds plans)."""
        if shape in self._fixed:
            return _family(self._fixed[shape]), False
        if shape in self._decided:
            return _family(self._decided[shape]), False
        # looked up without making or reordering an entry: a rank may get here where
        # another does not (its own arguments bad, a call replayed), so the entries
        # change only in observe, which every rank reaches at the same call
        state = OrderedDict.get(self._shapes, shape)
        if state is None:  # (not priced here: observe prices them, once)
            return (None if callable(candidates) else candidates[0]), True
        if state.chosen is not None:
            return _family(state.chosen), False
        return state.candidates[_turn(state.calls, len(state.candidates))], True

    def knows(self, shape) -> bool:
        """Whether ``shape`` is decided, fixed or being explored (a shape whose
        exploration was dropped for newer ones, :data:`~wacoll.mpi.bounded.SHAPES`,
        is not: its next call starts it again, on every rank alike)."""
        return (
            shape in self._fixed
            or shape in self._decided
            or OrderedDict.get(self._shapes, shape) is not None
        )

    def decides_next(self, shape) -> bool:
        """Whether the next :meth:`observe` of ``shape`` decides it (and makes the
        ranks' one agreement)."""
        state = OrderedDict.get(self._shapes, shape)
        return (
            state is not None
            and state.chosen is None
            and state.calls + 1 >= len(state.candidates) * self.rounds
        )

    def observe(self, shape, seconds: float, candidates=None) -> None:
        """The time of the explored call of ``shape`` just made: ``seconds`` of its
        run on this rank (``inf``: the candidate could not run the call;
        ``candidates``: the shape's candidates, for its first call). After the
        shape's last explored call the ranks agree on the choice (collective:
        every rank gets there at the same call)."""
        if shape in self._decided:
            return
        state = OrderedDict.get(self._shapes, shape)
        if state is None:
            if candidates is None:
                return
            state = self._shapes[shape] = _Exploration(_listed(candidates))
        many = len(state.candidates)
        state.seconds[_turn(state.calls, many)].append(seconds)
        state.calls += 1
        if state.calls < many * self.rounds:
            return
        mine, spread = self._durations(state.seconds)
        best = int(np.argmin(mine))
        if None in state.candidates:  # the model's choice stands unless clearly beaten
            model = state.candidates.index(None)
            gap = mine[model] - mine[best] if math.isfinite(mine[best]) else 0.0
            if gap <= max(MARGIN * mine[best], NOISE_FLOOR, spread[model] + spread[best]):
                best = model
        state.chosen = _name(state.candidates[best])
        # a decided shape is never forgotten: ranks replay its calls or read them
        # afresh each on its own, and one that explored it again would wait for
        # the others in an agreement they never make
        self._decided[shape] = state.chosen
        del self._shapes[shape]
        self.table.append(
            {
                **dict(zip(_FIELDS, shape)),
                "candidates": [_name(c) for c in state.candidates],
                "seconds": [float(x) for x in mine],
                "spread": [float(x) for x in spread],
                "chosen": state.chosen,
            }
        )

    def _durations(self, seconds):
        """Each candidate's median call and its spread (half the interquartile
        range of its calls), each call's time the slowest rank's; a candidate's
        first call, which also proves and compiles its plan, left out. Collective
        (one ``Allreduce``)."""
        import statistics  # (4 ms to import: only where a shape is decided)

        each = np.array([t for calls in seconds for t in calls], dtype=np.float64)
        if self._comm is not None:
            from mpi4py import MPI

            self._comm.Allreduce(MPI.IN_PLACE, each, op=MPI.MAX)
        out, spread, at = [], [], 0
        for calls in seconds:
            mine = each[at : at + len(calls)]
            at += len(calls)
            counted = mine[1:] if len(mine) > 1 else mine
            out.append(statistics.median(counted.tolist()))
            if np.isfinite(counted).all() and len(counted) > 1:
                # (the inclusive quartiles are numpy's default, linear percentiles)
                low, _, high = statistics.quantiles(counted.tolist(), method="inclusive")
                spread.append((high - low) / 2)
            elif np.isfinite(counted).all():
                spread.append(0.0)
            else:  # some calls it could not run: its figures say nothing sure
                spread.append(math.inf)
        return np.array(out, dtype=np.float64), np.array(spread, dtype=np.float64)

    def choices(self) -> dict:
        """Shape to family name of every decided or fixed shape."""
        out = dict(self._fixed)
        for row in self.table:
            out[tuple(row[f] for f in _FIELDS)] = row["chosen"]
        return out

    def dump(self, path) -> None:
        """Write the choices as a tuning file (JSON; :func:`read_tuning` reads it)."""
        rows = [
            {**dict(zip(_FIELDS, shape)), "family": family}
            for shape, family in sorted(self.choices().items(), key=repr)
        ]
        text = json.dumps({"format": _FORMAT, "choices": rows}, indent=1) + "\n"
        target = os.fspath(path)
        tmp = None
        try:  # the whole file or none: written beside the target, then renamed
            fd, tmp = tempfile.mkstemp(
                prefix=".tuning-", suffix=".tmp", dir=os.path.dirname(target) or "."
            )
            with os.fdopen(fd, "w") as fh:
                fh.write(text)
            os.replace(tmp, target)
        except OSError as exc:
            if tmp is not None and os.path.exists(tmp):
                os.unlink(tmp)
            raise TuningError(
                f"the tuning file {target} cannot be written ({exc.strerror or exc})"
            ) from None


def _turn(calls, many):
    """Which of ``many`` candidates the explored call number ``calls`` (from 0)
    runs: each candidate's first call (proving and compiling its plan, not
    counted), in order, then the counted calls in turns, one of each candidate
    after another, so that a disturbance of the machine for a while (another
    program, a burst of traffic) slows every candidate alike rather than all the
    calls of one.

    Examples
    --------
    >>> [_turn(k, 3) for k in range(9)]
    [0, 1, 2, 0, 1, 2, 0, 1, 2]
    """
    return calls % many


def _name(family):
    return DEFAULT if family is None else family


def _family(name):
    return None if name == DEFAULT else name


def read_tuning(path) -> dict:
    """The choices of a tuning file: shape to family name.

    Raises
    ------
    TuningError
        The file cannot be read, is not JSON, or is not a tuning file of this
        format (every field is checked; the file is data, never evaluated).
    """
    data = read_strict(path, TuningError, "the tuning file", 1 << 20)
    if (
        not isinstance(data, dict)
        or data.get("format") != _FORMAT
        or not isinstance(data.get("choices"), list)
        or sorted(data) != ["choices", "format"]
    ):
        raise TuningError(
            f"the tuning file {path} is not a wacoll tuning file of format {_FORMAT}"
        )
    out = {}
    for i, row in enumerate(data["choices"]):
        if not isinstance(row, dict) or sorted(row) != sorted((*_FIELDS, "family")):
            raise TuningError(
                f"the tuning file {path}: choice {i} does not have the "
                f"fields {', '.join((*_FIELDS, 'family'))}"
            )
        kinds: dict[str, type | tuple[type, ...]] = {
            "op": str,
            "size_class": int,
            "dtype": (str, type(None)),
            "operator": (str, type(None)),
            "level": (str, type(None)),
            "root": (int, type(None)),
            "family": str,
        }
        for name, kind in kinds.items():
            value = row[name]
            if isinstance(value, bool) or not isinstance(value, kind):
                raise TuningError(
                    f"the tuning file {path}: choice {i}'s {name} is {value!r}"
                )
        out[tuple(row[f] for f in _FIELDS)] = row["family"]
    return out
