"""One collective call in flight: its work and its cross-rank check, advanced together.

The *work* is either a :class:`~wacoll.mpi.executor.ProgramRun` of the call's lowered plan
or :class:`NativeWork`, the MPI library's own non-blocking collective; the *check*
(:class:`~wacoll.mpi.agreement.Check`) is a small all-reduce of every rank's argument
digest and error flag. How the two meet is the communicator's ``check`` mode:

``"beside"`` (the default)
    The work starts at once and the check runs beside it; the call completes when
    both have. The check's wide-area latency overlaps the call's own, so it costs no
    extra round trip: on the emulated grid (4 clusters x 2 ranks, 10 ms, 1 MB/s) a
    1-byte Bcast took 14.2 ms beside its check, 23.3 ms after it and 11.3 ms
    without one. When the check fails, every rank abandons the work (pending
    receives cancelled, the communicator's wire retired) and raises the check's
    error; the work may have written receive buffers by then (MPI leaves them
    undefined after an erroneous call), never a send buffer.
``"first"``
    No rank sends before the check has passed (receives are posted), so a failed
    call leaves every buffer untouched: the mode for debugging.

Both wait in :func:`~wacoll.mpi.engine.wait_any` (polling, then napping) rather
than the MPI library's spinning ``Waitany`` (while a check compiled for the runner,
whose requests live in C, is still running, the task polls both with the same
naps, :class:`~wacoll.mpi.engine.Naps`): with more ranks than cores a spinning rank
takes the processor its peers need (the same Bcast took 34 ms beside its check
when waiting in ``Waitany``). A blocking call advances the task to completion; a
non-blocking one hands it to the progress engine (:mod:`wacoll.mpi.engine`). A rank
whose own arguments are invalid has no work and only waits for the check.
"""

from __future__ import annotations

import threading

from mpi4py import MPI

from wacoll.mpi.engine import Naps, Task, advance_request, wait_any

__all__ = ["CallTask", "NativeWork", "StartOrder"]


class StartOrder:
    """Program order for the MPI library's collectives that start once their checks
    have passed (``check="first"``).

    The library matches collectives by the order ranks start them. A non-blocking
    call's check may pass after a later call's, or in another thread. So each call
    whose library collective waits for its check takes a ticket when it is made.
    The collective starts only on its ticket's turn, which comes once every earlier
    ticket's collective has started, or never will (its check failed).

    Examples
    --------
    >>> order = StartOrder()
    >>> a, b = order.ticket(), order.ticket()
    >>> order.turn(b)
    False
    >>> order.done(a)
    >>> order.turn(b)
    True
    """

    __slots__ = ("issued", "next", "_finished", "_lock")

    def __init__(self):
        self.issued = self.next = 0
        self._finished = set()
        self._lock = threading.Lock()

    def ticket(self) -> int:
        """The next ticket, in program order (taken in the calling thread)."""
        ticket, self.issued = self.issued, self.issued + 1
        return ticket

    def turn(self, ticket) -> bool:
        """Whether every earlier ticket is done."""
        return self.next == ticket

    def done(self, ticket) -> None:
        """The ticket's collective has started, or never will (twice: harmless)."""
        with self._lock:
            if ticket >= self.next:
                self._finished.add(ticket)
            while self.next in self._finished:
                self._finished.discard(self.next)
                self.next += 1


class NativeWork:
    """The MPI library's own non-blocking collective, as a task's work.

    ``start`` makes the request, when the task first advances the work. The MPI
    libraries wacoll was tried with (MPICH 5, Open MPI 5) answer a collective whose
    ranks disagree (count, root, datatype, operator) with an error, a wrong result or
    a wait that never ends, never an abort; the check beside it turns each into the
    same error on every rank.
    """

    __slots__ = ("start", "request", "done")

    @property
    def started(self):
        return self.request is not None

    def __init__(self, start):
        self.start = start
        self.request = None
        self.done = False

    @property
    def waiting(self):
        return [self.request]

    def advance(self, block=False):
        if self.request is None:
            self.request = self.start()
        if not self.done:
            self.done = advance_request(self.request, block)
        return self.done

    def cancel(self):
        """A collective cannot be cancelled: leave it (the communicator is retired)."""
        self.done = True


