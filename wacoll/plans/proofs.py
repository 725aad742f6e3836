"""A disk cache of plan proofs, so that a run need not prove what an earlier run proved.

Proving a plan (:func:`wacoll.plans.prove_plan`) means building every rank's program
and following every block; at thousands of ranks that costs seconds, and every rank
of an MPI run would pay it before its first call. A plan is a deterministic function
of what :func:`wacoll.plans.select` chose (operation, family, builder options: sizes,
counts, root, level, ...), the topology and the code that builds plans. This module
keys a proof by the digest of exactly those (:func:`plan_key`; the code is the source
of :mod:`wacoll.plans`, :mod:`wacoll.trees` and :mod:`wacoll.topology`, and the
package version) and stores, per key, one JSON file holding the digest of the proved
plan (:func:`plan_digest`), each rank's program digest, its
:class:`~wacoll.plans.prove.ProofReport`, that report's digest, and an authentication
code that only the user's own processes can make (see below).

- :func:`prove` returns a proof for a selection: the cached one (without building the
  plan: same key, same inputs, same code, so the same plan), or, on a miss, builds and
  checks the whole plan and stores the proof. :func:`wacoll.plans.rank.rank_program`
  takes it as its ``proof``, so a rank derives only its own program.
- :func:`build_proved` builds the whole plan and takes the cached report instead of
  checking again, after verifying that the plan's digest is the one proved.

Where the cache lives
---------------------
The environment variable ``WACOLL_PROOF_CACHE`` decides: unset or empty, the default
directory ``$XDG_CACHE_HOME/wacoll/proofs`` (``~/.cache/wacoll/proofs`` without
``XDG_CACHE_HOME``), created readable by its owner only (mode 0700); ``off`` (or
``0``, ``no``, ``false``), no cache: every process proves the plans it runs, as
without this module; any other value, that directory (created with mode 0700 when
missing). Writes go to a temporary file renamed into place, so concurrent ranks that
store the same proof do not corrupt it. A proof is one file per call shape (key),
under 1 KiB plus 67 bytes per rank (the ranks' program digests). The cache is
bounded: it keeps at most :data:`MAX_RECORDS` records and :data:`MAX_CACHE_BYTES`
bytes of them; a store that passes either bound removes the least recently used
records (a record is used when it is written, and when a lookup trusts it) until
both hold again. (The folder also keeps small records of what a run worked out
for the next, :mod:`wacoll.plans.memo`, under the same rules and bounds.) A process
counts the records when it first stores one and then
adds its own stores, counting again every :data:`RESCAN_STORES` stores, so records
other processes wrote meanwhile may pass the bounds by that many stores each until
then. Deleting the directory clears the cache.

What a cache is trusted with
----------------------------
A record vouches that a plan was proved: a rank that finds one runs its own part of
the plan without proving anything. So a record counts only if the user's own
processes wrote it:

- **Records carry an authentication code.** Each record is signed (HMAC-SHA256 over
  its canonical JSON) with the user's *proof key*, 32 random bytes in a file only the
  user can read: ``WACOLL_PROOF_KEY`` names it, else
  ``$XDG_CONFIG_HOME/wacoll/proof-key`` (``~/.config/wacoll/proof-key``), created on
  first use (mode 0600, atomically: ranks that start together end with one key). A
  record without the user's code (written by another user, with another key, or
  forged) is ignored with a :class:`~wacoll.errors.ProofCacheWarning` and the plan
  proved again. A shared home gives one user's jobs on every node the same key, so
  a shared cache serves them all; users who do not share a home may copy the key
  file (64 hexadecimal digits) or point ``WACOLL_PROOF_KEY`` at one copy. A key file
  that is not a regular file owned by the user, or that others can read or write,
  is refused with a warning: the cache is then off for the process.
- **A cache folder others can write is refused**: one that is writable by its group
  or by everyone (``chmod 777``, ``1777``), or owned by another user, is neither
  read nor written (a warning names the folder and the reason; the process proves
  the plans it runs).
- **Only regular files are read**, without following symbolic links and without
  blocking (a FIFO, socket, device or link where a record should be is ignored with
  a warning), and at most 64 KiB plus 80 bytes per rank of each. Each file is then
  parsed as JSON and checked field by field, against its key and its own report
  digest; a file that fails is ignored with a warning (and overwritten by the next
  proof), never trusted.
- **Waits are bounded.** Nothing here blocks on a file; the wait for another
  process's proof (:mod:`wacoll.plans.prooflock`) ends after ``WACOLL_PROOF_WAIT``
  seconds at most, and at once when the lock file is a link, not a regular file or
  not the user's own; a rank whose wait ends proves the plan itself.

A cache readable by others is fine: a record holds digests and counts, nothing
secret, and the key never leaves its file.

Examples
--------
>>> import tempfile
>>> from wacoll import Topology
>>> from wacoll.plans import Call, select
>>> topo = Topology.from_sizes([2, 2])
>>> sel = select(Call("allgather", count=4, itemsize=8), topo)
>>> where = tempfile.mkdtemp()
>>> first = prove(sel, topo, directory=where)
>>> first.cached, first.report.wide_area_messages
(False, 2)
>>> again = prove(sel, topo, directory=where)
>>> again.cached, again.plan_digest == first.plan_digest
(True, True)
>>> build_proved(sel, topo, directory=where).proved
True
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import functools
import hashlib
import hmac
import json
import os
import secrets
import stat
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

from wacoll.errors import ProofCacheWarning, ProofKeyRefused, ProofRecordUntrusted
from wacoll.plans.encoded import EncodedPrograms, program_digest, program_digests
from wacoll.plans.families import build
from wacoll.plans.prooflock import await_proof
from wacoll.plans.prove import ProofReport
from wacoll.settings import setting

__all__ = [
    "ENV",
    "KEY_ENV",
    "FORMAT",
    "Proof",
    "cache_dir",
    "key_path",
    "proof_key",
    "plan_key",
    "plan_digest",
    "program_digest",
    "report_digest",
    "report_from_fields",
    "signed_record",
    "digest_of",
    "read_record",
    "write_record",
    "lookup",
    "claimed",
    "store",
    "prove",
    "build_proved",
    "forget_warnings",
]

#: The environment variable that places the cache or turns it off.
ENV = "WACOLL_PROOF_CACHE"
#: The environment variable that names the user's proof key file.
KEY_ENV = "WACOLL_PROOF_KEY"
_OFF = ("off", "0", "no", "false")
#: The version of the records' layout: their ``"format"`` field, and part of every
#: key (:func:`plan_key`), so that a record of another version is never read as one.
FORMAT = 2
#: The package's name, the cache's directory under the user's cache directory.
_PACKAGE = __name__.split(".")[0]
#: Bytes beyond which a cache file is not read: a proof is under 1 KiB plus 67 bytes
#: (a digest) per rank.
_MAX_BYTES = 65536
_PER_RANK_BYTES = 80
#: The fields of a record.
_FIELDS = ["format", "key", "mac", "plan", "ranks", "report", "report_digest"]
#: Seconds a process waits for a key file another process is writing (where the file
#: system cannot link, a key is written in place and may be seen half written).
_KEY_WAIT = 2.0
#: Permission bits that let others (group or everyone) write a cache folder, and
#: read or write a key file.
_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH
_OTHERS_READ_WRITE = stat.S_IRGRP | stat.S_IWGRP | stat.S_IROTH | stat.S_IWOTH
#: Messages of the warnings already given about a refused folder or key: each is
#: given once per process, not once per plan.
_WARNED: set = set()


def forget_warnings():
    """Forget the warnings given so far: each is given once more (a test's, or a
    long-lived process's, fresh start)."""
    _WARNED.clear()


def _warn_once(message, stacklevel=3):
    if message not in _WARNED:
        _WARNED.add(message)
        warnings.warn(message, ProofCacheWarning, stacklevel=stacklevel)


def _kind(mode) -> str:
    """What a file of ``mode`` is, in words."""
    for test, name in (
        (stat.S_ISREG, "a regular file"),
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


def _kind_at(path) -> str | None:
    """What is at ``path`` (not following a link), or None when nothing is."""
    try:
        return _kind(os.lstat(path).st_mode)
    except OSError:
        return None


#: Flags that open a file without following a link at its name, without blocking
#: (on a FIFO), and without handing it to child processes.
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def _read_regular(path, limit) -> tuple[bytes, os.stat_result]:
    """At most ``limit + 1`` bytes of the regular file at ``path``, and its status.

    Raises
    ------
    FileNotFoundError, NotADirectoryError
        Nothing is there.
    ValueError
        Something is there that is not read: a symbolic link, a FIFO, a socket, a
        device, a directory, or a file longer than ``limit`` bytes.
    OSError
        The file cannot be read.
    """
    try:
        fd = os.open(path, _READ_FLAGS)
    except (FileNotFoundError, NotADirectoryError):
        raise
    except OSError as exc:
        kind = _kind_at(path)
        if kind not in (None, "a regular file"):
            raise ValueError(f"it is {kind}, not a regular file") from exc
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"it is {_kind(st.st_mode)}, not a regular file")
        if st.st_size > limit:
            raise ValueError(f"longer than {limit} bytes")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks), st
    finally:
        os.close(fd)


