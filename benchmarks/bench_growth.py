"""How building, proving, lowering and simulating a plan grow with the number of ranks.

For every plan family of :data:`wacoll.plans.FAMILIES` and every operation it builds
(each family forced, as :func:`wacoll.plans.build` takes it, not the plan
:func:`wacoll.plans.select` would choose), on 8 clusters of equal size
(``--clusters``), at 64 to 4096 ranks and up to 16384 for the rooted operations
(bcast, reduce, gather, scatter and their v-forms), one case times, in this order:

``build_s``
    ``build(op, topology, family, count=1, itemsize=8, root=0, level=...)`` (the
    options the builder takes): one element per block, 8-byte elements, root 0,
    reductions at ``--level`` (default ``commutative``). Building does not prove.
``check_s``
    ``plan.prove()``: :func:`wacoll.plans.prove_plan` on the plan, the whole proof
    (matching every message and symbolic execution of every rank), with its report
    cached on the plan, as ``wacoll.Comm`` does before its first call.
``lower_first_s``, ``lower_last_s``
    ``lower(plan, 0)`` and ``lower(plan, ranks - 1)``: one rank's program lowered to
    element runs, what each rank does for itself (the proof is cached, not repeated).
``simulate_s``
    ``simulate(plan, LinkModel(topology))`` on the proved plan (its message list,
    matched by the proof, is cached on the plan).

and, before all of these, what a running rank derives for itself
(:func:`wacoll.plans.rank.rank_program`, the plan's proof taken as cached):

``rank_first_s``, ``rank_last_s``
    rank 0's and the last rank's program built alone (a focused build: no other
    rank's steps) and lowered, with ``rank_first_mib`` / ``rank_last_mib``, the peak
    Python memory of that derivation (``tracemalloc``, in a second, untimed run).
    This is a rank's first call of the collective with the proof cache warm, and it
    is measured at every size, also beyond a size where the whole plan went over
    budget or out of memory (there the child derives the two ranks' programs only).

It records the plan's size (``steps`` in all programs, ``messages``) and the case's
peak resident memory. ``total_s`` is the sum of the five; each has its CPU time
beside it (``build_cpu_s``, ...; on a shared machine the steadier figure).

Without a cached proof a rank builds and proves the whole plan before its first
call, so the large cases take minutes and many GiB. The benchmark protects itself: each case runs
in a child process of its own, with a wall-clock budget (``--budget`` seconds,
counted from the child's start) after which it is killed, and a cap on its address
space (``--max-memory``, ``RLIMIT_AS``; a ``MemoryError`` in the child is "out of
memory"). Once a (family, operation) goes over budget or out of memory at some size,
its larger sizes are not run and are recorded with the same status and a note
``not run``. Cases run one at a time, smaller sizes first across all families. The
children are forked from one clean server process that has imported wacoll once
(``multiprocessing``'s ``forkserver``): starting a fresh interpreter and importing
wacoll takes about a second here, longer than most small cases. ``peak_rss_mib`` is
the child's ``ru_maxrss`` (for a child killed over budget, its ``VmHWM`` read just
before the kill), which includes ``base_rss_mib``, the child's resident memory
before the timed steps began (the interpreter, wacoll, and an untimed run of the
same operation on 4 ranks that takes first-use imports out of the times).

The growth: for each (family, operation) and each step, the exponent ``a`` of
``time ~ P^a`` is fitted by least squares on log-log axes over the last
``--fit-points`` sizes that ran, on CPU times (on a shared machine the wall-clock
times carry the other jobs; times under 20 ms are left out), and the same for the
memory above the base (``peak - base``, from 1 MiB).

Run from the repository root (the full run took 26 minutes on 2 cores shared with
other jobs, load average about 11)::

    .venv/bin/python benchmarks/bench_growth.py [--budget 60] [--max-memory 6G]
    .venv/bin/python benchmarks/bench_growth.py --quick   # 16-128 ranks, under a minute

Options choose the sizes (``--sizes``, ``--rooted-sizes``), a subset of families and
operations (``--families``, ``--ops``), the clusters and the reduction level.

Prints each case as it ends, then a summary per (family, operation): the largest
size that ran, its times and memory, and the fitted exponents. Writes
``benchmarks/results/growth.csv`` (one row per case, rewritten after every case),
``growth-fit.csv`` (the exponents), ``growth.png`` (total time and peak memory
against ranks, log-log, one line per family and operation) and ``growth.txt`` (the
command, the summary and the exponents; the cases are in the CSV); with ``--quick`` the names end in
``-quick``; ``--out`` names the CSV file and the others follow its name.
"""

