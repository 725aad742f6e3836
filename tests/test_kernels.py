"""Tests of the Cython kernels: reductions, copy, pack and unpack.

The reduction results are compared with numpy's ufuncs; which operator is allowed on
which dtype is written out here from MPI's table (MPI 4.1, section 6.9.2), independently
of the kernels' own table.
"""

import subprocess
import sys

import numpy as np
import pytest

from wacoll._kernels import (
    DTYPES,
    KERNEL_VARIANT,
    OPERATORS,
    copy_into,
    is_commutative,
    pack,
    reduce_into,
    unpack,
    validate_op,
)
from wacoll._kernels import _reduce as baseline_kernels
from wacoll.errors import BufferMismatchError, OperatorError

SIGNED = ["int8", "int16", "int32", "int64"]
UNSIGNED = ["uint8", "uint16", "uint32", "uint64"]
INTEGERS = SIGNED + UNSIGNED
FLOATS = ["float32", "float64"]
COMPLEX = ["complex64", "complex128"]
ALL_DTYPES = ["bool"] + INTEGERS + FLOATS + COMPLEX

# MPI's groups: C integer, Floating point, Complex, Logical (C_BOOL).
ALLOWED = {
    "sum": INTEGERS + FLOATS + COMPLEX,
    "prod": INTEGERS + FLOATS + COMPLEX,
    "min": INTEGERS + FLOATS,
    "max": INTEGERS + FLOATS,
    "land": INTEGERS + ["bool"],
    "lor": INTEGERS + ["bool"],
    "lxor": INTEGERS + ["bool"],
    "band": INTEGERS,
    "bor": INTEGERS,
    "bxor": INTEGERS,
}


def _logical(ufunc):
    return lambda a, b: ufunc(a, b).astype(a.dtype)


REFERENCE = {
    "sum": np.add,
    "prod": np.multiply,
    "min": np.minimum,
    "max": np.maximum,
    "land": _logical(np.logical_and),
    "lor": _logical(np.logical_or),
    "lxor": _logical(np.logical_xor),
    "band": np.bitwise_and,
    "bor": np.bitwise_or,
    "bxor": np.bitwise_xor,
}

PAIRS = [(op, dt) for op in OPERATORS for dt in ALLOWED[op]]
REJECTED = [(op, dt) for op in OPERATORS for dt in ALL_DTYPES if dt not in ALLOWED[op]]
# 0 and 1 are edge cases, 7 and 1001 odd lengths, 20001 takes the GIL-free path.
LENGTHS = [0, 1, 7, 1001, 20001]