def cache_dir(environ=None) -> Path | None:
    """The cache directory the environment asks for, or None when the cache is off.

    Examples
    --------
    >>> cache_dir({"WACOLL_PROOF_CACHE": "off"}) is None
    True
    >>> str(cache_dir({"WACOLL_PROOF_CACHE": "/tmp/p"}))
    '/tmp/p'
    >>> str(cache_dir({"XDG_CACHE_HOME": "/c"}))
    '/c/wacoll/proofs'
    """
    environ = os.environ if environ is None else environ
    value = setting(ENV, environ) or ""
    if value.lower() in _OFF:
        return None
    if value:
        return Path(value)
    base = environ.get("XDG_CACHE_HOME") or os.path.join(
        os.path.expanduser("~"), ".cache"
    )
    return Path(base) / _PACKAGE / "proofs"


def key_path(environ=None) -> Path:
    """Where the user's proof key is: ``WACOLL_PROOF_KEY``, else
    ``$XDG_CONFIG_HOME/wacoll/proof-key`` (``~/.config/wacoll/proof-key``).

    Examples
    --------
    >>> str(key_path({"WACOLL_PROOF_KEY": "/secure/k"}))
    '/secure/k'
    >>> str(key_path({"XDG_CONFIG_HOME": "/c"}))
    '/c/wacoll/proof-key'
    """
    environ = os.environ if environ is None else environ
    value = setting(KEY_ENV, environ)
    if value:
        return Path(value)
    base = environ.get("XDG_CONFIG_HOME") or os.path.join(
        os.path.expanduser("~"), ".config"
    )
    return Path(base) / _PACKAGE / "proof-key"


