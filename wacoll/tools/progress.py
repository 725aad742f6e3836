"""Progress lines for long work: on a terminal only, always to stderr.

The demo, ``wacoll testbed run``, testbed runs from the benchmarks and
``python -m wacoll.tools.measure`` say how far they are: a line per case with a counter
and the elapsed time, or, while a program runs, a line every half minute with the
elapsed time. The lines go to stderr, so the results on stdout stay clean, and only
when stderr is a terminal: in CI and in redirected runs nothing is printed.

``WACOLL_PROGRESS=1`` turns the lines on and ``WACOLL_PROGRESS=0`` off whatever
stderr is. MPI ranks never see a terminal (mpiexec forwards their output through
pipes), so whoever starts them passes its own decision in that variable
(:func:`child_env`); the testbed does.

Examples
--------
>>> import io
>>> out = io.StringIO()
>>> p = Progress("demo", total=3, stream=out, enabled=True, clock=iter([0, 5, 75]).__next__)
>>> p.step("Barrier")
>>> p.step("Bcast 1 B")
>>> print(out.getvalue(), end="")
[demo 1/3 0:05] Barrier
[demo 2/3 1:15] Bcast 1 B
>>> quiet = Progress("demo", total=3, stream=io.StringIO(), enabled=False)
>>> quiet.step("Barrier")   # prints nothing
>>> format_elapsed(3725.4)
'1:02:05'
"""

from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager

from wacoll.settings import setting

__all__ = ["ENV", "enabled", "child_env", "format_elapsed", "Progress"]

#: The environment variable that forces progress lines on ("1") or off ("0").
ENV = "WACOLL_PROGRESS"


def enabled(stream=None) -> bool:
    """Whether progress lines should be shown: ``$WACOLL_PROGRESS`` if it is set,
    else whether ``stream`` (default: stderr) is a terminal."""
    forced = (setting(ENV) or "").lower()
    if forced in ("1", "yes", "true", "on"):
        return True
    if forced in ("0", "no", "false", "off"):
        return False
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def child_env() -> dict:
    """``{"WACOLL_PROGRESS": "1" or "0"}``: this process's decision, for processes it
    starts whose output is not a terminal of their own (MPI ranks)."""
    return {ENV: "1" if enabled() else "0"}


def format_elapsed(seconds: float) -> str:
    """``m:ss`` or ``h:mm:ss``."""
    seconds = int(max(seconds, 0))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Progress:
    """Progress of one piece of long work.

    Parameters
    ----------
    what : str
        What is being done, shown in every line (``"demo"``, ``"testbed tb"``).
    total : int, optional
        How many steps there are; the counter shows ``i/total`` (else ``i``).
    stream : file, optional
        Where the lines go (default: stderr).
    enabled : bool, optional
        Show the lines; default :func:`enabled`.
    """

    def __init__(
        self,
        what: str,
        total: int | None = None,
        *,
        stream=None,
        enabled: bool | None = None,
        clock=time.monotonic,
    ):
        self.what = what
        self.total = total
        self.count = 0
        self._stream = stream
        self._clock = clock
        self.enabled = globals()["enabled"](stream) if enabled is None else enabled
        self.start = clock() if self.enabled else 0.0
        self._lock = threading.Lock()

    def elapsed(self) -> float:
        """Seconds since the work started."""
        return self._clock() - self.start

    def _print(self, text: str) -> None:
        with self._lock:
            stream = self._stream if self._stream is not None else sys.stderr
            print(text, file=stream, flush=True)

    def step(self, detail: str = "") -> None:
        """One step done: ``[what i/total m:ss] detail``."""
        self.count += 1
        if not self.enabled:
            return
        counter = f"{self.count}/{self.total}" if self.total else str(self.count)
        self._print(
            f"[{self.what} {counter} {format_elapsed(self.elapsed())}]"
            + (f" {detail}" if detail else "")
        )

    def note(self, text: str) -> None:
        """A line without counting a step: ``[what m:ss] text``."""
        if self.enabled:
            self._print(f"[{self.what} {format_elapsed(self.elapsed())}] {text}")

    @contextmanager
    def heartbeat(
        self, text: str = "running", *, every: float = 30.0, limit: float | None = None
    ):
        """While the block runs, a line every ``every`` seconds: ``[what m:ss] running,
        time limit m:ss``. Nothing when disabled."""
        if not self.enabled:
            yield self
            return
        stop = threading.Event()
        suffix = f" (time limit {format_elapsed(limit)})" if limit else ""

        def beat():
            while not stop.wait(every):
                self.note(f"{text}{suffix}")

        thread = threading.Thread(target=beat, name="wacoll-progress", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            stop.set()
            thread.join()
