"""Tests of the reproducible SUM accumulators (wacoll._kernels.repro).

Reproducibility is checked bit for bit: the accumulators of k contributions combined
along random binary trees (random order and grouping) must be identical arrays, and so
must their rounded sums. Accuracy is checked against ``math.fsum``, the correctly
rounded sum, and against the stated bound ``n 2**-64 max|x| + 2**-53 |S|``.
"""

import math
import random
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wacoll._kernels import repro
from wacoll._kernels.repro import (
    DTYPES,
    MAX_DEPOSITS,
    accumulator_bytes,
    accumulator_dtype,
    add_values,
    combine,
    from_accumulator,
    new_accumulator,
    reproducible_sum,
    to_accumulator,
)
from wacoll.errors import AccumulatorOverflowError, BufferMismatchError

REALS = ["float32", "float64"]


def bits(a):
    """The raw bits of an array, for bit-exact comparisons (NaN == NaN, -0 != 0)."""
    a = np.ascontiguousarray(a)
    return a.view(np.uint8).tobytes()


def tree_sum(accs, rng):
    """Combine ``accs`` (copies) along a random binary tree, in random order."""
    pool = [a.copy() for a in accs]
    rng.shuffle(pool)
    while len(pool) > 1:
        i, j = sorted(rng.sample(range(len(pool)), 2))
        b = pool.pop(j)
        a = pool.pop(i)
        if rng.random() < 0.5:
            a, b = b, a
        pool.append(combine(a, b))
    return pool[0]


def random_values(rng, n, dtype, spread=30):
    """Values of random signs over ``spread`` decimal orders of magnitude."""
    real = np.dtype(dtype).type(0).real.dtype
    lo = -spread // 2 if real == np.float64 else -min(spread, 30) // 2
    mags = 10.0 ** rng.uniform(lo, -lo, n)
    v = rng.choice([-1.0, 1.0], n) * mags * rng.random(n)
    if np.dtype(dtype).kind == "c":
        v = v + 1j * (rng.choice([-1.0, 1.0], n) * 10.0 ** rng.uniform(lo, -lo, n))
    return v.astype(dtype)


def exact_sum(values):
    return sum((Fraction(float(v)) for v in values), Fraction(0))


# -- layout ---------------------------------------------------------------------------


def test_layout_sizes():
    assert {str(dt): accumulator_bytes(dt) for dt in DTYPES} == {
        "float32": 24,
        "float64": 32,
        "complex64": 48,
        "complex128": 64,
    }
    assert new_accumulator(5, "complex128").shape == (5, 2, 4)
    assert accumulator_dtype(np.float32) == np.dtype((np.int64, (3,)))
    # Zeros are the empty sum (+0.0), the neutral element of combine.
    acc = to_accumulator(np.array([-0.0, 2.5, np.inf]))
    before = acc.copy()
    combine(new_accumulator(3, "float64"), acc)
    assert bits(acc) == bits(before)


def test_accumulator_dtype_rejects():
    with pytest.raises(BufferMismatchError, match="dtype int32 has no reproducible"):
        accumulator_dtype("int32")
    with pytest.raises(BufferMismatchError, match="dtype >f8 has no reproducible"):
        accumulator_dtype(">f8")


# -- reproducibility ------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [str(d) for d in DTYPES])
def test_permutations_and_groupings_bit_identical(dtype):
    rng_np = np.random.default_rng(7)
    rng = random.Random(7)
    n, k = 300, 12
    xs = [random_values(rng_np, n, dtype) for _ in range(k)]
    accs = [to_accumulator(x) for x in xs]
    ref = tree_sum(accs, rng)
    ref_out = from_accumulator(ref)
    for _ in range(10):
        other = tree_sum(accs, rng)
        assert bits(other) == bits(ref)
        assert bits(from_accumulator(other)) == bits(ref_out)
    # add_values in any order gives the same accumulator as combining.
    order = list(range(k))
    rng.shuffle(order)
    acc = new_accumulator(n, dtype)
    for i in order:
        add_values(xs[i], acc)
    assert bits(acc) == bits(ref)
    # A plain sum of the same data does depend on the order.
    if dtype == "float64":
        plain = [
            np.sum(np.stack([xs[i] for i in perm]), axis=0)
            for perm in (order, order[::-1])
        ]
        assert bits(plain[0]) != bits(plain[1])