def _random(dtype, n, rng):
    """Values covering the whole range of integers (so that SUM and PROD wrap) and
    plenty of zeros (so that logical operators see both truth values)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, n).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        values = rng.integers(info.min, info.max, n, endpoint=True, dtype=dtype)
        values[rng.random(n) < 0.3] = 0
        return values
    if dtype.kind == "f":
        return (rng.standard_normal(n) * 100).astype(dtype)
    return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dtype)


def _complex_product(a, b):
    """a * b by the textbook formula, without fused multiply-add (numpy's complex
    multiply may use FMA instructions; its real ufuncs do not)."""
    re = a.real * b.real - a.imag * b.imag
    im = a.real * b.imag + a.imag * b.real
    return (re + 1j * im).astype(a.dtype)


def _expected(op, first, second):
    if op == "prod" and first.dtype.kind == "c":
        return _complex_product(first, second)
    with np.errstate(over="ignore"):
        return REFERENCE[op](first, second)


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("op,dtype", PAIRS)
def test_reduce_matches_numpy(op, dtype, side):
    rng = np.random.default_rng(abs(hash((op, dtype, side))) % 2**32)
    for n in LENGTHS:
        src = _random(dtype, n, rng)
        dst = _random(dtype, n, rng)
        before = dst.copy()
        src_before = src.copy()
        reduce_into(op, src, dst, side=side)
        first, second = (before, src) if side == "right" else (src, before)
        np.testing.assert_array_equal(dst, _expected(op, first, second), strict=True)
        np.testing.assert_array_equal(src, src_before)


def test_avx2_build_agrees_bit_for_bit_with_baseline():
    if not baseline_kernels.cpu_has_avx2():
        pytest.skip("this processor has no AVX2")
    avx2 = pytest.importorskip("wacoll._kernels._reduce_avx2")
    assert KERNEL_VARIANT in ("avx2", "baseline")
    rng = np.random.default_rng(6)
    for op, dtype in PAIRS:
        code = OPERATORS.index(op)
        src, dst = _random(dtype, 1001, rng), _random(dtype, 1001, rng)
        if dtype in FLOATS + COMPLEX:
            src[::7] = np.nan
            dst[::5] = -np.inf
        for left in (False, True):
            outputs = []
            for module in (baseline_kernels, avx2):
                out = dst.copy()
                assert module.reduce_buffers(code, left, src, out) == 0
                outputs.append(out.view(np.uint8))
            np.testing.assert_array_equal(outputs[0], outputs[1], err_msg=f"{op} {dtype}")


@pytest.mark.parametrize("dtype", COMPLEX)
def test_complex_prod_close_to_numpy(dtype):
    rng = np.random.default_rng(5)
    src, dst = _random(dtype, 999, rng), _random(dtype, 999, rng)
    expected = dst * src
    reduce_into("prod", src, dst)
    np.testing.assert_allclose(dst, expected, rtol=10 * np.finfo(dtype).eps)


@pytest.mark.parametrize("op,dtype", REJECTED)
def test_rejected_pairs(op, dtype):
    src = np.ones(3, dtype=dtype)
    dst = np.ones(3, dtype=dtype)
    message = f"MPI.{op.upper()} is not defined for {dtype}"
    with pytest.raises(BufferMismatchError, match=message):
        reduce_into(op, src, dst)
    with pytest.raises(BufferMismatchError, match=message):
        reduce_into(op, src[:0], dst[:0])
    with pytest.raises(BufferMismatchError, match=message):
        validate_op(op, dtype)
    assert (dst == 1).all()


@pytest.mark.parametrize("op,dtype", PAIRS)
def test_check_op_accepts_allowed_pairs(op, dtype):
    validate_op(op, dtype)
    validate_op(op.upper(), np.dtype(dtype))


def test_operator_names_and_mpi_table_examples():
    dst = np.array([1, 2], dtype=np.int32)
    reduce_into("Sum", np.array([3, 4], dtype=np.int32), dst)
    assert dst.tolist() == [4, 6]
    with pytest.raises(OperatorError, match="unknown reduction operator 'avg'"):
        reduce_into("avg", dst, dst)
    with pytest.raises(OperatorError, match="not list"):
        reduce_into([], dst, dst)
    with pytest.raises(BufferMismatchError, match="MPI.BAND is not defined for float64"):
        validate_op("band", float)
    with pytest.raises(BufferMismatchError, match="MPI.LAND is not defined for float32"):
        validate_op("land", np.float32)
    with pytest.raises(BufferMismatchError, match="float16"):
        validate_op("sum", np.float16)
    assert [d.name for d in DTYPES] == ALL_DTYPES


def test_integer_wraparound_and_logical_values():
    a = np.array([127, -128, 100], dtype=np.int8)
    reduce_into("sum", np.array([1, -1, 100], dtype=np.int8), a)
    assert a.tolist() == [-128, 127, -56]
    b = np.array([65535, 256], dtype=np.uint16)
    reduce_into("prod", np.array([65535, 256], dtype=np.uint16), b)
    assert b.tolist() == [1, 0]
    c = np.array([np.iinfo(np.int64).min, 3], dtype=np.int64)
    reduce_into("prod", np.array([-1, -1], dtype=np.int64), c)
    assert c.tolist() == [np.iinfo(np.int64).min, -3]
    d = np.array([5, 0, -3, 0], dtype=np.int32)
    reduce_into("land", np.array([2, 2, 0, 0], dtype=np.int32), d)
    assert d.tolist() == [1, 0, 0, 0]
    e = np.array([5, 0, 2**64 - 3, 0], dtype=np.uint64)
    reduce_into("lxor", np.array([2, 2, 0, 0], dtype=np.uint64), e)
    assert e.tolist() == [0, 1, 1, 0]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", ["min", "max"])
def test_min_max_propagate_nan_on_either_side(op, dtype):
    nan, ufunc = np.nan, REFERENCE[op]
    src = np.array([nan, 1.0, nan, 2.0], dtype=dtype)
    for side in ("right", "left"):
        dst = np.array([0.0, nan, nan, 3.0], dtype=dtype)
        before = dst.copy()
        reduce_into(op, src, dst, side=side)
        expected = ufunc(before, src) if side == "right" else ufunc(src, before)
        np.testing.assert_array_equal(dst, expected)
        assert np.isnan(dst[:3]).all()


def test_same_array_overlap_and_shapes():
    a = np.arange(6.0)
    reduce_into("sum", a, a)
    assert a.tolist() == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    # Partial overlap: src is read as it was before the call.
    buf = np.arange(10, dtype=np.int64)
    expected = buf[2:8] + buf[0:6]
    reduce_into("sum", buf[0:6], buf[2:8])
    assert buf[2:8].tolist() == expected.tolist()
    # Any C-contiguous shape with the same number of elements.
    m = np.ones((3, 4), dtype=np.float32)
    reduce_into("max", np.full(12, 2, dtype=np.float32), m)
    assert (m == 2).all() and m.shape == (3, 4)


def test_buffer_errors_leave_dst_untouched():
    src = np.arange(8.0)
    dst = np.ones(8)

    def rejects(message, s, d, op="sum"):
        before = np.array(d, copy=True)
        with pytest.raises(BufferMismatchError, match=message):
            reduce_into(op, s, d)
        np.testing.assert_array_equal(d, before)

    rejects("src is not C-contiguous", np.arange(16.0)[::2], dst)
    rejects("dst is not C-contiguous", src, np.ones(16)[::2])
    rejects("dtype mismatch: src is float32, dst is float64", src.astype(np.float32), dst)
    rejects("src has 7 elements, dst has 8", src[:7], dst)
    readonly = np.ones(8)
    readonly.flags.writeable = False
    rejects("dst is read-only", src, readonly)
    rejects("src is a list, not an array or buffer", [1.0] * 8, dst)
    rejects("dtype >f8", src.astype(">f8"), dst.astype(">f8"))
    rejects("dtype float16", src.astype(np.float16), dst.astype(np.float16))
    rejects("dtype datetime64", np.zeros(2, "M8[s]"), np.zeros(2, "M8[s]"), op="max")
    misaligned = np.frombuffer(np.zeros(65, np.uint8).data, np.uint8)[1:].view(np.float64)
    rejects("not aligned", src, misaligned)
    with pytest.raises(OperatorError, match="side must be 'right' or 'left'"):
        reduce_into("sum", src, dst, side="middle")


def test_kernels_do_not_import_mpi4py():
    code = "import sys, wacoll._kernels; print('mpi4py' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"


# -- mpi4py operators --------------------------------------------------------------


@pytest.fixture(scope="module")
def MPI():
    return pytest.importorskip("mpi4py.MPI")


@pytest.fixture
def matmul_op(MPI):
    """Non-commutative: each run of 4 int64 is a 2x2 matrix; inoutvec = invec @ inoutvec."""

    def matmul(inbuf, inoutbuf, datatype):
        a = np.frombuffer(inbuf, dtype=np.int64).reshape(-1, 2, 2)
        b = np.frombuffer(inoutbuf, dtype=np.int64).reshape(-1, 2, 2)
        b[...] = a @ b

    op = MPI.Op.Create(matmul, commute=False)
    yield op
    op.Free()


def test_predefined_mpi_ops(MPI):
    rng = np.random.default_rng(1)
    for name in OPERATORS:
        for _ in range(2):  # the second call takes the fast path
            src, dst = _random("int32", 50, rng), _random("int32", 50, rng)
            expected = _expected(name, dst, src)
            reduce_into(getattr(MPI, name.upper()), src, dst)
            np.testing.assert_array_equal(dst, expected)
        assert is_commutative(getattr(MPI, name.upper()))
    # An Op object made from the handle of a predefined one is the same operator.
    dst = np.ones(3)
    reduce_into(MPI.Op.fromhandle(MPI.SUM.handle), np.ones(3), dst)
    assert dst.tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(
        BufferMismatchError, match="MPI.MIN is not defined for complex128"
    ):
        reduce_into(MPI.MIN, np.ones(2, complex), np.ones(2, complex))
    for name in ("REPLACE", "NO_OP"):
        with pytest.raises(OperatorError, match=f"MPI.{name} is not supported"):
            reduce_into(getattr(MPI, name), np.ones(2), np.ones(2))
    # MINLOC and MAXLOC take MPI's (value, index) pairs only
    for name in ("MAXLOC", "MINLOC"):
        with pytest.raises(OperatorError, match=f"MPI.{name} needs .value, index. pairs"):
            reduce_into(getattr(MPI, name), np.ones(2), np.ones(2))


def test_minloc_maxloc_pairs():
    """MPI's pair layouts; the lower index wins a tie, whichever side arrives."""
    pytest.importorskip("mpi4py")
    from mpi4py import MPI
    from mpi4py.util import dtlib

    for pair in (
        MPI.DOUBLE_INT,
        MPI.FLOAT_INT,
        MPI.LONG_INT,
        MPI.TWOINT,
        MPI.SHORT_INT,
        MPI.LONG_DOUBLE_INT,
    ):
        dt = dtlib.to_numpy_dtype(pair)
        v, i = dt.names
        a = np.zeros(3, dt)
        b = np.zeros(3, dt)
        a[v], a[i] = [1, 5, 2], [3, 3, 3]
        b[v], b[i] = [1, 4, 7], [1, 1, 1]
        for side in ("right", "left"):
            lo = a.copy()
            reduce_into(MPI.MINLOC, b, lo, side=side)
            assert lo[v].tolist() == [1, 4, 2] and lo[i].tolist() == [1, 1, 3]
            hi = b.copy()
            reduce_into("maxloc", a, hi, side=side)
            assert hi[v].tolist() == [1, 5, 7] and hi[i].tolist() == [1, 3, 1]
        validate_op(MPI.MAXLOC, dt)


