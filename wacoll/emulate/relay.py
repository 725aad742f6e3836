"""The userspace link emulator: one TUN device per namespace, packets forwarded late.

Kernels without ``netem`` can still delay and pace packets: each namespace routes the
testbed's data network (``10.77.0.0/16``) into a TUN device, and this relay, a separate
process, reads every IPv4 packet from it, looks up the namespace that owns the
destination address, and writes the packet into that namespace's TUN device once the
packet has crossed its *path*: a sequence of queues, each with a rate (serialisation
at that many bytes per second, first in first out) and a one-way latency after it.
A queue holds at most ``limit`` bytes of backlog; packets beyond it are dropped (drop
tail), as a router would. By default a rate counts transport payload bytes (TCP or
UDP data), so that a program sees the configured rate, as the cost models assume;
``"charge": "packet"`` counts whole IP packets instead.

Per directed cluster pair a path is one queue (the pair's link); with a shared uplink
all paths leaving a cluster share its queue; per-node rates add a node's egress and
ingress queues around the wide-area one.

The relay is also the testbed's watchdog: when its time limit passes, when the
*lifeline* pipe from the process that started it reads end-of-file (that process has
exited, crashed or was killed), or on SIGTERM, it deletes the namespaces it was told
to (and the processes in them) before it exits.

Of wacoll it imports only :mod:`wacoll.errors` (for
:class:`~wacoll.errors.RelayStopped`, how a signal ends its loop): run it as
``python .../wacoll/emulate/relay.py CONFIG.json``; it prints ``ready`` (``ready
realtime`` with SCHED_FIFO granted) once every TUN device is open. The configuration
is JSON::

    {"endpoints": [{"ns": "wacoll-tb-c0", "tun": "wctun", "addr": "10.77.0.1"}, ...],
     "queues": [{"rate": 1e6, "limit": 262144}, ...],
     "paths": [[0, 1, [[0, 0.01]]], [1, 0, [[1, 0.01]]]],
     "charge": "payload", "time_limit": 3600, "lifeline": 5, "rt_priority": 10,
     "cleanup": ["wacoll-tb-c0", ...], "cleanup_files": ["/run/wacoll/tb.json"],
     "cleanup_dirs": ["/run/wacoll/tb"]}

On exit it prints ``stats {...}``: packets, bytes and drops per queue.

One Python relay forwards about 180 MB/s of TCP at MTU 1500, 470 MB/s at 9000 and
800 MB/s at 65000 on one core; the testbed picks the MTU from the slowest link.

Examples
--------
>>> q = Queue(rate=1e6, limit=3000)
>>> q.admit(0.0, 1500), q.admit(0.0, 1500), q.admit(0.0, 1500)
(0.0015, 0.003, None)
"""

from __future__ import annotations

import ctypes
import fcntl
import heapq
import itertools
import json
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time

from wacoll.errors import RelayStopped

__all__ = ["Queue", "open_tun", "Relay", "main"]

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000
CLONE_NEWNET = 0x40000000
READ_SIZE = 65536 + 64
BATCH = 64


class Queue:
    """A FIFO link queue: ``rate`` bytes/s, at most ``limit`` bytes of backlog.

    ``free`` is the time its last admitted packet finishes serialisation.
    """

    __slots__ = ("rate", "inv", "limit", "max_wait", "free", "packets", "nbytes", "drops")

    def __init__(self, rate: float, limit: int):
        self.rate = float(rate)
        self.inv = 1.0 / self.rate
        self.limit = int(limit)
        self.max_wait = self.limit * self.inv
        self.free = 0.0
        self.packets = self.nbytes = self.drops = 0

    def admit(self, arrival: float, size: int):
        """The time a packet arriving at ``arrival`` has left the queue, or None (dropped)."""
        start = self.free if self.free > arrival else arrival
        if start - arrival + size * self.inv > self.max_wait:
            self.drops += 1
            return None
        self.free = start + size * self.inv
        self.packets += 1
        self.nbytes += size
        return self.free

    def stats(self) -> dict:
        return {
            "rate": self.rate,
            "packets": self.packets,
            "bytes": self.nbytes,
            "drops": self.drops,
        }


