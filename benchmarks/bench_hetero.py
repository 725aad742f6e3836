"""Banikazemi et al., Section 7.1 / Figure 4: broadcast on fast and slow ranks.

Run from the repository root, as root (the emulated testbed needs it)::

    .venv/bin/python benchmarks/bench_hetero.py            # full
    .venv/bin/python benchmarks/bench_hetero.py --quick    # smoke run

What it reproduces. The paper broadcasts on 16 workstations of two speeds (2, 4 or 8
fast ones: 12.5 %, 25 %, 50 %; slow/fast ratio of communication cost 2.15) with
MPICH's binomial tree (MPI-DEF), SPOC and Fastest-Node-First trees, and reports the
latency and the factor of improvement over binomial (up to 1.7 with SPOC at 50 % fast
ranks, up to 2.3 with FNF). Here the same trees (wacoll's ``family="tree"``,
``tree="binomial" | "spoc" | "fnf" | "optimal"``), plus MPICH's native Bcast for
reference, run on wacoll's emulated testbed (name ``hetero``), 8 ranks by default
(scaled to this 2-core machine; ``--ranks 16`` is the paper's size), timed side by
side, and beside them the simulator's predictions.

How slow ranks are emulated: by their link rate. Every rank has its own namespace
(a topology of one-rank clusters) and ONE outgoing queue, shared by everything it
sends (``Testbed(uplink=True)``; each directed pair's rate is the sender's rate), at
1.25 MB/s (10 Mbit/s Ethernet) for a fast rank and 1.25/2.15 = 0.58 MB/s for a slow
one, followed by a one-way link latency of 50 us. A message of ``b`` bytes thus
occupies its sender for ``b / rate[sender]`` -- the sends of one rank queue one after
the other -- and arrives a latency later; the receiver pays nothing: Banikazemi's
model, ``t_ini[r] = b / rate[r] + latency`` (the latency, unlike ``t_ini``, overlaps
the next send; the LinkModel simulation has that exactly). The alternative,
``per_node=True``, also gives every rank an *ingress* queue at its rate, so a fast
rank's message to a slow one would arrive at the slow rate: a receiver cost the t_ini
model does not have.

Consequences, said plainly. (1) The per-message cost is proportional to the message
size, so the fast/slow ratio of the per-message cost is 2.15 only where the size term
dominates the latency and the software and scheduling overheads (from a few KiB up);
at small sizes the common per-message cost dominates and the factor falls towards 1
-- the opposite of the paper's trend, where a fixed per-node start-up cost dominated
short messages. (2) Time is stretched: the rates are 10 Mbit/s-class rather than the
100 Mbit/s this machine's relay could emulate, because 8 busy-polling MPI ranks on 2
shared cores wait milliseconds for the CPU per hop; at the headline size, 8 KiB,
t_ini is 6.6 ms fast / 14.2 ms slow (the paper measured 0.69 / 1.48 ms for short
messages; ours at 1 KiB are 0.87 / 1.81 ms, but there the scheduling noise is as large
as t_ini). (3) ``--throttle N`` turns on MPICH's progress throttle (a waiting rank
sleeps after N idle polls, leaving the cores to the ranks with work), for every
implementation alike; off by default, as trials showed no clear gain.

The trees are built from the configured ``t_ini`` of each size (``wacoll.Comm(...,
topology)`` with ``Topology.t_ini``, the same on every rank). The fast ranks are rank 0
(the root, fast as in the paper's setup) and a seeded random choice of the others
(``--seed``); the simulator's mean factor over random choices (for this size and for
the paper's 16 ranks) is printed too, so the reader sees where this placement falls.

Timing: latency from the root's start (a common start instant) until the last
recipient has the data; implementations interleaved per repetition; medians over
``--reps`` repetitions (>= 7; 3 with --quick). The measured one-way time of one
message from a fast and from a slow sender (the measured ``t_ini``) is printed per
size, and a second TiniModel prediction uses it. Where the testbed cannot run here
(not root, no /dev/net/tun) the script says why and prints the simulator's figures
only, labelled as such.

Writes ``benchmarks/results/hetero_bcast[-quick].csv|png|txt``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _harness import (
    RESULTS,
    ROOT,
    Report,
    command_line,
    failure,
    human,
    load1,
    load_text,
    median,
    parse_size,
    pyplot,
    save_figure,
    write_csv,
)

APP = ROOT / "benchmarks" / "apps" / "hetero_bcast.py"
TESTBED = "hetero"
TREES = ("binomial", "spoc", "fnf", "optimal")
FULL_SIZES = (1024, 2048, 4096, 8192, 16384, 32768, 65536)
QUICK_SIZES = (1024, 8192)
FIELDS = [
    "ranks",
    "fast_fraction",
    "fast_ranks",
    "bytes",
    "impl",
    "plan",
    "median_ms",
    "min_ms",
    "reps",
    "valid_reps",
    "factor_vs_binomial",
    "tini_model_ms",
    "tini_model_factor",
    "tini_measured_model_ms",
    "link_model_ms",
    "link_model_factor",
    "t_ini_fast_ms",
    "t_ini_slow_ms",
    "measured_fast_ms",
    "measured_slow_ms",
    "correct",
    "load1",
    "command",
]


# ------------------------------------------------------------------ arguments
def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: sizes 1 KiB and 8 KiB, 3 repetitions",
    )
    p.add_argument(
        "--ranks", type=int, default=8, help="ranks (default 8; 16 as the paper)"
    )
    p.add_argument(
        "--fractions",
        default="0.125,0.25,0.5",
        help="fractions of fast ranks, root included (default 0.125,0.25,0.5)",
    )
    p.add_argument(
        "--ratio",
        type=float,
        default=2.15,
        help="slow/fast per-byte cost ratio (default 2.15, the paper's)",
    )
    p.add_argument(
        "--fast-rate",
        type=float,
        default=1.25e6,
        help="a fast rank's link rate, bytes/s (default 1.25e6 = 10 Mbit/s)",
    )
    p.add_argument(
        "--latency",
        type=float,
        default=50e-6,
        help="configured one-way link latency, s (default 50e-6)",
    )
    p.add_argument(
        "--sizes", help="message sizes (default 1K,2K,4K,8K,16K,32K,64K; --quick 1K,8K)"
    )
    p.add_argument(
        "--headline",
        type=parse_size,
        default=8192,
        help="size of the headline factor table (default 8K)",
    )
    p.add_argument("--reps", type=int, help="repetitions (default 11; --quick 3)")
    p.add_argument("--seed", type=int, default=1, help="seed of the fast-rank choice")
    p.add_argument(
        "--no-optimal",
        action="store_true",
        help="skip the optimal tree (exponential; skipped by default beyond 12 ranks)",
    )
    p.add_argument(
        "--throttle",
        type=int,
        default=0,
        help="MPICH's progress throttle: after N polls without progress a "
        "waiting rank sleeps 1 us (0: off, the default)",
    )
    p.add_argument("--no-native", action="store_true", help="skip MPICH's native Bcast")
    p.add_argument(
        "--simulate-only",
        action="store_true",
        help="no testbed: the simulator's figures only",
    )
    p.add_argument("--no-write", action="store_true", help="write no result files")
    args = p.parse_args(argv)
    args.command = command_line(__file__, argv)
    args.sizes = (
        sorted({parse_size(s) for s in args.sizes.split(",")})
        if args.sizes
        else list(QUICK_SIZES if args.quick else FULL_SIZES)
    )
    if args.headline not in args.sizes:
        args.headline = min(args.sizes, key=lambda s: abs(s - args.headline))
    args.reps = args.reps or (3 if args.quick else 11)
    args.fractions = [float(f) for f in args.fractions.split(",") if f]
    if not 2 <= args.ranks <= 16:
        p.error("--ranks: 2..16 on this machine")
    if args.ratio < 1:
        p.error("--ratio must be >= 1 (slow over fast)")
    if args.no_optimal is False and args.ranks > 12:
        args.no_optimal = True
    return args


# ------------------------------------------------------------------ setup
def fast_ranks(ranks, fraction, seed, root=0):
    """The root and a seeded random choice of the others: ``round(fraction*ranks)``."""
    n = max(1, round(fraction * ranks))
    rng = random.Random(f"{seed}-{ranks}-{n}")
    return sorted([root] + rng.sample([r for r in range(ranks) if r != root], n - 1))


def rates_for(args, fast):
    slow_rate = args.fast_rate / args.ratio
    return [args.fast_rate if r in fast else slow_rate for r in range(args.ranks)]


def topology_for(args, rates, nbytes):
    """One-rank clusters; pair (a, b) runs at a's rate; t_ini = bytes/rate + latency."""
    from wacoll import Topology

    n = len(rates)
    pairs = {
        (a, b): (args.latency, rates[a]) for a in range(n) for b in range(n) if a != b
    }
    return Topology.from_sizes(
        [1] * n,
        intra_latency=args.latency,
        intra_bandwidth=args.fast_rate,
        wan_latency=args.latency,
        wan_bandwidth=args.fast_rate,
        wan_pairs=pairs,
        node_bandwidth=rates,
        t_ini=[nbytes / r + args.latency for r in rates],
    )


