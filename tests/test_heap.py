"""The objects alive when ``wacoll.mpi`` is first imported are frozen
(:mod:`wacoll.mpi.heap`), unless ``WACOLL_GC_FREEZE`` is off."""

import os
import subprocess
import sys

import pytest

_PROBE = """
import gc
before = gc.get_freeze_count()
import numpy
import wacoll.mpi
from wacoll.mpi.heap import freeze_imports
print(before, gc.get_freeze_count(), freeze_imports())
"""


def _frozen(value):
    env = {k: v for k, v in os.environ.items() if k != "WACOLL_GC_FREEZE"}
    if value is not None:
        env["WACOLL_GC_FREEZE"] = value
    out = subprocess.run(
        [sys.executable, "-c", _PROBE],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout.split()
    return int(out[0]), int(out[1]), out[2] == "True"


def test_importing_the_mpi_world_freezes_what_is_alive_once():
    before, after, again = _frozen(None)
    assert before == 0
    assert after > 10000  # (numpy's, mpi4py's, networkx's and wacoll's objects)
    assert not again  # (once per process)


@pytest.mark.parametrize("value", ["off", "0", "no", "FALSE"])
def test_the_freeze_can_be_turned_off(value):
    before, after, _ = _frozen(value)
    assert before == after == 0


def test_an_unknown_setting_is_refused_by_name():
    env = dict(os.environ, WACOLL_GC_FREEZE="sometimes")
    proc = subprocess.run(
        [sys.executable, "-c", "import wacoll.mpi"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode != 0
    assert "WACOLL_GC_FREEZE must be on, off or auto" in proc.stderr
    assert "'sometimes'" in proc.stderr
