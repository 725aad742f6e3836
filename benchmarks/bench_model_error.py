"""The model against the measurements: every family's time on the four networks of
``bench_networks.py`` beside the simulator's prediction from the measured topology.

Run from the repository root, as root (the testbed needs network namespaces)::

    .venv/bin/python benchmarks/bench_model_error.py --networks lan --reps 5
    .venv/bin/python benchmarks/bench_model_error.py --networks metro,wan,longfast
    .venv/bin/python benchmarks/bench_model_error.py --predict-only   # no testbed
    .venv/bin/python benchmarks/bench_model_error.py --predict-only \
        --raw benchmarks/results/model_error-loaded_measured.json --stem model_error-loaded

The networks are :data:`bench_networks.NETWORKS`' (LAN 4x2 100 us 12.5 MB/s, metro
4x2 500 us 100 MB/s, MagPIe's WAN 4x2 10 ms 1 MB/s, long-and-fast 2x4 5 ms
100 MB/s), with their sizes (8 B, 64 KiB, 1 MiB; the WAN leaves 1 MiB out). For each,
in one testbed run, the ranks

1. measure the links as a communicator does where nothing gives them
   (:func:`wacoll.mpi.links.measure_links`: latency and bandwidth between the
   clusters' coordinators and inside each cluster) and build that *measured
   topology* (:func:`wacoll.mpi.links.measured_topology`);
2. time a 1 B ping-pong inside the clusters and across them, every rank in a pair at
   once (the per-message software cost under load, as in
   ``bench_sim_vs_testbed.py``), the same inside through ``wacoll.Comm`` (a
   1-element Bcast, the root alternating), and how late each rank runs after an
   instant it slept until (a waking rank's delay on the loaded machine);
3. time Bcast, Allreduce (SUM at level ``"commutative"``) and Allgather of every
   family that has the operation (:data:`FAMILIES`), each run by
   ``wacoll.Comm(world, measured_topology, family=f, validate=False)``, and a *null*
   operation (nothing: the start skew of the timing protocol), interleaved per
   repetition, from a common start instant to the last rank's finish
   (:func:`wacoll.tools.measure.timed`); the median of ``--reps``;
4. measure the links once more, to see how much they moved during the run, and
   once with bursts of 2 MiB instead of 256 KiB; then time 4 MiB sent by every
   cluster's coordinator to every other's at once (what the links carry together).

Each case's plan (the one ``wacoll.Comm`` runs: :func:`wacoll.plans.select` with the
communicator's family, on the measured topology) is simulated under
:class:`wacoll.plans.sim.LinkModel` with

* ``measured``: the measured topology, as it is;
* ``configured``: the testbed's configured links;
* ``mended``: :func:`mended_model`: the best of the run's link measurements
  (a loaded machine only ever lowers a measured rate), the runner's cost per
  receive (a call ping-pong through ``wacoll.Comm`` against a raw MPI one, in the
  same run) and a waking rank's median delay, short messages as TCP bursts served first come, first served, the
  links' measured capacity together (the testbed's relay shares the machine's two
  cores), plus the case's start skew.

All three use the simulator as it is now (wide-area messages of one pair of ranks
cross their link in order: ``LinkModel(ordered=True)``, the default).

The error of a case is ``(predicted - measured) / measured``. The report gives the
median |error| per family and network and overall (goal: the measured topology's
median within 15 %), the load before and after each network's run (``uptime``),
and writes ``benchmarks/results/model_error.{csv,txt,png}`` and the raw
``model_error_measured.json`` (one entry per network, kept across runs of single
networks; ``--predict-only`` redoes the predictions and the report from it).
``model_error-loaded.*`` are the same report for a run on a machine busy with other
work (load 10-12 on 2 cores), made before the run measured long bursts and the
links' capacity together.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_networks import NETWORKS
from bench_sim_vs_testbed import _pingpong, time_case

from _harness import (
    RESULTS,
    ROOT,
    Report,
    command_line,
    failure,
    goal_band,
    human,
    median,
    pyplot,
    report_check,
    save_figure,
    started_testbed,
    write_csv,
)

sys.path.append(str(Path(__file__).resolve().parent / "apps"))  # the workers' MPI side
from _rankside import import_wacoll, now, timed  # noqa: E402

FAMILIES = ("magpie", "mpich", "gridmpi", "modern", "recent", "hierarchical")
OPS = ("bcast", "allreduce", "allgather")
LEVEL = "commutative"
GOAL = 0.15
MODELS = ("measured", "configured", "mended")
RAW = RESULTS / "model_error_measured.json"
STEM = "model_error"
MARGIN = 0.1
PINGPONG_REPS = 20
WAKE_REPS = 25
LONG_BURST = 2 << 20


# ------------------------------------------------------------------ cases and plans
def topology_of(network):
    """The testbed's configured topology for ``network`` (a key of ``NETWORKS``)."""
    from wacoll import Topology

    sizes, latency, bandwidth, _, _ = NETWORKS[network]
    return Topology.from_sizes(list(sizes), wan_latency=latency, wan_bandwidth=bandwidth)