def mpich_env(args):
    """MPICH settings for the ranks: with --throttle, idle pollers sleep (usleep(1))."""
    if not args.throttle:
        return {}
    return {
        "MPIR_CVAR_CH4_PROGRESS_THROTTLE": "1",
        "MPIR_CVAR_CH4_PROGRESS_THROTTLE_NO_PROGRESS_COUNT": str(args.throttle),
    }


def impls_for(args):
    out = [
        {"name": t, "family": "tree", "tree": t}
        for t in TREES
        if not (t == "optimal" and args.no_optimal)
    ]
    if not args.no_native:
        out.append({"name": "native", "family": "native"})
    return out


def bcast_latency(plan, model):
    from wacoll.plans.sim import simulate

    result = simulate(plan, model)
    return max(result.arrivals) if result.arrivals else 0.0


def simulate_size(topo, impls, measured_tini=None):
    """Per tree: (TiniModel latency, TiniModel latency with measured t_ini, plan)."""
    from wacoll.plans import build
    from wacoll.plans.sim import TiniModel

    out = {}
    for impl in impls:
        if impl["family"] == "native":
            continue
        plan = build("bcast", topo, "tree", tree=impl["tree"], count=1)
        # the cost models see one message of the size in question: its cost is in t_ini
        tini = bcast_latency(plan, TiniModel(topo))
        tmeas = bcast_latency(plan, TiniModel(measured_tini)) if measured_tini else None
        out[impl["name"]] = (tini, tmeas, plan)
    return out