def proof_key(environ=None) -> bytes | None:
    """The user's secret proof key (32 bytes), created on first use; None when the
    key file is refused.

    The key signs the records this user's processes write (:func:`store`) and is
    checked on every record read (:func:`lookup`). It lives in :func:`key_path`: a
    file of 64 hexadecimal digits. When there is none, one is made from
    :mod:`secrets` (mode 0600, its folder 0700) and linked into place whole, so
    that processes that start together end with one key, the first one linked.
    A key file is used only if it is a regular file (not followed through a
    symbolic link), owned by this user (the effective uid) and neither readable nor
    writable by its group or others; otherwise (or when it cannot be created or
    read) a :class:`~wacoll.errors.ProofCacheWarning` says why, once per process,
    and None is returned: the proof cache is then off (every plan proved here).

    Parameters
    ----------
    environ : mapping, optional
        The environment (default ``os.environ``).

    Examples
    --------
    >>> import os, tempfile
    >>> where = os.path.join(tempfile.mkdtemp(), "key")
    >>> key = proof_key({"WACOLL_PROOF_KEY": where})
    >>> len(key), oct(os.stat(where).st_mode & 0o777)
    (32, '0o600')
    >>> proof_key({"WACOLL_PROOF_KEY": where}) == key
    True
    >>> os.chmod(where, 0o644)
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as seen:
    ...     warnings.simplefilter("always")
    ...     proof_key({"WACOLL_PROOF_KEY": where}) is None
    True
    >>> "readable or writable by others (mode 644)" in str(seen[0].message)
    True
    """
    path = key_path(environ)
    try:
        return _load_key(path)
    except ProofKeyRefused as exc:
        _warn_once(
            f"the proof key {path} is refused: {exc}; the proof cache is off "
            f"for this process (it proves every plan it runs)"
        )
        return None


def _load_key(path) -> bytes:
    deadline = time.monotonic() + _KEY_WAIT
    pause = 0.005
    raw: bytes | None
    st: os.stat_result | None
    while True:
        try:
            raw, st = _read_regular(path, 4096)
        except (FileNotFoundError, NotADirectoryError):
            raw = st = None
        except ValueError as exc:
            raise ProofKeyRefused(str(exc)) from None
        except OSError as exc:
            raise ProofKeyRefused(f"it cannot be read ({exc.strerror or exc})") from None
        if st is None:
            _create_key(path)
            # (read back what is there: ours, or the key of a process that won)
        else:
            if st.st_uid != os.geteuid():
                raise ProofKeyRefused(
                    f"it is owned by uid {st.st_uid}, not by this "
                    f"user (uid {os.geteuid()})"
                )
            if st.st_mode & _OTHERS_READ_WRITE:
                raise ProofKeyRefused(
                    f"it is readable or writable by others (mode "
                    f"{stat.S_IMODE(st.st_mode):o})"
                )
            assert raw is not None  # read together with st
            text = raw.decode("ascii", "replace").strip()
            hexadecimal = all(c in "0123456789abcdefABCDEF" for c in text)
            if len(text) == 64 and hexadecimal:
                return bytes.fromhex(text)
            # the beginning of a key, just written in place, and not yet finished?
            being_written = (
                hexadecimal
                and len(text) < 64
                and not raw.endswith(b"\n")
                and time.time() - st.st_mtime < _KEY_WAIT
            )
            if not being_written or time.monotonic() >= deadline:
                raise ProofKeyRefused(
                    "it does not hold a proof key (64 hexadecimal digits)"
                )
        if time.monotonic() >= deadline:
            raise ProofKeyRefused("it cannot be created")
        time.sleep(pause)  # (a key being written in place: read it again)
        pause = min(pause * 2, 0.1)


