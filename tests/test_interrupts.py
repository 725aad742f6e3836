"""A rank interrupted inside a collective ends the job (wacoll.mpi.interrupts).

Each test starts ``mpiexec -n 4`` of a small program on two declared clusters (so
that the call runs wacoll's plan, not the MPI library's collective): rank 0 is late
(it sleeps before the call) while ranks 1-3 wait inside it; then a signal goes to
some ranks, or to ``mpiexec``. The whole job must end within :data:`DEADLINE`
seconds of the signal, with a nonzero status and, where wacoll aborted, its line on
standard error. Whatever happens, nothing of the job outlives the test.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

import pytest

from wacoll.mpi.interrupts import (
    collective_name,
    exit_code,
    interrupted,
    is_interrupt,
    mark,
    message,
    policy,
    set_policy,
)

#: Seconds from the signal to the end of the whole job.
DEADLINE = 10.0
#: Seconds the ranks may take to start and reach the call (4 ranks on 2 cores).
STARTUP = 60.0
#: How long rank 0 is late when no signal reaches it: far past the deadline.
LATE = 60.0

LINE = (
    "wacoll: rank {rank} interrupted inside {where} ({what}); aborting the job, as "
    "its peers would wait forever"
)

PROGRAM = r'''
import faulthandler, os, signal, sys, time
import numpy as np
from mpi4py import MPI
import wacoll

route, late = sys.argv[1], float(sys.argv[2])
faulthandler.dump_traceback_later(float(sys.argv[3]))  # where a slow start stands
world = MPI.COMM_WORLD
rank = world.Get_rank()


def say(text):
    os.write(1, (text + "\n").encode())


comm = wacoll.Comm(world, trace=route == "python")
a = np.arange(64.0)
b = np.empty_like(a)
# the plan made, proved and run before anyone is interrupted: "compiled" warms up on
# 32 values, so that the interrupted call (64) is read afresh; "replayed" and
# "library" repeat the call three times (recorded, then replayed)
n = 32 if route in ("compiled", "alarm") else 64
request = comm.Allreduce_init(a, b) if route == "persistent" else None


def allreduce(count=None):
    """The route's call; a blocking one on the first ``count`` values (None: a, b)."""
    if route == "nonblocking":
        comm.Iallreduce(a, b).Wait()
    elif route == "persistent":
        request.Start()
        request.Wait()
    elif count is None:
        comm.Allreduce(a, b)
    else:
        comm.Allreduce(a[:count], b[:count])


for _ in range(3 if route in ("replayed", "library") else 1):
    allreduce(n)
seen, family = comm.last_route, comm.last_family
if route == "persistent":
    seen = "compiled" if request._runner is not None else "python"
    family = request.plan and request.plan.family
if route == "alarm" and rank == 1:
    def ring(signum, frame):
        raise TimeoutError("the alarm rang")
    signal.signal(signal.SIGALRM, ring)
faulthandler.cancel_dump_traceback_later()
say(f"PID {rank} {os.getpid()} {seen} {family}")
world.Barrier()
if rank == 0:
    time.sleep(late)  # late: the others wait inside the call
elif route == "alarm" and rank == 1:
    signal.alarm(1)
say(f"ENTER {rank}")
try:
    allreduce()
except KeyboardInterrupt:  # only with WACOLL_ON_INTERRUPT=raise
    say(f"CAUGHT {rank}")
    try:
        comm.Allreduce(a, b)
    except wacoll.WacollError as exc:
        say(f"REFUSED {rank} {exc}")
    time.sleep(0.2)  # the launcher forwards the lines before the abort ends the job
    world.Abort(3)