def link_latency(topo, impl, nbytes):
    from wacoll.plans import build
    from wacoll.plans.sim import LinkModel

    plan = build("bcast", topo, "tree", tree=impl["tree"], count=nbytes)
    return bcast_latency(plan, LinkModel(topo))


def random_placement_factors(args, fraction, nbytes, trials, ranks=None):
    """Mean TiniModel factor over binomial, over random choices of the fast ranks."""
    import copy

    from wacoll.plans import build
    from wacoll.plans.sim import TiniModel

    if ranks is not None:
        args = copy.copy(args)
        args.ranks = ranks
    rng = random.Random(12345)
    n = max(1, round(fraction * args.ranks))
    acc = {t: [] for t in ("spoc", "fnf")}
    for _ in range(trials):
        fast = [0] + rng.sample(range(1, args.ranks), n - 1)
        topo = topology_for(args, rates_for(args, fast), nbytes)
        base = bcast_latency(
            build("bcast", topo, "tree", tree="binomial"), TiniModel(topo)
        )
        for t in acc:
            acc[t].append(
                base
                / bcast_latency(build("bcast", topo, "tree", tree=t), TiniModel(topo))
            )
    return {t: statistics.mean(v) for t, v in acc.items()}


# ------------------------------------------------------------------ output
def _ms(seconds):
    return None if seconds is None else round(seconds * 1e3, 4)