def test_long_double_reductions():
    """long double and long double complex reduce with numpy's own arithmetic."""
    for dtype in (np.longdouble, np.clongdouble):
        src = np.arange(1, 5, dtype=dtype) / 3
        dst = np.full(4, 2, dtype)
        reduce_into("sum", src, dst)
        np.testing.assert_array_equal(dst, np.full(4, 2, dtype) + src)
        reduce_into("prod", src, dst, side="left")
        np.testing.assert_array_equal(dst, src * (np.full(4, 2, dtype) + src))
    dst = np.zeros(2, np.longdouble)
    reduce_into("max", np.array([1, -1], np.longdouble), dst)
    assert dst.tolist() == [1, 0]
    with pytest.raises(BufferMismatchError, match="MIN is not defined"):
        validate_op("min", np.clongdouble)
    with pytest.raises(BufferMismatchError, match="BAND is not defined"):
        validate_op("band", np.longdouble)


@pytest.mark.parametrize("side", ["right", "left"])
def test_user_op_matrix_product_respects_order(MPI, matmul_op, side):
    rng = np.random.default_rng(2)
    k = 9
    src = rng.integers(-5, 6, (k, 4)).astype(np.int64)
    dst = rng.integers(-5, 6, (k, 4)).astype(np.int64)
    a, b = dst.reshape(k, 2, 2).copy(), src.reshape(k, 2, 2)
    expected = np.matmul(a, b) if side == "right" else np.matmul(b, a)
    assert not np.array_equal(np.matmul(a, b), np.matmul(b, a))  # the test can fail
    src_before = src.copy()
    reduce_into(matmul_op, src, dst, side=side)
    np.testing.assert_array_equal(dst.reshape(k, 2, 2), expected)
    np.testing.assert_array_equal(src, src_before)
    assert not is_commutative(matmul_op)