from __future__ import annotations

import argparse
import functools
import gc
import mmap
import multiprocessing
import resource
import sys
import time
import tracemalloc
from multiprocessing.connection import wait
from pathlib import Path

import numpy as np

from wacoll import Topology
from wacoll.plans import FAMILIES, OPERATIONS, Selection, build, builders, lower, options
from wacoll.plans.rank import rank_program
from wacoll.plans.sim import LinkModel, simulate

from _harness import (
    RESULTS,
    Report,
    command_line,
    human,
    load1,
    load_text,
    parse_size,
    pyplot,
    save_figure,
    write_csv,
)

FIELDS = [
    "ranks",
    "clusters",
    "family",
    "op",
    "algorithm",
    "status",
    "note",
    "build_s",
    "check_s",
    "lower_first_s",
    "lower_last_s",
    "simulate_s",
    "total_s",
    "build_cpu_s",
    "check_cpu_s",
    "lower_first_cpu_s",
    "lower_last_cpu_s",
    "simulate_cpu_s",
    "total_cpu_s",
    "steps",
    "messages",
    "base_rss_mib",
    "peak_rss_mib",
    "rank_first_s",
    "rank_last_s",
    "rank_first_cpu_s",
    "rank_last_cpu_s",
    "rank_first_mib",
    "rank_last_mib",
    "load1",
]
FIT_FIELDS = [
    "family",
    "op",
    "fitted_ranks",
    "largest_ranks",
    "status_after",
    "build",
    "check",
    "lower",
    "simulate",
    "total",
    "memory",
    "rank",
    "rank_memory",
]
#: The steps of a case, in the order the child runs them.
PHASES = ("build", "check", "lower_first", "lower_last", "simulate")
#: The steps of one rank's own derivation, run first.
RANK_PHASES = ("rank_first", "rank_last")
#: Times below this are left out of the fits (timer and scheduling noise).
FIT_MIN_SECONDS = 0.02
#: Memory above the base below this is left out of the fits.
FIT_MIN_MIB = 1.0
#: Address space the child keeps mapped (untouched, so not resident) and releases on
#: MemoryError, so that it can still report.
_RESERVE_BYTES = 32 << 20
DEFAULT_SIZES = [64, 128, 256, 512, 1024, 2048, 4096]
DEFAULT_ROOTED_SIZES = [8192, 16384]
QUICK_SIZES = [16, 32, 64]
QUICK_ROOTED_SIZES = [128]


# ------------------------------------------------------------------- the cases
def topology(ranks, clusters):
    """``ranks`` ranks in ``clusters`` clusters of equal size (the first ones one rank
    larger when they do not divide evenly; fewer clusters if there are fewer ranks).

    Parameters
    ----------
    ranks, clusters : int

    Returns
    -------
    wacoll.Topology

    Examples
    --------
    >>> topology(64, 8).clusters[1]
    (8, 9, 10, 11, 12, 13, 14, 15)
    >>> [len(c) for c in topology(10, 4).clusters]
    [3, 3, 2, 2]
    """
    k = max(1, min(clusters, ranks))
    base, extra = divmod(ranks, k)
    return Topology.from_sizes([base + (1 if i < extra else 0) for i in range(k)])


def build_options(family, op, level):
    """The builder options a case passes: those of ``count=1, itemsize=8, root=0,
    level=level`` that ``family``'s builder for ``op`` takes.

    Parameters
    ----------
    family, op : str
    level : str
        The reduction level (used by reductions only).

    Returns
    -------
    dict

    Examples
    --------
    >>> build_options("tree", "bcast", "commutative")
    {'count': 1, 'itemsize': 8, 'root': 0}
    >>> build_options("mpich", "allreduce", "commutative")
    {'count': 1, 'itemsize': 8, 'level': 'commutative'}
    """
    wanted = {"count": 1, "itemsize": 8, "root": 0, "level": level}
    accepted = options(family, op)
    return {k: v for k, v in wanted.items() if k in accepted}


def cases(families=None, ops=None):
    """Every (family, op) the registry builds, in registry order, filtered.

    Parameters
    ----------
    families, ops : list of str, optional
        Keep only these (default: all).

    Returns
    -------
    list of (str, str)

    Examples
    --------
    >>> cases(["tree"])
    [('tree', 'bcast'), ('tree', 'reduce'), ('tree', 'allreduce')]
    """
    out = []
    for family in FAMILIES:
        if families and family not in families:
            continue
        for op in builders(family):
            if not ops or op in ops:
                out.append((family, op))
    return out


