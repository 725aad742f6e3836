"""The testbed's self-check: measured one-way latency and rate of every link.

The measuring sockets are opened inside the testbed's namespaces by this process
(``setns`` on the calling thread), so one clock serves sender and receiver: a probe
carries its send time, and the kernel stamps its arrival (``SO_TIMESTAMPNS``), which
gives the one-way latency directly, asymmetric links included. The rate comes from a
packet train: full-size datagrams sent back to back leave a FIFO link spaced by their
serialisation time, so the bytes after the first packet (as the links count them:
UDP payload, or whole IP packets) over the arrival span of the train is the rate.

A figure passes when it is within ``tolerance`` (10 %) of the configured one: the
latency of a probe is its path's latencies plus its serialisation on each queue
(a floor of 0.1 ms absorbs timer noise on near-zero latencies).

Examples
--------
>>> verdict(0.0105, 0.0101, 0.1, floor=1e-4), verdict(0.013, 0.0101, 0.1, floor=1e-4)
(True, False)
"""

from __future__ import annotations

import select
import socket
import statistics
import struct
import time
from dataclasses import dataclass

from wacoll.emulate.netns import entered
from wacoll.emulate.units import format_duration, format_rate
from wacoll.errors import TestbedError

__all__ = ["PairResult", "ProbeReport", "measure", "verdict"]

SO_TIMESTAMPNS = 35
HEADER = struct.Struct("!BHIq")  # kind, pair, sequence, send time (ns, CLOCK_REALTIME)
PROBE_PAYLOAD = 32
UDP_IP_HEADERS = 28
LATENCY_FLOOR = 1e-4


def verdict(
    measured: float, expected: float, tolerance: float, floor: float = 0.0
) -> bool:
    """Whether ``measured`` is within ``tolerance`` (relative) or ``floor`` of ``expected``."""
    return abs(measured - expected) <= max(tolerance * expected, floor)


@dataclass(frozen=True)
class PairResult:
    """Configured and measured figures of one directed endpoint pair."""

    src: str
    dst: str
    src_cluster: int
    dst_cluster: int
    latency: float | None
    latency_expected: float
    bandwidth: float | None
    bandwidth_expected: float
    probes: int
    probes_lost: int
    latency_ok: bool
    bandwidth_ok: bool

    @property
    def ok(self) -> bool:
        return self.latency_ok and self.bandwidth_ok

    def as_dict(self) -> dict:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


@dataclass(frozen=True)
class ProbeReport:
    """The self-check: one :class:`PairResult` per measured pair, and the verdict."""

    pairs: tuple
    tolerance: float

    @property
    def ok(self) -> bool:
        return all(p.ok for p in self.pairs)

    def failures(self) -> list:
        """One sentence per figure outside the tolerance."""
        out = []
        for p in self.pairs:
            if not p.latency_ok:
                got = (
                    "no probe arrived"
                    if p.latency is None
                    else format_duration(p.latency)
                )
                out.append(
                    f"{p.src} -> {p.dst}: one-way latency {got}, configured "
                    f"{format_duration(p.latency_expected)}"
                )
            if not p.bandwidth_ok:
                got = (
                    "no train arrived"
                    if p.bandwidth is None
                    else format_rate(p.bandwidth)
                )
                out.append(
                    f"{p.src} -> {p.dst}: rate {got}, configured "
                    f"{format_rate(p.bandwidth_expected)}"
                )
        return out

    def table(self) -> str:
        """A plain-text table of every pair, configured against measured."""
        # "expected": what the probe should see on the configured link (the latency
        # plus the probe's own serialisation), not the configured latency alone
        rows = [
            ("link", "expected latency", "measured", "expected rate", "measured", "ok")
        ]
        for p in self.pairs:
            rows.append(
                (
                    f"{p.src} -> {p.dst}",
                    format_duration(p.latency_expected),
                    "-" if p.latency is None else format_duration(p.latency),
                    format_rate(p.bandwidth_expected),
                    "-" if p.bandwidth is None else format_rate(p.bandwidth),
                    "yes" if p.ok else "NO",
                )
            )
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines = [
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(r, widths))
            ).rstrip()
            for r in rows
        ]
        lines.append(
            "self-check passed: every figure within "
            f"{self.tolerance:.0%} of its configured value"
            if self.ok
            else f"self-check FAILED: {len(self.failures())} figures off by more "
            f"than {self.tolerance:.0%}"
        )
        return "\n".join(lines)

    def as_dict(self) -> dict:
        return {
            "ok": self.ok,
            "tolerance": self.tolerance,
            "pairs": [p.as_dict() for p in self.pairs],
        }


def _socket_in(ns: str, addr: str) -> socket.socket:
    with entered(ns):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.bind((addr, 0))
        s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        s.setblocking(False)
    except OSError:
        s.close()
        raise
    return s


