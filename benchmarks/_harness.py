"""What the benchmark drivers (``benchmarks/bench_*.py``) share around their experiments.

Recording a run: the report every driver prints and saves as its ``.txt`` file, the
command line and machine load it states, its CSV file, its plot's ``pyplot`` (and
the goal's band around predicted = measured); reading and printing message sizes;
the environment of the ``mpiexec`` workers a driver starts; and the testbed glue of
the drivers that start an emulated testbed themselves (start it with its warnings
kept, print its self-check, say why a run failed). The drivers are run as
``python benchmarks/bench_x.py``, so this directory is ``sys.path[0]`` and they
``import _harness``. Code that runs on MPI ranks is in ``apps/_rankside.py``.

Examples
--------
>>> human(65536), parse_size("64K"), median([3.0, None, 1.0])
('64 KiB', 65536, 2.0)
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import os
import shlex
import statistics
import sys
import time
import warnings
from pathlib import Path

__all__ = [
    "ROOT",
    "RESULTS",
    "Report",
    "command_line",
    "repo_path",
    "load1",
    "load_text",
    "median",
    "human",
    "parse_size",
    "write_csv",
    "worker_env",
    "mpiexec",
    "pyplot",
    "save_figure",
    "goal_band",
    "started_testbed",
    "report_check",
    "failure",
]

#: The repository's root: commands are stated as run from there.
ROOT = Path(__file__).resolve().parent.parent
#: Where the drivers write their result files.
RESULTS = ROOT / "benchmarks" / "results"

_UNITS = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))


class Report:
    """Prints lines as they come and keeps them for the run's ``.txt`` file.

    Call it like ``print`` with one string; ``lines`` holds what was printed.

    Examples
    --------
    >>> say = Report()
    >>> say("hello")
    hello
    >>> say.lines
    ['hello']
    """

    def __init__(self):
        self.lines = []

    def __call__(self, text=""):
        """Print ``text`` (flushed at once) and keep it.

        Parameters
        ----------
        text : str
            One line (or several, joined by newlines).
        """
        print(text, flush=True)
        self.lines.append(text)

    def write(self, path):
        """Write every line kept so far to ``path``, newline-terminated.

        Parameters
        ----------
        path : str or Path
            The ``.txt`` file.
        """
        Path(path).write_text("\n".join(self.lines) + "\n")


def repo_path(path):
    """``path`` as written in a stated command: relative to the repository's root
    when it lies inside it, else absolute.

    Parameters
    ----------
    path : str or Path
        A file, absolute or relative to the working directory.

    Returns
    -------
    str
    """
    path = Path(os.path.abspath(path))
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def command_line(script, argv, launcher=()):
    """The shell command that reruns a driver from the repository's root.

    Parameters
    ----------
    script : str or Path
        The driver's file (its ``__file__``).
    argv : list of str
        The arguments it parsed.
    launcher : sequence of str, optional
        Words before the interpreter, e.g. ``("mpiexec", "-n", "4")``.

    Returns
    -------
    str
        Shell-quoted, e.g. ``".venv/bin/python benchmarks/bench_x.py --quick"``.
    """
    return shlex.join([*launcher, repo_path(sys.executable), repo_path(script), *argv])


def load1():
    """The 1-minute load average, rounded to 0.01 (other jobs on the machine add noise).

    Returns
    -------
    float
        NaN where the system does not say.
    """
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return float("nan")


def load_text():
    """The load averages and the core count, for a report's line.

    Returns
    -------
    str
        E.g. ``"load average 1.52, 1.20, 0.80 (1, 5, 15 min) on 2 cores"``.
    """
    one, five, fifteen = os.getloadavg()
    return (
        f"load average {one:.2f}, {five:.2f}, {fifteen:.2f} (1, 5, 15 min) on "
        f"{os.cpu_count()} cores"
    )


def median(values):
    """The median of the values that are not None.

    Parameters
    ----------
    values : iterable of float or None, or None
        Times, with None for a run that did not count.

    Returns
    -------
    float or None
        None when no value counts.
    """
    values = [v for v in values or [] if v is not None]
    return statistics.median(values) if values else None


def human(nbytes):
    """A byte count in the largest binary unit that divides it.

    Parameters
    ----------
    nbytes : int

    Returns
    -------
    str
        ``8 -> "8 B"``, ``65536 -> "64 KiB"``, ``1536 -> "1536 B"``.
    """
    for unit, factor in _UNITS:
        if nbytes >= factor and nbytes % factor == 0:
            return f"{nbytes // factor} {unit}"
    return f"{nbytes} B"


def parse_size(text):
    """A message size from the command line, for ``argparse``'s ``type=``.

    Parameters
    ----------
    text : str
        A number with an optional suffix K, M or G (powers of 1024) and an optional
        ``B`` or ``iB``: ``"8"``, ``"64K"``, ``"1MiB"``.

    Returns
    -------
    int
        Bytes, at least 1.

    Raises
    ------
    argparse.ArgumentTypeError
        When ``text`` is not such a size.
    """
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    scale = 1
    for suffix, factor in (("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30)):
        if t.endswith(suffix):
            t, scale = t[:-1], factor
            break
    try:
        value = int(float(t) * scale)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"size must be >= 1 byte: {text!r}")
    return value


def calls_per_batch(fn, target, cap=1 << 20):
    """Enough calls of ``fn`` that one timed batch lasts about ``target`` seconds.

    Examples
    --------
    >>> calls_per_batch(lambda: None, 0.001) > 1
    True
    """
    number = 1
    while True:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        if time.perf_counter() - start >= target / 4 or number >= cap:
            elapsed = (time.perf_counter() - start) / number
            return max(1, int(target / max(elapsed, 1e-9)))
        number *= 4


def write_csv(path, fields, rows):
    """Write ``rows`` to a CSV file with the columns ``fields``.

    Parameters
    ----------
    path : str or Path
    fields : list of str
        The columns, in order; keys of a row not among them are left out, and a
        column a row lacks is left empty.
    rows : iterable of dict
    """
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


#: The operations :func:`collective_caller` calls.
CALLED_OPS = (
    "Allreduce",
    "Bcast",
    "Reduce",
    "Allgather",
    "Gather",
    "Scatter",
    "Alltoall",
)


def collective_caller(comm, op, rank, size, np, MPI):
    """``call(n)``: one call of ``op`` (``"Allreduce"``, ``"Bcast"``, ``"Reduce"``,
    ``"Allgather"``, ``"Gather"``, ``"Scatter"``, ``"Alltoall"``) on ``comm`` with
    ``n`` float64 elements (per rank where the operation moves a block per rank),
    over buffers big enough for any count up to 2**17 (the workers' ``np`` and
    ``MPI``, imported there)."""
    if op not in CALLED_OPS:
        raise ValueError(f"unknown operation {op!r}; known: {', '.join(CALLED_OPS)}")
    big = 1 << 17
    send = np.full(big * size, rank + 1.0)
    out = np.zeros(big * size)

    def call(n):
        if op == "Allreduce":
            comm.Allreduce(send[:n], out[:n], op=MPI.SUM)
        elif op == "Bcast":
            comm.Bcast(out[:n], root=0)
        elif op == "Reduce":
            comm.Reduce(send[:n], out[:n] if rank == 0 else None, op=MPI.SUM, root=0)
        elif op == "Allgather":
            comm.Allgather(send[:n], out[: n * size])
        elif op == "Gather":
            comm.Gather(send[:n], out[: n * size] if rank == 0 else None, root=0)
        elif op == "Scatter":
            comm.Scatter(send[: n * size] if rank == 0 else None, out[:n], root=0)
        elif op == "Alltoall":
            comm.Alltoall(send[: n * size], out[: n * size])

    return call


def mpiexec():
    """The ``mpiexec`` of this interpreter's environment (the MPI wheel's, beside
    ``python``), else the first on ``PATH``."""
    local = Path(sys.executable).parent / "mpiexec"
    return str(local) if local.exists() else "mpiexec"


def worker_env(ranks=None, halves=False):
    """The environment of a driver's ``mpiexec`` workers: this process's without its
    ``WACOLL_`` settings (the workers run wacoll's defaults).

    Parameters
    ----------
    ranks : int, optional
        The number of ranks (needed with ``halves``).
    halves : bool, optional
        Declare the ranks as two clusters, the first half and the rest
        (``WACOLL_CLUSTERS``).

    Returns
    -------
    dict
        For ``subprocess.run(..., env=...)``.

    Examples
    --------
    >>> worker_env(5, halves=True)["WACOLL_CLUSTERS"]
    '0,0,0,1,1'
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("WACOLL_")}
    if halves:
        env["WACOLL_CLUSTERS"] = ",".join(str(2 * r // ranks) for r in range(ranks))
    return env


def pyplot():
    """``matplotlib.pyplot`` on the file-only Agg backend (no display needed).

    Returns
    -------
    module
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path, dpi):
    """Save a figure and close it.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        Laid out with ``tight_layout`` first, unless it was made with a layout engine
        of its own (``constrained_layout=True``).
    path : str or Path
    dpi : int
    """
    if fig.get_layout_engine() is None:
        fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)


def goal_band(ax, lo, hi, goal):
    """Draw predicted = measured from ``lo`` to ``hi`` and the band within ``goal``
    of it, on logarithmic axes (a scatter of predictions against measurements).

    Parameters
    ----------
    ax : matplotlib.axes.Axes
    lo, hi : float
        The ends of the diagonal, in the axes' units.
    goal : float
        The band's half-width, relative (0.15: within 15 %); its legend label says it.
    """
    ax.plot([lo, hi], [lo, hi], "k-", lw=0.8)
    ax.fill_between(
        [lo, hi],
        [lo * (1 - goal), hi * (1 - goal)],
        [lo * (1 + goal), hi * (1 + goal)],
        color="g",
        alpha=0.15,
        label=f"within {goal:.0%}",
    )
    ax.set_xscale("log")
    ax.set_yscale("log")


@contextlib.contextmanager
def started_testbed(topology, **options):
    """Start an emulated testbed, keeping the warnings of its start; stop it on leaving.

    Parameters
    ----------
    topology : wacoll.Topology
    **options
        Keyword arguments of :class:`wacoll.emulate.Testbed` (``name``, ``per_node``,
        ``time_limit``, ...).

    Yields
    ------
    tb : wacoll.emulate.Testbed
        Started and self-checked.
    caught : list of warnings.WarningMessage
        What the start warned about (e.g. a self-check that is off).

    Raises
    ------
    wacoll.emulate.TestbedError
        When the testbed cannot start (it is then not stopped: nothing runs).
    """
    from wacoll.emulate import Testbed

    tb = Testbed(topology, **options)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tb.start()
    try:
        yield tb, caught
    finally:
        tb.stop()


def report_check(say, check, caught=()):
    """Print a testbed's self-check table under a heading, indented.

    Parameters
    ----------
    say : Report
    check : wacoll.emulate.ProbeReport
    caught : list of warnings.WarningMessage, optional
        Warnings of the testbed's start (from :func:`started_testbed`), printed after.
    """
    say("testbed self-check (configured vs measured):")
    for line in check.table().splitlines():
        say("  " + line)
    for w in caught:
        say(f"  WARNING: {w.message}")


def failure(run):
    """Why a testbed run failed, in a few words.

    Parameters
    ----------
    run : wacoll.emulate.RunResult
        A run that is not ``ok``.

    Returns
    -------
    str
        ``"timed out"`` or ``"exit status N"``.
    """
    return "timed out" if run.timed_out else f"exit status {run.returncode}"
