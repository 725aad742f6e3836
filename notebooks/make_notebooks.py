"""Write the notebooks in this folder from their cell sources (run after editing).

    python notebooks/make_notebooks.py

Keeping the cells here makes notebook changes reviewable as plain Python diffs.
"""

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).parent

EXPLORE = [
    new_markdown_cell("""# Exploring communication plans with wacoll

This notebook builds trees for nodes of different speeds (Banikazemi et al.) and a
MagPIe plan for clusters joined by slow wide-area links, proves them with the prover,
predicts their cost with the simulator, and draws them."""),
    new_code_cell("""import matplotlib
import matplotlib.pyplot as plt
from wacoll import Topology, trees
from wacoll.plans import build
from wacoll.plans.sim import simulate, LinkModel, TiniModel
from wacoll.tools.viz import draw_tree, draw_plan, draw_timeline, hops"""),
    new_markdown_cell("""## Heterogeneous nodes: binomial, SPOC, FNF and optimal trees

Banikazemi's Figure 1: eight workstations, the source and one other node fast
(t_ini = 100 us), the others slow (300 us). The optimal tree lets the two fast nodes
serve everyone."""),
    new_code_cell("""costs = [100, 300, 300, 300, 300, 100, 300, 300]   # microseconds
shapes = {
    "binomial": trees.binomial(8),
    "SPOC": trees.spoc(costs),
    "FNF": trees.fnf(costs),
    "optimal": trees.optimal(costs),
}
speed = [0 if c == 100 else 1 for c in costs]
fig, axes = plt.subplots(1, 4, figsize=(16, 4.6), layout="constrained")
for ax, (name, t) in zip(axes, shapes.items()):
    draw_tree(t, ax=ax, costs=costs, clusters=speed,
              names={0: "fast node (100 µs)", 1: "slow node (300 µs)"},
              title=f"{name}: {trees.bcast_time(t, costs):g} µs")
fig.suptitle("Broadcast from node 0: the tree each builder makes and its completion "
             "(lower is better)")
times = {name: trees.bcast_time(t, costs) for name, t in shapes.items()}
times"""),
    new_code_cell(
        """assert times == {"binomial": 700, "SPOC": 500, "FNF": 400, "optimal": 400}"""
    ),
    new_markdown_cell("""FNF is a greedy heuristic; on random instances it is usually optimal and within about
1% on average (the paper's Table 2). The same trees feed any plan builder: here the
simulator runs a broadcast plan over each tree under the t_ini model."""),
    new_code_cell("""import random
rng = random.Random(7)
rand_costs = [rng.choice(range(100, 900, 100)) for _ in range(9)]
topo_h = Topology.single(9).with_t_ini([c * 1e-6 for c in rand_costs])
for name in ("binomial", "spoc", "fnf", "optimal"):
    plan = build("bcast", topo_h, "tree", tree=name)
    print(f"{name:9s} {simulate(plan, TiniModel(topo_h)).completion * 1e6:8.1f} us")"""),
    new_markdown_cell("""## Two-level clusters: MagPIe vs MPICH

Four clusters of four ranks, 10 ms and 1 MB/s between clusters (MagPIe's setting).
The prover proves each plan and measures its wide-area traffic; MagPIe's broadcast
crosses the wide area once per remote cluster, with a single wide-area latency."""),
    new_code_cell("""topo = Topology.from_sizes([4, 4, 4, 4], wan_latency=0.010, wan_bandwidth=1e6)
plans = {fam: build("bcast", topo, fam, root=0, count=65536) for fam in ("magpie", "mpich")}
for fam, plan in plans.items():
    r = plan.prove()
    print(f"{fam:7s} wide-area messages {r.wide_area_messages:2d}  hops {r.max_wide_area_hops}"
          f"  optimal: {r.optimality}")
fig, axes = plt.subplots(1, 2, figsize=(12, 5), layout="constrained")
for ax, (fam, plan) in zip(axes, plans.items()):
    r = plan.prove()
    draw_plan(plan, ax=ax, title=f"{fam} broadcast of 64 KiB\\n{r.wide_area_messages} "
                                 f"wide-area messages, at most {hops(r.max_wide_area_hops)}")"""),
    new_code_cell("""results = {fam: simulate(plan, LinkModel(topo)) for fam, plan in plans.items()}
for fam, res in results.items():
    print(f"{fam:7s} predicted completion {res.completion * 1e3:7.1f} ms")
fig, axes = plt.subplots(2, 1, figsize=(12, 8.5), sharex=True, layout="constrained")
for ax, res in zip(axes, results.values()):
    draw_timeline(res, ax=ax, unit="ms")   # the title names the call and its level
fig.suptitle("Simulated timelines on 4 x 4 ranks, 10 ms / 1 MB/s wide area: each "
             "message in flight under its sender's steps")
assert results["magpie"].completion < results["mpich"].completion"""),
    new_markdown_cell("""## Every operation, side by side

Wide-area messages, the most wide-area hops on any path, MagPIe's optimality, and the
predicted time, for a few operations at the associative level."""),
    new_code_cell("""rows = []
for op in ("barrier", "bcast", "allgather", "reduce", "allreduce", "alltoall"):
    for fam in ("magpie", "mpich"):
        kw = {"level": "associative"} if op in ("reduce", "allreduce") else {}
        if op != "barrier":
            kw["count"] = 1024
        plan = build(op, topo, fam, **kw)
        r = plan.prove()
        t = simulate(plan, LinkModel(topo)).completion
        rows.append((op, fam, r.wide_area_messages, r.max_wide_area_hops, r.optimality, t))
print(f"{'op':10s}{'family':8s}{'WAN msgs':>9s}{'hops':>6s}  {'optimal':8s}{'time':>10s}")
for op, fam, m, h, o, t in rows:
    print(f"{op:10s}{fam:8s}{m:9d}{h:6d}  {o:8s}{t * 1e3:8.1f} ms")"""),
    new_markdown_cell("""## Scripts

A plan exports as PATHS/LAM-style S-expression scripts, one per rank, and reads back
exactly (the reader proves the plan before returning it)."""),
    new_code_cell("""from wacoll.plans import scripts
plan = build("reduce", Topology.single(32), "tree", tree="lam", level="associative")
print(scripts.rank_scripts(plan)[12])
assert scripts.from_sexpr(scripts.to_sexpr(plan)) == plan"""),
]


