"""Settings that differ between ranks raise the same named error on every rank, before
any collective depends on them (a launcher that passes the environment to some ranks
only once made the constructor wait forever)."""

import numpy as np
import pytest
from mpi4py import MPI

import wacoll
from wacoll.errors import ConfigurationError
from wacoll.settings import SHARED

from .conftest import RANK, SIZE, WORLD

pytestmark = [
    pytest.mark.mpi(min_size=2),
    pytest.mark.skipif(SIZE < 2, reason="needs two ranks to differ"),
]

ODD = SIZE - 1  # the rank whose environment differs: the last one


def _clusters():
    return ",".join("0" if r < SIZE // 2 else "1" for r in range(SIZE))


CASES = {
    "clusters unset on one rank": ("WACOLL_CLUSTERS", _clusters(), None),
    "clusters empty on one rank": ("WACOLL_CLUSTERS", _clusters(), ""),
    "clusters different on one rank": (
        "WACOLL_CLUSTERS",
        _clusters(),
        ",".join(["0"] * SIZE),
    ),
    "topology set on one rank only": ("WACOLL_TOPOLOGY", None, "/nonexistent/t.toml"),
    "family set on one rank only": ("WACOLL_FAMILY", None, "binomial"),
    "check different on one rank": ("WACOLL_CHECK", "beside", "off"),
    "scripts set on one rank only": ("WACOLL_SCRIPTS", None, "/nonexistent/scripts"),
}


def _set(monkeypatch, name, value):
    if value is None:
        monkeypatch.delenv(name, raising=False)
    else:
        monkeypatch.setenv(name, value)


@pytest.mark.parametrize("case", list(CASES))
def test_settings_that_differ_raise_everywhere(mpi, monkeypatch, case):
    name, everyone, odd = CASES[case]
    for other in SHARED:
        monkeypatch.delenv(other, raising=False)
    _set(monkeypatch, name, odd if RANK == ODD else everyone)
    mpi.same_error(lambda: wacoll.Comm(WORLD), ConfigurationError, match=name)
    # nothing is left half done: the world's next collective is not disturbed
    total = WORLD.allreduce(1)
    mpi.assert_all(total == SIZE, f"allreduce after the error gave {total}")


def test_settings_that_agree_are_used(mpi, monkeypatch):
    for other in SHARED:
        monkeypatch.delenv(other, raising=False)
    monkeypatch.setenv("WACOLL_CLUSTERS", _clusters())
    comm = wacoll.Comm(WORLD)
    try:
        got = np.zeros(3)
        comm.Allreduce(np.full(3, RANK + 1.0), got)
        mpi.assert_all(
            comm.network.nclusters == 2 and comm.last_family != "native",
            f"{comm.network.nclusters} clusters, family {comm.last_family}",
        )
        mpi.assert_all(np.array_equal(got, np.full(3, SIZE * (SIZE + 1) / 2)), str(got))
    finally:
        comm.Free()


def test_the_error_is_a_value_error_named_by_wacoll():
    assert issubclass(ConfigurationError, wacoll.WacollError)
    assert issubclass(ConfigurationError, ValueError)
    assert wacoll.ConfigurationError is ConfigurationError
    assert MPI.Is_initialized()
