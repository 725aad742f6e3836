"""The exception hierarchy of wacoll.

Every error a user can trigger derives from :class:`WacollError`, so one ``except``
clause catches them all; each subclass names the layer at fault.
"""

__all__ = [
    "WacollError",
    "TopologyError",
    "ConfigurationError",
    "PlanError",
    "BufferMismatchError",
    "BufferTypeError",
    "DatatypeError",
    "MPIError",
    "ScriptError",
    "OperatorError",
    "AccumulatorOverflowError",
    "TestbedError",
    "TestbedUnavailable",
    "TestbedWarning",
    "ProofCacheWarning",
]


class WacollError(Exception):
    """Base class of all wacoll errors."""


class TopologyError(WacollError, ValueError):
    """An invalid topology: a rank missing or twice, an empty cluster, a bad link value."""


class ConfigurationError(WacollError, ValueError):
    """Settings a communicator depends on (its environment variables) that differ
    between its ranks."""


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


class BufferTypeError(BufferMismatchError, TypeError):
    """A buffer argument of the wrong kind (not a buffer, list or tuple), where mpi4py
    raises TypeError."""


class DatatypeError(BufferMismatchError, KeyError):
    """A type code or buffer format with no MPI datatype (mpi4py raises KeyError), or
    an MPI datatype wacoll cannot lay out."""

    __str__ = Exception.__str__  # KeyError would quote the message


def __getattr__(name):
    # MPIError derives from mpi4py's MPI.Exception, so it is built when first asked
    # for: the plan world imports this module without MPI.
    if name == "MPIError":
        global MPIError
        MPIError = _mpi_error_class()
        return MPIError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _mpi_error_class():
    from mpi4py import MPI

    class MPIError(BufferMismatchError, MPI.Exception):
        """A call the MPI library would refuse with an ``MPI.Exception`` (an operator
        not defined for the datatype, a datatype MPI cannot combine): both a
        :class:`BufferMismatchError` and an ``MPI.Exception`` that reports MPI's
        error class (``mpi_error_class``, e.g. ``MPI.ERR_OP``) with wacoll's message.
        """

        #: The MPI error class the MPI library would report.
        mpi_error_class = MPI.ERR_ARG

        def __init__(self, message, error_class=None):
            Exception.__init__(self, message)
            if error_class is not None:
                self.mpi_error_class = error_class

        def __int__(self):
            return int(self.mpi_error_class)

        def __str__(self):
            return str(self.args[0]) if self.args else ""

        def __repr__(self):
            return f"{type(self).__name__}({str(self)!r})"

        __hash__ = Exception.__hash__

        def __eq__(self, other):
            return self is other

        def __ne__(self, other):
            return self is not other

    MPIError.__module__ = __name__
    return MPIError


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


class ProofCacheWarning(UserWarning):
    """A file of the proof cache that could not be read, parsed or trusted, or written;
    it is ignored (the plan is proved again)."""
