"""Background progress for non-blocking and persistent wacoll collectives.

A non-blocking wacoll collective returns an MPI *generalized request*
(``MPI.Grequest``): a real request handle, so it works with ``Wait``, ``Test``,
``MPI.Request.Waitall`` and friends mixed with the application's own requests. The
MPI library cannot advance a wacoll plan by itself, so one daemon thread per process
does: it advances every call in flight as far as its messages allow (a
:class:`~wacoll.mpi.task.CallTask` on the Python route, a compiled
:class:`~wacoll.mpi.startcall.StartedTask`), waits for what they wait for (polling,
then napping: see :func:`wait_any`), and completes a call's generalized request when
the call is done. A self-message on a private ``COMM_SELF`` duplicate wakes it when
a new call arrives while it waits.

A call's first step runs in the calling thread as it is submitted, so that every
rank starts its collectives in program order. The request's own ``Wait`` then takes
a compiled call over from the thread and finishes it where it waits
(:meth:`ProgressEngine.finish`), with no hand-over between threads; a call on the
Python route stays with the thread (its MPI requests are Python objects, which two
threads must not test at once).

The thread takes a compiled call up only once it has been in flight for
:data:`HAND_OVER` seconds: a call that its ``Wait`` or ``Test`` completes sooner
(a loop of start and wait) never wakes the thread, whose polls would contend with
the waiting thread for the interpreter and the MPI library (at 2 ranks an
``Ibcast`` and its wait took 47-70 us with the thread woken at every start, 12-23
without). After its last call the thread lingers for :data:`LINGER` seconds,
looking for calls left in flight every :data:`HAND_OVER`, so that a start in a loop
needs no wake-up; then it sleeps until the next start wakes it.

The thread runs only while collectives are in flight; it needs the MPI library
initialised with ``MPI_THREAD_MULTIPLE`` (mpi4py's default).

Examples
--------
>>> engine = ProgressEngine()
>>> engine.active
0
"""

from __future__ import annotations

import os
import threading
import time

from mpi4py import MPI

from wacoll.errors import WacollError
from wacoll.mpi.interrupts import is_interrupt, mark

__all__ = [
    "ProgressEngine",
    "engine",
    "Task",
    "Naps",
    "advance_request",
    "wait_any",
    "next_nap",
    "wait_request",
    "require_threads",
    "SPIN_SECONDS",
    "MAX_NAP",
    "NAP_SHARE",
    "LONGEST_NAP",
    "HAND_OVER",
    "LINGER",
]


class Task:
    """Work the engine advances: ``advance(block=False) -> done`` and ``waiting``;
    ``compiled`` when its requests live in C (then ``waiting`` is empty, and the
    engine polls it), so that a ``Wait`` may advance it in its own thread.

    Subclasses wrap a :class:`~wacoll.mpi.executor.ProgramRun` (and the native requests or
    the agreement of a call); ``finish()`` runs on completion (in the engine's thread)
    and may raise: the error is kept and re-raised by :meth:`ProgressEngine.result`.
    """

    waiting = ()
    compiled = False

    def advance(self, block=False):  # pragma: no cover - interface
        raise NotImplementedError


#: Seconds a compiled call is left to its own ``Wait`` or ``Test`` before the
#: thread advances it (a call on the Python route is the thread's at once).
HAND_OVER = 1e-3
#: Seconds the thread lingers after its last call before it sleeps until woken.
LINGER = 0.5


class _Entry:
    __slots__ = ("task", "grequest", "error", "done", "lock", "due")

    def __init__(self, task, grequest, due=0.0):
        self.task = task
        self.grequest = grequest
        self.error = None
        self.done = False
        # held by the one thread advancing the task: the engine's, or a Wait's
        self.lock = threading.Lock()
        #: When the thread takes the task up (its clock; 0: at once).
        self.due = due


