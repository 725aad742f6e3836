"""Argument types shared by the ``wacoll`` subcommands."""

from __future__ import annotations

import argparse
import re

__all__ = ["parse_clusters", "parse_option", "parse_duration", "parse_rate"]


def parse_clusters(text: str) -> list:
    """Cluster sizes from ``"4x8"`` (4 clusters of 8) or ``"4,4,8"``.

    Examples
    --------
    >>> parse_clusters("4x8"), parse_clusters("2,3")
    ([8, 8, 8, 8], [2, 3])
    """
    m = re.fullmatch(r"\s*(\d+)\s*x\s*(\d+)\s*", text)
    if m:
        return [int(m.group(2))] * int(m.group(1))
    if re.fullmatch(r"\s*\d+(\s*,\s*\d+)*\s*", text):
        return [int(x) for x in text.split(",")]
    raise argparse.ArgumentTypeError(
        f"cluster sizes look like 4x8 or 4,4,8; got {text!r}"
    )


def parse_option(text: str):
    """A family option ``key=value``; the value is an int, a float, a bool or a string.

    Examples
    --------
    >>> parse_option("n=4"), parse_option("tree=lam"), parse_option("arrival=true")
    (('n', 4), ('tree', 'lam'), ('arrival', True))
    """
    key, sep, value = text.partition("=")
    if not sep or not re.fullmatch(r"([a-z]+\.)?[a-z_][a-z0-9_]*", key):
        raise argparse.ArgumentTypeError(f"options look like key=value; got {text!r}")
    if value.lower() in ("true", "false"):
        return key, value.lower() == "true"
    for kind in (int, float):
        try:
            return key, kind(value)
        except ValueError:
            pass
    return key, value


def _number(text: str):
    try:
        return float(text)
    except ValueError:
        return None


def parse_duration(text: str) -> float:
    """Seconds from ``"10ms"``, ``"250us"``, ``"1.5s"``, or a plain number of seconds.

    Examples
    --------
    >>> parse_duration("10ms"), parse_duration("0.01"), parse_duration("2 us")
    (0.01, 0.01, 2e-06)
    """
    from wacoll.emulate.units import parse_duration as parse
    from wacoll.errors import TestbedError

    value = _number(text)
    if value is not None:
        return value
    try:
        return parse(text)
    except TestbedError as exc:
        raise argparse.ArgumentTypeError(
            f"{exc} (or a plain number of seconds)"
        ) from None


def parse_rate(text: str) -> float:
    """Bytes per second from ``"1MB/s"``, ``"100Mbit/s"``, ``"64KiB/s"``, or a plain
    number of bytes per second.

    Examples
    --------
    >>> parse_rate("1MB/s"), parse_rate("1e6"), parse_rate("100Mbit/s")
    (1000000.0, 1000000.0, 12500000.0)
    """
    from wacoll.emulate.units import parse_rate as parse
    from wacoll.errors import TestbedError

    value = _number(text)
    if value is not None:
        if value <= 0:
            raise argparse.ArgumentTypeError(f"a rate must be > 0; got {text!r}")
        return value
    try:
        return parse(text)
    except TestbedError as exc:
        raise argparse.ArgumentTypeError(
            f"{exc} (or a plain number of bytes per second)"
        ) from None
