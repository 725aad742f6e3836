"""What a run worked out that the next run may reuse: small signed records beside
the proofs.

A communicator's first call of a shape ranks the families it may explore by
building and simulating each one's plan (:func:`wacoll.mpi.learning.explored`):
most of that call's cost, and the same in every run of the same program on the same
network. :func:`remembered` keeps such a result in the proof cache
(:mod:`wacoll.plans.proofs`: same folder, same trust rules, same bounds and
eviction) under the digest of everything it was computed from, so that a later run
reads it instead of working it out again.

A record is ``{"format", "key", "kind", "value", "mac"}``: its key is the SHA-256 of
the canonical JSON of the format, the plan code's digest
(:func:`~wacoll.plans.proofs.code_digest`), the record's ``kind`` and the
``inputs`` the caller names (which must be every input of the computation that the
code digest does not cover, as JSON values); ``mac`` is the user's authentication
code (:func:`~wacoll.plans.proofs.signed_record`). A record that is missing, not
the user's, malformed, of another key, or whose value the caller does not
``accept``, is not used: the value is computed and stored again. Reading and
writing never block, and a cache that is off or refused only means computing.

Ranks that do not share a cache folder may find different records; a value
remembered must therefore be what the computation gives for these inputs, so that a
rank that computes it agrees with one that read it.

Examples
--------
>>> import tempfile
>>> where = tempfile.mkdtemp()
>>> calls = []
>>> def work():
...     calls.append(1)
...     return ["native", "modern"]
>>> remembered("example", {"n": 3}, work, directory=where)
['native', 'modern']
>>> remembered("example", {"n": 3}, work, directory=where), len(calls)
(['native', 'modern'], 1)
>>> remembered("example", {"n": 4}, work, directory=where), len(calls)
(['native', 'modern'], 2)
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from typing import Any

from wacoll.plans import proofs

__all__ = ["memo_key", "recall", "remember", "remembered", "source_stamp"]

#: Bytes beyond which a record is not read.
_MAX_BYTES = 16384
_FIELDS = ["format", "key", "kind", "value"]


def source_stamp(*modules) -> str:
    """A digest of the source files of ``modules`` (their names, sizes and
    modification times, as :func:`~wacoll.plans.proofs.code_digest` digests the
    plan code's): an input for a computation whose code lies outside
    :mod:`wacoll.plans`.

    Examples
    --------
    >>> import wacoll.plans.memo as me
    >>> len(source_stamp(me)), source_stamp(me) == source_stamp(me)
    (64, True)
    """
    h = hashlib.sha256()
    for module in modules:
        info = os.stat(module.__file__)
        h.update(f"{module.__name__} {info.st_size} {info.st_mtime_ns}\0".encode())
    return h.hexdigest()


def memo_key(kind: str, inputs) -> str:
    """The key of a record of ``kind`` computed from ``inputs`` (JSON values) by
    the package's code as it is now.

    Raises
    ------
    TypeError
        ``inputs`` are not JSON values.

    Examples
    --------
    >>> a, b = memo_key("k", {"x": 1}), memo_key("k", {"x": 2})
    >>> len(a), a == b, a == memo_key("k", {"x": 1})
    (64, False, True)
    """
    return proofs.digest_of(
        {
            "format": proofs.FORMAT,
            "code": proofs.code_digest(),
            "kind": kind,
            "inputs": inputs,
        }
    )


def recall(kind: str, inputs, *, directory=None):
    """The value remembered for ``inputs`` (None: none that counts).

    ``directory``: the cache (default :func:`wacoll.plans.proofs.cache_dir`;
    ``False``: none)."""
    key = memo_key(kind, inputs)
    data = proofs.read_record(key, directory=directory, limit=_MAX_BYTES)
    if (
        data is None
        or sorted(data) != _FIELDS
        or data["format"] != proofs.FORMAT
        or data["key"] != key
        or data["kind"] != kind
    ):
        return None
    return data["value"]


def remember(kind: str, inputs, value, *, directory=None) -> None:
    """Store ``value`` (JSON values) for ``inputs``, signed; a cache that is off,
    refused or not writable keeps nothing (a warning says why)."""
    key = memo_key(kind, inputs)
    record = {"format": proofs.FORMAT, "key": key, "kind": kind, "value": value}
    proofs.write_record(key, record, directory=directory)


def remembered(
    kind: str,
    inputs,
    compute: Callable[[], Any],
    *,
    accept: Callable[[Any], bool] = lambda value: True,
    directory=None,
):
    """The value remembered for ``inputs`` if there is one that ``accept`` takes,
    else ``compute()``, remembered for the next run. Inputs that are not JSON
    values are not remembered (``compute()`` each time)."""
    try:
        found = recall(kind, inputs, directory=directory)
    except TypeError:  # (inputs that are not JSON values)
        return compute()
    if found is not None and accept(found):
        return found
    value = compute()
    remember(kind, inputs, value, directory=directory)
    return value
