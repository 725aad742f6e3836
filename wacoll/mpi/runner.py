"""The compiled runner: a lowered program run without Python per step.

:func:`compile_program` turns one rank's :class:`~wacoll.plans.lower.LoweredProgram` into
two int64 tables, a row per step and a row per byte run, and sizes one work area
(the program's scratch buffers, the landing areas of receives that cannot land in
place, and the staging areas of steps that read several runs). A
:class:`~wacoll.mpi._runner.Runner` holds them, owns the work area and runs the
program with the GIL released, as :class:`wacoll.mpi.executor.ProgramRun` does step by step
in Python: every receive posted at the start, then the steps in program order, a
send posted when reached, a receive waited for when its data is needed, and a write
waiting for the sends still reading what it overwrites. Consecutive
``recv_combine`` steps of one arrival-order group are combined in program order
(one of the orders the group allows).

The runner calls MPI through the entry points of the library mpi4py loaded, found at
run time (:func:`mpi_entry_points`), so the compiled part needs no ``mpi.h`` and the
same build runs under MPICH, Open MPI and a site MPI alike: only ``MPI_Isend`` and
``MPI_Irecv`` take handles by value, and they are called with the handle width
mpi4py reports (``_mpicalls.h``).

A program the runner does not take (:func:`compile_program` returns None) runs in
:class:`~wacoll.mpi.executor.ProgramRun`: one on reproducible arithmetic (accumulators
packed on the wire), one whose combines need an operator or element type the
kernels lack (a user-defined operator, MINLOC/MAXLOC pairs), or a message of 2 GiB
or more.

Examples
--------
Under ``mpiexec``, or on one process::

    >>> import numpy as np
    >>> from mpi4py import MPI
    >>> from wacoll import Topology
    >>> from wacoll.plans import build, lower
    >>> plan = build("allreduce", Topology.single(1), "magpie", count=4)
    >>> compiled = compile_program(lower(plan, 0), np.dtype(float), MPI.SUM)
    >>> runner = compiled.runner(MPI.COMM_SELF)
    >>> send, out = np.arange(4.0), np.zeros(4)
    >>> runner.run(send.ctypes.data, out.ctypes.data, 7)
    >>> out.tolist()
    [0.0, 1.0, 2.0, 3.0]
"""

from __future__ import annotations

import ctypes
import functools
import os
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

import wacoll.mpi._fastcall as _fastcall
import wacoll.mpi._runner as _runner
from wacoll import _kernels
from wacoll.mpi.keeper import stream_keeper
from wacoll.plans.lower import ElementRuns

__all__ = [
    "verdicts_ring",
    "CompiledProgram",
    "array_address",
    "bound_runner",
    "compile_program",
    "CountTables",
    "count_units",
    "handle",
    "mpi_entry_points",
    "runner_ready",
]


_KINDS = _runner.KINDS
_BYTES = 6  # the column of a step's bytes
_STAGE = 7  # the column of a step's staging area (its offset in the work area)
_ALIGN = 64
#: The largest message the runner sends (MPI's count is an int).
MAX_MESSAGE = 2**31 - 1


def _aligned(n):
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


#: How a blocking wait of the runner polls (seconds): it spins for ``SPIN``, then
#: yields the core between polls until ``YIELD`` (a peer that shares the core runs
#: at once), then naps. Where the library was asked to give up idle cores it naps
#: from the first miss instead (:func:`cores_shared`): ranks that yield still take
#: turns on the cores, and a rank whose message has arrived waits behind them.
#: ``YIELD`` is long against a call's own wait, as the library's blocking waits poll
#: throughout: a nap stalls every rank that waits on this one, and the library's
#: non-blocking collectives advance only while their ranks poll (8 ranks on 2 cores,
#: two clusters, loops of back-to-back calls: a 1 KiB Gather 192-481 us a call
#: napping after 1 ms, 74 yielding for 5 ms, the library's 48-60; a 64 KiB Gather
#: the library runs, non-blocking beside its check, 3.7 ms and 0.8). It is short
#: against a rank's own work between calls (a first call's plan, learning), which
#: ranks that yield would slow where they share its core (the MPI tests at 3 ranks
#: on 2 cores took 50 s napping after 1 ms, 70 s yielding for 50 ms).
SPIN, YIELD = 2e-6, 5e-3


