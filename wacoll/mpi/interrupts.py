"""A rank interrupted inside a collective: the job ends instead of hanging.

While one rank is inside a collective, its peers may be waiting for its messages.
When a signal interrupts that rank there (Ctrl-C, which ``mpiexec`` forwards to every
rank, or ``kill -INT`` to one rank) and the exception leaves the call, those
messages never come: the peers wait for ever, and the interrupted rank, on its way
out, waits for ever too, in ``MPI_Finalize``. The communicator cannot be repaired
(MPI has no way to withdraw a rank from a collective it has entered), so by default
wacoll ends the job, as ``python -m mpi4py`` does for an unhandled exception: the rank
prints one line to its standard error ::

    wacoll: rank 1 interrupted inside Allreduce (KeyboardInterrupt); aborting the
    job, as its peers would wait forever

and, a tenth of a second later (so that the launcher forwards the line before it
ends the job), calls ``MPI_Abort`` on ``MPI.COMM_WORLD`` with exit code 130 for a
``KeyboardInterrupt`` (128 + SIGINT, as a shell reports Ctrl-C), a ``SystemExit``'s
own code (1 when it has none or 0) and 1 for anything else. The MPI library's launcher
then ends every rank and exits with a nonzero status. A second Ctrl-C meanwhile ends
the rank at once.

What counts as an interrupt (:func:`is_interrupt`): an exception that is not an
``Exception`` (``KeyboardInterrupt``, ``SystemExit`` raised by a signal handler,
a test runner's timeout), and any exception a signal handler raised while wacoll
waited for a message (a ``TimeoutError`` from a ``SIGALRM`` handler, say). wacoll's
own errors and the MPI library's are not: every rank raises those together
(:mod:`wacoll.mpi.agreement`), and the communicator goes on. "Inside" is anywhere
in a blocking call (reading its arguments, choosing or proving its plan, waiting),
and in the ``Wait`` of a non-blocking or persistent call's request.

Where a rank notices a signal
    Python runs a signal's handler only in the main thread, between two steps of
    Python code, so a wait must give it the chance. wacoll's own waits do: the
    compiled runner's (every blocking call on several clusters, its check, a
    persistent request's ``Wait``; a wait that lasts more than a millisecond runs the
    handlers every 50 ms), the Python executor's polls
    (:func:`wacoll.mpi.engine.wait_any`), the shared-memory check of one node's
    blocking calls, and the ``Wait`` of a non-blocking call's request
    (:func:`wacoll.mpi.engine.wait_request`). The MPI library's own blocking calls do not return on a
    signal: a collective the library runs (one cluster), a persistent request the
    library runs, ``MPI.Request.Waitall`` over wacoll requests and the Python
    executor's wait for its last messages once every rank has joined the call
    deliver the interrupt when they return, as with mpi4py.

Keeping the exception
    ``WACOLL_ON_INTERRUPT=raise`` (or :func:`set_policy`, which wins over the
    environment) lets the exception propagate instead. After a blocking call or a
    persistent request's ``Wait`` the communicator is then marked broken: its next
    collective raises :class:`~wacoll.errors.WacollError` (a persistent request's
    next ``Start`` too) rather than wait for peers that are somewhere else; free it.
    A non-blocking call on the Python route goes on in the progress engine: its
    request can be waited for again; a compiled one, interrupted in its ``Wait``,
    is abandoned and the communicator stopped, as after a blocking call. The job
    ends only if the application ends it (or the peers
    complete): a process that returns from ``main`` still waits for its peers in
    ``MPI_Finalize``. ``WACOLL_ON_INTERRUPT=abort`` is the default.

Examples
--------
>>> is_interrupt(KeyboardInterrupt()), is_interrupt(ValueError("bad count"))
(True, False)
>>> exit_code(KeyboardInterrupt()), exit_code(SystemExit(3)), exit_code(SystemExit())
(130, 3, 1)
>>> collective_name("reduce_scatter_block", "start")
'Ireduce_scatter_block'
>>> message(2, "Allreduce", KeyboardInterrupt())
'wacoll: rank 2 interrupted inside Allreduce (KeyboardInterrupt); aborting the job, \
as its peers would wait forever'
"""

from __future__ import annotations

import os
import signal
import sys
import time

from wacoll.errors import WacollError
from wacoll.settings import setting

__all__ = [
    "ENV",
    "POLICIES",
    "policy",
    "set_policy",
    "is_interrupt",
    "mark",
    "exit_code",
    "collective_name",
    "message",
    "interrupted",
]

#: The environment variable that chooses what an interrupt does.
ENV = "WACOLL_ON_INTERRUPT"
#: ``"abort"`` (the default): end the job; ``"raise"``: propagate the exception.
POLICIES = ("abort", "raise")

_MARK = "_wacoll_signal"
_chosen = None


def policy() -> str:
    """What an interrupt inside a collective does: :func:`set_policy`'s choice, else
    ``WACOLL_ON_INTERRUPT``, else ``"abort"``.

    Raises
    ------
    WacollError
        The environment names no policy of :data:`POLICIES`.
    """
    if _chosen is not None:
        return _chosen
    given = setting(ENV)
    value = (given or "").lower() or "abort"
    if value not in POLICIES:
        raise WacollError(f"{ENV}={given!r}: expected one of {', '.join(POLICIES)}")
    return value