HETERO = [
    new_markdown_cell("""# Broadcast trees for nodes of different speeds (Banikazemi et al.)

Each node has a *message initiation cost* t_ini: the time it is busy sending one
message (Banikazemi et al. measure it as half the round trip of a short message
between two nodes of one kind; `wacoll calibrate` does the same). A broadcast tree
should let fast nodes serve many others. This notebook draws the paper's Figure 1,
compares SPOC, Fastest-Node-First and the exact optimal tree, and repeats a small
version of its Table 2 (FNF against the optimum on random instances)."""),
    new_code_cell("""import random
import matplotlib.pyplot as plt
import numpy as np
from wacoll import trees
from wacoll.tools.viz import draw_tree"""),
    new_markdown_cell("""## Figure 1: eight workstations, two of them fast

Node 0 (the source) and node 5 have t_ini = 100 µs, the others 300 µs. A binomial
tree ignores speeds (700 µs); SPOC puts fast nodes where a binomial tree has the most
descendants (500 µs); FNF lets the earliest-free sender serve the fastest waiting
node and here matches the optimum (400 µs)."""),
    new_code_cell("""costs = [100, 300, 300, 300, 300, 100, 300, 300]   # µs
shapes = {"binomial": trees.binomial(8), "SPOC": trees.spoc(costs),
          "FNF": trees.fnf(costs), "optimal": trees.optimal(costs)}
times = {name: trees.bcast_time(t, costs) for name, t in shapes.items()}
fig, axes = plt.subplots(1, 4, figsize=(16, 4.2), layout="constrained")
for ax, (name, t) in zip(axes, shapes.items()):
    fast = [0 if c == 100 else 1 for c in costs]
    draw_tree(t, ax=ax, costs=costs, clusters=fast, title=f"{name}: {times[name]:g} µs",
              names={0: "fast node (100 µs)", 1: "slow node (300 µs)"})
fig.suptitle("Figure 1: broadcast from node 0, completion in each title "
             "(lower is better)")
assert times == {"binomial": 700, "SPOC": 500, "FNF": 400, "optimal": 400}
times"""),
    new_markdown_cell("""## Table 2 in small: FNF against the optimal tree

Random t_ini from {100, ..., 800} µs, a random source, N nodes; average broadcast
latency over 200 instances per N (the paper takes 10,000 with up to 9 nodes; the
exact tree is exponential in N)."""),
    new_code_cell("""rng = random.Random(1998)
rows = []
for n in range(3, 9):
    fnf_t, opt_t, same = [], [], 0
    for _ in range(200):
        c = [rng.choice(range(100, 900, 100)) for _ in range(n)]
        f, o = trees.bcast_time(trees.fnf(c), c), trees.bcast_time(trees.optimal(c), c)
        fnf_t.append(f)
        opt_t.append(o)
        same += f == o
    rows.append((n, np.mean(fnf_t), np.mean(opt_t), same / 200))
print(f"{'N':>3s}{'FNF (µs)':>10s}{'optimal (µs)':>14s}{'FNF/opt':>9s}{'equal':>7s}")
for n, f, o, s in rows:
    print(f"{n:3d}{f:10.1f}{o:14.1f}{f / o:9.4f}{s:7.0%}")
assert all(f / o < 1.02 for _, f, o, _ in rows)"""),
    new_code_cell("""fig, ax = plt.subplots(figsize=(7, 4), layout="constrained")
ns = [r[0] for r in rows]
ax.plot(ns, [r[1] for r in rows], "o-", label="FNF")
ax.plot(ns, [r[2] for r in rows], "s--", label="optimal")
ax.set_xlabel("nodes in the broadcast")
ax.set_ylabel("mean broadcast latency (µs)")
ax.set_xticks(ns)
ax.set_title("FNF is within 1-2 % of the optimal tree")
ax.legend(loc="upper left")
ax.grid(alpha=0.3)"""),
]