def _create_key(path):
    """Make a key file at ``path`` unless there is one; the key is linked into place
    only once written, so no process reads half a key."""
    text = (secrets.token_hex(32) + "\n").encode()
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".proof-key-", dir=path.parent)  # mode 0600
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            try:
                os.link(tmp, path)  # fails if a key (or anything) is there already
            except FileExistsError:
                pass
            except OSError as exc:
                if exc.errno not in (
                    errno.EPERM,
                    errno.EOPNOTSUPP,
                    errno.ENOTSUP,
                    errno.EMLINK,
                    errno.EXDEV,
                    errno.ENOSYS,
                ):
                    raise
                _create_key_in_place(path, text)  # no hard links on this file system
        finally:
            os.unlink(tmp)
    except OSError as exc:
        raise ProofKeyRefused(f"it cannot be created ({exc})") from None


def _create_key_in_place(path, text):
    try:
        fd = os.open(
            path,
            os.O_WRONLY
            | os.O_CREAT
            | os.O_EXCL
            | os.O_NOFOLLOW
            | getattr(os, "O_CLOEXEC", 0),
            0o600,
        )
    except FileExistsError:
        return
    with os.fdopen(fd, "wb") as fh:
        fh.write(text)


def _canonical(value) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def _jsonable(value):
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


@functools.lru_cache(maxsize=1)
def code_digest() -> str:
    """The digest of the source that builds plans: :mod:`wacoll.plans` (every module,
    the prover and its Cython sources included), :mod:`wacoll.trees`, :mod:`wacoll.topology` and the
    package's ``__init__`` (its version). A changed builder or prover changes every
    key.

    It digests each file's name, size and modification time, not its bytes (as
    Python's own bytecode cache tells a changed source): a process's first plan
    does not read the package's sources (it did: 11 ms of a communicator's 66 ms).
    An edited or reinstalled file has a new modification time (a new version, a
    new ``__init__.py``). (A file replaced by one of the same size with its
    modification time kept, as ``cp -p`` does, is not seen: clear the proof cache,
    or touch the file, after such a copy.)"""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    h = hashlib.sha256()
    files = [os.path.join(root, "topology.py"), os.path.join(root, "__init__.py")]
    for folder in ("plans", "trees"):  # (os.walk: a sixth of what rglob costs)
        for where, dirs, names in os.walk(os.path.join(root, folder)):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            wanted = (".py", ".pyx", ".pxd") if folder == "plans" else (".py",)
            files += [os.path.join(where, n) for n in names if n.endswith(wanted)]
    for path in sorted(files):
        info = os.stat(path)
        h.update(os.path.relpath(path, root).encode() + b"\0")
        h.update(f"{info.st_size} {info.st_mtime_ns}".encode() + b"\0")
    return h.hexdigest()


def plan_key(selection, topology) -> str:
    """The digest of everything that determines the plan ``selection`` builds.

    Examples
    --------
    >>> from wacoll import Topology
    >>> from wacoll.plans import Call, select
    >>> topo = Topology.from_sizes([2, 2])
    >>> a = plan_key(select(Call("bcast", count=4, root=0), topo), topo)
    >>> b = plan_key(select(Call("bcast", count=4, root=1), topo), topo)
    >>> len(a), a == b
    (64, False)
    """
    return digest_of(
        {
            "format": FORMAT,
            "code": code_digest(),
            "op": selection.op,
            "family": selection.family,
            "options": _jsonable(selection.options),
            "arithmetic": selection.arithmetic,
            "topology": _jsonable(topology.to_dict()),
        }
    )


def _digests(plan):
    """The plan's digest and its ranks' program digests: the plan digest covers the
    plan's header (layout, clusters, names) and every rank's program digest."""
    programs = plan.programs
    ranks = (
        program_digests(programs)
        if isinstance(programs, EncodedPrograms)
        else [program_digest(p) for p in programs]
    )
    header = {
        "op": plan.op,
        "size": plan.size,
        "root": plan.root,
        "counts": list(plan.counts),
        "clusters": list(plan.clusters),
        "level": plan.level,
        "itemsize": plan.itemsize,
        "family": plan.family,
        "algorithm": plan.algorithm,
        "params": _jsonable(plan.params),
    }
    h = hashlib.sha256(_canonical(header))
    for d in ranks:
        h.update(d.encode())
    return h.hexdigest(), tuple(ranks)


