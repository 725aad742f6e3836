"""The MPI world: the only part of wacoll that imports mpi4py and the kernels.

- :mod:`~wacoll.mpi.comm`: :class:`Comm`, the communicator facade;
- :mod:`~wacoll.mpi.buffers`: mpi4py buffer specifications read into arrays;
- :mod:`~wacoll.mpi.agreement`: every rank raises the same error, or none does;
- :mod:`~wacoll.mpi.executor`: runs a lowered program (:mod:`wacoll.plans.lower`)
  over non-blocking point-to-point calls;
- :mod:`~wacoll.mpi.trace`: per-rank trace records and Chrome trace files;
- :mod:`~wacoll.mpi.discover`: a communicator's topology from the environment.
"""

from wacoll.mpi.comm import Comm
from wacoll.mpi.discover import topology_from_comm
from wacoll.mpi.heap import freeze_imports

freeze_imports()  # (full collections no longer visit what the imports made)

__all__ = ["Comm", "topology_from_comm"]