MAGPIE = [
    new_markdown_cell("""# MagPIe against MPICH: wide-area traffic and predicted time

Kielmann et al.'s MagPIe sends every data item across the wide area at most once
and along at most one wide-area hop; MPICH 1.1's algorithms ignore the clusters.
The prover counts each plan's wide-area messages and hops; the simulator predicts
its completion on 4 clusters of 4 ranks joined by 10 ms, 1 MB/s links."""),
    new_code_cell("""import matplotlib.pyplot as plt
import numpy as np
from wacoll import Topology
from wacoll.plans import build
from wacoll.plans.sim import simulate, LinkModel
from wacoll.tools.viz import draw_plan, hops

topo = Topology.from_sizes([4, 4, 4, 4], wan_latency=0.010, wan_bandwidth=1e6)
OPS = ("barrier", "bcast", "reduce", "allreduce", "allgather", "alltoall")
NAMES = {"magpie": "magpie (MagPIe's algorithms)", "mpich": "mpich (MPICH 1.1's algorithms)"}"""),
    new_code_cell("""metrics = {}
for op in OPS:
    for fam in ("magpie", "mpich"):
        kw = {} if op == "barrier" else {"count": 1024}
        if op in ("reduce", "allreduce"):
            kw["level"] = "associative"
        plan = build(op, topo, fam, **kw)
        r = plan.prove()
        metrics[op, fam] = (r.wide_area_messages, r.max_wide_area_hops,
                            simulate(plan, LinkModel(topo)).completion)
print(f"{'operation':10s}{'family':8s}{'WAN msgs':>9s}{'hops':>6s}{'time (ms)':>11s}")
for (op, fam), (m, h, t) in metrics.items():
    print(f"{op:10s}{fam:8s}{m:9d}{h:6d}{t * 1e3:11.1f}")
assert all(metrics[op, "magpie"][1] <= 1 for op in OPS if op != "barrier")"""),
    new_code_cell("""fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.2), layout="constrained")
x = np.arange(len(OPS))
for k, fam in enumerate(("magpie", "mpich")):
    ax1.bar(x + (k - 0.5) * 0.38, [metrics[op, fam][0] for op in OPS], 0.38,
            label=NAMES[fam])
    ax2.bar(x + (k - 0.5) * 0.38, [metrics[op, fam][2] * 1e3 for op in OPS], 0.38,
            label=NAMES[fam])
for ax, label in ((ax1, "wide-area messages"), (ax2, "predicted completion (ms)")):
    ax.set_xticks(x, OPS)
    ax.set_ylabel(label)
    ax.legend(loc="upper left")
    ax.grid(axis="y", alpha=0.3)
ax1.set_yscale("log")
ax1.set_title("wide-area messages per call (1 KiB per rank, log scale): fewer is better")
ax2.set_title("simulated time, 10 ms / 1 MB/s between clusters: lower is better")"""),
    new_markdown_cell("""## How the broadcasts cross the wide area

One column per cluster; wide-area messages dashed red. MagPIe's coordinator sends
one message to each other cluster's coordinator; MPICH's binomial tree crosses
cluster boundaries deeper in the tree."""),
    new_code_cell("""fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), layout="constrained")
for ax, fam in zip(axes, ("magpie", "mpich")):
    plan = build("bcast", topo, fam, count=1024)
    r = plan.prove()
    draw_plan(plan, ax=ax, title=f"{fam} broadcast of 1 KiB\\n{r.wide_area_messages} "
                                 f"wide-area messages, at most {hops(r.max_wide_area_hops)}")"""),
    new_markdown_cell("""## Message size sweep

Broadcast completion from 1 B to 1 MiB: at small sizes the wide-area latency
counts (MagPIe pays one, MPICH up to two per path), at large ones the bytes over the
1 MB/s links."""),
    new_code_cell("""sizes = [2 ** k for k in range(0, 21, 2)]
curves = {fam: [simulate(build("bcast", topo, fam, count=s), LinkModel(topo)).completion
                for s in sizes] for fam in ("magpie", "mpich")}
fig, ax = plt.subplots(figsize=(7, 4.2), layout="constrained")
for fam, ts in curves.items():
    ax.loglog(sizes, [t * 1e3 for t in ts], "o-", label=NAMES[fam])
ax.set_xlabel("message size (bytes)")
ax.set_ylabel("predicted completion (ms)")
ax.set_title("broadcast on 4 x 4 ranks, 10 ms / 1 MB/s wide area: lower is better")
ax.legend(loc="upper left")
ax.grid(alpha=0.3, which="both")
assert all(m <= p for m, p in zip(curves["magpie"], curves["mpich"]))"""),
]

MATSUDA = [
    new_markdown_cell("""# Matsuda et al.: n simultaneous wide-area senders

On *long-and-fast* networks the wide-area link is faster than any one node: two
clusters of 8 ranks with 1 Gbit/s (125 MB/s) node links, joined by a 10 Gbit/s link
with 5 ms one-way latency. One sender cannot fill it; Matsuda's modified van de
Geijn broadcast and Rabenseifner allreduce let `n` ranks per cluster send at once.
The simulator sweeps `n` and compares with the *farfirst* and *two-tier* baselines
(their Table 1)."""),
    new_code_cell("""import matplotlib.pyplot as plt
from wacoll import Topology
from wacoll.plans import build
from wacoll.plans.sim import simulate, LinkModel

topo = Topology.from_sizes([8, 8], intra_latency=5e-5, intra_bandwidth=125e6,
                           wan_latency=0.005, wan_bandwidth=1.25e9)
M = 1 << 24            # 16 MiB vectors (count of 1-byte items)
NS = [1, 2, 4, 8]"""),
    new_code_cell("""def t(op, **kw):
    kw.setdefault("level", "associative") if op == "allreduce" else None
    return simulate(build(op, topo, "gridmpi", count=M, **kw), LinkModel(topo)).completion

sweep = {op: [t(op, n=n) for n in NS] for op in ("bcast", "allreduce")}
base = {"bcast": t("bcast", algorithm="farfirst"),
        "allreduce": t("allreduce", algorithm="two-tier")}
for op in sweep:
    print(op, " ".join(f"n={n}: {x * 1e3:.1f} ms" for n, x in zip(NS, sweep[op])),
          f"| baseline {base[op] * 1e3:.1f} ms")
assert sweep["bcast"][-1] < sweep["bcast"][0] <= base["bcast"]"""),
    new_code_cell("""fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), layout="constrained")
names = {"bcast": "farfirst", "allreduce": "two-tier"}
for ax, op in zip(axes, ("bcast", "allreduce")):
    ax.plot(NS, [x * 1e3 for x in sweep[op]], "o-", label=f"gridmpi {op}, n senders")
    ax.axhline(base[op] * 1e3, color="tab:red", ls="--", label=names[op])
    ax.set_xscale("log", base=2)
    ax.set_xticks(NS, [str(n) for n in NS])
    ax.set_xlabel("wide-area senders per cluster, n")
    ax.set_ylabel("predicted completion (ms)")
    ax.set_ylim(bottom=0)
    ax.set_title(f"{op} of 16 MiB, 2 x 8 ranks: lower is better")
    ax.legend(loc="lower left")
    ax.grid(alpha=0.3)"""),
]