def test_user_op_aliasing_and_checks(MPI, matmul_op):
    m = np.array(
        [[1, 1, 0, 1]], dtype=np.int64
    )  # [[1, 1], [0, 1]]; m @ m = [[1, 2], [0, 1]]
    reduce_into(matmul_op, m, m, side="left")
    assert m.tolist() == [[1, 2, 0, 1]]
    readonly = np.zeros((1, 4), dtype=np.int64)
    readonly.flags.writeable = False
    with pytest.raises(BufferMismatchError, match="dst is read-only"):
        reduce_into(matmul_op, m, readonly)
    with pytest.raises(BufferMismatchError, match="dtype mismatch"):
        reduce_into(matmul_op, m.astype(np.int32), m)
    with pytest.raises(BufferMismatchError, match="src is not C-contiguous"):
        reduce_into(matmul_op, np.zeros((1, 8), np.int64)[:, ::2], m)
    validate_op(matmul_op, np.float16)  # user operators take any dtype
    commuting = MPI.Op.Create(lambda a, b, t: None, commute=True)
    try:
        assert is_commutative(commuting)
    finally:
        commuting.Free()


# -- copy, pack, unpack ------------------------------------------------------------


def test_copy_into():
    a = np.arange(10, dtype=np.int16)
    b = np.zeros(12, dtype=np.int16)
    copy_into(a, b)
    assert b.tolist() == list(range(10)) + [0, 0]
    copy_into(a[0:6], a[2:8])  # overlapping: like memmove
    assert a.tolist() == [0, 1, 0, 1, 2, 3, 4, 5, 8, 9]
    with pytest.raises(BufferMismatchError, match="dst has 8 bytes, src 20"):
        copy_into(np.zeros(10, np.int16), np.zeros(4, np.int16))
    readonly = np.zeros(10, np.int16)
    readonly.flags.writeable = False
    with pytest.raises(BufferMismatchError, match="dst is read-only"):
        copy_into(a, readonly)
    with pytest.raises(BufferMismatchError, match="src is not C-contiguous"):
        copy_into(np.zeros(20, np.int16)[::2], b)
    with pytest.raises(BufferMismatchError, match="Python objects"):
        copy_into(np.array([None]), np.array([None]))


