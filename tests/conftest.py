"""Collection rules for the whole suite.

``tests/mpi`` holds tests that need several MPI processes. They run under
``mpiexec ... pytest --only-mpi`` (``tests/test_mpi_suite.py`` does that at five sizes),
so a plain run does not collect them at all rather than reporting them as skipped.

The proof cache (:mod:`wacoll.plans.proofs`) of every run of the suite is a temporary
directory of its own, unless ``WACOLL_PROOF_CACHE`` names one, and its records are
signed with a key of the run's own (``WACOLL_PROOF_KEY``): tests neither read nor
fill the user's cache, nor make or use the user's key.
"""

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

MPI_TESTS = Path(__file__).parent / "mpi"


def pytest_configure(config):
    if not os.environ.get("WACOLL_PROOF_CACHE"):
        where = tempfile.mkdtemp(prefix="wacoll-proofs-")
        atexit.register(shutil.rmtree, where, True)
        os.environ["WACOLL_PROOF_CACHE"] = where
    # the tests say which route a call takes: repeated calls do not explore
    # candidates unless a test asks (tests/mpi/test_learning.py)
    os.environ.setdefault("WACOLL_LEARN", "off")
    # nor measure the links of discovered clusters (tests/mpi/test_measured_links.py
    # turns it on): plans would depend on noise, and every constructor would be slower
    os.environ.setdefault("WACOLL_MEASURE", "off")
    if not os.environ.get("WACOLL_PROOF_KEY"):  # nor use the user's key
        where = tempfile.mkdtemp(prefix="wacoll-proof-key-")
        atexit.register(shutil.rmtree, where, True)
        os.environ["WACOLL_PROOF_KEY"] = os.path.join(where, "proof-key")


MPI_DOCTESTS = Path(__file__).parent.parent / "wacoll" / "mpi"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """The MPI world's doctests (``wacoll/mpi/``), which pytest-mpi would skip as
    "need --with-mpi option to run", say what they need and where they run."""
    _skip_simgrid_doctests(items)
    if config.getoption("--only-mpi", default=False) or config.getoption(
        "--with-mpi", default=False
    ):
        return
    reason = (
        "an MPI-world doctest (wacoll/mpi/): needs processes started by mpiexec; "
        "tests/test_mpi_suite.py runs it under mpiexec at 1, 2, 3, 5 and 8 ranks"
    )
    for item in items:
        path = Path(str(item.path))
        if MPI_DOCTESTS in path.parents and "mpi" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=reason))


SIMGRID_MODULE = Path(__file__).parent.parent / "wacoll" / "plans" / "sim" / "simgrid.py"


def _skip_simgrid_doctests(items):
    """The doctests of wacoll/plans/sim/simgrid.py that run SimGrid skip, saying why,
    where its Python bindings are not installed (tools/install_simgrid.sh)."""
    needs = [
        item
        for item in items
        if Path(str(item.path)) == SIMGRID_MODULE
        and any(
            call in ex.source
            for ex in getattr(item, "dtest", None).examples
            for call in ("simulate_simgrid(", "routes(")
        )
    ]
    if needs:
        from wacoll.plans.sim.simgrid import simgrid_unavailable

        reason = simgrid_unavailable()
        for item in needs if reason else ():
            item.add_marker(pytest.mark.skip(reason=f"needs SimGrid: {reason}"))


def pytest_ignore_collect(collection_path, config):
    if not config.getoption("--only-mpi", default=False):
        path = Path(collection_path)
        if path == MPI_TESTS or MPI_TESTS in path.parents:
            return True
    return None
