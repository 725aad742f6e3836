"""Network namespaces, devices and addresses of an emulated testbed.

Everything here is made by this module, named with the ``wacoll-`` prefix, and lives
inside namespaces it creates: the root namespace's interfaces and routes are never
touched. A testbed named ``tb`` with two clusters is laid out as::

    wacoll-tb-ctl   bridge wcbr 10.78.0.1/16 (mpiexec runs here; hydra's control net)
    wacoll-tb-c0    lo, TUN wctun 10.77.0.1 (data), veth wcctl 10.78.0.2 (control)
    wacoll-tb-c1    lo, TUN wctun 10.77.1.1 (data), veth wcctl 10.78.0.3 (control)

Data between namespaces goes only through the TUN devices (routed ``10.77.0.0/16``),
where the relay (or the kernel's netem) applies the links' delay and rate. The control
bridge's ports are isolated, so cluster namespaces reach ``wacoll-tb-ctl`` over it but
never each other.

Examples
--------
>>> valid_name("tb"), netns_name("tb", 3), data_address(1, 0)
('tb', 'wacoll-tb-c3', '10.77.1.1')
>>> control_address(0)
'10.78.0.2'
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

from wacoll.errors import TestbedError, TestbedUnavailable

__all__ = [
    "TestbedError",
    "TestbedUnavailable",
    "PREFIX",
    "TUN_NAME",
    "CTL_BRIDGE",
    "CTL_IFACE",
    "valid_name",
    "netns_name",
    "ctl_netns_name",
    "wan_netns_name",
    "data_address",
    "control_address",
    "unavailable_reason",
    "ip",
    "list_netns",
    "netns_pids",
    "kill_netns_pids",
    "delete_netns",
    "entered",
    "netem_available",
    "ip_batch",
    "disable_ipv6",
]

PREFIX = "wacoll-"
TUN_NAME = "wctun"
CTL_BRIDGE = "wcbr"
CTL_IFACE = "wcctl"
CTL_PORT = "wcp{}"
DATA_NET = "10.77.0.0/16"
CTL_NET_PREFIX = 16
NETNS_DIR = Path("/run/netns")
COMMAND_TIMEOUT = 20.0
CLONE_NEWNET = 0x40000000


def valid_name(name: str) -> str:
    """Check a testbed name: 1-16 lower-case letters, digits or ``_``.

    Examples
    --------
    >>> valid_name("west_1")
    'west_1'
    >>> valid_name("a-b")
    Traceback (most recent call last):
    ...
    wacoll.errors.TestbedError: a testbed name is 1-16 of a-z, 0-9 and _; got 'a-b'
    """
    if not isinstance(name, str) or not re.fullmatch(r"[a-z0-9_]{1,16}", name):
        raise TestbedError(f"a testbed name is 1-16 of a-z, 0-9 and _; got {name!r}")
    return name


def netns_name(name: str, cluster: int, node: int | None = None) -> str:
    """The namespace of a cluster (``wacoll-NAME-cC``) or a node (``wacoll-NAME-cCnN``)."""
    return f"{PREFIX}{name}-c{cluster}" + ("" if node is None else f"n{node}")


def ctl_netns_name(name: str) -> str:
    """The control namespace, where ``mpiexec`` runs and the control bridge sits."""
    return f"{PREFIX}{name}-ctl"


def wan_netns_name(name: str) -> str:
    """The router namespace of the netem backend."""
    return f"{PREFIX}{name}-wan"


def data_address(cluster: int, node: int = 0) -> str:
    """The data address of a cluster's (or node's) TUN device: ``10.77.C.N+1``."""
    if not (0 <= cluster < 256 and 0 <= node < 254):
        raise TestbedError(
            f"at most 256 clusters of 254 nodes; got cluster {cluster}, node {node}"
        )
    return f"10.77.{cluster}.{node + 1}"


def control_address(index: int) -> str:
    """The control address of the ``index``-th namespace (the bridge has ``.0.1``)."""
    k = index + 2
    if k >= 65535:
        raise TestbedError("too many namespaces for the control network")
    return f"10.78.{k >> 8}.{k & 255}"


# ------------------------------------------------------------------ preconditions
def unavailable_reason() -> str | None:
    """Why no testbed can run here, or None when one can.

    Examples
    --------
    >>> reason = unavailable_reason()
    >>> reason is None or isinstance(reason, str)
    True
    """
    if os.name != "posix" or not Path("/proc/self/ns/net").exists():
        return "network namespaces need Linux"
    if os.geteuid() != 0:
        return "the testbed needs root (network namespaces, TUN devices)"
    if not Path("/dev/net/tun").exists():
        return "there is no /dev/net/tun (TUN devices are not available)"
    if shutil.which("ip") is None:
        return "the 'ip' command (iproute2) is not installed"
    try:
        fd = os.open("/dev/net/tun", os.O_RDWR)
    except OSError as exc:
        return f"/dev/net/tun cannot be opened: {exc.strerror}"
    os.close(fd)
    if _libc() is None or not hasattr(_libc(), "setns"):
        return "the C library has no setns()"
    return None


# ---------------------------------------------------------------------- commands
def ip(
    *args,
    ns: str | None = None,
    check: bool = True,
    input: str | None = None,
    timeout: float = COMMAND_TIMEOUT,
) -> subprocess.CompletedProcess:
    """Run ``ip [-n NS] ARGS``; raise :class:`TestbedError` with its message on failure."""
    argv = ["ip"] + (["-n", ns] if ns else []) + [str(a) for a in args]
    return run(argv, check=check, input=input, timeout=timeout)


def run(
    argv, *, check=True, input=None, timeout=COMMAND_TIMEOUT
) -> subprocess.CompletedProcess:
    """Run a short command with a time limit; raise :class:`TestbedError` on failure."""
    try:
        proc = subprocess.run(
            argv, input=input, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        raise TestbedError(f"{' '.join(argv)} took more than {timeout:g} s") from None
    except OSError as exc:
        raise TestbedError(f"cannot run {argv[0]}: {exc.strerror}") from None
    if check and proc.returncode != 0:
        msg = (proc.stderr or proc.stdout).strip().splitlines()
        raise TestbedError(f"{' '.join(argv)}: {msg[-1] if msg else 'failed'}")
    return proc


def list_netns(prefix: str = PREFIX) -> list:
    """Names of the network namespaces starting with ``prefix``, sorted."""
    try:
        names = os.listdir(NETNS_DIR)
    except FileNotFoundError:
        return []
    return sorted(n for n in names if n.startswith(prefix))


def netns_pids(ns: str) -> list:
    """Processes running in namespace ``ns`` (``ip netns pids``)."""
    proc = ip("netns", "pids", ns, check=False)
    return [int(p) for p in proc.stdout.split() if p.isdigit()]


def kill_netns_pids(ns: str, grace: float = 1.0) -> None:
    """Stop every process left in ``ns``: SIGTERM, then SIGKILL after ``grace``."""
    pids = netns_pids(ns)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace
        while pids and time.monotonic() < deadline:
            pids = [p for p in pids if _alive(p)]
            if pids:
                time.sleep(0.02)
        if not pids:
            return


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError, ProcessLookupError):
        return False


def delete_netns(ns: str) -> None:
    """Kill what runs in ``ns`` and delete it; a namespace that is gone is fine."""
    if not (NETNS_DIR / ns).exists():
        return
    kill_netns_pids(ns)
    proc = ip("netns", "del", ns, check=False)
    if proc.returncode != 0 and (NETNS_DIR / ns).exists():
        raise TestbedError(f"cannot delete namespace {ns}: {proc.stderr.strip()}")


# ---------------------------------------------------------------------- setns
_LIBC: list[ctypes.CDLL | None] = []


def _libc():
    if not _LIBC:
        try:
            _LIBC.append(
                ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            )
        except OSError:
            _LIBC.append(None)
    return _LIBC[0]


def _setns(fd: int) -> None:
    if _libc().setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise TestbedError(f"setns: {os.strerror(err)}")


@contextlib.contextmanager
def entered(ns: str):
    """Run the calling thread in network namespace ``ns`` for the ``with`` body.

    Sockets and TUN devices opened inside stay in ``ns`` after the body ends.
    """
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        try:
            target = os.open(NETNS_DIR / ns, os.O_RDONLY)
        except FileNotFoundError:
            raise TestbedError(f"namespace {ns} does not exist") from None
        try:
            _setns(target)
        finally:
            os.close(target)
        try:
            yield
        finally:
            _setns(own)
    finally:
        os.close(own)


# ---------------------------------------------------------------------- netem
def netem_available() -> bool:
    """Whether the kernel has the netem qdisc (probed in a scratch namespace)."""
    probe = f"{PREFIX}probe-{os.getpid()}"
    if ip("netns", "add", probe, check=False).returncode != 0:
        return False
    try:
        ok = ip("link", "add", "wcprobe", "type", "dummy", ns=probe, check=False)
        if ok.returncode != 0:
            return False
        proc = run(
            [
                "ip",
                "netns",
                "exec",
                probe,
                "tc",
                "qdisc",
                "add",
                "dev",
                "wcprobe",
                "root",
                "netem",
                "delay",
                "1ms",
            ],
            check=False,
        )
        return proc.returncode == 0
    finally:
        delete_netns(probe)


# ---------------------------------------------------------------------- build
def ip_batch(ns: str | None, lines: list) -> None:
    """Run the ``ip`` commands ``lines`` (without the leading ``ip``) in one
    ``ip -batch`` inside namespace ``ns`` (None: this one)."""
    ip("-batch", "-", ns=ns, input="\n".join(lines) + "\n")


def disable_ipv6(ns: str) -> None:
    """No IPv6 in a testbed namespace: no router solicitations through the relay."""
    with entered(ns):
        for conf in ("all", "default"):
            with contextlib.suppress(OSError):
                Path(f"/proc/sys/net/ipv6/conf/{conf}/disable_ipv6").write_text("1")


def build_control(name: str) -> str:
    """Create the control namespace and its bridge; return the namespace name."""
    ctl = ctl_netns_name(name)
    ip("netns", "add", ctl)
    disable_ipv6(ctl)
    ip_batch(
        ctl,
        [
            "link set lo up",
            f"link add {CTL_BRIDGE} type bridge",
            f"addr add 10.78.0.1/{CTL_NET_PREFIX} dev {CTL_BRIDGE}",
            f"link set {CTL_BRIDGE} up",
        ],
    )
    return ctl


def build_endpoint(
    name: str,
    index: int,
    ns: str,
    data_addr: str,
    ctl_addr: str,
    mtu: int,
    tun: bool = True,
) -> None:
    """Create one endpoint namespace: loopback, TUN device (data), veth (control).

    The veth's other end is an isolated port of the control bridge, so the control
    network joins this namespace to the control namespace only.
    """
    ctl = ctl_netns_name(name)
    port = CTL_PORT.format(index)
    ip("netns", "add", ns)
    disable_ipv6(ns)
    lines = ["link set lo up"]
    if tun:
        lines += [
            f"tuntap add dev {TUN_NAME} mode tun",
            f"link set {TUN_NAME} mtu {mtu} txqueuelen 1000 up",
            f"addr add {data_addr}/32 dev {TUN_NAME}",
            f"route add {DATA_NET} dev {TUN_NAME}",
        ]
    ip_batch(ns, lines)
    ip_batch(
        ctl,
        [
            f"link add {port} type veth peer name {CTL_IFACE} netns {ns}",
            f"link set {port} master {CTL_BRIDGE}",
            f"link set {port} type bridge_slave isolated on",
            f"link set {port} up",
        ],
    )
    ip_batch(
        ns,
        [
            f"addr add {ctl_addr}/{CTL_NET_PREFIX} dev {CTL_IFACE}",
            f"link set {CTL_IFACE} up",
        ],
    )


def teardown_namespaces(name: str) -> list:
    """Delete every namespace of testbed ``name`` (and what runs in it); return them."""
    names = list_netns(f"{PREFIX}{name}-")
    errors = []
    for ns in names:
        try:
            delete_netns(ns)
        except TestbedError as exc:
            errors.append(str(exc))
    if errors:
        raise TestbedError("; ".join(errors))
    return names