TESTBED = [
    new_markdown_cell("""# A run on the emulated testbed, traced

This notebook builds a small emulated wide-area grid on this machine (2 clusters of
2 ranks, 10 ms and 1 MB/s between them), measures it with `wacoll calibrate`, and
runs an application on it: `wacoll.Comm(MPI.COMM_WORLD, family="magpie",
trace=True)` and three `Allreduce` calls of 64 KiB (8192 float64 values, summed at
MPI's own level: for a float SUM, *commutative*). It draws the last call as traced,
under the simulator's prediction of the same plan, on the same time axis. The testbed
needs root and `/dev/net/tun`; where they are missing the notebook says why and
draws the prediction only."""),
    new_code_cell("""import json, os, sys, tempfile, textwrap
from pathlib import Path
import matplotlib.pyplot as plt
from wacoll import Topology
from wacoll.emulate import Testbed, unavailable_reason
from wacoll.plans import Call, select
from wacoll.plans.sim import simulate, LinkModel
from wacoll.tools.viz import call_title, draw_timeline, draw_trace

topo = Topology.from_sizes([2, 2], wan_latency=0.010, wan_bandwidth=1e6)
work = Path(tempfile.mkdtemp())
reason = unavailable_reason()
print("testbed:", "available" if reason is None else f"skipped: {reason}")"""),
    new_code_cell("""APP = textwrap.dedent('''
    import json
    from pathlib import Path
    import numpy as np
    from mpi4py import MPI
    import wacoll
    comm = wacoll.Comm(MPI.COMM_WORLD, family="magpie", trace=True)
    x, y = np.arange(8192.0), np.zeros(8192)
    for _ in range(3):
        comm.Allreduce(x, y, op=MPI.SUM)
    comm.write_trace("trace.json")
    plan = comm.last_plan   # the plan the calls ran, to simulate the same one
    if comm.Get_rank() == 0:
        Path("plan.json").write_text(json.dumps({k: getattr(plan, k) for k in (
            "family", "algorithm", "level", "arithmetic")}))
''')
(work / "app.py").write_text(APP)
calibration = trace = ran = None
if reason is None:
    with Testbed(topo, name=f"nbtl{os.getpid() % 100000}", netem="relay") as tb:
        cal = tb.run([sys.executable, "-m", "wacoll.cli", "calibrate", "--out",
                      str(work / "measured.toml"), "--report", str(work / "report.json"),
                      "--reps", "5", "--bandwidth-pairs", "0", "--no-progress"],
                     timeout=120, cwd=work)
        run = tb.run([sys.executable, str(work / "app.py")], timeout=120, cwd=work)
    assert cal.ok and run.ok, (cal.stderr or "")[-1500:] + (run.stderr or "")[-1500:]
    print(cal.stdout)
    calibration = json.loads((work / "report.json").read_text())
    trace = json.loads((work / "trace.json").read_text())
    ran = json.loads((work / "plan.json").read_text())
    assert calibration["clusters"] == [[0, 1], [2, 3]]"""),
    new_code_cell("""import numpy as np
from wacoll.calibration import plot_latency_heatmap
fig, ax = plt.subplots(figsize=(5.5, 4.5), layout="constrained")
if calibration is not None:
    lat = np.array([[np.nan if v is None else v for v in row]
                    for row in calibration["latency"]])
    plot_latency_heatmap(lat, clusters=calibration["clusters"], ax=ax,
                         title="measured one-way latency on the testbed")
else:
    ax.axis("off")
    ax.text(0.5, 0.5, f"no testbed here, nothing measured:\\n{reason}", ha="center",
            va="center", wrap=True)"""),
    new_code_cell("""# the call as wacoll.Comm reads it: 8192 float64 values, SUM at MPI's own level
call = Call("allreduce", count=8192, itemsize=8, level="commutative")
plan = select(call, topo, family="magpie").build(topo)
if ran is not None:   # the simulated plan is the one the traced calls ran
    assert ran == {k: getattr(plan, k) for k in ran}, (ran, plan)
predicted = simulate(plan, LinkModel(topo))
rows = 2 if trace is not None else 1
fig, axes = plt.subplots(rows, 1, figsize=(11, 3.8 * rows), layout="constrained",
                         squeeze=False)
draw_timeline(predicted, ax=axes[0, 0], unit="ms",
              title=f"simulated: {call_title(plan)}: {predicted.completion * 1e3:.1f} ms")
if trace is not None:
    ops = {}
    for e in trace["traceEvents"]:
        if e.get("cat") == "operation":
            ops.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e["dur"]))
    last = [spans[-1] for spans in ops.values()]
    took = (max(b for _, b in last) - min(a for a, _ in last)) / 1e3
    draw_trace(trace, ax=axes[1, 0], clusters=topo.cluster_ids, call=-1,
               title=f"traced on the testbed: the same call, the last of three: "
                     f"{took:.1f} ms")
    right = max(predicted.completion * 1e3, took) * 1.03   # one time axis for both
    axes[0, 0].set_xlim(0, right / 1e3)   # draw_timeline draws seconds, shown in ms
    axes[1, 0].set_xlim(0, right)         # draw_trace draws milliseconds
    print(f"simulated {predicted.completion * 1e3:.1f} ms, traced {took:.1f} ms")"""),
]


