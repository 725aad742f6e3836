"""One prover per plan: the ranks of a job that miss the proof cache together wait
for the one that proves.

On a cold cache every rank of an MPI run asks for the same proof at the same moment.
Without coordination each builds and checks the whole plan: at thousands of ranks
that is hundreds of MiB on every rank of a node at once. The first rank to ask
*claims* the proof by creating ``<key>.lock`` beside the proof's file (an exclusive
create, so exactly one process wins on a file system that honours it); the others
wait for the proof to appear and then derive only their own programs. The ranks that
share a cache directory (all of a job's on a shared home, a node's on a node-local
one) thus prove each plan once.

A waiter never waits forever:

- when the claim is released without a proof (the prover found the plan broken, or
  could not write), it proves the plan itself, and so raises the same error;
- a lock whose holder is a dead process of this host is stale and is taken over;
- after :func:`wait_limit` seconds (``WACOLL_PROOF_WAIT``, default 300) it proves
  the plan itself.

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

import os
import socket
import time
from pathlib import Path

__all__ = ["Claim", "WAIT_ENV", "wait_limit", "await_proof"]

#: The environment variable that bounds the wait for another process's proof.
WAIT_ENV = "WACOLL_PROOF_WAIT"
_DEFAULT_WAIT = 300.0
#: The longest pause (s) between two looks at the cache while waiting: thousands of
#: ranks on a shared file system each look at most this often.
_LONGEST_PAUSE = 0.5


def wait_limit(environ=None) -> float:
    """Seconds a rank waits for another process's proof before proving it itself.

    Examples
    --------
    >>> wait_limit({}), wait_limit({"WACOLL_PROOF_WAIT": "2.5"})
    (300.0, 2.5)
    >>> wait_limit({"WACOLL_PROOF_WAIT": "soon"})
    Traceback (most recent call last):
    ...
    ValueError: WACOLL_PROOF_WAIT must be a number of seconds >= 0, got 'soon'
    """
    environ = os.environ if environ is None else environ
    value = environ.get(WAIT_ENV, "").strip()
    if not value:
        return _DEFAULT_WAIT
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:  # (NaN too)
        raise ValueError(f"{WAIT_ENV} must be a number of seconds >= 0, got {value!r}")
    return seconds


def _lock_path(directory, key) -> Path:
    return Path(directory) / f"{key}.lock"


class Claim:
    """The right to prove one plan: a lock file naming this host and process."""

    def __init__(self, path: Path):
        self.path = path

    @classmethod
    def take(cls, directory, key) -> Claim | None:
        """Claim the proof of ``key`` in ``directory``: the claim, or None when another
        process holds it. An unusable directory raises :class:`OSError`."""
        path = _lock_path(directory, key)
        Path(directory).mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return None
        with os.fdopen(fd, "w") as fh:
            fh.write(f"{socket.gethostname()} {os.getpid()}\n")
        return cls(path)

    def release(self):
        """Remove the lock (the proof, if any, is in place already)."""
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


def _holder_is_dead(path: Path) -> bool:
    """Whether the lock at ``path`` names a process of this host that has ended."""
    try:
        host, pid = path.read_text().split()
        pid = int(pid)
    except (OSError, ValueError):
        return False  # (being written, or gone: look again)
    if host != socket.gethostname():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # (alive, another user's)
        return False
    return False


def await_proof(directory, key, lookup, *, wait=None):
    """Wait until the proof of ``key`` is in ``directory``, or this process should
    prove it. ``lookup()`` reads the proof (None: not there).

    Returns
    -------
    (proof, claim)
        ``(proof, None)``: another process proved it. ``(None, claim)``: this process
        holds the claim and must prove, store, and release. ``(None, None)``: prove
        without a claim (released without a proof, waited too long, or the directory
        cannot hold a lock).
    """
    wait = wait_limit() if wait is None else wait
    deadline = time.monotonic() + wait
    pause = 0.005
    lock = _lock_path(directory, key)
    while True:
        try:
            claim = Claim.take(directory, key)
        except OSError:
            return None, None
        if claim is not None:
            # another process may have proved and released between our lookup and now
            proof = lookup()
            if proof is not None:
                claim.release()
                return proof, None
            return None, claim
        # someone else proves: wait for its proof or its release
        while lock.exists():
            proof = lookup()
            if proof is not None:
                return proof, None
            if _holder_is_dead(lock):
                Claim(lock).release()
                break
            if time.monotonic() >= deadline:
                return None, None
            time.sleep(pause)
            pause = min(pause * 2, _LONGEST_PAUSE)
        else:
            proof = lookup()
            if proof is not None:
                return proof, None
            return None, None  # released without a proof: prove it ourselves
