"""Random differential trials: ``wacoll.Comm`` against the MPI library, call by call.

A *trial* is one collective call drawn at random, run with identical inputs on
``MPI.COMM_WORLD`` (the MPI library's collective) and on a ``wacoll.Comm`` over it,
and judged by comparing every buffer the call was given, byte for byte: what a call
writes must be what the library writes, and what it must not write (the bytes
beside a receive region, between vector blocks, in a derived datatype's gaps, a send
buffer) must stay as it was. Floating-point ``SUM`` and ``PROD`` results are
compared within a relative tolerance (a different association of the same sum), and
long double values by value (their padding bytes are undefined).

Every rank draws the same call from ``numpy.random.default_rng([seed, trial])``
(so the ranks agree on the call without talking), and its own data from
``[seed, trial, rank]``. What a trial draws:

* the method: every collective ``wacoll.Comm`` mirrors, buffer (:data:`BUFFER_METHODS`)
  and object (:data:`OBJECT_METHODS`) ones; buffer methods in their blocking,
  non-blocking (``I...``) or persistent (``..._init``; started twice, the inputs
  changed in between) form;
* the element: a predefined type (integers, floats, complex, bool, long double,
  MINLOC/MAXLOC pairs) or a derived one (contiguous, vector, hvector, indexed,
  indexed block, struct, resized, dup), built with mpi4py and committed for the
  trial; a derived type's receive side is sometimes the predefined type of the same
  type signature;
* the buffer form: a plain array, ``[buf, type]``, ``[buf, count, type]``, ``[buf,
  (count, displ), type]`` (with room before and after), and for the vector calls
  ``[buf, counts, displs, type]`` with blocks in shuffled order and gaps between;
* counts (0 and odd sizes included), the root, ``MPI.IN_PLACE`` where MPI allows it;
* for reductions an operator valid for the element: MPI's predefined ones, MINLOC
  and MAXLOC on pairs, and user-defined ``MPI.Op.Create`` operators, commutative
  (element-wise sum) and not (an affine composition over pairs of an element's
  values, the leftmost nonzero value for a single one), which combine whole
  elements of derived datatypes; rarely a predefined operator on a derived type
  (MPI defines none: both must refuse). One combination is never drawn: MPICH
  5.0's ``Reduce_scatter_block`` with a non-commutative operator on a datatype
  whose extent runs past its data (a resized type, a struct padded to its
  alignment) returns wrong blocks on a power of two of ranks and corrupts its heap,
  so the library is no reference there (the commutative operator is drawn instead);
* the wacoll communicator's configuration (:data:`CONFIGS`).

A trial's outcome (:func:`judge`): ``ok``; ``mismatch`` (both ran, some buffer
differs on some rank); ``refusal`` (wacoll raised where the library ran the call);
``lax`` (wacoll ran a call the library refused); ``both-raised``. The padding
between the fields of MPI's pair types (``DOUBLE_INT``: 12 data bytes in 16) is
compared too: MPI never writes it.

Examples
--------
>>> import numpy as np
>>> case = draw(np.random.default_rng([1, 0]), 4, 0, seed=1, trial=0)
>>> isinstance(case.describe(), str)
True
>>> case.free()
"""

from __future__ import annotations

import dataclasses
import traceback

import numpy as np
from mpi4py import MPI
from mpi4py.util import dtlib

__all__ = [
    "BUFFER_METHODS",
    "OBJECT_METHODS",
    "FORMS",
    "CONFIGS",
    "Case",
    "draw",
    "judge",
    "Trials",
    "run_trials",
    "make_comms",
    "user_ops",
]

WORLD = MPI.COMM_WORLD

#: The buffer collectives ``wacoll.Comm`` mirrors (``Alltoallw`` it leaves to the
#: library: its own by inheritance, so not drawn).
BUFFER_METHODS = (
    "Barrier",
    "Bcast",
    "Scatter",
    "Scatterv",
    "Gather",
    "Gatherv",
    "Allgather",
    "Allgatherv",
    "Alltoall",
    "Alltoallv",
    "Reduce",
    "Allreduce",
    "Reduce_scatter_block",
    "Reduce_scatter",
    "Scan",
    "Exscan",
)
#: The object (pickle) collectives it mirrors.
OBJECT_METHODS = (
    "barrier",
    "bcast",
    "scatter",
    "gather",
    "allgather",
    "alltoall",
    "reduce",
    "allreduce",
    "scan",
    "exscan",
)
#: How a buffer collective is called.
FORMS = ("blocking", "nonblocking", "persistent")

#: ``{name: (weight, wacoll.Comm keyword arguments)}``: the configurations a trial
#: draws from (``"default"`` is what a user gets from ``wacoll.Comm(comm)``); those
#: of weight 0 only when chosen (:func:`run_trials`'s ``configs``).
CONFIGS = {
    "default": (6, {}),
    "strict": (2, {"level": "strict"}),
    "associative": (1, {"level": "associative"}),
    "segmented": (1, {"segment_size": 96, "threshold": 64}),
    "check-first": (1, {"check": "first"}),
    "family-mpich": (1, {"family": "mpich"}),
    "family-magpie": (1, {"family": "magpie"}),
    "reproducible": (0, {"level": "strict", "arithmetic": "reproducible"}),
    "check-off": (0, {"check": "off"}),
    "trace": (0, {"trace": True}),
    "family-tree": (0, {"family": "tree"}),
    "family-gridmpi": (0, {"family": "gridmpi"}),
    "family-combining": (0, {"family": "combining"}),
    "family-han": (0, {"family": "han"}),
}

_REDUCTIONS = (
    "Reduce",
    "Allreduce",
    "Reduce_scatter_block",
    "Reduce_scatter",
    "Scan",
    "Exscan",
)
_IN_PLACE_ALL = (
    "Allreduce",
    "Scan",
    "Exscan",
    "Reduce_scatter_block",
    "Reduce_scatter",
    "Allgather",
    "Allgatherv",
    "Alltoall",
    "Alltoallv",
)
_IN_PLACE_ROOT = ("Reduce", "Gather", "Gatherv", "Scatter", "Scatterv")


# ------------------------------------------------------------------ user operators
#: The numpy layout of each derived datatype's element made here (its fields at
#: their offsets, itemsize its extent), by handle: what the user operators read.
_LAYOUTS = {}


def _operands(a, b, datatype):
    """The two operands of a user operator as numpy arrays of whole elements and the
    names of their values (None: one plain value per element)."""
    if datatype.is_predefined:
        dtype = dtlib.to_numpy_dtype(datatype)
    else:
        dtype = _LAYOUTS[datatype.handle]
    x = np.frombuffer(a, dtype)
    y = np.frombuffer(b, dtype)
    return x, y, dtype.names


def _leftmost_nonzero(x, y):
    return np.where(x != 0, x, y)


def _ncomm(a, b, datatype):
    """``b = a (op) b``, associative, not commutative: an element's values taken in
    pairs ``(m, c)`` are the maps ``v -> m v + c``, composed left first; a value left
    over (or a plain element) keeps the leftmost nonzero operand."""
    x, y, names = _operands(a, b, datatype)
    if names is None:
        y[...] = _leftmost_nonzero(x, y)
        return
    for m, c in zip(names[::2], names[1::2]):
        xm, xc, ym, yc = x[m].copy(), x[c].copy(), y[m].copy(), y[c].copy()
        y[m] = xm * ym
        y[c] = ym * xc + yc
    if len(names) % 2:
        last = names[-1]
        y[last] = _leftmost_nonzero(x[last], y[last])


def _comm_sum(a, b, datatype):
    """``b = a + b`` value by value (bool: or): commutative."""
    x, y, names = _operands(a, b, datatype)
    for name in names or (None,):
        xs, ys = (x, y) if name is None else (x[name], y[name])
        if ys.dtype.kind == "b":
            ys[...] = xs | ys
        else:
            ys[...] = xs + ys


