"""Strict parsing of durations and rates: ``10ms``, ``250us``, ``1MB/s``, ``1Gbit/s``.

Units are required and case-sensitive where case matters (``B`` is a byte, ``bit`` a
bit); decimal prefixes are powers of 1000, binary ones (``KiB/s``, ``MiB/s``,
``GiB/s``) powers of 1024.

Examples
--------
>>> parse_duration("10ms"), parse_duration("250 us"), parse_duration("0.5s")
(0.01, 0.00025, 0.5)
>>> parse_rate("1MB/s"), parse_rate("100Mbit/s"), parse_rate("64KiB/s")
(1000000.0, 12500000.0, 65536.0)
>>> parse_rate("1mb/s")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
wacoll.errors.TestbedError: unknown rate unit 'mb/s' in '1mb/s'; use B/s, KB/s, ...
>>> format_duration(0.0105), format_rate(1.25e8)
('10.5 ms', '125 MB/s')
"""

from __future__ import annotations

import math
import re

from wacoll.errors import TestbedError

__all__ = ["parse_duration", "parse_rate", "format_duration", "format_rate"]

DURATIONS = {
    "h": 3600.0,
    "min": 60.0,
    "s": 1.0,
    "ms": 1e-3,
    "us": 1e-6,
    "µs": 1e-6,
    "ns": 1e-9,
}
RATES = {
    "B/s": 1.0,
    "KB/s": 1e3,
    "MB/s": 1e6,
    "GB/s": 1e9,
    "KiB/s": 1024.0,
    "MiB/s": 1024.0**2,
    "GiB/s": 1024.0**3,
    "bit/s": 1 / 8,
    "kbit/s": 1e3 / 8,
    "Mbit/s": 1e6 / 8,
    "Gbit/s": 1e9 / 8,
}
_NUMBER = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|\.[0-9]+)\s*(\S*)\s*")


def _split(text: str, what: str):
    if not isinstance(text, str):
        raise TestbedError(f"a {what} is text like 10ms or 1MB/s; got {text!r}")
    m = _NUMBER.fullmatch(text)
    if not m:
        raise TestbedError(f"cannot read {what} {text!r}")
    value = float(m.group(1))
    if not math.isfinite(value):
        raise TestbedError(f"{what} {text!r} is not finite")
    return value, m.group(2)


def parse_duration(text: str) -> float:
    """Seconds from ``"10ms"``, ``"250us"``, ``"1.5s"``, ``"2h"`` (a unit is required)."""
    value, unit = _split(text, "duration")
    if unit not in DURATIONS:
        raise TestbedError(
            f"unknown duration unit {unit!r} in {text!r}; use h, min, s, ms, us or ns"
        )
    return value * DURATIONS[unit]


def parse_rate(text: str) -> float:
    """Bytes per second from ``"1MB/s"``, ``"100Mbit/s"``, ``"64KiB/s"``; must be > 0."""
    value, unit = _split(text, "rate")
    if unit not in RATES:
        raise TestbedError(
            f"unknown rate unit {unit!r} in {text!r}; use " + ", ".join(RATES)
        )
    if value <= 0:
        raise TestbedError(f"a rate must be > 0; got {text!r}")
    return value * RATES[unit]


def format_duration(seconds: float) -> str:
    """A readable duration: ``"10.5 ms"``."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale or unit == "us":
            return f"{seconds / scale:.4g} {unit}"
    raise AssertionError("unreachable: the last unit always matches")


def format_rate(rate: float) -> str:
    """A readable rate in decimal bytes: ``"125 MB/s"``."""
    for unit, scale in (("GB/s", 1e9), ("MB/s", 1e6), ("KB/s", 1e3), ("B/s", 1.0)):
        if rate >= scale or unit == "B/s":
            return f"{rate / scale:.4g} {unit}"
    raise AssertionError("unreachable: the last unit always matches")