def _random_layout(n, k, rng):
    displs = rng.integers(0, n + 1, k)
    counts = np.array([rng.integers(0, n - d + 1) for d in displs], dtype=np.int64)
    return displs, counts


@pytest.mark.parametrize("dtype", ["int8", "float64", "complex128", "f8,i4"])
def test_pack_random_layouts(dtype):
    rng = np.random.default_rng(3)
    for _trial in range(30):
        n, k = int(rng.integers(0, 40)), int(rng.integers(0, 6))
        src = (
            np.arange(n).astype(dtype)
            if dtype != "f8,i4"
            else np.array([(i, -i) for i in range(n)], dtype=dtype)
        )
        displs, counts = _random_layout(n, k, rng)
        out = np.empty(int(counts.sum()), dtype=src.dtype)
        pack(src, displs.tolist(), counts, out)
        expected = [src[d : d + c] for d, c in zip(displs, counts)]
        np.testing.assert_array_equal(out, np.concatenate(expected) if k else out[:0])


def test_unpack_round_trip_with_disjoint_blocks_in_any_order():
    rng = np.random.default_rng(4)
    for _trial in range(50):
        n = int(rng.integers(1, 60))
        cuts = np.sort(rng.choice(np.arange(n + 1), size=min(n + 1, 6), replace=False))
        displs, counts = cuts[:-1], np.diff(cuts)
        order = rng.permutation(len(displs))
        displs, counts = displs[order], counts[order]
        full = rng.standard_normal(n)
        packed = np.empty(int(counts.sum()))
        pack(full, displs, counts, packed)
        back = np.full(n, np.nan)
        unpack(packed, displs, counts, back)
        covered = np.zeros(n, bool)
        for d, c in zip(displs, counts):
            covered[d : d + c] = True
        np.testing.assert_array_equal(back[covered], full[covered])
        assert np.isnan(back[~covered]).all()