finite64 = st.floats(allow_nan=False, allow_infinity=False, width=64)
any64 = st.floats(width=64)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(any64, min_size=3, max_size=3), min_size=1, max_size=9),
    st.randoms(use_true_random=False),
)
def test_random_trees_property(rows, rnd):
    """Random contributions (any floats, specials included), random trees: same bits."""
    accs = [to_accumulator(np.array(r, dtype=np.float64)) for r in rows]
    first = tree_sum(accs, rnd)
    second = tree_sum(accs, rnd)
    assert bits(first) == bits(second)
    assert bits(from_accumulator(first)) == bits(from_accumulator(second))


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.floats(allow_nan=False, allow_infinity=False, width=32),
        min_size=1,
        max_size=12,
    ),
    st.randoms(use_true_random=False),
)
def test_random_trees_property_float32(values, rnd):
    accs = [to_accumulator(np.array([v], dtype=np.float32)) for v in values]
    assert bits(tree_sum(accs, rnd)) == bits(tree_sum(accs, rnd))


def test_variants_agree():
    """The AVX2 and portable builds give the same bits."""
    from wacoll._kernels import _repro as baseline

    rng = np.random.default_rng(3)
    x = random_values(rng, 1000, "float64", spread=600)
    y = random_values(rng, 1000, "float64", spread=20)
    for mod in (baseline, repro.compiled):
        a = np.zeros((1000, 4), np.int64)
        mod.to_acc_f64(x, a)
        mod.add_f64(y, a)
        out = np.empty(1000)
        mod.from_acc_f64(a, out)
        if mod is baseline:
            ref = (bits(a), bits(out))
        else:
            assert (bits(a), bits(out)) == ref


# -- the kernels' bits against a model of the format ----------------------------------
#
# The kernels run the common case (finite values; rows with the same top bin and no new
# flag) in vector loops over groups of four rows and leave the rest to general code.
# ``model_row`` and ``model_merge`` restate the format in Python integers, row by row,
# so every row the kernels write, in either build and wherever it falls in a group of
# four, can be compared with what the format defines.

_M32 = (1 << 32) - 1
_M64 = (1 << 64) - 1


def _int64(v):
    """``v`` wrapped to a signed 64-bit integer (two's complement)."""
    v &= _M64
    return v - (1 << 64) if v >> 63 else v


def model_row(x, dtype):
    """The accumulator row of the single value ``x``, as a list of Python integers."""
    x = np.array(x, dtype)
    if x.dtype == np.float64:
        u = int(x.view(np.uint64))
        neg, e, frac, nbins = u >> 63, (u >> 52) & 0x7FF, u & ((1 << 52) - 1), 3
        special, m, s = e == 0x7FF, frac | ((e != 0) << 52), max(e, 1) + 63
        hi = (s + 52) >> 5
        off = s + 64 - 32 * hi  # the significand's place in the 3 bins
        grid = -1138  # bin b holds weights 2**(32 b + grid) up
        negzero = u == 1 << 63
    else:
        u = int(x.view(np.uint32))
        neg, e, frac, nbins = u >> 31, (u >> 23) & 0xFF, u & ((1 << 23) - 1), 2
        special, m, s = e == 0xFF, frac | ((e != 0) << 23), max(e, 1) + 31
        hi = (s + 23) >> 5
        off = s + 32 - 32 * hi
        grid = -181
        negzero = u == 1 << 31
    flags = 0 if negzero else repro.compiled.F_NOT_NEG_ZERO
    if special:  # infinity or NaN: a flag, no index, no bins
        flags |= (
            repro.compiled.F_NAN
            if frac
            else repro.compiled.F_NEG_INF
            if neg
            else repro.compiled.F_POS_INF
        )
        return [(1 << repro.compiled.COUNT_SHIFT) | flags] + [0] * nbins
    wide = m << off
    pieces = [(wide >> (32 * (nbins - 1 - k))) & _M32 for k in range(nbins)]
    signed = [-p if neg else p for p in pieces]
    # The pieces hold the value exactly, at the weights of bins hi, hi - 1, ...
    value = sum(
        Fraction(p) * Fraction(2) ** (32 * (hi - k) + grid) for k, p in enumerate(signed)
    )
    assert value == Fraction(float(x)), x
    return [(1 << repro.compiled.COUNT_SHIFT) | flags | hi] + signed