say(f"DONE {rank}")
'''


@dataclass
class Job:
    returncode: int
    seconds: float  # from the signal to the end of mpiexec
    stdout: str
    stderr: str
    routes: dict = field(default_factory=dict)
    families: dict = field(default_factory=dict)

    def output(self):
        return (
            f"exit status {self.returncode}\n--- stdout\n{self.stdout[-3000:]}"
            f"\n--- stderr\n{self.stderr[-3000:]}"
        )


def _vendor():
    from wacoll.tools.launch import mpiexec_vendor

    return mpiexec_vendor()


def _env(clusters, extra):
    """This environment without an outer launcher's or a developer's wacoll settings;
    ``extra`` added."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PMI_", "PMIX_", "HYDRA_", "OMPI_", "WACOLL_"))
    }
    if clusters:
        env["WACOLL_CLUSTERS"] = clusters
    env.update(extra or {})
    return env


def _read(stream, sink, lines=None):
    for line in stream:
        sink.append(line)
        if lines is not None:
            lines.put(line)
    if lines is not None:
        lines.put(None)


def _ours(pid, script):
    """Whether process ``pid`` still runs our program (a pid may be reused)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return str(script).encode() in f.read()
    except OSError:
        return False


def run_job(tmp_path, route, targets, *, clusters="0,0,1,1", env=None, late=LATE):
    """Run :data:`PROGRAM` on 4 ranks; once ranks 1-3 wait inside the call, send
    SIGINT to the ranks in ``targets`` (``"mpiexec"``: to ``mpiexec`` itself; empty:
    no signal) and time the end of the job. The job has a proof cache of its own
    and learns nothing (so that the call's family and route are the selection's)."""
    from wacoll.tools.launch import mpiexec_command

    script = tmp_path / "interrupted.py"
    script.write_text(PROGRAM)
    cmd = mpiexec_command(
        4, [sys.executable, str(script), route, str(late), str(STARTUP - 10)]
    )
    env = {
        "WACOLL_PROOF_CACHE": str(tmp_path / "proofs"),
        "WACOLL_LEARN": "off",
        **(env or {}),
    }
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(clusters, env),
        start_new_session=True,
    )
    out, err, lines = [], [], queue.Queue()
    readers = [
        threading.Thread(target=_read, args=(proc.stdout, out, lines), daemon=True),
        threading.Thread(target=_read, args=(proc.stderr, err), daemon=True),
    ]
    for reader in readers:
        reader.start()
    pids, routes, families, entered = {}, {}, {}, set()
    try:
        began = time.monotonic()
        while not {1, 2, 3} <= entered:
            try:
                line = lines.get(timeout=max(0.1, began + STARTUP - time.monotonic()))
            except queue.Empty:
                line = None
            if line is None:
                pytest.fail(
                    f"the ranks did not reach the call in {STARTUP} s:\n"
                    f"{''.join(out)[-3000:]}\n{''.join(err)[-3000:]}"
                )
            if m := re.search(r"PID (\d+) (\d+) (\S+) (\S+)", line):
                rank = int(m[1])
                pids[rank], routes[rank], families[rank] = int(m[2]), m[3], m[4]
            elif m := re.search(r"ENTER (\d+)", line):
                entered.add(int(m[1]))
        time.sleep(0.5)  # well inside their wait
        signalled = time.monotonic()
        if targets == "mpiexec":
            proc.send_signal(signal.SIGINT)
        else:
            for rank in targets:
                os.kill(pids[rank], signal.SIGINT)
        try:
            proc.wait(timeout=DEADLINE + (3.0 if not targets else 0.0))
        except subprocess.TimeoutExpired:
            pytest.fail(
                f"the job still ran {DEADLINE} s after the signal:\n"
                f"{''.join(out)[-3000:]}\n{''.join(err)[-3000:]}"
            )
        seconds = time.monotonic() - signalled
        for reader in readers:
            reader.join(timeout=5)
        return Job(proc.returncode, seconds, "".join(out), "".join(err), routes, families)
    finally:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in pids.values():  # the ranks run in sessions of their own
            if _ours(pid, script):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        proc.wait(timeout=30)


def _expect_abort(
    job, route="compiled", where="Allreduce", ranks=(1, 2, 3), what="KeyboardInterrupt"
):
    assert set(job.routes.values()) == {route}, job.output()
    families = set(job.families.values())  # one of wacoll's plans, not the library
    assert len(families) == 1 and families.isdisjoint({"native", "None"}), job.output()
    assert job.returncode != 0, job.output()
    assert "DONE" not in job.stdout, job.output()
    lines = [LINE.format(rank=r, where=where, what=what) for r in ranks]
    assert any(line in job.stderr for line in lines), job.output()


# --------------------------------------------------------------- the compiled route
def test_sigint_to_one_rank_while_another_is_late(tmp_path):
    job = run_job(tmp_path, "compiled", [1])
    _expect_abort(job, ranks=[1])
    if _vendor() == "mpich":
        assert job.returncode == 130, job.output()


def test_replayed_call_sigint_to_one_rank(tmp_path):
    job = run_job(tmp_path, "replayed", [1])
    _expect_abort(job, route="replayed", ranks=[1])


def test_sigint_to_three_of_four_ranks(tmp_path):
    job = run_job(tmp_path, "compiled", [1, 2, 3])
    _expect_abort(job)
    if _vendor() == "mpich":
        assert job.returncode == 130, job.output()


def test_sigint_to_every_rank(tmp_path):
    job = run_job(tmp_path, "compiled", [0, 1, 2, 3])
    _expect_abort(job)


def test_sigint_to_mpiexec(tmp_path):
    job = run_job(tmp_path, "compiled", "mpiexec")
    assert job.returncode != 0, job.output()
    assert "DONE" not in job.stdout, job.output()
    if _vendor() == "mpich":  # hydra forwards the signal; Open MPI's launcher ends
        # the ranks itself
        _expect_abort(job)


def test_an_exception_a_signal_handler_raises_in_the_wait(tmp_path):
    """Rank 1's SIGALRM handler raises TimeoutError inside the compiled wait: an
    interrupt, though an ordinary exception; exit status 1."""
    job = run_job(tmp_path, "alarm", [])
    _expect_abort(job, ranks=[1], what="TimeoutError: the alarm rang")
    if _vendor() == "mpich":
        assert job.returncode == 1, job.output()


def test_policy_raise_keeps_the_exception_and_breaks_the_communicator(tmp_path):
    job = run_job(tmp_path, "compiled", [1], env={"WACOLL_ON_INTERRUPT": "raise"})
    assert "CAUGHT 1" in job.stdout, job.output()
    assert (
        "REFUSED 1 a collective on this wacoll.Comm (Allreduce) was interrupted"
        in job.stdout
    ), job.output()
    assert "wacoll: rank" not in job.stderr, job.output()
    if _vendor() == "mpich":
        assert job.returncode == 3, job.output()


# ------------------------------------------------- the Python executor, the requests
def test_python_executor_sigint_to_one_rank(tmp_path):
    _expect_abort(run_job(tmp_path, "python", [1]), route="python", ranks=[1])


def test_python_executor_sigint_to_three_ranks(tmp_path):
    _expect_abort(run_job(tmp_path, "python", [1, 2, 3]), route="python")


def test_nonblocking_wait_sigint_to_one_rank(tmp_path):
    # (the call runs compiled: its Wait finishes it in C, and notices the signal)
    _expect_abort(
        run_job(tmp_path, "nonblocking", [1]),
        route="compiled",
        where="Wait of Iallreduce",
        ranks=[1],
    )


def test_nonblocking_wait_sigint_to_every_rank(tmp_path):
    _expect_abort(
        run_job(tmp_path, "nonblocking", [0, 1, 2, 3]),
        route="compiled",
        where="Wait of Iallreduce",
    )


def test_persistent_wait_sigint_to_one_rank(tmp_path):
    _expect_abort(
        run_job(tmp_path, "persistent", [1]), where="Wait of Allreduce_init", ranks=[1]
    )


def test_one_cluster_replayed_call_sigint_to_one_rank(tmp_path):
    """On one cluster (one node) the MPI library runs the call, after the check in
    shared memory: a rank waiting there for a late one is interrupted too."""
    job = run_job(tmp_path, "library", [1], clusters=None)
    assert set(job.routes.values()) == {"replayed"}, job.output()
    assert job.returncode != 0, job.output()
    line = LINE.format(rank=1, where="Allreduce", what="KeyboardInterrupt")
    assert line in job.stderr, job.output()


# ------------------------------------------------------------------- in one process
def test_what_counts_as_an_interrupt():
    assert is_interrupt(KeyboardInterrupt()) and is_interrupt(SystemExit(2))
    assert not is_interrupt(ValueError("bad count"))
    assert is_interrupt(mark(TimeoutError("alarm")))
    from wacoll.errors import WacollError

    assert not is_interrupt(WacollError("x"))


def test_exit_codes():
    assert exit_code(KeyboardInterrupt()) == 130
    codes = [exit_code(SystemExit(c)) for c in (0, None, 5, 300, "text")]
    assert codes == [1, 1, 5, 1, 1]
    assert exit_code(mark(TimeoutError())) == 1


def test_names_and_message():
    assert [collective_name("allreduce", m) for m in ("call", "start", "bind")] == [
        "Allreduce",
        "Iallreduce",
        "Allreduce_init",
    ]
    assert message(3, "Bcast", SystemExit(2)) == LINE.format(
        rank=3, where="Bcast", what="SystemExit: 2"
    )


def test_policy_from_the_environment(monkeypatch):
    from wacoll.errors import WacollError

    monkeypatch.delenv("WACOLL_ON_INTERRUPT", raising=False)
    assert policy() == "abort"
    monkeypatch.setenv("WACOLL_ON_INTERRUPT", "Raise")
    assert policy() == "raise"
    set_policy("abort")
    try:
        assert policy() == "abort"  # the explicit choice wins
    finally:
        set_policy(None)
    monkeypatch.setenv("WACOLL_ON_INTERRUPT", "ignore")
    with pytest.raises(WacollError, match="WACOLL_ON_INTERRUPT"):
        policy()
    with pytest.raises(WacollError):
        set_policy("ignore")


def test_an_ordinary_error_passes_through(monkeypatch):
    monkeypatch.setenv("WACOLL_ON_INTERRUPT", "raise")

    class Route:
        broken = None
        replays = object()

        def stop(self, reason):
            self.replays, self.broken = None, reason

    route = Route()
    interrupted(ValueError("bad"), "Allreduce", route)  # returns: the caller re-raises
    assert route.broken is None
    interrupted(KeyboardInterrupt(), "Allreduce", route)
    assert route.replays is None and "was interrupted" in route.broken
