"""The exception hierarchy of wacoll.

Every error a user can trigger derives from :class:`WacollError`, so one ``except``
clause catches them all; each subclass names the layer at fault. A few classes signal
between parts of wacoll and never reach the user (:class:`RelayStopped`,
:class:`ProofKeyRefused`, :class:`ProofLockRefused`, :class:`ProofRecordUntrusted`,
:class:`UnevenPiece`, :class:`BlockProofIncomplete`); they keep the built-in base
their callers catch.

An error :class:`wacoll.Comm` raises for bad arguments is also an instance of the
class mpi4py raises for the same arguments (or the MPI library through mpi4py), so
code written for mpi4py catches it unchanged:

=====================================  ================================================
mpi4py raises                          wacoll raises
=====================================  ================================================
``ValueError``                         :class:`BufferMismatchError` (and subclasses)
``TypeError``                          :class:`BufferTypeError`, :class:`RootTypeError`,
                                       :class:`OperatorTypeError`
``KeyError``                           :class:`DatatypeError`
``BufferError``                        :class:`BufferAccessError`
``MPI.Exception``, ``ERR_BUFFER``      :class:`BufferAliasError`
``MPI.Exception``, ``ERR_ROOT``        :class:`RootError`
``MPI.Exception``, ``ERR_COUNT``       :class:`CountError`
``MPI.Exception``, ``ERR_OP``          :class:`UndefinedOperatorError`
``MPI.Exception``, another class       :class:`MPIError`
=====================================  ================================================

The classes that derive from ``MPI.Exception`` (:class:`MPIError` and its
subclasses, :class:`RootError`) are built when first asked for, since the plan world
imports this module without MPI; they report their MPI error class through
``Get_error_class()`` and carry wacoll's message.
"""

__all__ = [
    "compiled_missing",
    "WacollError",
    "TopologyError",
    "ConfigurationError",
    "TuningError",
    "PlanError",
    "BufferMismatchError",
    "BufferTypeError",
    "BufferAccessError",
    "DatatypeError",
    "RootTypeError",
    "MPIError",
    "BufferAliasError",
    "CountError",
    "RootError",
    "UndefinedOperatorError",
    "ScriptError",
    "OperatorError",
    "OperatorTypeError",
    "AccumulatorOverflowError",
    "TestbedError",
    "TestbedUnavailable",
    "RelayStopped",
    "TestbedWarning",
    "SimGridUnavailable",
    "ProofKeyRefused",
    "ProofLockRefused",
    "ProofRecordUntrusted",
    "ProofCacheWarning",
    "LinksWarning",
    "UnevenPiece",
    "BlockProofIncomplete",
]


class WacollError(Exception):
    """Base class of all wacoll errors."""


class TopologyError(WacollError, ValueError):
    """An invalid topology: a rank missing or twice, an empty cluster, a bad link value."""


class ConfigurationError(WacollError, ValueError):
    """Settings a communicator depends on (its environment variables) that differ
    between its ranks."""


class TuningError(WacollError, ValueError):
    """A tuning file (``WACOLL_TUNING``, :mod:`wacoll.mpi.learning`) that cannot be
    read or is not one."""


class PlanError(WacollError):
    """A plan that cannot be built or that fails its check.

    Attributes
    ----------
    rank, step : int or None
        The rank and the index of the step in its program at fault, when one is.
    """

    def __init__(
        self, message: str, *, rank: int | None = None, step: int | None = None
    ) -> None:
        super().__init__(message)
        self.rank = rank
        self.step = step


class BufferMismatchError(WacollError, ValueError):
    """A buffer whose dtype, size, count or shape does not fit the operation, where
    mpi4py raises ValueError (a count that does not match, a specification of five
    items, a displacement beyond the buffer).

    Its subclasses say more, and are also the class mpi4py raises for the same
    fault: :class:`BufferTypeError` (TypeError), :class:`BufferAccessError`
    (BufferError), :class:`DatatypeError` (KeyError) and :class:`MPIError`
    (``MPI.Exception``).
    """


class BufferTypeError(BufferMismatchError, TypeError):
    """A buffer argument of the wrong kind (not a buffer, list or tuple; a count or
    displacement that is not an integer; a datatype that is not hashable), where
    mpi4py raises TypeError."""


class BufferAccessError(BufferMismatchError, BufferError):
    """A buffer whose memory cannot be used as the call needs it, where mpi4py's
    buffer reading raises BufferError: memory that is not contiguous, a receive
    buffer that is read-only (``bytes``, a read-only array or memoryview), a format
    of non-native byte order, a numpy dtype that exports no buffer (datetime), a
    DLPack tensor outside host memory."""


class DatatypeError(BufferMismatchError, KeyError):
    """A type code, buffer format or numpy dtype with no MPI datatype (an array of
    ``dtype=object``, a datatype given as a number), where mpi4py raises KeyError;
    or an MPI datatype wacoll cannot lay out."""

    __str__ = Exception.__str__  # KeyError would quote the message