def families_for(op):
    """The families of :data:`FAMILIES` that build ``op``."""
    from wacoll.plans.families import builders

    return [f for f in FAMILIES if op in builders(f)]


def case_list(network):
    """``(label, op, bytes)`` of ``network``'s cases."""
    sizes = NETWORKS[network][3]
    return [(f"{op} {human(n)}", op, n) for op in OPS for n in sizes]


def plan_of(topology, op, nbytes, family):
    """The plan ``wacoll.Comm(world, topology, family=family)`` runs for the case:
    float64 data, root 0, a SUM at :data:`LEVEL`."""
    from wacoll.plans import Call, select

    call = Call(
        op,
        count=nbytes // 8,
        itemsize=8,
        level=LEVEL if op == "allreduce" else None,
        root=0 if op == "bcast" else None,
    )
    return select(call, topology, comm_family=family).build(topology)


# ------------------------------------------------------------------ worker (under mpiexec)
def _pairs(clusters):
    """Ping-pong pairs, every rank busy: ``intra`` pairs neighbours in each cluster,
    ``wan`` pairs the k-th rank of cluster 2i with the k-th of cluster 2i + 1."""
    intra = [(c[i], c[i + 1]) for c in clusters for i in range(0, len(c) - 1, 2)]
    wan = [
        (a, b)
        for i in range(0, len(clusters) - 1, 2)
        for a, b in zip(clusters[i], clusters[i + 1])
    ]
    return {"intra": intra, "wan": wan}


def _call_pingpong(w, wacoll, pairs, reps=PINGPONG_REPS):
    """The one-way time of a 1-element Bcast between the two ranks of each pair, the
    root alternating, through ``wacoll.Comm`` (its call path and the runner's waits):
    every pair at once; the median per pair, gathered on every rank."""
    import numpy as np

    rank = w.Get_rank()
    color = next((k for k, p in enumerate(pairs) if rank in p), len(pairs))
    sub = w.Split(color, rank)
    mine = []
    if color < len(pairs):
        comm = wacoll.Comm(sub, wacoll.Topology.single(2), family="mpich", validate=False)
        buf = np.zeros(1)
        times = []
        for i in range(2 * (reps + 3)):
            if i % 2 == 0:
                t0 = now()
            comm.Bcast(buf, root=i % 2)
            if i % 2 == 1 and i >= 6:  # three round trips to warm up
                times.append((now() - t0) / 2)
        if sub.Get_rank() == 0:
            mine = [statistics.median(times)]
    sub.Free()
    return sorted(x for part in w.allgather(mine) for x in part)


def _wake_delays(w, reps=WAKE_REPS):
    """How late each rank runs after a common start instant it slept until (the
    delay of a rank that wakes on this loaded machine): every rank's, ``reps``
    times, gathered on every rank."""
    from _rankside import common_start

    out = []
    for _ in range(reps):
        start, _ = common_start(w, 0.02)
        out.extend(w.allgather(now() - start))
    return out