class ProgressEngine:
    """Advances tasks in a background thread and completes their requests.

    A task is first advanced in the calling thread, as it is submitted: a call's
    collectives (its check, the MPI library's collective) start there, in program
    order, as on every other rank. The thread then advances it as far as its
    messages allow, and a request's ``Wait`` (:meth:`finish`) takes a compiled one
    over and completes it in the waiting thread, without a hand-over between
    threads.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._entries = []
        self._thread = None
        self._wake_comm = None
        self._wake_req = None
        self._wake_buf = bytearray(1)
        self._idle = threading.Condition(self._lock)
        self._asleep = False  # the thread waits in wait_any for a wake-up message
        self._deep = False  # the thread sleeps until woken (no call for LINGER s)
        self._arrivals = 0  # calls submitted so far (the thread sleeps on none unseen)
        self._last_arrival = 0.0

    @property
    def active(self) -> int:
        """Tasks in flight."""
        return len(self._entries)

    def submit(self, task):
        """Start advancing ``task`` (its first step here, in the calling thread);
        return ``(grequest, entry)``: its ``MPI.Grequest`` and what :meth:`finish`
        takes."""
        require_threads()
        now = time.perf_counter()
        entry = _Entry(task, None, now + HAND_OVER if task.compiled else 0.0)

        def query(status):
            status.source = MPI.UNDEFINED
            status.tag = MPI.UNDEFINED
            status.error = MPI.SUCCESS if entry.error is None else MPI.ERR_OTHER

        entry.grequest = MPI.Grequest.Start(query, _nothing, _nothing)
        if _advanced(entry, False):
            entry.done = True
            entry.grequest.Complete()
            return entry.grequest, entry
        with self._lock:
            self._arrivals += 1
            self._last_arrival = now
            self._entries.append(entry)
            self._ensure_thread()
            if not entry.due or self._deep or self._asleep:
                self._wake()
        return entry.grequest, entry

    def finish(self, entry):
        """Complete ``entry``'s task in this thread (a request's ``Wait``), unless it
        is over already or is not a compiled task (the thread alone advances a
        task whose MPI requests it waits for in Python: two threads must not test
        one request). An interrupt in the wait ends the task (the communicator is
        stopped) and is raised."""
        if not entry.task.compiled:
            return
        with entry.lock:
            if entry.done:
                return
            try:
                _advanced(entry, True, interrupts=True)
            finally:
                self._complete(entry)

    def progress(self, entry):
        """Advance ``entry``'s compiled task in this thread, if no other thread does
        (a request's ``Test``)."""
        if entry.task.compiled and entry.lock.acquire(False):
            try:
                if not entry.done and _advanced(entry, False):
                    self._complete(entry)
            finally:
                entry.lock.release()

    def _complete(self, entry):
        entry.done = True
        with self._lock:
            if entry in self._entries:
                self._entries.remove(entry)
        entry.grequest.Complete()

    def _ensure_thread(self):
        if self._wake_comm is None:
            self._wake_comm = MPI.COMM_SELF.Dup()
            self._wake_req = self._wake_comm.Irecv(self._wake_buf, source=0, tag=1)
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(
                target=self._loop, name="wacoll-engine", daemon=True
            )
            self._thread.start()

    def _due(self, clock):
        """(With the lock held.) The calls the thread is to advance now: every call
        on the Python route, and compiled ones in flight for :data:`HAND_OVER`;
        waits (releasing the lock) until there is one."""
        while True:
            now = clock()
            due = [e for e in self._entries if e.due <= now]
            if due:
                return due
            if self._entries:
                timeout = max(min(e.due for e in self._entries) - now, 1e-5)
            elif now - self._last_arrival < LINGER:
                timeout = HAND_OVER
            else:
                timeout = None
            self._deep = timeout is None
            self._idle.wait(timeout)
            self._deep = False

    def _wake(self):
        """(With the lock held.) Wake the thread: one message when it waits in
        ``wait_any`` (at most one is in flight), a notice when it is idle."""
        if self._asleep:
            self._asleep = False
            self._wake_comm.Isend(b"\0", dest=0, tag=1).Free()
        self._idle.notify_all()

    def _loop(self):
        nap, began, seen = 1e-6, None, 0
        clock = time.perf_counter
        while True:
            with self._lock:
                entries = self._due(clock)
                arrivals = self._arrivals
                later = len(self._entries) > len(entries)  # compiled, not yet due
            if arrivals != seen:  # a call arrived: poll it soon
                nap, began, seen = 1e-6, None, arrivals
            # (a call due soon must not wait for a wait_any on the others)
            waiting, polled, moved = [], later, False
            for entry in entries:
                if not entry.lock.acquire(False):
                    polled = True  # a Wait advances it: look again soon
                    continue
                try:
                    if entry.done:
                        continue
                    if _advanced(entry, False):
                        self._complete(entry)
                        moved = True
                    elif entry.task.waiting:
                        waiting.extend(entry.task.waiting)
                    else:
                        polled = True  # a compiled task: polled
                finally:
                    entry.lock.release()
            if moved:
                nap, began = 1e-6, None
                continue
            if not polled:
                if not waiting:
                    continue
                with self._lock:
                    if self._arrivals != arrivals:
                        continue  # a call arrived since: advance it first
                    self._asleep = True
                try:
                    # (a call submitted after a long wait must not wait for a long nap)
                    index = wait_any(waiting + [self._wake_req], longest_nap=MAX_NAP)
                except MPI.Exception:
                    # a failed receive (e.g. truncated by an erroneous call): the task
                    # that owns it learns of the failure from its cross-rank check
                    continue
                finally:
                    with self._lock:
                        self._asleep = False
                if index == len(waiting):
                    self._wake_req = self._wake_comm.Irecv(
                        self._wake_buf, source=0, tag=1
                    )
                continue
            # compiled tasks (their requests are in C) and tasks a Wait holds: poll,
            # napping longer as the wait goes on (up to 2 % of it: wide-area waits
            # do not take the cores with polls)
            if waiting:  # (requests of the tasks this thread alone advances)
                try:
                    if MPI.Request.Testany(waiting)[1]:
                        nap, began = 1e-6, None
                        continue
                except MPI.Exception:
                    continue
            now = clock()
            if began is None:
                began = now
            time.sleep(nap)
            # a Python-route task in flight is polled at least every MAX_NAP, as in
            # wait_any; compiled ones alone, up to 2 % of the wait
            nap = next_nap(nap, now - began, MAX_NAP if waiting else None)


def require_threads():
    """Raise unless MPI runs with ``MPI_THREAD_MULTIPLE`` (checked before a call
    starts anything)."""
    if MPI.Query_thread() < MPI.THREAD_MULTIPLE:
        raise WacollError(
            "non-blocking wacoll collectives need MPI initialised with "
            "MPI_THREAD_MULTIPLE (mpi4py's default thread level)"
        )


def _nothing(*args):
    """A generalized request's free and cancel callbacks: nothing to do."""


def _advanced(entry, block, interrupts=False):
    """Advance ``entry``'s task: whether it is over (its error, if any, kept in
    ``entry.error``). With ``interrupts``, an interrupt (Ctrl-C) is kept and raised
    too."""
    try:
        if entry.task.advance(block=block):
            return True
    except BaseException as exc:  # kept for the caller, raised there
        entry.error = exc
        if interrupts and is_interrupt(exc):
            raise
        return True
    return False


def advance_request(request, block):
    """Whether an MPI request is complete: waited for when ``block``, else tested."""
    if block:
        request.Wait()
        return True
    return request.Test()


#: How long a wait polls before it starts sleeping between polls, and the longest
#: sleep (s) of a short wait.
SPIN_SECONDS, MAX_NAP = 50e-6, 50e-6
#: A longer wait sleeps up to this share of the time it has waited (so a message
#: is noticed at most about 2 % late), never longer than ``LONGEST_NAP`` (s).
NAP_SHARE, LONGEST_NAP = 0.02, 1e-3


def next_nap(nap, waited, longest=None):
    """The sleep after a sleep of ``nap`` seconds, ``waited`` seconds into a wait:
    doubling, up to :data:`MAX_NAP`, or up to 2 % of ``waited`` (at most
    ``longest``, default :data:`LONGEST_NAP`) in a long wait.

    Examples
    --------
    >>> next_nap(1e-6, 1e-4)
    2e-06
    >>> next_nap(40e-6, 1e-4), next_nap(40e-6, 0.01)
    (5e-05, 8e-05)
    >>> next_nap(0.5e-3, 10.0)
    0.001
    """
    longest = LONGEST_NAP if longest is None else longest
    return min(nap * 2, max(MAX_NAP, min(waited * NAP_SHARE, longest)))


class Naps:
    """The sleeps of one wait that polls: none for :data:`SPIN_SECONDS`, then naps
    growing as :func:`next_nap` says (up to ``longest`` in a long wait): what
    :func:`wait_any` sleeps between its tests, and a wait whose requests are not
    all mpi4py's between its polls.

    Examples
    --------
    >>> naps = Naps()
    >>> naps.sleep()
    """

    __slots__ = ("began", "nap", "longest")

    def __init__(self, longest=None):
        self.began, self.nap, self.longest = time.perf_counter(), 1e-6, longest

    def sleep(self):
        """Sleep the next nap (nothing while the wait is young)."""
        waited = time.perf_counter() - self.began
        if waited < SPIN_SECONDS:
            return
        try:
            time.sleep(self.nap)
        except BaseException as exc:  # a signal's handler raised (Ctrl-C):
            mark(exc)  # an interrupt, whatever its class (wacoll.mpi.interrupts)
            raise
        self.nap = next_nap(self.nap, waited, self.longest)


def wait_any(requests, longest_nap=None):
    """``MPI.Request.Waitany`` that yields the processor while nothing arrives.

    The MPI library's own wait spins: with more threads than cores (two per rank,
    or ranks sharing cores) a spinning engine takes the core its own rank, or a
    peer, needs to make the progress it waits for. Polling for up to
    :data:`SPIN_SECONDS`, then napping for up to :data:`MAX_NAP` between polls,
    keeps a call's latency within that nap; a wait that has lasted longer naps up
    to 2 % of the time it has waited (a wide-area message of 10 ms is noticed within
    0.2 ms), so that ranks waiting for the wide area do not take the cores with
    thousands of polls (4 x 2 ranks on 2 cores, every poll a trip through the
    library's socket progress). The polling is bounded by time, not by
    count: a poll drives the library's progress (socket reads on a network), and
    with ranks sharing cores 200 polls took about 1.4 ms of a core at every wait,
    which delayed the emulated grid's 1-byte Bcast by as much (a hand-written
    mpi4py Bcast of the same plan, waiting this way, took 13.05 ms with 200 polls
    and 11.67 without, 4 x 2 ranks on 2 cores). Measured:
    mpi4py's non-blocking buffer-collective tests at 3 ranks on 2 cores (level
    strict, plans run by the engine) took 92 s instead of 336 s, and 1.8 CPU
    minutes instead of 5.9. A blocking call waiting for its work and its cross-rank
    check at once waits here too: in the MPI library's spinning ``Waitany`` the same
    call on the emulated grid took 34 ms instead of 14 (1-byte Bcast, 4 x 2 ranks).
    """
    index, done = MPI.Request.Testany(requests)
    if done:
        return index
    naps = Naps(longest_nap)
    while True:
        index, done = MPI.Request.Testany(requests)
        if done:
            return index
        naps.sleep()


#: The process's progress engine (created on first use).
_ENGINE = None


def engine() -> ProgressEngine:
    """The process-wide progress engine."""
    global _ENGINE
    if _ENGINE is None:
        _ENGINE = ProgressEngine()
    return _ENGINE


#: How long :func:`wait_request` yields the processor between polls before it naps
#: (as the compiled runner's waits do).
_YIELD_SECONDS = 1e-3


def wait_request(request, status=None) -> None:
    """Wait until an ``MPI.Request`` completes, polling ``MPI.Request.Test``: between
    polls yielding the processor for a millisecond, then napping as
    :func:`wait_any` does, so that a signal's handler runs in
    the wait (the MPI library's own ``Wait`` does not return on a signal). An
    exception a handler raises here is :func:`mark`-ed.

    The request of a non-blocking wacoll collective is completed by the progress
    engine's thread: a poll is a test of a flag, and
    yielding leaves the processor to that thread and to the peers.
    """
    test = MPI.Request.Test
    clock = time.perf_counter
    began = clock()
    nap = 1e-6
    try:
        while not test(request, status):
            waited = clock() - began
            if waited < _YIELD_SECONDS:
                os.sched_yield()
            else:
                time.sleep(nap)
                nap = next_nap(nap, waited)
    except MPI.Exception:
        raise
    except BaseException as exc:  # a signal's handler raised
        mark(exc)
        raise
