"""Trace files of executed plans, for Perfetto and chrome://tracing.

Each rank's :class:`~wacoll.mpi.executor.Tracer` records complete events (start and end
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

__all__ = ["write_chrome_trace", "chrome_events"]


def chrome_events(records_per_rank) -> list:
    """Trace events (microseconds since the earliest record), one ``tid`` per rank."""
    starts = [rec["start"] for recs in records_per_rank for rec in recs]
    t0 = min(starts) if starts else 0.0
    events = []
    for rank, recs in enumerate(records_per_rank):
        events.append({"name": "thread_name", "ph": "M", "pid": 0, "tid": rank,
                       "args": {"name": f"rank {rank}"}})
        for rec in recs:
            events.append({"name": rec["name"], "cat": rec["cat"], "ph": "X", "pid": 0,
                           "tid": rank, "ts": (rec["start"] - t0) * 1e6,
                           "dur": max(rec["end"] - rec["start"], 0.0) * 1e6,
                           "args": rec.get("args", {})})
    events.sort(key=lambda e: (e.get("ts", -1.0), e["tid"]))
    return events


def write_chrome_trace(records_per_rank, path):
    """Write the merged records of all ranks as a Chrome trace-event JSON file."""
    with open(path, "w") as fh:
        json.dump({"traceEvents": chrome_events(records_per_rank),
                   "displayTimeUnit": "ms"}, fh)