def plan_digest(plan) -> str:
    """The digest of a whole plan (every rank's program, its layout and names)."""
    return _digests(plan)[0]


def _report_fields(report) -> dict:
    return _jsonable(dataclasses.asdict(report))


def report_digest(report) -> str:
    """The digest of a :class:`~wacoll.plans.prove.ProofReport`."""
    return hashlib.sha256(_canonical(_report_fields(report))).hexdigest()


@dataclass(frozen=True)
class Proof:
    """A proved plan's identity: its key, digest and check report.

    ``rank_digests`` holds each rank's :func:`program_digest`, against which a rank
    that derives its program alone checks it. ``cached`` says whether it came from
    the disk cache; ``plan`` is the whole plan when this process built it (None for a
    cached proof).
    """

    key: str
    plan_digest: str
    report: ProofReport
    cached: bool
    plan: object = None
    rank_digests: tuple = ()


def report_from_fields(fields) -> ProofReport:
    """The :class:`~wacoll.plans.prove.ProofReport` a record's ``"report"`` holds,
    checked field by field (names and types); ValueError where it is not one."""
    names = [f.name for f in dataclasses.fields(ProofReport)]
    if not isinstance(fields, dict) or sorted(fields) != sorted(names):
        raise ValueError("the report's fields are not a ProofReport's")
    types = {
        "op": str,
        "messages": int,
        "bytes": int,
        "wide_area_messages": int,
        "wide_area_bytes": int,
        "max_wide_area_hops": int,
        "single_latency": bool,
        "no_repeated_data": bool,
        "repeated": list,
        "steps": int,
        "max_sends": int,
        "arithmetic": str,
    }
    for name, kind in types.items():
        value = fields[name]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ValueError(f"report field {name!r} is not a {kind.__name__}")
    if fields["level"] is not None and not isinstance(fields["level"], str):
        raise ValueError("report field 'level' is not a string")
    repeated = fields["repeated"]
    if not all(
        isinstance(r, list)
        and all(isinstance(x, int) and not isinstance(x, bool) for x in r)
        for r in repeated
    ):
        raise ValueError("report field 'repeated' is not a list of integer tuples")
    return ProofReport(**{**fields, "repeated": tuple(tuple(r) for r in repeated)})


_HEX = frozenset("0123456789abcdef")


def _is_digest(value) -> bool:
    return isinstance(value, str) and len(value) == 64 and _HEX.issuperset(value)


def _path(directory, key) -> str:
    # a string, not a Path: pathlib interns every part it parses, and a loop over
    # many call shapes would fill the interpreter's table of interned strings
    return os.path.join(os.fspath(directory), key + ".json")


@dataclass(frozen=True)
class _Cache:
    """A cache folder this process trusts, and the key that signs its records."""

    path: Path
    secret: bytes


def _default(directory):
    return (
        cache_dir()
        if directory is None
        else (None if directory is False else Path(directory))
    )


def _open_cache(directory, *, create) -> _Cache | None:
    """The cache ``directory`` names (default :func:`cache_dir`), if it is on and
    trusted, with the user's key; else None (with a warning, once per process, when
    it is refused).

    ``create``: make the folder (mode 0700) when missing; without it, a missing
    folder is None silently (nothing cached yet).
    """
    path = _default(directory)
    if path is None:
        return None
    try:
        if create:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.stat(path)
    except OSError as exc:
        if not create and isinstance(exc, (FileNotFoundError, NotADirectoryError)):
            return None  # (nothing cached yet)
        _warn_once(
            f"the proof cache {path} cannot be created or used ({exc}); the "
            f"plans are proved here and their proofs not kept"
        )
        return None
    reason = None
    if not stat.S_ISDIR(st.st_mode):
        reason = f"it is {_kind(st.st_mode)}, not a directory"
    elif st.st_uid != os.geteuid():
        reason = f"it is owned by uid {st.st_uid}, not by this user (uid {os.geteuid()})"
    elif st.st_mode & _OTHERS_WRITE:
        reason = f"it is writable by others (mode {stat.S_IMODE(st.st_mode):o})"
    if reason is not None:
        _warn_once(
            f"the proof cache {path} is refused: {reason}; proofs are neither "
            f"read from it nor kept in it (the plans are proved here)"
        )
        return None
    secret = proof_key()
    return None if secret is None else _Cache(path, secret)