def _f(value, width, digits=2):
    return f"{'-':>{width}s}" if value is None else f"{value:{width}.{digits}f}"


# ------------------------------------------------------------------ running
def run_fraction(args, fraction, impls, say, workdir, simulate_only):
    """Measure (unless simulate_only) and simulate one fraction of fast ranks."""
    from wacoll.emulate import Testbed, TestbedError

    fast = fast_ranks(args.ranks, fraction, args.seed)
    rates = rates_for(args, fast)
    say(
        f"\n== {fraction:.1%} fast: {len(fast)} of {args.ranks} ranks fast {fast} "
        f"({args.fast_rate / 1e6:g} MB/s), the others {args.fast_rate / args.ratio / 1e6:.3g}"
        f" MB/s; link latency {args.latency * 1e6:g} us"
    )
    topos = {n: topology_for(args, rates, n) for n in args.sizes}
    measured, reason = None, "--simulate-only" if simulate_only else None
    if not simulate_only:
        spec = {
            "reps": args.reps,
            "margin": 0.05,
            "root": 0,
            "fast": fast,
            "progress": True,
            "probe_reps": 3 if args.quick else 7,
            "topologies": {str(n): t.to_dict() for n, t in topos.items()},
            "impls": impls,
        }
        spec_path = workdir / f"f{fraction}-spec.json"
        out_path = workdir / f"f{fraction}-out.json"
        spec_path.write_text(json.dumps(spec))
        worst = sum(
            len(impls) * args.reps * (0.15 + 12 * n / min(rates) * 1.5)
            for n in args.sizes
        )
        try:
            with Testbed(
                topos[args.sizes[0]], name=TESTBED, per_node=False, uplink=True
            ) as tb:
                check = tb.last_check
                say(
                    "testbed self-check (configured vs measured), one line per sender "
                    "kind:"
                )
                shown = set()
                lines = check.table().splitlines()
                say("  " + lines[0])
                for p, line in zip(check.pairs, lines[1:]):
                    kind = (
                        "fast" if p.src_cluster in fast else "slow",
                        "fast" if p.dst_cluster in fast else "slow",
                    )
                    if kind not in shown:
                        shown.add(kind)
                        say(f"  {line}   [{kind[0]} -> {kind[1]}]")
                say(
                    f"  {lines[-1]} ({len(check.pairs)} directed pairs; "
                    f"median measured one-way "
                    f"{statistics.median(p.latency for p in check.pairs if p.latency) * 1e6:.0f}"
                    f" us)"
                )
                run = tb.run(
                    [sys.executable, str(APP), str(spec_path), str(out_path)],
                    timeout=120 + worst,
                    capture=False,
                    cwd=str(ROOT),
                    env=mpich_env(args),
                )
                if run.ok:
                    measured = json.loads(out_path.read_text())
                    measured["_meta"]["transport"] = run.transport
                else:
                    reason = failure(run)
        except TestbedError as exc:
            reason = f"the testbed failed: {exc}"
        if reason:
            say(f"  no measurements: {reason}")
    rows = []
    for n in args.sizes:
        topo = topos[n]
        meas = (measured or {}).get(str(n))
        one = (meas or {}).get("one_way", {})
        m_fast, m_slow = one.get("fast->slow"), one.get("slow->fast")
        measured_tini = None
        if m_fast and m_slow:
            measured_tini = [m_fast if r in fast else m_slow for r in range(args.ranks)]
        sims = simulate_size(topo, impls, measured_tini)
        link = {
            i["name"]: link_latency(topo, i, n) for i in impls if i["family"] != "native"
        }
        base_meas = median(
            (meas or {}).get("impls", {}).get("binomial", {}).get("latency")
        )
        base_tini = sims["binomial"][0]
        base_link = link["binomial"]
        for impl in impls:
            name = impl["name"]
            tini, tmeas, plan = sims.get(name, (None, None, None))
            row = {
                "ranks": args.ranks,
                "fast_fraction": fraction,
                "fast_ranks": " ".join(map(str, fast)),
                "bytes": n,
                "impl": name,
                "plan": "MPI library" if plan is None else f"tree/{plan.algorithm}",
                "tini_model_ms": _ms(tini),
                "tini_measured_model_ms": _ms(tmeas),
                "link_model_ms": _ms(link.get(name)),
                "tini_model_factor": round(base_tini / tini, 3) if tini else None,
                "link_model_factor": round(base_link / link[name], 3)
                if name in link
                else None,
                "t_ini_fast_ms": _ms(n / args.fast_rate + args.latency),
                "t_ini_slow_ms": _ms(n * args.ratio / args.fast_rate + args.latency),
                "measured_fast_ms": _ms(m_fast),
                "measured_slow_ms": _ms(m_slow),
                "load1": load1(),
                "command": args.command,
            }
            if meas is not None and name in meas["impls"]:
                lat = meas["impls"][name]["latency"]
                med = median(lat)
                row.update(
                    median_ms=_ms(med),
                    min_ms=_ms(min((v for v in lat if v is not None), default=None)),
                    reps=len(lat),
                    valid_reps=sum(v is not None for v in lat),
                    correct=meas["impls"][name]["ok"],
                    factor_vs_binomial=round(base_meas / med, 3)
                    if base_meas and med
                    else None,
                )
            rows.append(row)
    return rows, measured