def open_tun(name: str, ns: str | None = None) -> int:
    """Attach to the TUN device ``name`` (in namespace ``ns``); a non-blocking fd."""

    def attach():
        fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            fcntl.ioctl(
                fd, TUNSETIFF, struct.pack("16sH22x", name.encode(), IFF_TUN | IFF_NO_PI)
            )
        except OSError:
            os.close(fd)
            raise
        return fd

    if ns is None:
        return attach()
    libc = ctypes.CDLL(None, use_errno=True)
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(f"/run/netns/{ns}", os.O_RDONLY)
    try:
        if libc.setns(target, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns {ns}")
        try:
            return attach()
        finally:
            libc.setns(own, CLONE_NEWNET)
    finally:
        os.close(target)
        os.close(own)


class Relay:
    """The event loop: TUN fds in, a timer heap of packets in flight, TUN fds out.

    Parameters
    ----------
    fds : list of int
        One TUN fd per endpoint.
    addrs : list of str
        The IPv4 address of each endpoint (packets to it go to its fd).
    queues : list of Queue
    paths : dict of (int, int) to list of (int, float)
        For a directed endpoint pair, its queues in order, each with the latency
        after it. Pairs without a path drop their packets.
    charge : {"payload", "packet"}
        What a queue's rate counts: the transport payload (TCP or UDP data, so that
        an application sees the configured rate; pure ACKs cost no time), or whole
        IP packets, headers included, as a physical link does.
    """

    def __init__(self, fds, addrs, queues, paths, charge="payload"):
        if charge not in ("payload", "packet"):
            raise ValueError(f"charge must be 'payload' or 'packet', not {charge!r}")
        self.payload = charge == "payload"
        self.fds = list(fds)
        self.route = {socket.inet_aton(a): j for j, a in enumerate(addrs)}
        self.queues = list(queues)
        n = len(self.fds)
        self.paths = [[None] * n for _ in range(n)]
        for (i, j), path in paths.items():
            self.paths[i][j] = tuple((self.queues[q], float(lat)) for q, lat in path)
        self.heap = []
        self.unroutable = 0
        self.write_errors = 0

    def run(self, deadline: float | None = None, watch=()) -> None:
        """Forward packets until ``deadline`` (a ``time.monotonic`` value), a signal, or
        until one of the ``watch`` fds (the read end of a lifeline pipe) is readable."""
        heap, push, pop = self.heap, heapq.heappush, heapq.heappop
        clock, read, write = time.monotonic, os.read, os.write
        route, paths, fds, payload = self.route, self.paths, self.fds, self.payload
        index = {fd: i for i, fd in enumerate(fds)}
        waiting = fds + list(watch)
        seq = itertools.count()
        while True:
            now = clock()
            while heap and heap[0][0] <= now:
                t, _, stage, path, j, pkt, size = pop(heap)
                if stage == len(path):
                    try:
                        write(fds[j], pkt)
                    except OSError:
                        self.write_errors += 1
                    continue
                queue, lat = path[stage]
                done = queue.admit(t, size)
                if done is not None:
                    push(heap, (done + lat, next(seq), stage + 1, path, j, pkt, size))
            if deadline is not None and now >= deadline:
                return
            if heap:
                timeout = heap[0][0] - now
            elif deadline is not None:
                timeout = deadline - now
            else:
                timeout = None
            ready = select.select(waiting, (), (), timeout)[0]
            for fd in ready:
                if fd not in index:
                    return
                row = paths[index[fd]]
                for _ in range(BATCH):
                    try:
                        pkt = read(fd, READ_SIZE)
                    except BlockingIOError:
                        break
                    ipv4 = len(pkt) >= 20 and pkt[0] >> 4 == 4
                    j = route.get(pkt[16:20]) if ipv4 else None
                    path = None if j is None else row[j]
                    if path is None:
                        self.unroutable += 1
                        continue
                    size = len(pkt)
                    if payload:  # strip the IP header, and the TCP or UDP one
                        ihl = (pkt[0] & 15) << 2
                        proto = pkt[9]
                        if proto == 6 and size > ihl + 12:
                            size -= ihl + ((pkt[ihl + 12] >> 4) << 2)
                        elif proto == 17:
                            size -= ihl + 8
                        else:
                            size -= ihl
                        if size < 0:
                            size = 0
                    queue, lat = path[0]
                    done = queue.admit(clock(), size)
                    if done is not None:
                        push(heap, (done + lat, next(seq), 1, path, j, pkt, size))

    def stats(self) -> dict:
        return {
            "queues": [q.stats() for q in self.queues],
            "unroutable": self.unroutable,
            "write_errors": self.write_errors,
            "in_flight": len(self.heap),
        }


# ------------------------------------------------------------------ process
def _set_realtime(priority: int) -> bool:
    if priority <= 0 or not hasattr(os, "sched_setscheduler"):
        return False
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except (PermissionError, OSError):
        return False
    return True


def _delete_netns(ns: str) -> None:
    """Kill the processes in ``ns``, then delete it (the relay imports no wacoll code)."""
    if not os.path.exists(f"/run/netns/{ns}"):
        return
    pids = subprocess.run(
        ["ip", "netns", "pids", ns], capture_output=True, text=True, timeout=10
    ).stdout.split()
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(int(pid), sig)
            except (ProcessLookupError, ValueError):
                pass
        deadline = time.monotonic() + 1.0
        while pids and time.monotonic() < deadline:
            pids = [p for p in pids if os.path.exists(f"/proc/{p}") and _state(p) != "Z"]
            time.sleep(0.02)
    subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=10)