def cores_shared(environ) -> bool:
    """Whether the MPI library was asked to give up idle cores (MPICH's
    ``MPIR_CVAR_ENABLE_HEAVY_YIELD``, Open MPI's ``mpi_yield_when_idle``, as the
    testbed asks where ranks outnumber cores): then the runner's waits nap from
    the first miss, as the library's do.

    Ranks that outnumber the cores without that request keep yielding first: with
    no network between them a message arrives within microseconds, and a nap lasts
    the kernel's timer slack (8 ranks on 2 cores, 2 declared clusters: a checked 8 B
    Bcast took 186 us napping, 41 us yielding).

    Examples
    --------
    >>> cores_shared({"MPIR_CVAR_ENABLE_HEAVY_YIELD": "1"})
    True
    >>> cores_shared({"MPI_LOCALNRANKS": "8"})
    False
    """
    return (
        environ.get("MPIR_CVAR_ENABLE_HEAVY_YIELD") == "1"
        or environ.get("OMPI_MCA_mpi_yield_when_idle") == "1"
    )


@functools.cache
def mpi_entry_points():
    """Install the MPI library's entry points into the runner, and its blocking
    collectives into the replayed one-cluster calls (once per process).

    The library is the one mpi4py's extension module loaded: its symbols are looked
    up through that module (whose dependencies include the library), or, when
    mpi4py loaded the library itself at run time, in the loaded ``libmpi`` found in
    the process's memory map. Returns the library's path or the module's.
    """
    from mpi4py import MPI

    names = (
        "MPI_Isend",
        "MPI_Irecv",
        "MPI_Test",
        "MPI_Testany",
        "MPI_Cancel",
        "MPI_Wait",
        "MPI_Finalized",
    )
    # (the blocking collectives a replayed one-cluster call makes itself)
    # and the non-blocking ones a replayed call the library runs on several
    # clusters starts itself)
    kinds = _fastcall.DIRECT_KINDS
    collectives = [f"MPI_{k.capitalize()}" for k in sorted(kinds, key=kinds.get)]
    started = [f"MPI_I{k}" for k in sorted(kinds, key=kinds.get)]
    for path in _candidates(MPI.__file__):
        try:
            lib = ctypes.CDLL(path)
            addresses = [
                ctypes.cast(getattr(lib, n), ctypes.c_void_p).value
                for n in (*names, *collectives, *started)
            ]
        except (OSError, AttributeError):
            continue
        blocking = addresses[len(names) : len(names) + len(collectives)]
        _fastcall.set_collectives(
            MPI._sizeof(MPI.Comm), blocking, handle(MPI.REQUEST_NULL)
        )
        _runner.set_nonblocking(
            MPI._sizeof(MPI.Comm), addresses[len(names) + len(collectives) :]
        )
        addresses = addresses[: len(names)]
        _runner.set_mpi(
            MPI._sizeof(MPI.Comm),
            handle(MPI.BYTE),
            handle(MPI.REQUEST_NULL),
            *addresses,
            _kernels.kernel_capsule(),
        )
        _runner.set_waits(SPIN, 0.0 if cores_shared(os.environ) else YIELD)
        return path
    raise ImportError("the compiled runner found no MPI library in this process")


def handle(obj):
    """An mpi4py object's MPI handle as a signed integer the width of a pointer
    (mpi4py reports it unsigned)."""
    from mpi4py import MPI

    value = MPI._handleof(obj)
    return value - (1 << 64) if value >= 1 << 63 else value


