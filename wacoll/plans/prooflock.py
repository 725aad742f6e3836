"""One prover per plan: the ranks of a job that miss the proof cache together wait
for the one that proves.

On a cold cache every rank of an MPI run asks for the same proof at the same moment.
Without coordination each builds and checks the whole plan: at thousands of ranks
that is hundreds of MiB on every rank of a node at once. The first rank to ask
*claims* the proof: it holds an exclusive lock (``flock``) on ``<key>.lock`` beside
the proof's file while it proves. The others wait for the proof to appear and then
derive only their own programs. The ranks that share a cache directory (all of a
job's on a shared home, a node's on a node-local one) thus prove each plan once.

The lock is the kernel's (or the file server's), not the file: it goes with the
process that holds it, so a prover that crashes or is killed frees it at once (its
file stays, unlocked, until the next prover takes and removes it). A holder removes
the file before it lets go, and a taker keeps a lock only if the file it locked is
still the one at the path, so a waiter that locked a removed file tries again. A
waiter never waits forever:

- when it gets the lock after someone else held it and finds no proof (the prover
  found the plan broken, could not write the proof, or died), it proves the plan
  itself without holding the lock, so that after a failure the waiters prove side by
  side, not one after another, and each raises the prover's error;
- after :func:`wait_limit` seconds (``WACOLL_PROOF_WAIT``, default 300) of a holder
  that neither finishes nor dies, it proves the plan itself.

Where the directory cannot hold a lock (read-only, or no ``flock``), every process
proves for itself, as without this module.

A lock file is the user's own or it is not used. It is created readable by its owner
only (mode 0600: no one else can open it to hold it) and opened without following a
symbolic link at its name (a link planted there cannot make this process create or
lock a file elsewhere). A lock file that is a symbolic link, not a regular file, a
hard link to another file, or owned by another user is refused
(:class:`~wacoll.errors.ProofLockRefused`): the process does not wait for it and
proves the plan itself, with a :class:`~wacoll.errors.ProofCacheWarning`. So no one
but the user's own processes can make a rank wait, and those at most
``WACOLL_PROOF_WAIT`` seconds per plan.

Examples
--------
>>> import tempfile
>>> where = tempfile.mkdtemp()
>>> claim = Claim.take(where, "k")
>>> claim is not None, Claim.take(where, "k") is None
(True, True)
>>> claim.release()
>>> again = Claim.take(where, "k"); again.release()
"""

from __future__ import annotations

import fcntl
import math
import os
import stat
import time
import warnings

from wacoll.errors import ProofCacheWarning, ProofLockRefused
from wacoll.settings import setting

__all__ = ["Claim", "WAIT_ENV", "wait_limit", "await_proof"]

#: The environment variable that bounds the wait for another process's proof.
WAIT_ENV = "WACOLL_PROOF_WAIT"
_DEFAULT_WAIT = 300.0
#: The longest pause (s) between two looks at the cache while waiting: thousands of
#: ranks on a shared file system each look at most this often.
_LONGEST_PAUSE = 0.5
#: Seconds a waiter first pauses between lookups (then twice as long each time).
_FIRST_PAUSE = 0.0005
#: How often :meth:`Claim.take` tries again when the file it locked was replaced
#: meanwhile, before it gives up (a file that keeps changing is not waited on).
_TAKE_TRIES = 64
#: Flags that open (and create) a lock file: never through a symbolic link at its
#: name, never blocking (on a FIFO), never inherited by child processes.
_LOCK_FLAGS = (
    os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
)


def _kind(mode) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _refusal(st) -> str | None:
    """Why the lock file of status ``st`` is not used, or None."""
    if not stat.S_ISREG(st.st_mode):
        return f"is {_kind(st.st_mode)}, not a regular file"
    if st.st_uid != os.geteuid():
        return f"is owned by uid {st.st_uid}, not by this user (uid {os.geteuid()})"
    if st.st_nlink > 1:
        return "is a hard link to another file"
    return None


def wait_limit(environ=None) -> float:
    """Seconds a rank waits for another process's proof before proving it itself.

    Parameters
    ----------
    environ : mapping, optional
        The environment (default ``os.environ``).

    Returns
    -------
    float
        ``WACOLL_PROOF_WAIT`` when it is a finite number of seconds >= 0, else 300.
        A value that is not (a typo) gets a :class:`~wacoll.errors.ProofCacheWarning`
        and the default: raising on the ranks that happen to wait, and not on the
        one that proves, would leave the job half failed.

    Examples
    --------
    >>> wait_limit({}), wait_limit({"WACOLL_PROOF_WAIT": "2.5"})
    (300.0, 2.5)
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as seen:
    ...     warnings.simplefilter("always")
    ...     wait_limit({"WACOLL_PROOF_WAIT": "soon"}), str(seen[0].message)
    (300.0, "WACOLL_PROOF_WAIT must be a number of seconds >= 0, got 'soon'; waiting 300 s")
    """
    value = setting(WAIT_ENV, environ)
    if not value:
        return _DEFAULT_WAIT
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not (seconds >= 0 and math.isfinite(seconds)):
        warnings.warn(
            f"{WAIT_ENV} must be a number of seconds >= 0, got {value!r}; "
            f"waiting {_DEFAULT_WAIT:g} s",
            ProofCacheWarning,
            stacklevel=2,
        )
        return _DEFAULT_WAIT
    return seconds