def print_fraction(rows, say, measured):
    say(
        f"  {'size':>7s} {'impl':9s} "
        + (f"{'meas ms':>8s} {'min ms':>7s} {'x bin':>6s} " if measured else "")
        + f"{'Tini ms':>8s} {'x bin':>6s} {'Tini(meas)':>10s} {'Link ms':>8s} {'x bin':>6s}"
        + (f" {'t_ini meas f/s ms':>17s} ok" if measured else "")
    )
    last = None
    for r in rows:
        size = human(r["bytes"]) if r["bytes"] != last else ""
        last = r["bytes"]
        line = f"  {size:>7s} {r['impl']:9s} "
        if measured:
            line += (
                f"{_f(r.get('median_ms'), 8)} {_f(r.get('min_ms'), 7)} "
                f"{_f(r.get('factor_vs_binomial'), 6)} "
            )
        line += (
            f"{_f(r['tini_model_ms'], 8)} {_f(r['tini_model_factor'], 6)} "
            f"{_f(r['tini_measured_model_ms'], 10)} {_f(r['link_model_ms'], 8)} "
            f"{_f(r['link_model_factor'], 6)}"
        )
        if measured:
            tm = (
                f"{_f(r['measured_fast_ms'], 0)}/{_f(r['measured_slow_ms'], 0)}"
                if size
                else ""
            )
            line += f" {tm:>17s} {'yes' if r.get('correct') else ('-' if r.get('correct') is None else 'NO')}"
        say(line)


