"""Measure collectives side by side: native MPI and wacoll's plan families.

Run under ``mpiexec`` (on a testbed or not)::

    mpiexec -n 8 python -m wacoll.tools.measure cases.json results.json

``cases.json`` holds ``{"reps": 7, "cases": [{"label": ..., "op": "bcast",
"bytes": 65536, "impls": ["native", "magpie", "mpich"], "level": "associative"},
...]}`` (a case may give its own ``"reps"``); an impl is ``"native"`` or a plan family name, optionally with options as
``{"family": "gridmpi", "n": 4}`` or ``{"family": "recent", "algorithm": "swing"}``
(the options are the communicator's, so ``algorithm=`` forces one algorithm of the
family), named ``gridmpi+n=4`` unless the impl gives a ``"name"``. ``"progress":
true`` has rank 0 print a line per case to stderr where progress is shown
(:mod:`wacoll.tools.progress`: a terminal, or
``WACOLL_PROGRESS=1``, which the testbed sets for its ranks when it runs on a
terminal). The impl ``"default"`` is what a user gets from
the README: ``wacoll.Comm(MPI.COMM_WORLD)`` with no options (its topology discovered,
arguments validated, the selection policy's family, reductions at its default level;
the case's ``level`` is not passed). Rank 0 writes the times (seconds) per case and
impl, one per repetition, to ``results.json``. The other wacoll communicators are
created with ``validate=False`` unless the spec says ``"validate": true``: native MPI
trusts its arguments, and wacoll's argument check is itself a small collective
(beside the call by default: see :class:`wacoll.Comm`'s ``check``).

How a repetition is timed: completion time is the moment the last rank has finished,
measured from a common start instant. All processes of one machine share its
monotonic clock (network namespaces do not change clocks), so rank 0 picks a start
instant a safe margin ahead, broadcasts it, every rank waits for it and starts the
operation, and the repetition's time is the latest finish minus that instant. This
avoids the skew of barrier exits, which on a wide-area testbed differ by up to a
wide-area latency. Implementations are interleaved per repetition, so drift and
noise hit all of them alike, and each repetition starts one further along their list
(:func:`rotated`), so no implementation always runs after the same one (on the
emulated LAN, one plan run by two communicators measured 14 % apart while each always
followed the same other implementation).

Examples
--------
>>> case = {"label": "bcast 8 B", "op": "bcast", "bytes": 8, "impls": ["native"]}
>>> normalise_case(case)["impls"]
[{'family': 'native'}]
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np

__all__ = [
    "normalise_case",
    "now",
    "wait_until",
    "common_start",
    "timed",
    "measure",
    "timed_on_time",
    "start_margin",
    "rotated",
    "exploration_calls",
    "run_on_testbed",
    "main",
    "OPS",
]

#: Operations this module times.
OPS = (
    "barrier",
    "bcast",
    "reduce",
    "allreduce",
    "allgather",
    "alltoall",
    "gather",
    "scatter",
)


def normalise_case(case: dict) -> dict:
    """Fill in defaults and turn impl names into ``{"family": name, ...}`` dicts."""
    from wacoll.errors import WacollError
    from wacoll.plans.select import NATIVE

    if case.get("op") not in OPS:
        raise WacollError(f"measure: unknown op {case.get('op')!r}; known: {OPS}")
    impls = []
    for impl in case.get("impls", [NATIVE]):
        impls.append({"family": impl} if isinstance(impl, str) else dict(impl))
    out = dict(case)
    out["impls"] = impls
    out.setdefault("bytes", 8)
    out.setdefault("label", f"{case['op']} {out['bytes']} B")
    return out


def now() -> float:
    """The clock every rank of one machine shares (``CLOCK_MONOTONIC``), in seconds.

    Network namespaces do not change clocks, so ranks on a testbed agree on it.

    Examples
    --------
    >>> t = now()
    >>> wait_until(t + 0.001)
    >>> now() >= t + 0.001
    True
    """
    return time.clock_gettime(time.CLOCK_MONOTONIC)


def wait_until(t: float) -> None:
    """Return at the instant ``t`` of :func:`now`; at once if it has passed.

    Sleeps most of the way, then spins briefly: ranks share cores, so they must
    not spin long.
    """
    while True:
        left = t - now()
        if left <= 0:
            return
        if left > 0.002:
            time.sleep(left - 0.001)


def common_start(world, margin: float):
    """Agree on a start instant ``margin`` seconds ahead of rank 0's clock; wait for it.

    Collective over ``world``.

    Returns
    -------
    start : float
        The instant, on :func:`now`'s clock.
    late : bool
        Whether this rank learnt of it only after it had passed.
    """
    start = world.bcast(now() + margin if world.Get_rank() == 0 else None, root=0)
    late = now() > start
    wait_until(start)
    return start, late


def timed(world, margin: float, fn):
    """Run ``fn`` on every rank from a :func:`common_start`; time to the last finish.

    Collective over ``world``.

    Returns
    -------
    float or None
        Seconds from the start instant until the last rank finished, the same on
        every rank; None when the run does not count because a rank started late.
    """
    from mpi4py import MPI

    start, late = common_start(world, margin)
    fn()
    finish = now()
    # element-wise: the slowest rank's time, and whether any rank started late
    worst = np.empty(2)
    world.Allreduce(np.array([finish - start, float(late)]), worst, op=MPI.MAX)
    return None if worst[1] else float(worst[0])


def timed_on_time(world, margin: float, fn, tries: int = 8):
    """:func:`timed`, repeated with twice the margin while a rank started late (the
    same decision on every rank). Collective over ``world``."""
    for attempt in range(tries):
        seconds = timed(world, margin * 2**attempt, fn)
        if seconds is not None:
            return seconds
    raise RuntimeError(
        f"measure: a rank started late {tries} times, the last with a "
        f"margin of {margin * 2 ** (tries - 1):g} s"
    )


def start_margin(
    world, *, tries: int = 5, factor: float = 4.0, floor: float = 1e-3
) -> float:
    """A start margin (seconds) for :func:`timed`: ``factor`` times the longest any
    rank took to learn an instant rank 0 broadcast, over ``tries``, and at least
    ``floor``. Collective over ``world``.

    A call timed after a long idle margin runs cold: on the emulated metro network
    (4 x 2 ranks, 0.5 ms) an 8-byte Alltoall took 1.04 ms (the library) and 1.16 ms
    (MagPIe's plan) 50 ms after the previous call, 0.84 and 0.90 ms 3 ms after it,
    and 0.77 and 0.85 ms back to back. So the margin is as short as the network
    lets every rank learn the instant in time: what a loop of calls sees.
    """
    from mpi4py import MPI

    longest = 0.0
    for _ in range(tries):  # (every rank reads the one clock rank 0 read: timed's
        world.Barrier()  # premise)
        sent = world.bcast(now() if world.Get_rank() == 0 else None, root=0)
        longest = max(longest, now() - sent)
    return max(floor, factor * world.allreduce(longest, op=MPI.MAX))


def case_buffers(op, nbytes, size, rank):
    """Integer-valued data (exact in any summation order) of exactly ``nbytes``."""
    dtype = np.float64 if nbytes % 8 == 0 else np.uint8
    n = nbytes // np.dtype(dtype).itemsize
    if op in ("bcast", "reduce", "allreduce"):
        return (np.arange(n) % 7 + rank).astype(dtype), np.zeros(n, dtype)
    if op in ("allgather", "gather"):
        return np.full(n, rank, dtype=dtype), np.zeros(n * size, dtype)
    if op == "scatter":
        return (np.arange(n * size) % 7).astype(dtype), np.zeros(n, dtype)
    if op == "alltoall":
        return (np.arange(n * size) % 7 + rank).astype(dtype), np.zeros(n * size, dtype)
    return None, None


def case_caller(op, comm, send, recv, level):
    from mpi4py import MPI

    if op == "barrier":
        return comm.Barrier
    if op == "bcast":
        return lambda: comm.Bcast(recv if comm.Get_rank() else send, root=0)
    extra = {} if level is None or isinstance(comm, MPI.Comm) else {"level": level}
    if op == "reduce":
        return lambda: comm.Reduce(send, recv, op=MPI.SUM, root=0, **extra)
    if op == "allreduce":
        return lambda: comm.Allreduce(send, recv, op=MPI.SUM, **extra)
    if op == "allgather":
        return lambda: comm.Allgather(send, recv)
    if op == "gather":
        return lambda: comm.Gather(send, recv, root=0)
    if op == "scatter":
        return lambda: comm.Scatter(send, recv, root=0)
    return lambda: comm.Alltoall(send, recv)


def measure(spec: dict, world=None, *, margin: float | None = None) -> dict:
    """Time every case of ``spec`` on ``world``; rank 0 gets the results.

    Returns ``{label: {impl_name: [seconds, ...]}}`` on every rank (the times are
    the same everywhere), plus ``"_meta"`` with the size, clusters and transport.
    """
    import os

    from mpi4py import MPI

    import wacoll

    world = world or MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    reps = int(spec.get("reps", 7))
    # calls before the timed ones: plans are built, proved and compiled in the first,
    # and the default communicator, which learns, explores its candidates in the rest
    warmup = max(1, int(spec.get("warmup", 1)))
    # the first calls of each impl timed one by one (what a short job pays: plans
    # built, proved and compiled, candidates explored), as the timed calls are
    cold = max(0, int(spec.get("cold", 0)))
    margin = spec.get("margin", 0.05) if margin is None else margin
    margin = start_margin(world) if margin == "auto" else float(margin)
    # a line per case on rank 0, to stderr, on a terminal only (wacoll.tools.progress;
    # the testbed passes its terminal decision to the ranks in WACOLL_PROGRESS)
    from wacoll.plans.select import NATIVE
    from wacoll.tools.progress import Progress

    progress = Progress(
        "measure",
        total=len(spec["cases"]),
        enabled=None if bool(spec.get("progress")) and rank == 0 else False,
    )
    # Native MPI trusts its arguments; so do the timed wacoll calls unless asked.
    # (Validation is one more small collective: a wide-area latency on a grid.)
    validate = bool(spec.get("validate", False))
    topology = wacoll.topology_from_comm(world)
    comms = {}
    results = {
        "_meta": {
            "size": size,
            "clusters": [list(c) for c in topology.clusters],
            "margin": margin,
            "transport": os.environ.get("UCX_TLS", "default"),
            "reps": reps,
            "validate": validate,
            "library": library_name(MPI.Get_library_version()),
        }
    }
    for raw in spec["cases"]:
        case = normalise_case(raw)
        op, level = case["op"], case.get("level")
        runs, learners = [], set()
        for impl in case["impls"]:
            name = impl.get("name") or "+".join(
                [impl["family"]]
                + [
                    f"{k}={v}"
                    for k, v in sorted(impl.items())
                    if k not in ("family", "name")
                ]
            )
            default = impl["family"] == "default"
            if impl["family"] == NATIVE:
                comm = world
            else:
                key = tuple(sorted(impl.items()))
                if key not in comms:
                    opts = {k: v for k, v in impl.items() if k not in ("family", "name")}
                    if default:  # the README's line; options only if the case gives some
                        comms[key] = wacoll.Comm(world, **opts)
                    else:
                        opts.setdefault("validate", validate)
                        comms[key] = wacoll.Comm(
                            world, topology, family=impl["family"], **opts
                        )
                comm = comms[key]
            send, recv = case_buffers(op, case["bytes"], size, rank)
            runs.append(
                (
                    name,
                    case_caller(op, comm, send, recv, None if default else level),
                    recv,
                )
            )
            if default:
                learners.add(name)
        times: dict[str, list[float]] = {name: [] for name, _, _ in runs}
        learned_before = len(_tuning(comms))
        # a default communicator (however named) learns in its first calls
        # (wacoll.mpi.learning): its timed calls come after the exploration, however
        # short the warm-up asked for
        rounds = max(warmup, exploration_calls(op)) if learners else warmup
        first: dict[str, list[float]] = {name: [] for name, _, _ in runs}
        for i in range(max(rounds, cold)):
            if i < cold:
                for name, fn, _ in rotated(runs, i):
                    first[name].append(timed_on_time(world, margin, fn))
                continue
            for name, fn, _ in runs:
                if i == 0 or name in learners:  # (only default communicators learn)
                    fn()
        agree = _agree_with_first(runs, op, rank, world)
        for rep in range(int(case.get("reps", reps))):
            for name, fn, _ in rotated(runs, rep):
                times[name].append(timed_on_time(world, margin, fn))
        default = comms.get((("family", "default"),))
        results[case["label"]] = {
            "op": op,
            "bytes": case["bytes"],
            "times": times,
            "correct": agree,
            "first": first if cold else None,
            "learned": _tuning(comms)[learned_before:],
            # what the default's timed calls ran
            "default_ran": None
            if default is None or "default" not in times
            else default.last_family,
        }
        if progress.enabled:
            medians = ", ".join(f"{name} {_median_ms(ts)}" for name, ts in times.items())
            progress.step(f"{case['label']}: {medians}")
    for comm in comms.values():  # (collective: every rank made the same ones)
        comm.Free()
    return results


def rotated(items, k):
    """``items`` starting at position ``k`` (modulo their number), wrapping around.

    Examples
    --------
    >>> rotated(["native", "default", "magpie"], 1), rotated(["a", "b"], 5)
    (['default', 'magpie', 'native'], ['b', 'a'])
    """
    k = k % len(items) if items else 0
    return list(items[k:]) + list(items[:k])


def _tuning(comms):
    """What the default communicator (the impl ``"default"`` without options) has
    learned (:attr:`wacoll.Comm.tuning`: per call shape the candidates, their
    measured seconds and the choice). A default communicator with options or
    another name explores too, before it is timed, but is not reported here."""
    default = comms.get((("family", "default"),))
    return [] if default is None else default.tuning


def exploration_calls(op: str) -> int:
    """How many calls of ``op`` a learning communicator explores before it runs its
    choice (:func:`wacoll.mpi.learning.exploration_calls`)."""
    from wacoll.mpi import learning

    return learning.exploration_calls(op)


def library_name(version: str) -> str:
    """The MPI library's name and version, short, from ``MPI.Get_library_version()``.

    Examples
    --------
    >>> library_name("MPICH Version:      5.0.2\\nMPICH Release date: ...")
    'MPICH 5.0.2'
    >>> library_name("Open MPI v5.0.11, package: Open MPI user@localhost ...")
    'Open MPI 5.0.11'
    >>> library_name("Some MPI 3.1 (build 7)")
    'Some MPI 3.1 (build 7)'
    """
    import re

    first = (version.splitlines() or [""])[0].strip().rstrip("\x00")
    m = re.match(r"(MPICH|Intel\(R\) MPI Library|MVAPICH\d*)\s+Version:\s*(\S+)", first)
    if m:
        return f"{m.group(1)} {m.group(2)}"
    m = re.match(r"Open MPI v(\S+?),", first)
    if m:
        return f"Open MPI {m.group(1)}"
    return first[:40] or "the MPI library"


def _median_ms(times):
    valid = sorted(t for t in times if t is not None)
    return f"{valid[len(valid) // 2] * 1e3:.2f} ms" if valid else "-"


def _agree_with_first(runs, op, rank, world):
    """Whether every impl's result equals the first impl's (after the warm-up)."""
    from mpi4py import MPI

    out = {}
    first = runs[0][2]
    for name, _, recv in runs:
        if recv is None or (op in ("reduce", "gather") and rank != 0):
            ok = True
        else:
            ok = bool(np.allclose(recv, first))
        out[name] = world.allreduce(ok, op=MPI.LAND)
    return out


def run_on_testbed(
    topology, spec: dict, out, *, name="bench", timeout=600.0, testbed_options=None
):
    """Start a testbed for ``topology``, run :func:`measure` on it, tear it down.

    Returns ``(results, None)``, or ``(None, reason)`` when the testbed cannot run here
    (not root, no ``/dev/net/tun``) or the run fails. ``out`` is a folder for the
    case and result files. ``results["_meta"]`` gains the testbed's self-check and
    the transport.
    """
    from pathlib import Path

    from wacoll.emulate import Testbed, TestbedError, unavailable_reason

    reason = unavailable_reason()
    if reason:
        return None, reason
    out = Path(out).resolve()  # the ranks run in it (see below)
    out.mkdir(parents=True, exist_ok=True)
    spec_path, result_path = out / f"{name}-cases.json", out / f"{name}-measured.json"
    spec_path.write_text(json.dumps(spec))
    try:
        with Testbed(topology, name=name, **(testbed_options or {})) as tb:
            # From ``out``: ``-m`` puts the working directory first on sys.path, and
            # a source checkout there would shadow the installed (compiled) wacoll.
            run = tb.run(
                [
                    sys.executable,
                    "-m",
                    "wacoll.tools.measure",
                    str(spec_path),
                    str(result_path),
                ],
                timeout=timeout,
                capture=False,
                cwd=out,
            )
            if not run.ok:
                why = "timed out" if run.timed_out else f"exit status {run.returncode}"
                return None, f"the measurement run failed ({why})"
            results = json.loads(result_path.read_text())
            results["_meta"]["transport"] = run.transport
            check = tb.last_check
            if check is not None:
                results["_meta"]["check"] = [
                    {
                        "from": p.src_cluster,
                        "to": p.dst_cluster,
                        "latency": p.latency,
                        "bandwidth": p.bandwidth,
                    }
                    for p in check.pairs
                ]
            return results, None
    except TestbedError as exc:
        return None, f"the testbed failed: {exc}"


def main(argv=None) -> int:
    """``python -m wacoll.tools.measure CASES.json RESULTS.json`` (under mpiexec)."""
    from mpi4py import MPI

    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print(
            "usage: python -m wacoll.tools.measure CASES.json RESULTS.json",
            file=sys.stderr,
        )
        return 2
    with open(argv[0]) as fh:
        spec = json.load(fh)
    try:
        results = measure(spec)
    except ImportError as exc:  # e.g. the source checkout shadows the installed wacoll
        print(f"python -m wacoll.tools.measure: {exc}", file=sys.stderr)
        return 1
    if MPI.COMM_WORLD.Get_rank() == 0:
        with open(argv[1], "w") as fh:
            json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
