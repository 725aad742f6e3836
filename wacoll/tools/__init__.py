"""Tools built on wacoll, for people rather than for programs' collectives.

- :mod:`wacoll.tools.demo`: the demo of the README (``wacoll demo``): wacoll against
  the MPI library on an emulated wide-area testbed.
- :mod:`wacoll.tools.measure`: timing collectives on the testbed, side by side.
- :mod:`wacoll.tools.launch`: finding ``mpiexec`` and starting ranks.
- :mod:`wacoll.tools.progress`: progress lines of long commands.
- :mod:`wacoll.tools.pytest_plugin`: the pytest plugin (MPI tests under ``mpiexec``).
- :mod:`wacoll.tools.viz`: drawing plans, trees and timelines.

The layers below them: the plan world (:mod:`wacoll.topology`, :mod:`wacoll.costs`,
:mod:`wacoll.calibration`, :mod:`wacoll.trees`, :mod:`wacoll.plans`), the kernels
(:mod:`wacoll._kernels`), the MPI world (:mod:`wacoll.mpi`) and the emulated testbed
(:mod:`wacoll.emulate`); nothing there imports a tool.
"""
