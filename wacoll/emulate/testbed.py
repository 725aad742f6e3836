"""The emulated wide-area testbed: clusters in namespaces, links with delay and rate.

A :class:`Testbed` builds, for a :class:`wacoll.Topology`, one network namespace per
cluster (or per rank, for per-node link rates), joins them through emulated links
with the topology's one-way latency and bandwidth per directed cluster pair (or one
shared uplink per cluster), checks itself, runs MPI programs with each cluster's
ranks in its namespace, and removes everything it made when it stops, after a crash
too (``atexit``, SIGTERM/SIGHUP handlers, and a watchdog process that deletes the
namespaces when its parent dies or its time limit passes).

Links are emulated by the kernel's ``netem`` where the kernel has it, else by a
userspace relay (:mod:`wacoll.emulate.relay`). It needs root and ``/dev/net/tun``.

Examples
--------
>>> from wacoll import Topology
>>> tb = Testbed(Topology.from_sizes([2, 2]), name="doc")
>>> tb.namespaces
['wacoll-doc-c0', 'wacoll-doc-c1']
>>> tb.stop()  # never started: nothing to remove, and harmless
"""

from __future__ import annotations

import atexit
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from wacoll.emulate import launcher, netns
from wacoll.emulate.layout import Layout, auto_mtu
from wacoll.errors import TestbedError, TestbedUnavailable, TestbedWarning
from wacoll.tools import progress
from wacoll.topology import Topology

if TYPE_CHECKING:
    from wacoll.emulate.probe import ProbeReport

__all__ = [
    "Testbed",
    "TestbedWarning",
    "STATE_ROOT",
    "teardown",
    "clean",
    "list_testbeds",
    "unavailable_reason",
]

STATE_ROOT = Path("/run/wacoll")
BACKENDS = ("auto", "relay", "netem")
RELAY_SCRIPT = Path(__file__).with_name("relay.py")
DEFAULT_TIME_LIMIT = 24 * 3600.0
READY_TIMEOUT = 30.0
_LIVE: set[Testbed] = set()
_LOCK = threading.Lock()
_HANDLERS: dict[int, object] = {}
_INSTALLED: list[bool] = []


