"""Draw every figure of the documentation (run by ``conf.py`` at each build).

Every figure comes from wacoll itself: the algorithm pages' from the tree builders
and the simulator; the demo's from ``benchmarks/results/demo.csv`` (the saved run)
and from the simulator; the notebooks' by running the notebooks' code cells here,
in order, and saving each figure they draw under the name :data:`NOTEBOOK_FIGURES`
gives it. A notebook that draws another number of figures than it lists stops the
build. ``docs/gallery.rst`` shows them all (``tests/test_docs.py`` checks that it
names each figure of :data:`FIGURES` once, with a caption).

    python docs/make_figures.py docs/_figures
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

#: The algorithm pages' figures.
ALGORITHM_FIGURES = [
    "banikazemi_figure1",
    "magpie_bcast_plans",
    "magpie_bcast_timelines",
    "matsuda_sweep",
    "calibration_heatmap",
]
#: The demo's pictures: the saved measured run, and the simulator's alone.
DEMO_FIGURES = ["demo_measured", "demo_predicted"]
#: Each notebook's figures, in the order its cells draw them.
NOTEBOOK_FIGURES = {
    "explore_plans": ["explore_trees", "explore_plans", "explore_timelines"],
    "heterogeneous_trees": ["hetero_figure1", "hetero_fnf_vs_optimal"],
    "magpie_vs_mpich": ["magpie_metrics", "magpie_plans", "magpie_size_sweep"],
    "matsuda_sweep": ["matsuda_senders"],
    "testbed_timeline": ["testbed_heatmap", "testbed_timelines"],
    "modern_vs_1999": ["modern_predicted", "modern_wide_area", "modern_measured"],
}
#: Every figure the documentation has (``_figures/NAME.png``).
FIGURES = (
    ALGORITHM_FIGURES
    + DEMO_FIGURES
    + [name for names in NOTEBOOK_FIGURES.values() for name in names]
)


def main(out) -> list:
    """Draw every figure of :data:`FIGURES` into ``out``; return their paths."""
    out = Path(out)
    written = algorithm_figures(out) + demo_figures(out) + notebook_figures(out)
    names = [p.stem for p in written]
    if names != FIGURES:
        raise RuntimeError(f"make_figures drew {names}, not {FIGURES}")
    return written


def demo_figures(out) -> list:
    """The demo's picture of the run saved in ``benchmarks/results/demo.csv``, and of
    the simulator's predictions alone (what the demo shows without a testbed)."""
    from wacoll.tools import demo

    out.mkdir(parents=True, exist_ok=True)
    rows, measured, library = demo.read_csv(ROOT / "benchmarks" / "results" / "demo.csv")
    demo.plot(rows, out / "demo_measured.png", measured, library)
    predicted = demo.simulated_rows(demo.default_topology())
    demo.plot(predicted, out / "demo_predicted.png", False)
    return [out / "demo_measured.png", out / "demo_predicted.png"]