class _Receivers:
    """Non-blocking receiving sockets, drained into per-pair records."""

    def __init__(self, socks, overhead):
        self.socks = socks
        self.overhead = overhead  # bytes a queue charges beyond the UDP payload
        self.latency = {}  # pair -> list of one-way seconds
        self.train = {}  # pair -> list of (arrival ns, ip bytes)

    def drain(self, until: float) -> None:
        """Receive whatever arrives until ``until`` (``time.monotonic``)."""
        while True:
            timeout = until - time.monotonic()
            ready = select.select(self.socks, (), (), max(0.0, timeout))[0]
            for s in ready:
                self._read(s)
            if timeout <= 0:
                return

    def _read(self, s):
        while True:
            try:
                data, anc, _, _ = s.recvmsg(65536, 64)
            except BlockingIOError:
                return
            arrival = None
            for level, kind, value in anc:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                    sec, nsec = struct.unpack("qq", value[:16])
                    arrival = sec * 1_000_000_000 + nsec
            if arrival is None:
                arrival = time.time_ns()
            kind, pair, _, sent = HEADER.unpack_from(data)
            if kind == 1:
                self.latency.setdefault(pair, []).append((arrival - sent) * 1e-9)
            else:
                self.train.setdefault(pair, []).append(
                    (arrival, len(data) + self.overhead)
                )


def measure(
    layout,
    mtu: int,
    *,
    probes: int = 9,
    tolerance: float = 0.1,
    train_seconds: float = 0.05,
    charge: str = "payload",
) -> ProbeReport:
    """Measure every probe pair of ``layout`` (see the module docstring).

    Parameters
    ----------
    layout : wacoll.emulate.layout.Layout
    mtu : int
        The MTU of the testbed's data devices (train packets fill it).
    probes : int
        Latency probes per pair; the median counts.
    tolerance : float
        Relative tolerance of the verdict.
    train_seconds : float
        About how long each packet train lasts at its configured rate.
    charge : {"payload", "packet"}
        What the links' rates count (see :mod:`wacoll.emulate.relay`).
    """
    pairs = layout.probe_pairs()
    if not pairs:  # one cluster: no emulated link to measure
        return ProbeReport((), tolerance)
    eps = layout.endpoints
    socks, recv, send = [], {}, {}
    try:
        for i in sorted({i for p in pairs for i in p}):
            recv[i] = _socket_in(eps[i].ns, eps[i].data_addr)
            send[i] = _socket_in(eps[i].ns, eps[i].data_addr)
            socks += [recv[i], send[i]]
        overhead = 0 if charge == "payload" else UDP_IP_HEADERS
        rx = _Receivers([recv[i] for i in recv], overhead)
        ports = {i: s.getsockname() for i, s in recv.items()}
        _latency_phase(layout, pairs, send, ports, rx, probes)
        _train_phase(layout, pairs, send, ports, rx, mtu, train_seconds)
    except OSError as exc:
        raise TestbedError(f"self-check: {exc}") from None
    finally:
        for s in socks:
            s.close()
    return ProbeReport(
        tuple(
            _result(layout, k, pair, rx, probes, tolerance)
            for k, pair in enumerate(pairs)
        ),
        tolerance,
    )


def _probe_charge(rx):
    return PROBE_PAYLOAD + rx.overhead


def _latency_phase(layout, pairs, send, ports, rx, probes):
    gap = max(1e-3, 4 * (PROBE_PAYLOAD + UDP_IP_HEADERS) / layout.min_rate)
    pad = b"\0" * (PROBE_PAYLOAD - HEADER.size)
    for seq in range(probes):
        for k, (s, d) in enumerate(pairs):
            send[s].sendto(HEADER.pack(1, k, seq, time.time_ns()) + pad, ports[d])
            rx.drain(time.monotonic() + gap)
    worst = max(layout.expected(s, d, _probe_charge(rx))[0] for s, d in pairs)
    deadline = time.monotonic() + 2 * worst + 0.2
    while time.monotonic() < deadline:
        if sum(len(v) for v in rx.latency.values()) >= probes * len(pairs):
            break
        rx.drain(min(deadline, time.monotonic() + 0.01))


def _train_phase(layout, pairs, send, ports, rx, mtu, train_seconds):
    size = mtu - UDP_IP_HEADERS
    for k, (s, d) in enumerate(pairs):
        latency, rate = layout.expected(s, d, mtu)
        limit = min(layout.queues[q].limit for q, _ in layout.paths[s, d])
        count = int(min(rate * train_seconds / mtu, 0.8 * limit / mtu, 400))
        count = max(count, 8)
        for seq in range(count):
            body = HEADER.pack(2, k, seq, time.time_ns())
            send[s].sendto(body + b"\0" * (size - len(body)), ports[d])
        deadline = time.monotonic() + 2 * (latency + count * mtu / rate) + 0.3
        while time.monotonic() < deadline and len(rx.train.get(k, ())) < count:
            rx.drain(min(deadline, time.monotonic() + 0.01))


def _result(layout, k, pair, rx, probes, tolerance):
    s, d = pair
    eps = layout.endpoints
    lat_expected, rate_expected = layout.expected(s, d, _probe_charge(rx))
    samples = rx.latency.get(k, [])
    latency = statistics.median(samples) if samples else None
    train = sorted(rx.train.get(k, []))
    bandwidth = None
    if len(train) >= 3 and train[-1][0] > train[0][0]:
        bandwidth = sum(n for _, n in train[1:]) / ((train[-1][0] - train[0][0]) * 1e-9)
    return PairResult(
        src=eps[s].ns,
        dst=eps[d].ns,
        src_cluster=eps[s].cluster,
        dst_cluster=eps[d].cluster,
        latency=latency,
        latency_expected=lat_expected,
        bandwidth=bandwidth,
        bandwidth_expected=rate_expected,
        probes=probes,
        probes_lost=probes - len(samples),
        latency_ok=latency is not None
        and verdict(latency, lat_expected, tolerance, LATENCY_FLOOR),
        bandwidth_ok=bandwidth is not None
        and verdict(bandwidth, rate_expected, tolerance),
    )