class Testbed:
    """An emulated multi-cluster network on this machine.

    Parameters
    ----------
    topology : wacoll.Topology
        Clusters, and the wide-area links' one-way latency and bandwidth (``wan``,
        overridden per directed cluster pair by ``wan_pairs``); with per-node rates
        also ``node_bandwidth`` and the ``intra`` link.
    name : str
        Names everything made: namespaces ``wacoll-NAME-c0``..., state in
        ``/run/wacoll/NAME.json``. 1-16 of ``a-z0-9_``.
    netem : {"auto", "relay", "netem"}
        Link emulation: the kernel's netem qdisc, the userspace relay, or netem where
        the kernel has it (and the relay with per-node rates, which netem here lacks).
    per_node : bool, optional
        One namespace per rank, each with an egress and ingress queue at its
        ``node_bandwidth``; default: when the topology has ``node_bandwidth``.
        Ranks then talk over the emulated network inside a cluster too.
    uplink : bool
        One shared egress queue per cluster (at its slowest outgoing wide-area rate)
        instead of one queue per directed cluster pair.
    mtu : int or "auto"
        MTU of the data devices; "auto" is about 1 ms of the slowest link (1500..65000).
    queue_bytes : int, optional
        Backlog limit of every queue (drop tail); default max(256 KiB, 0.2 s of rate).
    time_limit : float, optional
        Seconds after which the watchdog tears the testbed down (None: no limit).
    realtime : bool
        Give the relay real-time priority (SCHED_FIFO) when permitted.
    netmod : {"ucx", "ofi"}
        Default MPICH transport of :meth:`run` (TCP over the emulated links).
    idle : {"auto", "yield", "poll"}
        How waiting ranks use the CPU: ``"yield"`` makes MPICH sleep between polls
        (an oversubscribed machine then hands a core to the rank whose message has
        arrived, instead of to a spinning one), ``"poll"`` keeps MPICH's busy
        polling, ``"auto"`` (default) yields when the topology has more ranks than
        the machine has cores. Part of :attr:`transport`, recorded with every run.
    charge : {"payload", "packet"}
        What a link's rate counts: transport payload bytes (the default: a program
        sees the configured rate, as wacoll's cost models assume) or whole IP packets
        (headers included, about 3.5 % less payload at MTU 1500).
    """

    __test__ = False

    def __init__(
        self,
        topology: Topology,
        *,
        name: str = "tb",
        netem: str = "auto",
        per_node: bool | None = None,
        uplink: bool = False,
        mtu="auto",
        queue_bytes: int | None = None,
        time_limit: float | None = DEFAULT_TIME_LIMIT,
        realtime: bool = True,
        netmod: str = "ucx",
        charge: str = "payload",
        idle: str = "auto",
    ):
        self.name = netns.valid_name(name)
        if netem not in BACKENDS:
            raise TestbedError(
                f"netem must be one of {', '.join(BACKENDS)}; got {netem!r}"
            )
        if not isinstance(topology, Topology):
            raise TestbedError("a testbed needs a wacoll.Topology")
        if per_node is None:
            per_node = topology.node_bandwidth is not None
        if mtu != "auto" and (
            isinstance(mtu, bool) or not isinstance(mtu, int) or not 576 <= mtu <= 65535
        ):
            raise TestbedError(f"mtu must be 'auto' or 576..65535; got {mtu!r}")
        if time_limit is not None and not time_limit > 0:
            raise TestbedError(
                f"time_limit must be > 0 seconds or None; got {time_limit!r}"
            )
        launcher.transport_env(netmod)
        self.idle = launcher.resolve_idle(idle, nprocs=topology.size)
        if charge not in ("payload", "packet"):
            raise TestbedError(f"charge must be 'payload' or 'packet'; got {charge!r}")
        self.charge = charge
        self.topology = topology
        self.netem = netem
        self.per_node = bool(per_node)
        self.uplink = bool(uplink)
        self.queue_bytes = queue_bytes
        self.time_limit = time_limit
        self.realtime = realtime
        self.netmod = netmod
        self.layout = Layout.build(
            topology,
            self.name,
            per_node=self.per_node,
            uplink=self.uplink,
            queue_bytes=queue_bytes,
        )
        self.mtu = auto_mtu(self.layout.min_rate) if mtu == "auto" else mtu
        self.backend: str | None = None
        self.last_check: ProbeReport | None = None
        self.realtime_granted: bool | None = None
        self._relay: subprocess.Popen[str] | None = None
        self._relay_pid: int | None = None
        self._lifeline: int | None = None
        self._launcher: Path | None = None
        self._started = False
        self._owner = True
        self._final_stats: dict | None = None

    # ---------------------------------------------------------------- naming
    @property
    def namespaces(self) -> list:
        """The endpoint namespaces (clusters, or nodes), in endpoint order."""
        return self.layout.namespaces

    @property
    def ctl_namespace(self) -> str:
        """The control namespace (``mpiexec`` runs there)."""
        return netns.ctl_netns_name(self.name)

    @property
    def state_dir(self) -> Path:
        return STATE_ROOT / self.name

    @property
    def state_file(self) -> Path:
        return STATE_ROOT / f"{self.name}.json"

    @property
    def data_iface(self) -> str:
        """The device that carries data between namespaces (TUN, or netem's veth)."""
        if self.backend == "netem":
            from wacoll.emulate.netem import WAN_IFACE

            return WAN_IFACE
        return netns.TUN_NAME

    @property
    def transport(self) -> str:
        """The default transport label, e.g. ``ucx:tcp,self``."""
        return launcher.transport_name(self.netmod, self.idle)

    @property
    def started(self) -> bool:
        return self._started

    def __repr__(self):
        state = "up" if self._started else "down"
        sizes = [len(c) for c in self.topology.clusters]
        return (
            f"Testbed(name={self.name!r}, clusters={sizes}, "
            f"backend={self.backend or self.netem!r}, {state})"
        )

    # ---------------------------------------------------------------- lifecycle
    def __enter__(self):
        if not self._started:
            self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def start(self, *, check: bool = True, detach: bool = False) -> Testbed:
        """Build the testbed; with ``check``, measure it and warn if it is off.

        Parameters
        ----------
        check : bool
            Run :meth:`check` (once more if the first misses, as a busy machine can
            delay one probe) and warn with :class:`TestbedWarning` when figures are
            more than 10 % off.
        detach : bool
            Leave the testbed up when this process exits (until :func:`teardown`, or
            the time limit); otherwise it goes away with this process.

        Raises
        ------
        TestbedUnavailable
            Not root, no ``/dev/net/tun``, no ``ip``, or netem asked for and missing.
        TestbedError
            A testbed of this name is already up, or a step failed (everything made
            so far is removed first).
        """
        if self._started:
            raise TestbedError(f"testbed {self.name} is already started")
        reason = netns.unavailable_reason() or launcher.mpich_reason()
        if reason:
            raise TestbedUnavailable(reason)
        leftovers = netns.list_netns(f"{netns.PREFIX}{self.name}-")
        if leftovers or self.state_file.exists():
            what = ", ".join(leftovers) or str(self.state_file)
            raise TestbedError(
                f"a testbed named {self.name!r} is already up ({what}); stop it with "
                f"'wacoll testbed down --name {self.name}' or remove leftovers with "
                f"'wacoll testbed clean'"
            )
        self.backend = self._resolve_backend()
        self._owner = not detach
        steps = progress.Progress(f"testbed {self.name}")
        steps.note(f"building {len(self.namespaces)} namespaces ({self.backend})")
        _register(self)
        try:
            self.state_dir.mkdir(parents=True, exist_ok=True)
            self._build()
            self._launcher = launcher.install_launcher(self.state_dir)
            self._start_watchdog(detach)
            self._started = True
            self._write_state(detach)
        except BaseException:
            self.stop()
            raise
        if check:
            steps.note("self-check: measuring the links")
            report = self.check()
            if not report.ok:
                steps.note("self-check: once more")
                report = self.check()
            if not report.ok:
                warnings.warn(
                    f"testbed {self.name}: self-check off by more than "
                    f"{report.tolerance:.0%}: " + "; ".join(report.failures()),
                    TestbedWarning,
                    stacklevel=2,
                )
        return self

    def _resolve_backend(self) -> str:
        if self.netem == "relay":
            return "relay"
        has_netem = netns.netem_available()
        if self.netem == "netem":
            if not has_netem:
                raise TestbedUnavailable(
                    "the kernel has no netem qdisc (use netem='relay' or 'auto')"
                )
            if self.per_node:
                raise TestbedError("per-node link rates need the relay (netem='relay')")
            return "netem"
        return "netem" if has_netem and not self.per_node else "relay"

    def _build(self) -> None:
        netns.build_control(self.name)
        tun = self.backend == "relay"
        for e in self.layout.endpoints:
            netns.build_endpoint(
                self.name, e.index, e.ns, e.data_addr, e.ctl_addr, self.mtu, tun=tun
            )
        if self.backend == "netem":
            from wacoll.emulate import netem

            netem.build(self.layout, self.mtu, self.charge)

    def _start_watchdog(self, detach: bool) -> None:
        config = self.layout.relay_config() if self.backend == "relay" else {}
        config.update(
            charge=self.charge,
            time_limit=self.time_limit,
            rt_priority=10 if self.realtime and self.backend == "relay" else 0,
            cleanup=[self.ctl_namespace]
            + self.namespaces
            + ([netns.wan_netns_name(self.name)] if self.backend == "netem" else []),
            cleanup_files=[str(self.state_file)],
            cleanup_dirs=[str(self.state_dir)],
        )
        pass_fds: tuple[int, ...] = ()
        if not detach:
            read_end, self._lifeline = os.pipe()
            os.set_inheritable(self._lifeline, False)
            config["lifeline"] = read_end
            pass_fds = (read_end,)
        path = self.state_dir / "relay.json"
        path.write_text(json.dumps(config, indent=1))
        log = open(self.state_dir / "relay.log", "w")
        try:
            self._relay = subprocess.Popen(
                [sys.executable, str(RELAY_SCRIPT), str(path)],
                stdout=subprocess.PIPE,
                stderr=log,
                stdin=subprocess.DEVNULL,
                pass_fds=pass_fds,
                start_new_session=True,
                text=True,
            )
        finally:
            log.close()
            if pass_fds:
                os.close(pass_fds[0])
        self._relay_pid = self._relay.pid
        line = _read_line(self._relay.stdout, READY_TIMEOUT)
        if not line.startswith("ready"):
            err = (self.state_dir / "relay.log").read_text().strip().splitlines()
            raise TestbedError(
                "the relay did not start: "
                + (err[-1] if err else line.strip() or "no answer")
            )
        self.realtime_granted = "realtime" in line

    def _write_state(self, detach: bool) -> None:
        state = {
            "name": self.name,
            "topology": self.topology.to_dict(),
            "backend": self.backend,
            "per_node": self.per_node,
            "uplink": self.uplink,
            "mtu": self.mtu,
            "queue_bytes": self.queue_bytes,
            "time_limit": self.time_limit,
            "netmod": self.netmod,
            "charge": self.charge,
            "idle": self.idle,
            "relay_pid": self._relay_pid,
            "detached": detach,
            "owner_pid": os.getpid(),
            "created": time.time(),
            "namespaces": [self.ctl_namespace] + self.namespaces,
            "state_dir": str(self.state_dir),
            "realtime": self.realtime_granted,
        }
        STATE_ROOT.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=1) + "\n")
        tmp.replace(self.state_file)

    @classmethod
    def attach(cls, name: str = "tb") -> Testbed:
        """The testbed ``name`` that is up (started by another process, e.g. detached).

        Raises
        ------
        TestbedError
            No testbed of that name is up.
        """
        netns.valid_name(name)
        path = STATE_ROOT / f"{name}.json"
        try:
            state = json.loads(path.read_text())
        except FileNotFoundError:
            raise TestbedError(f"no testbed named {name!r} is up (no {path})") from None
        except (OSError, json.JSONDecodeError) as exc:
            raise TestbedError(f"cannot read {path}: {exc}") from None
        tb = cls(
            Topology.from_dict(state["topology"]),
            name=name,
            netem=state["backend"],
            per_node=state["per_node"],
            uplink=state["uplink"],
            mtu=state["mtu"],
            queue_bytes=state["queue_bytes"],
            time_limit=state["time_limit"],
            netmod=state.get("netmod", "ucx"),
            charge=state.get("charge", "payload"),
            idle=state.get("idle", "auto"),
        )
        tb.backend = state["backend"]
        tb._relay_pid = state.get("relay_pid")
        tb.realtime_granted = state.get("realtime")
        tb._launcher = tb.state_dir / "hydra-launch"
        tb._started = True
        tb._owner = False
        missing = [ns for ns in state["namespaces"] if ns not in netns.list_netns()]
        if missing:
            raise TestbedError(
                f"testbed {name!r} is broken: namespace {missing[0]} is gone; "
                f"run 'wacoll testbed down --name {name}'"
            )
        return tb

    def stop(self) -> None:
        """Remove everything this testbed made; safe to call again, or before start."""
        relay, self._relay = self._relay, None
        # the relay is stopped by a signal before its lifeline closes, so that it
        # always leaves through the one path that prints its stats
        if relay is not None:
            _terminate(relay.pid, relay)
            self._final_stats = _read_stats(relay.stdout) or self._final_stats
        elif self._relay_pid is not None:
            _terminate(self._relay_pid, None, expect=str(self.state_dir / "relay.json"))
        if self._lifeline is not None:
            os.close(self._lifeline)  # a watchdog still running sees EOF and cleans up
            self._lifeline = None
        self._relay_pid = None
        was_started, self._started = self._started, False
        if was_started or self.backend is not None:
            teardown(self.name)
        _unregister(self)

    # ---------------------------------------------------------------- check and run
    def check(self, *, probes: int = 9, tolerance: float = 0.1):
        """Measure one-way latency and rate of every directed cluster pair.

        Returns
        -------
        wacoll.emulate.probe.ProbeReport
            Configured against measured per pair (``table()`` prints it), and ``ok``:
            every figure within ``tolerance``.
        """
        from wacoll.emulate.probe import measure

        self._require_started()
        self.last_check = measure(
            self.layout, self.mtu, probes=probes, tolerance=tolerance, charge=self.charge
        )
        return self.last_check

    def run(
        self,
        argv,
        *,
        nprocs: int | None = None,
        timeout: float = 120.0,
        netmod: str | None = None,
        env: dict | None = None,
        capture: bool = True,
        cwd=None,
    ):
        """Run ``argv`` under ``mpiexec`` with each rank in its cluster's namespace.

        Parameters
        ----------
        argv : list of str or str
            The program and its arguments, e.g. ``[sys.executable, "script.py"]``.
        nprocs : int, optional
            Must equal the topology's size (the default).
        timeout : float
            Seconds; then the run and every process it left are stopped
            (``RunResult.timed_out``). Required: a collective waiting for a lost
            message never returns.
        netmod : {"ucx", "ofi"}, optional
            MPICH's transport (default: the testbed's); recorded in the result.
        env : dict, optional
            Extra environment variables for every rank. The ranks are given
            ``WACOLL_TOPOLOGY``, a file of the testbed's topology (its clusters and
            its links' configured latencies and rates, so that their selection
            chooses with the real links), and ``WACOLL_CLUSTERS``; give either here
            to override it.
        capture : bool
            Capture stdout/stderr into the result (else they pass through).

        Returns
        -------
        wacoll.emulate.launcher.RunResult
        """
        self._require_started()
        if isinstance(argv, str):
            argv = shlex.split(argv)
        argv = [str(a) for a in argv]
        if not argv:
            raise TestbedError("run needs a program to run")
        size = self.topology.size
        if nprocs is not None and nprocs != size:
            raise TestbedError(
                f"the testbed's topology has {size} ranks; nprocs={nprocs} "
                f"would not match its clusters"
            )
        netmod = netmod or self.netmod
        full_env = dict(os.environ)
        full_env.update(launcher.transport_env(netmod, self.data_iface))
        full_env.update(launcher.idle_env(self.idle))
        full_env.update(
            {
                "WACOLL_CLUSTERS": ",".join(str(c) for c in self.topology.cluster_ids),
                "WACOLL_TESTBED": self.name,
                "WACOLL_TRANSPORT": launcher.transport_name(netmod, self.idle),
                "WACOLL_TESTBED_HOSTS": " ".join(
                    f"{e.ctl_addr}={e.ns}" for e in self.layout.endpoints
                ),
            }
        )
        # the ranks are told the network they run on: its clusters and the links'
        # configured latencies and rates, so that their selection chooses with them
        topology_file = self.state_dir / "topology.json"
        self.topology.save(topology_file)
        full_env["WACOLL_TOPOLOGY"] = str(topology_file)
        # the ranks' output reaches no terminal of their own: pass them this process's
        # decision on progress lines
        full_env.update(progress.child_env())
        if env:
            full_env.update({str(k): str(v) for k, v in env.items()})
        assert self._launcher is not None  # set whenever the testbed is started
        command = launcher.mpiexec_command(
            self.ctl_namespace,
            self._launcher,
            [e.ctl_addr for e in self.layout.endpoints],
            self.layout.endpoint_of_rank(),
            argv,
        )
        ticker = progress.Progress(f"testbed {self.name}")
        ticker.note(
            f"running {_program_name(argv)} on {size} ranks, time limit "
            f"{progress.format_elapsed(timeout)}"
        )
        with ticker.heartbeat("still running", limit=timeout):
            return launcher.run_mpiexec(
                command,
                full_env,
                timeout=timeout,
                capture=capture,
                namespaces=[self.ctl_namespace] + self.namespaces,
                argv=argv,
                transport=launcher.transport_name(netmod, self.idle),
                testbed=self.name,
                cwd=cwd,
            )

    def relay_stats(self) -> dict | None:
        """The relay's counters (packets, bytes, drops per queue) after :meth:`stop`."""
        return self._final_stats

    def _require_started(self):
        if not self._started:
            raise TestbedError(f"testbed {self.name} is not started")