class RootTypeError(WacollError, TypeError):
    """A root that is not an integer (a string, None, a float, a bool), where mpi4py
    raises TypeError; a root out of range raises :class:`RootError`."""


#: The classes built on first use (they derive from mpi4py's ``MPI.Exception``).
_MPI_CLASSES = (
    "MPIError",
    "BufferAliasError",
    "CountError",
    "RootError",
    "UndefinedOperatorError",
)


def __getattr__(name):
    # These derive from mpi4py's MPI.Exception, so they are built when first asked
    # for (importing mpi4py.MPI initialises MPI): the plan world imports this module
    # without MPI.
    if name in _MPI_CLASSES:
        built = _mpi_error_classes()
        globals().update(built)
        return built[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _mpi_error_classes():
    from mpi4py import MPI

    class _MPIFlavour(MPI.Exception):
        """An ``MPI.Exception`` that carries wacoll's message and reports the MPI
        error class ``mpi_error_class`` (``Get_error_class()``, ``int(exc)``)."""

        #: The MPI error class the MPI library would report.
        mpi_error_class = MPI.ERR_ARG

        def __init__(self, message="", error_class=None):
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

    class MPIError(_MPIFlavour, BufferMismatchError):
        """A call the MPI library would refuse with an ``MPI.Exception``: both a
        :class:`BufferMismatchError` and an ``MPI.Exception`` that reports MPI's
        error class (``mpi_error_class``; ``Get_error_class()``) with wacoll's
        message.

        Parameters
        ----------
        message : str
        error_class : int, optional
            The MPI error class (``MPI.ERR_TYPE`` for a datatype the library
            refused, ...); the class's own ``mpi_error_class`` by default
            (``MPI.ERR_ARG``; each subclass names its own).
        """

    class BufferAliasError(MPIError):
        """A send buffer that is the receive buffer (not ``MPI.IN_PLACE``), which
        MPI forbids: the MPI library raises ``MPI.Exception`` with ``ERR_BUFFER``
        (MPICH; Open MPI checks it in some collectives only)."""

        mpi_error_class = MPI.ERR_BUFFER

    class CountError(MPIError):
        """A negative count: mpi4py raises ValueError for a buffer's count, the MPI
        library ``MPI.Exception`` with ``ERR_COUNT`` for a vector variant's."""

        mpi_error_class = MPI.ERR_COUNT

    class RootError(_MPIFlavour, WacollError):
        """A root that is not a rank of the communicator: the MPI library raises
        ``MPI.Exception`` with ``ERR_ROOT``."""

        mpi_error_class = MPI.ERR_ROOT

    class UndefinedOperatorError(MPIError, OperatorError):
        """An operator MPI does not define for the call (MAX on complex numbers,
        BAND on floats, MAXLOC on a type without (value, index) pairs, a predefined
        operator on a derived datatype, ``MPI.REPLACE`` or ``MPI.NO_OP`` in a
        reduction): the MPI library raises ``MPI.Exception`` with ``ERR_OP``. Also an
        :class:`OperatorError` and a :class:`BufferMismatchError`."""

        mpi_error_class = MPI.ERR_OP

    built = {}
    for cls in (
        MPIError,
        BufferAliasError,
        CountError,
        RootError,
        UndefinedOperatorError,
    ):
        # importable by name, so that pickle (the object collectives send errors
        # as pickled classes) and the agreement (by name) find them
        cls.__module__, cls.__qualname__ = __name__, cls.__name__
        built[cls.__name__] = cls
    _MPIFlavour.__module__ = __name__
    _MPIFlavour.__qualname__ = "_MPIFlavour"
    built["_MPIFlavour"] = _MPIFlavour
    return built


class ScriptError(WacollError, ValueError):
    """A malformed plan script; ``line`` and ``column`` locate the fault (1-based)."""

    def __init__(
        self, message: str, *, line: int | None = None, column: int | None = None
    ) -> None:
        where = f" (line {line}, column {column})" if line is not None else ""
        super().__init__(message + where)
        self.line = line
        self.column = column


class OperatorError(WacollError, ValueError):
    """A reduction operator wacoll cannot apply: an unknown name, an operator its
    kernels do not run, MAXLOC/MINLOC on a type without pairs, or a bad ``side``.

    A collective raises a subclass that is also mpi4py's class for the same
    operator: :class:`OperatorTypeError` (TypeError) for what is not an operator,
    :class:`UndefinedOperatorError` (``MPI.Exception``, ``ERR_OP``) for an operator
    MPI does not define for the datatype.
    """


class OperatorTypeError(OperatorError, TypeError):
    """Not a reduction operator: an unknown name, or an object that is neither a
    name nor an ``MPI.Op`` (nor, for the object collectives, a callable), where
    mpi4py raises TypeError."""


class AccumulatorOverflowError(WacollError, OverflowError):
    """A reproducible-sum accumulator holding more values than its bins sum exactly
    (see :data:`wacoll._kernels.repro.MAX_DEPOSITS`); ``index`` is the first element
    at fault."""

    def __init__(self, message: str, *, index: int | None = None) -> None:
        super().__init__(message)
        self.index = index


class TestbedError(WacollError):
    """A testbed that could not be built, checked, run or torn down."""

    __test__ = False  # not a pytest test class


class TestbedUnavailable(TestbedError):
    """This machine cannot host a testbed (not root, no TUN device, no ``ip``)."""


class RelayStopped(Exception):
    """A signal (SIGTERM, SIGINT, SIGHUP) asked the testbed's relay to stop.

    The relay's signal handler raises it to leave the event loop
    (:func:`wacoll.emulate.relay.main`), which catches it, closes its devices,
    removes what it was told to and prints its statistics.
    """


class SimGridUnavailable(WacollError, ImportError):
    """SimGrid's Python bindings cannot be imported, or a SimGrid simulation failed
    (:mod:`wacoll.plans.sim.simgrid`); the message says how to install them."""


class ProofKeyRefused(Exception):
    """A proof key file that is not used; the message says why.

    :func:`wacoll.plans.proofs.proof_key` uses a key file only if it is a regular
    file of 64 hexadecimal digits, owned by this user and private to them. It
    catches this error, warns once with :class:`ProofCacheWarning` and turns the
    proof cache off.
    """


class ProofLockRefused(OSError):
    """A proof lock file that is not the user's own: a symbolic link, not a regular
    file, a hard link, or owned by another user. It is neither locked nor waited on.

    Raised by :meth:`wacoll.plans.prooflock.Claim.take`;
    :func:`wacoll.plans.prooflock.await_proof` catches it and the process proves the
    plan itself, with a :class:`ProofCacheWarning`. An ``OSError``, as the other
    faults of a directory that cannot hold the lock.
    """


class ProofRecordUntrusted(ValueError):
    """A proof cache record not signed with the user's proof key.

    :func:`wacoll.plans.proofs.lookup` catches it and ignores the record, with a
    :class:`ProofCacheWarning` (the plan is proved again). A ``ValueError``, as the
    other faults of a record that is not a valid proof.
    """


class TestbedWarning(UserWarning):
    """The testbed works, but its self-check measured figures off by more than 10 %."""

    __test__ = False


class LinksWarning(UserWarning):
    """A record of measured links (:mod:`wacoll.mpi.links`) that was too old or could
    not be read, parsed or trusted (the links are measured again), or written."""


class ProofCacheWarning(UserWarning):
    """A file of the proof cache that could not be read, parsed or trusted, or written;
    it is ignored (the plan is proved again)."""


class UnevenPiece(Exception):
    """A piece of a received message whose blocks carry different reduction
    expressions.

    Raised by :meth:`wacoll.plans.prover.values.Reductions.carried`;
    :func:`wacoll.plans.prove.prove_plan` catches it and proves the plan again with
    every block a piece of its own.
    """


class BlockProofIncomplete(Exception):
    """A reduction plan the prover's block-by-block pass did not prove: a fault, or
    a step its compiled pass does not take (``args[0]``: the row where the pass
    stopped, or None).

    Raised by :class:`wacoll.plans.prover.values.BlockReductions` and, for a result
    that fails, by :func:`wacoll.plans.prove.prove_plan`, which catches it and runs
    its exact pass: that pass decides, and names the fault.
    """


def compiled_missing(exc: ImportError, module_file) -> ImportError:
    """The error to raise when a package's compiled modules are not beside its
    ``module_file`` (the kernels', the prover's): most often a source checkout that
    shadows the installed wacoll, else an incomplete installation. ``exc`` is the
    import's own error.

    Examples
    --------
    >>> "reinstall wacoll" in str(compiled_missing(ImportError("x"), "/nowhere/a/b.py"))
    True
    """
    from pathlib import Path

    here = Path(module_file).resolve().parent
    package = next(
        (p for p in (here, *here.parents) if not (p.parent / "__init__.py").is_file()),
        here,
    )
    root = package.parent
    if (root / "meson.build").is_file() and (root / "pyproject.toml").is_file():
        return ImportError(
            f"wacoll's compiled kernels are missing: Python imported wacoll from the "
            f"source checkout {root} (the current directory, or a PYTHONPATH entry, "
            f"comes first on sys.path), which holds the Cython sources but not the "
            f"compiled modules, instead of the installed package. Run from another "
            f"directory (then the installed wacoll is used), or install the checkout "
            f"editable (pip install meson-python meson ninja cython && pip install "
            f"--no-build-isolation -e .)."
        )
    return ImportError(
        f"wacoll's compiled kernels are missing from {here}: the installation is "
        f"incomplete; reinstall wacoll (pip install --force-reinstall wacoll). ({exc})"
    )