def _mac(secret, record) -> str:
    """The authentication code of ``record`` (without its ``mac`` field)."""
    return hmac.new(secret, _canonical(record), hashlib.sha256).hexdigest()


def signed_record(secret, record) -> dict:
    """``record`` with its authentication code (the ``"mac"`` field): HMAC-SHA256 of
    its canonical JSON with ``secret``, the user's proof key (:func:`proof_key`). A
    cached record counts only if its code is the one this gives."""
    return {**record, "mac": _mac(secret, record)}


def lookup(selection, topology, *, directory=None) -> Proof | None:
    """The cached proof of the plan ``selection`` builds on ``topology``, or None.

    ``directory``: the cache (default :func:`cache_dir`; ``False``: none). A cache
    folder that others can write, or a refused proof key, gives None (see the module
    docstring); a file that is not a regular file, not signed with the user's proof
    key, or not a valid proof of this key is ignored with a
    :class:`~wacoll.errors.ProofCacheWarning`. Never blocks.
    """
    cache = _open_cache(directory, create=False)
    return None if cache is None else _lookup(cache, selection, topology)


def _lookup(cache, selection, topology, seen=None) -> Proof | None:
    """:func:`lookup` in an open cache; ``seen``: a set of the warnings given already
    (a waiter that looks again and again warns once)."""
    key = plan_key(selection, topology)
    path = _path(cache.path, key)
    limit = _MAX_BYTES + _PER_RANK_BYTES * topology.size

    def ignore(message):
        if seen is None or message not in seen:
            if seen is not None:
                seen.add(message)
            warnings.warn(message, ProofCacheWarning, stacklevel=4)

    try:
        raw, _ = _read_regular(path, limit)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except ValueError as exc:
        ignore(f"proof cache file {path} is not read ({exc}); ignored")
        return None
    except OSError as exc:
        ignore(f"proof cache file {path} cannot be read ({exc}); ignored")
        return None
    try:
        data = _verified(cache, raw, limit)
        if sorted(data) != sorted(f for f in _FIELDS if f != "mac"):
            raise ValueError("not a proof record")
        if data["format"] != FORMAT or data["key"] != key:
            raise ValueError("a record of another format or key")
        digest, ranks = data["plan"], data["ranks"]
        if not _is_digest(digest):
            raise ValueError("the plan digest is not a sha256 digest")
        if not (
            isinstance(ranks, list)
            and len(ranks) == topology.size
            and all(_is_digest(d) for d in ranks)
        ):
            raise ValueError("the rank digests are not one sha256 digest per rank")
        report = report_from_fields(data["report"])
        if report_digest(report) != data["report_digest"]:
            raise ValueError("the report does not match its digest")
        if report.op != selection.op:
            raise ValueError("the report is of another operation")
    except ProofRecordUntrusted as exc:  # every such record alike: said once
        _warn_once(
            f"proof cache files in {cache.path} are not trusted ({exc}); "
            f"they are ignored, and their plans proved again (said once per "
            f"process)",
            stacklevel=4,
        )
        return None
    except (ValueError, UnicodeDecodeError, TypeError, RecursionError) as exc:
        ignore(f"proof cache file {path} is not a valid proof ({exc}); ignored")
        return None
    _used(path)
    return Proof(key, digest, report, cached=True, rank_digests=tuple(ranks))


def _verified(cache, raw, limit) -> dict:
    """The record in ``raw`` (a file's bytes), its authentication code checked and
    dropped.

    Raises
    ------
    ValueError, UnicodeDecodeError, RecursionError
        Not a JSON object of at most ``limit`` bytes.
    ProofRecordUntrusted
        Not signed with the user's proof key.
    """
    if len(raw) > limit:
        raise ValueError(f"longer than {limit} bytes")
    data = json.loads(raw.decode("utf-8"))
    if not isinstance(data, dict):
        raise ValueError("not a proof record")
    mac = data.pop("mac", None)
    if not isinstance(mac, str):
        raise ProofRecordUntrusted("it carries no authentication code")
    if not hmac.compare_digest(mac.encode(), _mac(cache.secret, data).encode()):
        raise ProofRecordUntrusted(
            "its authentication code was not made with this "
            "user's proof key: written by another user, or "
            "forged"
        )
    return data


def _used(path) -> None:
    """Mark the record at ``path`` used now (the last to be evicted)."""
    with contextlib.suppress(OSError):
        os.utime(path, follow_symlinks=False)


def store(selection, topology, plan, *, directory=None) -> Proof:
    """Prove ``plan`` (the one ``selection`` builds on ``topology``) if it is not yet,
    and write its proof, signed with the user's proof key, to the cache (when there
    is one, trusted: see :func:`lookup`); return the proof."""
    return _store(_open_cache(directory, create=True), selection, topology, plan)