_USER_OPS = {}


def user_ops():
    """``{"ncomm": op, "comm": op}``: the user-defined operators (made once)."""
    if not _USER_OPS:
        _USER_OPS["ncomm"] = MPI.Op.Create(_ncomm, commute=False)
        _USER_OPS["comm"] = MPI.Op.Create(_comm_sum, commute=True)
    return _USER_OPS


# ------------------------------------------------------------------ elements
@dataclasses.dataclass
class Elem:
    """The element type of a trial's buffers.

    Attributes
    ----------
    name : str
    datatype : mpi4py.MPI.Datatype
        The datatype named in buffer specifications.
    dtype : numpy.dtype
        Predefined: the element dtype. Derived: the element's layout (fields at
        their offsets, itemsize the extent); buffers are then bytes.
    predefined : bool
    base : numpy.dtype or None
        Derived types of one predefined type: that type.
    equiv : tuple or None
        ``(Elem, k)``: a predefined element of the same type signature, ``k`` of it
        per element of this one.
    owned : bool
        Whether the trial made (and frees) the datatype.
    """

    name: str
    datatype: object
    dtype: np.dtype
    predefined: bool = True
    base: object = None
    equiv: object = None
    owned: bool = False

    @property
    def extent(self):
        return self.dtype.itemsize

    def array(self, n):
        """A buffer of ``n`` elements (derived: bytes)."""
        if self.predefined:
            return np.empty(n, self.dtype)
        return np.empty(n * self.extent, np.uint8)

    def elements(self, arr, start, n):
        """A numpy view of elements ``start .. start+n`` of buffer ``arr``."""
        if self.predefined:
            return arr[start : start + n]
        return np.ndarray((n,), self.dtype, buffer=arr.data, offset=start * self.extent)

    def kind(self):
        return self.name.split("(")[0]


#: Predefined element types: ``(name, numpy dtype, MPI datatype name)`` (the
#: datatype used is the one mpi4py maps the dtype to, see :func:`_predefined`).
_PREDEFINED = [
    ("int8", "i1", "INT8_T"),
    ("int16", "i2", "INT16_T"),
    ("int32", "i4", "INT32_T"),
    ("int64", "i8", "INT64_T"),
    ("uint8", "u1", "UINT8_T"),
    ("uint16", "u2", "UINT16_T"),
    ("uint32", "u4", "UINT32_T"),
    ("uint64", "u8", "UINT64_T"),
    ("float32", "f4", "FLOAT"),
    ("float64", "f8", "DOUBLE"),
    ("complex64", "c8", "C_FLOAT_COMPLEX"),
    ("complex128", "c16", "C_DOUBLE_COMPLEX"),
    ("bool", "?", "C_BOOL"),
    ("longdouble", "g", "LONG_DOUBLE"),
]
_PAIRS = ("DOUBLE_INT", "FLOAT_INT", "LONG_INT", "TWOINT", "SHORT_INT")
#: Base types of derived elements (bool and long double are not among them).
_BASES = ("int8", "int16", "int32", "int64", "uint32", "float32", "float64", "complex128")


def _predefined(name):
    """The element ``name``; its datatype is the one mpi4py reads from an array of
    its dtype (a reduction's send and receive datatypes must be the same handle,
    whether named or read from an array: ``MPI.LONG``, not ``MPI.INT64_T``)."""
    for n, code, _ in _PREDEFINED:
        if n == name:
            fmt = memoryview(np.empty(0, code)).format
            return Elem(name, MPI._typedict[fmt], np.dtype(code))
    if name in _PAIRS:
        dt = getattr(MPI, name)
        return Elem(name, dt, dtlib.to_numpy_dtype(dt))
    raise KeyError(name)


def _layout(fields, extent):
    """A numpy dtype of an element: ``fields`` = [(numpy dtype, offset), ...]."""
    return np.dtype(
        {
            "names": [f"f{i}" for i in range(len(fields))],
            "formats": [f for f, _ in fields],
            "offsets": [o for _, o in fields],
            "itemsize": extent,
        }
    )


