"""Requests of non-blocking and persistent wacoll collectives.

:class:`Request`
    What ``Ibcast``, ``Iallreduce``, ... return: an ``MPI.Grequest`` (a real MPI
    request handle, completed by the progress engine), so it mixes with the
    application's own requests in ``MPI.Request.Waitall`` and friends. Its own
    ``Wait`` and ``Test`` raise the call's wacoll error, if any; in a mixed
    ``Waitall`` a failed wacoll request shows as an ``MPI.Exception``
    (``MPI.ERR_OTHER``) and :attr:`Request.error` holds the wacoll error.

:class:`Prequest`
    What ``Bcast_init``, ``Allreduce_init``, ... return (MPI-4 persistent
    collectives): the call is checked across ranks, selected, proved and lowered
    once, bound to its buffers; each :meth:`Prequest.Start` only posts the plan's
    messages, and :meth:`Prequest.Wait` / :meth:`Prequest.Test` advance it in the
    calling thread. Where the MPI library runs the call (the native family), it is
    the library's own persistent request. ``Prequest.Startall`` and
    ``Prequest.Waitall`` start and complete several; a wacoll persistent request is
    not an MPI handle, so ``MPI.Prequest.Startall`` does not take it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from mpi4py import MPI

from wacoll.errors import WacollError
from wacoll.mpi import calls
from wacoll.mpi._runner import PersistentRun
from wacoll.mpi.buffers import for_mpi
from wacoll.mpi.described import read_call
from wacoll.mpi.dispatch import library_method
from wacoll.mpi.engine import engine, wait_request
from wacoll.mpi.executor import TAG_BASE, TAG_SPAN, ProgramRun
from wacoll.mpi.interrupts import collective_name, interrupted
from wacoll.mpi.plancall import locate_buffer
from wacoll.mpi.runner import array_address as _address
from wacoll.mpi.runner import bound_runner

__all__ = ["Request", "Prequest"]


class Request(MPI.Grequest):
    """The request of a non-blocking wacoll collective (see the module docstring)."""

    _entry: Any
    _name: str

    def __new__(
        cls,
        grequest: MPI.Grequest | None = None,
        entry: Any = None,
        name: str | None = None,
    ) -> Request:
        self = super().__new__(cls, grequest)
        self._entry = entry
        self._name = name or "a non-blocking collective"
        return self

    @property
    def error(self) -> WacollError | None:
        """The wacoll error the call ended with, or None."""
        return None if self._entry is None else self._entry.error

    def _raise(self):
        if self._entry is not None and self._entry.error is not None:
            raise self._entry.error

    def Wait(self, status: MPI.Status | None = None) -> Literal[True]:
        """Wait for the call; raise its wacoll error, if any. An interrupt (Ctrl-C)
        in the wait ends the job (:mod:`wacoll.mpi.interrupts`)."""
        try:
            if self._entry is not None:
                engine().finish(self._entry)  # in this thread, no hand-over
            wait_request(self, status)  # the library's own Wait ignores signals
        except MPI.Exception:
            self._raise()
            raise
        except BaseException as exc:
            interrupted(exc, f"Wait of {self._name}")
            raise
        self._raise()
        return True

    def Test(self, status: MPI.Status | None = None) -> bool:
        """Whether the call is complete; raise its wacoll error, if any."""
        try:
            if self._entry is not None:
                engine().progress(self._entry)
            done = super().Test(status)
        except MPI.Exception:
            self._raise()
            raise
        if done:
            self._raise()
        return done

    wait = Wait
    test = Test  # type: ignore[assignment]  # a bool, as Test (not a pair)


class Prequest(PersistentRun):
    """A persistent wacoll collective (see the module docstring).

    Not created directly: ``comm.Bcast_init(buf, root)`` and friends return one.
    A plan the compiled runner runs starts, waits and tests in C
    (:class:`wacoll.mpi._runner.PersistentRun`); the methods here run the rest.
    """

    def __init__(self, route, prepared, plan, program, args, op):
        self._route = route
        self._prepared = prepared
        self._program = program
        self._args = args
        self._op = op
        self._run = None
        self._finish = None
        self._scratch = {}
        self._native = None
        self._in_place = any(a is None or a is MPI.IN_PLACE for a in args)
        # an input the reader copied (a derived datatype's data, packed: a send
        # buffer, a broadcast root's buffer; an in-place operand whose copy a start
        # cannot take afresh) goes stale once the application changes its buffer,
        # and so does what a finish keeps of a receive buffer (a pair type's
        # padding): every start then reads the call again
        copied = (
            prepared is not None
            and prepared.in_copy is None
            and (
                locate_buffer(prepared.inbuf, args) is None
                or (
                    prepared.finish is None
                    and locate_buffer(prepared.outbuf, args) is None
                )
            )
        )
        self._reread_each = (
            self._in_place
            or copied
            or (prepared is not None and prepared.finish is not None)
        )
        #: The plan each start runs, or None when the MPI library runs the call.
        self.plan = plan
        #: The compiled runner of the plan (:mod:`wacoll.mpi.runner`), or None when
        #: the Python executor runs it.
        self._runner = None
        if program is None:
            self._native = library_method(route.wire, op, "persistent")(
                *map(for_mpi, args)
            )
        elif route.tracer is None and prepared.finish is None and not copied:
            # (a derived datatype's staged buffers are read again at every start)
            self._runner = bound_runner(program, prepared, route.wire)
            # the bound buffers' addresses, and where an in-place input is copied from
            at = (_address(prepared.inbuf), _address(prepared.outbuf))
            in_copy = ()
            if prepared.in_copy is not None:
                start, n = prepared.in_copy
                size = prepared.dtype.itemsize
                in_copy = (at[0], at[1] + start * size, n * size)
            if self._runner is not None:
                self.bind_runner(self._runner, route, *at, in_copy, TAG_BASE, TAG_SPAN)

    def _start(self):
        """:meth:`Start` outside the compiled route (and its errors)."""
        route = self._route
        if route.broken is not None:  # e.g. an interrupted call
            raise WacollError(route.broken)
        if self._native is not None:
            self._native.Start()
            return
        if (self._run is not None and not self._run.done) or self._runner is not None:
            # (a bound runner starts here only while it is still active)
            raise WacollError(
                "this persistent collective is still active: Wait for it "
                "before starting it again"
            )

        prepared = self._prepared
        tag = route.next_tag()
        if self._reread_each:  # the reader copied an input: take it afresh
            prepared = self._reread()
        self._run = ProgramRun(
            self._program,
            route.wire,
            prepared.inbuf,
            prepared.outbuf,
            op=prepared.reduce_op,
            scratch=self._scratch,
            tag=tag,
        )
        self._finish = prepared.finish
        self._advance(False)

    def _advance(self, block):
        """Advance the started run; once it completes, unstage derived-type data."""
        done = self._run.advance(block=block)
        if done:
            self._complete()
        return done

    def _complete(self):
        if self._finish is not None:
            finish, self._finish = self._finish, None
            finish()

    def _reread(self):
        fresh = read_call(
            getattr(calls, self._op),
            self._route.place,
            self._args,
            level=self._prepared.level,
        )
        fresh.counts = self._prepared.counts
        return fresh

    def _wait(self, status=None):
        """:meth:`Wait` outside the compiled route."""
        try:
            if self._native is not None:
                return self._native.Wait(status)
            if self._run is not None:
                self._advance(True)
            return True
        except BaseException as exc:
            self._failed(exc)

    def _failed(self, exc):
        """Raise what ended a wait (an interrupt ends the job first)."""
        interrupted(exc, f"Wait of {collective_name(self._op, 'bind')}", self._route)
        raise exc

    def _test(self, status=None):
        """:meth:`Test` outside the compiled route."""
        if self._native is not None:
            return self._native.Test(status)
        return self._run is None or self._advance(False)

    def Free(self) -> None:
        """Release the request (it must not be active)."""
        if self._native is not None:
            self._native.Free()
            self._native = None
        self._run = self._runner = None
        self.bind_runner(None, None, 0, 0, (), TAG_BASE, TAG_SPAN)

    @staticmethod
    def Startall(requests: Sequence[Prequest]) -> None:
        """Start every request in ``requests``, in order."""
        for request in requests:
            request.Start()

    @staticmethod
    def Waitall(requests: Sequence[Prequest], statuses: Any = None) -> Literal[True]:
        """Wait for every request in ``requests``."""
        for request in requests:
            request.Wait()
        return True

    @staticmethod
    def Testall(requests: Sequence[Prequest], statuses: Any = None) -> bool:
        """Whether every request in ``requests`` is complete (advancing each)."""
        return all([request.Test() for request in requests])

    wait = PersistentRun.Wait
    test = PersistentRun.Test
    start = PersistentRun.Start