class CallTask(Task):
    """A call's work and check, advanced together.

    Parameters
    ----------
    work : Run or NativeWork or None
        None when this rank's own arguments are invalid.
    check : Check or None
        None when the communicator does not validate.
    on_failure : callable, optional
        Called (before raising) when the check fails and the work was abandoned.
    exchange : bool
        Exchange the errors for the exact message (blocking calls only).
    finish : callable, optional
        Run once the call has completed without error (moves data staged for a
        derived datatype into the user's buffer).
    gated : bool
        The ``"first"`` mode: the work starts only once the check has passed.
    order : (StartOrder, int), optional
        With ``gated``, for the MPI library's collective as the work: the order it
        starts in, and the call's ticket.
    """

    __slots__ = (
        "work",
        "check",
        "on_failure",
        "exchange",
        "waiting",
        "work_error",
        "finish",
        "gated",
        "order",
    )

    def __init__(
        self,
        work,
        check,
        *,
        on_failure=None,
        exchange=True,
        finish=None,
        gated=False,
        order=None,
    ):
        self.gated = gated
        self.order = order
        self.finish = finish
        self.work = work
        self.check = check
        self.on_failure = on_failure
        self.exchange = exchange
        self.waiting = ()
        self.work_error = None

    def advance(self, block=False):
        """Advance work and check; True when both are done. Raises the check's error."""
        try:
            return self._advance(block)
        except BaseException:
            if self.check is not None:  # a compiled check still running: kept alive
                self.check.abandon()
            self._started()  # (its collective never starts: later ones may)
            raise

    def _my_turn(self):
        """Whether the work may start now: no order, or its ticket's turn."""
        return self.order is None or self.order[0].turn(self.order[1])

    def _started(self):
        """The work has started (or never will): the next ticket's turn."""
        if self.order is not None:
            self.order[0].done(self.order[1])
            self.order = None

    def _advance(self, block):
        work, check = self.work, self.check
        if check is None:
            if not work.advance(block):
                self.waiting = work.waiting
                return False
            return self._finished()
        if block and self.gated:  # the check, then the work
            try:
                check.advance(True)
            except Exception:
                if work is not None:
                    work.cancel()
                raise
            if not check.ok:
                if work is not None:
                    work.cancel()
                if self.on_failure is not None:
                    self.on_failure(False)
                raise check.failure(self.exchange)
            if work is not None:
                naps = Naps()
                while not self._my_turn():  # earlier calls' collectives first
                    naps.sleep()
                work.advance(False)  # started
                self._started()
                work.advance(True)
            self._started()
            return self._finished()
        gated = self.gated
        naps = Naps()
        while True:
            work_done = work is None or work.done
            turn = True
            if gated and not (check.done and check.ok):
                work_done = False  # not started: waits for the check
            elif not work_done and not self._my_turn():
                work_done = turn = False  # waits for earlier calls' collectives
            elif not work_done:
                try:
                    work_done = work.advance(False)
                except Exception as exc:  # noqa: BLE001 - raised after the check
                    # the check must still complete here, or ranks waiting for its
                    # messages would wait forever; the error is raised after it
                    self.work_error, work_done = exc, True
                    work.cancel()
                self._started()
            check_done = check.advance(False)
            if check_done and not check.ok:
                if work is not None and not work_done:
                    work.cancel()
                if self.on_failure is not None:
                    self.on_failure(work_done)
                raise check.failure(self.exchange)
            if work_done and check_done:
                if self.work_error is not None:
                    raise self.work_error
                return self._finished()
            if (
                check_done
                and work is not None
                and not work_done
                and turn
                and not getattr(work, "started", True)
            ):
                continue  # the check has passed: start the work
            if not turn:  # polled until the earlier calls' collectives start
                if not block:
                    self.waiting = []
                    return False
                naps.sleep()
                continue
            # a compiled check's requests are in C: nothing to wait for, the task is
            # polled (waiting for the work alone would hold up the check's relays)
            waiting = (
                []
                if check.polled
                else (
                    [] if work_done or (gated and not check_done) else list(work.waiting)
                )
                + ([] if check_done else list(check.waiting))
            )
            if not block:
                self.waiting = waiting
                return False
            # one of the two done: wait for the other in the MPI library's own
            # blocking wait (it yields the processor while idle; polling, even with
            # naps, cost 1-2 ms more per call on the emulated grid). The work is
            # waited for so only once the check has passed: then no rank's part of
            # it can be missing.
            if check_done and work is not None and not work_done:
                try:
                    work.advance(True)
                except Exception as exc:  # noqa: BLE001 - a failed receive
                    self.work_error = exc
                    work.cancel()
                continue
            if work_done and not check_done:
                check.advance(True)
                continue
            if not waiting:  # a compiled check beside the work: poll both
                naps.sleep()
                continue
            try:
                wait_any(waiting)
            except MPI.Exception as exc:  # a failed receive of the work (truncated...)
                if work is not None and not work.done:
                    self.work_error = exc
                    work.cancel()

    def _finished(self):
        self.waiting = ()
        finish, self.finish = self.finish, None
        if finish is not None:
            finish()
        return True