def _candidates(module_file):
    yield module_file
    try:
        with open("/proc/self/maps") as maps:
            seen = []
            for line in maps:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                if "libmpi" in path.rsplit("/", 1)[-1] and path not in seen:
                    seen.append(path)
                    yield path
    except OSError:  # not Linux: the module's dependencies are all there is
        return


def runner_ready():
    """Whether the compiled runner can run here (its MPI entry points found)."""
    try:
        mpi_entry_points()
    except ImportError:
        return False
    return True


@dataclass(frozen=True)
class CompiledProgram:
    """One rank's program as the runner's tables.

    Attributes
    ----------
    steps, runs : numpy.ndarray
        The runner's step rows and byte runs.
    work_bytes : int
        Bytes of the work area.
    scratch : dict
        Byte offset of each scratch buffer of the program in the work area.
    op, dtype_code, itemsize : int
        The kernel's operator and type codes (-1 when the program combines nothing)
        and the element size.
    in_bytes, out_bytes : int
        The fewest bytes the input and output buffers must hold.
    regions : tuple of int
        Bytes of each region of the work area, in order (the scratch buffers,
        then the staging areas), each starting 64-byte aligned.
    run_regions, stage_regions : numpy.ndarray
        The region of each run (-1: the input or output) and of each step's
        staging area (-1: none).
    """

    steps: np.ndarray
    runs: np.ndarray
    work_bytes: int
    scratch: dict
    op: int
    dtype_code: int
    itemsize: int
    in_bytes: int
    out_bytes: int
    regions: tuple
    run_regions: np.ndarray
    stage_regions: np.ndarray

    def runner(self, comm):
        """A :class:`~wacoll.mpi._runner.Runner` of this program on ``comm`` (an
        mpi4py communicator), with a work area of its own."""
        mpi_entry_points()
        return _runner.Runner(
            self.steps,
            self.runs,
            self.work_bytes,
            handle(comm),
            self.op,
            self.dtype_code,
            self.itemsize,
        )


def verdicts_ring(tables, comm, after=None, defer=True, regions=None):
    """The :class:`~wacoll.mpi._runner.Verdicts` of a communicator's blocking calls
    on ``comm`` (a communicator of their own): with ``regions`` (its ranks share
    one node: :attr:`wacoll.mpi.agreement.NodeCheck.stream_regions`) a
    :class:`~wacoll.mpi._runner.NodeStream`; else with ``defer`` (calls return
    before their verdicts) a :class:`~wacoll.mpi._runner.VerdictStream`, else a
    :class:`~wacoll.mpi._runner.VerdictRing` of one runner of the compiled check
    ``tables``, each call waiting for its own. ``after``: the one given up
    before it on ``comm``, whose tags it does not reuse (local: every rank makes it
    when it gives the last one up)."""
    from mpi4py import MPI

    tag0 = 0
    tags = 1 if regions is not None or not defer else 2
    if after is not None:
        limit = (comm.Get_attr(MPI.TAG_UB) or 32767) // 2  # (the upper half:
        # wacoll.mpi.argcheck.error_tag)
        tag0 = after.tag0 + after.tags
        if tag0 + tags > limit:  # (after millions of failed calls)
            tag0 = 0
    if regions is not None:
        if after is not None:
            return after.renewed(tag0)
        stream = _runner.NodeStream(regions, comm, tag0)
        stream.defer = defer
        return stream
    if defer:
        stream = _runner.VerdictStream(comm, handle(comm), tag0)
        keeper = stream_keeper()
        if keeper is not None:
            keeper.add(stream)
        return stream
    ring = _runner.VerdictRing([tables.runner(comm)], comm, tag0)
    ring.defer = False
    return ring


def array_address(view):
    """The address of an array's first element (0 for None).

    Examples
    --------
    >>> a = np.zeros(3)
    >>> array_address(a[1:]) - array_address(a), array_address(None)
    (8, 0)
    """
    return 0 if view is None else view.__array_interface__["data"][0]