# ------------------------------------------------------------------ helpers
def unavailable_reason() -> str | None:
    """Why no testbed can run here (not root, no ``/dev/net/tun``, no ``ip``, an
    ``mpiexec`` that is not MPICH's), or None when one can.

    Examples
    --------
    >>> reason = unavailable_reason()
    >>> reason is None or isinstance(reason, str)
    True
    """
    return netns.unavailable_reason() or launcher.mpich_reason()


def _program_name(argv) -> str:
    """What a run runs, for progress lines: ``wacoll.tools.measure``, ``app.py``, ``ls``."""
    if len(argv) > 2 and argv[1] == "-m":
        return argv[2]
    if len(argv) > 1 and Path(argv[0]).name.startswith("python"):
        return Path(argv[1]).name
    return Path(argv[0]).name


def _read_line(stream, timeout: float) -> str:
    """One line from ``stream``, or "" after ``timeout`` seconds."""
    import select

    ready = select.select([stream], [], [], timeout)[0]
    return stream.readline() if ready else ""


def _read_stats(stream) -> dict | None:
    """The relay's last words, ``stats {...}``, from its stdout (then closed)."""
    if stream is None:
        return None
    try:
        for line in stream.read().splitlines():
            if line.startswith("stats "):
                return json.loads(line[6:])
    except (OSError, ValueError):
        pass
    finally:
        stream.close()
    return None


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _terminate(pid: int, popen, expect: str | None = None, grace: float = 15.0) -> None:
    """Stop the relay ``pid`` (if it is one: its command line names ``expect``)."""
    if popen is None:
        line = _cmdline(pid)
        if RELAY_SCRIPT.name not in line or (expect and expect not in line):
            return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if popen is not None:
            if popen.poll() is not None:
                return
        elif not _cmdline(pid):
            return
        time.sleep(0.02)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    if popen is not None:
        popen.wait(5)