MODERN = [
    new_markdown_cell("""# The 1999 algorithms and those of 2019-2025, side by side

MagPIe (1999) compared its wide-area algorithms with MPICH 1.1's. Since then MPI
libraries have taken up Thakur, Rabenseifner & Gropp's algorithms (the `modern`
family: recursive doubling, Rabenseifner, ring, Bruck, van de Geijn), and since 2019
new ones have appeared for large flat machines (the `recent` family: NCCL's double
binary tree, Swing, Bine trees and butterflies, PAT). The `hierarchical` family
composes any family inside clusters with any between their coordinators. This
notebook sets them side by side on three networks:

- **MagPIe's grid**: 4 clusters of 2 ranks, 10 ms and 1 MB/s between clusters
  (`wacoll.tools.demo.default_topology()`);
- **a LAN of SMP nodes**: 16 nodes of 4 ranks, 100 µs and 12.5 MB/s between nodes;
- **a long-and-fast network**: 2 clusters of 4 ranks, 5 ms and 100 MB/s between them.

For allreduce, allgather and bcast of 8 B, 64 KiB and 1 MiB (per rank's block for
allgather) it predicts each plan's completion with the simulator (`LinkModel`),
counts its wide-area messages and bytes with the prover (the metric Bine's paper
reports as *global-link traffic*), and shows what the testbed measured on the grid,
on the long-and-fast network and on one cluster of 8 ranks
(`benchmarks/bench_recent.py`, loaded from its saved runs; the notebook does not
start a testbed; the LAN's 64 ranks are too many for the machine they ran on)."""),
    new_code_cell("""import csv
from pathlib import Path
import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import wacoll
from wacoll import Topology
from wacoll.tools.demo import default_topology
from wacoll.plans import Call, select
from wacoll.plans.sim import LinkModel, simulate

NETWORKS = {
    "grid": default_topology(),                        # 4 x 2, 10 ms, 1 MB/s
    "LAN": Topology.from_sizes([4] * 16, wan_latency=100e-6, wan_bandwidth=12.5e6),
    "long-fast": Topology.from_sizes([4, 4], wan_latency=5e-3, wan_bandwidth=100e6),
}
SIZES = (8, 64 << 10, 1 << 20)
OPS = ("allreduce", "allgather", "bcast")
H = "hierarchical"
# (name, era, family, the communicator's options), per operation
ALGORITHMS = {
    "allreduce": [
        ("magpie", "1999", "magpie", {}), ("mpich", "1999", "mpich", {}),
        ("recursive_doubling", "modern", "modern", {"algorithm": "recursive_doubling"}),
        ("rabenseifner", "modern", "modern", {"algorithm": "rabenseifner"}),
        ("ring", "modern", "modern", {"algorithm": "ring"}),
        ("swing", "recent", "recent", {"algorithm": "swing"}),
        ("swing_latency", "recent", "recent", {"algorithm": "swing_latency"}),
        ("bine", "recent", "recent", {"algorithm": "bine"}),
        ("double_binary_tree", "recent", "recent", {"algorithm": "double_binary_tree"}),
        ("hier modern|modern", H, H, {"inner": "modern", "outer": "modern"}),
        ("hier magpie|gridmpi", H, H, {"inner": "magpie", "outer": "gridmpi"})],
    "allgather": [
        ("magpie", "1999", "magpie", {}), ("mpich", "1999", "mpich", {}),
        ("bruck", "modern", "modern", {"algorithm": "bruck"}),
        ("recursive_doubling", "modern", "modern", {"algorithm": "recursive_doubling"}),
        ("ring", "modern", "modern", {"algorithm": "ring"}),
        ("swing", "recent", "recent", {"algorithm": "swing"}),
        ("bine", "recent", "recent", {"algorithm": "bine"}),
        ("pat", "recent", "recent", {"algorithm": "pat"}),
        ("hier mpich|modern", H, H, {"inner": "mpich", "outer": "modern"}),
        ("hier magpie|modern", H, H, {"inner": "magpie", "outer": "modern"})],
    "bcast": [
        ("magpie", "1999", "magpie", {}), ("mpich", "1999", "mpich", {}),
        ("binomial", "modern", "modern", {"algorithm": "binomial"}),
        ("scatter_doubling", "modern", "modern", {"algorithm": "scatter_doubling"}),
        ("scatter_ring", "modern", "modern", {"algorithm": "scatter_ring"}),
        ("bine", "recent", "recent", {"algorithm": "bine"}),
        ("hier modern|modern", H, H, {"inner": "modern", "outer": "modern"}),
        ("hier magpie|gridmpi", H, H, {"inner": "magpie", "outer": "gridmpi"})],
}
ERA_COLOURS = {"1999": "tab:orange", "modern": "tab:blue", "recent": "tab:green",
               H: "tab:purple"}


def human(nbytes):
    return f"{nbytes >> 20} MiB" if nbytes >= 1 << 20 else (
        f"{nbytes >> 10} KiB" if nbytes >= 1 << 10 else f"{nbytes} B")"""),
    new_markdown_cell("""## Predicted completion

Each plan is the one `wacoll.Comm(comm, topology, family=..., **options)` runs for
the call (`wacoll.plans.select`: float64 vectors, a SUM at level `"commutative"`,
MPI's own for a float sum and the only one Swing, Bine and PAT keep; broadcasts
from rank 0), proved by the prover as it is built, then simulated. The LAN's 64
ranks make this the slow cell (a few seconds)."""),
    new_code_cell("""def call(op, nbytes):
    return Call(op, count=nbytes // 8, itemsize=8,
                level="commutative" if op == "allreduce" else None,
                root=0 if op == "bcast" else None)


rows = []
for net, topo in NETWORKS.items():
    model = LinkModel(topo)
    for op in OPS:
        for nbytes in SIZES:
            for name, era, family, options in ALGORITHMS[op]:
                plan = select(call(op, nbytes), topo, comm_family=family,
                              comm_options=options).build(topo)
                report = plan.prove()
                rows.append({"network": net, "op": op, "bytes": nbytes, "name": name,
                             "era": era, "seconds": simulate(plan, model).completion,
                             "wan_messages": report.wide_area_messages,
                             "wan_bytes": report.wide_area_bytes})


def case(net, op, nbytes):
    return {r["name"]: r for r in rows
            if (r["network"], r["op"], r["bytes"]) == (net, op, nbytes)}


print(f"{'network':10s}{'op':10s}{'size':>8s}  fastest predicted (ms), then the next two")
for net in NETWORKS:
    for op in OPS:
        for nbytes in SIZES:
            best = sorted(case(net, op, nbytes).values(), key=lambda r: r["seconds"])[:3]
            print(f"{net:10s}{op:10s}{human(nbytes):>8s}  " + ", ".join(
                f"{r['name']} {r['seconds'] * 1e3:.1f}" for r in best))"""),
    new_code_cell("""fig, axes = plt.subplots(1, 3, figsize=(18, 5.6), layout="constrained")
columns = [(net, nbytes) for net in NETWORKS for nbytes in SIZES]
for ax, op in zip(axes, OPS):
    names = [a[0] for a in ALGORITHMS[op]]
    ratio = np.array([[case(net, op, nbytes)[name]["seconds"] /
                       min(r["seconds"] for r in case(net, op, nbytes).values())
                       for net, nbytes in columns] for name in names])
    ax.imshow(np.log10(ratio), cmap="RdYlGn_r", vmin=0, vmax=1.3, aspect="auto")
    for i in range(len(names)):
        for j in range(len(columns)):
            ax.text(j, i, f"{ratio[i, j]:.1f}" if ratio[i, j] < 10 else ">10",
                    ha="center", va="center", fontsize=7)
    ax.set_xticks(range(len(columns)), [f"{net}\\n{human(n)}" for net, n in columns],
                  fontsize=7)
    ax.set_yticks(range(len(names)), names, fontsize=8)
    for tick, (name, era, _, _) in zip(ax.get_yticklabels(), ALGORITHMS[op]):
        tick.set_color(ERA_COLOURS[era])
    for x in (2.5, 5.5):
        ax.axvline(x, color="black", lw=1)
    ax.set_title(f"{op}: time / the fastest plan's")
fig.suptitle("Simulated completion relative to the best plan of each network and size "
             "(names coloured by era: orange 1999, blue modern, green 2019-2025, "
             "purple hierarchical)")
# MagPIe's single wide-area latency wins the small messages on the grid
assert all(case("grid", op, 8)["magpie"]["seconds"] <=
           min(r["seconds"] for r in case("grid", op, 8).values()) + 1e-9 for op in OPS)
# Swing's bandwidth-optimal allreduce beats MagPIe's at 1 MiB on the grid and the LAN
assert all(case(net, "allreduce", 1 << 20)["swing"]["seconds"] <
           case(net, "allreduce", 1 << 20)["magpie"]["seconds"] for net in ("grid", "LAN"))"""),
    new_markdown_cell("""What the simulator says:

- **Small messages (8 B)** are wide-area latencies. MagPIe's plans cross the wide
  area once on every path, so on the grid and the LAN they finish in one
  wide-area latency; every flat algorithm, old or new, pays two or more (NCCL's
  double binary tree, a pipeline down two trees whose edges cross clusters, pays
  eight on the grid). The hierarchical pair with MagPIe inside matches MagPIe.
- **Large allreduce (1 MiB)**: Swing's bandwidth-optimal allreduce is the
  fastest on the grid and on the LAN: it sends half the wide-area bytes of
  MagPIe's allreduce, whose coordinators each send their cluster's whole partial
  vector to every other coordinator. Rabenseifner's algorithm (2004) sends no more
  wide-area bytes than Swing but takes twice as long: on the grid its partners at
  distance 2 and 4 put both ranks of a cluster on the same remote cluster, so they
  share one wide-area link, where the partners of a cluster's two ranks in Swing
  lie in two different clusters and use two links at once. On the long-and-fast
  network the hierarchical pair magpie|gridmpi wins: Matsuda's multi-sender
  allreduce fills the fast wide-area link.
- **Allgather**: MagPIe's allgather (every block crosses once, gathered at each
  coordinator) is the best on the grid and the LAN; Swing's butterfly is the best
  flat one, Bine's and PAT's send more bytes across. On the long-and-fast network
  the hierarchical pairs (an MPICH gather inside, MPICH 4's allgather between two
  coordinators) edge out MagPIe.
- **Bcast**: MagPIe's coordinator broadcast is the best or tied everywhere; the
  scatter-allgather broadcasts (van de Geijn) send more messages across clusters
  and lose. Bine's tree ties MPICH's binomial tree on the grid and the LAN; on the
  long-and-fast network it crosses twice where the others cross once.
- On the long-and-fast network (two clusters) most plans cross the wide area once
  and small messages tie: the differences there are bandwidth."""),
    new_markdown_cell("""## Wide-area messages and bytes

The prover counts the messages that cross between clusters and their bytes: what
the 1999 papers minimised, and what Bine's paper reports as global-link traffic on
dragonflies and fat trees. At 64 KiB (log scales; lower is better):"""),
    new_code_cell("""fig, axes = plt.subplots(2, 3, figsize=(18, 7.5), layout="constrained")
for col, op in enumerate(OPS):
    names = [a[0] for a in ALGORITHMS[op]]
    x = np.arange(len(names))
    for k, net in enumerate(NETWORKS):
        c = case(net, op, 64 << 10)
        for row, key in enumerate(("wan_messages", "wan_bytes")):
            axes[row, col].bar(x + (k - 1) * 0.27, [c[n][key] for n in names], 0.27,
                               label=net)
    for row, label in enumerate(("wide-area messages", "wide-area bytes")):
        ax = axes[row, col]
        ax.set_yscale("log")
        ax.set_xticks(x, names, rotation=35, ha="right", fontsize=8)
        for tick, (name, era, _, _) in zip(ax.get_xticklabels(), ALGORITHMS[op]):
            tick.set_color(ERA_COLOURS[era])
        ax.set_ylabel(label)
        ax.grid(axis="y", alpha=0.3, which="both")
        ax.set_title(f"{op} of 64 KiB: {label} per call")
        ax.legend(fontsize=7, loc="upper left")
print(f"{'op':10s}{'algorithm':21s}" + "".join(f"{n:>18s}" for n in NETWORKS))
for op in OPS:
    for name, *_ in ALGORITHMS[op]:
        print(f"{op:10s}{name:21s}" + "".join(
            f"{case(n, op, 64 << 10)[name]['wan_messages']:7d} {case(n, op, 64 << 10)[name]['wan_bytes'] >> 10:7d} KiB"
            for n in NETWORKS))
# MagPIe's bcast sends one message to each other cluster
assert all(case(net, "bcast", 64 << 10)["magpie"]["wan_messages"] ==
           NETWORKS[net].nclusters - 1 for net in NETWORKS)"""),
    new_markdown_cell("""Fewer wide-area messages do not mean fewer wide-area bytes: MagPIe's allreduce
sends few messages but whole vectors (on the LAN 15 MiB per 64 KiB call), where
Rabenseifner's algorithm, the hierarchical modern|modern pair and MPICH 1.1's
reduce-then-broadcast send 1.9 MiB. Swing sends a little more (2.4 MiB) in many
small messages and Bine 7.4 MiB: wacoll's Bine butterfly runs its reduce-scatter
distance-halving (farthest partner first, when the messages are largest), Swing's
nearest partner first, so with clusters that are contiguous rank ranges Bine's
largest messages are the ones that cross. For allgather, every plan must bring each block into each cluster once
(MagPIe and the hierarchical pairs do just that); Bruck's, recursive doubling's
and Bine's butterflies bring many blocks in more than once."""),
    new_markdown_cell("""## Measured on the testbed

`benchmarks/bench_recent.py` times the MPI library's collectives, MagPIe's plans,
each recent algorithm and the hierarchical pairs side by side on the emulated
testbed, with the simulator's prediction beside each median: one cluster of 8 ranks
and MagPIe's 4 x 2 grid in one run (`benchmarks/results/recent.{csv,txt,png}`), the
2 x 4 long-and-fast network in another (`recent-longfast.*`). Here they are read
back, not rerun."""),
    new_code_cell("""results = Path(wacoll.__file__).resolve().parents[1] / "benchmarks" / "results"
saved = sorted(results.glob("recent*.csv"))   # recent.csv, recent-longfast.csv
measured = []
for path in saved:
    with open(path) as fh:
        measured += [r for r in csv.DictReader(fh) if r["median_ms"]]
for r in measured:
    for key in ("median_ms", "predicted_ms", "ratio_native"):
        r[key] = float(r[key])
    r["bytes"] = int(r["bytes"])
if measured:
    print(f"{len(measured)} measurements from {', '.join(p.name for p in saved)}")
else:
    print("no saved run of benchmarks/bench_recent.py here: nothing measured to show")

FAMILY_COLOURS = {"native": "black", "magpie": "tab:orange", "recent": "tab:green",
                  H: "tab:purple"}
fig, axes = plt.subplots(1, 2, figsize=(17, 5.8), layout="constrained",
                         gridspec_kw={"width_ratios": [2.2, 1]})
if measured:
    order = ["cluster", "grid", "longfast"]
    cases = sorted(dict.fromkeys((r["network"], r["op"], r["bytes"]) for r in measured),
                   key=lambda c: (order.index(c[0]) if c[0] in order else len(order),
                                  OPS.index(c[1]), c[2]))
    for r in measured:
        i = cases.index((r["network"], r["op"], r["bytes"]))
        colour = FAMILY_COLOURS.get(r["family"], "grey")
        axes[0].plot(i, r["ratio_native"], "o", color=colour, ms=5,
                     mfc="none" if r["fastest"] != "True" else colour)
        axes[1].loglog(r["predicted_ms"], r["median_ms"], "o", color=colour, ms=4)
    axes[0].axhline(1, color="black", lw=0.8)
    axes[0].set_yscale("log")
    for axis in (axes[0].yaxis.set_major_formatter, axes[0].yaxis.set_minor_formatter):
        axis(matplotlib.ticker.FormatStrFormatter("%g"))
    axes[0].set_xticks(range(len(cases)), [f"{op} {human(b)}" for n, op, b in cases],
                       fontsize=7, rotation=90)
    nets = list(dict.fromkeys(n for n, _, _ in cases))
    for net in nets:
        where = [i for i, c in enumerate(cases) if c[0] == net]
        axes[0].axvline(where[0] - 0.5, color="grey", lw=0.8)
        axes[0].text((where[0] + where[-1]) / 2, 1.01, net, ha="center", va="bottom",
                     transform=axes[0].get_xaxis_transform(), fontsize=9)
    axes[0].set_ylabel("measured median / the MPI library's")
    axes[0].set_title("measured: each implementation against the MPI library "
                      "(filled: fastest of the case; below 1 is faster)", pad=18)
    lo, hi = 0.01, 2 * max(r["median_ms"] for r in measured)
    axes[1].plot([lo, hi], [lo, hi], color="grey", lw=0.8)
    axes[1].set_xlabel("predicted (ms)")
    axes[1].set_ylabel("measured median (ms)")
    axes[1].set_title("predicted against measured (grey: equal)")
    for family, colour in FAMILY_COLOURS.items():
        axes[1].plot([], [], "o", color=colour, label=family)
    axes[1].legend(fontsize=8, loc="upper left")
    for ax in axes:
        ax.grid(alpha=0.3, which="both")
    print("fastest measured per case:")
    for n, op, b in cases:
        best = min((r for r in measured if (r["network"], r["op"], r["bytes"]) ==
                    (n, op, b)), key=lambda r: r["median_ms"])
        print(f"  {n:9s}{op:10s}{human(b):>8s}  {best['impl']:20s}"
              f"{best['median_ms']:9.2f} ms ({best['ratio_native']:.2f} x the library)")
else:
    for ax in axes:
        ax.axis("off")
    axes[0].text(0.5, 0.5, f"nothing measured: run benchmarks/bench_recent.py "
                 f"(as root) to write recent.csv", ha="center", va="center")"""),
    new_markdown_cell("""What the saved runs measured (`recent.txt` and `recent-longfast.txt` state their
commands and the load: about 9 and 13 on 2 cores, so 8 ranks wait for a core
most of the time):

- **One cluster of 8 ranks**: the MPI library is the fastest in every case, the
  others 1.1 to 6.2 times slower. Its collectives are compiled C over shared
  memory; a wacoll plan is a sequence of MPI point-to-point steps, and with 8
  busy ranks on 2 cores every step waits for a core. The simulator, which sees
  10 µs and 1 GB/s links and no software cost, predicts far below every
  measurement there: on one node the plans are no competition for the library,
  old or new.
- **MagPIe's grid**: the measurements follow the predictions (median error 11%;
  the 8 B cases take up to 12 ms more than predicted: the software and
  start-skew costs the model leaves out). **Swing's allreduce of 1 MiB is the fastest
  measured**: 0.85 s, 0.51 times the library's and 0.76 times
  MagPIe's, as the simulator predicted (0.83 s). The hierarchical pair
  magpie|gridmpi is the fastest measured for the 64 KiB allreduce and the 8 B
  broadcast, but the simulator predicts it equal to MagPIe's plan there and the
  margins (5% and 2.4 ms) are within the run's noise. Everywhere else MagPIe's
  plans are the fastest, 0.32 to 0.79 times the library; Swing's allgather is the
  best flat one (0.49 and 0.52 times the library at 64 KiB and 1 MiB), and
  Bine's and PAT's butterflies, which bring blocks into a cluster more than once,
  are slower than the library's ring at 1 MiB.
- **The long-and-fast network**: the hierarchical pair magpie|gridmpi (MagPIe's
  trees inside, Matsuda's multi-sender allreduce between the two coordinators) is
  the fastest measured allreduce at every size: 22.5 ms for 1 MiB, 0.71 times the
  library's and 0.59 times MagPIe's, as predicted (18.9 ms, the best predicted);
  Swing and the modern|modern pair follow (0.91 and 0.92 times the library).
  For allgather and bcast the fastest few are within a few percent of each other
  (Bine's and Swing's 8 B allgathers, a gather | MPICH 4 allgather pair at
  64 KiB, MagPIe's plans at 1 MiB and for the larger broadcasts); the library's
  binomial broadcast wins at 8 B. Bine's and PAT's 1 MiB allgathers are the
  slowest, 1.7 and 2.3 times the library's ring.
- Where the two disagree: the binomial and Bine broadcasts of 1 MiB took 1.34 s,
  the simulator says 2.1 s, and Bine's allgather of 1 MiB took 10.9 s against a
  predicted 6.3 s."""),
]


def write(name, cells):
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(nb, HERE / name)


if __name__ == "__main__":
    write("explore_plans.ipynb", EXPLORE)
    write("heterogeneous_trees.ipynb", HETERO)
    write("magpie_vs_mpich.ipynb", MAGPIE)
    write("matsuda_sweep.ipynb", MATSUDA)
    write("testbed_timeline.ipynb", TESTBED)
    write("modern_vs_1999.ipynb", MODERN)