def rooted(op):
    """Whether ``op`` has a root (and so runs at the rooted sizes too).

    Examples
    --------
    >>> rooted("gatherv"), rooted("allgather")
    (True, False)
    """
    return OPERATIONS[op].rooted


# ------------------------------------------------------------------- the child
def _rss_mib():
    """This process's peak resident memory so far, MiB (Linux: ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _timed(step, fn, *args):
    """Run ``fn(*args)``; return its result and ``{step}_s``, ``{step}_cpu_s`` (wall-clock
    and CPU seconds) as a dict."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn(*args)
    return result, {
        f"{step}_s": time.perf_counter() - wall,
        f"{step}_cpu_s": time.process_time() - cpu,
    }


def _simulated(plan, topo):
    return simulate(plan, LinkModel(topo))


def _rank_step(step, selection, topo, rank):
    """Time rank ``rank``'s own program (focused build and lowering), then measure its
    peak Python memory in a second run under ``tracemalloc`` (which slows it)."""
    _, times = _timed(step, lambda: rank_program(selection, topo, rank, proof=True))
    gc.collect()
    tracemalloc.start()
    try:
        rank_program(selection, topo, rank, proof=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return {**times, f"{step}_mib": peak / 2**20}


def run_case(conn, family, op, ranks, clusters, level, max_memory, whole=True):
    """The child's side of one case: cap memory, run the steps, report each on ``conn``.

    First runs the same operation on 4 ranks in 2 clusters, untimed, so that the
    times leave out first-use imports and caches. Sends a dict after each step
    (``{"build_s": ..., ...}``) and finally one with a ``status``: ``"ok"``, ``"out
    of memory"`` or ``"error"`` (with a ``note``).

    Parameters
    ----------
    conn : multiprocessing.connection.Connection
        Write end of the pipe to the parent.
    family, op : str
    ranks, clusters : int
    level : str
    max_memory : int
        The address-space cap, bytes.
    whole : bool
        Also build, prove, lower and simulate the whole plan (else one rank's
        programs only).
    """
    # What the server imported stays out of collections: a collection that walks it
    # would copy every page the fork shares, milliseconds that are no step's.
    gc.freeze()
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = max_memory if hard == resource.RLIM_INFINITY else min(max_memory, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    reserve = mmap.mmap(-1, _RESERVE_BYTES)
    final = {"status": "ok"}
    plan = topo = warm = None
    kwargs = build_options(family, op, level)
    try:  # untimed: first-use imports and caches out of the times (errors: see below)
        tiny = topology(4, 2)
        warm = build(op, tiny, family, **kwargs)
        lower(warm, 0)
        simulate(warm, LinkModel(tiny))
        rank_program(
            Selection(op, family, tuple(sorted(kwargs.items()))), tiny, 0, proof=True
        )
    except Exception:  # the timed case below meets and reports the same refusal
        pass
    del warm
    conn.send({"base_rss_mib": _rss_mib()})
    try:
        topo = topology(ranks, clusters)
        selection = Selection(op, family, tuple(sorted(kwargs.items())))
        for step, rank in zip(RANK_PHASES, (0, ranks - 1)):
            conn.send(_rank_step(step, selection, topo, rank))
        if not whole:
            raise _RankOnly
        plan, times = _timed(
            "build", functools.partial(build, op, topo, family, **kwargs)
        )
        conn.send({**times, "algorithm": plan.algorithm, "steps": plan.nsteps})
        report, times = _timed("check", plan.prove)
        conn.send({**times, "messages": report.messages})
        for step, rank in (("lower_first", 0), ("lower_last", plan.size - 1)):
            conn.send(_timed(step, lower, plan, rank)[1])
        conn.send(_timed("simulate", _simulated, plan, topo)[1])
    except _RankOnly:
        pass
    except MemoryError:
        final = {"status": "out of memory"}
    except Exception as exc:  # a builder's refusal is a result of the case
        final = {"status": "error", "note": f"{type(exc).__name__}: {exc}"[:200]}
    del plan, topo  # room to report after a MemoryError
    reserve.close()
    final["peak_rss_mib"] = _rss_mib()
    conn.send(final)
    conn.close()


class _RankOnly(Exception):
    """The end of a case that derives one rank's programs only."""


# ------------------------------------------------------------------ the parent
def _vm_hwm_mib(pid):
    """A live process's peak resident memory (``VmHWM``), MiB, or None."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _running(row):
    """The step a case's child was in when it stopped: the first one it had not
    reported (``"start-up"`` before the timed steps began)."""
    if "base_rss_mib" not in row:
        return "start-up"
    return next((p for p in (*RANK_PHASES, *PHASES) if f"{p}_s" not in row), "simulate")


def run_one(ctx, family, op, ranks, args, whole=True):
    """Run one case in a child with the budget; return its row (times as floats).

    Parameters
    ----------
    ctx : multiprocessing context
    family, op : str
    ranks : int
    args : argparse.Namespace
        ``clusters``, ``level``, ``budget``, ``max_memory``.

    Returns
    -------
    dict
        The case's row; ``status`` is ``"ok"``, ``"over budget"``, ``"out of
        memory"`` or ``"error"``.
    """
    row = {
        "ranks": ranks,
        "clusters": min(args.clusters, ranks),
        "family": family,
        "op": op,
        "load1": load1(),
    }
    reader, writer = ctx.Pipe(duplex=False)
    proc = ctx.Process(
        target=run_case,
        daemon=True,
        args=(
            writer,
            family,
            op,
            ranks,
            args.clusters,
            args.level,
            args.max_memory,
            whole,
        ),
    )
    deadline = time.perf_counter() + args.budget
    proc.start()
    writer.close()
    eof = False
    while "status" not in row and not eof:
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            break
        ready = wait([reader, proc.sentinel], remaining)
        if not ready:
            break
        while "status" not in row and reader.poll():
            try:
                row.update(reader.recv())
            except EOFError:
                eof = True
                break
        if proc.sentinel in ready and not reader.poll():
            eof = True
    if "status" not in row:
        running = _running(row)
        if proc.is_alive():
            row["peak_rss_mib"] = _vm_hwm_mib(proc.pid)
            proc.kill()
            row["status"] = "over budget"
            row["note"] = f"stopped after {args.budget:g} s in {running}"
        else:
            proc.join()
            row["status"] = "error"
            row["note"] = f"child exited with code {proc.exitcode} in {running}"
    proc.join()
    reader.close()
    if row["status"] == "out of memory":
        row["note"] = f"over {human(args.max_memory)} in {_running(row)}"
    if row["status"] == "ok" and whole:
        row["total_s"] = sum(row[f"{p}_s"] for p in PHASES)
        row["total_cpu_s"] = sum(row[f"{p}_cpu_s"] for p in PHASES)
    return row


def not_run(family, op, ranks, clusters, failed):
    """The row of a case not run because a smaller size of it failed.

    Parameters
    ----------
    family, op : str
    ranks, clusters : int
    failed : dict
        The row of the smaller size that went over budget or out of memory.

    Returns
    -------
    dict
    """
    return {
        "ranks": ranks,
        "clusters": min(clusters, ranks),
        "family": family,
        "op": op,
        "status": failed["status"],
        "note": f"not run: {failed['status']} at {failed['ranks']} ranks",
    }


def run(args, out):
    """Run every case, smallest sizes first; print each and write the CSV after it.

    Parameters
    ----------
    args : argparse.Namespace
    out : Path
        The CSV file.

    Returns
    -------
    list of dict
        The rows, times as floats.
    """
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(
        ["wacoll.plans", "wacoll.plans.sim", *(FAMILIES[f] for f in FAMILIES)]
    )
    todo = cases(args.families, args.ops)
    sizes = sorted(set(args.sizes) | set(args.rooted_sizes))
    failed = {}
    rows = []
    print(_header(), flush=True)  # the cases are printed, not kept: the CSV has them
    for ranks in sizes:
        for family, op in todo:
            if ranks not in args.sizes and not rooted(op):
                continue
            if (family, op) in failed:
                row = not_run(family, op, ranks, args.clusters, failed[(family, op)])
                own = run_one(ctx, family, op, ranks, args, whole=False)
                if own["status"] == "ok":  # one rank's own programs still derived
                    row.update({k: v for k, v in own.items() if k.startswith("rank_")})
            else:
                row = run_one(ctx, family, op, ranks, args)
                if row["status"] in ("over budget", "out of memory"):
                    failed[(family, op)] = row
            rows.append(row)
            print(_line(row), flush=True)
            write_csv(out, FIELDS, [_formatted(r) for r in rows])
    return rows


# ----------------------------------------------------------------- the growth
def fit_exponent(ranks, values, points, floor):
    """The exponent ``a`` of ``value ~ ranks^a``: a least-squares line on log-log axes
    through the last ``points`` pairs whose value is at least ``floor``.

    Parameters
    ----------
    ranks, values : sequence of float
        In increasing order of ranks; a value None is left out.
    points : int
    floor : float

    Returns
    -------
    (float, int, int) or None
        The exponent and the smallest and largest ranks it was fitted on; None with
        fewer than two usable pairs.

    Examples
    --------
    >>> a, lo, hi = fit_exponent([64, 128, 256, 512], [0.001, 0.04, 0.16, 0.64], 3, 0.01)
    >>> round(a, 3), lo, hi
    (2.0, 128, 512)
    """
    pairs = [(p, v) for p, v in zip(ranks, values) if v is not None and v >= floor]
    pairs = pairs[-points:]
    if len(pairs) < 2:
        return None
    x = np.log([p for p, _ in pairs])
    y = np.log([v for _, v in pairs])
    slope = float(np.polyfit(x, y, 1)[0])
    return slope, pairs[0][0], pairs[-1][0]


def growth(rows, points):
    """The fitted exponents of every (family, op) with at least one case that ran.

    Parameters
    ----------
    rows : list of dict
    points : int
        Sizes per fit (the last ones that ran).

    Returns
    -------
    list of dict
        ``FIT_FIELDS`` rows: the exponent of each step's CPU time (``lower`` is the
        slower of the two ranks), of the total and of the memory above the base
        (None where there were too few usable sizes); ``fitted_ranks`` is the range
        of the total's fit.
    """
    out = []
    for family, op in dict.fromkeys((r["family"], r["op"]) for r in rows):
        mine = [r for r in rows if (r["family"], r["op"]) == (family, op)]
        ok = [r for r in mine if r["status"] == "ok"]
        if not ok:
            continue
        ranks = [r["ranks"] for r in ok]
        series = {
            p: [r[f"{p}_cpu_s"] for r in ok]
            for p in ("build", "check", "simulate", "total")
        }
        series["lower"] = [max(r["lower_first_cpu_s"], r["lower_last_cpu_s"]) for r in ok]
        fit = {"family": family, "op": op, "largest_ranks": ranks[-1]}
        after = [r for r in mine if r["ranks"] > ranks[-1]]
        fit["status_after"] = after[0]["status"] if after else ""
        for name, values in series.items():
            found = fit_exponent(ranks, values, points, FIT_MIN_SECONDS)
            fit[name] = None if found is None else found[0]
            if name == "total" and found is not None:
                fit["fitted_ranks"] = f"{found[1]}-{found[2]}"
        memory = [r["peak_rss_mib"] - r["base_rss_mib"] for r in ok]
        found = fit_exponent(ranks, memory, points, FIT_MIN_MIB)
        fit["memory"] = None if found is None else found[0]
        own = [r for r in mine if r.get("rank_last_cpu_s") is not None]
        for name, values, floor in (
            ("rank", [_rank_cpu(r) for r in own], FIT_MIN_SECONDS),
            ("rank_memory", [_rank_mib(r) for r in own], FIT_MIN_MIB),
        ):
            found = fit_exponent([r["ranks"] for r in own], values, points, floor)
            fit[name] = None if found is None else found[0]
        out.append(fit)
    return out


def _rank_cpu(row):
    """The slower of the two ranks' own derivations, CPU seconds."""
    return max(row["rank_first_cpu_s"], row["rank_last_cpu_s"])


def _rank_mib(row):
    """The larger of the two ranks' own derivations' peak memory, MiB."""
    return max(row["rank_first_mib"], row["rank_last_mib"])


def dominant(row):
    """The step that took the most CPU time in a case that ran, e.g. ``"check 61%"``."""
    times = {
        "build": row["build_cpu_s"],
        "check": row["check_cpu_s"],
        "lower": row["lower_first_cpu_s"] + row["lower_last_cpu_s"],
        "simulate": row["simulate_cpu_s"],
    }
    name = max(times, key=times.get)
    total = sum(times.values())
    return f"{name} {100 * times[name] / total:.0f}%" if total > 0 else "-"


# ------------------------------------------------------------------ reporting
def _formatted(row):
    """A row for the CSV: times to 4 significant digits, memory to 0.1 MiB."""
    out = dict(row)
    for p in (*PHASES, *RANK_PHASES, "total"):
        for key in (f"{p}_s", f"{p}_cpu_s"):
            if out.get(key) is not None:
                out[key] = f"{out[key]:.4g}"
    for key in ("base_rss_mib", "peak_rss_mib", "rank_first_mib", "rank_last_mib"):
        if out.get(key) is not None:
            out[key] = f"{out[key]:.1f}"
    return out


def _header():
    return (
        f"{'ranks':>6} {'family':9} {'op':20} {'rank':>7} {'rankMiB':>7} "
        f"{'build':>8} {'check':>8} "
        f"{'lower0':>7} {'lowerN':>7} {'simul':>7} {'total':>8} {'steps':>9} "
        f"{'peak MiB':>8}  status"
    )


def _cell(value, width, digits=4):
    return f"{'':>{width}}" if value is None else f"{value:{width}.{digits}f}"


def _line(row):
    status = row["status"] + (f" ({row['note']})" if row.get("note") else "")
    own = row.get("rank_last_s") is not None
    return (
        f"{row['ranks']:>6} {row['family']:9} {row['op']:20} "
        f"{_cell(max(row['rank_first_s'], row['rank_last_s']) if own else None, 7)} "
        f"{_cell(_rank_mib(row) if own else None, 7, 1)} "
        f"{_cell(row.get('build_s'), 8)} {_cell(row.get('check_s'), 8)} "
        f"{_cell(row.get('lower_first_s'), 7)} {_cell(row.get('lower_last_s'), 7)} "
        f"{_cell(row.get('simulate_s'), 7)} {_cell(row.get('total_s'), 8)} "
        f"{row.get('steps') or '':>9} {_mib(row.get('peak_rss_mib'))}  {status}"
    )


def _mib(value):
    return f"{'':>8}" if value is None else f"{value:8.0f}"


def _exp(value):
    return "   -" if value is None else f"{value:4.1f}"


def summary(rows, fits, points, say):
    """Print the largest size each (family, op) ran, its times and memory, and the
    fitted exponents, with one sentence per (family, op).

    Parameters
    ----------
    rows : list of dict
    fits : list of dict
        From :func:`growth`.
    points : int
        Sizes per fit, for the text.
    say : Report
    """
    by_case = {(f["family"], f["op"]): f for f in fits}
    say(
        f"{'op/family':30} {'ranks':>6} {'wall s':>8} {'CPU s':>8} {'peak MiB':>8} "
        f"{'most CPU':>13} {'next size':>13}  CPU-time exponents: build check lower "
        f"simul total, memory"
    )
    for family, op in dict.fromkeys((r["family"], r["op"]) for r in rows):
        fit = by_case.get((family, op))
        name = f"{op}/{family}"
        if fit is None:
            first = next(r for r in rows if (r["family"], r["op"]) == (family, op))
            say(
                f"{name:30} {first['ranks']:>6} {'':>8} {'':>8} {'':>8} {'':>13} "
                f"{first['status']:>13}"
            )
            continue
        last = next(
            r
            for r in rows
            if (r["family"], r["op"]) == (family, op)
            and r["ranks"] == fit["largest_ranks"]
        )
        say(
            f"{name:30} {last['ranks']:>6} {last['total_s']:8.3f} "
            f"{last['total_cpu_s']:8.3f} {last['peak_rss_mib']:8.0f} "
            f"{dominant(last):>13} {fit['status_after'] or '-':>13}  "
            f"{_exp(fit['build'])} {_exp(fit['check'])} {_exp(fit['lower'])} "
            f"{_exp(fit['simulate'])} {_exp(fit['total'])}, {_exp(fit['memory'])}"
        )
    say()
    say(
        "one rank's own program (focused build and lowering, proof cached), at the "
        "largest size derived: the slower of ranks 0 and P-1"
    )
    say(
        f"{'op/family':30} {'ranks':>6} {'CPU s':>8} {'wall s':>8} {'peak MiB':>8}  "
        f"exponents: CPU time, memory"
    )
    for family, op in dict.fromkeys((r["family"], r["op"]) for r in rows):
        own = [
            r
            for r in rows
            if (r["family"], r["op"]) == (family, op)
            and r.get("rank_last_cpu_s") is not None
        ]
        if not own:
            continue
        last, fit = own[-1], by_case.get((family, op), {})
        say(
            f"{op + '/' + family:30} {last['ranks']:>6} {_rank_cpu(last):8.3f} "
            f"{max(last['rank_first_s'], last['rank_last_s']):8.3f} "
            f"{_rank_mib(last):8.1f}  {_exp(fit.get('rank'))} "
            f"{_exp(fit.get('rank_memory'))}"
        )
    say()
    say(
        "growth found (CPU time ~ P^a, least squares on log-log axes over the last "
        f"{points} sizes that ran, times from {FIT_MIN_SECONDS * 1000:g} ms):"
    )
    for fit in fits:
        if fit["total"] is None:
            say(
                f"  {fit['op']}/{fit['family']}: under {FIT_MIN_SECONDS * 1000:g} ms up to "
                f"{fit['largest_ranks']} ranks, no fit"
            )
            continue
        parts = [
            f"{n} P^{fit[n]:.1f}"
            for n in ("build", "check", "lower", "simulate")
            if fit[n] is not None
        ]
        memory = (
            ""
            if fit["memory"] is None
            else f"; memory above base ~ P^{fit['memory']:.1f}"
        )
        detail = f" ({', '.join(parts)})" if parts else ""
        say(
            f"  {fit['op']}/{fit['family']}: total ~ P^{fit['total']:.1f}{detail} on "
            f"{fit['fitted_ranks']} ranks{memory}"
        )


def plot(rows, path, args):
    """Total time and peak memory against ranks, log-log: a column per family, a line
    per operation; a cross at the budget or the cap where a size went over it."""
    plt = pyplot()
    families = list(dict.fromkeys(r["family"] for r in rows))
    ops = list(dict.fromkeys(r["op"] for r in rows))
    colours = plt.get_cmap("tab20")
    colour = {op: colours(i % 20) for i, op in enumerate(ops)}
    fig, axes = plt.subplots(
        2,
        len(families),
        figsize=(3.6 * len(families) + 2.5, 7),
        sharex=True,
        sharey="row",
        squeeze=False,
    )
    for col, family in enumerate(families):
        top, bottom = axes[0][col], axes[1][col]
        for op in ops:
            mine = [r for r in rows if r["family"] == family and r["op"] == op]
            ok = [r for r in mine if r["status"] == "ok"]
            if ok:
                xs = [r["ranks"] for r in ok]
                top.plot(xs, [r["total_s"] for r in ok], "o-", ms=3, color=colour[op])
                bottom.plot(
                    xs, [r["peak_rss_mib"] for r in ok], "o-", ms=3, color=colour[op]
                )
            over = [
                r
                for r in mine
                if r["status"] == "over budget"
                and not r.get("note", "").startswith("not run")
            ]
            oom = [
                r
                for r in mine
                if r["status"] == "out of memory"
                and not r.get("note", "").startswith("not run")
            ]
            for r in over:
                top.plot([r["ranks"]], [args.budget], "x", ms=7, color=colour[op])
            for r in oom:
                bottom.plot(
                    [r["ranks"]],
                    [args.max_memory / (1 << 20)],
                    "x",
                    ms=7,
                    color=colour[op],
                )
        top.axhline(args.budget, ls="--", lw=0.8, color="grey")
        bottom.axhline(args.max_memory / (1 << 20), ls="--", lw=0.8, color="grey")
        top.set_title(family)
        for ax in (top, bottom):
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.grid(True, which="both", lw=0.3, alpha=0.5)
        bottom.set_xlabel("ranks")
    axes[0][0].set_ylabel("build + check + lower 2 ranks + simulate,\nwall-clock (s)")
    axes[1][0].set_ylabel("peak resident memory (MiB)")
    handles = [
        plt.Line2D([], [], color=colour[op], marker="o", ms=3, label=op) for op in ops
    ]
    handles += [
        plt.Line2D([], [], color="grey", ls="--", label="budget / memory cap"),
        plt.Line2D(
            [], [], color="black", ls="", marker="x", label="over budget / out of memory"
        ),
    ]
    fig.legend(handles=handles, loc="center right", fontsize=8, frameon=False)
    fig.suptitle(
        f"plan growth on {args.clusters} clusters: time and memory per case "
        f"(budget {args.budget:g} s, cap {human(args.max_memory)})"
    )
    fig.tight_layout(rect=(0, 0, 1 - 2.3 / fig.get_figwidth(), 1))
    save_figure(fig, path, dpi=110)


# ----------------------------------------------------------------------- main
def _sizes(text):
    """A comma-separated list of rank counts, for argparse (an empty string: none)."""
    try:
        sizes = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of rank counts: {text!r}") from None
    if any(s < 1 for s in sizes):
        raise argparse.ArgumentTypeError(f"rank counts must be >= 1: {text!r}")
    return sizes


def _names(text):
    return [t.strip() for t in text.split(",") if t.strip()]


def parse_args(argv):
    """The command line (see the module docstring).

    Parameters
    ----------
    argv : list of str

    Returns
    -------
    argparse.Namespace
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="16, 32 and 64 ranks (128 for rooted operations), budget "
        "10 s: a check that the benchmark works",
    )
    parser.add_argument(
        "--sizes",
        type=_sizes,
        default=None,
        help="comma-separated rank counts of every operation "
        f"(default {','.join(map(str, DEFAULT_SIZES))})",
    )
    parser.add_argument(
        "--rooted-sizes",
        type=_sizes,
        default=None,
        help="further rank counts of the rooted operations "
        f"(default {','.join(map(str, DEFAULT_ROOTED_SIZES))})",
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=None,
        help="wall-clock seconds per case (default 60; 10 with --quick)",
    )
    parser.add_argument(
        "--max-memory",
        type=parse_size,
        default=parse_size("6G"),
        help="address-space cap of a case (default 6G)",
    )
    parser.add_argument("--clusters", type=int, default=8, help="clusters (default 8)")
    parser.add_argument(
        "--level",
        default="commutative",
        choices=("strict", "associative", "commutative"),
        help="reduction level (default commutative)",
    )
    parser.add_argument(
        "--families",
        type=_names,
        default=None,
        help=f"comma-separated subset of {','.join(FAMILIES)}",
    )
    parser.add_argument(
        "--ops", type=_names, default=None, help="comma-separated subset of operations"
    )
    parser.add_argument(
        "--fit-points",
        type=int,
        default=4,
        help="sizes per fitted exponent, the last that ran (default 4)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="the CSV file (default benchmarks/results/growth.csv, "
        "growth-quick.csv with --quick)",
    )
    args = parser.parse_args(argv)
    if args.sizes is None:
        args.sizes = QUICK_SIZES if args.quick else DEFAULT_SIZES
    if args.rooted_sizes is None:
        args.rooted_sizes = QUICK_ROOTED_SIZES if args.quick else DEFAULT_ROOTED_SIZES
    if args.budget is None:
        args.budget = 10.0 if args.quick else 60.0
    if args.budget <= 0:
        parser.error("--budget must be positive")
    if args.clusters < 1:
        parser.error("--clusters must be at least 1")
    if args.fit_points < 2:
        parser.error("--fit-points must be at least 2")
    unknown = sorted(set(args.families or ()) - set(FAMILIES))
    if unknown:
        parser.error(f"unknown family {unknown[0]!r}; known: {', '.join(FAMILIES)}")
    unknown = sorted(set(args.ops or ()) - set(OPERATIONS))
    if unknown:
        parser.error(f"unknown operation {unknown[0]!r}")
    if not cases(args.families, args.ops):
        parser.error("no family builds the operations asked for")
    if args.out is None:
        args.out = RESULTS / ("growth-quick.csv" if args.quick else "growth.csv")
    return args


def main(argv=None):
    """Run the benchmark; write the CSV, fit, plot and text files.

    Parameters
    ----------
    argv : list of str, optional
        Default ``sys.argv[1:]``.

    Returns
    -------
    list of dict
        The rows.
    """
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    out = args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    say = Report()
    say(f"command: {command_line(__file__, argv)}")
    say(
        f"{load_text()}; budget {args.budget:g} s and address space "
        f"{human(args.max_memory)} per case; {args.clusters} clusters; "
        f"reductions at level {args.level}; times in seconds"
    )
    started = time.perf_counter()
    rows = run(args, out)
    say(
        f"ran {sum(1 for r in rows if 'not run' not in r.get('note', ''))} of "
        f"{len(rows)} cases in {time.perf_counter() - started:.0f} s; {load_text()}"
    )
    say()
    fits = growth(rows, args.fit_points)
    summary(rows, fits, args.fit_points, say)
    write_csv(
        out.with_name(out.stem + "-fit.csv"),
        FIT_FIELDS,
        [
            {k: (f"{v:.2f}" if isinstance(v, float) else v) for k, v in f.items()}
            for f in fits
        ],
    )
    plot(rows, out.with_suffix(".png"), args)
    say()
    say(
        f"wrote {out}, {out.with_name(out.stem + '-fit.csv').name}, "
        f"{out.with_suffix('.png').name}, {out.with_suffix('.txt').name}"
    )
    say.write(out.with_suffix(".txt"))
    return rows


if __name__ == "__main__":
    main()
