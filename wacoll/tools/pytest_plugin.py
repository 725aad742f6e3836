"""pytest plugin: test an mpi4py application's collectives on chosen cluster layouts.

Installed with wacoll (through the ``pytest11`` entry point) and inert until a test
asks for its fixture: it imports neither mpi4py nor wacoll's MPI layer before then.

Options::

    --wacoll-clusters 0,0,1,1     a cluster label per rank (or host=label pairs)
    --wacoll-family magpie        the plan family (default: wacoll's choice)
    --wacoll-level strict         the reduction level (default: wacoll's, MPI's own)

Fixtures:

``wacoll_comm``
    A ``wacoll.Comm(MPI.COMM_WORLD, topology, family=..., level=...)`` for the
    layout the options give, freed after the test. Without ``--wacoll-clusters``
    the topology is discovered as ``wacoll.Comm`` does (``WACOLL_CLUSTERS``,
    ``WACOLL_TOPOLOGY``, else one cluster per shared-memory node).
``wacoll_topology``
    That topology (a :class:`wacoll.Topology`; collective when discovered).

A test can override the options with a marker:
``@pytest.mark.wacoll(clusters="0,1,1", family="tree", tree="lam")``; keywords
other than ``clusters``, ``family`` and ``level`` go to ``wacoll.Comm`` as family
options. A marker's labels for another number of ranks skip the test (it is written
for that size); the option's fail it.

Run the tests under ``mpiexec``, every rank running pytest::

    mpiexec -n 4 python -m pytest --wacoll-clusters 0,0,1,1 --wacoll-family magpie tests/

Plans are proved before they run: a call whose plan the prover rejects (say a
family that cannot keep the requested reduction level on this layout) raises
:class:`wacoll.PlanError` on every rank, and the test fails with the prover's
message. Ranks raise together, so a rejected plan never leaves ranks waiting.
"""

from __future__ import annotations

import pytest

__all__ = ["pytest_addoption", "pytest_configure", "wacoll_topology", "wacoll_comm"]

_LEVELS = ("strict", "associative", "commutative")
_MARKER = (
    "wacoll(clusters=None, family=None, level=None, **options): the layout, plan "
    "family, reduction level and family options of the wacoll_comm fixture"
)


def pytest_addoption(parser):
    group = parser.getgroup("wacoll", "wacoll: collectives on chosen cluster layouts")
    group.addoption(
        "--wacoll-clusters",
        metavar="LABELS",
        default=None,
        help="cluster label per rank for the wacoll_comm fixture, e.g. "
        "0,0,1,1 (or host=label pairs); default: discovered",
    )
    group.addoption(
        "--wacoll-family",
        metavar="FAMILY",
        default=None,
        help="plan family of wacoll_comm (magpie, mpich, tree, gridmpi, "
        "combining, scripts); default: wacoll's choice per call",
    )
    group.addoption(
        "--wacoll-level",
        metavar="LEVEL",
        default=None,
        choices=_LEVELS,
        help="reduction level of wacoll_comm (strict, associative, "
        "commutative); default: wacoll's (MPI's own promise)",
    )


def pytest_configure(config):
    config.addinivalue_line("markers", _MARKER)
    # an editable install of wacoll imports its loader before pytest can rewrite it;
    # harmless, but users' own test runs would show the warning on every rank
    config.addinivalue_line(
        "filterwarnings",
        "ignore:Module already imported so cannot be rewritten. _wacoll_editable_loader",
    )


def _settings(request) -> dict:
    """Clusters, family, level and options: the options, overridden by a marker."""
    config = request.config
    settings = {
        "clusters": config.getoption("--wacoll-clusters"),
        "family": config.getoption("--wacoll-family"),
        "level": config.getoption("--wacoll-level"),
    }
    marker = request.node.get_closest_marker("wacoll")
    options = {}
    settings["source"] = "--wacoll-clusters"
    if marker is not None:
        if marker.args:
            raise pytest.UsageError(
                "@pytest.mark.wacoll takes keywords only, e.g. "
                "@pytest.mark.wacoll(clusters='0,0,1,1')"
            )
        for key, value in marker.kwargs.items():
            if key == "clusters":
                settings["clusters"], settings["source"] = value, "the wacoll marker"
            elif key in settings:
                settings[key] = value
            else:
                options[key] = value
    if settings["level"] is not None and settings["level"] not in _LEVELS:
        raise pytest.UsageError(
            f"wacoll level must be one of {', '.join(_LEVELS)}; got {settings['level']!r}"
        )
    settings["options"] = options
    return settings


def _topology(clusters, source):
    """The topology of ``MPI.COMM_WORLD`` for a cluster spec (None: discovered).

    A list of labels for another number of ranks skips the test when a marker gave
    it (the test is written for that size) and fails it when the option did.
    """
    from mpi4py import MPI

    from wacoll.errors import TopologyError
    from wacoll.mpi.discover import topology_from_comm

    world = MPI.COMM_WORLD
    if clusters is None:
        return topology_from_comm(world)
    if isinstance(clusters, (list, tuple)):
        clusters = ",".join(str(c) for c in clusters)
    clusters = str(clusters)
    labels = [x for x in clusters.split(",") if x.strip()]
    if not any("=" in x for x in labels) and len(labels) != world.Get_size():
        why = (
            f"{source} gives {len(labels)} cluster labels ({clusters}); this run has "
            f"{world.Get_size()} ranks"
        )
        if source == "the wacoll marker":
            pytest.skip(why)
        pytest.fail(why, pytrace=False)
    try:
        return topology_from_comm(world, env={"WACOLL_CLUSTERS": clusters})
    except TopologyError as exc:
        raise TopologyError(str(exc).replace("WACOLL_CLUSTERS", source)) from None


@pytest.fixture
def wacoll_topology(request):
    """The :class:`wacoll.Topology` that ``--wacoll-clusters`` (or a ``wacoll``
    marker) gives for ``MPI.COMM_WORLD``; discovered without one."""
    settings = _settings(request)
    return _topology(settings["clusters"], settings["source"])


@pytest.fixture
def wacoll_comm(request, wacoll_topology):
    """``wacoll.Comm(MPI.COMM_WORLD, topology, family=..., level=...)`` for the chosen
    layout; freed after the test."""
    from mpi4py import MPI

    import wacoll

    settings = _settings(request)
    kwargs = dict(settings["options"])
    if settings["family"] is not None:
        kwargs["family"] = settings["family"]
    if settings["level"] is not None:
        kwargs["level"] = settings["level"]
    comm = wacoll.Comm(MPI.COMM_WORLD, wacoll_topology, **kwargs)
    try:
        yield comm
    finally:
        comm.Free()