def bound_runner(program, prepared, comm):
    """A runner of ``program`` for a call's prepared buffers (a persistent request's:
    it runs them at every start), or None when the runner does not take the
    program or the buffers are smaller than it needs (the Python executor then
    raises the error that names them)."""
    if not runner_ready():
        return None
    dtype = np.dtype(np.uint8) if prepared.dtype is None else prepared.dtype
    compiled = compile_program(program, dtype, prepared.reduce_op)
    if compiled is None:
        return None
    for view, need in (
        (prepared.inbuf, compiled.in_bytes),
        (prepared.outbuf, compiled.out_bytes),
    ):
        if need and (view is None or view.nbytes < need):
            return None
    return compiled.runner(comm)


def compile_program(program, dtype, op=None):
    """``program`` as the runner's tables, or None when the runner cannot run it.

    Parameters
    ----------
    program : wacoll.plans.lower.LoweredProgram
        This rank's lowered program.
    dtype : numpy.dtype
        The element type of the call's buffers.
    op : str or mpi4py.MPI.Op, optional
        The reduction operator (needed when the program combines).
    """
    if program.arithmetic != "plain":
        return None
    dtype = np.dtype(dtype)
    itemsize = dtype.itemsize
    combines = any(s.kind in ("recv_combine", "combine") for s in program.steps)
    codes = (-1, -1)
    if combines:
        codes = _kernels.kernel_codes(op, dtype)
        if codes is None:
            return None
    scratch, at, regions, region_of = {}, 0, [], {}
    for name, n in program.scratch_sizes.items():
        scratch[name] = at
        region_of[name] = len(regions)
        regions.append(n * itemsize)
        at = _aligned(at + n * itemsize)
    rows, runs, run_regions, stage_regions = [], [], [], []

    def add_runs(where):
        if where is None:
            return 0, 0
        name, spans = where
        if name == "in":
            buf, base, region = 0, 0, -1
        elif name == "out":
            buf, base, region = 1, 0, -1
        else:
            buf, base, region = 2, scratch[name], region_of[name]
        first = len(runs)
        if isinstance(spans, ElementRuns):
            starts, lengths = spans.index()
            for a, n in zip(starts.tolist(), lengths.tolist()):
                runs.append((buf, base + a * itemsize, n * itemsize))
        else:
            for a, b in spans:
                runs.append((buf, base + a * itemsize, (b - a) * itemsize))
        run_regions.extend([region] * (len(runs) - first))
        return first, len(runs) - first

    def overlap(src0, nsrc, dst0, ndst):
        """Whether the source runs may overlap the destination runs (then the step
        reads a staged copy): the spans of their runs, buffer by buffer."""
        spans = {}
        for i in range(src0, src0 + nsrc):
            buf, at, n = runs[i]
            low, high = spans.get(buf, (at, at + n))
            spans[buf] = (min(low, at), max(high, at + n))
        for j in range(dst0, dst0 + ndst):
            buf, at, n = runs[j]
            if buf in spans and at < spans[buf][1] and spans[buf][0] < at + n:
                return True
        return False

    for slot, step in enumerate(program.steps):
        nbytes = step.elements * itemsize
        if nbytes > MAX_MESSAGE:
            return None
        kind = _KINDS[step.kind]
        src0, nsrc = add_runs(step.src)
        dst0, ndst = add_runs(step.dst)
        stage = -1
        direct = bool(step.direct and step.kind == "recv")
        if (step.kind in ("recv", "recv_combine") and not direct) or (
            step.kind not in ("recv", "recv_combine")
            and (
                nsrc > 1
                or (step.kind in ("copy", "combine") and overlap(src0, nsrc, dst0, ndst))
            )
        ):  # a receive lands in place or in the work area; a step that reads
            # several runs, or runs its writes may overlap, reads a staged copy
            stage, at = at, _aligned(at + nbytes)
            stage_regions.append(len(regions))
            regions.append(nbytes)
        else:
            stage_regions.append(-1)
        rows.append(
            (
                kind,
                -1 if step.peer is None else step.peer,
                nsrc,
                ndst,
                src0,
                dst0,
                nbytes,
                stage,
                int(direct),
                int(step.side == "left"),
                slot,
                0,
            )
        )
    steps = np.array(rows, np.int64).reshape(-1, _runner.COLUMNS)
    table = np.array(runs, np.int64).reshape(-1, 3)
    return CompiledProgram(
        steps,
        table,
        at,
        scratch,
        codes[0],
        codes[1],
        itemsize,
        program.in_extent * itemsize,
        program.out_extent * itemsize,
        tuple(regions),
        np.array(run_regions, np.int64),
        np.array(stage_regions, np.int64),
    )