def set_policy(value: str | None) -> None:
    """Choose the policy for this process (None: back to the environment's).

    Examples
    --------
    >>> set_policy("raise"); policy()
    'raise'
    >>> set_policy(None)
    """
    global _chosen
    if value is not None and value not in POLICIES:
        raise WacollError(f"on interrupt: {value!r} is not one of {', '.join(POLICIES)}")
    _chosen = value


def mark(exc: BaseException) -> BaseException:
    """Note that ``exc`` was raised by a signal handler while wacoll waited (so it
    counts as an interrupt whatever its class); ``exc`` itself.

    Examples
    --------
    >>> is_interrupt(mark(TimeoutError("alarm")))
    True
    """
    try:
        setattr(exc, _MARK, True)
    except (AttributeError, TypeError):  # an exception class with __slots__
        pass
    return exc


def is_interrupt(exc: BaseException) -> bool:
    """Whether ``exc``, leaving a collective, means the rank was interrupted there:
    not an ``Exception``, or raised by a signal handler while wacoll waited."""
    return not isinstance(exc, Exception) or getattr(exc, _MARK, False) is True


def exit_code(exc: BaseException) -> int:
    """The job's exit code for an interrupt: 130 for ``KeyboardInterrupt``, a
    ``SystemExit``'s code (1 for none or 0, or one that is not a small integer),
    else 1."""
    if isinstance(exc, KeyboardInterrupt):
        return 130
    if isinstance(exc, SystemExit) and type(exc.code) is int and 0 < exc.code < 256:
        return exc.code
    return 1


def collective_name(op: str, mode: str = "call") -> str:
    """The MPI name of a wacoll operation (``"allreduce"``) called blocking
    (``mode="call"``), non-blocking (``"start"``) or persistent (``"bind"``)."""
    name = op[:1].upper() + op[1:]
    if mode == "start":
        return "I" + op
    if mode == "bind":
        return name + "_init"
    return name


def message(rank: int, where: str, exc: BaseException) -> str:
    """The line a rank prints before it aborts the job."""
    what = type(exc).__name__
    text = str(exc)
    if text and not isinstance(exc, KeyboardInterrupt):
        what += f": {text}"
    return (
        f"wacoll: rank {rank} interrupted inside {where} ({what}); aborting the job, "
        f"as its peers would wait forever"
    )


def interrupted(exc: BaseException, where: str, route=None) -> None:
    """Handle an exception leaving a collective (call it in an ``except`` clause,
    then re-raise). Returns at once for an exception that is not an interrupt
    (:func:`is_interrupt`). For an interrupt, by default prints :func:`message` and
    aborts the job (it does not return); with the ``"raise"`` policy stops the
    communicator's ``route`` (if given: its collectives raise from now on) and
    returns.

    Parameters
    ----------
    exc : BaseException
        What left the call.
    where : str
        The call, as the message names it (``"Allreduce"``, ``"Wait of Iallreduce"``).
    route : wacoll.mpi.route.Route, optional
        The route of the communicator the call ran on.
    """
    if not is_interrupt(exc):
        return
    try:
        chosen = policy()
    except WacollError as bad:  # the job must end all the same: say why it aborts
        sys.stderr.write(f"wacoll: {bad}; aborting\n")
        chosen = "abort"
    if chosen == "raise":
        if route is not None:
            _break(route, where)
        return
    _abort(exc, where)


def _break(route, where):
    """The communicator's collectives raise from now on (:meth:`Route.stop
    <wacoll.mpi.route.Route.stop>`)."""
    route.stop(
        f"a collective on this wacoll.Comm ({where}) was interrupted; its "
        f"peers may still wait for its messages, so the communicator cannot "
        f"run further collectives: Free it"
    )


def _abort(exc, where):
    from mpi4py import MPI

    try:  # a second Ctrl-C now ends this process at once, not the abort half done
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    except ValueError:  # pragma: no cover - not the main thread
        pass
    world = MPI.COMM_WORLD
    rank = world.Get_rank() if MPI.Is_initialized() and not MPI.Is_finalized() else "?"
    for stream in (sys.stdout, sys.stderr):  # what the application printed first
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed stream must not stop the abort
            pass
    try:
        sys.stderr.write(message(rank, where, exc) + "\n")
        sys.stderr.flush()
    except Exception:  # noqa: BLE001
        pass
    code = exit_code(exc)
    if rank != "?":
        # the launcher forwards output and aborts in its own time: without a pause
        # MPICH's hydra lost the line now and then (every rank interrupted at once)
        try:
            time.sleep(_LINE_SECONDS)
        except BaseException:  # noqa: BLE001 - another signal's handler: abort now
            pass
        world.Abort(code)
    os._exit(code)  # pragma: no cover - MPI_Abort does not return


#: The pause between the line on standard error and ``MPI_Abort``.
_LINE_SECONDS = 0.1