def plot(path, rows, fractions, measured):
    plt = pyplot()
    fig, axes = plt.subplots(
        1, len(fractions) + 1, figsize=(4.4 * (len(fractions) + 1), 4.2)
    )
    colors = {
        "binomial": "C0",
        "spoc": "C1",
        "fnf": "C2",
        "optimal": "C3",
        "native": "C7",
    }
    for ax, frac in zip(axes, fractions):
        sub = [r for r in rows if r["fast_fraction"] == frac]
        for impl in dict.fromkeys(r["impl"] for r in sub):
            pts = sorted(
                (r["bytes"], r.get("median_ms"), r.get("tini_model_ms"))
                for r in sub
                if r["impl"] == impl
            )
            xs = [p[0] / 1024 for p in pts]
            if measured and any(p[1] for p in pts):
                ax.plot(
                    xs,
                    [p[1] for p in pts],
                    "o-",
                    color=colors.get(impl),
                    label=f"{impl} measured",
                )
            if any(p[2] for p in pts):
                ax.plot(
                    xs,
                    [p[2] for p in pts],
                    "--",
                    color=colors.get(impl),
                    label=f"{impl} TiniModel"
                    if not measured or impl == "binomial"
                    else None,
                )
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (KiB)")
        ax.set_ylabel("broadcast latency (ms)")
        ax.set_title(f"{frac:.1%} fast ranks")
        ax.legend(fontsize=7)
    ax = axes[-1]
    for frac, style in zip(fractions, ("o-", "s-", "^-", "d-")):
        for impl in ("spoc", "fnf"):
            key = "factor_vs_binomial" if measured else "tini_model_factor"
            pts = sorted(
                (r["bytes"], r.get(key))
                for r in rows
                if r["fast_fraction"] == frac and r["impl"] == impl and r.get(key)
            )
            if pts:
                ax.plot(
                    [p[0] / 1024 for p in pts],
                    [p[1] for p in pts],
                    style,
                    color=colors[impl],
                    label=f"{impl} {frac:.1%}",
                    alpha=0.5 + 0.5 * frac,
                )
    ax.axhline(1.0, color="k", lw=0.5)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (KiB)")
    ax.set_ylabel("factor of improvement over binomial")
    ax.set_title(
        "factor of improvement" + (" (measured)" if measured else " (SIMULATED)")
    )
    ax.legend(fontsize=7)
    fig.suptitle(
        "Banikazemi Fig. 4 on the emulated testbed: "
        + (
            "measured (solid) and TiniModel (dashed)"
            if measured
            else "SIMULATED ONLY (no testbed)"
        )
    )
    save_figure(fig, path, 100)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    say = Report()
    t0 = time.monotonic()
    from wacoll.emulate import unavailable_reason

    say(
        "Banikazemi et al. Section 7.1 / Figure 4: broadcast latency with fast and slow "
        "ranks"
    )
    say(f"command: {args.command}")
    say(f"machine: shared; {load_text()}")
    slow_rate = args.fast_rate / args.ratio
    say(
        f"{args.ranks} ranks (the paper: 16; scaled to this machine), root 0 (fast); fast "
        f"links {args.fast_rate / 1e6:g} MB/s, slow {slow_rate / 1e6:.3g} MB/s (ratio "
        f"{args.ratio:g}), one-way latency {args.latency * 1e6:g} us; one outgoing queue "
        "per rank (uplink), so t_ini[r] = bytes / rate[r] + latency:"
    )
    for n in args.sizes:
        say(
            f"  {human(n):>7s}: t_ini fast {(n / args.fast_rate + args.latency) * 1e3:.3f} "
            f"ms, slow {(n / slow_rate + args.latency) * 1e3:.3f} ms, ratio "
            f"{(n / slow_rate + args.latency) / (n / args.fast_rate + args.latency):.2f}"
        )
    say(
        f"median of {args.reps} repetitions; wacoll with validate=False (arguments trusted, "
        "as native MPI does); trees from the configured t_ini of each size; MPICH "
        + (f"progress throttle {args.throttle}" if args.throttle else "without throttle")
        + ("; optimal tree skipped" if args.no_optimal else "")
    )
    reason = "--simulate-only was given" if args.simulate_only else unavailable_reason()
    if reason:
        say(
            f"\nNO MEASUREMENTS: {reason}. The tables show the simulator's predictions "
            "(TiniModel and LinkModel), not measurements."
        )
    impls = impls_for(args)
    rows, any_measured, transport = [], False, None
    with tempfile.TemporaryDirectory(prefix="bench-hetero-") as tmp:
        for frac in args.fractions:
            got, measured = run_fraction(args, frac, impls, say, Path(tmp), bool(reason))
            rows += got
            if measured is not None:
                any_measured = True
                transport = measured["_meta"].get("transport")
    say(
        f"\nResults per fraction ({'measured: median broadcast latency; ' if any_measured else 'SIMULATED; '}"
        "x bin = binomial's latency / this one; Tini = TiniModel with the configured "
        "t_ini; Tini(meas) = TiniModel with the measured one-message times (fastest of a "
        "few, per sender kind; column t_ini meas f/s); Link = "
        f"LinkModel of the emulated network; transport {transport or '-'}):"
    )
    for frac in args.fractions:
        sub = [r for r in rows if r["fast_fraction"] == frac]
        say(f"\n{frac:.1%} fast ranks ({sub[0]['fast_ranks']}):")
        print_fraction(sub, say, any_measured)
    headline(args, rows, say, any_measured)
    say(f"\ntook {time.monotonic() - t0:.0f} s; {load_text()}")
    if not args.no_write:
        RESULTS.mkdir(exist_ok=True)
        stem = (
            "hetero_bcast"
            + (f"-n{args.ranks}" if args.ranks != 8 else "")
            + ("-quick" if args.quick else "")
            + ("" if any_measured else "-simulated")
        )
        write_csv(RESULTS / f"{stem}.csv", FIELDS, rows)
        plot(RESULTS / f"{stem}.png", rows, args.fractions, any_measured)
        say(f"wrote benchmarks/results/{stem}.csv, .png, .txt")
        say.write(RESULTS / f"{stem}.txt")
    return 0