class Claim:
    """The right to prove one plan: an exclusive ``flock`` on its lock file.

    Parameters
    ----------
    fd : int
        The open lock file, locked.
    path : str
        Where it is (removed on release).
    """

    def __init__(self, fd: int, path: str):
        self.fd, self.path = fd, path

    @classmethod
    def take(cls, directory, key) -> Claim | None:
        """Claim the proof of ``key`` in ``directory``.

        Returns
        -------
        Claim or None
            The claim, or None while another process holds it.

        Raises
        ------
        wacoll.errors.ProofLockRefused
            The lock file is not the user's own (see the module docstring): it is
            not locked, and the caller should not wait for it.
        OSError
            The directory cannot hold the lock (not writable, no ``flock``).
        """
        # a string, not a Path: pathlib interns every part (see proofs._path)
        path = os.path.join(os.fspath(directory), key + ".lock")
        os.makedirs(os.fspath(directory), mode=0o700, exist_ok=True)
        for _ in range(_TAKE_TRIES):
            try:
                fd = os.open(path, _LOCK_FLAGS, 0o600)
            except OSError as exc:
                try:
                    there = os.lstat(path).st_mode
                except OSError:
                    raise exc from None
                if not stat.S_ISREG(there):
                    raise ProofLockRefused(
                        f"the proof lock {path} is {_kind(there)}, not a regular file"
                    ) from None
                raise
            try:
                mine = os.fstat(fd)
                if mine.st_nlink == 0:  # (removed by a holder since we opened it)
                    os.close(fd)
                    continue
                refusal = _refusal(mine)
                if refusal is not None:
                    raise ProofLockRefused(f"the proof lock {path} {refusal}")
                if stat.S_IMODE(mine.st_mode) & 0o077:  # (left by an older version)
                    os.fchmod(fd, 0o600)
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                # a holder removes the file before it lets go: the lock is ours only
                # if the file we locked is still the one at the path
                try:
                    current = os.lstat(path)
                except FileNotFoundError:
                    current = None
            except BlockingIOError:
                os.close(fd)
                return None
            except BaseException:
                os.close(fd)
                raise
            if current is not None and (current.st_dev, current.st_ino) == (
                mine.st_dev,
                mine.st_ino,
            ):
                return cls(fd, path)
            os.close(fd)  # (a removed file: lock the new one)
        raise ProofLockRefused(
            f"the proof lock {path} was replaced {_TAKE_TRIES} "
            f"times while it was being locked"
        )

    def release(self):
        """Give the claim up (the proof, if any, is in place already)."""
        if self.fd is None:
            return
        fd, self.fd = self.fd, None
        try:
            os.unlink(self.path)  # while still locked: see take()
        except OSError:
            pass  # (a lock file left behind is harmless: the next taker locks it)
        try:
            os.close(fd)  # (closing the only descriptor drops the lock)
        except OSError as exc:
            warnings.warn(
                f"the proof lock {self.path} could not be closed ({exc})",
                ProofCacheWarning,
                stacklevel=2,
            )


def await_proof(directory, key, lookup, *, wait=None):
    """Wait until the proof of ``key`` is in ``directory``, or this process should
    prove it.

    Parameters
    ----------
    directory : path
        The proof cache.
    key : str
        The plan's key (:func:`wacoll.plans.proofs.plan_key`).
    lookup : callable
        ``lookup()`` reads the proof (None: not there).
    wait : float, optional
        Seconds to wait for a holder that neither finishes nor dies (default
        :func:`wait_limit`).

    Returns
    -------
    (proof, claim)
        ``(proof, None)``: another process proved it. ``(None, claim)``: this process
        holds the claim and must prove, store, and release. ``(None, None)``: prove
        without a claim (a holder gave up without a proof, the wait ran out, the
        directory cannot hold a lock, or the lock file is refused: then with a
        :class:`~wacoll.errors.ProofCacheWarning`, at once, without waiting).

    Notes
    -----
    Every wait ends: ``lookup`` must not block (:func:`wacoll.plans.proofs.lookup`
    reads regular files only, without blocking), and the lock is only ever tried,
    never waited on in the kernel, so the loop ends when its deadline passes.
    """
    wait = wait_limit() if wait is None else wait
    deadline = time.monotonic() + wait
    # a small plan is proved in a millisecond or two: a first pause as long as that
    # keeps its waiters from oversleeping it (a lookup is one stat)
    pause = _FIRST_PAUSE
    held_by_another = False
    while True:
        try:
            claim = Claim.take(directory, key)
        except ProofLockRefused as exc:
            warnings.warn(
                f"{exc}; it is not waited for: this process proves the plan",
                ProofCacheWarning,
                stacklevel=3,
            )
            return None, None
        except OSError:
            return None, None
        if claim is not None:
            try:  # another process may have proved it before we got the lock
                proof = lookup()
            except BaseException:
                claim.release()
                raise
            if proof is not None:
                claim.release()
                return proof, None
            if held_by_another:  # its holder gave up: prove beside the other waiters
                claim.release()
                return None, None
            return None, claim
        held_by_another = True
        proof = lookup()
        if proof is not None:
            return proof, None
        if time.monotonic() >= deadline:
            return None, None
        time.sleep(pause)
        pause = min(pause * 2, _LONGEST_PAUSE)