#: The most proof records a cache directory keeps (see the module docstring).
MAX_RECORDS = 1000
#: The most bytes of proof records a cache directory keeps.
MAX_CACHE_BYTES = 64 << 20


#: Stores between two scans of a cache directory by one process (see :func:`_evict`).
RESCAN_STORES = 64
# per directory: (records, bytes) this process last counted there, plus what it
# stored since, and how many stores ago it counted
_counted: dict[str, list[int]] = {}


def _records_named(directory) -> int:
    """How many files of ``directory`` are named as records (a count from the
    directory's listing alone: no file is opened or examined)."""
    try:
        return sum(
            1
            for name in os.listdir(directory)
            if name.endswith(".json") and _is_digest(name[:-5])
        )
    except OSError:
        return 0


def _evict(directory, keep) -> None:
    """Remove the least recently used records of ``directory`` (never the file
    ``keep``, just written) until at most :data:`MAX_RECORDS` records and
    :data:`MAX_CACHE_BYTES` bytes remain. Records only: files named by a key (64
    hexadecimal digits and ``.json``) that are regular files; another process's
    removal of the same file is no error.

    The records' sizes and times are read only where this process's count of the
    directory (first from its names, then from its last scan plus its own stores
    since) passes a bound, and at least every :data:`RESCAN_STORES` stores, for
    what other processes wrote: with 600 records, such a scan took 10-16 ms of a
    shape's first call, a listing of the names a fraction of that."""
    try:
        size = os.stat(keep, follow_symlinks=False).st_size
    except OSError:
        size = 0
    counted = _counted.get(directory)
    if counted is not None:
        counted[0] += 1
        counted[1] += size
        counted[2] += 1
    else:  # first: the names alone (no file's size), bytes guessed from this one's
        counted = [_records_named(directory), 0, 0]
        counted[1] = counted[0] * size
    if (
        counted[0] <= MAX_RECORDS
        and counted[1] <= MAX_CACHE_BYTES
        and counted[2] < RESCAN_STORES
    ):
        _counted[directory] = counted
        return
    records = []
    try:
        with os.scandir(directory) as found:
            for entry in found:
                name = entry.name
                if not (name.endswith(".json") and _is_digest(name[:-5])):
                    continue
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISREG(info.st_mode):
                    records.append((info.st_mtime_ns, info.st_size, entry.path))
    except OSError:
        return
    count, total = len(records), sum(size for _, size, _ in records)
    _counted[directory] = [count, total, 0]
    if count <= MAX_RECORDS and total <= MAX_CACHE_BYTES:
        return
    for _, size, path in sorted(records):  # the least recently used first
        if count <= MAX_RECORDS and total <= MAX_CACHE_BYTES:
            break
        if path == keep:
            continue
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError:
            return
        count, total = count - 1, total - size
        _counted[directory] = [count, total, 0]


def digest_of(value) -> str:
    """The SHA-256 digest (hexadecimal) of ``value``'s canonical JSON: a record's
    key is one (:func:`plan_key`, :func:`wacoll.plans.memo.memo_key`).

    Raises
    ------
    TypeError
        ``value`` is not made of JSON values.
    """
    return hashlib.sha256(_canonical(value)).hexdigest()


def read_record(key, *, directory=None, limit=_MAX_BYTES) -> dict | None:
    """The record stored under ``key`` (a digest) in the cache, without its
    authentication code, if it is a regular file of at most ``limit`` bytes, a JSON
    object, and signed with the user's proof key; else None. Never blocks; a record
    read is marked used (the last to be evicted)."""
    cache = _open_cache(directory, create=False)
    if cache is None or not _is_digest(key):
        return None
    path = _path(cache.path, key)
    try:
        raw, _ = _read_regular(path, limit)
        data = _verified(cache, raw, limit)
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        return None  # (missing, not a regular file, too long, not JSON, not signed)
    _used(path)
    return data


def write_record(key, record, *, directory=None) -> None:
    """Store ``record`` (a dict of JSON values) under ``key`` (a digest), signed
    with the user's proof key, atomically, within the cache's bounds; a cache that
    is off, refused or not writable keeps nothing (a warning says why)."""
    if not _is_digest(key):
        raise ValueError(f"a record's key is a sha256 digest, not {key!r}")
    cache = _open_cache(directory, create=True)
    if cache is not None:
        _write(cache, key, signed_record(cache.secret, record))


