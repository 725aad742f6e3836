"""User-named files read as data: never blocking, never read past a limit.

Topology files, plan scripts, tuning files and call-cost files are named by the user
(an argument or a ``WACOLL_*`` variable), so any path may arrive: a FIFO that nobody
writes (opening it for reading would block forever), a device that never ends
(``/dev/urandom``), a huge file, bytes that are not text. :func:`read_text` refuses
all of them with the caller's error class before it blocks or reads more than its
limit: the file is opened without blocking, checked to be a regular file on the
opened descriptor (no race with a rename), read to at most ``max_bytes + 1`` bytes,
and decoded as UTF-8.

Examples
--------
>>> import os, tempfile
>>> from wacoll.errors import TuningError
>>> where = tempfile.mkdtemp()
>>> path = os.path.join(where, "t.json")
>>> _ = open(path, "wb").write(b'\\xff\\xfe{}')
>>> read_text(path, TuningError, "the tuning file", 100)
Traceback (most recent call last):
...
wacoll.errors.TuningError: the tuning file .../t.json is not UTF-8 text (invalid start byte at byte 0)
>>> fifo = os.path.join(where, "fifo"); os.mkfifo(fifo)
>>> read_text(fifo, TuningError, "the tuning file", 100)
Traceback (most recent call last):
...
wacoll.errors.TuningError: the tuning file .../fifo is not a regular file (a FIFO)
>>> read_text("/dev/urandom", TuningError, "the tuning file", 100)
Traceback (most recent call last):
...
wacoll.errors.TuningError: the tuning file /dev/urandom is not a regular file (a character device)
"""

from __future__ import annotations

import os
import stat

__all__ = ["read_text", "read_bytes"]

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def read_bytes(path, error: type, what: str, max_bytes: int) -> bytes:
    """The bytes of the regular file ``path``, at most ``max_bytes`` of them.

    Raises ``error`` with a message that starts with ``what`` and the path: no such
    file, not a regular file (which kind it is), unreadable (the system's reason), or
    larger than ``max_bytes`` (the limit named). Never blocks: the file is opened
    with ``O_NONBLOCK`` and refused unless it is a regular file.
    """
    where = f"{what} {os.fspath(path)}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise error(f"{where}: no such file") from None
    except (OSError, ValueError, TypeError) as exc:
        raise error(
            f"{where} cannot be read ({getattr(exc, 'strerror', None) or exc})"
        ) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "not a file")
            raise error(f"{where} is not a regular file ({kind})")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            raw = fh.read(max_bytes + 1)
    except OSError as exc:
        raise error(f"{where} cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if len(raw) > max_bytes:
        raise error(f"{where} is larger than the limit of {max_bytes} bytes")
    return raw


def read_text(path, error: type, what: str, max_bytes: int) -> str:
    """The UTF-8 text of the regular file ``path`` (see :func:`read_bytes`); raises
    ``error`` naming the first byte that is not UTF-8."""
    raw = read_bytes(path, error, what, max_bytes)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(
            f"{what} {os.fspath(path)} is not UTF-8 text ({exc.reason} at byte "
            f"{exc.start})"
        ) from None