def test_pack_and_unpack_errors_write_nothing():
    src = np.arange(10.0)
    out = np.zeros(4)

    def rejects(fn, message, *args):
        target = args[-1]
        before = np.array(target, copy=True)
        with pytest.raises(BufferMismatchError, match=message):
            fn(*args)
        np.testing.assert_array_equal(target, before)

    rejects(pack, "2 displacements but 1 counts", src, [0, 5], [4], out)
    rejects(pack, "block 1 has displacement -1 and count 2", src, [0, -1], [2, 2], out)
    rejects(
        pack,
        r"block 1 \(displacement 8, count 3\) runs past the end of src "
        r"\(10 elements\)",
        src,
        [0, 8],
        [1, 3],
        out,
    )
    rejects(pack, "counts add up to 3 elements, out has 4", src, [0, 5], [1, 2], out)
    rejects(pack, "counts add up to 6 elements, out has 4", src, [0, 5], [3, 3], out)
    rejects(
        pack,
        "dtype mismatch: src is float64, out is float32",
        src,
        [0],
        [4],
        np.zeros(4, np.float32),
    )
    rejects(pack, "displs must hold integers, not float64", src, [0.5], [4], out)
    rejects(pack, "counts must be one-dimensional", src, [0], [[4]], out)
    rejects(pack, "src is not C-contiguous", np.arange(20.0)[::2], [0], [4], out)
    readonly = np.zeros(4)
    readonly.flags.writeable = False
    rejects(pack, "out is read-only", src, [0], [4], readonly)
    dst = np.zeros(10)
    rejects(
        unpack, "blocks 0 and 2 overlap in dst", np.ones(6), [4, 0, 5], [2, 2, 2], dst
    )
    rejects(
        unpack,
        r"block 0 \(displacement 9, count 2\) runs past the end of dst",
        np.ones(2),
        [9],
        [2],
        dst,
    )
    rejects(
        unpack, "counts add up to 2 elements, packed has 3", np.ones(3), [0], [2], dst
    )
    rejects(unpack, "packed is not C-contiguous", np.ones(8)[::2], [0], [4], dst)


def test_pack_and_unpack_with_overlapping_buffers():
    buf = np.arange(10.0)
    pack(buf, [6, 0], [2, 2], buf[1:5])  # source read before any write
    assert buf.tolist() == [0.0, 6.0, 7.0, 0.0, 1.0, 5.0, 6.0, 7.0, 8.0, 9.0]
    buf = np.arange(10.0)
    unpack(buf[0:3], [7, 2], [1, 2], buf)
    assert buf.tolist() == [0.0, 1.0, 1.0, 2.0, 4.0, 5.0, 6.0, 0.0, 8.0, 9.0]
    empty = np.zeros(0)
    pack(buf, [], [], empty)
    unpack(empty, [3], [0], buf)
