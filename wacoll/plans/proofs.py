"""A disk cache of plan proofs, so that a run need not prove what an earlier run proved.

Proving a plan (:func:`wacoll.plans.check_plan`) means building every rank's program
and following every block; at thousands of ranks that costs seconds, and every rank
of an MPI run would pay it before its first call. A plan is a deterministic function
of what :func:`wacoll.plans.select` chose (operation, family, builder options: sizes,
counts, root, level, ...), the topology and the code that builds plans. This module
keys a proof by the digest of exactly those (:func:`plan_key`; the code is the source
of :mod:`wacoll.plans`, :mod:`wacoll.trees` and :mod:`wacoll.topology`, and the
package version) and stores, per key, one JSON file holding the digest of the proved
plan (:func:`plan_digest`), its :class:`~wacoll.plans.check.CheckReport` and that
report's digest.

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
``XDG_CACHE_HOME``); ``off`` (or ``0``, ``no``, ``false``), no cache: every process
proves the plans it runs, as without this module; any other value, that directory.
Files are data: each is parsed as JSON, checked field by field and against its key
and its own report digest; a file that fails is ignored with a
:class:`~wacoll.errors.ProofCacheWarning` (and overwritten by the next proof), never
trusted. Writes go to a temporary file renamed into place, so concurrent ranks that
store the same proof do not corrupt it. A proof is one file per call shape (key),
under 1 KiB plus 67 bytes per rank (the ranks' program digests); nothing evicts them:
deleting the directory clears the cache.

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
>>> build_proved(sel, topo, directory=where).checked
True
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

from wacoll.errors import ProofCacheWarning
from wacoll.plans.check import CheckReport
from wacoll.plans.encoded import EncodedPrograms, program_digest, program_digests
from wacoll.plans.families import build
from wacoll.plans.prooflock import await_proof

__all__ = ["ENV", "Proof", "cache_dir", "plan_key", "plan_digest", "program_digest",
           "report_digest",
           "lookup", "claimed", "store", "prove", "build_proved"]

#: The environment variable that places the cache or turns it off.
ENV = "WACOLL_PROOF_CACHE"
_OFF = ("off", "0", "no", "false")
_FORMAT = 1
#: The package's name, the cache's directory under the user's cache directory.
_PACKAGE = __name__.split(".")[0]
#: Bytes beyond which a cache file is not read: a proof is under 1 KiB plus 67 bytes
#: (a digest) per rank.
_MAX_BYTES = 65536
_PER_RANK_BYTES = 80


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
    value = environ.get(ENV, "").strip()
    if value.lower() in _OFF:
        return None
    if value:
        return Path(value)
    base = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"),
                                                          ".cache")
    return Path(base) / _PACKAGE / "proofs"


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
    the checker and its Cython sources included), :mod:`wacoll.trees`, :mod:`wacoll.topology` and the
    package's ``__init__`` (its version). A changed builder or checker changes every
    key."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    plans = root.joinpath("plans")
    files = sorted([*plans.rglob("*.py"), *plans.rglob("*.pyx"), *plans.rglob("*.pxd"),
                    *root.joinpath("trees").rglob("*.py"), root / "topology.py",
                    root / "__init__.py"])
    for path in files:
        h.update(str(path.relative_to(root)).encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
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
    return hashlib.sha256(_canonical({
        "format": _FORMAT, "code": code_digest(), "op": selection.op,
        "family": selection.family, "options": _jsonable(selection.options),
        "arithmetic": selection.arithmetic, "topology": _jsonable(topology.to_dict()),
    })).hexdigest()


def _digests(plan):
    """The plan's digest and its ranks' program digests: the plan digest covers the
    plan's header (layout, clusters, names) and every rank's program digest."""
    programs = plan.programs
    ranks = program_digests(programs) if isinstance(programs, EncodedPrograms) else \
        [program_digest(p) for p in programs]
    header = {"op": plan.op, "size": plan.size, "root": plan.root,
              "counts": list(plan.counts), "clusters": list(plan.clusters),
              "level": plan.level, "itemsize": plan.itemsize, "family": plan.family,
              "algorithm": plan.algorithm, "params": _jsonable(plan.params)}
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
    """The digest of a :class:`~wacoll.plans.check.CheckReport`."""
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
    report: CheckReport
    cached: bool
    plan: object = None
    rank_digests: tuple = ()


def _report(fields) -> CheckReport:
    names = [f.name for f in dataclasses.fields(CheckReport)]
    if not isinstance(fields, dict) or sorted(fields) != sorted(names):
        raise ValueError("the report's fields are not a CheckReport's")
    types = {"op": str, "messages": int, "bytes": int, "wide_area_messages": int,
             "wide_area_bytes": int, "max_wide_area_hops": int, "single_latency": bool,
             "no_repeated_data": bool, "repeated": list, "steps": int, "max_sends": int}
    for name, kind in types.items():
        value = fields[name]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ValueError(f"report field {name!r} is not a {kind.__name__}")
    if fields["level"] is not None and not isinstance(fields["level"], str):
        raise ValueError("report field 'level' is not a string")
    repeated = fields["repeated"]
    if not all(isinstance(r, list) and all(isinstance(x, int) and not isinstance(x, bool)
                                           for x in r) for r in repeated):
        raise ValueError("report field 'repeated' is not a list of integer tuples")
    return CheckReport(**{**fields, "repeated": tuple(tuple(r) for r in repeated)})


def _is_digest(value) -> bool:
    return isinstance(value, str) and len(value) == 64 and \
        all(c in "0123456789abcdef" for c in value)


def _path(directory, key) -> Path:
    return Path(directory) / f"{key}.json"


def _default(directory):
    return cache_dir() if directory is None else (None if directory is False
                                                   else Path(directory))


def lookup(selection, topology, *, directory=None) -> Proof | None:
    """The cached proof of the plan ``selection`` builds on ``topology``, or None.

    ``directory``: the cache (default :func:`cache_dir`; ``False``: none). A file
    that is not a valid proof of this key is ignored with a
    :class:`~wacoll.errors.ProofCacheWarning`.
    """
    directory = _default(directory)
    if directory is None:
        return None
    key = plan_key(selection, topology)
    path = _path(directory, key)
    limit = _MAX_BYTES + _PER_RANK_BYTES * topology.size
    try:
        with open(path, "rb") as fh:
            raw = fh.read(limit + 1)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        warnings.warn(f"proof cache file {path} cannot be read ({exc}); ignored",
                      ProofCacheWarning, stacklevel=2)
        return None
    try:
        if len(raw) > limit:
            raise ValueError(f"longer than {limit} bytes")
        data = json.loads(raw.decode("utf-8"))
        if not isinstance(data, dict) or sorted(data) != ["format", "key", "plan",
                                                           "ranks", "report",
                                                           "report_digest"]:
            raise ValueError("not a proof record")
        if data["format"] != _FORMAT or data["key"] != key:
            raise ValueError("a record of another format or key")
        digest, ranks = data["plan"], data["ranks"]
        if not _is_digest(digest):
            raise ValueError("the plan digest is not a sha256 digest")
        if not (isinstance(ranks, list) and len(ranks) == topology.size and
                all(_is_digest(d) for d in ranks)):
            raise ValueError("the rank digests are not one sha256 digest per rank")
        report = _report(data["report"])
        if report_digest(report) != data["report_digest"]:
            raise ValueError("the report does not match its digest")
        if report.op != selection.op:
            raise ValueError("the report is of another operation")
    except (ValueError, UnicodeDecodeError, TypeError) as exc:
        warnings.warn(f"proof cache file {path} is not a valid proof ({exc}); ignored",
                      ProofCacheWarning, stacklevel=2)
        return None
    return Proof(key, digest, report, cached=True, rank_digests=tuple(ranks))


def store(selection, topology, plan, *, directory=None) -> Proof:
    """Prove ``plan`` (the one ``selection`` builds on ``topology``) if it is not yet,
    and write its proof to the cache (when there is one); return the proof."""
    report = plan.check()
    key = plan_key(selection, topology)
    digest, ranks = _digests(plan)
    proof = Proof(key, digest, report, cached=False, plan=plan, rank_digests=ranks)
    directory = _default(directory)
    if directory is None:
        return proof
    record = {"format": _FORMAT, "key": key, "plan": proof.plan_digest,
              "ranks": list(ranks),
              "report": _report_fields(report), "report_digest": report_digest(report)}
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".proof-", suffix=".tmp", dir=directory)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(_canonical(record))
            os.replace(tmp, _path(directory, key))
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError as exc:
        warnings.warn(f"the proof cache {directory} cannot be written ({exc}); the "
                      f"proof is not kept", ProofCacheWarning, stacklevel=2)
    return proof


def prove(selection, topology, *, directory=None) -> Proof:
    """A proof of the plan ``selection`` builds on ``topology``: the cached one, or a
    new one (the whole plan built, checked and stored).

    Raises
    ------
    PlanError
        The plan cannot be built or fails its check (nothing is stored).
    """
    with claimed(selection, topology, directory=directory) as found:
        if found is not None:
            return found
        return store(selection, topology, _whole(selection, topology),
                     directory=directory)


def _whole(selection, topology):
    """The whole plan ``selection`` builds on ``topology``, marked with its
    arithmetic (unproved)."""
    return selection.with_arithmetic(build(selection.op, topology, selection.family,
                                           **dict(selection.options)))


@contextlib.contextmanager
def claimed(selection, topology, *, directory=None):
    """The cached proof, or the duty to prove it.

    Yields the proof on a hit (possibly after waiting for another process that was
    proving the same plan, see :mod:`wacoll.plans.prooflock`), else None: the body
    must then prove the plan and :func:`store` it, and the claim on it (when there is
    one: a cache, and no other process gave up on it) is held until the body ends,
    whether it returns or raises.

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
    found = lookup(selection, topology, directory=directory)
    directory = _default(directory)
    claim = None
    if found is None and directory is not None:
        found, claim = await_proof(
            directory, plan_key(selection, topology),
            lambda: lookup(selection, topology, directory=directory))
    try:
        yield found
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
    >>> build_proved(sel, topo, directory=tempfile.mkdtemp()).check().messages
    2
    """
    plan = _whole(selection, topology)
    found = lookup(selection, topology, directory=directory)
    if found is not None and found.plan_digest == plan_digest(plan):
        plan._cache["report"] = found.report
        return plan
    if found is not None:
        warnings.warn(f"the proof cached for this {selection.op} plan is of another "
                      f"plan (digest mismatch); proving it again", ProofCacheWarning,
                      stacklevel=2)
    store(selection, topology, plan, directory=directory)
    return plan
