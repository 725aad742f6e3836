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

MPI_TESTS = Path(__file__).parent / "mpi"


def pytest_configure(config):
    if not os.environ.get("WACOLL_PROOF_CACHE"):
        where = tempfile.mkdtemp(prefix="wacoll-proofs-")
        atexit.register(shutil.rmtree, where, True)
        os.environ["WACOLL_PROOF_CACHE"] = where
    if not os.environ.get("WACOLL_PROOF_KEY"):  # nor use the user's key
        where = tempfile.mkdtemp(prefix="wacoll-proof-key-")
        atexit.register(shutil.rmtree, where, True)
        os.environ["WACOLL_PROOF_KEY"] = os.path.join(where, "proof-key")


def pytest_ignore_collect(collection_path, config):
    if not config.getoption("--only-mpi", default=False):
        path = Path(collection_path)
        if path == MPI_TESTS or MPI_TESTS in path.parents:
            return True
    return None
