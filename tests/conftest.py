"""Collection rules for the whole suite.

``tests/mpi`` holds tests that need several MPI processes. They run under
``mpiexec ... pytest --only-mpi`` (``tests/test_mpi_suite.py`` does that at five sizes),
so a plain run does not collect them at all rather than reporting them as skipped.
"""

from pathlib import Path

MPI_TESTS = Path(__file__).parent / "mpi"


def pytest_ignore_collect(collection_path, config):
    if not config.getoption("--only-mpi", default=False):
        path = Path(collection_path)
        if path == MPI_TESTS or MPI_TESTS in path.parents:
            return True
    return None