class CountTables(NamedTuple):
    """A compiled program's tables for any count of its size class
    (:meth:`~wacoll.mpi._runner.Runner.per_count`): each size or offset is
    ``per_q * q + unit * popcount(mask & (2**r - 1))`` bytes for a count ``n``
    with ``q, r = divmod(n, parts)``; a sum of whole segments of the vector,
    ``q`` elements each and one more for each of the first ``r``.

    Attributes
    ----------
    steps : numpy.ndarray
        Per step: ``(per_q, staging region or -1, mask)`` of its bytes.
    runs : numpy.ndarray
        Per run: ``(offset per_q, bytes per_q, region or -1, offset mask, bytes
        mask)``, the offset within its region (-1: the input or output buffer).
    regions : numpy.ndarray
        Per region of the work area, in order: ``(per_q, mask)`` of its bytes.
    parts : int
        The segments the count is cut into (1: the sizes scale with the count).
    unit : int
        Bytes of an element.
    """

    steps: np.ndarray
    runs: np.ndarray
    regions: np.ndarray
    parts: int
    unit: int


def _sizes(compiled):
    """Every size and offset of ``compiled``'s tables, in one vector: the steps'
    bytes, the runs' offsets within their regions and their bytes, the regions'
    bytes."""
    regions = np.array(compiled.regions, np.int64)
    bases = np.zeros(len(regions), np.int64)
    at = 0
    for i, n in enumerate(compiled.regions):
        bases[i], at = at, _aligned(at + n)
    where = compiled.run_regions
    in_region = np.where(where >= 0, bases[np.maximum(where, 0)], 0) if len(bases) else 0
    runs = compiled.runs
    return np.concatenate(
        [compiled.steps[:, _BYTES], runs[:, 1] - in_region, runs[:, 2], regions]
    ).astype(np.int64)


def _tables(compiled, per_q, masks, parts):
    """:class:`CountTables` of ``compiled`` from its sizes (:func:`_sizes`' order)
    per ``q`` and their segment masks."""
    nsteps, nruns = len(compiled.steps), len(compiled.runs)
    cut = np.cumsum([nsteps, nruns, nruns])
    q_steps, q_offsets, q_bytes, q_regions = np.split(per_q, cut)
    m_steps, m_offsets, m_bytes, m_regions = np.split(masks, cut)
    return CountTables(
        np.stack([q_steps, compiled.stage_regions, m_steps], axis=1).reshape(-1, 3),
        np.stack(
            [q_offsets, q_bytes, compiled.run_regions, m_offsets, m_bytes], axis=1
        ).reshape(-1, 5),
        np.stack([q_regions, m_regions], axis=1).reshape(-1, 2),
        parts,
        compiled.itemsize,
    )


def _same_structure(a, b):
    """Whether two compilations of one program for different block counts have
    the same steps, runs and regions but for their sizes."""
    fixed = [c for c in range(a.steps.shape[1]) if c not in (_BYTES, _STAGE)]
    return (
        a.steps.shape == b.steps.shape
        and a.runs.shape == b.runs.shape
        and len(a.regions) == len(b.regions)
        and a.itemsize == b.itemsize
        and np.array_equal(a.steps[:, fixed], b.steps[:, fixed])
        and np.array_equal(a.runs[:, 0], b.runs[:, 0])
        and np.array_equal(a.run_regions, b.run_regions)
        and np.array_equal(a.stage_regions, b.stage_regions)
    )


