"""Tests of accumulators on the wire (wacoll._kernels.repro_wire).

Packing must be lossless: every message unpacks to the very accumulator bits it was
made from, in either form, for every dtype, for values across the whole range and the
special values; a message that does not fit the receiver is refused.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wacoll._kernels import repro
from wacoll._kernels.repro_wire import max_message_bytes, pack, unpack, wire_bytes
from wacoll.errors import BufferMismatchError

DTYPES = [str(d) for d in repro.DTYPES]
SPECIALS = [
    0.0,
    -0.0,
    np.inf,
    -np.inf,
    np.nan,
    5e-324,
    -5e-324,
    2.2250738585072014e-308,
    1.7976931348623157e308,
    -1.7976931348623157e308,
    1.0,
    -3.5,
]


def elements(values, dtype):
    """The accumulator elements of one contribution of ``values``."""
    x = np.asarray(values).astype(dtype)
    acc = repro.to_accumulator(x)
    words = int(np.prod(acc.shape[1:]))
    return acc.reshape(len(x), words).view(repro.element_dtype(dtype)).reshape(-1)


def summed(*parts):
    """The element-wise combination of several contributions' elements."""
    out = parts[0].copy()
    for p in parts[1:]:
        repro.combine_elements(p, out)
    return out


def roundtrip(el):
    """``el`` packed and unpacked (from a copy of the message alone, exactly sized)."""
    message = pack(el).copy()
    back = np.empty_like(el)
    unpack(message, back)
    return message, back


def wild(rng, n, dtype):
    """Values of random sign over the whole exponent range of ``dtype``."""
    real = np.dtype(dtype).type(0).real.dtype
    top = 300 if real == np.float64 else 35
    v = rng.choice([-1.0, 1.0], n) * 10.0 ** rng.uniform(-top, top, n) * rng.random(n)
    if np.dtype(dtype).kind == "c":
        v = v + 1j * rng.choice([-1.0, 1.0], n) * 10.0 ** rng.uniform(-top, top, n)
    with np.errstate(over="ignore", under="ignore"):
        return v.astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_one_contribution_travels_as_values(dtype):
    rng = np.random.default_rng(1)
    el = elements(wild(rng, 300, dtype), dtype)
    message, back = roundtrip(el)
    assert len(message) == 24 + 300 * np.dtype(dtype).itemsize
    assert back.tobytes() == el.tobytes()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("parts", [2, 3, 7, 200])
def test_partial_sums_pack_losslessly(dtype, parts):
    rng = np.random.default_rng(parts)
    el = summed(*[elements(wild(rng, 257, dtype), dtype) for _ in range(parts)])
    message, back = roundtrip(el)
    assert back.tobytes() == el.tobytes()
    assert len(message) < max_message_bytes(257, el.dtype) * 0.75


def test_sizes_the_cost_model_counts():
    rng = np.random.default_rng(2)
    for dtype in DTYPES:
        for parts in (2, 8):
            el = summed(
                *[
                    elements(
                        rng.standard_normal(512).astype(dtype)
                        if np.dtype(dtype).kind == "f"
                        else (rng.standard_normal(512) * (1 + 1j)).astype(dtype),
                        dtype,
                    )
                    for _ in range(parts)
                ]
            )
            per_element = (len(pack(el)) - 24) / 512
            assert per_element <= wire_bytes(dtype, parts)
    assert wire_bytes("float64", 2) == 16 and wire_bytes("float64", 1) == 8


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_special_values_pack_losslessly(dtype):
    with np.errstate(over="ignore"):
        values = np.array(SPECIALS).astype(dtype)
    one = elements(values, dtype)
    for el in (one, summed(one, one), summed(one, elements(values[::-1], dtype))):
        _, back = roundtrip(el)
        assert back.tobytes() == el.tobytes()


def test_mixed_counts_are_not_uniform():
    a = elements(np.array([1.0, 2.0, 3.0]) / 7, "float64")
    b = summed(a, a)
    mixed = np.concatenate([a[:2], b[2:]])
    message, back = roundtrip(mixed)
    assert len(message) == 24 + 3 * 8 + 3 * 3 * 5  # full heads, 5-byte bins
    assert back.tobytes() == mixed.tobytes()


def test_empty_message():
    el = elements([], "float64")
    message, back = roundtrip(el)
    assert len(back) == 0


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.lists(st.floats(width=64), min_size=1, max_size=6), min_size=1, max_size=5
    ),
    st.booleans(),
)
def test_any_accumulators_roundtrip(parts, into_larger_buffer):
    n = min(len(p) for p in parts)
    el = summed(*[elements(p[:n], "float64") for p in parts])
    message = pack(el)
    if not into_larger_buffer:
        message = message.copy()
    back = np.empty_like(el)
    unpack(message, back)
    assert back.tobytes() == el.tobytes()


@pytest.mark.parametrize(
    "sender, receiver",
    [
        ("float64", "float32"),
        ("float32", "float64"),
        ("complex64", "float64"),
        ("float64", "complex128"),
    ],
)
def test_a_message_of_another_type_is_refused(sender, receiver):
    x = np.ones(4, sender) / 3
    for el in (elements(x, sender), summed(elements(x, sender), elements(x, sender))):
        back = np.empty(4, repro.element_dtype(receiver))
        with pytest.raises(BufferMismatchError, match="unpack"):
            unpack(pack(el), back)


def test_a_message_of_another_length_is_refused():
    el = summed(*[elements(np.arange(6.0) / 7, "float64")] * 2)
    with pytest.raises(BufferMismatchError, match="6 rows; 5 were expected"):
        unpack(pack(el), np.empty(5, el.dtype))
    with pytest.raises(BufferMismatchError, match="bytes"):
        unpack(pack(el)[:-3].copy(), np.empty(6, el.dtype))
    with pytest.raises(BufferMismatchError, match="carries no accumulators"):
        unpack(np.zeros(40, np.uint8), np.empty(1, el.dtype))


def test_pack_refuses_what_is_no_accumulator():
    with pytest.raises(BufferMismatchError, match="accumulator elements"):
        pack(np.zeros(4))
    with pytest.raises(BufferMismatchError, match="accumulator elements"):
        unpack(np.zeros(64, np.uint8), np.zeros(4))


def test_pack_refuses_an_out_too_small():
    one = elements(np.arange(8.0) / 3, "float64")
    for el in (one, summed(one, one)):
        with pytest.raises(BufferMismatchError, match="pack"):
            pack(el, np.empty(30, np.uint8))
