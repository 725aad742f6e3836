"""What a call costs on this machine besides its messages.

The simulator (:mod:`wacoll.plans.sim`) prices a plan's messages on the topology's
links. A call also costs the work of the software that runs it: wacoll's compiled
runner and its cross-rank check for a plan, the MPI library's own code (and the same
check) for the library's collective. Where the links are fast, that work decides
which is faster, so the selection policy (:func:`wacoll.plans.select`) adds it to
the simulated time of every candidate, the library's collective included:

- a **plan** costs :attr:`CallCosts.plan_call` once per call and
  :attr:`CallCosts.plan_message` per message its sender posts (the simulator's
  per-message overhead, so only the messages on the critical path count);
- the **library's collective** is priced as the modern family's plan for the call
  (today's MPICH and Open MPI algorithms, :mod:`wacoll.plans.families.modern`),
  plus :attr:`CallCosts.library_call` and :attr:`CallCosts.library_message`.

The numbers are measured, not guessed: ``benchmarks/bench_callcost.py`` times
plans with 1 to 8 messages on the critical path and the library's collective on
two ranks declared as two clusters (no network to hide them), fits a line per kind
(:func:`fit_call_costs`), and writes ``benchmarks/results/callcost.json``;
:data:`MEASURED` holds that fit (:func:`read_call_costs` reads another machine's).

Examples
--------
>>> costs = CallCosts(plan_call=2e-6, plan_message=0.5e-6, library_call=1e-6,
...                   library_message=0.3e-6)
>>> costs.plan(messages=2) > costs.library(messages=2)
True
>>> fit_call_costs([("plan", 1, 3e-6), ("plan", 3, 4e-6), ("library", 1, 1.5e-6)])
CallCosts(plan_call=2.5e-06, plan_message=5e-07, library_call=1.5e-06, library_message=0.0)
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields

import numpy as np

from wacoll.errors import PlanError
from wacoll.strict_json import read_strict

__all__ = [
    "CallCosts",
    "MEASURED",
    "FREE",
    "fit_call_costs",
    "read_call_costs",
    "critical_messages",
    "KINDS",
    "as_json",
]

#: The kinds of call a fit distinguishes.
KINDS = ("plan", "library")


@dataclass(frozen=True)
class CallCosts:
    """Seconds a call costs besides its messages' time on the links.

    Attributes
    ----------
    plan_call : float
        A plan's call, once (the compiled runner's set-up and the check).
    plan_message : float
        Each message a plan's rank posts (its sender is busy that long).
    library_call : float
        The MPI library's collective under wacoll, once (the call and the check).
    library_message : float
        Each message of the library's collective.
    """

    plan_call: float
    plan_message: float
    library_call: float
    library_message: float

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not 0 <= value < math.inf
            ):
                raise PlanError(
                    f"call costs: {f.name} must be a number of seconds "
                    f">= 0, got {value!r}"
                )

    def plan(self, messages: float) -> float:
        """Seconds a plan's call adds to ``messages`` sends on its critical path."""
        return self.plan_call + messages * self.plan_message

    def library(self, messages: float) -> float:
        """Seconds the library's collective adds to ``messages`` on its path."""
        return self.library_call + messages * self.library_message


#: Nothing but the messages (the simulator's own view).
FREE = CallCosts(0.0, 0.0, 0.0, 0.0)

#: Fitted on this project's reference machine (2 cores, MPICH 5.0.2, 2 ranks as 2
#: declared clusters, the default check) by ``benchmarks/bench_callcost.py``
#: (``benchmarks/results/callcost.json``): a plan's call 2.15 us and 0.15 us per
#: message; the library's collective with wacoll's check beside it 3.45 us.
MEASURED = CallCosts(
    plan_call=2.15e-6, plan_message=0.15e-6, library_call=3.45e-6, library_message=0.0
)


def fit_call_costs(samples) -> CallCosts:
    """Fit the per-call and per-message costs of each kind by least squares.

    Parameters
    ----------
    samples : iterable of (kind, messages, seconds)
        ``kind`` one of :data:`KINDS`; ``messages`` on the call's critical path
        (:func:`critical_messages`); ``seconds`` its measured time with no network.

    A kind whose samples all have the same number of messages gets a per-message
    cost of 0 (its per-call cost is then their median); a fitted slope or
    intercept below 0 is taken as 0.

    Raises
    ------
    PlanError
        A kind without samples, or an unknown kind.
    """
    by_kind: dict[str, list[tuple[float, float]]] = {kind: [] for kind in KINDS}
    for kind, messages, seconds in samples:
        if kind not in by_kind:
            raise PlanError(f"call costs: unknown kind {kind!r}; known: {KINDS}")
        by_kind[kind].append((float(messages), float(seconds)))
    out = {}
    for kind, rows in by_kind.items():
        if not rows:
            raise PlanError(f"call costs: no samples of the {kind} kind")
        x, y = np.array(rows).T
        if np.ptp(x) == 0:
            call, per = float(np.median(y)), 0.0
        else:
            per, call = np.polyfit(x, y, 1)
            per = max(0.0, float(per))
            call = max(0.0, float(np.median(y - per * x)))
        out[f"{kind}_call"], out[f"{kind}_message"] = round(call, 12), round(per, 12)
    return CallCosts(**out)


def critical_messages(plan) -> float:
    """The sends on ``plan``'s critical path: its simulated completion where every
    message costs its sender one second and the links cost nothing.

    Examples
    --------
    >>> from wacoll import Topology
    >>> from wacoll.plans import build
    >>> critical_messages(build("bcast", Topology.from_sizes([4]), "mpich", count=1))
    2.0
    """
    from wacoll.plans.sim import LinkModel, simulate
    from wacoll.topology import Topology

    members: dict[int, list[int]] = {}
    for rank, cluster in enumerate(plan.clusters):
        members.setdefault(cluster, []).append(rank)
    free = Topology.from_clusters(
        [members[c] for c in sorted(members)],
        intra_latency=0.0,
        intra_bandwidth=1e30,
        wan_latency=0.0,
        wan_bandwidth=1e30,
    )
    return float(simulate(plan, LinkModel(free, overhead=1.0)).completion)


def read_call_costs(path) -> CallCosts:
    """The call costs of a file written by ``benchmarks/bench_callcost.py`` (JSON, parsed
    strictly: every field checked, nothing evaluated).

    Raises
    ------
    PlanError
        The file cannot be read, is not JSON, or lacks or adds a field.
    """
    data = read_strict(path, PlanError, "call costs:", 1 << 16)
    names = sorted(f.name for f in fields(CallCosts))
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("costs"), dict)
        or sorted(data["costs"]) != names
    ):
        raise PlanError(
            f"call costs: {path} must hold {{\"costs\": {{...}}}} with "
            f"the fields {', '.join(names)}"
        )
    return CallCosts(**data["costs"])


def as_json(costs: CallCosts, **extra) -> str:
    """``costs`` as the file :func:`read_call_costs` reads, with ``extra`` fields
    beside them (how they were measured)."""
    return json.dumps({"costs": asdict(costs), **extra}, indent=1) + "\n"