def _aggregate(w, clusters, nbytes, reps=2):
    """Every cluster's coordinator sends ``nbytes`` to every other's at once, from a
    common start (after one untimed round): ``(bytes, [seconds to the last finish,
    ...])``, the wide-area traffic all links carry together."""
    import numpy as np
    from mpi4py import MPI

    rank = w.Get_rank()
    coords = [c[0] for c in clusters]
    peers = [c for c in coords if c != rank] if rank in coords else []
    out = np.zeros(nbytes, np.uint8)
    into = {p: np.empty(nbytes, np.uint8) for p in peers}
    times = []
    for k in range(reps + 1):

        def burst():
            reqs = [w.Irecv(into[p], source=p, tag=7411) for p in peers]
            reqs += [w.Isend(out, dest=p, tag=7411) for p in peers]
            MPI.Request.Waitall(reqs)

        t = timed(w, MARGIN, burst)
        if k and t is not None:
            times.append(t)
    return {"bytes": nbytes * len(coords) * (len(coords) - 1), "seconds": times}


def worker(spec_path, out_path):
    """Measure the links, ping-pong, time every case; rank 0 writes ``out_path``."""
    from mpi4py import MPI

    w = MPI.COMM_WORLD
    rank, size = w.Get_rank(), w.Get_size()
    wacoll = import_wacoll(w)
    from wacoll.mpi.links import measure_links, measured_topology

    spec = json.loads(Path(spec_path).read_text())
    reps = int(spec["reps"])
    configured = wacoll.topology_from_comm(w)
    clusters = [list(c) for c in configured.clusters]
    t0 = now()
    figures = measure_links(w, configured.clusters)
    link_seconds = now() - t0
    topology = measured_topology(configured.clusters, figures)
    pingpong = {}
    for what, pairs in _pairs(clusters).items():
        got = _pingpong(w, pairs, 1, PINGPONG_REPS)
        # every pair's median, gathered (rank 0 may not be in a wan pair)
        first = next((a for a, b in pairs if rank in (a, b)), None)
        mine = [got[0]] if got and rank == first else []
        pingpong[what] = sorted(x for part in w.allgather(mine) for x in part)
    pingpong["wacoll"] = _call_pingpong(w, wacoll, _pairs(clusters)["intra"])
    pingpong["wake"] = _wake_delays(w)
    comms = {f: wacoll.Comm(w, topology, family=f, validate=False) for f in FAMILIES}
    results = {
        "_meta": {
            "size": size,
            "reps": reps,
            "clusters": clusters,
            "figures": figures,
            "link_seconds": link_seconds,
            "pingpong": pingpong,
        }
    }
    for case in spec["cases"]:
        results[case["label"]] = time_case(
            w,
            comms,
            case["families"],
            case,
            reps,
            MARGIN,
            warmup=int(spec.get("warmup", 1)),
            level=LEVEL,
        )
    results["_meta"]["figures_after"] = measure_links(w, configured.clusters)
    # the same measurement with bursts of 2 MiB instead of 256 KiB: a rate the
    # machine's load disturbs less (a short burst on a fast link lasts ~3 ms)
    results["_meta"]["figures_long"] = measure_links(
        w, configured.clusters, large=LONG_BURST // 2, window=2
    )
    results["_meta"]["aggregate"] = _aggregate(w, clusters, 2 * LONG_BURST)
    if rank == 0:
        Path(out_path).write_text(json.dumps(results, indent=1))