def _popcount(masks):
    counted = np.zeros_like(masks)
    for bit in range(int(masks.max()).bit_length() if len(masks) else 0):
        counted += (masks >> bit) & 1
    return counted


def count_units(compiled, count, parts=1, probes=None):
    """A compiled program's tables for any count of its call's size class, for a
    runner that takes any count (:meth:`~wacoll.mpi._runner.Runner.per_count`):
    a :class:`CountTables`, or None when ``compiled`` (made for ``count``) does not
    follow the rule they state.

    Without ``probes``, every size must be whole elements of ``count``, and they
    scale with it: only a program whose every index does (a plan whose blocks all
    hold the count: :func:`~wacoll.plans.retarget.count_linear`) is correct at
    another count by these tables; whole elements alone do not make it so.

    ``probes`` is ``(ones, bits)`` for a plan whose blocks are the ``parts``
    segments of the vector (:func:`~wacoll.plans.retarget.count_parts`): its program
    compiled with segment ``i`` given one element, and ``2**i`` elements
    (:func:`~wacoll.plans.retarget.probe_lowered`). Lowering makes each size a
    sum of whole segments; the first says how many, the second which, and the
    two must agree with each other and with ``compiled``.

    Examples
    --------
    >>> from wacoll import Topology
    >>> from wacoll.plans import build, lower
    >>> from wacoll.plans.retarget import probe_lowered, retarget
    >>> def compiled_at(count):
    ...     plan = build("allgather", Topology.from_sizes([2, 2]), "magpie", count=count)
    ...     return compile_program(lower(plan, 1), np.dtype(np.int32))
    >>> tables = count_units(compiled_at(6), 6)
    >>> at_10 = compiled_at(10)
    >>> bool((tables.steps[:, 0] * 10 == at_10.steps[:, 6]).all())
    True
    >>> count_units(compiled_at(6), 5) is None
    True

    A plan of two segments:

    >>> plan = build("bcast", Topology.from_sizes([2, 2]), "magpie", root=0,
    ...              count=8, segments=2)
    >>> def compiled(counts):
    ...     return compile_program(probe_lowered(plan, 1, counts), np.dtype("f8"))
    >>> probes = compiled((1, 1)), compiled((1, 2))
    >>> tables = count_units(compiled((4, 4)), 8, 2, probes)
    >>> tables.parts, tables.steps[:, [0, 2]].tolist()
    (2, [[8, 1], [8, 2]])
    >>> (11 // 2) * 8 + 8 * 1   # the first segment of 11 elements: q + 1
    48
    >>> int(compiled(retarget(plan, 11).counts).steps[0, 6])
    48
    """
    itemsize = compiled.itemsize
    if parts == 1:
        sizes = _sizes(compiled)
        if count <= 0 or (sizes % count).any():
            return None
        parts, per_q, masks = 1, sizes // count, np.zeros_like(sizes)
    else:
        ones, bits = probes
        if not (_same_structure(compiled, ones) and _same_structure(compiled, bits)):
            return None
        n_blocks, n_masks = _sizes(ones), _sizes(bits)
        if (n_blocks % itemsize).any() or (n_masks % itemsize).any():
            return None
        n_blocks, masks = n_blocks // itemsize, n_masks // itemsize
        if (masks >> parts).any() or not np.array_equal(_popcount(masks), n_blocks):
            return None
        per_q = n_blocks * itemsize
        q, r = divmod(count, parts)
        if (per_q * q + itemsize * _popcount(masks & ((1 << r) - 1))).tolist() != (
            _sizes(compiled).tolist()
        ):
            return None
    if compiled.in_bytes % count or compiled.out_bytes % count:
        return None
    return _tables(compiled, per_q, masks, parts)
