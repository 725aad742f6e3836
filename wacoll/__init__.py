"""wacoll: topology-aware collective communication plans for MPI programs.

Build communication plans that fit a non-uniform network, prove them correct
symbolically, predict their cost, export them as scripts, and run them over mpi4py.
"""

from wacoll.errors import (
    BufferMismatchError,
    PlanError,
    ScriptError,
    TopologyError,
    WacollError,
)
from wacoll.topology import LinkParams, Topology
from wacoll import trees, plans
from wacoll.comm import Comm

__version__ = "0.1.0"

__all__ = [
    "Comm",
    "Topology",
    "LinkParams",
    "WacollError",
    "TopologyError",
    "PlanError",
    "BufferMismatchError",
    "ScriptError",
    "trees",
    "plans",
]