# ------------------------------------------------------------------ testbed (driver)
def source_state():
    """The checkout the ranks ran: its commit, and the wacoll files changed in the
    working tree (the tree is shared; the ranks import what it holds)."""

    def git(*args):
        try:
            return subprocess.run(
                ["git", *args], capture_output=True, text=True, cwd=ROOT, timeout=30
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return "?"

    changed = [
        line.split(maxsplit=1)[-1]
        for line in git("status", "--porcelain", "wacoll").splitlines()
    ]
    return f"commit {git('rev-parse', '--short', 'HEAD')}" + (
        f", changed in the working tree: {', '.join(changed)}" if changed else ""
    )


def uptime():
    """The machine's ``uptime`` line (the load of the other work sharing it)."""
    try:
        return subprocess.run(
            ["uptime"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"uptime failed: {exc}"


def budget(network, reps):
    """Seconds the measurement should take at most (from configured predictions)."""
    from wacoll.plans.sim import LinkModel, simulate

    topo = topology_of(network)
    total = 0.0
    for _, op, nbytes in case_list(network):
        for f in families_for(op):
            total += simulate(plan_of(topo, op, nbytes, f), LinkModel(topo)).completion
    return 300 + 4 * total * (reps + 1)


def run_network(network, reps, say):
    """One testbed run of ``network``; the raw results (with their load), or None."""
    from wacoll.emulate import TestbedError, unavailable_reason

    reason = unavailable_reason()
    if reason:
        say(f"{network}: no testbed here ({reason})")
        return None
    topo = topology_of(network)
    spec = {
        "reps": reps,
        "cases": [
            {"label": label, "op": op, "bytes": nbytes, "families": families_for(op)}
            for label, op, nbytes in case_list(network)
        ],
    }
    timeout = budget(network, reps)
    before = uptime()
    say(
        f"{network}: {'x'.join(map(str, NETWORKS[network][0]))}, "
        f"{NETWORKS[network][1] * 1e3:g} ms, {NETWORKS[network][2] / 1e6:g} MB/s; "
        f"{len(spec['cases'])} cases, {reps} runs; time limit {timeout:.0f} s"
    )
    say(f"  before: {before}")
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="moderr-") as tmp:
        spec_path, out_path = Path(tmp) / "cases.json", Path(tmp) / "measured.json"
        spec_path.write_text(json.dumps(spec))
        try:
            with started_testbed(
                topo, name=f"me{network[:6]}", time_limit=timeout + 900
            ) as (tb, caught):
                report_check(say, tb.last_check, caught)
                run = tb.run(
                    [
                        sys.executable,
                        str(Path(__file__).resolve()),
                        "--worker",
                        str(spec_path),
                        str(out_path),
                    ],
                    timeout=timeout,
                    capture=False,
                )
                if not run.ok:
                    say(f"{network}: the measurement failed ({failure(run)})")
                    return None
                raw = json.loads(out_path.read_text())
                raw["_meta"]["transport"] = run.transport
                raw["_meta"]["check"] = tb.last_check.as_dict()
        except TestbedError as exc:
            say(f"{network}: the testbed failed: {exc}")
            return None
    after = uptime()
    say(f"  after:  {after} ({time.monotonic() - t0:.0f} s)")
    raw["_meta"].update(
        {
            "uptime_before": before,
            "uptime_after": after,
            "source": source_state(),
            "seconds": time.monotonic() - t0,
            "when": time.strftime("%Y-%m-%d %H:%M:%S"),
        }
    )
    return raw


# ------------------------------------------------------------------ models
def best_links(raw):
    """The links of the run's link measurements, per pair the shortest round trip
    (of the two at the start and the end of the run) and the highest rate (of those
    two and the one with long bursts, when the run made it): a busy machine only
    ever adds delay and takes bandwidth, so the best figure is the one load
    disturbed least."""
    meta = raw["_meta"]
    out = {"rtt": dict(meta["figures"]["rtt"]), "rate": dict(meta["figures"]["rate"])}
    for key, better, sources in (
        ("rtt", min, ("figures_after",)),
        ("rate", max, ("figures_after", "figures_long")),
    ):
        for source in sources:
            for pair, value in meta.get(source, {}).get(key, {}).items():
                out[key][pair] = better(out[key].get(pair, value), value)
    return out


def software_cost(raw):
    """Seconds the runner adds to each receive beyond MPI's own: the median one-way
    time of a call ping-pong through ``wacoll.Comm`` minus that of a raw MPI
    ping-pong, both loaded (every rank in a pair); 0 when the run did not time it."""
    pp = raw["_meta"].get("pingpong", {})
    if not pp.get("wacoll") or not pp.get("intra"):
        return 0.0
    return max(0.0, statistics.median(pp["wacoll"]) - statistics.median(pp["intra"]))


def wake_cost(raw):
    """The median delay of a rank that slept until an instant (every rank, several
    times, in the run): what a rank that naps while it waits for a message loses
    before it goes on, on this machine under its load (the median: the typical
    run's, as the measured times are medians); 0 when the run did not time it."""
    wake = raw["_meta"].get("pingpong", {}).get("wake")
    return statistics.median(wake) if wake else 0.0


def wan_capacity(raw):
    """What the run's wide-area links carried together (bytes/s), every pair of
    clusters at once: the bytes over the fastest round's time less one wide-area
    round trip (the first bytes' latency and MPI's handshake); None when the run
    did not time it."""
    agg = raw["_meta"].get("aggregate")
    if not agg or not agg["seconds"]:
        return None
    rtt = 2 * measured_topology_of(raw).wan.latency
    return agg["bytes"] / max(min(agg["seconds"]) - rtt, 1e-9)


def burst_window(network):
    """Bytes TCP sends at once on ``network``'s testbed: its initial congestion window,
    ten packets of the MTU the testbed picks (:func:`wacoll.emulate.layout.auto_mtu`)
    less 52 bytes of IP and TCP headers."""
    from wacoll.emulate.layout import auto_mtu

    return 10 * (auto_mtu(NETWORKS[network][2]) - 52)


def mended_model(network, raw):
    """The mended model of a network's run: :class:`wacoll.plans.sim.LinkModel` on the
    best of the run's link measurements (:func:`best_links`), with

    * the runner's cost per receive (:func:`software_cost`) and a waking rank's
      delay (:func:`wake_cost`) as ``recv_overhead``;
    * the short wide-area messages as bursts (``window``: :func:`burst_window`);
    * what the wide-area links carry together (``wan_capacity``:
      :func:`wan_capacity`, the relay's share of this machine's cores);
    * (the default) the wide-area messages of one pair of ranks in order;

    :func:`rows_of` adds the case's start skew (a cost of the timing protocol, not of
    the collective)."""
    from wacoll.mpi.links import measured_topology
    from wacoll.plans.sim import LinkModel

    clusters = [tuple(c) for c in raw["_meta"]["clusters"]]
    return LinkModel(
        measured_topology(clusters, best_links(raw)),
        recv_overhead=software_cost(raw) + wake_cost(raw),
        window=burst_window(network),
        wan_capacity=wan_capacity(raw),
    )


def measured_topology_of(raw, key="figures"):
    from wacoll.mpi.links import measured_topology

    clusters = [tuple(c) for c in raw["_meta"]["clusters"]]
    return measured_topology(clusters, raw["_meta"][key])


def rows_of(network, raw):
    """One row per (case, family) of ``network``'s raw results."""
    from wacoll.plans.sim import LinkModel, simulate

    configured = topology_of(network)
    topo = measured_topology_of(raw)
    models = {
        "measured": LinkModel(topo),
        "configured": LinkModel(configured),
        "mended": mended_model(network, raw),
    }
    rows = []
    for label, op, nbytes in case_list(network):
        m = raw.get(label)
        if m is None:
            continue
        skew = median(m["times"]["null"])
        for family in families_for(op):
            plan = plan_of(topo, op, nbytes, family)
            times = [t for t in m["times"].get(family, []) if t is not None]
            meas = median(times)
            row = {
                "network": network,
                "case": label,
                "op": op,
                "bytes": nbytes,
                "family": family,
                "algorithm": plan.algorithm,
                "messages": len(plan.messages()),
                "measured": meas,
                "measured_min": min(times) if times else None,
                "runs": len(times),
                "start_skew": skew,
                "correct": m["correct"].get(family),
                "same_plan": m["plan"].get(family) == [plan.algorithm, plan.nblocks],
            }
            for name, model in models.items():
                pred = simulate(plan, model).completion
                if name == "mended" and skew is not None:
                    pred += skew
                row[f"pred_{name}"] = pred
                row[f"err_{name}"] = (pred - meas) / meas if meas else None
            rows.append(row)
    return rows


def _steps():
    """The mends one after the other: ``(label, model(network, raw), add skew)``."""
    from wacoll.mpi.links import measured_topology
    from wacoll.plans.sim import LinkModel

    def best(raw):
        return measured_topology(
            [tuple(c) for c in raw["_meta"]["clusters"]], best_links(raw)
        )

    return [
        (
            "measured topology, pairs' messages sharing (the simulator before)",
            lambda n, raw: LinkModel(measured_topology_of(raw), ordered=False),
            False,
        ),
        (
            "measured topology (a pair's messages in order)",
            lambda n, raw: LinkModel(measured_topology_of(raw)),
            False,
        ),
        ("+ the start skew", lambda n, raw: LinkModel(measured_topology_of(raw)), True),
        (
            "+ the best of the run's link measurements",
            lambda n, raw: LinkModel(best(raw)),
            True,
        ),
        (
            "+ the runner's and waking cost per receive",
            lambda n, raw: LinkModel(
                best(raw), recv_overhead=software_cost(raw) + wake_cost(raw)
            ),
            True,
        ),
        (
            "+ short messages as bursts",
            lambda n, raw: LinkModel(
                best(raw),
                recv_overhead=software_cost(raw) + wake_cost(raw),
                window=burst_window(n),
            ),
            True,
        ),
        (
            "+ the links' capacity together (= mended)",
            lambda n, raw: mended_model(n, raw),
            True,
        ),
    ]


def ablation(say, raws):
    """The overall and per-network median |error| after each mend (:func:`_steps`)."""
    from wacoll.plans.sim import simulate

    say("\nthe mends one after the other: median |error| overall and per network")
    for label, model_of, skewed in _steps():
        errs = {}
        for network, raw in raws.items():
            model, topo = model_of(network, raw), measured_topology_of(raw)
            for case, op, nbytes in case_list(network):
                m = raw.get(case)
                if m is None:
                    continue
                skew = median(m["times"]["null"]) or 0.0
                for family in families_for(op):
                    meas = median(m["times"].get(family))
                    if not meas:
                        continue
                    pred = simulate(plan_of(topo, op, nbytes, family), model).completion
                    pred += skew if skewed else 0.0
                    errs.setdefault(network, []).append(abs(pred - meas) / meas)
        every = [e for v in errs.values() for e in v]
        say(
            f"  {label:66} {statistics.median(every):6.1%}  ("
            + ", ".join(f"{n} {statistics.median(v):.0%}" for n, v in errs.items())
            + ")"
        )


# ------------------------------------------------------------------ report
FIELDS = [
    "network",
    "case",
    "op",
    "bytes",
    "family",
    "algorithm",
    "messages",
    "measured",
    "measured_min",
    "runs",
    "start_skew",
    "correct",
    "same_plan",
] + [f"{k}_{n}" for n in MODELS for k in ("pred", "err")]


def _ms(s):
    return "-" if s is None else f"{s * 1e3:.2f}"


def _pct(e):
    return "-" if e is None else f"{e:+.0%}"


def _link_sum(raw):
    """The sum of the wide-area links' measured bandwidths (bytes/s)."""
    topo = measured_topology_of(raw)
    k = topo.nclusters
    return sum(
        topo.wan_link(a, b).bandwidth for a in range(k) for b in range(k) if a != b
    )


def links_text(network, raw):
    """The measured links beside the configured ones."""
    configured = topology_of(network)
    out = []
    names = {
        "figures": "start of run",
        "figures_after": "end of run",
        "figures_long": f"end, {human(LONG_BURST)} bursts",
    }
    for key, name in names.items():
        if key not in raw["_meta"]:
            continue
        topo = measured_topology_of(raw, key)
        out.append(
            f"  measured links ({name}): "
            f"wide area {topo.wan.latency * 1e3:.3f} ms, "
            f"{topo.wan.bandwidth / 1e6:.2f} MB/s (configured "
            f"{configured.wan.latency * 1e3:g} ms, "
            f"{configured.wan.bandwidth / 1e6:g} MB/s); inside "
            f"{topo.intra.latency * 1e6:.0f} us, "
            f"{topo.intra.bandwidth / 1e6:.0f} MB/s (configured "
            f"{configured.intra.latency * 1e6:.0f} us, "
            f"{configured.intra.bandwidth / 1e6:.0f} MB/s)"
        )
    pp = raw["_meta"].get("pingpong", {})
    if pp:
        out.append(
            "  loaded 1 B one-way times (median per pair): "
            + "; ".join(
                f"{k} " + ", ".join(f"{x * 1e6:.0f}" for x in v) + " us"
                for k, v in pp.items()
                if v and k in ("intra", "wan", "wacoll")
            )
        )
    wake = pp.get("wake")
    if wake:
        wake = sorted(wake)
        out.append(
            f"  a sleeping rank wakes late by {statistics.median(wake) * 1e6:.0f} us "
            f"(median; mean {statistics.fmean(wake) * 1e6:.0f}, 90th percentile "
            f"{wake[int(0.9 * len(wake))] * 1e6:.0f}, max {wake[-1] * 1e6:.0f}; "
            f"{len(wake)} wake-ups)"
        )
    cap = wan_capacity(raw)
    out.append(
        f"  mended model: recv_overhead {software_cost(raw) * 1e6:.0f} us (runner) + "
        f"{wake_cost(raw) * 1e6:.0f} us (waking), window "
        f"{burst_window(network)} bytes, wan_capacity "
        + (
            "-"
            if cap is None
            else f"{cap / 1e6:.1f} MB/s (the links' sum {_link_sum(raw) / 1e6:.1f} MB/s)"
        )
    )
    return out


def report(say, raws, rows):
    for network, raw in raws.items():
        meta = raw["_meta"]
        say(
            f"\n{network}: measured {meta.get('when', '?')}, {meta['reps']} runs per "
            f"case, transport {meta.get('transport', '?')}"
        )
        say(f"  command: {meta.get('command', '?')}")
        if meta.get("source"):
            say(f"  source: {meta['source']}")
        say(f"  load before: {meta.get('uptime_before', '?')}")
        say(f"  load after:  {meta.get('uptime_after', '?')}")
        for line in links_text(network, raw):
            say(line)
    say("")
    head = (
        f"{'network':8} {'case':17} {'family':12} {'algorithm':22} {'meas ms':>9} "
        f"{'skew':>5}" + "".join(f" {n[:8]:>9} {'err':>5}" for n in MODELS)
    )
    say(head)
    say("-" * len(head))
    for r in rows:
        say(
            f"{r['network']:8} {r['case']:17} {r['family']:12} {r['algorithm'][:22]:22} "
            f"{_ms(r['measured']):>9} {_ms(r['start_skew']):>5}"
            + "".join(
                f" {_ms(r['pred_' + n]):>9} {_pct(r['err_' + n]):>5}" for n in MODELS
            )
            + ("" if r["correct"] else "  WRONG RESULT")
            + ("" if r["same_plan"] else "  (ran another plan)")
        )
    say(
        "(ms; skew = median of the null operation; err = (predicted - measured) / "
        "measured; measured = LinkModel on the measured topology, configured = on the "
        "configured links, mended = see the docstring of bench_model_error.mended_model)"
    )
    return summary(say, rows)


def _med_abs(rows, name):
    errs = [abs(r[f"err_{name}"]) for r in rows if r.get(f"err_{name}") is not None]
    return statistics.median(errs) if errs else None


def summary(say, rows):
    networks = list(dict.fromkeys(r["network"] for r in rows))
    say(
        "\nmedian |error| per family and network (measured topology / configured links "
        "/ mended)"
    )
    head = f"{'family':13}" + "".join(f" {n:>20}" for n in networks) + f" {'all':>20}"
    say(head)
    table = {}
    for family in FAMILIES + ("all",):
        cells = []
        for network in networks + ["all"]:
            sel = [
                r
                for r in rows
                if (family == "all" or r["family"] == family)
                and (network == "all" or r["network"] == network)
            ]
            vals = [_med_abs(sel, n) for n in MODELS]
            table[family, network] = vals
            cells.append("/".join("-" if v is None else f"{v:.0%}" for v in vals))
        say(f"{family:13}" + "".join(f" {c:>20}" for c in cells))
    for name in MODELS:
        v = table["all", "all"][MODELS.index(name)]
        if v is not None:
            n = sum(r.get(f"err_{name}") is not None for r in rows)
            within = sum(
                abs(r[f"err_{name}"]) <= GOAL
                for r in rows
                if r.get(f"err_{name}") is not None
            )
            say(
                f"overall, {name:10}: median |error| {v:.1%}, {within}/{n} cases within "
                f"{GOAL:.0%} -> goal {'MET' if v <= GOAL else 'MISSED'}"
            )
    for name in MODELS:
        by = {}
        for r in rows:
            if r.get(f"err_{name}") is not None:
                by.setdefault((r["network"], human(r["bytes"])), []).append(
                    r[f"err_{name}"]
                )
        say(
            f"  {name:10} signed median error by network and size: "
            + "; ".join(
                f"{n} {s} {statistics.median(v):+.0%}" for (n, s), v in by.items()
            )
        )
    return table


def plot(path, rows, table):
    plt = pyplot()
    networks = list(dict.fromkeys(r["network"] for r in rows))
    fig, axes = plt.subplots(1, 2, figsize=(14, 5.5), layout="constrained")
    ax = axes[0]
    markers = {"measured": "o", "configured": "x", "mended": "s"}
    for name, mk in markers.items():
        pts = [
            (r["measured"] * 1e3, r[f"pred_{name}"] * 1e3)
            for r in rows
            if r.get("measured") and r.get(f"pred_{name}")
        ]
        if pts:
            ax.scatter(*zip(*pts), marker=mk, label=name, alpha=0.6, s=18)
    vals = [r["measured"] * 1e3 for r in rows if r.get("measured")]
    if vals:
        goal_band(ax, min(vals) * 0.5, max(vals) * 2, GOAL)
    else:
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel("measured median (ms)")
    ax.set_ylabel("predicted (ms)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    ax.set_title("every case, four networks")
    ax = axes[1]
    width = 0.8 / len(MODELS)
    families = list(FAMILIES) + ["all"]
    for k, name in enumerate(MODELS):
        for j, network in enumerate(networks + ["all"]):
            xs, ys = [], []
            for i, family in enumerate(families):
                v = table.get((family, network), [None] * len(MODELS))[k]
                if v is not None:
                    xs.append(j * (len(families) + 1) + i + (k - 1) * width)
                    ys.append(v * 100)
            ax.bar(xs, ys, width, color=f"C{k}", label=name if j == 0 else None)
    ax.axhline(GOAL * 100, color="k", ls="--", lw=0.8, label=f"goal {GOAL:.0%}")
    ticks = [
        j * (len(families) + 1) + i
        for j in range(len(networks) + 1)
        for i in range(len(families))
    ]
    ax.set_xticks(
        ticks, [f for _ in networks + ["all"] for f in families], rotation=90, fontsize=6
    )
    for j, network in enumerate(networks + ["all networks"]):
        ax.text(
            j * (len(families) + 1) + (len(families) - 1) / 2,
            1.0,
            network,
            transform=ax.get_xaxis_transform(),
            ha="center",
            va="bottom",
            fontsize=8,
        )
    ax.set_ylabel("median |error| (%)")
    ax.set_title("median |error| per family and network", pad=16)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.suptitle("simulator (LinkModel) against the emulated testbed")
    save_figure(fig, path, 110)


# ------------------------------------------------------------------ main
def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--networks",
        default=",".join(NETWORKS),
        help=f"comma-separated, of {', '.join(NETWORKS)}",
    )
    p.add_argument("--reps", type=int, default=5)
    p.add_argument(
        "--predict-only",
        action="store_true",
        help="no testbed: the predictions and report from the saved raw file",
    )
    p.add_argument(
        "--raw",
        default=str(RAW),
        help="the raw measurements (read, and updated by a run)",
    )
    p.add_argument(
        "--stem",
        default=STEM,
        help="the result files' name in benchmarks/results (.csv, .txt, .png)",
    )
    p.add_argument("--worker", nargs=2, metavar=("SPEC", "OUT"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        worker(*args.worker)
        return 0
    names = [n for n in args.networks.split(",") if n]
    unknown = set(names) - set(NETWORKS)
    if unknown:
        p.error(f"unknown network(s) {sorted(unknown)}; known: {list(NETWORKS)}")
    say = Report()
    say("wacoll's simulator against the emulated testbed, from the measured topology")
    say(f"command: {command_line(__file__, argv)}")
    raw_path = Path(args.raw)
    raws = json.loads(raw_path.read_text()) if raw_path.exists() else {}
    if not args.predict_only:
        for network in names:
            raw = run_network(network, args.reps, say)
            if raw is None:
                return 1
            raw["_meta"]["command"] = command_line(__file__, argv)
            raws[network] = raw
            raw_path.write_text(json.dumps(raws, indent=1))
    raws = {n: raws[n] for n in NETWORKS if n in raws}
    if not raws:
        say("no measurements saved yet")
        return 1
    rows = [r for network, raw in raws.items() for r in rows_of(network, raw)]
    table = report(say, raws, rows)
    ablation(say, raws)
    write_csv(RESULTS / f"{args.stem}.csv", FIELDS, rows)
    plot(RESULTS / f"{args.stem}.png", rows, table)
    say(f"\nwrote {RESULTS.relative_to(ROOT)}/{args.stem}.csv, .png, .txt")
    say.write(RESULTS / f"{args.stem}.txt")
    return 0


if __name__ == "__main__":
    sys.exit(main())