def model_merge(d, s):
    """Row ``d`` with row ``s`` added (lists of Python integers), as the format says:
    the higher top bin, bins aligned to it (the ones below the window dropped), flags
    or-ed, counts added (all words wrapping at 64 bits)."""
    hd, hs = d[0] & _M64, s[0] & _M64
    idd, ids = hd & 0xFF, hs & 0xFF
    top = max(idd, ids)
    shift = repro.compiled.COUNT_SHIFT
    head = (((hd >> shift) + (hs >> shift)) << shift) | ((hd | hs) & 0xFF00) | top
    bins = [
        (d[1 + k - (top - idd)] if top - idd <= k else 0)
        + (s[1 + k - (top - ids)] if top - ids <= k else 0)
        for k in range(len(d) - 1)
    ]
    return [_int64(head)] + [_int64(b) for b in bins]


def kernel_builds():
    """The compiled variants to check: the portable one, and the AVX2 one if in use."""
    from wacoll._kernels import _repro as baseline

    return [baseline] + ([repro.compiled] if repro.compiled is not baseline else [])


SPECIALS = [0.0, -0.0, math.inf, -math.inf, math.nan, -math.nan]
EDGES64 = [
    5e-324,
    -5e-324,
    2.0**-1022,
    -(2.0**-1022 - 5e-324),
    1.7976931348623157e308,
    -1.7976931348623157e308,
    1.0,
    -1.0,
    2.0**31,
    2.0**32 - 1,
    2.0**-20,
]
EDGES32 = [
    1e-45,
    -1e-45,
    2.0**-126,
    -(2.0**-126 - 2.0**-149),
    3.4028235e38,
    -3.4028235e38,
    1.0,
    -1.0,
    2.0**31,
    2.0**24 - 1,
    2.0**-20,
]


def model_values(rng, dtype, n=72):
    """Finite values of all kinds (zeros, subnormals, every binade, both signs), with
    infinities and NaNs at every place of a group of four and in a run of five."""
    real = np.dtype(dtype)
    edges = EDGES64 if real == np.float64 else EDGES32
    bits_t = np.uint64 if real == np.float64 else np.uint32
    x = rng.integers(0, np.iinfo(bits_t).max, n, dtype=bits_t, endpoint=True).view(real)
    x = np.where(np.isfinite(x), x, real.type(1.5))
    x[rng.integers(0, n, 12)] = rng.standard_normal(12)
    x[: len(edges)] = edges
    x[len(edges) : len(edges) + 4] = [0.0, -0.0, -0.0, 0.0]
    for k, pos in enumerate([17, 22, 27, 32, 40, 41, 42, 43, 44, 50]):
        x[pos] = SPECIALS[2 + k % 4]
    return x


def slices(n):
    """(start, stop) pairs: every start within a group of four, short and long spans."""
    return [
        (a, b)
        for a in range(5)
        for b in sorted({a, a + 1, a + 3, a + 4, a + 5, a + 7, a + 9, a + 13, n - 1, n})
        if b <= n
    ]