def teardown(name: str) -> list:
    """Remove testbed ``name``: its watchdog, namespaces and state; return what was removed.

    Harmless when nothing is left.
    """
    netns.valid_name(name)
    state_file = STATE_ROOT / f"{name}.json"
    state_dir = STATE_ROOT / name
    before = netns.list_netns(f"{netns.PREFIX}{name}-")
    before += [str(p) for p in (state_file, state_dir) if p.exists()]
    try:
        state = json.loads(state_file.read_text())
    except (OSError, json.JSONDecodeError):
        state = None
    if state and state.get("relay_pid"):
        # the watchdog removes the namespaces itself when it stops
        _terminate(int(state["relay_pid"]), None, expect=str(state_dir / "relay.json"))
    netns.teardown_namespaces(name)
    for path in (state_file, state_file.with_suffix(".tmp")):
        try:
            path.unlink()
        except FileNotFoundError:
            pass
    shutil.rmtree(state_dir, ignore_errors=True)
    left = netns.list_netns(f"{netns.PREFIX}{name}-")
    if left:
        raise TestbedError(f"could not remove {', '.join(left)}")
    return before


def list_testbeds() -> list:
    """Names of the testbeds with a state file or namespaces on this machine."""
    names = set()
    if STATE_ROOT.is_dir():
        names |= {p.stem for p in STATE_ROOT.glob("*.json")}
    for ns in netns.list_netns():
        rest = ns[len(netns.PREFIX) :]
        if "-" in rest:
            names.add(rest.rsplit("-", 1)[0])
    return sorted(names)


