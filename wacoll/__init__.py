"""wacoll: topology-aware collective communication plans for MPI programs.

Build communication plans that fit a non-uniform network, prove them correct
symbolically, predict their cost, export them as scripts, and run them over mpi4py.

The plan world (:mod:`wacoll.topology`, :mod:`wacoll.trees`, :mod:`wacoll.plans`:
Python, and the prover's compiled passes) imports without MPI or the kernels. The
MPI world (:mod:`wacoll.mpi`: :class:`Comm`, the executor, the Cython kernels) is
loaded on first use of ``wacoll.Comm``, ``wacoll.topology_from_comm`` or ``wacoll.calibrate``
(which measures a communicator's links: :mod:`wacoll.mpi.allpairs`).
"""

from typing import TYPE_CHECKING, Any

from wacoll import plans, trees
from wacoll.errors import (
    BufferMismatchError,
    ConfigurationError,
    OperatorError,
    PlanError,
    ScriptError,
    TestbedError,
    TopologyError,
    WacollError,
)
from wacoll.topology import LinkParams, Topology

__version__ = "0.1.0"

__all__ = [
    "Comm",
    "topology_from_comm",
    "calibrate",
    "Topology",
    "LinkParams",
    "WacollError",
    "TopologyError",
    "ConfigurationError",
    "PlanError",
    "BufferMismatchError",
    "ScriptError",
    "OperatorError",
    "TestbedError",
    "trees",
    "plans",
]

_MPI_WORLD = {
    "Comm": "wacoll.mpi.comm",
    "topology_from_comm": "wacoll.mpi.discover",
    "calibrate": "wacoll.mpi.allpairs",
}


if TYPE_CHECKING:  # what the lazy loading below gives, for type checkers
    from wacoll.mpi.allpairs import calibrate
    from wacoll.mpi.comm import Comm
    from wacoll.mpi.discover import topology_from_comm


def __getattr__(name: str) -> Any:
    # The MPI world loads on first use so that plan work needs neither MPI nor kernels.
    module = _MPI_WORLD.get(name)
    if module is None:
        raise AttributeError(f"module 'wacoll' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_MPI_WORLD))
