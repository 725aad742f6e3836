"""The exception hierarchy of wacoll.

Every error a user can trigger derives from :class:`WacollError`, so one ``except``
clause catches them all; each subclass names the layer at fault.
"""

__all__ = [
    "WacollError",
    "TopologyError",
    "PlanError",
    "BufferMismatchError",
    "ScriptError",
    "OperatorError",
    "AccumulatorOverflowError",
    "TestbedError",
    "TestbedUnavailable",
    "TestbedWarning",
]


class WacollError(Exception):
    """Base class of all wacoll errors."""


class TopologyError(WacollError, ValueError):
    """An invalid topology: a rank missing or twice, an empty cluster, a bad link value."""


class PlanError(WacollError):
    """A plan that cannot be built or that fails its check.

    Attributes
    ----------
    rank, step : int or None
        The rank and the index of the step in its program at fault, when one is.
    """

    def __init__(self, message, *, rank=None, step=None):
        super().__init__(message)
        self.rank = rank
        self.step = step


class BufferMismatchError(WacollError, ValueError):
    """A buffer whose dtype, size, shape or contiguity does not fit the operation."""


class ScriptError(WacollError, ValueError):
    """A malformed plan script; ``line`` and ``column`` locate the fault (1-based)."""

    def __init__(self, message, *, line=None, column=None):
        where = f" (line {line}, column {column})" if line is not None else ""
        super().__init__(message + where)
        self.line = line
        self.column = column


class OperatorError(WacollError, ValueError):
    """A reduction operator wacoll cannot apply: an unknown name, MAXLOC/MINLOC on a
    type without pairs, or a bad ``side``.

    An operator applied to a type MPI does not define it for raises
    :class:`BufferMismatchError` instead.
    """


class AccumulatorOverflowError(WacollError, OverflowError):
    """A reproducible-sum accumulator holding more values than its bins sum exactly
    (see :data:`wacoll._kernels.repro.MAX_DEPOSITS`); ``index`` is the first element
    at fault."""

    def __init__(self, message, *, index=None):
        super().__init__(message)
        self.index = index


class TestbedError(WacollError):
    """A testbed that could not be built, checked, run or torn down."""

    __test__ = False  # not a pytest test class


class TestbedUnavailable(TestbedError):
    """This machine cannot host a testbed (not root, no TUN device, no ``ip``)."""


class TestbedWarning(UserWarning):
    """The testbed works, but its self-check measured figures off by more than 10 %."""

    __test__ = False