def _state(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "Z"


def _cleanup(config: dict) -> None:
    if hasattr(os, "sched_setscheduler"):
        try:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        except OSError:
            pass
    for ns in config.get("cleanup", []):
        try:
            _delete_netns(ns)
        except (OSError, subprocess.SubprocessError) as exc:  # remove what can be removed
            print(f"relay: cleanup of {ns}: {exc}", file=sys.stderr)
    for path in config.get("cleanup_files", []):
        try:
            os.unlink(path)
        except OSError:
            pass
    for path in config.get("cleanup_dirs", []):
        shutil.rmtree(path, ignore_errors=True)


def main(argv=None) -> int:
    """Run the relay described by the JSON file ``argv[0]``."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: relay.py CONFIG.json", file=sys.stderr)
        return 2
    with open(argv[0]) as f:
        config = json.load(f)

    # A signal stops the relay once: one arriving while it already winds down (after
    # its lifeline closed, say) must not cut short the stats line its owner reads.
    running = [True]

    def stop(signum, frame):
        if running[0]:
            running[0] = False
            raise RelayStopped

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop)
    relay, fds = None, []
    start = time.monotonic()
    try:
        for ep in config.get("endpoints", []):
            fds.append(open_tun(ep["tun"], ep["ns"]))
        queues = [Queue(q["rate"], q["limit"]) for q in config.get("queues", [])]
        paths = {
            (int(i), int(j)): [(int(q), float(lat)) for q, lat in path]
            for i, j, path in config.get("paths", [])
        }
        relay = Relay(
            fds,
            [ep["addr"] for ep in config.get("endpoints", [])],
            queues,
            paths,
            config.get("charge", "payload"),
        )
        realtime = _set_realtime(int(config.get("rt_priority", 0)))
        print("ready realtime" if realtime else "ready", flush=True)
        limit = config.get("time_limit")
        watch = [int(config["lifeline"])] if config.get("lifeline") is not None else []
        relay.run(None if not limit else start + float(limit), watch)
    except RelayStopped:
        pass
    finally:
        running[0] = False
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        for fd in fds:
            os.close(fd)
        if relay is not None:
            try:
                print("stats " + json.dumps(relay.stats()), flush=True)
            except (OSError, ValueError):
                pass
        _cleanup(config)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
