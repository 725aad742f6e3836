"""The reproducible SUM kernels against numpy's plain in-place addition.

For float64 vectors of 1 MiB and 64 MiB of input, times per element, in one run and
interleaved repeat by repeat (so that a change in the machine's load hits all alike):

* ``np.add(a, b, out=b)``: the plain, order-dependent sum of one contribution;
* ``to_accumulator(a, A)``: one contribution turned into accumulators (32 B/element);
* ``combine(A, B)``: one accumulator array added into another;
* ``add_values(a, B)``: the fused convert-and-accumulate of plain values;
* ``from_accumulator(B, out)``: the final rounding;
* ``pack`` and ``unpack`` (:mod:`wacoll._kernels.repro_wire`) of a partial sum of two
  contributions: what each hop of a plan on accumulators adds, on the sender and on
  the receiver (16 B/element on the wire);
* ``C += A`` on int64 accumulator arrays with numpy: the memory traffic of a combine
  (96 B/element) with no arithmetic to speak of, a floor for ``combine``. (``C`` is a
  copy of ``B``: a plain integer addition adds the heads too, which would leave ``B``
  no valid accumulator, and every later ``combine`` into it on its slow path.)

"ratio" is each time over ``np.add``'s (medians of per-repeat ratios). The wrappers
are called (argument checks included). Run from the repository root::

    .venv/bin/python benchmarks/bench_repro.py            # ~1 minute
    .venv/bin/python benchmarks/bench_repro.py --quick    # 1 MiB only

and the raw numbers go to ``benchmarks/results/repro.csv``. Set
``WACOLL_KERNELS=baseline`` to measure the portable build instead of the AVX2 one.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from wacoll._kernels import repro, repro_wire
from wacoll._kernels.repro import add_values, combine, from_accumulator, to_accumulator

from _harness import RESULTS, calls_per_batch, command_line, human, load1, write_csv

__all__ = ["main", "measure"]

MIB = 1 << 20


def measure(nbytes, repeats):
    """Median seconds per call of each contender, and median ratios to np.add."""
    rng = np.random.default_rng(0)
    n = nbytes // 8
    a = rng.standard_normal(n) * 100
    b = rng.standard_normal(n) * 100
    A = to_accumulator(a)
    B = to_accumulator(b)
    C = B.copy()
    out = np.empty(n)
    element = repro.element_dtype("float64")
    partial = combine(A, B.copy()).view(element).reshape(-1)
    message = np.empty(repro_wire.max_message_bytes(n, element) + 8, np.uint8)
    packed = repro_wire.pack(partial, message)
    unpacked = np.empty(n, element)
    runners = [
        ("np.add", lambda: np.add(a, b, out=b)),
        ("to_accumulator", lambda: to_accumulator(a, A)),
        ("combine", lambda: combine(A, B)),
        ("add_values", lambda: add_values(a, B)),
        ("from_accumulator", lambda: from_accumulator(B, out)),
        ("numpy int64 C+=A", lambda: np.add(A, C, out=C)),
        ("pack", lambda: repro_wire.pack(partial, message)),
        ("unpack", lambda: repro_wire.unpack(packed, unpacked)),
    ]
    number = calls_per_batch(runners[0][1], 0.02 if nbytes > MIB else 0.005, cap=1 << 16)
    times = {name: [] for name, _ in runners}
    for r in range(repeats):
        k = r % len(runners)
        for name, fn in runners[k:] + runners[:k]:
            start = time.perf_counter()
            for _ in range(number):
                fn()
            times[name].append((time.perf_counter() - start) / number)
    ratios = {
        name: statistics.median(t / t0 for t, t0 in zip(times[name], times["np.add"]))
        for name in times
    }
    medians = {name: statistics.median(t) for name, t in times.items()}
    # The two-pass path a receiver of raw values could take: convert, then combine.
    ratios["to_accumulator+combine"] = statistics.median(
        (t1 + t2) / t0
        for t1, t2, t0 in zip(times["to_accumulator"], times["combine"], times["np.add"])
    )
    medians["to_accumulator+combine"] = medians["to_accumulator"] + medians["combine"]
    return n, medians, ratios, number


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 MiB only")
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument("--out", default=str(RESULTS / "repro.csv"))
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    sizes = [MIB] if args.quick else [MIB, 64 * MIB]

    print("command:", command_line(__file__, argv))
    print(
        f"numpy {np.__version__}; repro kernels: {repro.KERNEL_VARIANT}; float64; "
        f"medians of {args.repeats} repeats; load average {load1()}; ratio = time / "
        "np.add time within a repeat"
    )
    header = f"{'input':>7} {'operation':<24} {'ns/elem':>8} {'ratio':>7} {'GB/s':>7}"
    print(header)
    print("-" * len(header))
    traffic = {
        "np.add": 24,
        "to_accumulator": 40,
        "combine": 96,
        "add_values": 72,
        "from_accumulator": 40,
        "numpy int64 C+=A": 96,
        "to_accumulator+combine": 136,
        "pack": 48,
        "unpack": 48,
    }
    rows = []
    for nbytes in sizes:
        n, med, ratios, number = measure(nbytes, args.repeats)
        for name in traffic:
            ns = med[name] / n * 1e9
            row = {
                "bytes": nbytes,
                "elements": n,
                "operation": name,
                "seconds": med[name],
                "ns_per_element": ns,
                "ratio_to_np_add": ratios[name],
                "bytes_moved_per_element": traffic[name],
                "GBps": traffic[name] * n / med[name] / 1e9,
                "repeats": args.repeats,
                "calls_per_repeat": number,
                "variant": repro.KERNEL_VARIANT,
                "numpy_version": np.__version__,
            }
            rows.append(row)
            print(
                f"{human(nbytes):>7} {name:<24} {ns:>8.3f} {ratios[name]:>7.2f} "
                f"{row['GBps']:>7.1f}",
                flush=True,
            )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_csv(out, list(rows[0]), rows)
    print(
        "GB/s counts the bytes each operation must move per element (np.add: 24; "
        "accumulators are 32 B per float64 element)"
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