def headline(args, rows, say, measured):
    n = args.headline
    trials = 50 if args.quick else 200
    say(
        f"\nFactor of improvement over binomial at {human(n)} (the paper, 16 nodes: SPOC "
        "1.7 at 50 % fast; FNF up to 2.3). 'random N': TiniModel, mean over {trials} "
        "random choices of the fast ranks among N ranks (root fast):".replace(
            "{trials}", str(trials)
        )
    )
    say(
        f"  {'fast':>6s} {'tree':8s} "
        + (f"{'measured':>8s} " if measured else "")
        + f"{'TiniModel':>9s} {'Link':>6s} {'random ' + str(args.ranks):>9s} {'random 16':>9s}"
    )
    for frac in args.fractions:
        rand = random_placement_factors(args, frac, n, trials)
        rand16 = random_placement_factors(args, frac, n, trials, ranks=16)
        for impl in ("spoc", "fnf", "optimal"):
            r = next(
                (
                    x
                    for x in rows
                    if x["fast_fraction"] == frac
                    and x["bytes"] == n
                    and x["impl"] == impl
                ),
                None,
            )
            if r is None:
                continue
            say(
                f"  {frac:6.1%} {impl:8s} "
                + (f"{_f(r.get('factor_vs_binomial'), 8)} " if measured else "")
                + f"{_f(r['tini_model_factor'], 9)} {_f(r['link_model_factor'], 6)} "
                + f"{_f(rand.get(impl), 9)} {_f(rand16.get(impl), 9)}"
            )
    best = {}
    key = "factor_vs_binomial" if measured else "tini_model_factor"
    for r in rows:
        if r["impl"] in ("spoc", "fnf") and r.get(key) and r["bytes"] >= 4096:
            best[r["impl"]] = max(best.get(r["impl"], 0), r[key])
    if best:
        say(
            "  largest factor over every size >= 4 KiB (where t_ini dominates the "
            "noise) and fraction: "
            + ", ".join(f"{k} {v:.2f}" for k, v in sorted(best.items()))
            + (" (measured)" if measured else " (simulated)")
        )


if __name__ == "__main__":
    sys.exit(main())
