"""Draw the figures of the documentation's algorithm pages (run by ``conf.py``).

Every figure comes from wacoll itself: the tree builders and the simulator.

    python docs/make_figures.py docs/_figures
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(out) -> list:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from wacoll import Topology, trees
    from wacoll.plans import build
    from wacoll.plans.sim import LinkModel, simulate
    from wacoll.viz import draw_plan, draw_timeline, draw_tree

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []

    def save(fig, name):
        fig.savefig(out / name, dpi=90)
        plt.close(fig)
        written.append(out / name)

    # Banikazemi et al., Figure 1
    costs = [100, 300, 300, 300, 300, 100, 300, 300]
    shapes = {"binomial": trees.binomial(8), "SPOC": trees.spoc(costs),
              "FNF": trees.fnf(costs), "optimal": trees.optimal(costs)}
    fig, axes = plt.subplots(1, 4, figsize=(15, 4), layout="constrained")
    for ax, (name, t) in zip(axes, shapes.items()):
        draw_tree(t, ax=ax, costs=costs, clusters=[0 if c == 100 else 1 for c in costs],
                  title=f"{name}: {trees.bcast_time(t, costs):g} µs")
    fig.suptitle("t_ini (µs) under each node, send order on the edges; fast nodes blue")
    save(fig, "banikazemi_figure1.png")

    # MagPIe: bcast plans and their simulated timelines
    topo = Topology.from_sizes([4, 4, 4, 4], wan_latency=0.010, wan_bandwidth=1e6)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), layout="constrained")
    for ax, fam in zip(axes, ("magpie", "mpich")):
        plan = build("bcast", topo, fam, count=65536)
        r = plan.check()
        draw_plan(plan, ax=ax, title=f"{fam}: {r.wide_area_messages} wide-area messages, "
                                     f"at most {r.max_wide_area_hops} hops")
    save(fig, "magpie_bcast_plans.png")
    fig, axes = plt.subplots(2, 1, figsize=(11, 8), sharex=True, layout="constrained")
    for ax, fam in zip(axes, ("magpie", "mpich")):
        res = simulate(build("bcast", topo, fam, count=65536), LinkModel(topo))
        draw_timeline(res, ax=ax, unit="ms")
    save(fig, "magpie_bcast_timelines.png")

    # Matsuda et al.: n senders on a long-and-fast network
    fast = Topology.from_sizes([8, 8], intra_latency=5e-5, intra_bandwidth=125e6,
                               wan_latency=0.005, wan_bandwidth=1.25e9)
    ns = [1, 2, 4, 8]
    fig, ax = plt.subplots(figsize=(7, 4), layout="constrained")
    for op, base_alg in (("bcast", "farfirst"), ("allreduce", "two-tier")):
        kw = {"level": "associative"} if op == "allreduce" else {}
        ts = [simulate(build(op, fast, "gridmpi", count=1 << 24, n=n, **kw),
                       LinkModel(fast)).completion * 1e3 for n in ns]
        line, = ax.plot(ns, ts, "o-", label=f"{op}, n senders")
        base = simulate(build(op, fast, "gridmpi", count=1 << 24, algorithm=base_alg, **kw),
                        LinkModel(fast)).completion * 1e3
        ax.axhline(base, color=line.get_color(), ls="--", label=f"{op}, {base_alg}")
    ax.set_xscale("log", base=2)
    ax.set_xticks(ns, [str(n) for n in ns])
    ax.set_xlabel("wide-area senders per cluster, n")
    ax.set_ylabel("predicted completion (ms)")
    ax.set_ylim(bottom=0)
    ax.set_title("16 MiB on 2 x 8 ranks, 1 Gbit/s nodes, 10 Gbit/s 5 ms wide area")
    ax.legend(loc="lower left", fontsize="small")
    ax.grid(alpha=0.3)
    save(fig, "matsuda_sweep.png")

    # Calibration: the heatmap of a synthetic measured matrix of three clusters
    import numpy as np

    from wacoll.calibration import CalibrationReport

    truth = Topology.from_clusters([[0, 1], [2], [3, 4, 5]], wan_latency=0.01,
                                   wan_pairs={(0, 1): (0.004, 1e6), (1, 0): (0.004, 1e6),
                                              (1, 2): (0.016, 1e6), (2, 1): (0.016, 1e6)})
    rng = np.random.default_rng(0)
    lat = np.array([[truth.link(i, j).latency if truth.is_wide_area(i, j) else 8e-5
                     for j in range(6)] for i in range(6)]) * rng.uniform(0.95, 1.05, (6, 6))
    report = CalibrationReport.from_measurements(2 * lat, None, [2e-6] * 6)
    fig, ax = plt.subplots(figsize=(6, 5), layout="constrained")
    report.heatmap(ax=ax)
    save(fig, "calibration_heatmap.png")
    return written


if __name__ == "__main__":
    for path in main(sys.argv[1] if len(sys.argv) > 1 else "_figures"):
        print(path)