def clean() -> list:
    """Remove every testbed's leftovers (``wacoll-*`` namespaces, watchdogs, state)."""
    removed = []
    for name in list_testbeds():
        try:
            removed += teardown(name)
        except TestbedError:
            pass
    for ns in netns.list_netns():  # anything else with the prefix, e.g. a probe
        netns.delete_netns(ns)
        removed.append(ns)
    return removed


# ------------------------------------------------------------------ crash safety
def _register(tb: Testbed) -> None:
    with _LOCK:
        first = not _INSTALLED
        if first:
            _INSTALLED.append(True)
        _LIVE.add(tb)
    if first:
        atexit.register(_stop_all)
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGHUP):
                try:
                    _HANDLERS[sig] = signal.signal(sig, _on_signal)
                except (ValueError, OSError):
                    pass


def _unregister(tb: Testbed) -> None:
    with _LOCK:
        _LIVE.discard(tb)


def _stop_all() -> None:
    with _LOCK:
        live = list(_LIVE)
    for tb in live:
        if tb._owner:
            try:
                tb.stop()
            except Exception as exc:  # noqa: BLE001 - at exit, report and go on
                print(
                    f"wacoll testbed {tb.name}: teardown failed: {exc}", file=sys.stderr
                )


def _on_signal(signum, frame):
    _stop_all()
    previous = _HANDLERS.get(signum)
    if callable(previous):
        previous(signum, frame)
    elif previous != signal.SIG_IGN:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
