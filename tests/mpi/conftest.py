"""Shared fixtures for the MPI tests of ``wacoll.Comm``.

Run them under ``mpiexec`` (any size; each test adapts to it)::

    mpiexec -n 5 python -m pytest --only-mpi -p no:cacheprovider -q tests/mpi

Without ``mpiexec`` (and ``--with-mpi`` / ``--only-mpi``) pytest-mpi skips them.

Rules every test here follows, so that one failing rank cannot leave the others
waiting in the next collective:

* results are compared on each rank, then the ranks agree on the outcome with
  :meth:`Mpi.assert_all` (one ``allgather``) before anything is asserted;
* calls that may raise go through :meth:`Mpi.outcome` / :meth:`Mpi.same_error`, which
  catch the exception on each rank and agree on what happened.

Layouts are derived from the communicator size (``pytest_generate_tests`` below):
``single`` (one cluster), ``contiguous`` (2-3 clusters over rank ranges),
``uneven`` (very different cluster sizes), ``reordered`` (clusters interleaved, not
rank ranges) and ``one-per-rank``; layouts that coincide at a small size are listed
once (``single`` is always there; ``Mpi.multi`` lists the multi-cluster ones).
``wacoll.Comm`` objects are cached for the session: each costs a ``Dup`` and an
agreement.
"""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

import wacoll
from wacoll import Topology
from wacoll.errors import PlanError
from wacoll.mpi.route import settle_all
from wacoll.plans import Call, select

WORLD = MPI.COMM_WORLD
SIZE = WORLD.Get_size()
RANK = WORLD.Get_rank()


