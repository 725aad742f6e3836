"""Tracing: what each rank ran and when, written for Perfetto and chrome://tracing.

Each rank's :class:`Tracer` records complete events (start and end
in seconds); :func:`write_chrome_trace` merges the records of all ranks into one
Chrome trace-event JSON file with one track (``tid``) per rank.

Examples
--------
>>> import json, os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "trace.json")
>>> records = [[{"name": "send 1 [0]", "cat": "step", "start": 1.0, "end": 1.5,
...              "args": {}}], []]
>>> write_chrome_trace(records, path)
>>> events = json.load(open(path))["traceEvents"]
>>> [e["dur"] for e in events if e["ph"] == "X"]
[500000.0]
"""

from __future__ import annotations

import json

__all__ = ["Tracer", "write_chrome_trace", "chrome_events"]


class Tracer:
    """Collects start and end times of a rank's operations and steps (PATHS's trace
    wrappers); :func:`write_chrome_trace` merges and writes them.

    ``wacoll.Comm(..., trace=True)`` records one ``operation`` event per collective
    (its name says which plan, or ``native`` for the MPI library's own collective)
    and one ``step`` event per executed step; ``comm.tracer.records`` is public.

    Examples
    --------
    >>> t = Tracer(clock=iter([1.0, 2.0]).__next__)
    >>> t.record("bcast (magpie/coordinator)", "operation", t.clock(), t.clock())
    >>> t.records[0]["end"] - t.records[0]["start"]
    1.0
    """

    def __init__(self, clock=None):
        if clock is None:
            from mpi4py import MPI

            clock = MPI.Wtime
        self.clock = clock
        self.records = []

    def record(self, name, category, start, end, **args):
        """Add one complete event (seconds)."""
        self.records.append(
            {"name": name, "cat": category, "start": start, "end": end, "args": args}
        )


def chrome_events(records_per_rank) -> list:
    """Trace events (microseconds since the earliest record), one ``tid`` per rank."""
    starts = [rec["start"] for recs in records_per_rank for rec in recs]
    t0 = min(starts) if starts else 0.0
    events = []
    for rank, recs in enumerate(records_per_rank):
        events.append(
            {
                "name": "thread_name",
                "ph": "M",
                "pid": 0,
                "tid": rank,
                "args": {"name": f"rank {rank}"},
            }
        )
        for rec in recs:
            events.append(
                {
                    "name": rec["name"],
                    "cat": rec["cat"],
                    "ph": "X",
                    "pid": 0,
                    "tid": rank,
                    "ts": (rec["start"] - t0) * 1e6,
                    "dur": max(rec["end"] - rec["start"], 0.0) * 1e6,
                    "args": rec.get("args", {}),
                }
            )
    events.sort(key=lambda e: (e.get("ts", -1.0), e["tid"]))
    return events


def write_chrome_trace(records_per_rank, path):
    """Write the merged records of all ranks as a Chrome trace-event JSON file."""
    with open(path, "w") as fh:
        json.dump(
            {"traceEvents": chrome_events(records_per_rank), "displayTimeUnit": "ms"}, fh
        )
