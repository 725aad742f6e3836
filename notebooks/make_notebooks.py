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
MagPIe plan for clusters joined by slow wide-area links, proves them with the checker,
predicts their cost with the simulator, and draws them."""),
    new_code_cell("""import matplotlib
import matplotlib.pyplot as plt
from wacoll import Topology, trees
from wacoll.plans import build
from wacoll.plans.sim import simulate, LinkModel, TiniModel
from wacoll.viz import draw_tree, draw_plan"""),
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
fig, axes = plt.subplots(1, 4, figsize=(16, 3.5))
for ax, (name, t) in zip(axes, shapes.items()):
    draw_tree(t, ax=ax, costs=costs, title=f"{name}: {trees.bcast_time(t, costs):g} us")
times = {name: trees.bcast_time(t, costs) for name, t in shapes.items()}
times"""),
    new_code_cell("""assert times == {"binomial": 700, "SPOC": 500, "FNF": 400, "optimal": 400}"""),
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
The checker proves each plan and measures its wide-area traffic; MagPIe's broadcast
crosses the wide area once per remote cluster, with a single wide-area latency."""),
    new_code_cell("""topo = Topology.from_sizes([4, 4, 4, 4], wan_latency=0.010, wan_bandwidth=1e6)
plans = {fam: build("bcast", topo, fam, root=0, count=65536) for fam in ("magpie", "mpich")}
for fam, plan in plans.items():
    r = plan.check()
    print(f"{fam:7s} wide-area messages {r.wide_area_messages:2d}  hops {r.max_wide_area_hops}"
          f"  optimal: {r.optimality}")
fig, axes = plt.subplots(1, 2, figsize=(12, 4))
for ax, (fam, plan) in zip(axes, plans.items()):
    draw_plan(plan, ax=ax)"""),
    new_code_cell("""results = {fam: simulate(plan, LinkModel(topo)) for fam, plan in plans.items()}
for fam, res in results.items():
    print(f"{fam:7s} predicted completion {res.completion * 1e3:7.1f} ms")
fig, axes = plt.subplots(2, 1, figsize=(12, 6), sharex=True)
for ax, (fam, res) in zip(axes, results.items()):
    res.plot(ax=ax)
    ax.set_title(f"{fam} broadcast of 64 KiB")
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
        r = plan.check()
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


def write(name, cells):
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nbformat.write(nb, HERE / name)


if __name__ == "__main__":
    write("explore_plans.ipynb", EXPLORE)