def _write(cache, key, record) -> None:
    """Write a signed ``record`` under ``key`` into the open ``cache``."""
    target = _path(cache.path, key)
    try:
        fd, tmp = tempfile.mkstemp(prefix=".proof-", suffix=".tmp", dir=cache.path)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(_canonical(record))
            os.replace(tmp, target)
        except BaseException:
            os.unlink(tmp)
            raise
        _evict(cache.path, target)
    except OSError as exc:
        warnings.warn(
            f"the proof cache {cache.path} cannot be written ({exc}); the "
            f"record is not kept",
            ProofCacheWarning,
            stacklevel=4,
        )


def _store(cache, selection, topology, plan) -> Proof:
    report = plan.prove()
    key = plan_key(selection, topology)
    digest, ranks = _digests(plan)
    proof = Proof(key, digest, report, cached=False, plan=plan, rank_digests=ranks)
    if cache is None:
        return proof
    record = signed_record(
        cache.secret,
        {
            "format": FORMAT,
            "key": key,
            "plan": proof.plan_digest,
            "ranks": list(ranks),
            "report": _report_fields(report),
            "report_digest": report_digest(report),
        },
    )
    _write(cache, key, record)
    return proof


def prove(selection, topology, *, directory=None) -> Proof:
    """A proof of the plan ``selection`` builds on ``topology``: the cached one, or a
    new one (the whole plan built, checked and stored).

    Raises
    ------
    PlanError
        The plan cannot be built or fails its check (nothing is stored).
    """
    with _claimed(selection, topology, directory) as (cache, found):
        if found is not None:
            return found
        return _store(cache, selection, topology, _whole(selection, topology))


def _whole(selection, topology):
    """The whole plan ``selection`` builds on ``topology``, marked with its
    arithmetic (unproved)."""
    return selection.with_arithmetic(
        build(selection.op, topology, selection.family, **dict(selection.options))
    )


@contextlib.contextmanager
def claimed(selection, topology, *, directory=None):
    """The cached proof, or the duty to prove it.

    Yields the proof on a hit (possibly after waiting for another process that was
    proving the same plan, see :mod:`wacoll.plans.prooflock`), else None: the body
    must then prove the plan and :func:`store` it, and the claim on it (when there is
    one: a trusted cache, a lock file that is the user's own, and no other process
    gave up on it) is held until the body ends, whether it returns or raises. The
    wait is bounded (``WACOLL_PROOF_WAIT``); when it runs out, or the lock file is
    refused, this yields None without a claim: the body proves the plan here.

    Examples
    --------
    >>> import tempfile
    >>> from wacoll import Topology
    >>> from wacoll.plans import Call, select
    >>> topo = Topology.from_sizes([2, 2])
    >>> sel = select(Call("bcast", count=4, root=0), topo)
    >>> where = tempfile.mkdtemp()
    >>> with claimed(sel, topo, directory=where) as found:
    ...     print(found)
    ...     _ = store(sel, topo, sel.build(topo), directory=where)
    None
    >>> with claimed(sel, topo, directory=where) as found:
    ...     print(found.cached)
    True
    """
    with _claimed(selection, topology, directory) as (_, found):
        yield found


@contextlib.contextmanager
def _claimed(selection, topology, directory):
    """:func:`claimed`, yielding ``(cache, found)``: the open cache (None: off or
    refused) with the proof."""
    cache = _open_cache(directory, create=True)
    found = claim = None
    if cache is not None:
        seen = set()
        found = _lookup(cache, selection, topology, seen)
        if found is None:
            found, claim = await_proof(
                cache.path,
                plan_key(selection, topology),
                lambda: _lookup(cache, selection, topology, seen),
            )
    try:
        yield cache, found
    finally:
        if claim is not None:
            claim.release()


def build_proved(selection, topology, *, directory=None):
    """The whole plan ``selection`` builds, proved: the cached report is taken when
    the plan's digest is the one the cache proved, else the plan is checked (and
    the proof stored).

    Examples
    --------
    >>> import tempfile
    >>> from wacoll import Topology
    >>> from wacoll.plans import Call, select
    >>> topo = Topology.single(3)
    >>> sel = select(Call("bcast", count=2, root=0), topo, family="mpich")
    >>> build_proved(sel, topo, directory=tempfile.mkdtemp()).prove().messages
    2
    """
    plan = _whole(selection, topology)
    cache = _open_cache(directory, create=True)
    found = None if cache is None else _lookup(cache, selection, topology)
    if found is not None and found.plan_digest == plan_digest(plan):
        plan.adopt_proof(found.report)
        return plan
    if found is not None:
        warnings.warn(
            f"the proof cached for this {selection.op} plan is of another "
            f"plan (digest mismatch); proving it again",
            ProofCacheWarning,
            stacklevel=2,
        )
    _store(cache, selection, topology, plan)
    return plan
