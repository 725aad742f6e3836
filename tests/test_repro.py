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
from hypothesis import given, settings, strategies as st

from wacoll._kernels import repro
from wacoll._kernels.repro import (DTYPES, MAX_DEPOSITS, accumulator_bytes,
                                   accumulator_dtype, add_values, combine,
                                   from_accumulator, new_accumulator, reproducible_sum,
                                   to_accumulator)
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
    v = (rng.choice([-1.0, 1.0], n) * mags * rng.random(n))
    if np.dtype(dtype).kind == "c":
        v = v + 1j * (rng.choice([-1.0, 1.0], n) * 10.0 ** rng.uniform(lo, -lo, n))
    return v.astype(dtype)


def exact_sum(values):
    return sum((Fraction(float(v)) for v in values), Fraction(0))


# -- layout ---------------------------------------------------------------------------

def test_layout_sizes():
    assert {str(dt): accumulator_bytes(dt) for dt in DTYPES} == {
        "float32": 24, "float64": 32, "complex64": 48, "complex128": 64}
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
        plain = [np.sum(np.stack([xs[i] for i in perm]), axis=0)
                 for perm in (order, order[::-1])]
        assert bits(plain[0]) != bits(plain[1])


finite64 = st.floats(allow_nan=False, allow_infinity=False, width=64)
any64 = st.floats(width=64)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(any64, min_size=3, max_size=3), min_size=1, max_size=9),
       st.randoms(use_true_random=False))
def test_random_trees_property(rows, rnd):
    """Random contributions (any floats, specials included), random trees: same bits."""
    accs = [to_accumulator(np.array(r, dtype=np.float64)) for r in rows]
    first = tree_sum(accs, rnd)
    second = tree_sum(accs, rnd)
    assert bits(first) == bits(second)
    assert bits(from_accumulator(first)) == bits(from_accumulator(second))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, width=32),
                min_size=1, max_size=12), st.randoms(use_true_random=False))
def test_random_trees_property_float32(values, rnd):
    accs = [to_accumulator(np.array([v], dtype=np.float32)) for v in values]
    assert bits(tree_sum(accs, rnd)) == bits(tree_sum(accs, rnd))


def test_variants_agree():
    """The AVX2 and portable builds give the same bits."""
    from wacoll._kernels import _repro as baseline
    rng = np.random.default_rng(3)
    x = random_values(rng, 1000, "float64", spread=600)
    y = random_values(rng, 1000, "float64", spread=20)
    for mod in (baseline, repro._k):
        a = np.zeros((1000, 4), np.int64)
        mod.to_acc_f64(x, a)
        mod.add_f64(y, a)
        out = np.empty(1000)
        mod.from_acc_f64(a, out)
        if mod is baseline:
            ref = (bits(a), bits(out))
        else:
            assert (bits(a), bits(out)) == ref


# -- accuracy -------------------------------------------------------------------------

def test_cancellation_and_wide_range():
    cases = [
        ([1e16, 1.0, -1e16], 1.0),
        ([1e300, 1e-300, -1e300], 0.0),        # 1e-300 is below 2**-64 * 1e300
        ([1e300, -1e300, 1e-300], 0.0),
        ([1.0, 1e-16, 1e-16], math.fsum([1.0, 1e-16, 1e-16])),
        ([2.0 ** 1023, 2.0 ** 1023, -2.0 ** 1023], 2.0 ** 1023),  # no overflow inside
        ([1e308, 1e308], math.inf),
        ([5e-324, 5e-324, -1e-323, 5e-324], 5e-324),  # subnormals are exact
        ([2.0 ** -1022, -5e-324], 2.0 ** -1022 - 5e-324),
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
        np.float32)
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
    assert bits(got32.real.copy()) == bits(reproducible_sum([x.real.copy() for x in xs32]))


# -- special values -------------------------------------------------------------------

INF, NAN = math.inf, math.nan


@pytest.mark.parametrize("dtype", REALS)
@pytest.mark.parametrize("values, expected", [
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
])
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
            np.array(got))


def test_empty_sum_is_positive_zero():
    out = from_accumulator(new_accumulator(3, "float64"))
    assert bits(out) == bits(np.zeros(3))


def test_deposit_limit():
    acc = to_accumulator(np.array([1.0, 2.0]))
    acc[1, 0] += (MAX_DEPOSITS << repro._k.COUNT_SHIFT)  # pretend 2**31 values
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
    with pytest.raises(BufferMismatchError,
                       match=r"out has shape \(4, 4\); 3 float64 values need .*\(3, 4\)"):
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
@given(st.sampled_from([str(d) for d in DTYPES]),
       st.lists(st.lists(any64, min_size=4, max_size=4), min_size=1, max_size=8),
       st.randoms(use_true_random=False))
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
        _kernels.reduce_into(_kernels.REPRO_SUM, src, dst,
                             side=rnd.choice(["left", "right"]))
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
