"""wacoll's reduction kernels against numpy's in-place ufuncs.

For SUM and MAX over float64 and int32, and array sizes from 1 KiB to 64 MiB (powers
of 4), times ``reduce_into(op, a, b)`` and ``np.add(a, b, out=b)`` /
``np.maximum(a, b, out=b)``. The calls are interleaved repeat by repeat, so a change
in machine load hits both sides alike; the figures kept are medians over repeats.

Only the public face of the kernels is timed: ``wacoll._kernels.reduce_into``, the
function the executor calls. Earlier versions also timed the compiled entry point
behind it (a ``kernel`` column; ``results/kernels.csv`` from those runs still has
``kernel_s``); that entry point is a private name of ``wacoll._kernels``, which
changes without notice, so the benchmark no longer reaches for it. The wrapper's own
cost shows where ``reduce_into`` falls behind numpy at the small sizes.

Throughput counts the memory traffic of one call: two arrays read, one written
(3 x the array size). "speedup" is numpy's time over wacoll's (above 1: wacoll faster).

Run from the repository root::

    .venv/bin/python benchmarks/bench_kernels.py            # full table, ~1 minute
    .venv/bin/python benchmarks/bench_kernels.py --quick    # up to 1 MiB

and the raw numbers go to ``benchmarks/results/kernels.csv`` (``kernels-quick.csv``
with ``--quick``). Set
``WACOLL_KERNELS=baseline`` to measure the portable build instead of the AVX2 one.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from wacoll._kernels import KERNEL_VARIANT, reduce_into

from _harness import RESULTS, calls_per_batch, command_line, human, write_csv

__all__ = ["main", "measure"]

CASES = [("sum", "float64"), ("max", "float64"), ("sum", "int32"), ("max", "int32")]
UFUNCS = {"sum": np.add, "max": np.maximum}
KIB = 1024


def measure(op, dtype, nbytes, repeats=21, target=0.005):
    """Seconds per call of wacoll and numpy, for one case.

    Each repeat times one batch of calls of each contender, back to back and in a
    rotating order, so that a change in the machine's load hits all alike. Returns the
    medians over repeats of the time per call, the median over repeats of numpy's time
    over wacoll's in the same repeat (the paired speedup), and the calls per batch.
    """
    rng = np.random.default_rng(0)
    n = nbytes // np.dtype(dtype).itemsize
    src = (rng.standard_normal(n) * 100).astype(dtype)
    dst = (rng.standard_normal(n) * 100).astype(dtype)
    ufunc = UFUNCS[op]
    runners = [
        ("wacoll", lambda: reduce_into(op, src, dst)),
        ("numpy", lambda: ufunc(src, dst, out=dst)),
    ]
    number = calls_per_batch(runners[-1][1], target)
    times = {name: [] for name, _ in runners}
    k = len(runners)
    for r in range(repeats):
        for name, fn in runners[r % k :] + runners[: r % k]:
            start = time.perf_counter()
            for _ in range(number):
                fn()
            times[name].append((time.perf_counter() - start) / number)
    speedup = statistics.median(
        t_np / t_w for t_np, t_w in zip(times["numpy"], times["wacoll"])
    )
    return {name: statistics.median(t) for name, t in times.items()}, speedup, number


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="sizes up to 1 MiB only")
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument(
        "--out",
        help="CSV file (default results/kernels.csv; with "
        "--quick results/kernels-quick.csv)",
    )
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    args.out = args.out or str(
        RESULTS / ("kernels-quick.csv" if args.quick else "kernels.csv")
    )
    top = 1 if args.quick else 64
    sizes = [KIB * 4**k for k in range(10) if KIB * 4**k <= top * KIB * KIB]

    print("command:", command_line(__file__, argv))
    print(
        f"numpy {np.__version__}; wacoll kernels: {KERNEL_VARIANT}; medians of "
        f"{args.repeats} repeats; GB/s counts 3 x array bytes per call; speedup = "
        "median of numpy time / wacoll time within a repeat"
    )
    header = (
        f"{'op':<4} {'dtype':<8} {'size':>7} {'wacoll us':>10} "
        f"{'numpy us':>10} {'wacoll GB/s':>12} {'numpy GB/s':>11} {'speedup':>8}"
    )
    print(header)
    print("-" * len(header))
    rows = []
    for op, dtype in CASES:
        for nbytes in sizes:
            t, speedup, number = measure(op, dtype, nbytes, args.repeats)
            traffic = 3 * nbytes / 1e9
            row = {
                "op": op,
                "dtype": dtype,
                "bytes": nbytes,
                "elements": nbytes // np.dtype(dtype).itemsize,
                "wacoll_s": t["wacoll"],
                "numpy_s": t["numpy"],
                "wacoll_GBps": traffic / t["wacoll"],
                "numpy_GBps": traffic / t["numpy"],
                "speedup": speedup,
                "repeats": args.repeats,
                "calls_per_repeat": number,
                "variant": KERNEL_VARIANT,
                "numpy_version": np.__version__,
            }
            rows.append(row)
            print(
                f"{op:<4} {dtype:<8} {human(nbytes):>7} {t['wacoll'] * 1e6:>10.3f} "
                f"{t['numpy'] * 1e6:>10.3f} "
                f"{row['wacoll_GBps']:>12.2f} {row['numpy_GBps']:>11.2f} "
                f"{row['speedup']:>8.2f}",
                flush=True,
            )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_csv(out, list(rows[0]), rows)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
