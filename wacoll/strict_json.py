"""JSON read as data, strictly: no repeated keys, no NaN or Infinity.

Script files and topology files share this reader; each names its own error class.
Files of data wacoll writes itself (learned choices, fitted call costs) are read
with :func:`read_strict`.

Examples
--------
>>> from wacoll.errors import TopologyError
>>> loads_strict('{"a": 1}', TopologyError)
{'a': 1}
>>> loads_strict('{"a": 1, "a": 2}', TopologyError)
Traceback (most recent call last):
...
wacoll.errors.TopologyError: the key 'a' is given twice
>>> loads_strict('[NaN]', TopologyError)
Traceback (most recent call last):
...
wacoll.errors.TopologyError: NaN is not a number JSON allows
"""

from __future__ import annotations

import json

from wacoll.datafile import read_text

__all__ = ["loads_strict", "read_strict"]


def loads_strict(text: str, error: type):
    """Parse ``text``; raise ``error`` for a repeated key or a non-finite constant.

    Other faults (``json.JSONDecodeError``, ``RecursionError``, an integer too long to
    convert) propagate for the caller to locate and name.
    """

    def no_duplicates(pairs):
        out = {}
        for key, value in pairs:
            if key in out:
                raise error(f"the key {key!r} is given twice")
            out[key] = value
        return out

    def no_constant(name):
        raise error(f"{name} is not a number JSON allows")

    return json.loads(text, object_pairs_hook=no_duplicates, parse_constant=no_constant)


def read_strict(path, error: type, what: str, max_bytes: int):
    """The data of the JSON file ``path``, read as :func:`loads_strict` reads; raise
    ``error`` naming ``what`` and the file where it cannot be read as text of at most
    ``max_bytes`` bytes (:func:`wacoll.datafile.read_text`: never blocking) or is not
    JSON.

    Examples
    --------
    >>> from wacoll.errors import TuningError
    >>> read_strict("/nonexistent.json", TuningError, "the tuning file", 100)
    Traceback (most recent call last):
    ...
    wacoll.errors.TuningError: the tuning file /nonexistent.json: no such file
    """
    text = read_text(path, error, what, max_bytes)
    try:
        return loads_strict(text, error)
    except (ValueError, RecursionError) as exc:
        raise error(f"{what} {path} is not JSON ({exc})") from None