def notebook_figures(out) -> list:
    """Run each notebook's code cells in order, in a scratch folder, and save the
    figures they draw under :data:`NOTEBOOK_FIGURES`' names."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    written = []
    for notebook, names in NOTEBOOK_FIGURES.items():
        cells = json.loads((ROOT / "notebooks" / f"{notebook}.ipynb").read_text())[
            "cells"
        ]
        plt.close("all")
        scope = {"__name__": "__main__"}
        figures = []
        here = os.getcwd()
        with tempfile.TemporaryDirectory() as scratch:
            os.chdir(scratch)
            try:
                for cell in cells:
                    if cell["cell_type"] != "code":
                        continue
                    source = "".join(cell["source"])
                    with contextlib.redirect_stdout(io.StringIO()):  # the cells' prints
                        exec(compile(source, f"{notebook}.ipynb", "exec"), scope)
                    figures += [
                        plt.figure(n)
                        for n in plt.get_fignums()
                        if plt.figure(n) not in figures
                    ]
            finally:
                os.chdir(here)
        if len(figures) != len(names):
            raise RuntimeError(
                f"notebooks/{notebook}.ipynb draws {len(figures)} figures; "
                f"docs/make_figures.py names {len(names)}: {names}"
            )
        for name, fig in zip(names, figures):
            fig.savefig(out / f"{name}.png", dpi=80)
            written.append(out / f"{name}.png")
        plt.close("all")
    return written


def algorithm_figures(out) -> list:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from wacoll import Topology, trees
    from wacoll.plans import build
    from wacoll.plans.sim import LinkModel, simulate
    from wacoll.tools.viz import draw_plan, draw_timeline, draw_tree, hops

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []

    def save(fig, name):
        fig.savefig(out / name, dpi=90)
        plt.close(fig)
        written.append(out / name)

    # Banikazemi et al., Figure 1
    costs = [100, 300, 300, 300, 300, 100, 300, 300]
    shapes = {
        "binomial": trees.binomial(8),
        "SPOC": trees.spoc(costs),
        "FNF": trees.fnf(costs),
        "optimal": trees.optimal(costs),
    }
    fig, axes = plt.subplots(1, 4, figsize=(15, 4.6), layout="constrained")
    for ax, (name, t) in zip(axes, shapes.items()):
        draw_tree(
            t,
            ax=ax,
            costs=costs,
            clusters=[0 if c == 100 else 1 for c in costs],
            names={0: "fast node (100 µs)", 1: "slow node (300 µs)"},
            title=f"{name}: {trees.bcast_time(t, costs):g} µs",
        )
    fig.suptitle("Broadcast from node 0: completion in each title (lower is better)")
    save(fig, "banikazemi_figure1.png")

    # MagPIe: bcast plans and their simulated timelines
    topo = Topology.from_sizes([4, 4, 4, 4], wan_latency=0.010, wan_bandwidth=1e6)
    fig, axes = plt.subplots(1, 2, figsize=(12, 5), layout="constrained")
    for ax, fam in zip(axes, ("magpie", "mpich")):
        plan = build("bcast", topo, fam, count=65536)
        r = plan.prove()
        draw_plan(
            plan,
            ax=ax,
            title=f"{fam} broadcast of 64 KiB\n{r.wide_area_messages} "
            f"wide-area messages, at most "
            f"{hops(r.max_wide_area_hops)}",
        )
    save(fig, "magpie_bcast_plans.png")
    fig, axes = plt.subplots(2, 1, figsize=(11, 8.5), sharex=True, layout="constrained")
    for ax, fam in zip(axes, ("magpie", "mpich")):
        res = simulate(build("bcast", topo, fam, count=65536), LinkModel(topo))
        draw_timeline(res, ax=ax, unit="ms")
    save(fig, "magpie_bcast_timelines.png")

    # Matsuda et al.: n senders on a long-and-fast network
    fast = Topology.from_sizes(
        [8, 8],
        intra_latency=5e-5,
        intra_bandwidth=125e6,
        wan_latency=0.005,
        wan_bandwidth=1.25e9,
    )
    ns = [1, 2, 4, 8]
    fig, ax = plt.subplots(figsize=(7, 4), layout="constrained")
    for op, base_alg in (("bcast", "farfirst"), ("allreduce", "two-tier")):
        kw = {"level": "associative"} if op == "allreduce" else {}
        ts = [
            simulate(
                build(op, fast, "gridmpi", count=1 << 24, n=n, **kw), LinkModel(fast)
            ).completion
            * 1e3
            for n in ns
        ]
        (line,) = ax.plot(ns, ts, "o-", label=f"{op}, n senders")
        base = (
            simulate(
                build(op, fast, "gridmpi", count=1 << 24, algorithm=base_alg, **kw),
                LinkModel(fast),
            ).completion
            * 1e3
        )
        ax.axhline(base, color=line.get_color(), ls="--", label=f"{op}, {base_alg}")
    ax.set_xscale("log", base=2)
    ax.set_xticks(ns, [str(n) for n in ns])
    ax.set_xlabel("wide-area senders per cluster, n")
    ax.set_ylabel("predicted completion (ms)")
    ax.set_ylim(bottom=0)
    ax.set_title(
        "16 MiB on 2 x 8 ranks, 1 Gbit/s nodes, 10 Gbit/s 5 ms wide area:\n"
        "lower is better",
        fontsize="medium",
    )
    ax.legend(loc="lower left", fontsize="small")
    ax.grid(alpha=0.3)
    save(fig, "matsuda_sweep.png")

    # Calibration: the heatmap of a synthetic measured matrix of three clusters
    import numpy as np

    from wacoll.calibration import CalibrationReport

    truth = Topology.from_clusters(
        [[0, 1], [2], [3, 4, 5]],
        wan_latency=0.01,
        wan_pairs={
            (0, 1): (0.004, 1e6),
            (1, 0): (0.004, 1e6),
            (1, 2): (0.016, 1e6),
            (2, 1): (0.016, 1e6),
        },
    )
    rng = np.random.default_rng(0)
    lat = np.array(
        [
            [
                truth.link(i, j).latency if truth.is_wide_area(i, j) else 8e-5
                for j in range(6)
            ]
            for i in range(6)
        ]
    ) * rng.uniform(0.95, 1.05, (6, 6))
    report = CalibrationReport.from_measurements(2 * lat, None, [2e-6] * 6)
    fig, ax = plt.subplots(figsize=(6, 5), layout="constrained")
    report.heatmap(ax=ax)
    save(fig, "calibration_heatmap.png")
    return written


if __name__ == "__main__":
    for path in main(sys.argv[1] if len(sys.argv) > 1 else "_figures"):
        print(path)
