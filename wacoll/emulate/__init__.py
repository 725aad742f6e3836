"""An emulated wide-area testbed on one Linux machine.

Each cluster of a :class:`wacoll.Topology` gets its own network namespace; the
namespaces are joined by emulated links with the topology's one-way latency and
bandwidth (per directed cluster pair, or one shared uplink per cluster), and MPI
programs run with each cluster's ranks in its namespace (see :class:`Testbed`).
Inside a cluster, ranks keep MPI's shared-memory path. The testbed starts ranks with
MPICH's process manager (``pip install 'wacoll[mpich]'``); with Open MPI's
``mpiexec`` it says so and does not start.

Modules: :mod:`~wacoll.emulate.testbed` (the API), :mod:`~wacoll.emulate.layout`
(endpoints, queues, paths), :mod:`~wacoll.emulate.netns` (namespaces and devices),
:mod:`~wacoll.emulate.relay` (the userspace link emulator),
:mod:`~wacoll.emulate.netem` (the kernel's netem, where it exists),
:mod:`~wacoll.emulate.probe` (the self-check), :mod:`~wacoll.emulate.launcher`
(``mpiexec`` across namespaces) and :mod:`~wacoll.emulate.units` (``10ms``, ``1MB/s``).

Examples
--------
>>> from wacoll.emulate import Testbed, unavailable_reason
>>> reason = unavailable_reason()  # None where a testbed can run (root, /dev/net/tun, MPICH)
"""

from wacoll.emulate.launcher import RunResult
from wacoll.emulate.probe import PairResult, ProbeReport
from wacoll.emulate.testbed import (
    Testbed,
    clean,
    list_testbeds,
    teardown,
    unavailable_reason,
)
from wacoll.errors import TestbedError, TestbedUnavailable, TestbedWarning

__all__ = [
    "Testbed",
    "TestbedError",
    "TestbedUnavailable",
    "TestbedWarning",
    "ProbeReport",
    "PairResult",
    "RunResult",
    "unavailable_reason",
    "teardown",
    "clean",
    "list_testbeds",
]