@pytest.mark.parametrize("dtype", REALS)
def test_to_accumulator_rows_match_model(dtype):
    rng = np.random.default_rng(21)
    x = model_values(rng, dtype)
    want = np.array([model_row(v, dtype) for v in x], np.int64)
    to = "to_acc_f64" if dtype == "float64" else "to_acc_f32"
    for mod in kernel_builds():
        for a, b in slices(len(x)):
            acc = np.full((b - a, want.shape[1]), 7, np.int64)
            getattr(mod, to)(x[a:b], acc)
            assert bits(acc) == bits(want[a:b]), (mod.__name__, a, b)
    assert bits(to_accumulator(x)) == bits(want)


def model_rows(rng, dtype, n):
    """Pairs of accumulator arrays (src, dst) of ``n`` rows with one top bin, where
    every fifth row is one where combining needs more than an addition, or is a limit
    case of one, each kind in turn (so each lands at every place of a group of four,
    the other three rows of its group being plain): a higher top bin on either side, a
    flag (infinity, NaN, a value other than -0.0) new to dst, at a different or the same
    top bin, flags only dst has, empty rows, arbitrary words. Plain rows have counts
    near and past the limit of 2**31 values, at the 48-bit wrap, and arbitrary bins
    (wrapping sums) here and there."""
    real = np.dtype(dtype)
    width = 4 if real == np.float64 else 3
    tiny = 1e-310 if width == 4 else 1e-40  # a subnormal: the lowest top bin
    specials = [math.inf, -math.inf, math.nan]
    row = lambda v: model_row(v, real)
    one_bin = lambda k: (rng.choice([-1.0, 1.0], k) * (1 + rng.random(k))).astype(real)
    src = np.array([row(v) for v in one_bin(n)], np.int64)
    dst = np.array([row(v) for v in one_bin(n)], np.int64)
    shift = repro.compiled.COUNT_SHIFT
    for i in rng.choice(n, n // 4, replace=False):
        kind = rng.integers(0, 3)
        if kind == 0:
            src[i, 0] = _int64(
                int(src[i, 0]) + (int(rng.choice([2**31 - 2, 2**31 - 1, 2**47])) << shift)
            )
            dst[i, 0] = _int64(
                int(dst[i, 0]) + (int(rng.choice([1, 2**31 - 1, 2**47])) << shift)
            )
        elif kind == 1:
            dst[i, 0] = _int64((int(dst[i, 0]) & 0xFFFF) | ((2**48 - 1) << shift))
        else:
            dst[i, 1:] = rng.integers(-(2**63), 2**63, width - 1, dtype=np.int64)
            src[i, 1:] = rng.integers(-(2**63), 2**63, width - 1, dtype=np.int64)
    kinds = [
        lambda: (row(3e30), None),  # higher top bin in src
        lambda: (None, row(-2e25)),  # ... in dst
        lambda: (row(2.0**-60), None),  # lower top bin in src
        lambda: (row(rng.choice(specials)), None),  # a new flag, index 0
        lambda: (None, row(rng.choice(specials))),
        lambda: (row(-0.0), None),  # src lacks "not -0.0"
        lambda: (None, row(-0.0)),  # src brings it, other index
        lambda: (None, 0),  # empty dst
        lambda: (0, None),  # empty src
        lambda: (rng.integers(-(2**63), 2**63, width, dtype=np.int64), None),
        lambda: (row(rng.choice(specials)), 0),  # new flag, same index (0)
        lambda: (row(rng.choice([-math.inf, math.nan])), row(math.inf)),
        lambda: (row(rng.choice([0.0, tiny])), row(-0.0)),  # "not -0.0", same index
        lambda: (row(-0.0), row(rng.choice([0.0, tiny]))),  # a plain addition
        lambda: (row(math.inf), row(rng.choice(specials))),  # maybe a new flag
        lambda: (row(tiny), row(-tiny)),  # a plain addition
        lambda: (row(rng.choice(specials)), row(rng.choice(specials))),
    ]
    for j, i in enumerate(range(0, n, 5)):
        s, d = kinds[j % len(kinds)]()
        if s is not None:
            src[i] = s
        if d is not None:
            dst[i] = d
    return src, dst


@pytest.mark.parametrize("dtype", REALS)
def test_combine_rows_match_model(dtype):
    rng = np.random.default_rng(22)
    n = 340  # each kind at each place of a group of four
    src, dst = model_rows(rng, dtype, n)
    want = np.array(
        [model_merge([int(w) for w in d], [int(w) for w in s]) for s, d in zip(src, dst)],
        np.int64,
    )
    for mod in kernel_builds():
        for a, b in slices(n):
            got = dst[a:b].copy()
            mod.combine(src[a:b], got)
            assert bits(got) == bits(want[a:b]), (mod.__name__, a, b)
    # Blocks of rows that all take the vector loop (or all but one row) too.
    same = np.repeat(src[:1], 40, axis=0), np.repeat(src[:1], 40, axis=0)
    for k in (None, 0, 3, 17, 39):
        s, d = same[0].copy(), same[1].copy()
        if k is not None:
            s[k] = model_row(math.inf, dtype)
        want = np.array(
            [model_merge([int(w) for w in r], [int(w) for w in q]) for q, r in zip(s, d)],
            np.int64,
        )
        for mod in kernel_builds():
            got = d.copy()
            mod.combine(s, got)
            assert bits(got) == bits(want), (mod.__name__, k)


@pytest.mark.parametrize("dtype", REALS)
def test_add_values_rows_match_model(dtype):
    rng = np.random.default_rng(23)
    x = model_values(rng, dtype, 340)
    _, acc = model_rows(rng, dtype, len(x))
    want = np.array(
        [model_merge([int(w) for w in r], model_row(v, dtype)) for v, r in zip(x, acc)],
        np.int64,
    )
    add = "add_f64" if dtype == "float64" else "add_f32"
    for mod in kernel_builds():
        for a, b in slices(len(x)):
            got = acc[a:b].copy()
            getattr(mod, add)(x[a:b], got)
            assert bits(got) == bits(want[a:b]), (mod.__name__, a, b)
    # Over several blocks of the buffered loop: the same as converting, then combining.
    y = np.tile(x, 9)
    big, _ = model_rows(rng, dtype, len(y))
    want = combine(to_accumulator(y), big.copy())
    for mod in kernel_builds():
        got = big.copy()
        getattr(mod, add)(y, got)
        assert bits(got) == bits(want), mod.__name__


def placed(a, offset):
    """A C-contiguous copy of ``a`` whose data starts ``offset`` bytes past a multiple
    of 32 (numpy puts large arrays 16 bytes past one)."""
    raw = np.empty(a.nbytes + 64, np.uint8)
    start = (offset - raw.ctypes.data) % 32
    out = raw[start : start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    assert out.ctypes.data % 32 == offset and out.flags.c_contiguous
    return out


@pytest.mark.parametrize("dtype", REALS)
def test_kernels_at_every_alignment(dtype):
    """Converting, combining and adding give the model's rows wherever the arrays sit
    relative to 32-byte boundaries (the vector loops take aligned vectors in two ways)."""
    rng = np.random.default_rng(24)
    n = 75
    x = model_values(rng, dtype, n)
    src, dst = model_rows(rng, dtype, n)
    rows = np.array([model_row(v, dtype) for v in x], np.int64)
    merged = np.array(
        [model_merge([int(w) for w in d], [int(w) for w in s]) for s, d in zip(src, dst)],
        np.int64,
    )
    added = np.array(
        [model_merge([int(w) for w in d], model_row(v, dtype)) for v, d in zip(x, dst)],
        np.int64,
    )
    to, add = (
        ("to_acc_f64", "add_f64") if dtype == "float64" else ("to_acc_f32", "add_f32")
    )
    for mod in kernel_builds():
        for a in (0, 8, 16, 24):
            for b in (0, 8, 16, 24):
                xs = placed(x, b)
                acc = placed(np.zeros_like(rows), a)
                getattr(mod, to)(xs, acc)
                assert bits(acc) == bits(rows), (mod.__name__, a, b)
                got = placed(dst, a)
                mod.combine(placed(src, b), got)
                assert bits(got) == bits(merged), (mod.__name__, a, b)
                got = placed(dst, a)
                getattr(mod, add)(xs, got)
                assert bits(got) == bits(added), (mod.__name__, a, b)


# -- accuracy -------------------------------------------------------------------------


def test_cancellation_and_wide_range():
    cases = [
        ([1e16, 1.0, -1e16], 1.0),
        ([1e300, 1e-300, -1e300], 0.0),  # 1e-300 is below 2**-64 * 1e300
        ([1e300, -1e300, 1e-300], 0.0),
        ([1.0, 1e-16, 1e-16], math.fsum([1.0, 1e-16, 1e-16])),
        ([2.0**1023, 2.0**1023, -(2.0**1023)], 2.0**1023),  # no overflow inside
        ([1e308, 1e308], math.inf),
        ([5e-324, 5e-324, -1e-323, 5e-324], 5e-324),  # subnormals are exact
        ([2.0**-1022, -5e-324], 2.0**-1022 - 5e-324),
    ]
    for values, expected in cases:
        got = reproducible_sum([np.array([v]) for v in values])[0]
        assert got == expected, (values, got)
        for perm in ([values[::-1]], [sorted(values)]):
            again = reproducible_sum([np.array([v]) for v in perm[0]])[0]
            assert bits(np.array(again)) == bits(np.array(got))


def test_correctly_rounded_when_range_is_moderate():
    """No value below 2**-44 max|x|: the result equals math.fsum exactly."""
    rng = np.random.default_rng(11)
    k, n = 64, 200
    data = rng.standard_normal((k, n)) * 10.0 ** rng.uniform(-4, 4, (k, n))
    got = reproducible_sum(list(data))
    want = np.array([math.fsum(data[:, j]) for j in range(n)])
    assert bits(got) == bits(want)
    plain_err = np.abs(data.sum(axis=0) - want)
    assert plain_err.max() > 0  # the plain sum is off somewhere


def test_error_bound_ill_conditioned():
    """Values over 600 orders of magnitude with cancellation: within the bound."""
    rng = np.random.default_rng(5)
    k, n = 40, 300
    data = random_values(rng, k * n, "float64", spread=600).reshape(k, n)
    data[1] = -data[0]  # exact cancellation of the largest contributions
    got = reproducible_sum(list(data))
    for j in range(n):
        col = data[:, j]
        s = exact_sum(col)
        m = max(abs(float(v)) for v in col)
        err = abs(Fraction(float(got[j])) - s)
        bound = k * Fraction(m) * Fraction(2) ** -64 + abs(s) * Fraction(2) ** -53
        assert err <= bound, j


def test_float32_accuracy():
    rng = np.random.default_rng(2)
    k, n = 50, 200
    data = (rng.standard_normal((k, n)) * 10.0 ** rng.uniform(-3, 3, (k, n))).astype(
        np.float32
    )
    got = reproducible_sum(list(data))
    assert got.dtype == np.float32
    for j in range(n):
        s = exact_sum(data[:, j])
        want = np.float32(float(s))  # s rounded twice: at most as close as got
        m = max(abs(float(v)) for v in data[:, j])
        err = abs(Fraction(float(got[j])) - s)
        assert err <= k * Fraction(m) * Fraction(2) ** -32 + abs(s) * Fraction(2) ** -24
        # Values within 2**41 of each other are deposited exactly, so got is the
        # exact sum rounded once: no farther from it than any other float32.
        assert abs(Fraction(float(got[j])) - s) <= abs(Fraction(float(want)) - s)


def test_complex_parts_independent():
    rng = np.random.default_rng(9)
    xs = [random_values(rng, 50, "complex128") for _ in range(6)]
    got = reproducible_sum(xs)
    re = reproducible_sum([x.real.copy() for x in xs])
    im = reproducible_sum([x.imag.copy() for x in xs])
    assert bits(got.real.copy()) == bits(re) and bits(got.imag.copy()) == bits(im)
    xs32 = [x.astype(np.complex64) for x in xs]
    got32 = reproducible_sum(xs32)
    assert got32.dtype == np.complex64
    assert bits(got32.real.copy()) == bits(
        reproducible_sum([x.real.copy() for x in xs32])
    )


# -- special values -------------------------------------------------------------------

INF, NAN = math.inf, math.nan


@pytest.mark.parametrize("dtype", REALS)
@pytest.mark.parametrize(
    "values, expected",
    [
        ([-0.0, -0.0], "-0"),
        ([-0.0], "-0"),
        ([-0.0, 0.0], "+0"),
        ([0.0, -0.0, -0.0], "+0"),
        ([1.0, -1.0], "+0"),
        ([-1.0, 1.0, -0.0], "+0"),
        ([INF, 1.0], INF),
        ([-INF, 1e30], -INF),
        ([INF, INF], INF),
        ([INF, -INF], "nan"),
        ([NAN, 1.0], "nan"),
        ([NAN, INF], "nan"),
        ([1.0, float.fromhex("0x1.2345p-1000")], "plain"),
    ],
)
def test_special_values(dtype, values, expected):
    for perm in (values, values[::-1]):
        acc = new_accumulator(1, dtype)
        for v in perm:
            add_values(np.array([v], dtype=dtype), acc)
        got = from_accumulator(acc)[0]
        plain = np.array(perm, dtype=dtype)
        if expected == "nan":
            assert np.isnan(got)
            assert bits(np.array(got)) == bits(np.array(np.nan, dtype))  # positive quiet
        elif expected == "+0":
            assert got == 0 and not np.signbit(got)
        elif expected == "-0":
            assert got == 0 and np.signbit(got)
        elif expected == "plain":
            assert got == np.sum(plain, dtype=dtype)
        else:
            assert got == expected
        # IEEE's own answer agrees on everything but which NaN.
        with np.errstate(invalid="ignore"):
            ieee = plain[0]
            for v in plain[1:]:
                ieee = ieee + v
        assert (np.isnan(ieee) and np.isnan(got)) or bits(np.array(ieee)) == bits(
            np.array(got)
        )


def test_empty_sum_is_positive_zero():
    out = from_accumulator(new_accumulator(3, "float64"))
    assert bits(out) == bits(np.zeros(3))


def test_deposit_limit():
    acc = to_accumulator(np.array([1.0, 2.0]))
    acc[1, 0] += MAX_DEPOSITS << repro.compiled.COUNT_SHIFT  # pretend 2**31 values
    with pytest.raises(AccumulatorOverflowError, match="element 1 sums more") as info:
        from_accumulator(acc)
    assert info.value.index == 1


# -- argument checks ------------------------------------------------------------------


def test_wrapper_errors():
    x = np.arange(4.0)
    acc = to_accumulator(x)
    with pytest.raises(BufferMismatchError, match="to_accumulator: x has dtype int64"):
        to_accumulator(np.arange(4))
    with pytest.raises(BufferMismatchError, match="x is not C-contiguous"):
        to_accumulator(np.arange(8.0)[::2])
    with pytest.raises(BufferMismatchError, match="x has 2 dimensions"):
        to_accumulator(np.zeros((2, 2)))
    with pytest.raises(BufferMismatchError, match="x is a list"):
        to_accumulator([1.0, 2.0])
    with pytest.raises(
        BufferMismatchError,
        match=r"out has shape \(4, 4\); 3 float64 values need .*\(3, 4\)",
    ):
        to_accumulator(np.arange(3.0), out=acc)
    with pytest.raises(BufferMismatchError, match=r"acc has shape \(4, 4\); 4 float32"):
        add_values(x.astype(np.float32), acc)
    with pytest.raises(BufferMismatchError, match=r"out has dtype float64"):
        to_accumulator(x, out=np.zeros((4, 4)))
    with pytest.raises(BufferMismatchError, match=r"combine: src has shape \(3, 4\)"):
        combine(acc[:3], acc.copy())
    with pytest.raises(BufferMismatchError, match="combine: dst is read-only"):
        ro = acc.copy()
        ro.flags.writeable = False
        combine(acc, ro)
    with pytest.raises(BufferMismatchError, match="combine: dst is not C-contiguous"):
        combine(acc[:, :], np.zeros((4, 8), np.int64)[:, ::2])
    with pytest.raises(BufferMismatchError, match=r"shape \(4, 5\), which is no accum"):
        from_accumulator(np.zeros((4, 5), np.int64))
    with pytest.raises(BufferMismatchError, match="out has dtype float32; the acc"):
        from_accumulator(acc, out=np.zeros(4, np.float32))
    with pytest.raises(BufferMismatchError, match=r"out has shape \(3,\), expected"):
        from_accumulator(acc, out=np.zeros(3))
    before = acc.copy()
    with pytest.raises(BufferMismatchError):
        add_values(np.arange(5.0), acc)
    assert bits(acc) == bits(before)  # nothing written


def test_empty_arrays():
    acc = to_accumulator(np.zeros(0))
    assert acc.shape == (0, 4)
    assert combine(acc, acc.copy()).shape == (0, 4)
    assert add_values(np.zeros(0), acc) is acc
    assert from_accumulator(acc).shape == (0,)


# -- accumulator elements: the executor's "repro_sum" -------------------------------


def _elements(x):
    out = np.empty(x.size, repro.element_dtype(x.dtype))
    to_accumulator(x, out=repro.as_accumulators(out))
    return out


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from([str(d) for d in DTYPES]),
    st.lists(st.lists(any64, min_size=4, max_size=4), min_size=1, max_size=8),
    st.randoms(use_true_random=False),
)
def test_repro_sum_elements_any_grouping_and_side(dtype, rows, rnd):
    """Random permutations and groupings of ``reduce_into("repro_sum", ...)`` on
    accumulator elements, either side, give the bits of :func:`reproducible_sum`."""
    from wacoll import _kernels

    dt = np.dtype(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        parts = [np.array(r, dtype=np.float64).astype(dt) for r in rows]
    pool = [_elements(p) for p in parts]
    rnd.shuffle(pool)
    while len(pool) > 1:
        i, j = sorted(rnd.sample(range(len(pool)), 2))
        src, dst = pool.pop(j), pool.pop(i)
        _kernels.reduce_into(
            _kernels.REPRO_SUM, src, dst, side=rnd.choice(["left", "right"])
        )
        pool.append(dst)
    got = from_accumulator(repro.as_accumulators(pool[0]))
    want = repro.reproducible_sum(parts)
    assert bits(got) == bits(want)


def test_repro_sum_elements_refuses_other_arrays():
    from wacoll import _kernels

    good = _elements(np.ones(3))
    with pytest.raises(BufferMismatchError, match="no array of accumulator elements"):
        _kernels.reduce_into("repro_sum", np.ones(3), good)
    with pytest.raises(BufferMismatchError):
        _kernels.reduce_into("repro_sum", good[:2], good)
    with pytest.raises(BufferMismatchError):
        _kernels.reduce_into("repro_sum", _elements(np.ones(3, np.float32)), good)
    with pytest.raises(_kernels.OperatorError):
        _kernels.reduce_into("repro_sum", good, good.copy(), side="middle")
    same = good.copy()
    _kernels.reduce_into("REPRO_SUM", same, same)  # src is dst: doubles
    assert from_accumulator(repro.as_accumulators(same)).tolist() == [2.0, 2.0, 2.0]
    acc = to_accumulator(np.array([1.5, -3.0]))
    assert from_accumulator(combine(acc, acc)).tolist() == [3.0, -6.0]
    same = good.copy()
    _kernels.reduce_into("repro_sum", same[1:], same[:2])  # overlapping: src as it was
    assert from_accumulator(repro.as_accumulators(same)).tolist() == [2.0, 2.0, 1.0]
    same = good.copy()
    _kernels.reduce_into("REPRO_SUM", same, same)
    assert from_accumulator(repro.as_accumulators(same)).tolist() == [2.0, 2.0, 2.0]