# ---------------------------------------------------------------------- layouts
def _layouts(size: int) -> dict:
    """Cluster lists of the test layouts for ``size`` ranks, duplicates dropped."""
    ranks = list(range(size))
    k = 2 if size <= 4 else 3
    if size >= 4:
        uneven = [1, size - 3, 2]
    else:
        uneven = [1, size - 1] if size > 1 else [1]
    contiguous = [-(-size // k)] * (size // -(-size // k))
    if sum(contiguous) < size:
        contiguous.append(size - sum(contiguous))
    candidates = {  # "single" first: it is always there
        "single": [ranks],
        "contiguous": _from_sizes(contiguous),
        "reordered": [[r for r in ranks if r % k == c] for c in range(min(k, size))],
        "uneven": _from_sizes(uneven),
        "one-per-rank": [[r] for r in ranks],
    }
    out, seen = {}, set()
    for name, clusters in candidates.items():
        key = tuple(sorted(tuple(sorted(c)) for c in clusters))
        if key not in seen:
            seen.add(key)
            out[name] = clusters
    return out


def _from_sizes(sizes):
    clusters, start = [], 0
    for n in sizes:
        clusters.append(list(range(start, start + n)))
        start += n
    return clusters


LAYOUTS = _layouts(SIZE)
#: Layouts with more than one cluster (where the magpie family is the default).
MULTI = [name for name, cl in LAYOUTS.items() if len(cl) > 1]


def pytest_generate_tests(metafunc):
    """``layout``: every test layout of this communicator size."""
    if "layout" in metafunc.fixturenames:
        metafunc.parametrize("layout", list(LAYOUTS))


# ---------------------------------------------------------------------- helpers
class Mpi:
    """Helpers shared by the MPI tests (one instance per session, same on every rank)."""

    world = WORLD
    size = SIZE
    rank = RANK
    layouts = LAYOUTS
    multi = MULTI

    def __init__(self):
        self._comms = {}
        self._seen = set()
        #: The ``check`` mode of the communicators :meth:`comm` makes (None: the default).
        self.default_check = None

    # -- objects -------------------------------------------------------------
    @staticmethod
    def topology(layout: str) -> Topology:
        """The :class:`Topology` of a named layout."""
        return Topology.from_clusters(LAYOUTS[layout])

    def comm(self, layout: str, **kwargs) -> wacoll.Comm:
        """A cached ``wacoll.Comm`` over COMM_WORLD with the named layout (collective
        on first use).

        The level is ``"strict"`` unless given (``level=None``: wacoll's default,
        MPI's own promise), so that the family matrices exercise wacoll's plans; the
        default configuration has tests of its own. The arithmetic is ``"plain"``
        unless given, so that strict float sums run the families' canonical-order
        plans that :meth:`predict` foresees (test_reproducible.py runs the
        reproducible arithmetic on every family and layout, and the default).
        """
        kwargs.setdefault("level", "strict")
        kwargs.setdefault("arithmetic", "plain")
        if self.default_check is not None:
            kwargs.setdefault("check", self.default_check)
        key = (layout, tuple(sorted(kwargs.items())))
        comm = self._comms.get(key)
        if comm is None:
            comm = wacoll.Comm(WORLD, self.topology(layout), **kwargs)
            self._comms[key] = comm
        return comm

    # -- plans -----------------------------------------------------------------
    def predict(self, layout, op, family=None, **kwargs):
        """What ``wacoll.Comm`` will run for a call (pure Python, same on every rank).

        ``("plan", key)``, where ``key`` names what the executor does (operation, root,
        block counts and every rank's program), or ``("error", message)`` when the
        family's plan cannot be built or fails its check. ``kwargs`` are the builder
        arguments the Comm passes (count/counts, itemsize, root, level, options), and
        ``user_op=True`` for an application's own operator.
        """
        topo = self.topology(layout)
        reserved = ("count", "counts", "itemsize", "root", "level", "user_op")
        call = Call(
            op,
            count=kwargs.get("count"),
            counts=kwargs.get("counts"),
            root=kwargs.get("root"),
            itemsize=kwargs.get("itemsize", 1),
            level=kwargs.get("level"),
            user_op=kwargs.get("user_op", False),
        )
        options = {k: v for k, v in kwargs.items() if k not in reserved}
        try:
            selection = select(call, topo, family=family, options=options)
            if selection.native:
                return ("native", op)
            plan = selection.build(topo)
        except PlanError as exc:
            return ("error", str(exc))
        return ("plan", (op, plan.root, plan.counts, plan.programs))

    @staticmethod
    def ran_as_predicted(comm, prediction) -> bool:
        """Whether ``comm``'s last call ran the plan :meth:`predict` foresaw (the
        requested family and options were honoured)."""
        if prediction[0] == "native":
            return comm.last_family == "native"
        plan = comm.last_plan
        return (
            prediction[0] == "plan"
            and plan is not None
            and (plan.op, plan.root, plan.counts, plan.programs) == prediction[1]
        )

    def family_run(self, comm, what, call, got, want, problems, family, algorithm=None):
        """Run ``call()`` on this rank and add to ``problems`` what went wrong: it
        raised, the last call did not run ``family``'s plan (of ``algorithm`` when
        given), or ``got`` differs from ``want`` (None: not compared)."""
        _, exc = self.outcome(call)
        plan = comm.last_plan
        if exc is not None:
            problems.append(f"{what} raised {exc!r}")
        elif (
            comm.last_family != family
            or plan is None
            or plan.family != family
            or (algorithm is not None and plan.algorithm != algorithm)
        ):
            problems.append(
                f"{what} ran {comm.last_family}/{getattr(plan, 'algorithm', None)}"
            )
        elif want is not None and got.tobytes() != want.tobytes():
            bad = np.flatnonzero(got != want)
            problems.append(f"{what}: {bad.size} elements differ, first at {bad[0]}")

    # -- family matrices -------------------------------------------------------
    #: Elements of the family matrices: a few (chunks and segments of 0 and 1
    #: element at 5+ ranks) and enough for segments.
    family_counts = (3, 70001)

    @staticmethod
    def _family_kwargs(family, algorithm, options):
        """The keyword arguments that ask a ``wacoll.Comm`` call for ``family``."""
        kwargs = dict(options, family=family)
        if algorithm is not None:
            kwargs["algorithm"] = algorithm
        return kwargs

    def family_bcast(
        self, comm, problems, label, family, algorithm=None, counts=None, **options
    ):
        """Bcast from the first, last and middle rank with ``family`` (and
        ``algorithm``) against the root's data; what goes wrong is added to
        ``problems`` (see :meth:`family_run`), ``label`` ends each line.

        Parameters
        ----------
        comm : wacoll.Comm
            The communicator to call.
        problems : list of str
            Where the failures of this rank are added.
        label : str
            The end of each failure line (the layout, and what else varies).
        family : str
            The family asked for, and that must have run.
        algorithm : str, optional
            The algorithm asked for, and that must have run.
        counts : tuple of int, optional
            The element counts (default :attr:`family_counts`).
        **options
            Further keyword arguments of the call.
        """
        kwargs = self._family_kwargs(family, algorithm, options)
        for n in self.family_counts if counts is None else counts:
            for root in sorted({0, SIZE - 1, SIZE // 2}):
                want = self.ints(n, seed=root, rank=root)
                buf = want.copy() if RANK == root else np.full(n, -1, np.int64)
                self.family_run(
                    comm,
                    f"Bcast n={n} root={root} {label}",
                    lambda: comm.Bcast(buf, root=root, **kwargs),
                    buf,
                    want,
                    problems,
                    family,
                    algorithm,
                )

    def _family_exchange(
        self, method, sizes, per_rank, comm, problems, label, family, algorithm, options
    ):
        """Allgather or Alltoall (``method``) of each of ``sizes`` elements a block
        with ``family`` against the library's; ``per_rank``: each rank sends a
        block to every rank."""
        kwargs = self._family_kwargs(family, algorithm, options)
        for n in sizes:
            send = self.ints(n * SIZE if per_rank else n, seed=n)
            want = np.empty(n * SIZE, np.int64)
            getattr(WORLD, method)(send, want)
            got = np.full(n * SIZE, -1, np.int64)
            self.family_run(
                comm,
                f"{method} n={n} {label}",
                lambda: getattr(comm, method)(send, got, **kwargs),
                got,
                want,
                problems,
                family,
                algorithm,
            )

    def family_allgather(self, comm, problems, label, family, algorithm=None, **options):
        """Allgather of 1 and 5 elements with ``family`` against the library's
        (arguments as :meth:`family_bcast`)."""
        self._family_exchange(
            "Allgather", (1, 5), False, comm, problems, label, family, algorithm, options
        )

    def family_alltoall(self, comm, problems, label, family, algorithm=None, **options):
        """Alltoall of 1 and 3 elements a rank with ``family`` against the
        library's (arguments as :meth:`family_bcast`)."""
        self._family_exchange(
            "Alltoall", (1, 3), True, comm, problems, label, family, algorithm, options
        )

    def family_barrier(self, comm, problems, label, family, algorithm=None, **options):
        """One Barrier with ``family`` (arguments as :meth:`family_bcast`)."""
        kwargs = self._family_kwargs(family, algorithm, options)
        self.family_run(
            comm,
            f"Barrier {label}",
            lambda: comm.Barrier(**kwargs),
            None,
            None,
            problems,
            family,
            algorithm,
        )

    def family_allreduce(
        self, comm, problems, label, family, algorithm=None, counts=None, **options
    ):
        """Allreduce of integers (sum, max, bitwise or) with ``family`` against
        the library's: the same bits whatever the order (arguments as
        :meth:`family_bcast`)."""
        kwargs = self._family_kwargs(family, algorithm, options)
        for n in self.family_counts if counts is None else counts:
            for op in (MPI.SUM, MPI.MAX, MPI.BOR):
                send = self.ints(n, seed=7)
                want = np.empty(n, np.int64)
                WORLD.Allreduce(send, want, op=op)
                got = np.full(n, -1, np.int64)
                self.family_run(
                    comm,
                    f"Allreduce n={n} {op} {label}",
                    lambda: comm.Allreduce(send, got, op=op, **kwargs),
                    got,
                    want,
                    problems,
                    family,
                    algorithm,
                )

    def family_reduce(
        self, comm, problems, label, family, algorithm=None, counts=None, **options
    ):
        """Integer sums to the first, last and middle rank with ``family`` against
        the library's (arguments as :meth:`family_bcast`)."""
        kwargs = self._family_kwargs(family, algorithm, options)
        for n in self.family_counts if counts is None else counts:
            for root in sorted({0, SIZE - 1, SIZE // 2}):
                send = self.ints(n, seed=root)
                want = np.empty(n, np.int64) if RANK == root else None
                WORLD.Reduce(send, want, op=MPI.SUM, root=root)
                got = np.full(n, -1, np.int64) if RANK == root else None
                self.family_run(
                    comm,
                    f"Reduce n={n} root={root} {label}",
                    lambda: comm.Reduce(send, got, op=MPI.SUM, root=root, **kwargs),
                    got,
                    want,
                    problems,
                    family,
                    algorithm,
                )

    @staticmethod
    def canonical_sum(values):
        """The canonical expression of a strict sum: the binomial reduce tree at
        rank 0, operands in rank order.

        Parameters
        ----------
        values : list of numpy.ndarray
            Every rank's operand, in rank order.

        Returns
        -------
        numpy.ndarray
            Their sum in that order of evaluation.
        """
        acc = [v.copy() for v in values]
        mask = 1
        while mask < len(acc):
            for v in range(0, len(acc), 2 * mask):
                if v + mask < len(acc):
                    acc[v] = acc[v] + acc[v + mask]
            mask *= 2
        return acc[0]

    def family_float_sum(
        self,
        comm,
        problems,
        what,
        method,
        send,
        want,
        keeps,
        family,
        algorithm=None,
        **options,
    ):
        """One float sum whose bits depend on the order: ``method`` is
        ``"Allreduce"`` or ``"Reduce"`` (to the last rank) of this rank's ``send``.

        Where the plan ``keeps`` the communicator's level it must run and give
        ``want``; where it does not, it must raise one PlanError on every rank.
        ``comm``, ``problems``, ``family``, ``algorithm`` and ``options`` are as
        in :meth:`family_bcast`.

        Parameters
        ----------
        what : str
            The call's name in a failure line.
        method : {"Allreduce", "Reduce"}
            The collective.
        send : numpy.ndarray
            This rank's operand.
        want : numpy.ndarray or None
            The expected result (None: not compared).
        keeps : bool
            Whether the plan keeps the level on this layout.
        """
        root = SIZE - 1
        kw = {"root": root} if method == "Reduce" else {}
        kw.update(self._family_kwargs(family, algorithm, options))
        has_recv = method == "Allreduce" or RANK == root
        got = np.full(send.size, np.nan) if has_recv else None
        call = lambda: getattr(comm, method)(
            send,
            got,
            op=MPI.SUM,  # noqa: E731
            **kw,
        )
        if keeps:
            self.family_run(
                comm,
                what,
                call,
                got,
                want if has_recv else None,
                problems,
                family,
                algorithm,
            )
        else:
            self.same_error(call, PlanError, match="level")

    def first_time(self, key) -> bool:
        """True the first time ``key`` is seen this session (identically everywhere).

        Two calls whose plans have the same programs on the same data run the same
        messages and combines, so the second teaches nothing: the big matrices skip it.
        """
        if key in self._seen:
            return False
        self._seen.add(key)
        return True

    # -- data ------------------------------------------------------------------
    @staticmethod
    def ints(n, seed=0, rank=None):
        """``n`` int64 values that say which rank, element and seed they came from."""
        rank = RANK if rank is None else rank
        return rank * 1_000_003 + seed * 7919 + np.arange(n, dtype=np.int64)

    @staticmethod
    def exact(n, seed=0, rank=None, dtype=np.float64):
        """Small integer-valued numbers: their sums over all ranks are exact in any
        order, so every level and algorithm must give MPI's result bit for bit."""
        rank = RANK if rank is None else rank
        i = np.arange(n, dtype=np.int64)
        return (((rank + 1) * (i + 3 * seed + 1)) % 7 - 3).astype(dtype)

    @staticmethod
    def random(n, seed=0, rank=None, dtype=np.float64):
        """Floats of mixed magnitudes: their sum depends on the order of evaluation."""
        rank = RANK if rank is None else rank
        rng = np.random.default_rng([seed, rank])
        return (rng.standard_normal(n) * 10.0 ** rng.integers(-8, 9, n)).astype(dtype)

    # -- agreement -----------------------------------------------------------
    @staticmethod
    def failures(ok, detail="") -> list:
        """Collective: ``[(rank, detail), ...]`` of the ranks whose ``ok`` is false."""
        mine = (bool(ok), "" if ok else str(detail))
        return [(r, d) for r, (o, d) in enumerate(WORLD.allgather(mine)) if not o]

    def assert_all(self, ok, detail=""):
        """Collective assert: fails on every rank if it fails on any."""
        bad = self.failures(ok, detail)
        assert not bad, "; ".join(f"rank {r}: {d}" for r, d in bad[:4]) + (
            f" (and {len(bad) - 4} more ranks)" if len(bad) > 4 else ""
        )

    def assert_equal(self, got, want, what="result"):
        """Collective: ``got`` equals ``want`` exactly (arrays: same dtype and bits)."""
        ok, detail = _same(got, want)
        self.assert_all(ok, f"{what}: {detail}")

    @staticmethod
    def outcome(fn):
        """Run ``fn()`` on this rank; ``(value, None)`` or ``(None, exception)``.

        A rank that returned before the call's verdict was in raises a failed one
        at its next call of the communicator: here, where every communicator's
        verdicts are collected (:func:`wacoll.mpi.route.settle_all`)."""
        try:
            value = fn()
            settle_all()
            return value, None
        except Exception as exc:  # noqa: BLE001 -- reported collectively by the caller
            try:  # (the other communicators' verdicts, as every rank collects them)
                settle_all()
            except Exception:  # noqa: BLE001, S110 -- the first error is the one
                pass
            return None, exc

    def run(self, fn, what="call"):
        """Collective: run ``fn()``; fail on every rank if it raised on any."""
        value, exc = self.outcome(fn)
        self.assert_all(exc is None, f"{what} raised {type(exc).__name__}: {exc}")
        return value

    def same_error(self, fn, exc_type=wacoll.WacollError, match=None, untouched=None):
        """Collective: ``fn()`` raises ``exc_type`` on every rank with one message.

        ``match`` is a substring the message must contain; ``untouched`` a callable
        that says whether the user's buffers still hold what they held before. One
        ``allgather`` checks it all. Returns the message.
        """
        _, exc = self.outcome(fn)
        got = None if exc is None else (type(exc).__name__, str(exc))
        ok = isinstance(exc, exc_type)
        detail = f"raised {got!r}, expected {exc_type.__name__}"
        if ok and match is not None and match not in str(exc):
            ok, detail = False, f"message {str(exc)!r} lacks {match!r}"
        if ok and untouched is not None and not untouched():
            ok, detail = False, f"a buffer was written before raising {str(exc)!r}"
        everyone = WORLD.allgather((got, ok, "" if ok else detail))
        bad = [(r, d) for r, (_, o, d) in enumerate(everyone) if not o]
        if not bad and any(e[0] != everyone[0][0] for e in everyone):
            bad = [
                (r, f"raised {e[0]!r}")
                for r, e in enumerate(everyone)
                if e[0] != everyone[0][0]
            ] + [(0, f"raised {everyone[0][0]!r}")]
        assert not bad, "; ".join(f"rank {r}: {d}" for r, d in bad[:4])
        return str(exc)


def _same(got, want):
    """Whether two results are identical; ``(ok, detail)``."""
    if isinstance(want, np.ndarray):
        if not isinstance(got, np.ndarray):
            return False, f"expected an array, got {type(got).__name__}"
        if got.dtype != want.dtype or got.shape != want.shape:
            return False, f"{got.dtype}{got.shape} != {want.dtype}{want.shape}"
        if got.tobytes() != want.tobytes():
            diff = np.flatnonzero(
                got.view(np.uint8).reshape(-1) != want.view(np.uint8).reshape(-1)
            )
            at = int(diff[0]) // max(want.itemsize, 1)
            return False, (
                f"{diff.size} bytes differ, first at element {at}: got "
                f"{got.reshape(-1)[at]!r}, want {want.reshape(-1)[at]!r}"
            )
        return True, ""
    return (got == want), f"got {got!r}, want {want!r}"


@pytest.fixture(scope="session")
def mpi():
    """The session's :class:`Mpi` helper."""
    return Mpi()