def _derived(g):
    """A committed derived datatype drawn with ``g``, as an :class:`Elem`."""
    kinds = [
        "contiguous",
        "vector",
        "hvector",
        "indexed",
        "indexed_block",
        "struct",
        "resized",
        "dup",
    ]
    kind = kinds[g.integers(len(kinds))]
    base_name = _BASES[g.integers(len(_BASES))]
    base = _predefined(base_name)
    bt, bs = base.dtype, base.dtype.itemsize
    hetero = False
    if kind == "contiguous":
        k = int(g.integers(1, 5))
        dt = base.datatype.Create_contiguous(k)
        fields = [(bt, i * bs) for i in range(k)]
        desc = f"{k}"
    elif kind == "vector":
        count, blen = int(g.integers(1, 4)), int(g.integers(1, 4))
        stride = blen + int(g.integers(0, 3))
        dt = base.datatype.Create_vector(count, blen, stride)
        fields = [(bt, (i * stride + j) * bs) for i in range(count) for j in range(blen)]
        desc = f"{count},{blen},{stride}"
    elif kind == "hvector":
        count, blen = int(g.integers(1, 4)), int(g.integers(1, 3))
        stride = blen * bs + int(g.integers(0, 3)) * bs
        dt = base.datatype.Create_hvector(count, blen, stride)
        fields = [(bt, i * stride + j * bs) for i in range(count) for j in range(blen)]
        desc = f"{count},{blen},{stride}B"
    elif kind in ("indexed", "indexed_block"):
        nb = int(g.integers(1, 4))
        blens = [int(g.integers(1, 3)) for _ in range(nb)]
        if kind == "indexed_block":
            blens = [blens[0]] * nb
        displs, at = [], 0
        for b in blens:
            displs.append(at)
            at += b + int(g.integers(0, 3))
        if kind == "indexed":
            dt = base.datatype.Create_indexed(blens, displs)
        else:
            dt = base.datatype.Create_indexed_block(blens[0], displs)
        fields = [(bt, (d + j) * bs) for b, d in zip(blens, displs) for j in range(b)]
        desc = f"{blens},{displs}"
    elif kind == "struct":
        names = (
            ["int32", "float64"] if g.random() < 0.5 else ["int16", "int64", "float32"]
        )
        if g.random() < 0.3:
            names = [base_name, base_name]
        members = [_predefined(n) for n in names]
        offsets, at = [], 0
        for m in members:
            size = m.dtype.itemsize
            at = -(-at // size) * size
            offsets.append(at)
            at += size
        dt = MPI.Datatype.Create_struct(
            [1] * len(members), offsets, [m.datatype for m in members]
        )
        fields = [(m.dtype, o) for m, o in zip(members, offsets)]
        hetero = len(set(names)) > 1
        desc = "+".join(names)
    elif kind == "resized":
        k = int(g.integers(1, 3))
        pad = int(g.integers(1, 3)) * bs
        inner = base.datatype.Create_contiguous(k)
        dt = inner.Create_resized(0, k * bs + pad)
        inner.Free()
        fields = [(bt, i * bs) for i in range(k)]
        desc = f"{k}+{pad}B"
    else:  # dup
        dt = base.datatype.Dup()
        fields = [(bt, 0)]
        desc = ""
    dt.Commit()
    lb, extent = dt.Get_extent()
    if lb != 0 or extent < max(o + f.itemsize for f, o in fields):
        raise RuntimeError(f"{kind}({desc}): lb {lb}, extent {extent}")
    layout = _layout(fields, extent)
    _LAYOUTS[dt.handle] = layout
    name = f"{kind}({base_name if not hetero else ''}{';' if desc else ''}{desc})"
    equiv = None if hetero else (base, len(fields))
    return Elem(
        name,
        dt,
        layout,
        predefined=False,
        base=None if hetero else bt,
        equiv=equiv,
        owned=True,
    )


# ------------------------------------------------------------------ values
def _values(d, dtype, n, mode):
    """``n`` values of ``dtype`` for ``mode``."""
    kind = dtype.kind
    if kind == "b":
        return d.random(n) < 0.5
    if mode == "small":
        low = 0 if kind == "u" else -2
        v = d.integers(low, 3, n)
        return (
            v.astype(dtype)
            if kind != "c"
            else (v + 1j * d.integers(-2, 3, n)).astype(dtype)
        )
    if mode == "logical":
        return (
            np.array([0, 0, 1, 2, 3], dtype)[d.integers(0, 5, n)]
            if kind in "iu"
            else d.integers(0, 2, n).astype(dtype)
        )
    if mode == "arith":
        if kind in "iu":
            low = 0 if kind == "u" else -60
            return d.integers(low, 61, n).astype(dtype)
        v = d.uniform(0.5, 2.0, n)
        if kind == "c":
            v = v + 1j * d.uniform(0.5, 2.0, n)
        return v.astype(dtype)
    # "order" and "bits": anything but NaN and zeros of either sign
    if kind in "iu":
        info = np.iinfo(dtype)
        return d.integers(info.min, info.max, n, endpoint=True, dtype=dtype)
    v = d.standard_normal(n) * 10.0 ** d.integers(-3, 4, n)
    v[v == 0] = 1.0
    if kind == "c":
        v = v + 1j * d.standard_normal(n)
    return v.astype(dtype)


def _fill(d, elem, arr, start, n, mode):
    """Put values of ``mode`` in elements ``start .. start+n`` of ``arr``."""
    if not n:
        return
    view = elem.elements(arr, start, n)
    if elem.predefined and elem.dtype.names is None:
        view[...] = _values(d, elem.dtype, n, mode)
        return
    if elem.predefined:  # a MINLOC/MAXLOC pair: values tie, indices differ
        value, index = elem.dtype.names
        view[value] = d.integers(-3, 4, n).astype(elem.dtype.fields[value][0])
        view[index] = d.integers(0, 6, n)
        return
    for name in elem.dtype.names:
        view[name] = _values(d, elem.dtype.fields[name][0], n, mode)


def _noise(d, elem, n):
    """A buffer of ``n`` elements of random bytes (the pattern outside the call's
    regions, which must stay untouched)."""
    arr = elem.array(n)
    arr.view(np.uint8)[...] = d.integers(0, 256, arr.nbytes, dtype=np.uint8)
    if elem.predefined and elem.dtype.kind == "b":  # bool: keep to 0 and 1
        arr.view(np.uint8)[...] &= 1
    return arr


# ------------------------------------------------------------------ specifications
def _spec(elem, arr, count, style, displ=0):
    """A buffer specification naming ``count`` elements of ``arr`` at ``displ``."""
    if style == "plain":
        return arr
    if style == "typed":
        return [arr, elem.datatype]
    if style == "counted":
        return [arr, count, elem.datatype]
    return [arr, (count, displ), elem.datatype]


def _style(rng, elem):
    """A specification style (each rank draws its own): plain arrays for
    predefined non-pair types only."""
    styles = ["counted", "displaced", "typed"]
    if elem.predefined and elem.dtype.names is None:
        styles += ["plain", "plain"]
    return styles[rng.integers(len(styles))]


def _room(rng, style):
    """``(before, after)`` extra elements around a region for a style (``plain`` and
    ``typed`` name the whole buffer: none)."""
    if style in ("plain", "typed"):
        return 0, 0
    before = int(rng.integers(0, 3)) if style == "displaced" else 0
    return before, int(rng.integers(0, 3))


def _count(g, elem, big=True):
    """A count: 0, small, odd, now and then large (``big``: up to 2000 predefined
    or 200 derived elements)."""
    r = g.random()
    if r < 0.08:
        return 0
    if r < 0.55:
        return int(g.integers(1, 9))
    if r < 0.88 or not big:
        return int(g.integers(9, 65))
    limit = 2000 if elem.predefined else 200
    return int(g.integers(65, limit))


def _vector_layout(rng, counts):
    """Displacements of blocks of ``counts`` in shuffled order with gaps; and the
    total elements the buffer needs."""
    order = rng.permutation(len(counts))
    displs = [0] * len(counts)
    at = int(rng.integers(0, 3))
    for r in order:
        displs[int(r)] = at
        at += counts[int(r)] + int(rng.integers(0, 3))
    return displs, at + int(rng.integers(0, 2))


# ------------------------------------------------------------------ operators
_INT_OPS = ("SUM", "PROD", "MIN", "MAX", "LAND", "LOR", "LXOR", "BAND", "BOR", "BXOR")
_VALUES_OF = {
    "SUM": "arith",
    "PROD": "arith",
    "MIN": "order",
    "MAX": "order",
    "LAND": "logical",
    "LOR": "logical",
    "LXOR": "logical",
    "BAND": "bits",
    "BOR": "bits",
    "BXOR": "bits",
    "MINLOC": "pairs",
    "MAXLOC": "pairs",
    "ncomm": "small",
    "comm": "small",
}


def _operator(g, elem):
    """``(name, op)`` of an operator valid for ``elem`` (rarely, for a derived type,
    a predefined one: MPI defines none, so both must refuse)."""
    user = user_ops()
    if not elem.predefined:
        if g.random() < 0.04:
            return "SUM", MPI.SUM
        name = "ncomm" if g.random() < 0.6 else "comm"
        return name, user[name]
    if elem.dtype.names is not None:
        name = "MINLOC" if g.random() < 0.5 else "MAXLOC"
        return name, getattr(MPI, name)
    kind = elem.dtype.kind
    if g.random() < 0.2 and elem.name != "longdouble":
        name = "ncomm" if g.random() < 0.6 else "comm"
        return name, user[name]
    if kind == "b":
        names = ("LAND", "LOR", "LXOR")
    elif kind in "iu":
        names = _INT_OPS
    elif kind == "f":
        names = ("SUM", "PROD", "MIN", "MAX")
    else:
        names = ("SUM", "PROD")
    name = names[g.integers(len(names))]
    return name, getattr(MPI, name)


def _tolerance(elem, opname):
    """The relative tolerance of a result (0: exact bits)."""
    if not elem.predefined or elem.dtype.names is not None:
        return 0.0
    if opname in ("SUM", "PROD") and elem.dtype.kind in "fc":
        eps = float(np.finfo(elem.dtype).eps)
        return 64 * eps * max(WORLD.Get_size(), 2)
    return 0.0


# ------------------------------------------------------------------ a case
def _copy(a):
    """A copy of every byte of ``a`` (numpy's own copy of a structured array may
    leave the padding between fields out)."""
    out = np.empty_like(a)
    out.view(np.uint8)[...] = a.view(np.uint8)
    return out


def _copy_into(dst, src):
    dst.view(np.uint8)[...] = src.view(np.uint8)


@dataclasses.dataclass
class Buffer:
    """One array a call is given: its contents at the start of each round and its
    role (``"in"``: must not change; ``"out"``, ``"inout"``)."""

    rounds: list
    role: str
    elem: Elem
    tolerance: float = 0.0
    compare: bool = True
    #: ``(start, stop)``: elements MPI leaves undefined after the call (an in-place
    #: reduce-scatter's input beyond this rank's result: Open MPI works there)
    undefined: tuple = ()


class Case:
    """One drawn call, ready to run on any communicator.

    Attributes
    ----------
    method, form, config : str
    elem : Elem or None
    opname : str or None
    details : dict
        What else was drawn (counts, root, styles, in place), for the description.
    """

    def __init__(self, method, form, config, seed, trial):
        self.method, self.form, self.config = method, form, config
        self.seed, self.trial = seed, trial
        self.elem = self.opname = None
        self.elems = []
        self.buffers = []
        self.details = {}
        self.make_args = None  # arrays -> (args, kwargs)
        #: Whether a zero's sign may differ in results (a user operator's floating
        #: point: exact on the small integers drawn, but -0.0 and 0.0 come out of
        #: different groupings of m x + c)
        self.zero_sign = False
        self.objects = None  # object methods: (args, kwargs, tolerance)

    def describe(self):
        what = ", ".join(f"{k}={v}" for k, v in self.details.items())
        elem = "" if self.elem is None else f" {self.elem.name}"
        op = "" if self.opname is None else f" op={self.opname}"
        form = "" if self.form == "blocking" else f"[{self.form}]"
        return (
            f"seed {self.seed} trial {self.trial}: {self.method}{form}{elem}{op} "
            f"({what}) config={self.config}"
        )

    def free(self):
        for e in self.elems:
            if e.owned and e.datatype != MPI.DATATYPE_NULL:
                _LAYOUTS.pop(e.datatype.handle, None)
                e.datatype.Free()
        self.elems = []

    # ---------------------------------------------------------------- running
    def run(self, comm):
        """Run the case on ``comm``: ``(snapshots, None)`` (each buffer after each
        round) or ``(None, exception)``."""
        if self.objects is not None:
            try:
                args, kwargs, _ = self.objects
                return [getattr(comm, self.method)(*args, **kwargs)], None
            except Exception as exc:  # noqa: BLE001 -- judged by the caller
                return None, exc
        arrays = [_copy(b.rounds[0]) for b in self.buffers]
        args, kwargs = self.make_args(arrays)
        snaps = []
        request = None
        try:
            if self.form == "blocking":
                getattr(comm, self.method)(*args, **kwargs)
                snaps.append([_copy(a) for a in arrays])
            elif self.form == "nonblocking":
                name = "I" + self.method[0].lower() + self.method[1:]
                getattr(comm, name)(*args, **kwargs).Wait()
                snaps.append([_copy(a) for a in arrays])
            else:
                request = getattr(comm, self.method + "_init")(*args, **kwargs)
                for r in range(2):
                    if r:
                        for a, b in zip(arrays, self.buffers):
                            _copy_into(a, b.rounds[min(1, len(b.rounds) - 1)])
                    request.Start()
                    request.Wait()
                    snaps.append([_copy(a) for a in arrays])
        except Exception as exc:  # noqa: BLE001 -- judged by the caller
            return None, exc
        finally:
            if request is not None:
                try:
                    request.Free()
                except Exception:  # noqa: BLE001 -- an active request after a failure
                    pass
        return snaps, None


# ------------------------------------------------------------------ drawing
def draw(g, size, rank, *, seed=0, trial=0, configs=None, methods=None, forms=None):
    """The case of one trial: the call drawn with ``g`` (the same on every rank)
    and this rank's data (drawn from ``[seed, trial, rank]``).

    Parameters
    ----------
    g : numpy.random.Generator
        Seeded alike on every rank.
    size, rank : int
    seed, trial : int
        Name the trial (and seed this rank's data).
    configs : dict, optional
        ``{name: (weight, kwargs)}`` (default :data:`CONFIGS`).
    methods, forms : sequence of str, optional
        Restrict the draw.
    """
    configs = CONFIGS if configs is None else configs
    names = list(configs)
    weights = np.array([configs[n][0] for n in names], float)
    if not weights.any():  # configurations of weight 0, chosen: alike
        weights[:] = 1.0
    config = names[g.choice(len(names), p=weights / weights.sum())]
    methods = methods or (BUFFER_METHODS * 3 + OBJECT_METHODS)
    method = methods[g.integers(len(methods))]
    d = np.random.default_rng([seed, trial, rank, 7])
    if method in OBJECT_METHODS:
        case = Case(method, "blocking", config, seed, trial)
        _draw_objects(case, g, d, size, rank)
        return case
    forms = forms or FORMS
    weights = np.array(
        [{"blocking": 6, "nonblocking": 2, "persistent": 2}[f] for f in forms], float
    )
    form = forms[g.choice(len(forms), p=weights / weights.sum())]
    case = Case(method, form, config, seed, trial)
    _BUILDERS[method](case, g, d, size, rank)
    return case


def _element(case, g):
    """Draw the trial's element type (derived about a quarter of the time)."""
    if g.random() < 0.27:
        elem = _derived(g)
    else:
        if g.random() < 0.07:  # MINLOC/MAXLOC pairs (padding between their fields)
            elem = _predefined(_PAIRS[g.integers(len(_PAIRS))])
        else:
            names = [n for n, _, _ in _PREDEFINED]
            elem = _predefined(names[g.integers(len(names))])
    case.elem = elem
    case.elems.append(elem)
    return elem


def _recv_side(case, g, elem):
    """The receive side's element and its count factor: the same element, or (for
    a derived type of one base, a fifth of the time) the predefined type of the
    same type signature."""
    if elem.equiv is not None and g.random() < 0.2:
        base, k = elem.equiv
        case.details["recv"] = base.name
        return base, k
    return elem, 1


def _region(case, d, elem, n, style, role, mode="bits", rounds=1):
    """A buffer of ``n`` elements (with room around per ``style``, drawn from this
    rank's ``d``): ``(Buffer, displ)``. Inputs get values in the region; outputs
    only noise."""
    before, after = _room(d, style)
    templates = []
    for _r in range(rounds):
        arr = _noise(d, elem, before + n + after)
        if role != "out":
            _fill(d, elem, arr, before, n, mode)
        templates.append(arr)
    buf = Buffer(templates, role, elem)
    case.buffers.append(buf)
    return buf, before


def _rounds(case):
    return 2 if case.form == "persistent" else 1


def _in_place(g, p=0.25):
    return bool(g.random() < p)


# -------------------------------------------------------------- data movement
def _build_barrier(case, g, d, size, rank):
    case.make_args = lambda arrays: ((), {})


def _build_bcast(case, g, d, size, rank):
    elem = _element(case, g)
    n = _count(g, elem)
    root = int(g.integers(size))
    style = _style(d, elem)
    case.details.update(count=n, root=root, style=style)
    _, displ = _region(
        case, d, elem, n, style, "in" if rank == root else "out", rounds=_rounds(case)
    )
    case.make_args = lambda a: ((_spec(elem, a[0], n, style, displ), root), {})


def _blocks_setup(case, g, d, size, rooted):
    """The draws a data movement of fixed blocks starts with, said in the details.

    Parameters
    ----------
    case : Case
        The trial being built.
    g, d : numpy.random.Generator
        The generators every rank draws alike (``g``) and this rank's own (``d``).
    size : int
        The number of ranks.
    rooted : bool
        Whether the operation has a root (drawn after the count).

    Returns
    -------
    tuple
        ``(elem, relem, k, n, root, in_place, sstyle, rstyle, rounds)``: the send
        side's element, the receive side's and its count factor, the count of a
        block, the root (None when not ``rooted``), in place or not, each side's
        specification style, and the rounds of the buffers.
    """
    elem = _element(case, g)
    relem, k = _recv_side(case, g, elem)
    n = _count(g, elem, big=False)
    root = int(g.integers(size)) if rooted else None
    in_place = _in_place(g) and relem is elem
    sstyle, rstyle = _style(d, elem), _style(d, relem)
    case.details["count"] = n
    if rooted:
        case.details["root"] = root
    case.details.update(send=sstyle, recv_style=rstyle, in_place=in_place)
    return elem, relem, k, n, root, in_place, sstyle, rstyle, _rounds(case)


def _build_scatter(case, g, d, size, rank):
    elem, relem, k, n, root, in_place, sstyle, rstyle, rounds = _blocks_setup(
        case, g, d, size, rooted=True
    )
    parts = []
    if rank == root:
        _, sdispl = _region(case, d, elem, n * size, sstyle, "in", rounds=rounds)
        parts.append(
            lambda a, i=len(case.buffers) - 1: _block_send(elem, a[i], n, sstyle, sdispl)  # noqa: B008
        )
    else:
        parts.append(lambda a: None)
    if rank == root and in_place:
        parts.append(lambda a: MPI.IN_PLACE)
    else:
        _, rdispl = _region(case, d, relem, n * k, rstyle, "out", rounds=rounds)
        i = len(case.buffers) - 1
        parts.append(lambda a: _spec(relem, a[i], n * k, rstyle, rdispl))
    case.make_args = lambda a: ((parts[0](a), parts[1](a), root), {})


def _block_send(elem, arr, n, style, displ):
    """A send buffer of one block per rank (``n`` elements each)."""
    if style == "displaced":
        return [arr, (n, displ), elem.datatype]
    return _spec(elem, arr, n, style, displ)


def _build_gather(case, g, d, size, rank):
    elem, relem, k, n, root, in_place, sstyle, rstyle, rounds = _blocks_setup(
        case, g, d, size, rooted=True
    )
    rbuf_index = None
    if rank == root:
        rbuf, rdispl = _region(
            case,
            d,
            relem,
            n * k * size,
            rstyle,
            "inout" if in_place else "out",
            rounds=rounds,
        )
        rbuf_index = len(case.buffers) - 1
        if in_place:  # the root's own block, in place
            for t in rbuf.rounds:
                _fill(d, relem, t, rdispl + root * n * k, n * k, "bits")
    if rank == root and in_place:
        send = lambda a: MPI.IN_PLACE  # noqa: E731
    else:
        _, sdispl = _region(case, d, elem, n, sstyle, "in", rounds=rounds)
        i = len(case.buffers) - 1
        send = lambda a: _spec(elem, a[i], n, sstyle, sdispl)  # noqa: E731
    recv = (
        (lambda a: _block_send(relem, a[rbuf_index], n * k, rstyle, rdispl))
        if rank == root
        else (lambda a: None)
    )
    case.make_args = lambda a: ((send(a), recv(a), root), {})


def _build_allgather_like(case, g, d, size, rank):
    """Allgather (this rank sends its own block to every rank) and Alltoall (a
    block to each rank)."""
    elem, relem, k, n, _, in_place, sstyle, rstyle, rounds = _blocks_setup(
        case, g, d, size, rooted=False
    )
    to_each = case.method == "Alltoall"
    rbuf, rdispl = _region(
        case,
        d,
        relem,
        n * k * size,
        rstyle,
        "inout" if in_place else "out",
        rounds=rounds,
    )
    if in_place:  # what the send buffer would hold: this rank's block, or all
        start, length = (0, n * k * size) if to_each else (rank * n * k, n * k)
        for t in rbuf.rounds:
            _fill(d, relem, t, rdispl + start, length, "bits")
        send = lambda a: MPI.IN_PLACE  # noqa: E731
    else:
        _, sdispl = _region(
            case, d, elem, n * size if to_each else n, sstyle, "in", rounds=rounds
        )
        spec = _block_send if to_each else _spec
        send = lambda a: spec(elem, a[1], n, sstyle, sdispl)  # noqa: E731
    case.make_args = lambda a: (
        (send(a), _block_send(relem, a[0], n * k, rstyle, rdispl)),
        {},
    )


def _vspec(elem, arr, counts, displs, g_style):
    if g_style == "pair":
        return [arr, (list(counts), list(displs)), elem.datatype]
    return [arr, list(counts), list(displs), elem.datatype]


def _vbuffer(case, d, elem, counts, role, rounds, fill_blocks=()):
    """A vector buffer: blocks of ``counts`` shuffled with gaps (drawn from this
    rank's ``d``); ``(Buffer, displs)``; ``fill_blocks`` get values."""
    displs, total = _vector_layout(d, counts)
    templates = []
    for _ in range(rounds):
        arr = _noise(d, elem, total)
        for r in fill_blocks:
            _fill(d, elem, arr, displs[r], counts[r], "bits")
        templates.append(arr)
    buf = Buffer(templates, role, elem)
    case.buffers.append(buf)
    return buf, displs


def _counts(g, size, elem):
    hi = 9 if g.random() < 0.8 else 40
    return [int(c) for c in g.integers(0, hi, size)]


def _vector_setup(case, g, d, size, rooted):
    """The draws a data movement of per-rank counts starts with; the details say
    the counts and the root. The parameters are :func:`_blocks_setup`'s (the root
    drawn after the counts).

    Returns
    -------
    tuple
        ``(elem, relem, k, counts, root, in_place, vstyle)``: the send side's
        element, the receive side's and its count factor, each rank's count, the
        root (None when not ``rooted``), in place or not, and the style of the
        vector specification.
    """
    elem = _element(case, g)
    relem, k = _recv_side(case, g, elem)
    counts = _counts(g, size, elem)
    root = int(g.integers(size)) if rooted else None
    in_place = _in_place(g) and relem is elem
    vstyle = "pair" if d.random() < 0.3 else "four"
    case.details["counts"] = tuple(counts)
    if rooted:
        case.details["root"] = root
    return elem, relem, k, counts, root, in_place, vstyle


def _build_scatterv(case, g, d, size, rank):
    elem, relem, k, counts, root, in_place, vstyle = _vector_setup(
        case, g, d, size, rooted=True
    )
    rstyle = _style(d, relem)
    case.details.update(recv_style=rstyle, in_place=in_place)
    rounds = _rounds(case)
    send = lambda a: None  # noqa: E731
    if rank == root:
        _, displs = _vbuffer(case, d, elem, counts, "in", rounds, range(size))
        case.details["displs"] = tuple(displs)
        send = lambda a: _vspec(elem, a[0], counts, displs, vstyle)  # noqa: E731
    if rank == root and in_place:
        recv = lambda a: MPI.IN_PLACE  # noqa: E731
    else:
        _, rdispl = _region(
            case, d, relem, counts[rank] * k, rstyle, "out", rounds=rounds
        )
        i = len(case.buffers) - 1
        recv = lambda a: _spec(
            relem,
            a[i],
            counts[rank] * k,
            rstyle,  # noqa: E731
            rdispl,
        )
    case.make_args = lambda a: ((send(a), recv(a), root), {})


def _build_gatherv(case, g, d, size, rank):
    elem, relem, k, counts, root, in_place, vstyle = _vector_setup(
        case, g, d, size, rooted=True
    )
    sstyle = _style(d, elem)
    case.details.update(send=sstyle, in_place=in_place)
    rounds = _rounds(case)
    recv = lambda a: None  # noqa: E731
    rcounts = [c * k for c in counts]
    if rank == root:
        _, displs = _vbuffer(
            case,
            d,
            relem,
            rcounts,
            "inout" if in_place else "out",
            rounds,
            (root,) if in_place else (),
        )
        case.details["displs"] = tuple(displs)
        recv = lambda a: _vspec(relem, a[0], rcounts, displs, vstyle)  # noqa: E731
    if rank == root and in_place:
        send = lambda a: MPI.IN_PLACE  # noqa: E731
    else:
        _, sdispl = _region(case, d, elem, counts[rank], sstyle, "in", rounds=rounds)
        i = len(case.buffers) - 1
        send = lambda a: _spec(elem, a[i], counts[rank], sstyle, sdispl)  # noqa: E731
    case.make_args = lambda a: ((send(a), recv(a), root), {})


def _build_allgatherv(case, g, d, size, rank):
    elem, relem, k, counts, _, in_place, vstyle = _vector_setup(
        case, g, d, size, rooted=False
    )
    sstyle = _style(d, elem)
    case.details.update(send=sstyle, in_place=in_place)
    rounds = _rounds(case)
    rcounts = [c * k for c in counts]
    _, displs = _vbuffer(
        case,
        d,
        relem,
        rcounts,
        "inout" if in_place else "out",
        rounds,
        (rank,) if in_place else (),
    )
    case.details["displs"] = tuple(displs)
    if in_place:
        send = lambda a: MPI.IN_PLACE  # noqa: E731
    else:
        _, sdispl = _region(case, d, elem, counts[rank], sstyle, "in", rounds=rounds)
        send = lambda a: _spec(elem, a[1], counts[rank], sstyle, sdispl)  # noqa: E731
    case.make_args = lambda a: (
        (send(a), _vspec(relem, a[0], rcounts, displs, vstyle)),
        {},
    )


def _build_alltoallv(case, g, d, size, rank):
    elem = _element(case, g)
    relem, k = _recv_side(case, g, elem)
    hi = 7 if g.random() < 0.8 else 30
    matrix = g.integers(0, hi, (size, size))  # matrix[i, j]: i sends to j
    in_place = _in_place(g) and relem is elem
    if in_place:
        matrix = np.triu(matrix) + np.triu(matrix, 1).T
    vstyle = "pair" if d.random() < 0.3 else "four"
    case.details.update(matrix=matrix.tolist(), in_place=in_place)
    rounds = _rounds(case)
    scounts = [int(c) for c in matrix[rank]]
    rcounts = [int(c) * k for c in matrix[:, rank]]
    _, rdispls = _vbuffer(
        case,
        d,
        relem,
        rcounts,
        "inout" if in_place else "out",
        rounds,
        range(size) if in_place else (),
    )
    if in_place:
        send = lambda a: MPI.IN_PLACE  # noqa: E731
    else:
        _, sdispls = _vbuffer(case, d, elem, scounts, "in", rounds, range(size))
        send = lambda a: _vspec(elem, a[1], scounts, sdispls, vstyle)  # noqa: E731
    case.make_args = lambda a: (
        (send(a), _vspec(relem, a[0], rcounts, rdispls, vstyle)),
        {},
    )


# -------------------------------------------------------------- reductions
def _padded(datatype):
    """Whether ``datatype``'s extent runs past its data (its true extent)."""
    lb, extent = datatype.Get_extent()
    true_lb, true_extent = datatype.Get_true_extent()
    return lb + extent > true_lb + true_extent


def _reduction_setup(case, g):
    elem = _element(case, g)
    opname, op = _operator(g, elem)
    if (
        opname == "ncomm"
        and case.method == "Reduce_scatter_block"
        and not elem.predefined
        and _padded(elem.datatype)
    ):
        # MPICH 5.0's Reduce_scatter_block with a non-commutative operator on a
        # datatype whose extent exceeds its true extent (a resized type, a struct
        # padded to its alignment) returns wrong blocks on a power of two of ranks
        # and corrupts its heap: the library cannot be the reference there
        opname, op = "comm", user_ops()["comm"]
    case.opname = opname
    case.zero_sign = opname in ("ncomm", "comm")
    return elem, op, _VALUES_OF[opname], _tolerance(elem, opname)


def _build_reduce(case, g, d, size, rank):
    elem, op, mode, tol = _reduction_setup(case, g)
    n = _count(g, elem)
    root = int(g.integers(size))
    in_place = _in_place(g)
    sstyle, rstyle = _style(d, elem), _style(d, elem)
    recv_on_others = g.random() < 0.3
    case.details.update(
        count=n, root=root, send=sstyle, recv_style=rstyle, in_place=in_place
    )
    rounds = _rounds(case)
    recv = lambda a: None  # noqa: E731
    if rank == root or recv_on_others:
        rbuf, rdispl = _region(
            case,
            d,
            elem,
            n,
            rstyle,
            "inout" if in_place and rank == root else "out",
            mode=mode,
            rounds=rounds,
        )
        rbuf.tolerance = tol
        i = len(case.buffers) - 1
        recv = lambda a: _spec(elem, a[i], n, rstyle, rdispl)  # noqa: E731
    if in_place and rank == root:
        send = lambda a: MPI.IN_PLACE  # noqa: E731
    else:
        _, sdispl = _region(case, d, elem, n, sstyle, "in", mode=mode, rounds=rounds)
        j = len(case.buffers) - 1
        send = lambda a: _spec(elem, a[j], n, sstyle, sdispl)  # noqa: E731
    case.make_args = lambda a: ((send(a), recv(a)), {"op": op, "root": root})


def _build_allreduce_like(case, g, d, size, rank):
    elem, op, mode, tol = _reduction_setup(case, g)
    n = _count(g, elem)
    in_place = _in_place(g)
    sstyle, rstyle = _style(d, elem), _style(d, elem)
    case.details.update(count=n, send=sstyle, recv_style=rstyle, in_place=in_place)
    rounds = _rounds(case)
    rbuf, rdispl = _region(
        case, d, elem, n, rstyle, "inout" if in_place else "out", mode=mode, rounds=rounds
    )
    rbuf.tolerance = tol
    if case.method == "Exscan" and rank == 0:
        rbuf.compare = False  # MPI leaves rank 0's result undefined
    if in_place:
        send = lambda a: MPI.IN_PLACE  # noqa: E731
    else:
        _, sdispl = _region(case, d, elem, n, sstyle, "in", mode=mode, rounds=rounds)
        send = lambda a: _spec(elem, a[1], n, sstyle, sdispl)  # noqa: E731
    case.make_args = lambda a: (
        (send(a), _spec(elem, a[0], n, rstyle, rdispl)),
        {"op": op},
    )


def _build_reduce_scatter_block(case, g, d, size, rank):
    elem, op, mode, tol = _reduction_setup(case, g)
    n = _count(g, elem, big=False)
    in_place = _in_place(g)
    sstyle, rstyle = _style(d, elem), _style(d, elem)
    case.details.update(count=n, send=sstyle, recv_style=rstyle, in_place=in_place)
    rounds = _rounds(case)
    if in_place:
        rbuf, rdispl = _region(
            case, d, elem, n * size, rstyle, "inout", mode=mode, rounds=rounds
        )
        rbuf.tolerance = tol
        rbuf.undefined = (rdispl + n, rdispl + n * size)
        case.make_args = lambda a: (
            (MPI.IN_PLACE, _block_send(elem, a[0], n, rstyle, rdispl)),
            {"op": op},
        )
        return
    rbuf, rdispl = _region(case, d, elem, n, rstyle, "out", mode=mode, rounds=rounds)
    rbuf.tolerance = tol
    _, sdispl = _region(case, d, elem, n * size, sstyle, "in", mode=mode, rounds=rounds)
    case.make_args = lambda a: (
        (
            _block_send(elem, a[1], n, sstyle, sdispl),
            _spec(elem, a[0], n, rstyle, rdispl),
        ),
        {"op": op},
    )


def _build_reduce_scatter(case, g, d, size, rank):
    elem, op, mode, tol = _reduction_setup(case, g)
    counts = _counts(g, size, elem)
    in_place = _in_place(g)
    given = in_place or g.random() < 0.7  # else recvcounts=None (inferred)
    sstyle, rstyle = _style(d, elem), _style(d, elem)
    case.details.update(
        counts=tuple(counts),
        send=sstyle,
        recv_style=rstyle,
        in_place=in_place,
        recvcounts=given,
    )
    rounds = _rounds(case)
    total = sum(counts)
    if in_place:
        rbuf, rdispl = _region(
            case, d, elem, total, rstyle, "inout", mode=mode, rounds=rounds
        )
        rbuf.tolerance = tol
        rbuf.undefined = (rdispl + counts[rank], rdispl + total)
        case.make_args = lambda a: (
            (MPI.IN_PLACE, _spec(elem, a[0], total, rstyle, rdispl), counts),
            {"op": op},
        )
        return
    rbuf, rdispl = _region(
        case, d, elem, counts[rank], rstyle, "out", mode=mode, rounds=rounds
    )
    rbuf.tolerance = tol
    _, sdispl = _region(case, d, elem, total, sstyle, "in", mode=mode, rounds=rounds)
    case.make_args = lambda a: (
        (
            _spec(elem, a[1], total, sstyle, sdispl),
            _spec(elem, a[0], counts[rank], rstyle, rdispl),
            counts if given else None,
        ),
        {"op": op},
    )


# -------------------------------------------------------------- objects
def _object(d, kind, rank):
    if kind == "int":
        return int(d.integers(-50, 50))
    if kind == "float":
        return float(d.uniform(0.5, 2.0))
    if kind == "str":
        return "".join(chr(97 + int(c)) for c in d.integers(0, 26, d.integers(0, 4)))
    if kind == "list":
        return [int(x) for x in d.integers(0, 9, d.integers(0, 3))]
    if kind == "array":
        return d.integers(-9, 9, 3)
    if kind == "pair":
        return (int(d.integers(-3, 4)), rank)
    if kind == "bits":
        return int(d.integers(0, 1 << 16))
    if kind == "logical":
        return int(d.integers(0, 3))
    return [None, {"k": int(d.integers(9))}, (1, "x"), b"\x00\x01", 2.5][
        int(d.integers(5))
    ]


def _concat(x, y):
    return x + y


def _right(x, y):
    return y


#: Object reductions: ``(operator name, operator, object kind)``.
_OBJECT_OPS = [
    ("SUM", MPI.SUM, "int"),
    ("SUM", MPI.SUM, "float"),
    ("SUM", MPI.SUM, "str"),
    ("SUM", MPI.SUM, "list"),
    ("SUM", MPI.SUM, "array"),
    ("PROD", MPI.PROD, "int"),
    ("MAX", MPI.MAX, "int"),
    ("MIN", MPI.MIN, "str"),
    ("MAXLOC", MPI.MAXLOC, "pair"),
    ("MINLOC", MPI.MINLOC, "pair"),
    ("LAND", MPI.LAND, "logical"),
    ("LOR", MPI.LOR, "logical"),
    ("LXOR", MPI.LXOR, "logical"),
    ("BAND", MPI.BAND, "bits"),
    ("BOR", MPI.BOR, "bits"),
    ("BXOR", MPI.BXOR, "bits"),
    ("concat", _concat, "str"),
    ("right", _right, "misc"),
]


def _draw_objects(case, g, d, size, rank):
    m = case.method
    root = int(g.integers(size))
    kinds = ["int", "float", "str", "list", "array", "pair", "misc"]
    kind = kinds[g.integers(len(kinds))]
    tol = 0.0
    if m == "barrier":
        args, kwargs = (), {}
    elif m == "bcast":
        args, kwargs = (_object(d, kind, rank) if rank == root else None, root), {}
    elif m == "scatter":
        args = (
            [_object(d, kind, rank) for _ in range(size)] if rank == root else None,
            root,
        )
        kwargs = {}
    elif m == "gather":
        args, kwargs = (_object(d, kind, rank), root), {}
    elif m == "allgather":
        args, kwargs = (_object(d, kind, rank),), {}
    elif m == "alltoall":
        args, kwargs = ([_object(d, kind, rank) for _ in range(size)],), {}
    else:
        opname, op, kind = _OBJECT_OPS[g.integers(len(_OBJECT_OPS))]
        case.opname = opname
        if kind == "float" and opname in ("SUM", "PROD"):
            tol = 64 * float(np.finfo(float).eps) * size
        kwargs = {"op": op}
        if m == "reduce":
            kwargs["root"] = root
        args = (_object(d, kind, rank),)
    case.details.update(kind=kind, root=root)
    case.objects = (args, kwargs, tol)


_BUILDERS = {
    "Barrier": _build_barrier,
    "Bcast": _build_bcast,
    "Scatter": _build_scatter,
    "Scatterv": _build_scatterv,
    "Gather": _build_gather,
    "Gatherv": _build_gatherv,
    "Allgather": _build_allgather_like,
    "Allgatherv": _build_allgatherv,
    "Alltoall": _build_allgather_like,
    "Alltoallv": _build_alltoallv,
    "Reduce": _build_reduce,
    "Allreduce": _build_allreduce_like,
    "Scan": _build_allreduce_like,
    "Exscan": _build_allreduce_like,
    "Reduce_scatter_block": _build_reduce_scatter_block,
    "Reduce_scatter": _build_reduce_scatter,
}


# ------------------------------------------------------------------ judging
def _close(a, b, tol):
    """Whether two objects are equal, of the same types all the way down (floats:
    within ``tol`` relative)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b or abs(a - b) <= tol * max(abs(a), abs(b))
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_close(x, y, tol) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k], tol) for k in a)
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    return a == b


def _same_buffer(buf, got, want):
    """``""`` when the snapshots agree, else what differs."""
    if got.view(np.uint8).tobytes() == want.view(np.uint8).tobytes():
        return ""
    elem = buf.elem
    g8, w8 = got.view(np.uint8).reshape(-1), want.view(np.uint8).reshape(-1)
    if (
        elem.predefined
        and elem.dtype.names is None
        and (buf.tolerance or elem.name == "longdouble")
    ):
        gv, wv = got.reshape(-1), want.reshape(-1)
        if elem.name == "longdouble":  # padding bytes are undefined: values
            differ = ~((gv == wv) | (np.isnan(gv) & np.isnan(wv)))
        else:
            differ = np.flatnonzero(
                (g8 != w8).reshape(-1, elem.dtype.itemsize).any(axis=1)
            )
            differ = np.isin(np.arange(gv.size), differ)
        if buf.tolerance:
            close = np.isclose(gv, wv, rtol=buf.tolerance, atol=0.0, equal_nan=True)
            differ &= ~close
        if not differ.any():
            return ""
        i = int(np.flatnonzero(differ)[0])
        return (
            f"{int(differ.sum())} of {gv.size} {elem.name} values differ, first "
            f"at element {i}: got {gv[i]!r}, library {wv[i]!r}"
        )
    bad = np.flatnonzero(g8 != w8)
    where = int(bad[0])
    return (
        f"{bad.size} of {g8.size} bytes differ, first at byte {where} (element "
        f"{where // max(elem.extent, 1)}): got {g8[where]}, library {w8[where]}"
    )


def _unsigned_zeros(elem, arr):
    """A copy of ``arr`` with every floating-point zero made +0.0."""
    out = _copy(arr)
    if elem.predefined:
        if out.dtype.names is None and out.dtype.kind in "fc":
            out += 0
        return out
    view = out.view(elem.dtype)
    for name in elem.dtype.names:
        if elem.dtype.fields[name][0].kind in "fc":
            view[name] += 0
    return out


def compare(case, mine, theirs):
    """What differs between two runs' results on this rank (``""``: nothing)."""
    if case.objects is not None:
        tol = case.objects[2]
        return (
            ""
            if _close(mine[0], theirs[0], tol)
            else f"got {mine[0]!r}, library {theirs[0]!r}"
        )
    for rnd, (got_round, want_round) in enumerate(zip(mine, theirs)):
        for k, (buf, got, want) in enumerate(zip(case.buffers, got_round, want_round)):
            if not buf.compare:
                continue
            if buf.undefined:
                start, stop = buf.undefined
                got = _copy(got)
                size = max(buf.elem.extent, 1)  # bytes (a structured copy skips padding)
                got.view(np.uint8).reshape(-1)[start * size : stop * size] = want.view(
                    np.uint8
                ).reshape(-1)[start * size : stop * size]
            if case.zero_sign and buf.role != "in":
                got, want = (
                    _unsigned_zeros(buf.elem, got),
                    _unsigned_zeros(buf.elem, want),
                )
            detail = _same_buffer(buf, got, want)
            if detail:
                where = f"round {rnd + 1}, " if len(mine) > 1 else ""
                return f"{where}buffer {k} ({buf.role}): {detail}"
    return ""


def _name(exc):
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"


def judge(case, theirs, mine):
    """This rank's verdict on one trial: ``(status, detail)``.

    ``theirs`` and ``mine`` are :meth:`Case.run` results on the library's and on
    wacoll's communicator."""
    (t, texc), (m, mexc) = theirs, mine
    if texc is not None and mexc is not None:
        return "both-raised", f"library {_name(texc)}; wacoll {_name(mexc)}"
    if texc is not None:
        return "lax", f"library raised {_name(texc)}; wacoll ran it"
    if mexc is not None:
        return "refusal", f"wacoll raised {_name(mexc)}"
    detail = compare(case, m, t)
    return ("mismatch", detail) if detail else ("ok", "")


# ------------------------------------------------------------------ trials
_RANK = {"ok": 0, "both-raised": 1, "lax": 2, "refusal": 3, "mismatch": 4}


def make_comms(topology, configs=None):
    """``{config name: wacoll.Comm}`` over ``MPI.COMM_WORLD`` (collective)."""
    import wacoll

    configs = CONFIGS if configs is None else configs
    return {
        name: wacoll.Comm(WORLD, topology, **kwargs)
        for name, (_, kwargs) in configs.items()
    }


@dataclasses.dataclass
class Trials:
    """The tally of a run of trials (the same on every rank).

    Attributes
    ----------
    counts : dict
        ``{(group, key): {status: n}}`` for the groups ``"method"``, ``"form"``,
        ``"element"``, ``"config"`` and ``"op"``.
    failures : list
        ``(trial, status, description, [(rank, detail), ...])`` of every trial
        that was not ``ok`` or ``both-raised``.
    statuses : dict
        ``{status: n}`` over all trials.
    """

    counts: dict = dataclasses.field(default_factory=dict)
    failures: list = dataclasses.field(default_factory=list)
    statuses: dict = dataclasses.field(default_factory=dict)
    both_raised: list = dataclasses.field(default_factory=list)
    trials: int = 0

    def add(self, case, status, ranks):
        self.trials += 1
        self.statuses[status] = self.statuses.get(status, 0) + 1
        elem = (
            "object"
            if case.objects is not None
            else ("none" if case.elem is None else case.elem.kind())
        )
        for group, key in (
            ("method", case.method),
            ("form", case.form),
            ("element", elem),
            ("config", case.config),
            ("op", case.opname or "-"),
        ):
            tally = self.counts.setdefault((group, key), {})
            tally[status] = tally.get(status, 0) + 1
        if status in ("mismatch", "refusal", "lax"):
            self.failures.append((case.trial, status, case.describe(), ranks))

        elif status == "both-raised" and len(self.both_raised) < 50:
            self.both_raised.append((case.trial, case.describe(), ranks[:1]))

    @property
    def mismatches(self):
        return self.statuses.get("mismatch", 0)

    @property
    def refusals(self):
        return self.statuses.get("refusal", 0)

    def summary(self, limit=40):
        """The report, as lines."""
        lines = [
            f"{self.trials} trials: "
            + ", ".join(f"{s} {self.statuses.get(s, 0)}" for s in _RANK)
        ]
        for group in ("method", "form", "element", "op", "config"):
            lines.append(f"by {group}:")
            for (grp, key), tally in sorted(self.counts.items()):
                if grp != group:
                    continue
                total = sum(tally.values())
                rest = ", ".join(
                    f"{s} {tally[s]}" for s in _RANK if s != "ok" and tally.get(s)
                )
                lines.append(f"  {key:<22} {total:>6}" + (f"  ({rest})" if rest else ""))
        if self.failures:
            lines.append(f"failures ({len(self.failures)}; the first {limit}):")
            for _trial, status, desc, ranks in self.failures[:limit]:
                lines.append(f"  [{status}] {desc}")
                for rank, detail in ranks[:3]:
                    lines.append(f"      rank {rank}: {detail}")
        if self.both_raised:
            lines.append("both raised (the first 5):")
            for _trial, desc, ranks in self.both_raised[:5]:
                lines.append(f"  {desc}")
                for rank, detail in ranks:
                    lines.append(f"      rank {rank}: {detail}")
        return lines


def run_trials(
    trials,
    seed,
    topology,
    *,
    configs=None,
    methods=None,
    forms=None,
    start=0,
    only=None,
    progress=None,
    trace=None,
):
    """Run ``trials`` trials (collective over ``MPI.COMM_WORLD``); their tally.

    Parameters
    ----------
    trials : int
    seed : int
    topology : wacoll.Topology
        The clusters the wacoll communicators declare.
    configs : dict, optional
        The configurations to draw from (default :data:`CONFIGS`).
    methods, forms : sequence of str, optional
        Restrict the draw.
    start : int
        The first trial's index.
    only : sequence of int, optional
        Run just these trial indices (to reproduce a failure; note that a
        communicator's state, its cached plans and recorded calls, depends on the
        trials before).
    progress : callable, optional
        Called as ``progress(done, tally)`` every 500 trials (on every rank).
    trace : callable, optional
        Called as ``trace(case)`` before each trial runs (on every rank).
    """
    configs = CONFIGS if configs is None else configs
    size, rank = WORLD.Get_size(), WORLD.Get_rank()
    configs = {name: c for name, c in configs.items() if c[0]} or configs
    comms = make_comms(topology, configs)
    tally = Trials()
    indices = list(only) if only is not None else range(start, start + trials)
    try:
        for done, trial in enumerate(indices, 1):
            g = np.random.default_rng([seed, trial])
            try:
                case = draw(
                    g,
                    size,
                    rank,
                    seed=seed,
                    trial=trial,
                    configs=configs,
                    methods=methods,
                    forms=forms,
                )
                drawn = ""
            except Exception as exc:  # noqa: BLE001 -- a fault of the tester itself
                case, drawn = None, "".join(traceback.format_exception(exc))
            faults = [f for f in WORLD.allgather(drawn) if f]
            if faults:  # no rank runs a call another could not draw
                if case is not None:
                    case.free()
                raise RuntimeError(f"trial {trial}: drawing failed: {faults[0]}")
            if trace is not None:
                trace(case)
            try:
                theirs = case.run(WORLD)
                mine = case.run(comms[case.config])
                status, detail = judge(case, theirs, mine)
            except Exception as exc:  # noqa: BLE001 -- a fault of the tester itself
                status, detail = (
                    "mismatch",
                    "tester: "
                    + "".join(traceback.format_exception_only(type(exc), exc)).strip(),
                )
            finally:
                case.free()
            everyone = WORLD.allgather((status, detail))
            worst = max((s for s, _ in everyone), key=_RANK.get)
            ranks = [(r, dt) for r, (s, dt) in enumerate(everyone) if s == worst]
            tally.add(case, worst, ranks)
            if any(s in ("refusal", "both-raised") for s, _ in everyone):
                # a failed call may leave a wacoll communicator unusable: renew it
                comms[case.config].Free()
                comms[case.config] = make_comms(
                    topology, {case.config: configs[case.config]}
                )[case.config]
            if progress is not None and done % 500 == 0:
                progress(done, tally)
    finally:
        for comm in comms.values():
            comm.Free()
    return tally
